from __future__ import annotations

from tether.capabilities.dangling import CANCELLED, repair_dangling_calls
from tether.messages import AssistantMessage, ToolCall, ToolResult, ToolResultMessage, UserMessage


def test_an_unanswered_last_turn_gets_cancelled_results() -> None:
    call = ToolCall("ls", id="c1")
    repaired = repair_dangling_calls([UserMessage.of("go"), AssistantMessage((call,))])
    assert repaired[-1] == ToolResultMessage((ToolResult.of(call, CANCELLED, is_error=True),))


def test_a_partly_answered_turn_is_completed_in_call_order() -> None:
    first, second = ToolCall("a", id="c1"), ToolCall("b", id="c2")
    answered = ToolResult.of(second, "ok")
    messages = [
        AssistantMessage((first, second)),
        ToolResultMessage((answered,)),
        UserMessage.of("next"),
    ]
    repaired = repair_dangling_calls(messages)
    assert repaired[1] == ToolResultMessage(
        (ToolResult.of(first, CANCELLED, is_error=True), answered)
    )
    assert repaired[2] == UserMessage.of("next")
    assert len(repaired) == 3


def test_a_valid_history_is_unchanged() -> None:
    call = ToolCall("a", id="c1")
    messages = [
        UserMessage.of("go"),
        AssistantMessage((call,)),
        ToolResultMessage((ToolResult.of(call, "ok"),)),
        AssistantMessage(()),
    ]
    assert repair_dangling_calls(messages) == messages


def test_a_user_message_between_a_call_and_its_result_is_kept_after_the_repair() -> None:
    call = ToolCall("a", id="c1")
    messages = [AssistantMessage((call,)), UserMessage.of("wait")]
    repaired = repair_dangling_calls(messages)
    assert isinstance(repaired[1], ToolResultMessage)
    assert repaired[2] == UserMessage.of("wait")
