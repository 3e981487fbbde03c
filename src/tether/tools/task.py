"""The `task` tool, which hands a task to a subagent, and the report it brings back.

The tool only asks the run for its `TaskRunner`: which subagents there are and what a run
of one does (a fresh context, the parent's backend and budget) is the subagents
capability's, `tether.capabilities.subagents`, which sets the runner.
"""

from __future__ import annotations

import functools
from collections.abc import Awaitable, Callable, Sequence
from typing import TYPE_CHECKING, Any, TypeAlias

from tether import prompts
from tether.errors import ToolError
from tether.messages import AssistantMessage, Message
from tether.state import ToolContext
from tether.tools.tool import Tool, tool

if TYPE_CHECKING:
    from tether.checkpoint.journal import Thread
    from tether.result import RunResult

__all__ = [
    "GENERAL_PURPOSE",
    "TASK",
    "TASK_RUNNER",
    "TaskRunner",
    "background_task_tool",
    "report",
    "task_tool",
    "thread_report",
]

TASK = "task"
GENERAL_PURPOSE = "general-purpose"
TASK_RUNNER = "task_runner"
"""Where a run's `RunState.data` keeps the function that runs a `task` call."""

TaskRunner: TypeAlias = Callable[..., Awaitable[str]]
"""`(context, description, subagent_type, *, background=False)`: the report, or the
handle of a task started in the background."""


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


_STOPPED_BECAUSE = {
    "budget": "it ran out of budget",
    "timeout": "it ran out of time",
    "loop": "it kept repeating the same tool call",
    "interrupted": "it was interrupted",
    "cancelled": "it was cancelled",
    "content_filter": "the provider's content filter stopped its reply",
}


def report(result: RunResult[Any]) -> str:
    """A subagent's answer (text, or a structured answer as JSON), or its last words
    marked as a partial report."""
    return _report(result.stop_reason, result.output, result.messages)


def thread_report(thread: Thread) -> str:
    """The same, of a subagent's run as its thread recorded it."""
    return _report(thread.stop_reason or "stopped", thread.output, thread.messages)


def _report(stop_reason: str, output: Any, messages: Sequence[Message]) -> str:
    if stop_reason == "completed":
        if isinstance(output, str):
            return output
        from pydantic_core import to_json  # loaded by the report of a structured answer

        return to_json(output).decode()
    last = next(
        (m.text for m in reversed(messages) if isinstance(m, AssistantMessage) and m.text),
        "",
    )
    return prompts.render(
        "task_partial",
        because=_STOPPED_BECAUSE.get(stop_reason, stop_reason),
        report=last.strip() or "(It reported nothing.)",
    )
