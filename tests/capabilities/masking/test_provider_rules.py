"""Provider rules for any history and any `stable_messages`: Anthropic allows at most 4
cache_control breakpoints (tools, system and messages together), never on a thinking or
redacted_thinking block nor an empty text block; Bedrock allows at most 4 cache points,
a cache point follows a content block (never opens a message) and never follows another."""

from __future__ import annotations

import itertools
import json

from hypothesis import given, settings
from hypothesis import strategies as st

from tether.messages import (
    AssistantMessage,
    Message,
    TextPart,
    ThinkingPart,
    ToolCall,
    ToolResult,
    ToolResultMessage,
    UserMessage,
)
from tether.models import ModelRequest
from tether.models.anthropic import AnthropicModel
from tether.models.base import ToolSpec
from tether.models.bedrock import BedrockModel


@st.composite
def histories(draw: st.DrawFn) -> list[Message]:
    messages: list[Message] = [UserMessage.of(draw(st.sampled_from(["go", ""])))]
    n = 0
    for _ in range(draw(st.integers(0, 8))):
        kinds = draw(
            st.lists(st.sampled_from(["think", "text", "empty", "call", "foreign"]), max_size=4)
        )
        parts: list = []
        calls = []
        for kind in kinds:
            if kind == "think":
                parts.append(
                    ThinkingPart("hmm", "sig", draw(st.sampled_from(["anthropic", "bedrock"])))
                )
            elif kind == "text":
                parts.append(TextPart("ok"))
            elif kind == "empty":
                parts.append(TextPart(""))
            elif kind == "foreign":
                parts.append(ThinkingPart("x", None, "openai"))
            else:
                n += 1
                call = ToolCall("read_file", {"file_path": "/a"}, id=f"c{n}")
                parts.append(call)
                calls.append(call)
        messages.append(AssistantMessage(tuple(parts)))
        if calls:
            messages.append(ToolResultMessage(tuple(ToolResult.of(c, "text") for c in calls)))
        if draw(st.booleans()):
            messages.append(UserMessage.of(draw(st.sampled_from(["more", ""]))))
    return messages


TOOLS = (ToolSpec("read_file", "Read.", {"type": "object"}),)


@settings(max_examples=400, deadline=None)
@given(histories(), st.data())
def test_anthropic_breakpoints(messages: list[Message], data: st.DataObject) -> None:
    stable = data.draw(st.integers(0, len(messages)))
    model = AnthropicModel("claude-sonnet-4-5", api_key="sk-test")
    params = model.params(ModelRequest("You help.", tuple(messages), TOOLS, stable_messages=stable))
    blocks = [b for m in params["messages"] for b in m["content"]]
    marked = [b for b in blocks if "cache_control" in b]
    total = (
        len(marked)
        + sum("cache_control" in t for t in params["tools"])
        + sum("cache_control" in s for s in params["system"])
    )
    assert total <= 4
    for block in marked:
        assert block["type"] not in ("thinking", "redacted_thinking")
        assert not (block["type"] == "text" and not block["text"].strip())


@settings(max_examples=400, deadline=None)
@given(histories(), st.data())
def test_bedrock_cache_points(messages: list[Message], data: st.DataObject) -> None:
    stable = data.draw(st.integers(0, len(messages)))
    model = BedrockModel("anthropic.claude-sonnet-4-5-v1:0", region="us-east-1")
    params = model.params(ModelRequest("You help.", tuple(messages), TOOLS, stable_messages=stable))
    points = 0
    for entry in params["messages"]:
        content = entry["content"]
        assert "cachePoint" not in content[0], json.dumps(entry, default=str)
        for before, block in itertools.pairwise(content):
            if "cachePoint" in block:
                points += 1
                assert "cachePoint" not in before
    points += sum("cachePoint" in b for b in params.get("system", []))
    points += sum("cachePoint" in t for t in params.get("toolConfig", {}).get("tools", []))
    assert points <= 4
