from __future__ import annotations

import pytest

from tether.errors import ConfigurationError, ScriptExhaustedError
from tether.messages import AssistantMessage, TextPart, ToolCall, UserMessage
from tether.models import (
    FunctionModel,
    Model,
    ModelRequest,
    ModelResponse,
    ScriptedModel,
    StreamDelta,
    response_of,
)


def request(text: str = "hi") -> ModelRequest:
    return ModelRequest("system", (UserMessage.of(text),))


async def test_scripted_model_replies_in_order_and_records_requests() -> None:
    call = ToolCall("add", {"a": 1, "b": 2})
    model = ScriptedModel([[call], "done"])
    first = await model.request(request("one"))
    second = await model.request(request("two"))
    assert first.message.tool_calls == [call]
    assert second.message.text == "done"
    assert [r.messages[0] for r in model.requests] == [UserMessage.of("one"), UserMessage.of("two")]
    assert model.remaining == 0


async def test_running_past_the_script_raises_a_clear_error() -> None:
    model = ScriptedModel(["only"])
    await model.request(request())
    with pytest.raises(ScriptExhaustedError, match="turn 2, but its script has only 1"):
        await model.request(request())


def test_an_empty_script_is_rejected() -> None:
    with pytest.raises(ConfigurationError, match="at least one turn"):
        ScriptedModel([])


def test_a_string_script_is_rejected() -> None:
    with pytest.raises(ConfigurationError, match="list of turns"):
        ScriptedModel("hello")  # type: ignore[arg-type]


async def test_an_exception_turn_is_raised() -> None:
    model = ScriptedModel([RuntimeError("provider down")])
    with pytest.raises(RuntimeError, match="provider down"):
        await model.request(request())


async def test_a_turn_with_an_unknown_item_is_rejected() -> None:
    model = ScriptedModel([[42]])  # type: ignore[list-item]
    with pytest.raises(ConfigurationError, match="not int"):
        await model.request(request())


async def test_scripted_usage_grows_with_the_request() -> None:
    model = ScriptedModel(["a", "b"])
    short = await model.request(request("x"))
    long = await model.request(request("x" * 4000))
    assert long.usage.input_tokens > short.usage.input_tokens + 900
    assert short.usage.requests == 1


async def test_stream_yields_deltas_then_the_response() -> None:
    model = ScriptedModel([["thinking aloud", ToolCall("t", {"q": 1}, id="c1")]])
    items = [item async for item in model.stream(request())]
    assert items[:2] == [
        StreamDelta("text", "thinking aloud"),
        # the tool named as it streams, the call placed among the reply's calls
        StreamDelta("tool_call", '{"q": 1}', "c1", tool="t", index=0),
    ]
    assert isinstance(items[-1], ModelResponse)


async def test_function_model_decides_from_the_request() -> None:
    async def reply(req: ModelRequest) -> str:
        return f"{len(req.messages)} message(s)"

    model = FunctionModel(reply)
    response = await response_of(model.stream(request()))
    assert response.message.text == "1 message(s)"
    assert len(model.requests) == 1


async def test_function_model_accepts_a_ready_message() -> None:
    message = AssistantMessage((TextPart("ready"),), model_name="mine")
    model = FunctionModel(lambda _: message)
    assert (await model.request(request())).message is message


def test_function_model_needs_a_callable() -> None:
    with pytest.raises(ConfigurationError, match="callable"):
        FunctionModel("nope")  # type: ignore[arg-type]


def test_test_models_satisfy_the_model_protocol() -> None:
    assert isinstance(ScriptedModel(["x"]), Model)
    assert isinstance(FunctionModel(lambda r: "x"), Model)


async def test_the_estimate_matches_a_fresh_count_as_the_history_grows_or_shrinks() -> None:
    grown = ScriptedModel(["a", "b", "c"])
    messages: tuple = (UserMessage.of("x" * 400),)
    first = await grown.request(ModelRequest("s", messages))
    messages = (*messages, first.message, UserMessage.of("y" * 800))
    second = await grown.request(ModelRequest("s", messages))
    trimmed = await grown.request(ModelRequest("s", messages[1:]))

    for sent, response in ((messages, second), (messages[1:], trimmed)):
        fresh = await ScriptedModel(["z"]).request(ModelRequest("s", sent))
        assert response.usage.input_tokens == fresh.usage.input_tokens
