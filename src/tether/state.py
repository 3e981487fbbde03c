"""The mutable state of one run, shared by the loop, capabilities and tools."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal, TypeAlias

from tether.events import AgentPath, Event
from tether.messages import Message, ToolCall, Usage

if TYPE_CHECKING:
    from tether.limits import Budget

__all__ = [
    "FILES_SEEN",
    "JOURNAL",
    "RUN_AGENT",
    "SAMPLE",
    "SUBAGENT_RUNS",
    "RunState",
    "Todo",
    "TodoStatus",
    "ToolContext",
]

FILES_SEEN = "files_seen"
"""In RunState.data: a digest of each file as the agent last read or wrote it, by path,
so that an edit made from an older reading is refused. The thread keeps it."""
SAMPLE = "sample"
"""In RunState.data: `async (ModelRequest) -> ModelResponse`, a request to the run's own
model made for a tool (an MCP server's sampling), counted in the run's usage, cost and
budget, and refused with a `ToolError` once the budget is spent."""
SANDBOX = "sandbox"
"""In RunState.data of a top run: what its sandbox keeps for its thread (a container's
name, a hosted sandbox's id), as the sandbox says; recorded in the thread, so that a
resumed run takes the same one back where it can, and says so where it cannot."""
JOURNAL = "journal"
"""In RunState.data: the journal recording the run, when it has a thread."""
SUBAGENT_RUNS = "subagent_runs"
"""In RunState.data of a resumed run: its subagents' recorded runs, by `task` call id."""
RUN_AGENT = "run_agent"
"""In RunState.data: the loop's `execute_run`, with which the subagents capability starts
a subagent's run. The loop hands itself down so that capabilities never import it."""

TodoStatus: TypeAlias = Literal["pending", "in_progress", "completed"]


@dataclass(frozen=True, slots=True)
class Todo:
    """One item of the task list an agent keeps with `write_todos`."""

    content: str
    status: TodoStatus = "pending"


_NO_USAGE = Usage()


def _ignore(event: Event) -> None:
    """The event sink of a run nobody is streaming."""


@dataclass(slots=True, eq=False)
class RunState:
    """What a run owns while it goes on.

    `messages` is the whole conversation, history included; capabilities keep their own
    state in `data` under their name. `usage` and `cost_usd` include what subagents
    spent; `steps` counts this agent's own model calls.
    """

    run_id: str
    path: AgentPath
    messages: list[Message]
    deps: Any = None
    thread_id: str | None = None
    backend: Any = None
    usage: Usage = field(default_factory=Usage)
    cost_usd: float | None = 0.0
    steps: int = 0
    usage_by_agent: dict[str, Usage] = field(default_factory=dict)
    """Usage of this agent and each subagent under it, by agent path ("main/task:x#1")."""
    todos: tuple[Todo, ...] = ()
    data: dict[str, Any] = field(default_factory=dict)
    files: dict[str, tuple[bytes, float]] = field(default_factory=dict)
    """The StateBackend's files: path -> (content, modification time)."""
    emit: Callable[[Event], None] = _ignore
    budget: Budget | None = None
    parent: RunState | None = None
    """The run of the agent that started this one as a subagent."""

    @property
    def root(self) -> RunState:
        """The run at the top of the tree (this one, unless it is a subagent's)."""
        state = self
        while state.parent is not None:
            state = state.parent
        return state

    def charge(self, usage: Usage, cost_usd: float | None) -> None:
        """Count one model response: in this run's budget (and so its ancestors'), and
        in the usage and cost of this run and every ancestor run."""
        if self.budget is not None:
            self.budget.charge(usage, cost_usd)
        key = "/".join(self.path)
        state: RunState | None = self
        while state is not None:
            state.usage += usage
            state.usage_by_agent[key] = state.usage_by_agent.get(key, _NO_USAGE) + usage
            if state.cost_usd is not None:
                state.cost_usd = None if cost_usd is None else state.cost_usd + cost_usd
            state = state.parent


@dataclass(frozen=True, slots=True)
class ToolContext:
    """Handed to a tool that declares a parameter of this type; the model never sees it."""

    state: RunState
    call: ToolCall

    @property
    def run_id(self) -> str:
        """Id of the run calling the tool."""
        return self.state.run_id

    @property
    def agent_path(self) -> AgentPath:
        """Which agent calls the tool, e.g. ("main",) or ("main", "task:researcher#2")."""
        return self.state.path

    @property
    def deps(self) -> Any:
        """Whatever the caller passed as `deps=` to run/arun/stream."""
        return self.state.deps

    @property
    def backend(self) -> Any:
        """The agent's file backend."""
        return self.state.backend

    def emit(self, event: Event) -> None:
        """Send an event to whoever streams the run (subagents forward theirs this way)."""
        self.state.emit(event)
