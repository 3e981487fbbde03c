"""A capability adds prompt text, tools and hooks to an agent without touching the loop."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from typing import TYPE_CHECKING, ClassVar

from tether.messages import ToolCall, ToolResult
from tether.models.base import ModelRequest, ModelResponse
from tether.prompt import Slot
from tether.state import RunState, ToolContext

if TYPE_CHECKING:
    from tether.tools.tool import Tool

__all__ = ["Capability", "ToolHandler"]

ToolHandler = Callable[[ToolCall, ToolContext], Awaitable[ToolResult]]
"""Runs one tool call: the tool itself, or the next capability around it."""


class Capability:
    """Subclass and override only the hooks you need; the loop skips the others.

    Hooks run in the order capabilities are given to `create_agent`; `around_tool`
    hooks nest, the first capability outermost. `prompt_slot` places the `prompt()`
    section in the system prompt (see `tether.prompt`).
    """

    prompt_slot: ClassVar[Slot] = "user"

    def prompt(self) -> str | None:
        """A section for the system prompt, or None."""
        return None

    def tools(self) -> Sequence[Tool]:
        """Tools this capability adds to the agent."""
        return ()

    async def run_prompt(self, state: RunState) -> str | None:
        """A section for the system prompt that depends on the run (files it reads, say),
        worked out once when the run starts, after every `on_run_start`; or None."""
        return None

    async def on_agent_open(self) -> None:
        """Called when an `async with agent:` block begins: take what every run inside it
        may share (connections, processes). Blocks may nest; count them."""

    async def on_agent_close(self) -> None:
        """Called when that block ends, however it ends: release what `on_agent_open` took."""

    async def on_run_start(self, state: RunState) -> None:
        """Called once before the first model call, with the history in place."""

    async def on_run_end(self, state: RunState) -> None:
        """Called once when the run ends, however it ends, to release what it holds."""

    async def before_finish(self, state: RunState) -> bool:
        """Called when the agent has given its final answer: return True to give it
        another step instead (work it started has results for it)."""
        return False

    async def before_model(self, state: RunState, request: ModelRequest) -> ModelRequest:
        """Change the request before it is sent (trim, compact, add cache hints)."""
        return request

    async def after_model(self, state: RunState, response: ModelResponse) -> ModelResponse:
        """Inspect or change the model's response before the loop acts on it."""
        return response

    async def around_tool(
        self, call: ToolCall, context: ToolContext, proceed: ToolHandler
    ) -> ToolResult:
        """Wrap one tool call: gate it, change its arguments, or change its result."""
        return await proceed(call, context)


def overrides(capability: Capability, hook: str) -> bool:
    """Whether a capability implements `hook` itself, so the loop must call it."""
    return getattr(type(capability), hook) is not getattr(Capability, hook)
