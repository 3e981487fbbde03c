"""Subagents: the `task` tool, its prompt, and what one run of it does.

A subagent starts with a fresh context (its task is its only message), works on its
parent's backend behind its own permissions, spends from its parent's budget, and
streams its events through its parent. Only its final report comes back.
"""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any, Literal

from pydantic_core import to_json

from tether import prompts
from tether.approval import SubagentPaused
from tether.capabilities.base import Capability
from tether.errors import TetherError, ToolError, describe
from tether.messages import AssistantMessage, Message, UserMessage
from tether.models.base import ModelRequest
from tether.state import RunState, ToolContext
from tether.tools.task import (
    GENERAL_PURPOSE,
    TASK,
    TASK_RUNNER,
    Background,
    SubAgent,
    background_task_tool,
    task_tool,
)
from tether.tools.tool import Tool, tool

if TYPE_CHECKING:
    from tether.agent import Agent, RunResult
    from tether.backends.base import Backend
    from tether.capabilities.filesystem import Filesystem
    from tether.checkpoint.journal import Journal, Thread
    from tether.events import AgentPath

__all__ = ["BACKGROUND", "GENERAL_PURPOSE_AGENT", "Subagents", "files_of"]

GENERAL_PURPOSE_AGENT = SubAgent(
    name=GENERAL_PURPOSE,
    description=(
        "Has your tools. For a multi-step job you want done outside your own context: "
        "research, a broad search, a change across many files."
    ),
)

_STOPPED_BECAUSE = {
    "budget": "it ran out of budget",
    "timeout": "it ran out of time",
    "loop": "it kept repeating the same tool call",
    "interrupted": "it was interrupted",
    "cancelled": "it was cancelled",
    "content_filter": "the provider's content filter stopped its reply",
}


class Subagents(Capability):
    """Gives an agent the `task` tool over `agents`: each name's spec and built agent;
    with `background`, also the tools that start and follow subagents in the background."""

    prompt_slot = "subagents"

    def __init__(
        self,
        agents: Mapping[str, tuple[SubAgent, Agent[Any]]],
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
            self._tools = (self.tool, *_background_tools())

    def prompt(self) -> str:
        if self.background is None:
            return prompts.text("subagents")
        return prompts.text("subagents") + "\n\n" + prompts.text("background")

    def tools(self) -> Sequence[Tool]:
        return self._tools

    async def on_run_start(self, state: RunState) -> None:
        state.data[TASK_RUNNER] = self.run
        if self.background is not None:
            work = state.data[BACKGROUND] = _Work(self, self.background)
            work.take_up(state)

    async def before_model(self, state: RunState, request: ModelRequest) -> ModelRequest:
        work: _Work | None = state.data.get(BACKGROUND)
        if work is None:
            return request
        news = work.news()
        if not news:
            return request
        state.messages.append(news)  # recorded with the next step: delivered once
        return replace(request, messages=(*request.messages, news))

    async def before_finish(self, state: RunState) -> bool:
        work: _Work | None = state.data.get(BACKGROUND)
        if work is None or work.settings.at_end != "wait":
            return False
        running = work.running()
        if running:  # within the run's time limit, which bounds the whole step
            await asyncio.gather(*running, return_exceptions=True)
        return any(not job.delivered for job in work.jobs.values())

    async def on_run_end(self, state: RunState) -> None:
        work: _Work | None = state.data.get(BACKGROUND)
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
            work: _Work | None = state.data.get(BACKGROUND)
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
        from tether.loop import JOURNAL, SUBAGENT_RUNS, execute_run  # it imports this module

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


BACKGROUND = "background_work"
"""Where a run's `RunState.data` keeps its background subagents."""


@dataclass
class _Job:
    """One subagent working in the background."""

    name: str
    description: str
    status: Literal["running", "completed", "failed", "cancelled"] = "running"
    report: str = ""
    task: asyncio.Task[None] | None = None
    delivered: bool = False
    """Whether its result was given to the agent (in a message, or by check or wait)."""


class _Work:
    """The background subagents of one run, by the id of the `task` call that started
    each (the handle the model uses)."""

    def __init__(self, owner: Subagents, settings: Background) -> None:
        self.owner = owner
        self.settings = settings
        self.jobs: dict[str, _Job] = {}

    def start(self, call_id: str, name: str, description: str, state: RunState) -> str:
        running = sum(job.status == "running" for job in self.jobs.values())
        if running >= self.settings.max_running:
            raise ToolError(
                f"{running} subagents already work in the background, the most allowed. "
                "Wait for one (wait_task) or cancel one (cancel_task) first."
            )
        self._launch(call_id, name, description, state)
        return prompts.render("background_started", id=call_id, subagent=name)

    def _launch(self, call_id: str, name: str, description: str, state: RunState) -> None:
        job = self.jobs[call_id] = _Job(name, description)
        job.task = asyncio.create_task(self._work(job, call_id, state))

    async def _work(self, job: _Job, call_id: str, state: RunState) -> None:
        try:
            result = await self.owner.execute(
                call_id, job.name, job.description, state, background=True
            )
            job.status = "completed" if result.stop_reason == "completed" else "failed"
            job.report = report(result)
        except asyncio.CancelledError:
            job.status, job.report = "cancelled", "Cancelled before it finished."
            raise
        except Exception as exc:  # kept for the agent; nobody awaits this task to see it
            job.status, job.report = "failed", describe(exc)

    def take_up(self, state: RunState) -> None:
        """On a resumed run: background work recorded in the thread goes on where it
        stopped; what had finished is known, and given to the agent unless it was."""
        from tether.loop import SUBAGENT_RUNS

        told = "\n".join(m.text for m in state.messages if isinstance(m, UserMessage))
        for call_id, earlier in state.data.get(SUBAGENT_RUNS, {}).items():
            name = earlier.metadata.get("background")
            if name not in self.owner.agents:
                continue
            description = str(earlier.metadata.get("task", ""))
            if earlier.unfinished:
                self._launch(call_id, name, description, state)
                continue
            job = self.jobs[call_id] = _Job(name, description, report=thread_report(earlier))
            job.status = "completed" if earlier.stop_reason == "completed" else "failed"
            job.delivered = _marker(call_id) in told

    def news(self) -> UserMessage | None:
        """The results that finished since the agent last heard, once each."""
        finished = [
            (i, j) for i, j in self.jobs.items() if j.status != "running" and not j.delivered
        ]
        for _, job in finished:
            job.delivered = True
        if not finished:
            return None
        return UserMessage.of("\n\n".join(self.told(i, j) for i, j in finished))

    @staticmethod
    def told(call_id: str, job: _Job) -> str:
        return prompts.render(
            "background_done",
            marker=_marker(call_id),
            subagent=job.name,
            status=job.status,
            report=job.report or "(It reported nothing.)",
        )

    def running(self) -> list[asyncio.Task[None]]:
        return [j.task for j in self.jobs.values() if j.task is not None and not j.task.done()]

    async def end(self) -> None:
        """The run ends: its background work is cancelled (or was waited for)."""
        running = self.running()
        for task in running:
            task.cancel()
        await asyncio.gather(*running, return_exceptions=True)


def _marker(call_id: str) -> str:
    """How a delivered result names its task, so a resumed run knows it was delivered."""
    return f"[background task {call_id}]"


def _job(context: ToolContext, task_id: str) -> tuple[_Work, _Job]:
    work: _Work | None = context.state.data.get(BACKGROUND)
    if work is None:
        raise ToolError("This agent runs no subagents in the background.")
    job = work.jobs.get(task_id)
    if job is None:
        known = ", ".join(work.jobs) or "none"
        raise ToolError(f"There is no background task {task_id!r}. Tasks: {known}.")
    return work, job


async def check_task(context: ToolContext, task_id: str) -> str:
    """See how a background task stands: still running, or its result.

    Args:
        task_id: The id `task` gave when it started the task in the background.
    """
    work, job = _job(context, task_id)
    if job.status == "running":
        return f"Task {task_id} ({job.name}) is still running."
    job.delivered = True
    return work.told(task_id, job)


async def wait_task(context: ToolContext, task_id: str, timeout_seconds: float = 300) -> str:
    """Wait for a background task to finish, and get its result.

    Args:
        task_id: The id `task` gave when it started the task in the background.
        timeout_seconds: How long to wait at most; the task keeps running after.
    """
    work, job = _job(context, task_id)
    if job.task is not None and not job.task.done():
        done, _ = await asyncio.wait({job.task}, timeout=max(0.0, timeout_seconds))
        if not done:
            return f"Task {task_id} ({job.name}) is still running after {timeout_seconds:g}s."
    job.delivered = True
    return work.told(task_id, job)


async def cancel_task(context: ToolContext, task_id: str) -> str:
    """Stop a background task. What it did so far stays done.

    Args:
        task_id: The id `task` gave when it started the task in the background.
    """
    _, job = _job(context, task_id)
    if job.task is None or job.task.done():
        return f"Task {task_id} ({job.name}) had already finished: {job.status}."
    job.task.cancel()
    await asyncio.gather(job.task, return_exceptions=True)
    job.delivered = True
    return f"Task {task_id} ({job.name}) is cancelled."


async def list_tasks(context: ToolContext) -> str:
    """List this run's background tasks and how each stands."""
    work: _Work | None = context.state.data.get(BACKGROUND)
    if work is None or not work.jobs:
        return "No background tasks."
    return "\n".join(
        f"- {i} ({j.name}): {j.status} — {j.description[:80]}" for i, j in work.jobs.items()
    )


@functools.cache
def _background_tools() -> tuple[Tool, ...]:
    return tuple(tool(f) for f in (check_task, wait_task, cancel_task, list_tasks))


def report(result: RunResult[Any]) -> str:
    """A subagent's answer (text, or a structured answer as JSON), or its last words
    marked as a partial report."""
    return _report(result.stop_reason, result.output, result.messages)


def thread_report(thread: Thread) -> str:
    """The same, of a subagent's run as its thread recorded it."""
    return _report(thread.stop_reason or "stopped", thread.output, thread.messages)


def _report(stop_reason: str, output: Any, messages: Sequence[Message]) -> str:
    if stop_reason == "completed":
        return output if isinstance(output, str) else to_json(output).decode()
    last = next(
        (m.text for m in reversed(messages) if isinstance(m, AssistantMessage) and m.text),
        "",
    )
    return prompts.render(
        "task_partial",
        because=_STOPPED_BECAUSE.get(stop_reason, stop_reason),
        report=last.strip() or "(It reported nothing.)",
    )


def files_of(agent: Agent[Any], path: AgentPath) -> Backend | None:
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


def _filesystem(agent: Agent[Any]) -> Filesystem | None:
    from tether.capabilities.filesystem import Filesystem

    return next((c for c in agent._plan.on_run_start if isinstance(c, Filesystem)), None)
