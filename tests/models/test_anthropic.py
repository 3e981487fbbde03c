"""AnthropicModel against recorded Messages API payloads (streamed SSE, errors)."""

from __future__ import annotations

import base64
import json
import re
from typing import Any

import pytest

from tests.conftest import own_id
from tether import ModelError, ModelHTTPError, create_agent, tool
from tether.events import ModelDelta, ToolCallStarted
from tether.messages import (
    AssistantMessage,
    BinaryPart,
    TextPart,
    ThinkingPart,
    ToolCall,
    Usage,
    UserMessage,
)
from tether.models.anthropic import AnthropicModel
from tether.tools.files import FILE_TOOL_NAMES

from .wire import MockServer, error_reply, sse, stream_reply

MODEL = "claude-sonnet-5-5"


def text_block(text: str) -> dict[str, Any]:
    return {"type": "text", "text": text}


def tool_block(call_id: str, name: str, args_json: str) -> dict[str, Any]:
    return {"type": "tool_use", "id": call_id, "name": name, "json": args_json}


def thinking_block(text: str, signature: str) -> dict[str, Any]:
    return {"type": "thinking", "thinking": text, "signature": signature}


def claude_stream(
    blocks: list[dict[str, Any]],
    *,
    stop_reason: str | None = "end_turn",
    usage: dict[str, int] | None = None,
    output_tokens: int = 12,
    complete: bool = True,
) -> bytes:
    """The event sequence the Messages API streams for `blocks`, as its docs show it.

    `complete=False` cuts the stream off after the content, as a dropped connection does.
    """
    start_usage = {"input_tokens": 25, "output_tokens": 1, **(usage or {})}
    events: list[tuple[str, Any]] = [
        (
            "message_start",
            {
                "type": "message_start",
                "message": {
                    "id": "msg_01XFDUDYJgAACzvnptvVoYEL",
                    "type": "message",
                    "role": "assistant",
                    "content": [],
                    "model": MODEL,
                    "stop_reason": None,
                    "stop_sequence": None,
                    "usage": start_usage,
                },
            },
        ),
        ("ping", {"type": "ping"}),
    ]
    for index, block in enumerate(blocks):
        if block["type"] == "text":
            start, deltas = (
                {"type": "text", "text": ""},
                [{"type": "text_delta", "text": piece} for piece in _halves(block["text"])],
            )
        elif block["type"] == "thinking":
            start = {"type": "thinking", "thinking": "", "signature": ""}
            deltas = [
                {"type": "thinking_delta", "thinking": block["thinking"]},
                {"type": "signature_delta", "signature": block["signature"]},
            ]
        else:
            start = {"type": "tool_use", "id": block["id"], "name": block["name"], "input": {}}
            deltas = [
                {"type": "input_json_delta", "partial_json": piece}
                for piece in ["", *_halves(block["json"])]
            ]
        events.append(
            (
                "content_block_start",
                {"type": "content_block_start", "index": index, "content_block": start},
            )
        )
        events += [
            ("content_block_delta", {"type": "content_block_delta", "index": index, "delta": d})
            for d in deltas
        ]
        if complete and not (stop_reason == "max_tokens" and index == len(blocks) - 1):
            events.append(("content_block_stop", {"type": "content_block_stop", "index": index}))
    if complete:
        events.append(
            (
                "message_delta",
                {
                    "type": "message_delta",
                    "delta": {"stop_reason": stop_reason, "stop_sequence": None},
                    "usage": {"output_tokens": output_tokens},
                },
            )
        )
        events.append(("message_stop", {"type": "message_stop"}))
    return sse(events)


def _halves(text: str) -> list[str]:
    middle = len(text) // 2
    return [piece for piece in (text[:middle], text[middle:]) if piece]


def reply(blocks: list[dict[str, Any]], **kwargs: Any) -> Any:
    return stream_reply(claude_stream(blocks, **kwargs))


def model(server: MockServer, **kwargs: Any) -> AnthropicModel:
    return AnthropicModel(MODEL, api_key="sk-ant-test", http_client=server.client(), **kwargs)


@tool
def get_weather(city: str) -> str:
    """Current weather in a city."""
    return f"Sunny in {city}"


async def test_text_reply_sends_cached_system_and_reads_usage() -> None:
    server = MockServer(
        [
            reply(
                [text_block("Hello there")],
                usage={"cache_read_input_tokens": 100, "cache_creation_input_tokens": 50},
            )
        ]
    )
    agent = create_agent(
        model(server),
        system_prompt="Be brief.",
        filesystem=False,
        todos=False,
        general_purpose_subagent=False,
    )
    result = await agent.arun("Hi")

    assert result.output == "Hello there"
    assert result.usage == Usage(
        input_tokens=175, output_tokens=12, cache_read_tokens=100, cache_write_tokens=50, requests=1
    )
    (body,) = server.bodies
    assert server.paths == ["/v1/messages"]
    assert body["model"] == MODEL
    assert body["stream"] is True
    assert body["max_tokens"] == 64_000  # from the model's profile
    assert body["system"][0]["text"].startswith("Be brief.")
    assert body["system"][0]["cache_control"] == {"type": "ephemeral"}
    assert body["messages"] == [
        {
            "role": "user",
            "content": [{"type": "text", "text": "Hi", "cache_control": {"type": "ephemeral"}}],
        }
    ]
    assert "tools" not in body
    assert result.messages[-1] == AssistantMessage(
        (TextPart("Hello there"),), model_name=MODEL, usage=result.usage
    )


async def test_tool_call_round_trip_and_cache_breakpoints() -> None:
    server = MockServer(
        [
            reply(
                [
                    text_block("Checking."),
                    tool_block("toolu_01", "get_weather", '{"city": "Oslo"}'),
                ],
                stop_reason="tool_use",
            ),
            reply([text_block("Sunny.")]),
        ]
    )
    result = await create_agent(model(server), tools=[get_weather]).arun("Weather in Oslo?")

    assert result.output == "Sunny."
    first, second = server.bodies
    assert [t["name"] for t in first["tools"]] == [
        "get_weather",
        "write_todos",
        *FILE_TOOL_NAMES,
        "task",
    ]
    assert first["tools"][0]["input_schema"]["required"] == ["city"]
    assert first["tools"][-1]["cache_control"] == {"type": "ephemeral"}
    assert second["messages"][1] == {
        "role": "assistant",
        "content": [
            {"type": "text", "text": "Checking."},
            {
                "type": "tool_use",
                "id": "toolu_01",
                "name": "get_weather",
                "input": {"city": "Oslo"},
            },
        ],
    }
    assert second["messages"][2] == {
        "role": "user",
        "content": [
            {
                "type": "tool_result",
                "tool_use_id": "toolu_01",
                "content": [{"type": "text", "text": "Sunny in Oslo"}],
                "is_error": False,
                "cache_control": {"type": "ephemeral"},
            }
        ],
    }
    # Only the latest turn carries the message breakpoint.
    assert "cache_control" not in second["messages"][0]["content"][-1]
    call = result.messages[1].tool_calls[0]  # type: ignore[union-attr]
    # The call keeps Claude's id for the wire and gets tether's own, which its result answers.
    assert call == ToolCall("get_weather", {"city": "Oslo"}, call.id, provider_id="toolu_01")
    assert re.fullmatch(r"call_[0-9a-f]{16}", call.id)
    assert result.messages[2].results[0].call_id == call.id  # type: ignore[union-attr]


async def test_parallel_tool_calls_come_back_in_one_user_turn() -> None:
    server = MockServer(
        [
            reply(
                [
                    tool_block("toolu_a", "get_weather", '{"city": "Oslo"}'),
                    tool_block("toolu_b", "get_weather", '{"city": "Rome"}'),
                ],
                stop_reason="tool_use",
            ),
            reply([text_block("Both sunny.")]),
        ]
    )
    result = await create_agent(model(server), tools=[get_weather]).arun("Oslo and Rome?")

    assert result.output == "Both sunny."
    results = server.bodies[1]["messages"][2]["content"]
    assert [(r["tool_use_id"], r["content"][0]["text"]) for r in results] == [
        ("toolu_a", "Sunny in Oslo"),
        ("toolu_b", "Sunny in Rome"),
    ]


async def test_images_and_pdfs_become_content_blocks() -> None:
    server = MockServer([reply([text_block("A cat and a report.")])])
    png, pdf = b"\x89PNG\r\n\x1a\nfake", b"%PDF-1.7 fake"
    prompt = UserMessage(
        (
            TextPart("What are these?"),
            BinaryPart(png, "image/png"),
            BinaryPart(pdf, "application/pdf"),
            BinaryPart(b"ID3", "audio/mpeg"),
        )
    )
    await create_agent(model(server, cache=False)).arun(prompt)

    content = server.bodies[0]["messages"][0]["content"]
    assert content[1] == {
        "type": "image",
        "source": {
            "type": "base64",
            "media_type": "image/png",
            "data": base64.b64encode(png).decode(),
        },
    }
    assert content[2]["type"] == "document"
    assert content[2]["source"]["media_type"] == "application/pdf"
    assert content[3] == {
        "type": "text",
        "text": "[audio/mpeg content omitted: Claude cannot read it]",
    }
    assert "cache_control" not in content[-1]
    assert "cache_control" not in server.bodies[0]["system"][0]


async def test_thinking_is_kept_and_sent_back_with_its_signature() -> None:
    server = MockServer(
        [
            reply(
                [
                    thinking_block("The user wants weather.", "sig-abc"),
                    tool_block("toolu_01", "get_weather", '{"city": "Oslo"}'),
                ],
                stop_reason="tool_use",
            ),
            reply([text_block("Sunny.")]),
        ]
    )
    agent = create_agent(model(server), tools=[get_weather])
    result = await agent.arun("Weather?")

    assert result.messages[1].parts[0] == ThinkingPart(  # type: ignore[union-attr]
        "The user wants weather.", "sig-abc", "anthropic"
    )
    assert server.bodies[1]["messages"][1]["content"][0] == {
        "type": "thinking",
        "thinking": "The user wants weather.",
        "signature": "sig-abc",
    }


async def test_thinking_from_another_provider_is_not_sent() -> None:
    server = MockServer([reply([text_block("ok")])])
    history = [
        UserMessage.of("hi"),
        AssistantMessage((ThinkingPart("hmm", "opaque", "openai"), TextPart("hello"))),
    ]
    await create_agent(model(server)).arun("again", message_history=history)
    assert server.bodies[0]["messages"][1]["content"] == [{"type": "text", "text": "hello"}]


async def test_streaming_deltas_reach_the_event_stream() -> None:
    server = MockServer(
        [
            reply(
                [text_block("Let me see"), tool_block("toolu_9", "get_weather", '{"city":"Oslo"}')],
                stop_reason="tool_use",
            ),
            reply([text_block("Done")]),
        ]
    )
    agent = create_agent(model(server), tools=[get_weather])
    events = [e async for e in agent.stream("Weather?")]
    deltas = [e for e in events if isinstance(e, ModelDelta)]

    text = "".join(d.delta for d in deltas if d.part == "text")
    assert text == "Let me seeDone"
    args = [d for d in deltas if d.part == "tool_call"]
    # The deltas name the call by tether's id: that of the one call Claude named toolu_9.
    (started,) = [e.call for e in events if isinstance(e, ToolCallStarted)]
    assert started.provider_id == "toolu_9"
    assert {d.call_id for d in args} == {started.id}
    assert "".join(d.delta for d in args) == '{"city":"Oslo"}'


async def test_rate_limit_is_retried_then_succeeds() -> None:
    limited = error_reply(
        429, {"type": "error", "error": {"type": "rate_limit_error", "message": "Slow down"}}
    )
    server = MockServer([limited, reply([text_block("ok")])])
    result = await create_agent(model(server)).arun("Hi")
    assert result.output == "ok"
    assert len(server.bodies) == 2


async def test_server_errors_five_times_fail_with_the_status() -> None:
    overloaded = {"type": "error", "error": {"type": "api_error", "message": "Internal error"}}
    server = MockServer([error_reply(500, overloaded) for _ in range(5)])
    with pytest.raises(ModelHTTPError, match="HTTP 500") as caught:
        await create_agent(model(server)).arun("Hi")
    assert caught.value.status_code == 500
    assert len(server.bodies) == 5  # one try and the four default retries
    assert caught.value.result is not None
    assert caught.value.result.stop_reason == "error"


async def test_bad_key_fails_at_once_naming_the_variable() -> None:
    denied = {
        "type": "error",
        "error": {"type": "authentication_error", "message": "invalid x-api-key"},
    }
    server = MockServer([error_reply(401, denied)])
    with pytest.raises(ModelHTTPError, match="ANTHROPIC_API_KEY") as caught:
        await create_agent(model(server)).arun("Hi")
    assert caught.value.status_code == 401
    assert len(server.bodies) == 1


async def test_bad_request_fails_at_once() -> None:
    invalid = {"type": "error", "error": {"type": "invalid_request_error", "message": "max_tokens"}}
    server = MockServer([error_reply(400, invalid)])
    with pytest.raises(ModelHTTPError, match=r"rejected the request .* \(HTTP 400\): max_tokens"):
        await create_agent(model(server)).arun("Hi")
    assert len(server.bodies) == 1


async def test_error_event_inside_the_stream_is_a_model_error() -> None:
    body = claude_stream([text_block("Hel")], complete=False) + sse(
        [
            (
                "error",
                {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}},
            )
        ]
    )
    server = MockServer([stream_reply(body)])
    with pytest.raises(ModelError, match="Overloaded"):
        await create_agent(model(server)).arun("Hi")


async def test_truncated_stream_is_an_error_and_keeps_the_run() -> None:
    server = MockServer([stream_reply(claude_stream([text_block("Half an ans")], complete=False))])
    with pytest.raises(ModelError, match="ended before the reply was complete") as caught:
        await create_agent(model(server)).arun("Hi")
    assert caught.value.result is not None
    assert caught.value.result.messages[0] == UserMessage.of("Hi")


async def test_tool_call_cut_by_max_tokens_is_reported_not_run() -> None:
    runs: list[str] = []

    @tool
    def write_note(text: str) -> str:
        """Save a note."""
        runs.append(text)
        return "saved"

    server = MockServer(
        [
            reply(
                [tool_block("toolu_1", "write_note", '{"text": "a very long no')],
                stop_reason="max_tokens",
            ),
            reply([text_block("I will keep it shorter.")]),
        ]
    )
    result = await create_agent(model(server), tools=[write_note]).arun("Write")

    assert runs == []
    call = result.messages[1].tool_calls[0]  # type: ignore[union-attr]
    assert call.args == '{"text": "a very long no'
    sent = server.bodies[1]["messages"]
    assert sent[1]["content"][0]["input"] == {}  # never broken JSON on the wire
    feedback = sent[2]["content"][0]
    assert feedback["is_error"] is True
    assert "cut off" in feedback["content"][0]["text"]


async def test_forced_output_names_the_final_result_tool() -> None:
    from pydantic import BaseModel

    class Answer(BaseModel):
        city: str

    server = MockServer(
        [
            reply([text_block("It is Oslo.")]),
            reply(
                [tool_block("toolu_f", "final_result", '{"city": "Oslo"}')], stop_reason="tool_use"
            ),
        ]
    )
    result = await create_agent(model(server), output_type=Answer).arun("Which city?")

    assert result.output == Answer(city="Oslo")
    assert "tool_choice" not in server.bodies[0]
    assert server.bodies[1]["tool_choice"] == {"type": "tool", "name": "final_result"}


def test_missing_key_names_the_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    from tether import ConfigurationError

    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    with pytest.raises(ConfigurationError, match="ANTHROPIC_API_KEY"):
        AnthropicModel(MODEL)


def test_model_settings_extra_goes_to_the_wire() -> None:
    from tether.models import ModelRequest, ModelSettings

    m = AnthropicModel(MODEL, api_key="k")
    settings = ModelSettings(
        timeout_seconds=30,
        max_tokens=2000,
        temperature=0.2,
        extra={"thinking": {"type": "enabled", "budget_tokens": 1024}},
    )
    params = m.params(
        ModelRequest("sys", (UserMessage.of("hi"),), settings=settings, force_output=True)
    )
    assert params["max_tokens"] == 2000
    assert params["timeout"] == 30  # the per-request timeout
    assert m.params(ModelRequest("sys", (UserMessage.of("hi"),)))["timeout"] == 600
    assert params["temperature"] == 0.2
    assert params["extra_body"] == {"thinking": {"type": "enabled", "budget_tokens": 1024}}
    assert "tool_choice" not in params


async def test_compaction_keeps_the_cache_breakpoints_and_summarizes_on_the_wire() -> None:
    from tether import Limits
    from tether.models import ModelProfile

    def answer(request: Any) -> Any:
        body = json.loads(request.content)
        # The API would report about one token per four characters of the request.
        usage = {"input_tokens": len(request.content) // 4}
        if "tools" not in body:
            return reply([text_block("## Session intent\nWeather for many cities.")], usage=usage)
        turns = sum(1 for m in body["messages"] if m["role"] == "assistant")
        if len(server.bodies) > 12:
            return reply([text_block("All sunny.")], usage=usage)
        city = f"City{len(server.bodies)}"
        args = json.dumps({"city": city + " " + "x" * 1_500})
        return reply(
            [tool_block(f"toolu_{len(server.bodies)}_{turns}", "get_weather", args)],
            stop_reason="tool_use",
            usage=usage,
        )

    server = MockServer([answer] * 40)
    claude = model(server, profile=ModelProfile(max_input_tokens=6_000, supports_caching=True))
    agent = create_agent(claude, tools=[get_weather], limits=Limits(max_steps=None))
    result = await agent.arun("Weather everywhere?")

    assert result.output == "All sunny."
    summaries = [b for b in server.bodies if "tools" not in b]
    assert summaries, "the history was never summarized"
    for body in server.bodies:
        marks = json.dumps(body).count('"cache_control"')
        assert marks <= 4  # the API refuses more than four breakpoints
        if "tools" in body:
            assert body["system"][0]["cache_control"] == {"type": "ephemeral"}
            assert body["tools"][-1]["cache_control"] == {"type": "ephemeral"}
            assert len(json.dumps(body)) // 4 <= 6_000
    after = next(
        b
        for b in server.bodies
        if "tools" in b and "Summary of the conversation" in json.dumps(b["messages"][0])
    )
    assert after["messages"][0]["role"] == "user"
    assert after["messages"][1]["role"] == "assistant"


async def test_tool_input_that_is_not_an_object_is_saved_and_reads_back(tmp_path: Any) -> None:
    # Claude can send a tool input that is a list or a number, and text with a lone
    # surrogate escape; the thread must still save, load, and go on.
    server = MockServer(
        [
            reply(
                [
                    tool_block("toolu_list", "get_weather", "[1, 2, 3]"),
                    tool_block("toolu_number", "get_weather", "7"),
                    tool_block("toolu_ok", "get_weather", '{"city": "Oslo"}'),
                ],
                stop_reason="tool_use",
            ),
            reply([text_block("Broken \ud83d text.")]),
        ]
    )
    url = f"sqlite:///{tmp_path}/runs.db"
    agent = create_agent(model(server), tools=[get_weather], checkpointer=url)
    result = await agent.arun("Weather?", thread_id="t")
    assert result.stop_reason == "completed"
    calls = next(m for m in result.messages if isinstance(m, AssistantMessage)).tool_calls
    assert [c.args for c in calls[:2]] == ["[1, 2, 3]", "7"]
    saved = await agent.ahistory("t")
    assert len(saved) == len(result.messages)
    errors = [r for r in saved[2].results if r.is_error]  # type: ignore[union-attr]
    wanted = [own_id(saved, "toolu_list"), own_id(saved, "toolu_number")]
    assert [r.call_id for r in errors] == wanted
    assert "object" in errors[0].text
    assert saved[2].results[2].text == "Sunny in Oslo"  # type: ignore[union-attr]
    assert saved[-1].text == "Broken \ufffd text."  # type: ignore[union-attr]
    # The saved thread goes on: a new run on it reads it back whole.
    server.replies.append(reply([text_block("Again.")]))
    again = await agent.arun("Once more?", thread_id="t")
    assert again.output == "Again."


async def test_the_reply_carries_the_providers_message_id() -> None:
    from tether.models import ModelRequest

    server = MockServer([reply([text_block("Hi")])])
    response = await model(server).request(ModelRequest("", (UserMessage.of("Hi"),)))
    assert response.response_id == "msg_01XFDUDYJgAACzvnptvVoYEL"


async def test_a_refusal_ends_the_run_content_filter_with_its_text_kept() -> None:
    from tether import ContentFilterError

    server = MockServer([reply([text_block("I can't help with")], stop_reason="refusal")])
    with pytest.raises(ContentFilterError) as caught:
        await create_agent(model(server)).arun("Hi")
    result = caught.value.result
    assert result is not None
    assert result.stop_reason == "content_filter"
    assert result.messages[-1].text == "I can't help with"
