"""`SubAgent`, which describes a subagent, and the `task` tool that starts one.

What a run of `task` does (a fresh context, the parent's backend and budget, only the
final report back) is `tether.capabilities.subagents`.
"""

from __future__ import annotations

import functools
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, fields
from typing import TYPE_CHECKING, Any, Literal, TypeAlias

from tether.errors import ConfigurationError, ToolError
from tether.state import ToolContext
from tether.tools.tool import Tool, tool

if TYPE_CHECKING:
    from tether.agent import Agent
    from tether.approval import GateConfig
    from tether.backends.permissions import Rule
    from tether.capabilities.base import Capability
    from tether.limits import Limits
    from tether.mcp import MCPServer
    from tether.models.base import Model

__all__ = [
    "GENERAL_PURPOSE",
    "TASK",
    "TASK_RUNNER",
    "Background",
    "SubAgent",
    "TaskRunner",
    "background_task_tool",
    "task_tool",
]

TASK = "task"
GENERAL_PURPOSE = "general-purpose"
TASK_RUNNER = "task_runner"
"""Where a run's `RunState.data` keeps the function that runs a `task` call."""

TaskRunner: TypeAlias = Callable[..., Awaitable[str]]
"""`(context, description, subagent_type, *, background=False)`: the report, or the
handle of a task started in the background."""


@dataclass(frozen=True)
class Background:
    """Subagents that work in the background while the agent goes on.

    `task(..., background=true)` starts one and returns its id at once; `check_task`,
    `wait_task`, `cancel_task` and `list_tasks` follow them, and a result the agent did
    not ask for reaches it at its next step. They spend from the run's budget. `at_end`
    says what happens to work still running when the agent gives its final answer:
    "wait" for it and give the agent its results first, or "cancel" it. A run that ends
    otherwise (budget, time, error) cancels it. `max_running` bounds how many run at
    once. A background subagent cannot wait for approval: its gated calls are refused.
    """

    at_end: Literal["wait", "cancel"] = "wait"
    max_running: int = 4

    def __post_init__(self) -> None:
        if self.at_end not in ("wait", "cancel"):
            raise ConfigurationError(
                f'Background at_end must be "wait" or "cancel", got {self.at_end!r}'
            )
        if isinstance(self.max_running, bool) or not isinstance(self.max_running, int):
            raise ConfigurationError(
                f"Background max_running must be an integer, got {self.max_running!r}"
            )
        if self.max_running < 1:
            raise ConfigurationError(
                f"Background max_running must be at least 1, got {self.max_running}"
            )


@dataclass(frozen=True)
class SubAgent:
    """A kind of agent the `task` tool can start.

    Unset fields come from the parent: `tools=None` gives the parent's tools (with its
    capabilities' and MCP servers' tools), `model=None` its model, `skills=None` and
    `memory=None` its skills and memory files. `tools` may also name tools
    (`["read_file", "grep"]`): the built-in ones and the parent's, by name; then the
    subagent has only the tools named or given. `capabilities` and `mcp_servers` are
    added to what it inherits. `permissions` apply on top of the parent's, and
    `interrupt_on` gates calls on top of the parent's gates, so a subagent can be
    narrower, never wider. `limits` are its own, inside the parent's budget.
    `subagents` lets it delegate in turn, up to `Limits.max_subagent_depth`.
    `agent` makes an agent built elsewhere this subagent, as it is (then only `name` and
    `description` may be set): it spends from the parent's budget, streams through the
    parent and records in the parent's thread, with its own model, tools and gates.
    `output_type` (a pydantic model, say) makes it answer through its own `final_result`
    tool, validated and retried as the main agent's answer is; the `task` call then
    returns the answer as JSON.
    """

    name: str
    description: str
    system_prompt: str | None = None
    tools: Sequence[Tool | Callable[..., Any] | str] | None = None
    model: Model | str | None = None
    permissions: Sequence[Rule] = ()
    capabilities: Sequence[Capability] = ()
    limits: Limits | None = None
    subagents: Sequence[SubAgent] = ()
    output_type: Any = str
    skills: Sequence[str] | None = None
    memory: Sequence[str] | None = None
    mcp_servers: Sequence[MCPServer] = ()
    interrupt_on: Mapping[str, GateConfig] | None = None
    agent: Agent[Any] | None = None

    def __post_init__(self) -> None:
        name = self.name
        if not isinstance(name, str) or not 0 < len(name) <= 64:
            raise ConfigurationError(f"SubAgent name must be 1 to 64 characters, got {name!r}")
        if not all(c.isalnum() or c in "_-" for c in name):
            raise ConfigurationError(
                f"SubAgent name {name!r} may hold only letters, digits, '_' and '-'"
            )
        if not isinstance(self.description, str) or not self.description.strip():
            raise ConfigurationError(
                f"SubAgent {name!r} needs a description: the model picks subagents by it"
            )
        if self.agent is not None:
            defaults = SubAgent(name, self.description)
            also = [
                f.name
                for f in fields(self)
                if f.name not in ("name", "description", "agent")
                and getattr(self, f.name) != getattr(defaults, f.name)
            ]
            if also:
                raise ConfigurationError(
                    f"SubAgent {name!r} is an agent built elsewhere; set {', '.join(also)} "
                    "on that agent instead"
                )


async def task(context: ToolContext, description: str, subagent_type: str) -> str:
    """Hand a task to a subagent.

    Args:
        description: The complete task: the goal, what you know, and what to report back.
            The subagent sees nothing else.
        subagent_type: Which subagent type runs the task.
    """
    return await task_maybe_in_background(context, description, subagent_type)


@functools.cache
def task_tool() -> Tool:
    """The `task` tool with its generic description; each agent lists its own types."""
    return tool(task)


async def task_maybe_in_background(
    context: ToolContext, description: str, subagent_type: str, background: bool = False
) -> str:
    """Hand a task to a subagent.

    Args:
        description: The complete task: the goal, what you know, and what to report back.
            The subagent sees nothing else.
        subagent_type: Which subagent type runs the task.
        background: Start it and go on at once; its result reaches you when it finishes.
    """
    runner: TaskRunner | None = context.state.data.get(TASK_RUNNER)
    if runner is None:
        raise ToolError("This agent has no subagents.")
    return await runner(context, description, subagent_type, background=background)


@functools.cache
def background_task_tool() -> Tool:
    """The `task` tool of an agent whose subagents can work in the background."""
    return tool(name=TASK)(task_maybe_in_background)
