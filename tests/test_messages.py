from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from tether.messages import (
    AssistantMessage,
    BinaryPart,
    Message,
    TextPart,
    ThinkingPart,
    ToolCall,
    ToolResult,
    ToolResultMessage,
    Usage,
    UserMessage,
    from_json,
    to_json,
)

json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(),
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(), children, max_size=4)
    ),
    max_leaves=12,
)
media_types = st.sampled_from(["image/png", "audio/wav", "video/mp4", "application/pdf"])
content_parts = st.one_of(
    st.builds(TextPart, st.text()),
    st.builds(BinaryPart, st.binary(max_size=64), media_types),
)
usages = st.builds(Usage, *(st.integers(min_value=0, max_value=10**9) for _ in range(5)))
tool_calls = st.builds(
    ToolCall,
    st.text(min_size=1, max_size=20),
    st.dictionaries(st.text(), json_values, max_size=4) | st.text(),
    st.text(min_size=1, max_size=20),
)
assistant_parts = st.one_of(
    st.builds(TextPart, st.text()),
    st.builds(ThinkingPart, st.text(), st.none() | st.text()),
    tool_calls,
)
messages: st.SearchStrategy[Message] = st.one_of(
    st.builds(UserMessage, st.lists(content_parts, max_size=3).map(tuple)),
    st.builds(
        AssistantMessage,
        st.lists(assistant_parts, max_size=4).map(tuple),
        st.none() | st.text(max_size=20),
        usages,
    ),
    st.builds(
        ToolResultMessage,
        st.lists(
            st.builds(
                ToolResult,
                st.text(max_size=10),
                st.text(max_size=10),
                st.lists(content_parts, max_size=3).map(tuple),
                st.booleans(),
            ),
            max_size=3,
        ).map(tuple),
    ),
)


@given(st.lists(messages, max_size=6))
def test_json_round_trip_is_lossless(conversation: list[Message]) -> None:
    assert from_json(to_json(conversation)) == conversation


def test_binary_data_is_base64_in_json() -> None:
    text = to_json([UserMessage((BinaryPart(b"\x00\xff", "image/png"),))])
    assert '"AP8="' in text


def test_usage_adds_field_by_field() -> None:
    total = Usage(10, 5, 2, 1, 1) + Usage(1, 2, 3, 4, 1)
    assert total == Usage(11, 7, 5, 5, 2)
    assert total.total_tokens == 18


def test_binary_part_category_follows_media_type() -> None:
    categories = [
        BinaryPart(b"", media).category
        for media in ("image/png", "audio/mpeg", "video/webm", "application/pdf")
    ]
    assert categories == ["image", "audio", "video", "document"]


def test_assistant_message_separates_text_and_calls() -> None:
    call = ToolCall("add", {"a": 1})
    message = AssistantMessage((TextPart("a"), ThinkingPart("hmm"), call, TextPart("b")))
    assert message.text == "ab"
    assert message.tool_calls == [call]


def test_tool_call_ids_are_unique_by_default() -> None:
    assert ToolCall("x").id != ToolCall("x").id


_JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(), inner, max_size=3),
    max_leaves=8,
)


@settings(max_examples=200, deadline=None)
@given(args=_JSON, text=st.text())
def test_whatever_a_provider_sends_is_saved_so_that_it_reads_back(args: Any, text: str) -> None:
    # Any JSON value as a tool input, any text (lone surrogates included).
    message = AssistantMessage((TextPart(text), ToolCall("t", args, id="c")))
    (back,) = from_json(to_json([message]))
    assert isinstance(back, AssistantMessage)
    (call,) = back.tool_calls
    assert isinstance(call.args, dict | str)
    assert from_json(to_json([back])) == [back]  # what was read back saves the same
