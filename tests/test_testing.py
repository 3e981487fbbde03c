"""The test kit users get: the provider guard, the pytest plugin, call assertions."""

from __future__ import annotations

from dataclasses import replace

import pytest

from tether import TetherError, create_agent
from tether.messages import ToolCall
from tether.models import _sdk
from tether.models.anthropic import AnthropicModel
from tether.testing import (
    ProviderBlockedError,
    ScriptedModel,
    assert_tool_calls,
    no_real_models,
    tool_calls,
    tool_results,
)


def test_the_plugin_blocks_real_providers_in_every_test() -> None:
    claude = AnthropicModel("claude-sonnet-4-5", api_key="sk-ant-not-used")
    with pytest.raises(ProviderBlockedError, match="may not call a real model provider") as caught:
        create_agent(claude).run("hi")
    assert caught.value.result is not None  # the partial run comes with the error


@pytest.mark.parametrize(
    ("base_url", "let_through"),
    [
        ("http://127.0.0.1:1", True),
        ("http://localhost:1", True),
        ("http://[::1]:1", True),
        ("http://10.0.0.1:1", False),
        ("https://proxy.example.com", False),
        ("http://127.0.0.1.example.com:1", False),
    ],
)
def test_servers_on_this_machine_are_let_through(base_url: str, let_through: bool) -> None:
    claude = AnthropicModel("claude-sonnet-5-5", api_key="k", base_url=base_url, max_retries=0)
    with pytest.raises(TetherError) as caught:
        create_agent(claude).run("hi")
    assert isinstance(caught.value, ProviderBlockedError) is not let_through
    if let_through:  # it got as far as connecting, and nothing listens there
        assert "could not connect" in str(caught.value)


@pytest.mark.real_models
def test_a_marked_test_may_reach_providers() -> None:
    assert _sdk.blocked_reason is None
    with no_real_models("nested and restored"):
        assert _sdk.blocked_reason == "nested and restored"
    assert _sdk.blocked_reason is None


def test_tool_call_assertions() -> None:
    model = ScriptedModel(
        [
            [ToolCall("write_file", {"file_path": "/a.md", "content": "A"})],
            [ToolCall("ls", {})],
            "ok",
        ]
    )
    result = create_agent(model).run("go")
    assert [c.name for c in tool_calls(result)] == ["write_file", "ls"]
    assert not any(r.is_error for r in tool_results(result))
    assert_tool_calls(result, [("write_file", {"file_path": "/a.md", "content": "A"}), "ls"])
    with pytest.raises(AssertionError, match="expected tool calls \\['ls'\\], the run made"):
        assert_tool_calls(result, ["ls"])
    # The model was sent the run's calls under the ids it gave them.
    sent = [replace(c, id=c.provider_id, provider_id=None) for c in tool_calls(result)]
    assert tool_calls(model.requests[-1]) == sent
