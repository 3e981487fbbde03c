"""Run the file tools against a backend directly, without a model."""

from __future__ import annotations

from typing import Any

from tether.backends import Backend
from tether.messages import ToolCall, ToolResult
from tether.state import RunState, ToolContext
from tether.tools.files import file_tools


async def call_tool(backend: Backend, name: str, **args: Any) -> ToolResult:
    """Run file tool `name` with `args` on `backend`, as the loop would."""
    tools = {t.name: t for t in file_tools()}
    state = RunState(run_id="run_test", path=("main",), messages=[], backend=backend)
    tool_call = ToolCall(name, args)
    return await tools[name].run(tool_call, ToolContext(state, tool_call))


async def ok(backend: Backend, name: str, **args: Any) -> ToolResult:
    result = await call_tool(backend, name, **args)
    assert not result.is_error, result.text
    return result


async def fails(backend: Backend, name: str, **args: Any) -> str:
    result = await call_tool(backend, name, **args)
    assert result.is_error, f"{name}({args}) should fail, got: {result.text}"
    return result.text
