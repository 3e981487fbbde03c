"""Subagents: `SubAgent`, which describes one, and the capability that gives an agent the
`task` tool over its subagents and runs them.

A subagent starts with a fresh context (its task is its only message), works on its
parent's backend behind its own permissions, spends from its parent's budget, and
streams its events through its parent. Only its final report comes back. The loop hands
down the function that runs an agent (`RUN_AGENT` in the run's data), so this module
never imports the loop.
"""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, fields, replace
from typing import TYPE_CHECKING, Any, Protocol

from tether import prompts
from tether.approval import SubagentPaused
from tether.capabilities.background import (
    BACKGROUND,
    Background,
    BackgroundWork,
    background_tools,
)
from tether.capabilities.base import Capability
from tether.errors import ConfigurationError, TetherError, ToolError
from tether.messages import Message, UserMessage
from tether.models.base import ModelRequest
from tether.plan import RunnableAgent
from tether.result import RunResult
from tether.state import JOURNAL, RUN_AGENT, SUBAGENT_RUNS, RunState, ToolContext
from tether.tools.task import (
    GENERAL_PURPOSE,
    TASK,
    TASK_RUNNER,
    background_task_tool,
    report,
    task_tool,
)
from tether.tools.tool import Tool

if TYPE_CHECKING:
    from tether.approval import GateConfig
    from tether.backends.base import Backend
    from tether.backends.permissions import Rule
    from tether.capabilities.filesystem import Filesystem
    from tether.checkpoint.journal import Journal, Thread
    from tether.events import AgentPath, Event
    from tether.limits import Budget, Limits
    from tether.mcp import MCPServer
    from tether.models.base import Model

__all__ = [
    "GENERAL_PURPOSE_AGENT",
    "Background",
    "RunAgent",
    "SubAgent",
    "Subagents",
    "files_of",
]


class RunAgent(Protocol):
    """The loop's `execute_run`, as far as a subagent's run needs it."""

    def __call__(
        self,
        agent: RunnableAgent,
        messages: list[Message],
        *,
        new_messages: int = 1,
        deps: Any = None,
        emit: Callable[[Event], None] | None = None,
        path: AgentPath = ("main",),
        budget: Budget | None = None,
        parent: RunState | None = None,
        journal: Journal | None = None,
        thread: Thread | None = None,
        resume: bool = False,
        waits: bool = True,
    ) -> Awaitable[RunResult[Any]]: ...


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
    agent: RunnableAgent | None = None

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


GENERAL_PURPOSE_AGENT = SubAgent(
    name=GENERAL_PURPOSE,
    description=(
        "Has your tools. For a multi-step job you want done outside your own context: "
        "research, a broad search, a change across many files."
    ),
)


class Subagents(Capability):
    """Gives an agent the `task` tool over `agents`: each name's spec and built agent;
    with `background`, also the tools that start and follow subagents in the background."""

    prompt_slot = "subagents"

    def __init__(
        self,
        agents: Mapping[str, tuple[SubAgent, RunnableAgent]],
        background: Background | None = None,
    ) -> None:
        self.agents = dict(agents)
        self.background = background
        listing = "\n".join(f"- {name}: {spec.description}" for name, (spec, _) in agents.items())
        described = prompts.render("task_tool", agents=listing)
        if background is None:
            self.tool = replace(task_tool(), description=described)
            self._tools: tuple[Tool, ...] = (self.tool,)
        else:
            self.tool = replace(background_task_tool(), description=described)
            self._tools = (self.tool, *background_tools())

    def prompt(self) -> str:
        if self.background is None:
            return prompts.text("subagents")
        return prompts.text("subagents") + "\n\n" + prompts.text("background")

    def tools(self) -> Sequence[Tool]:
        return self._tools

    async def on_run_start(self, state: RunState) -> None:
        state.data[TASK_RUNNER] = self.run
        if self.background is not None:
            run = functools.partial(self.execute, background=True)
            work = state.data[BACKGROUND] = BackgroundWork(self.background, run, self.agents)
            work.take_up(state)

    async def before_model(self, state: RunState, request: ModelRequest) -> ModelRequest:
        work: BackgroundWork | None = state.data.get(BACKGROUND)
        if work is None:
            return request
        news = work.news()
        if not news:
            return request
        state.messages.append(news)  # recorded with the next step: delivered once
        return replace(request, messages=(*request.messages, news))

    async def before_finish(self, state: RunState) -> bool:
        work: BackgroundWork | None = state.data.get(BACKGROUND)
        if work is None or work.settings.at_end != "wait":
            return False
        running = work.running()
        if running:  # within the run's time limit, which bounds the whole step
            await asyncio.gather(*running, return_exceptions=True)
        return any(not job.delivered for job in work.jobs.values())

    async def on_run_end(self, state: RunState) -> None:
        work: BackgroundWork | None = state.data.get(BACKGROUND)
        if work is not None:
            await work.end()

    async def run(
        self, context: ToolContext, description: str, name: str, *, background: bool = False
    ) -> str:
        """Run subagent `name` on `description` to its end; its report, for the model.
        With `background`, start it and return its handle at once."""
        found = self.agents.get(name)
        if found is None:
            raise ToolError(
                f"There is no subagent type {name!r}. Choose one of: {', '.join(self.agents)}."
            )
        if not description.strip():
            raise ToolError("The task description is empty. Describe the whole task.")
        state = context.state
        budget = state.budget
        assert budget is not None, "execute_run gives every run a budget"
        depth, most = len(state.path), budget.root.limits.max_subagent_depth
        if depth > most:
            raise ToolError(
                f"Subagents may nest at most {most} deep and this one would be {depth} deep. "
                "Do this task yourself."
            )
        if background:
            work: BackgroundWork | None = state.data.get(BACKGROUND)
            if work is None:
                raise ToolError("This agent cannot run subagents in the background.")
            return work.start(context.call.id, name, description, state)
        result = await self.execute(context.call.id, name, description, state)
        if result.stop_reason == "interrupted":
            raise SubagentPaused(result.interrupts)  # this call waits with it
        return report(result)

    async def execute(
        self,
        call_id: str,
        name: str,
        description: str,
        state: RunState,
        *,
        background: bool = False,
    ) -> RunResult[Any]:
        """The run of subagent `name` that the `task` call `call_id` started, recorded in
        the thread under that call, or that run again where it stopped if it was."""
        execute_run: RunAgent = state.data[RUN_AGENT]  # the loop's, handed down
        agent = self.agents[name][1]
        budget = state.budget
        assert budget is not None
        number = state.data.get("task_runs", 0) + 1
        state.data["task_runs"] = number
        above: Journal | None = state.data.get(JOURNAL)  # the subagent records in it too
        journal = above.under(call_id) if above is not None else None
        path = (*state.path, f"{TASK}:{name}#{number}")
        messages: list[Message] = [UserMessage.of(description)]
        new, thread = 1, None
        earlier: Thread | None = state.data.get(SUBAGENT_RUNS, {}).get(call_id)
        if earlier is not None and earlier.unfinished and journal is not None:
            journal.adopt(earlier)  # its run goes on where it stopped
            messages, thread = earlier.messages, earlier
            new = len(messages) - earlier.run_start
            path = earlier.path or path
        if journal is not None and background:
            journal.metadata = {"background": name, "task": description}
        try:
            return await execute_run(
                agent,
                messages,
                new_messages=new,
                deps=state.deps,
                emit=state.emit,
                path=path,
                budget=budget.child(agent.limits),
                parent=state,
                journal=journal,
                thread=thread,
                resume=thread is not None,
                waits=not background,
            )
        except TetherError as exc:
            raise ToolError(f"The subagent {name!r} failed: {exc}") from exc


def files_of(agent: RunnableAgent, path: AgentPath) -> Backend | None:
    """The files of the agent at `path` in `agent`'s run tree, as that agent sees them:
    the top agent's backend behind the rules of every agent on the way down (a
    subagent's rules add to its parent's). None when that agent has no file tools or
    `path` names no agent of the tree. An approval card reads a file through this, so
    it shows only what the agent that asked could read itself."""
    from tether.backends.permissions import guard

    found = _filesystem(agent)
    if found is None:
        return None
    view = guard(found.backend, found.rules, found.policy)
    for step in path[1:]:
        name = step.removeprefix(f"{TASK}:").rsplit("#", 1)[0]
        delegation = next((c for c in agent._plan.on_run_start if isinstance(c, Subagents)), None)
        if delegation is None or name not in delegation.agents:
            return None
        agent = delegation.agents[name][1]
        found = _filesystem(agent)
        if found is None:
            return None
        view = guard(view, found.rules, found.policy)
    return view


def _filesystem(agent: RunnableAgent) -> Filesystem | None:
    from tether.capabilities.filesystem import Filesystem

    return next((c for c in agent._plan.on_run_start if isinstance(c, Filesystem)), None)
