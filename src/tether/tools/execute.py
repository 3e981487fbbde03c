"""`execute`: a shell command in the agent's sandbox (see `tether.capabilities.sandbox`)."""

from __future__ import annotations

import functools
from collections.abc import Awaitable, Callable
from typing import TypeAlias

from tether.errors import ToolError
from tether.state import ToolContext
from tether.tools.tool import Tool, tool

__all__ = ["COMMAND_RUNNER", "EXECUTE", "CommandRunner", "execute_tool"]

EXECUTE = "execute"
COMMAND_RUNNER = "command_runner"
"""Where a run's `RunState.data` keeps the function that runs an `execute` call."""

CommandRunner: TypeAlias = Callable[[ToolContext, str, int | None], Awaitable[str]]


async def execute(context: ToolContext, command: str, timeout_seconds: int | None = None) -> str:
    """Run a shell command in the workspace and return its output and exit code.

    Args:
        command: The command, run with /bin/sh in the workspace directory.
        timeout_seconds: Seconds before the command is killed; the sandbox's own limit
            (120 s unless set otherwise) holds when it is shorter.
    """
    runner: CommandRunner | None = context.state.data.get(COMMAND_RUNNER)
    if runner is None:
        raise ToolError("This agent has no sandbox to run commands in.")
    if timeout_seconds is not None and timeout_seconds < 1:
        raise ToolError("timeout_seconds must be at least 1.")
    return await runner(context, command, timeout_seconds)


@functools.cache
def execute_tool() -> Tool:
    """The `execute` tool, built on first use like the file tools."""
    return tool(execute)
