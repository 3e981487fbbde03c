"""How a run ended: `RunResult` and its `StopReason`.

Plain data at the bottom of the package, so that events, errors and the loop can name a
run's result without reaching up to the agent that produces it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Generic, Literal, Protocol, TypeAlias, TypeVar

from tether.approval import ApprovalRequest
from tether.messages import Message, Usage
from tether.state import Todo

__all__ = ["RecordedRun", "RunResult", "StopReason"]

OutputT = TypeVar("OutputT")

StopReason: TypeAlias = Literal[
    "completed",
    "budget",
    "loop",
    "timeout",
    "interrupted",
    "cancelled",
    "content_filter",
    "error",
]


class RecordedRun(Protocol):
    """A run as its thread recorded it (`tether.checkpoint.journal.Thread` is one)."""

    @property
    def thread_id(self) -> str: ...
    @property
    def messages(self) -> Sequence[Message]: ...
    @property
    def files(self) -> Mapping[str, tuple[bytes, float]]: ...
    @property
    def todos(self) -> tuple[Todo, ...]: ...
    @property
    def run_id(self) -> str | None: ...
    @property
    def run_start(self) -> int: ...
    @property
    def usage(self) -> Usage: ...
    @property
    def cost_usd(self) -> float | None: ...
    @property
    def steps(self) -> int: ...


@dataclass(frozen=True, slots=True)
class RunResult(Generic[OutputT]):
    """How a run ended and everything it did.

    `output` is the final answer when `stop_reason == "completed"`, else None.
    `messages` is the whole conversation (history included); pass it as
    `message_history` to continue it. `usage` and `cost_usd` include what subagents
    spent, `usage_by_agent` breaks usage down by agent path, and `steps` counts this
    agent's own model calls.
    """

    output: OutputT | None
    stop_reason: StopReason
    messages: tuple[Message, ...]
    usage: Usage
    cost_usd: float | None
    steps: int
    run_id: str
    new_messages_start: int = 0
    files: Mapping[str, bytes] = field(default_factory=dict)
    """The files of the run's StateBackend, by path (empty for other backends)."""
    todos: tuple[Todo, ...] = ()
    """The task list as the agent last wrote it with `write_todos`."""
    usage_by_agent: Mapping[str, Usage] = field(default_factory=dict)
    """Usage by agent path: "main", and "main/task:<name>#<n>" for each subagent run."""
    thread_id: str | None = None
    """The thread the run was recorded in, if any."""
    interrupts: tuple[ApprovalRequest, ...] = ()
    """With `stop_reason == "interrupted"`: the calls waiting for a decision."""

    def new_messages(self) -> tuple[Message, ...]:
        """The messages this run added (its prompt included), without the history."""
        return self.messages[self.new_messages_start :]

    @classmethod
    def of_thread(
        cls,
        thread: RecordedRun,
        stop_reason: StopReason,
        *,
        output: OutputT | None = None,
        interrupts: tuple[ApprovalRequest, ...] = (),
        thread_id: str | None = None,
    ) -> RunResult[OutputT]:
        """The result a recorded `thread` stands at."""
        return cls(
            output=output,
            stop_reason=stop_reason,
            messages=tuple(thread.messages),
            usage=thread.usage,
            cost_usd=thread.cost_usd,
            steps=thread.steps,
            run_id=thread.run_id or "",
            new_messages_start=thread.run_start,
            files={path: data for path, (data, _) in thread.files.items()},
            todos=thread.todos,
            thread_id=thread_id or thread.thread_id,
            interrupts=interrupts,
        )
