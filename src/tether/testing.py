"""Testing your own agents: scripted models, a guard against real providers, and
assertions on what the agent sent and called.

    from tether.testing import ScriptedModel, no_real_models, tool_calls

    with no_real_models():               # or, in pytest: pytest_plugins = ["tether.pytest_plugin"]
        result = agent.run("...")
    assert [c.name for c in tool_calls(result)] == ["read_file", "edit_file"]

`ScriptedModel` replays fixed turns and `FunctionModel` computes each reply; both record
every request in `.requests`.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Sequence
from typing import Any

from tether.agent import RunResult
from tether.errors import ProviderBlockedError
from tether.messages import AssistantMessage, Message, ToolCall, ToolResult, ToolResultMessage
from tether.models import _sdk
from tether.models.base import ModelRequest
from tether.models.scripted import FunctionModel, ScriptedModel, Turn

__all__ = [
    "FunctionModel",
    "ProviderBlockedError",
    "ScriptedModel",
    "Turn",
    "assert_tool_calls",
    "no_real_models",
    "tool_calls",
    "tool_results",
]


@contextlib.contextmanager
def no_real_models(
    reason: str = "this test may not call a real model provider; use ScriptedModel or "
    "FunctionModel, or pass the adapter a mocked client",
) -> Iterator[None]:
    """Inside the block, a provider adapter that would open a real connection raises
    `ProviderBlockedError` instead. Adapters given a client of yours, or a `base_url` on
    the loopback interface (a local server), are let through."""
    before = _sdk.blocked_reason
    _sdk.blocked_reason = reason
    try:
        yield
    finally:
        _sdk.blocked_reason = before


def _messages(source: RunResult[Any] | Sequence[Message]) -> Sequence[Message]:
    return source.messages if isinstance(source, RunResult) else source


def tool_calls(source: RunResult[Any] | Sequence[Message] | ModelRequest) -> list[ToolCall]:
    """Every tool call in a run's messages (or a request's), in order."""
    messages = source.messages if isinstance(source, ModelRequest) else _messages(source)
    return [c for m in messages if isinstance(m, AssistantMessage) for c in m.tool_calls]


def tool_results(source: RunResult[Any] | Sequence[Message]) -> list[ToolResult]:
    """Every tool result in a run's messages, in order."""
    return [r for m in _messages(source) if isinstance(m, ToolResultMessage) for r in m.results]


def assert_tool_calls(
    source: RunResult[Any] | Sequence[Message], expected: Sequence[str | tuple[str, dict[str, Any]]]
) -> None:
    """Assert the run called exactly these tools in this order: a name, or a name and the
    arguments it was called with."""
    calls = tool_calls(source)
    got = [
        c.name if isinstance(want, str) else (c.name, c.args)
        for c, want in zip(calls, expected, strict=False)
    ]
    if len(calls) != len(expected) or got != list(expected):
        made = [(c.name, c.args) for c in calls]
        raise AssertionError(f"expected tool calls {list(expected)}, the run made {made}")
