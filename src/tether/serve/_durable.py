"""Durable agents behind the server: their runs happen on DBOS workers, so their events
are read from the thread's journal, which the worker writes as it goes.

The journal holds whole messages, not the pieces a model streams: a served durable run
shows each reply and tool result as it is recorded, a step at a time.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from tether.agent import RunResult
from tether.errors import RunError
from tether.events import (
    Event,
    ModelDelta,
    RunFinished,
    RunStarted,
    StepFinished,
    TodosUpdated,
    ToolCallFinished,
    ToolCallStarted,
)
from tether.messages import AssistantMessage, Message, ToolCall, ToolResultMessage

if TYPE_CHECKING:
    from tether.checkpoint.journal import Thread
    from tether.durable.dbos import DurableAgent, RunHandle

__all__ = ["Cursor", "followed"]

_SETTLED = ("waiting", "finished", "failed", "cancelled")


@dataclass
class Cursor:
    """How much of a thread (and of its subagents' runs) has been told, by agent path."""

    messages: dict[tuple[str, ...], int] = field(default_factory=dict)
    todos: dict[tuple[str, ...], Any] = field(default_factory=dict)
    ended: dict[tuple[str, ...], str] = field(default_factory=dict)
    steps: int = 0
    calls: dict[str, ToolCall] = field(default_factory=dict)

    @classmethod
    def at(cls, thread: Thread) -> Cursor:
        """Everything `thread` holds now counts as told."""
        cursor = cls(steps=thread.steps)
        cursor.news(thread, ("main",))
        return cursor

    def news(self, thread: Thread, path: tuple[str, ...]) -> list[Event]:
        """The events for what `thread` (at `path`) recorded since the last look."""
        out: list[Event] = []
        start = self.messages.get(path)
        if start is None:
            start = 0
            if len(path) > 1:
                out.append(RunStarted(path, thread.run_id or ""))
        for message in thread.messages[start:]:
            out += self._told(message, path, thread)
        self.messages[path] = len(thread.messages)
        if thread.todos != self.todos.get(path, ()):
            self.todos[path] = thread.todos
            out.append(TodosUpdated(path, thread.todos))
        for sub in thread.subagents.values():
            out += self.news(sub, sub.path or (*path, "task"))
        stop = thread.stop_reason
        if len(path) > 1 and stop is not None and self.ended.get(path) != stop:
            self.ended[path] = stop  # a subagent that waited ends again once it goes on
            out.append(RunFinished(path, _result(thread)))
        return out

    def _told(self, message: Message, path: tuple[str, ...], thread: Thread) -> list[Event]:
        """The events one recorded message stands for (none for a user's); a `task`
        call's subagent is told before the call's result."""
        out: list[Event] = []
        if isinstance(message, AssistantMessage):
            if message.text:
                out.append(ModelDelta(path, "text", message.text))
            for call in message.tool_calls:
                self.calls[call.id] = call
                out.append(ToolCallStarted(path, call))
        elif isinstance(message, ToolResultMessage):
            for result in message.results:
                sub = thread.subagents.get(result.call_id)
                if sub is not None:
                    out += self.news(sub, sub.path or (*path, "task"))
                call = self.calls.get(result.call_id) or ToolCall(result.name, {}, result.call_id)
                out.append(ToolCallFinished(path, call, result))
        return out


def _result(thread: Thread) -> RunResult[Any]:
    """A subagent's run as recorded, as the end of its events needs it."""
    return RunResult(
        output=thread.output,
        stop_reason=thread.stop_reason,  # type: ignore[arg-type]
        messages=(),
        usage=thread.usage,
        cost_usd=thread.cost_usd,
        steps=thread.steps,
        run_id=thread.run_id or "",
        interrupts=thread.requests if thread.stop_reason == "interrupted" else (),
    )


async def followed(
    durable: DurableAgent[Any],
    handle: RunHandle,
    cursor: Cursor,
    *,
    poll_seconds: float = 0.2,
) -> AsyncIterator[Event]:
    """The events of the durable run `handle`, from what `cursor` has not told yet until
    the run finishes or waits for decisions. A run whose workflow failed raises RunError."""
    yield RunStarted(("main",), handle.workflow_id)
    while True:
        status = await handle.astatus()
        thread = await durable._client.thread(handle.thread_id)
        for event in cursor.news(thread, ("main",)):
            yield event
        if thread.steps != cursor.steps:
            cursor.steps = thread.steps
            yield StepFinished(("main",), thread.steps, thread.usage, thread.cost_usd)
        if status.state in _SETTLED:
            if status.state == "failed" or status.stop_reason == "error":
                raise RunError(f"the durable run {handle.workflow_id!r} failed: {status.error}")
            yield RunFinished(("main",), await durable._result(status))
            return
        await asyncio.sleep(poll_seconds)
