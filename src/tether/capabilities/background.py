"""Subagents in the background: `Background`, the work of one run, and the tools that
follow it (`check_task`, `wait_task`, `cancel_task`, `list_tasks`).

The subagents capability starts a `BackgroundWork` for each run whose agent has
`Background` settings, and hands it the function that runs one subagent.
"""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Awaitable, Callable, Collection
from dataclasses import dataclass
from typing import Any, Literal, TypeAlias

from tether import prompts
from tether.errors import ConfigurationError, ToolError, describe
from tether.messages import UserMessage
from tether.result import RunResult
from tether.state import SUBAGENT_RUNS, RunState, ToolContext
from tether.tools.task import report, thread_report
from tether.tools.tool import Tool, tool

__all__ = ["BACKGROUND", "Background", "BackgroundWork", "StartRun", "background_tools"]


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


BACKGROUND = "background_work"
"""Where a run's `RunState.data` keeps its background subagents."""

StartRun: TypeAlias = Callable[[str, str, str, RunState], Awaitable[RunResult[Any]]]
"""`(call_id, subagent name, task description, parent's state)`: the subagent's run
that the `task` call `call_id` started in the background, to its end."""


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


class BackgroundWork:
    """The background subagents of one run, by the id of the `task` call that started
    each (the handle the model uses). `run` runs one; `known` are the subagents' names."""

    def __init__(self, settings: Background, run: StartRun, known: Collection[str]) -> None:
        self.settings = settings
        self.run = run
        self.known = known
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
            result = await self.run(call_id, job.name, job.description, state)
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
        told = "\n".join(m.text for m in state.messages if isinstance(m, UserMessage))
        for call_id, earlier in state.data.get(SUBAGENT_RUNS, {}).items():
            name = earlier.metadata.get("background")
            if name not in self.known:
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


def _job(context: ToolContext, task_id: str) -> tuple[BackgroundWork, _Job]:
    work: BackgroundWork | None = context.state.data.get(BACKGROUND)
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
    work: BackgroundWork | None = context.state.data.get(BACKGROUND)
    if work is None or not work.jobs:
        return "No background tasks."
    return "\n".join(
        f"- {i} ({j.name}): {j.status} — {j.description[:80]}" for i, j in work.jobs.items()
    )


@functools.cache
def background_tools() -> tuple[Tool, ...]:
    """`check_task`, `wait_task`, `cancel_task` and `list_tasks`."""
    return tuple(tool(f) for f in (check_task, wait_task, cancel_task, list_tasks))
