"""What `Agent.stream()` yields while a run goes on.

Each event carries `path`, the agent that produced it: `("main",)` for the top agent,
`("main", "task:researcher#2")` for a subagent, so nested work streams through its parent.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal, TypeAlias

from tether.messages import ToolCall, ToolResult, Usage

if TYPE_CHECKING:
    from tether.approval import ApprovalRequest
    from tether.result import RunResult
    from tether.state import Todo

__all__ = [
    "AgentPath",
    "ApprovalRequested",
    "Compacted",
    "Event",
    "ModelDelta",
    "RunFinished",
    "RunStarted",
    "StepFinished",
    "TodosUpdated",
    "ToolCallFinished",
    "ToolCallStarted",
    "ToolProgress",
]

AgentPath: TypeAlias = tuple[str, ...]


@dataclass(frozen=True, slots=True)
class RunStarted:
    """A run began."""

    path: AgentPath
    run_id: str
    kind: Literal["run_started"] = "run_started"


@dataclass(frozen=True, slots=True)
class ModelDelta:
    """A piece of the model's reply as it streams in.

    `part` says what grows: the answer text, the thinking, or the JSON arguments of the
    tool call `call_id` (to the tool `tool`, when the provider names it as it streams).
    """

    path: AgentPath
    part: Literal["text", "thinking", "tool_call"]
    delta: str
    call_id: str | None = None
    tool: str | None = None
    kind: Literal["model_delta"] = "model_delta"


@dataclass(frozen=True, slots=True)
class StepFinished:
    """A model call came back and was charged.

    `steps`, `usage` and `cost_usd` are the totals so far of the whole run tree (the top
    run and its subagents): what a progress display shows. `cost_usd` is None when a
    model's price is unknown.
    """

    path: AgentPath
    steps: int
    usage: Usage
    cost_usd: float | None
    kind: Literal["step_finished"] = "step_finished"


@dataclass(frozen=True, slots=True)
class ToolCallStarted:
    """A tool call is about to run."""

    path: AgentPath
    call: ToolCall
    kind: Literal["tool_call_started"] = "tool_call_started"


@dataclass(frozen=True, slots=True)
class ToolCallFinished:
    """A tool call finished; `result.is_error` tells whether it failed. `decided` is
    "rejected" or "answered" when a person's decision stood in for running it."""

    path: AgentPath
    call: ToolCall
    result: ToolResult
    decided: Literal["rejected", "answered"] | None = None
    kind: Literal["tool_call_finished"] = "tool_call_finished"


@dataclass(frozen=True, slots=True)
class ToolProgress:
    """A tool call still running says how far it got (an MCP server's progress
    notifications). `call_id` is the running call's `ToolCall.id`; `progress` is a count
    that grows, out of `total` when the tool knows it; `message` says what it is doing.

    A tool that reports very often is heard at most ten times a second, its latest word
    always included."""

    path: AgentPath
    call_id: str
    progress: float
    total: float | None = None
    message: str | None = None
    kind: Literal["tool_progress"] = "tool_progress"


@dataclass(frozen=True, slots=True)
class TodosUpdated:
    """The agent changed its task list; `todos` is the whole new list."""

    path: AgentPath
    todos: tuple[Todo, ...]
    kind: Literal["todos_updated"] = "todos_updated"


@dataclass(frozen=True, slots=True)
class Compacted:
    """The history was made smaller to fit the model's window.

    `how` is "offload" (old file contents replaced by pointers), "summary" (old messages
    replaced by a summary) or "truncate" (old messages or long texts dropped);
    `history_path` is the file holding the replaced messages in full, if one was written.
    """

    path: AgentPath
    how: Literal["offload", "summary", "truncate"]
    tokens_before: int
    tokens_after: int
    history_path: str | None = None
    kind: Literal["compacted"] = "compacted"


@dataclass(frozen=True, slots=True)
class ApprovalRequested:
    """The run stopped for a person to decide on these calls (see `Agent.resume`)."""

    path: AgentPath
    requests: tuple[ApprovalRequest, ...]
    kind: Literal["approval_requested"] = "approval_requested"


@dataclass(frozen=True, slots=True)
class RunFinished:
    """The run ended; `result` has the output, messages, usage and stop reason."""

    path: AgentPath
    result: RunResult[Any]
    kind: Literal["run_finished"] = "run_finished"


Event: TypeAlias = (
    RunStarted
    | ModelDelta
    | StepFinished
    | ToolCallStarted
    | ToolCallFinished
    | ToolProgress
    | TodosUpdated
    | Compacted
    | ApprovalRequested
    | RunFinished
)
