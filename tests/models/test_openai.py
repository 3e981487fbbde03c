"""OpenAIModel against recorded Chat Completions and Responses payloads (SSE, errors)."""

from __future__ import annotations

import json
import re
from typing import Any

import pytest
from pydantic import BaseModel

from tether import ConfigurationError, ModelError, ModelHTTPError, create_agent, tool
from tether.events import ModelDelta, ToolCallStarted
from tether.messages import BinaryPart, TextPart, ThinkingPart, ToolCall, Usage, UserMessage
from tether.models import ModelSettings
from tether.models.openai import OpenAIModel

from .wire import MockServer, error_reply, sse, stream_reply

GPT = "gpt-5.2"


@tool
def get_weather(city: str) -> str:
    """Current weather in a city."""
    return f"Sunny in {city}"


class Answer(BaseModel):
    city: str


# -- Chat Completions wire -----------------------------------------------------------


def chat_chunk(delta: dict[str, Any], finish: str | None = None, model: str = GPT) -> Any:
    return (
        None,
        {
            "id": "chatcmpl-B9MBs8CjcvOU2jLn4n570S5qMJKcT",
            "object": "chat.completion.chunk",
            "created": 1741569952,
            "model": model,
            "system_fingerprint": "fp_3a5770e1b4",
            "choices": [{"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}],
        },
    )


def chat_stream(
    text: str | None = None,
    calls: list[tuple[str, str, str]] = (),  # type: ignore[assignment]
    *,
    finish: str | None = None,
    usage: dict[str, Any] | None = None,
    reasoning: str | None = None,
    model: str = GPT,
    complete: bool = True,
) -> Any:
    """What a Chat Completions stream sends, as OpenAI's docs show it."""
    events = [chat_chunk({"role": "assistant", "content": ""}, model=model)]
    if reasoning:
        events.append(chat_chunk({"reasoning_content": reasoning}, model=model))
    if text:
        middle = len(text) // 2
        events += [
            chat_chunk({"content": piece}, model=model) for piece in (text[:middle], text[middle:])
        ]
    for index, (call_id, name, args) in enumerate(calls):
        events.append(
            chat_chunk(
                {
                    "tool_calls": [
                        {
                            "index": index,
                            "id": call_id,
                            "type": "function",
                            "function": {"name": name, "arguments": ""},
                        }
                    ]
                },
                model=model,
            )
        )
        middle = len(args) // 2
        events += [
            chat_chunk(
                {"tool_calls": [{"index": index, "function": {"arguments": piece}}]}, model=model
            )
            for piece in (args[:middle], args[middle:])
        ]
    if not complete:
        return stream_reply(sse(events))
    events.append(chat_chunk({}, finish or ("tool_calls" if calls else "stop"), model=model))
    events.append(
        (
            None,
            {
                "id": "chatcmpl-B9MBs8CjcvOU2jLn4n570S5qMJKcT",
                "object": "chat.completion.chunk",
                "created": 1741569952,
                "model": model,
                "choices": [],
                "usage": usage
                or {
                    "prompt_tokens": 40,
                    "completion_tokens": 9,
                    "total_tokens": 49,
                    "prompt_tokens_details": {"cached_tokens": 0, "audio_tokens": 0},
                    "completion_tokens_details": {"reasoning_tokens": 0},
                },
            },
        )
    )
    events.append((None, "[DONE]"))
    return stream_reply(sse(events))


def chat_model(server: MockServer, **kwargs: Any) -> OpenAIModel:
    return OpenAIModel(GPT, api="chat", api_key="sk-test", http_client=server.client(), **kwargs)


async def test_chat_text_reply_request_and_usage() -> None:
    usage = {
        "prompt_tokens": 1200,
        "completion_tokens": 30,
        "total_tokens": 1230,
        "prompt_tokens_details": {"cached_tokens": 1024},
    }
    server = MockServer([chat_stream("Hello there", usage=usage)])
    result = await create_agent(chat_model(server), system_prompt="Be brief.").arun("Hi")

    assert result.output == "Hello there"
    assert result.usage == Usage(
        input_tokens=1200, output_tokens=30, cache_read_tokens=1024, requests=1
    )
    (body,) = server.bodies
    assert server.paths == ["/v1/chat/completions"]
    assert body["stream"] is True
    assert body["stream_options"] == {"include_usage": True}
    assert body["messages"][0]["role"] == "system"
    assert body["messages"][0]["content"].startswith("Be brief.")
    assert body["messages"][1] == {"role": "user", "content": "Hi"}


async def test_chat_tool_calls_round_trip_in_parallel() -> None:
    server = MockServer(
        [
            chat_stream(
                calls=[
                    ("call_a", "get_weather", '{"city": "Oslo"}'),
                    ("call_b", "get_weather", '{"city": "Rome"}'),
                ]
            ),
            chat_stream("Both sunny."),
        ]
    )
    result = await create_agent(chat_model(server), tools=[get_weather]).arun("Oslo and Rome?")

    assert result.output == "Both sunny."
    first, second = server.bodies
    assert first["tools"][:1] == [
        {
            "type": "function",
            "function": {
                "name": "get_weather",
                "description": "Current weather in a city.",
                "parameters": get_weather.parameters,
            },
        }
    ]
    assistant, tool_a, tool_b = second["messages"][2:5]
    assert assistant == {
        "role": "assistant",
        "content": "",  # never null: llama.cpp's server fails on it (HTTP 500)
        "tool_calls": [
            {
                "id": "call_a",
                "type": "function",
                "function": {"name": "get_weather", "arguments": '{"city": "Oslo"}'},
            },
            {
                "id": "call_b",
                "type": "function",
                "function": {"name": "get_weather", "arguments": '{"city": "Rome"}'},
            },
        ],
    }
    assert tool_a == {"role": "tool", "tool_call_id": "call_a", "content": "Sunny in Oslo"}
    assert tool_b == {"role": "tool", "tool_call_id": "call_b", "content": "Sunny in Rome"}


async def test_chat_images_and_pdfs() -> None:
    server = MockServer([chat_stream("A cat.")])
    prompt = UserMessage(
        (
            TextPart("What is this?"),
            BinaryPart(b"png", "image/png"),
            BinaryPart(b"%PDF", "application/pdf"),
        )
    )
    await create_agent(chat_model(server)).arun(prompt)
    content = server.bodies[0]["messages"][1]["content"]
    assert content[0] == {"type": "text", "text": "What is this?"}
    assert content[1] == {"type": "image_url", "image_url": {"url": "data:image/png;base64,cG5n"}}
    assert content[2] == {
        "type": "file",
        "file": {"filename": "document.pdf", "file_data": "data:application/pdf;base64,JVBERg=="},
    }


async def test_chat_image_tool_results_follow_as_a_user_turn() -> None:
    @tool
    def screenshot() -> BinaryPart:
        """Take a screenshot."""
        return BinaryPart(b"png", "image/png")

    server = MockServer(
        [chat_stream(calls=[("call_s", "screenshot", "{}")]), chat_stream("A page.")]
    )
    await create_agent(chat_model(server), tools=[screenshot]).arun("Look")
    tool_msg, media = server.bodies[1]["messages"][3:5]
    assert tool_msg["role"] == "tool"
    assert media == {
        "role": "user",
        "content": [{"type": "image_url", "image_url": {"url": "data:image/png;base64,cG5n"}}],
    }


async def test_chat_deltas_stream_with_call_ids() -> None:
    server = MockServer(
        [
            chat_stream("Let me see", calls=[("call_9", "get_weather", '{"city":"Oslo"}')]),
            chat_stream("Done"),
        ]
    )
    agent = create_agent(chat_model(server), tools=[get_weather])
    events = [e async for e in agent.stream("Weather?")]
    deltas = [e for e in events if isinstance(e, ModelDelta)]
    assert "".join(d.delta for d in deltas if d.part == "text") == "Let me seeDone"
    args = [d for d in deltas if d.part == "tool_call"]
    # The deltas name the call by tether's id: that of the one call the server named call_9.
    (started,) = [e.call for e in events if isinstance(e, ToolCallStarted)]
    assert started.provider_id == "call_9"
    assert {d.call_id for d in args} == {started.id}
    assert "".join(d.delta for d in args) == '{"city":"Oslo"}'


async def test_chat_rate_limit_then_success() -> None:
    limited = error_reply(
        429,
        {
            "error": {
                "message": "Rate limit reached",
                "type": "requests",
                "code": "rate_limit_exceeded",
            }
        },
    )
    server = MockServer([limited, chat_stream("ok")])
    assert (await create_agent(chat_model(server)).arun("Hi")).output == "ok"
    assert len(server.bodies) == 2


async def test_chat_server_errors_five_times_fail() -> None:
    error = {"error": {"message": "The server had an error", "type": "server_error", "code": None}}
    server = MockServer([error_reply(500, error) for _ in range(5)])
    with pytest.raises(ModelHTTPError, match="HTTP 500") as caught:
        await create_agent(chat_model(server)).arun("Hi")
    assert len(server.bodies) == 5
    assert caught.value.result is not None


async def test_chat_bad_key_fails_at_once() -> None:
    error = {
        "error": {
            "message": "Incorrect API key provided",
            "type": "invalid_request_error",
            "code": "invalid_api_key",
        }
    }
    server = MockServer([error_reply(401, error)])
    with pytest.raises(
        ModelHTTPError, match=r"HTTP 401\): Incorrect API key provided\. Check OPENAI_API_KEY"
    ):
        await create_agent(chat_model(server)).arun("Hi")
    assert len(server.bodies) == 1


async def test_connection_errors_are_retried_then_reported() -> None:
    import httpx2

    def refuse(request: httpx2.Request) -> httpx2.Response:
        raise httpx2.ConnectError("connection refused", request=request)

    server = MockServer([refuse, refuse, chat_stream("ok")])
    assert (await create_agent(chat_model(server)).arun("Hi")).output == "ok"

    server = MockServer([refuse] * 3)
    with pytest.raises(ModelError, match="could not connect") as caught:
        await create_agent(chat_model(server, max_retries=2)).arun("Hi")
    assert not isinstance(caught.value, ModelHTTPError)
    assert "ConnectError: connection refused" in str(caught.value)
    assert "/chat/completions, after 2 retries]" in str(caught.value)
    assert caught.value.retries == 2
    assert len(server.bodies) == 3


async def test_chat_truncated_stream_is_a_model_error() -> None:
    server = MockServer([chat_stream("Half an ans", complete=False)])
    with pytest.raises(ModelError, match="ended before the reply was complete"):
        await create_agent(chat_model(server)).arun("Hi")


async def test_chat_call_cut_by_length_is_not_run_nor_sent_broken() -> None:
    runs: list[str] = []

    @tool
    def write_note(text: str) -> str:
        """Save a note."""
        runs.append(text)
        return "saved"

    server = MockServer(
        [
            chat_stream(calls=[("call_w", "write_note", '{"text": "a very lo')], finish="length"),
            chat_stream("Shorter then."),
        ]
    )
    await create_agent(chat_model(server), tools=[write_note]).arun("Write")
    assert runs == []
    sent = server.bodies[1]["messages"]
    assert sent[2]["tool_calls"][0]["function"]["arguments"] == "{}"
    assert "cut off" in sent[3]["content"]


async def test_chat_forced_output_uses_json_schema_response_format() -> None:
    server = MockServer([chat_stream("It is Oslo."), chat_stream('{"city": "Oslo"}')])
    result = await create_agent(chat_model(server), output_type=Answer).arun("Which city?")

    assert result.output == Answer(city="Oslo")
    assert "response_format" not in server.bodies[0]
    forced = server.bodies[1]
    assert forced["response_format"]["type"] == "json_schema"
    assert forced["response_format"]["json_schema"]["name"] == "final_result"
    assert forced["response_format"]["json_schema"]["schema"]["required"] == ["city"]
    assert forced["tool_choice"] == "none"


async def test_compatible_server_needs_no_key_and_keeps_reasoning(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    server = MockServer([chat_stream("42", reasoning="Six times seven.", model="qwen3")])
    model = OpenAIModel("qwen3", base_url="http://localhost:8000/v1", http_client=server.client())
    assert model.api == "chat"
    assert model.provider is None
    agent = create_agent(model, model_settings=ModelSettings(max_tokens=300))
    result = await agent.arun("6*7?")

    assert result.output == "42"
    assert result.messages[-1].parts[0] == ThinkingPart("Six times seven.")  # type: ignore[union-attr]
    assert server.bodies[0]["max_tokens"] == 300
    assert "max_completion_tokens" not in server.bodies[0]


async def test_compatible_server_without_structured_output_forces_the_tool() -> None:
    server = MockServer(
        [
            chat_stream("Oslo.", model="qwen3"),
            chat_stream(calls=[("c1", "final_result", '{"city": "Oslo"}')], model="qwen3"),
        ]
    )
    model = OpenAIModel("qwen3", base_url="http://localhost:8000/v1", http_client=server.client())
    result = await create_agent(model, output_type=Answer).arun("City?")
    assert result.output == Answer(city="Oslo")
    assert server.bodies[1]["tool_choice"] == {
        "type": "function",
        "function": {"name": "final_result"},
    }


def test_openai_without_key_names_the_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    with pytest.raises(ConfigurationError, match="OPENAI_API_KEY"):
        OpenAIModel(GPT)


def test_base_url_from_the_environment_selects_chat(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_BASE_URL", "http://localhost:11434/v1")
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    assert OpenAIModel("llama3.2").api == "chat"


# -- Responses wire ------------------------------------------------------------------


def response_object(
    output: list[dict[str, Any]], *, status: str = "completed", **extra: Any
) -> dict[str, Any]:
    return {
        "id": "resp_67ccd2bed1ec8190b14f964abc054267",
        "object": "response",
        "created_at": 1741476542,
        "status": status,
        "model": "gpt-5.2-2025-12-11",
        "output": output,
        "parallel_tool_calls": True,
        "tool_choice": "auto",
        "tools": [],
        "usage": {
            "input_tokens": 36,
            "input_tokens_details": {"cached_tokens": 0},
            "output_tokens": 87,
            "output_tokens_details": {"reasoning_tokens": 0},
            "total_tokens": 123,
        },
        **extra,
    }


def message_item(text: str) -> dict[str, Any]:
    return {
        "id": "msg_67ccd2bf17f0819081ff3bb2cf6508e6",
        "type": "message",
        "status": "completed",
        "role": "assistant",
        "content": [{"type": "output_text", "text": text, "annotations": []}],
    }


def call_item(call_id: str, name: str, args: str) -> dict[str, Any]:
    return {
        "id": f"fc_{call_id}",
        "type": "function_call",
        "status": "completed",
        "call_id": call_id,
        "name": name,
        "arguments": args,
    }


def reasoning_item(summary: str, encrypted: str) -> dict[str, Any]:
    return {
        "id": "rs_6820f383d7c08191846711c5df8233bc",
        "type": "reasoning",
        "summary": [{"type": "summary_text", "text": summary}],
        "encrypted_content": encrypted,
    }


def responses_stream(
    output: list[dict[str, Any]], *, final: str = "response.completed", **extra: Any
) -> Any:
    """The events the Responses API streams for `output`, ending in `final`."""
    events: list[tuple[str, Any]] = [
        (
            "response.created",
            {
                "type": "response.created",
                "sequence_number": 0,
                "response": response_object([], status="in_progress"),
            },
        ),
    ]
    for index, item in enumerate(output):
        added = {**item, "status": "in_progress"}
        if item["type"] == "function_call":
            added["arguments"] = ""
        if item["type"] == "message":
            added["content"] = []
        events.append(
            (
                "response.output_item.added",
                {
                    "type": "response.output_item.added",
                    "output_index": index,
                    "item": added,
                    "sequence_number": len(events),
                },
            )
        )
        if item["type"] == "message":
            events.append(
                (
                    "response.output_text.delta",
                    {
                        "type": "response.output_text.delta",
                        "item_id": item["id"],
                        "output_index": index,
                        "content_index": 0,
                        "delta": item["content"][0]["text"],
                        "logprobs": [],
                        "sequence_number": len(events),
                    },
                )
            )
        elif item["type"] == "function_call":
            events.append(
                (
                    "response.function_call_arguments.delta",
                    {
                        "type": "response.function_call_arguments.delta",
                        "item_id": item["id"],
                        "output_index": index,
                        "delta": item["arguments"],
                        "sequence_number": len(events),
                    },
                )
            )
        elif item["type"] == "reasoning":
            events.append(
                (
                    "response.reasoning_summary_text.delta",
                    {
                        "type": "response.reasoning_summary_text.delta",
                        "item_id": item["id"],
                        "output_index": index,
                        "summary_index": 0,
                        "delta": item["summary"][0]["text"],
                        "sequence_number": len(events),
                    },
                )
            )
    status = {
        "response.completed": "completed",
        "response.incomplete": "incomplete",
        "response.failed": "failed",
    }[final]
    events.append(
        (
            final,
            {
                "type": final,
                "sequence_number": len(events),
                "response": response_object(output, status=status, **extra),
            },
        )
    )
    return stream_reply(sse(events))


def responses_model(server: MockServer) -> OpenAIModel:
    return OpenAIModel(GPT, api_key="sk-test", http_client=server.client())


async def test_responses_text_reply_request() -> None:
    server = MockServer([responses_stream([message_item("Hello there")])])
    model = responses_model(server)
    assert model.api == "responses"
    result = await create_agent(model, system_prompt="Be brief.").arun("Hi")

    assert result.output == "Hello there"
    assert result.usage == Usage(input_tokens=36, output_tokens=87, requests=1)
    assert result.messages[-1].model_name == "gpt-5.2-2025-12-11"  # type: ignore[union-attr]
    (body,) = server.bodies
    assert server.paths == ["/v1/responses"]
    assert body["instructions"].startswith("Be brief.")
    assert body["input"] == [{"role": "user", "content": [{"type": "input_text", "text": "Hi"}]}]
    assert body["store"] is False
    assert body["include"] == ["reasoning.encrypted_content"]


async def test_responses_tool_calls_and_reasoning_round_trip() -> None:
    server = MockServer(
        [
            responses_stream(
                [
                    reasoning_item("Need the weather.", "gAAAAB-encrypted"),
                    call_item("call_a", "get_weather", '{"city": "Oslo"}'),
                    call_item("call_b", "get_weather", '{"city": "Rome"}'),
                ]
            ),
            responses_stream([message_item("Both sunny.")]),
        ]
    )
    result = await create_agent(responses_model(server), tools=[get_weather]).arun("Oslo, Rome?")

    assert result.output == "Both sunny."
    first, second = server.bodies
    assert first["tools"][0] == {
        "type": "function",
        "name": "get_weather",
        "description": "Current weather in a city.",
        "parameters": get_weather.parameters,
        "strict": False,
    }
    assert second["input"][1:] == [
        {
            "type": "reasoning",
            "id": "rs_6820f383d7c08191846711c5df8233bc",
            "summary": [{"type": "summary_text", "text": "Need the weather."}],
            "encrypted_content": "gAAAAB-encrypted",
        },
        {
            "type": "function_call",
            "call_id": "call_a",
            "name": "get_weather",
            "arguments": '{"city": "Oslo"}',
        },
        {
            "type": "function_call",
            "call_id": "call_b",
            "name": "get_weather",
            "arguments": '{"city": "Rome"}',
        },
        {"type": "function_call_output", "call_id": "call_a", "output": "Sunny in Oslo"},
        {"type": "function_call_output", "call_id": "call_b", "output": "Sunny in Rome"},
    ]


async def test_responses_images() -> None:
    server = MockServer([responses_stream([message_item("A cat.")])])
    await create_agent(responses_model(server)).arun(
        UserMessage((TextPart("What?"), BinaryPart(b"png", "image/png")))
    )
    assert server.bodies[0]["input"][0]["content"][1] == {
        "type": "input_image",
        "image_url": "data:image/png;base64,cG5n",
        "detail": "auto",
    }


async def test_responses_forced_output_uses_text_format() -> None:
    server = MockServer(
        [
            responses_stream([message_item("Oslo.")]),
            responses_stream([message_item('{"city": "Oslo"}')]),
        ]
    )
    result = await create_agent(responses_model(server), output_type=Answer).arun("City?")
    assert result.output == Answer(city="Oslo")
    fmt = server.bodies[1]["text"]["format"]
    assert (fmt["type"], fmt["name"], fmt["strict"]) == ("json_schema", "final_result", False)
    assert server.bodies[1]["tool_choice"] == "none"


async def test_responses_incomplete_call_is_reported_as_cut_off() -> None:
    server = MockServer(
        [
            responses_stream(
                [call_item("call_w", "get_weather", '{"city": "Os')],
                final="response.incomplete",
                incomplete_details={"reason": "max_output_tokens"},
            ),
            responses_stream([message_item("Sorry.")]),
        ]
    )
    result = await create_agent(responses_model(server), tools=[get_weather]).arun("Weather?")
    (call,) = result.messages[1].tool_calls  # type: ignore[union-attr]
    assert call == ToolCall("get_weather", '{"city": "Os', call.id, provider_id="call_w")
    assert result.messages[2].results[0].call_id == call.id  # type: ignore[union-attr]
    sent = server.bodies[1]["input"]
    assert sent[1]["arguments"] == "{}"
    assert "cut off" in sent[2]["output"]


async def test_responses_failed_is_a_model_error() -> None:
    server = MockServer(
        [
            responses_stream(
                [],
                final="response.failed",
                error={"code": "server_error", "message": "The model failed to respond"},
            )
        ]
    )
    with pytest.raises(ModelError, match="The model failed to respond"):
        await create_agent(responses_model(server)).arun("Hi")


@pytest.mark.parametrize(
    ("field", "value", "said"),
    [
        ("name", None, "whose name is None"),
        ("call_id", 7, "whose call_id is 7"),
        ("arguments", None, "whose arguments are None"),
        ("arguments", {"city": "Oslo"}, "whose arguments are {'city': 'Oslo'}"),
    ],
)
async def test_responses_call_with_odd_fields_is_a_model_error(
    field: str, value: object, said: str
) -> None:
    """A server speaking the Responses API (a proxy, Azure's v1) with a null or odd field
    in a function call: a clear error that is not retried, never a crash of the run nor
    a call run with arguments made up."""
    called: list[str] = []

    @tool
    def weather(city: str = "Paris") -> str:
        """Weather for a city."""
        called.append(city)
        return "sunny"

    item = {**call_item("call_w", "weather", '{"city": "Oslo"}'), field: value}
    server = MockServer([responses_stream([item])])
    with pytest.raises(ModelError, match=re.escape(said)) as caught:
        await create_agent(responses_model(server), tools=[weather]).arun("Weather?")
    assert not caught.value.transient
    assert called == []
    assert len(server.bodies) == 1


def test_tool_arguments_on_the_wire_are_always_json() -> None:
    from tether.models.openai import _encode

    assert json.loads(_encode({"a": 1})) == {"a": 1}
    assert _encode("{broken") == "{}"


async def test_replies_carry_the_providers_response_id() -> None:
    from tether.models import ModelRequest

    request = ModelRequest("", (UserMessage.of("Hi"),))
    server = MockServer([responses_stream([message_item("Hi")]), chat_stream("Hi")])
    answered = await responses_model(server).request(request)
    assert answered.response_id == "resp_67ccd2bed1ec8190b14f964abc054267"
    answered = await chat_model(server).request(request)
    assert answered.response_id == "chatcmpl-B9MBs8CjcvOU2jLn4n570S5qMJKcT"


def test_azure_deployments_are_named_by_the_model_string(monkeypatch: pytest.MonkeyPatch) -> None:
    from tether.models import infer_model
    from tether.models.openai import AZURE_API_VERSION

    for variable in ("AZURE_OPENAI_ENDPOINT", "AZURE_OPENAI_API_KEY", "OPENAI_API_VERSION"):
        monkeypatch.delenv(variable, raising=False)
    with pytest.raises(ConfigurationError, match="set AZURE_OPENAI_ENDPOINT"):
        infer_model("azure:gpt-52-prod")
    monkeypatch.setenv("AZURE_OPENAI_ENDPOINT", "https://acme.openai.azure.com/")
    with pytest.raises(ConfigurationError, match="AZURE_OPENAI_API_KEY"):
        infer_model("azure:gpt-52-prod")
    monkeypatch.setenv("AZURE_OPENAI_API_KEY", "az-key")
    model = infer_model("azure:gpt-52-prod")
    assert isinstance(model, OpenAIModel)
    assert (model.name, model.provider, model.api) == ("gpt-52-prod", "azure", "chat")
    assert model.server_url == (
        "https://acme.openai.azure.com/openai/deployments/gpt-52-prod/chat/completions"
        f"?api-version={AZURE_API_VERSION}"
    )


def test_azure_responses_go_to_its_v1_api_without_a_version() -> None:
    from tether.models.openai import azure_model

    model = azure_model(
        "gpt-52-prod", endpoint="https://acme.openai.azure.com/", api_key="k", api="responses"
    )
    assert (model.api, model.provider) == ("responses", "azure")
    assert model.server_url == "https://acme.openai.azure.com/openai/v1/responses"
    with pytest.raises(ConfigurationError, match="takes no api_version"):
        azure_model("d", endpoint="https://a", api_key="k", api="responses", api_version="x")
