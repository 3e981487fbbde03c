"""Repair tool calls left without a result, so the history sent to a model is valid."""

from __future__ import annotations

from tether.capabilities.base import Capability
from tether.messages import AssistantMessage, Message, ToolResult, ToolResultMessage
from tether.state import RunState

__all__ = ["DanglingToolCallRepair", "repair_dangling_calls"]

CANCELLED = "Cancelled: this call was interrupted before it returned a result."


class DanglingToolCallRepair(Capability):
    """Gives every unanswered tool call in the history a synthetic "cancelled" result.

    A run answers every call it makes, so only a history from outside (a previous run
    that was interrupted, or one built by hand) can hold dangling calls: the repair runs
    once, when a run starts.
    """

    async def on_run_start(self, state: RunState) -> None:
        state.messages[:] = repair_dangling_calls(state.messages)


def repair_dangling_calls(messages: list[Message]) -> list[Message]:
    """A copy of `messages` where each assistant turn's calls are answered, in call order."""
    repaired: list[Message] = []
    index = 0
    while index < len(messages):
        message = messages[index]
        repaired.append(message)
        index += 1
        if not isinstance(message, AssistantMessage) or not message.tool_calls:
            continue
        known: dict[str, list[ToolResult]] = {}  # a list: ids from outside may repeat
        if index < len(messages) and isinstance(messages[index], ToolResultMessage):
            following = messages[index]
            assert isinstance(following, ToolResultMessage)
            for result in following.results:
                known.setdefault(result.call_id, []).append(result)
            index += 1
        repaired.append(
            ToolResultMessage(
                tuple(
                    known[call.id].pop(0)
                    if known.get(call.id)
                    else ToolResult.of(call, CANCELLED, is_error=True)
                    for call in message.tool_calls
                )
            )
        )
    return repaired
