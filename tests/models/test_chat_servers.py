"""The OpenAI-compatible adapter against what real Chat Completions servers send.

Streams recorded from llama-cpp-python's server (tests/models/recorded/, written by
`TETHER_RECORD=1 make interop`), and the shapes other servers are documented or reported
to send (vLLM, Ollama, LM Studio, OpenRouter, Azure), each built here chunk by chunk.
"""

from __future__ import annotations

import json
import re
import warnings
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel

from tether import ModelError, ModelHTTPError, create_agent, tool
from tether.errors import UsageEstimatedWarning
from tether.messages import AssistantMessage, ThinkingPart, ToolCall, Usage, UserMessage
from tether.models import ModelRequest, ToolSpec, _sdk
from tether.models.openai import OpenAIModel, azure_model

from .faults import Reply, serving
from .wire import MockServer, error_reply, sse, stream_reply

RECORDED = Path(__file__).parent / "recorded" / "llama-cpp-python"
# Most replies here come without usage; the tests about the estimate catch its warning.
pytestmark = pytest.mark.filterwarnings("ignore::tether.errors.UsageEstimatedWarning")


class Answer(BaseModel):
    city: str


notes: list[str] = []


@tool
def note(text: str) -> str:
    """Save a note."""
    notes.append(text)
    return f"saved {text!r}"


@pytest.fixture(autouse=True)
def _fresh(monkeypatch: pytest.MonkeyPatch) -> None:
    notes.clear()
    monkeypatch.setattr(_sdk, "FIRST_BACKOFF_SECONDS", 0.01)


def compatible(server: MockServer, name: str = "served-model", **options: Any) -> OpenAIModel:
    """A model on a compatible server (no provider, so no native structured output)."""
    return OpenAIModel(
        name, base_url="http://127.0.0.1:8000/v1", http_client=server.client(), **options
    )


def chunk(
    delta: dict[str, Any] | None = None,
    finish: str | None = None,
    *,
    choices: list[dict[str, Any]] | None = None,
    **top: Any,
) -> dict[str, Any]:
    """One chunk of a chat completion stream; `delta=None` leaves the choice without one."""
    if choices is None:
        choice: dict[str, Any] = {"index": 0, "finish_reason": finish}
        if delta is not None:
            choice["delta"] = delta
        choices = [choice]
    return {
        "id": "chatcmpl-7",
        "object": "chat.completion.chunk",
        "created": 1764000000,
        "model": "served-model",
        "choices": choices,
        **top,
    }


def body(*chunks: dict[str, Any] | str, done: bool = True) -> bytes:
    """An SSE body of `chunks` (a str is sent as a raw line, an SSE comment say)."""
    lines = [c if isinstance(c, str) else f"data: {json.dumps(c)}\n\n" for c in chunks]
    return "".join([*lines, "data: [DONE]\n\n" if done else ""]).encode()


def stream(*chunks: dict[str, Any] | str, done: bool = True) -> Any:
    return stream_reply(body(*chunks, done=done))


def text_reply(text: str = "Done.") -> Any:
    return stream(chunk({"role": "assistant", "content": text}), chunk({}, "stop"))


def request(*, tools: tuple[ToolSpec, ...] = ()) -> ModelRequest:
    return ModelRequest("", (UserMessage.of("Hi"),), tools=tools)


NOTE = ToolSpec("note", "Save a note.", note.parameters)


# -- llama-cpp-python's server, as recorded ---------------------------------------------


def recorded(name: str) -> bytes:
    return (RECORDED / name).read_bytes()


_LLAMA_ID = "chatcmpl-c6bb20f1-34ab-4448-9b1e-88deb8553cc5"


def _llama_chunk(delta: dict[str, Any], finish: str | None = None) -> tuple[None, Any]:
    return (
        None,
        {
            "id": _LLAMA_ID,
            "object": "chat.completion.chunk",
            "created": 1795578907,
            "model": "smollm2",
            "choices": [{"index": 0, "finish_reason": finish, "logprobs": None, "delta": delta}],
        },
    )


def _tokens(text: str) -> list[str]:
    return re.findall(r"\s*\S+", text) or [text]


def llama_text(text: str, *, usage: dict[str, int] | None = None) -> bytes:
    """A text reply as llama-cpp-python 0.3.36 streams it (see recorded/): a token a chunk,
    an empty delta with the finish, no usage (`usage` adds a chunk that says some)."""
    events = [_llama_chunk({"role": "assistant"})]
    events += [_llama_chunk({"content": token}) for token in _tokens(text)]
    events.append(_llama_chunk({}, "stop"))
    if usage is not None:
        events.append((None, {**_llama_chunk({})[1], "choices": [], "usage": usage}))
    return sse([*events, (None, "[DONE]")])


def llama_call(call_id: str, name: str, arguments: str) -> bytes:
    """A forced tool call as llama-cpp-python 0.3.36 streams it: the name and id again in
    every chunk, beside the legacy `function_call`, and no usage."""
    empty = {"role": None, "content": None, "function_call": None, "tool_calls": None}
    events = [_llama_chunk({**empty, "role": "assistant"})]
    middle = len(arguments) // 2  # the server sends a token a chunk; two do here
    for piece in (arguments[:middle], arguments[middle:], ""):
        function = {"name": name, "arguments": piece}
        call = {"index": 0, "id": call_id, "type": "function", "function": function}
        delta = {**empty, "function_call": function, "tool_calls": [call]}
        events.append(_llama_chunk(delta))
    events.append(_llama_chunk(empty, "tool_calls"))
    return sse([*events, (None, "[DONE]")])


def test_the_llama_cpp_shapes_are_the_recorded_ones() -> None:
    """The builders the fault suite uses make what the server sent, byte for byte but for
    the model's words."""
    call = llama_call(
        "call__0_note_cmpl-c6bb20f1-34ab-4448-9b1e-88deb8553cc5", "note", '{ "text": "Paris" }'
    )
    shown = recorded("tool_call.sse").split(b"\n\n")
    assert call.split(b"\n\n")[0] == shown[0]
    assert call.split(b"\n\n")[-3:] == shown[-3:]
    text = llama_text("Hi").split(b"\n\n")
    plain = recorded("plain.sse").split(b"\n\n")
    assert json.loads(text[0][6:])["choices"] == json.loads(plain[0][6:])["choices"]
    assert json.loads(text[-3][6:])["choices"][0] == {
        **json.loads(plain[-3][6:])["choices"][0],
        "finish_reason": "stop",
    }


async def test_llama_cpp_recorded_run_calls_each_tool_once_by_its_name() -> None:
    """The run `make interop` recorded: a forced call of `note` (the name and id in every
    chunk), a reply cut at its token limit, then the forced structured answer."""
    server = MockServer(
        [
            stream_reply(recorded("tool_call.sse")),
            stream_reply(recorded("text_after_tool.sse")),
            stream_reply(recorded("structured.sse")),
        ]
    )
    agent = create_agent(compatible(server, "smollm2"), tools=[note], output_type=Answer)
    with pytest.warns(UsageEstimatedWarning, match="reported no usable input_tokens"):
        result = await agent.arun("Note that Paris is the capital, then name the city.")

    assert result.output == Answer(city="Paris")
    assert notes == ["Paris"]
    calls = [c for m in result.messages if isinstance(m, AssistantMessage) for c in m.tool_calls]
    assert [c.name for c in calls] == ["note", "final_result"]
    assert calls[0].provider_id == "call__0_note_cmpl-c6bb20f1-34ab-4448-9b1e-88deb8553cc5"
    # The call-only turn goes back with content "", which this server takes.
    (turn,) = [m for m in server.bodies[1]["messages"] if m["role"] == "assistant"]
    assert turn["content"] == ""
    assert server.bodies[2]["tool_choice"] == {
        "type": "function",
        "function": {"name": "final_result"},
    }
    # No usage came: every reply is estimated and counted, so token limits hold.
    assert result.usage.requests == 3
    assert result.usage.input_tokens > 1000
    assert result.usage.output_tokens > 3


async def test_llama_cpp_recorded_tool_call_streams_its_arguments_once() -> None:
    server = MockServer([stream_reply(recorded("tool_call.sse"))])
    deltas = []
    async for item in compatible(server, "smollm2").stream(request(tools=(NOTE,))):
        deltas.append(item)
    *streamed, response = deltas
    assert {d.tool for d in streamed} == {"note"}
    assert "".join(d.delta for d in streamed) == '{ "text": "Paris" }'
    (call,) = response.message.tool_calls
    assert (call.name, call.args) == ("note", {"text": "Paris"})
    assert response.finish_reason == "tool_calls"


async def test_llama_cpp_recorded_plain_answer_is_estimated() -> None:
    server = MockServer([stream_reply(recorded("plain.sse"))])
    with pytest.warns(UsageEstimatedWarning):
        result = await create_agent(compatible(server, "smollm2")).arun("Say hello.")
    assert isinstance(result.output, str)
    assert result.output.strip()
    assert result.usage.input_tokens > 0
    assert result.usage.output_tokens > 0


async def test_a_server_error_that_names_a_failed_validation_is_not_retried() -> None:
    """llama-cpp-python answers a request that fails validation with HTTP 500: retrying
    it cannot help, and the person needs the server's words to see why."""
    refused = Reply(
        500,
        recorded("null_content_500.json"),
        {"content-type": "application/json", "x-request-id": "4651b5bd"},
    )
    with serving([refused]) as server:
        model = OpenAIModel("smollm2", base_url=server.url + "/v1")
        with pytest.raises(ModelHTTPError) as caught:
            await create_agent(model, checkpointer=None).arun("Hi")
    error = caught.value
    assert len(server.requests) == 1
    assert error.status_code == 500
    assert not error.transient  # nor handed to a fallback model
    assert "failed on the request for 'smollm2' (HTTP 500): 7 validation errors" in str(error)
    assert "Input should be a valid string" in str(error)
    assert "request id 4651b5bd" in str(error)


@pytest.mark.parametrize(
    "error",
    [
        {"message": "bad schema", "type": "BadRequestError", "param": None, "code": 400},
        {"message": "bad schema", "type": "invalid_request_error", "code": None},
    ],
    ids=["vllm", "openai-style"],
)
async def test_a_server_error_whose_body_names_a_bad_request_is_not_retried(
    error: dict[str, Any],
) -> None:
    server = MockServer([error_reply(500, {"error": error}), text_reply()])
    with pytest.raises(ModelHTTPError, match=r"\(HTTP 500\): bad schema") as caught:
        await create_agent(compatible(server)).arun("Hi")
    assert len(server.bodies) == 1
    assert not caught.value.transient


async def test_a_plain_internal_error_is_still_retried() -> None:
    failing = {"error": {"message": "The server had an error", "type": "server_error"}}
    server = MockServer([error_reply(500, failing), text_reply("ok")])
    assert (await create_agent(compatible(server)).arun("Hi")).output == "ok"
    assert len(server.bodies) == 2


# -- tool calls as other servers stream them --------------------------------------------


def _call(
    function: dict[str, Any], *, index: int | None = None, call_id: str | None = None
) -> dict[str, Any]:
    piece: dict[str, Any] = {"type": "function", "function": function}
    if index is not None:
        piece["index"] = index
    if call_id is not None:
        piece["id"] = call_id
    return piece


async def _calls(*chunks: dict[str, Any]) -> tuple[list[ToolCall], str | None, list[Any]]:
    """The calls, finish reason and streamed deltas of one reply made of `chunks`."""
    server = MockServer([stream(*chunks)])
    items = [i async for i in compatible(server).stream(request(tools=(NOTE,)))]
    *deltas, response = items
    return response.message.tool_calls, response.finish_reason, deltas


async def test_calls_without_an_index_each_whole_with_finish_stop() -> None:
    """Ollama 0.4 (ollama/ollama#7881): no `index`, each call whole in one chunk; with
    "stop", as Gemini's OpenAI endpoint says (googleapis/python-genai#2868)."""
    calls, finish, _ = await _calls(
        chunk({"role": "assistant", "content": ""}),
        chunk(
            {
                "tool_calls": [
                    _call({"name": "note", "arguments": '{"text":"a"}'}, call_id="call_x1")
                ]
            }
        ),
        chunk(
            {
                "tool_calls": [
                    _call({"name": "note", "arguments": '{"text":"b"}'}, call_id="call_x2")
                ]
            }
        ),
        chunk({}, "stop"),
    )
    assert [(c.name, c.args, c.id) for c in calls] == [
        ("note", {"text": "a"}, "call_x1"),
        ("note", {"text": "b"}, "call_x2"),
    ]
    assert finish == "tool_calls"


async def test_a_finish_of_tool_calls_without_any_is_a_stop() -> None:
    """LM Studio has been seen to say "tool_calls" for a reply that made none."""
    calls, finish, _ = await _calls(chunk({"content": "Hello"}), chunk({}, "tool_calls"))
    assert (calls, finish) == ([], "stop")


async def test_calls_all_numbered_zero_are_told_apart_by_their_ids() -> None:
    calls, _, deltas = await _calls(
        chunk({"tool_calls": [_call({"name": "note", "arguments": ""}, index=0, call_id="c1")]}),
        chunk({"tool_calls": [_call({"arguments": '{"text":"a"}'}, index=0)]}),
        chunk({"tool_calls": [_call({"name": "note", "arguments": ""}, index=0, call_id="c2")]}),
        chunk({"tool_calls": [_call({"arguments": '{"text":"b"}'}, index=0)]}),
        chunk({}, "tool_calls"),
    )
    assert [(c.args, c.id) for c in calls] == [({"text": "a"}, "c1"), ({"text": "b"}, "c2")]
    assert [d.index for d in deltas] == [0, 1]  # the loop tells their deltas apart


async def test_calls_with_neither_index_nor_id() -> None:
    """A call in progress takes pieces with no index or id; a different name, or the
    same name once the arguments are whole, begins another."""
    calls, _, _ = await _calls(
        chunk({"tool_calls": [_call({"name": "note", "arguments": '{"text":'})]}),
        chunk({"tool_calls": [_call({"name": "note", "arguments": ' "a"}'})]}),
        chunk({"tool_calls": [_call({"name": "note", "arguments": '{"text": "b"}'})]}),
        chunk({"tool_calls": [_call({"name": "other", "arguments": "{}"})]}),
        chunk({}, "tool_calls"),
    )
    assert [(c.name, c.args) for c in calls] == [
        ("note", {"text": "a"}),
        ("note", {"text": "b"}),
        ("other", {}),
    ]
    assert len({c.id for c in calls}) == 3


async def test_braces_and_quotes_inside_strings_do_not_end_a_call() -> None:
    """Without index or id, a call ends when its object closes: braces, brackets and
    escaped quotes inside its strings, split across pieces, do not close it."""
    pieces = ['{"text": "}', "\\", '"]{', "\\\\", '"}', '{"text": "b"}']
    calls, _, _ = await _calls(
        *[chunk({"tool_calls": [_call({"name": "note", "arguments": p})]}) for p in pieces],
        chunk({}, "tool_calls"),
    )
    assert [c.args for c in calls] == [{"text": '}"]{\\'}, {"text": "b"}]


async def test_arguments_sent_as_an_object() -> None:
    calls, _, deltas = await _calls(
        chunk({"tool_calls": [_call({"name": "note", "arguments": {"text": "a"}}, index=0)]}),
        chunk({}, "tool_calls"),
    )
    assert calls[0].args == {"text": "a"}
    assert [d.delta for d in deltas] == ['{"text": "a"}']


@pytest.mark.parametrize(
    "pieces",
    [
        ['{"text": ', '"a"}', '{"text": "a"}'],  # streamed, then flushed whole again
        ["{", '{"text": "a"}'],  # a start, then the whole
        ['{"text": "a"}', '{"text": "a"}'],  # whole twice
    ],
    ids=["flushed-again", "start-then-whole", "twice"],
)
async def test_arguments_sent_again_whole_count_once(pieces: list[str]) -> None:
    """vLLM's end-of-stream flush (seen with its xlam and GLM parsers) repeats the
    arguments after they were streamed."""
    head = _call({"name": "note", "arguments": ""}, index=0, call_id="c1")
    calls, _, _ = await _calls(
        chunk({"tool_calls": [head]}),
        *[chunk({"tool_calls": [_call({"arguments": p}, index=0)]}) for p in pieces],
        chunk({}, "tool_calls"),
    )
    assert calls[0].args == {"text": "a"}


async def test_empty_strings_and_nulls_say_nothing() -> None:
    calls, _, deltas = await _calls(
        chunk({"role": "assistant", "content": "", "reasoning_content": None}),
        chunk({"content": None, "tool_calls": [{"index": 0}]}),
        chunk(
            {
                "tool_calls": [
                    _call({"name": "note", "arguments": ""}, index=0, call_id="c1"),
                ]
            }
        ),
        chunk({"tool_calls": [_call({"name": "", "arguments": '{"text":"a"}'}, index=0)]}),
        chunk({"tool_calls": [_call({"name": None, "arguments": None}, index=0, call_id="")]}),
        chunk({}, "tool_calls"),
    )
    assert [(c.name, c.args, c.id) for c in calls] == [("note", {"text": "a"}, "c1")]
    assert [(d.part, d.delta, d.tool, d.index) for d in deltas] == [
        ("tool_call", '{"text":"a"}', "note", 0)
    ]


async def test_a_run_over_a_server_that_repeats_names_runs_each_call_once() -> None:
    """Each chunk names the call again, as llama-cpp-python's server does."""

    def piece(arguments: str) -> dict[str, Any]:
        function = {"name": "note", "arguments": arguments}
        return chunk({"tool_calls": [_call(function, index=0, call_id="call_r")]})

    server = MockServer(
        [
            stream(piece('{"te'), piece('xt": "x"}'), piece(""), chunk({}, "tool_calls")),
            text_reply("Noted."),
        ]
    )
    result = await create_agent(compatible(server), tools=[note]).arun("Note x")
    assert result.output == "Noted."
    assert notes == ["x"]


# -- usage -------------------------------------------------------------------------------


async def test_usage_in_every_chunk_counts_the_last() -> None:
    """vLLM with continuous usage stats sends the running totals in every chunk."""

    def usage(done: int) -> dict[str, int]:
        return {"prompt_tokens": 12, "completion_tokens": done, "total_tokens": 12 + done}

    server = MockServer(
        [
            stream(
                chunk({"role": "assistant", "content": "O"}, usage=usage(1)),
                chunk({"content": "k"}, usage=usage(2)),
                chunk({}, "stop", usage=usage(2)),
                chunk(choices=[], usage={"prompt_tokens": 0, "completion_tokens": 0}),
            )
        ]
    )
    response = await compatible(server).request(request())
    assert response.usage == Usage(input_tokens=12, output_tokens=2, requests=1)


async def test_a_reply_without_usage_is_estimated_and_warned() -> None:
    server = MockServer([text_reply("An answer of some length."), text_reply("again")])
    agent = create_agent(compatible(server))
    with pytest.warns(UsageEstimatedWarning, match="'served-model' reported no usable"):
        result = await agent.arun("Hi")
    assert result.usage.input_tokens > 0
    assert result.usage.output_tokens == 7  # 26 characters at four a token


async def test_a_server_refusing_stream_options_is_asked_without_them() -> None:
    """Azure before API version 2024-09 and strict validators refuse the parameter."""
    refused = error_reply(
        400,
        {
            "error": {
                "message": "Unrecognized request argument supplied: stream_options",
                "type": "invalid_request_error",
                "param": None,
                "code": None,
            }
        },
    )
    server = MockServer([refused, text_reply("one"), text_reply("two")])
    model = compatible(server)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UsageEstimatedWarning)
        assert (await create_agent(model).arun("Hi")).output == "one"
        assert (await create_agent(model).arun("Hi")).output == "two"
    first, retried, later = server.bodies
    assert first["stream_options"] == {"include_usage": True}
    assert "stream_options" not in retried
    assert "stream_options" not in later


async def test_a_refusal_of_something_else_is_not_retried() -> None:
    refused = error_reply(400, {"error": {"message": "max_tokens is too large"}})
    server = MockServer([refused])
    with pytest.raises(ModelHTTPError, match="max_tokens is too large"):
        await create_agent(compatible(server)).arun("Hi")
    assert len(server.bodies) == 1


# -- reasoning, comments and errors inside the stream ------------------------------------


@pytest.mark.parametrize(
    "fields",
    [
        {"reasoning_content": "Six sevens."},  # vLLM, llama.cpp, DeepSeek
        {"reasoning": "Six sevens."},  # Ollama, OpenRouter, newer vLLM
        {"reasoning": "Six sevens.", "reasoning_content": "Six sevens."},  # both at once
    ],
    ids=["reasoning_content", "reasoning", "both"],
)
async def test_reasoning_fields(fields: dict[str, str]) -> None:
    server = MockServer(
        [stream(chunk({"role": "assistant", **fields}), chunk({"content": "42"}, "stop"))]
    )
    response = await compatible(server).request(request())
    assert response.message.parts[0] == ThinkingPart("Six sevens.")
    assert response.message.text == "42"


async def test_sse_comments_are_skipped() -> None:
    """OpenRouter keeps a slow stream open with comments; llama-cpp-python pings."""
    server = MockServer(
        [
            stream(
                ": OPENROUTER PROCESSING\n\n",
                chunk({"role": "assistant", "content": "Hi"}),
                ": ping - 2026-11-25 03:49:01.000000+00:00\n\n",
                chunk({}, "stop"),
            )
        ]
    )
    assert (await compatible(server).request(request())).message.text == "Hi"


async def test_an_error_in_the_stream_before_any_reply_is_retried() -> None:
    """OpenRouter reports a provider that failed as an error event in a 200 stream, with
    the HTTP status as its code."""
    failed = stream(
        {
            "id": "gen-1",
            "object": "chat.completion.chunk",
            "error": {"code": 502, "message": "Provider returned error"},
            "choices": [{"index": 0, "delta": {"content": ""}, "finish_reason": "error"}],
        }
    )
    server = MockServer([failed, text_reply("ok")])
    assert (await create_agent(compatible(server)).arun("Hi")).output == "ok"
    assert len(server.bodies) == 2


async def test_an_error_in_the_middle_of_the_reply_is_named() -> None:
    failed = stream(
        chunk({"role": "assistant", "content": "Half an"}),
        {"error": {"code": "server_error", "message": "Upstream went away"}},
    )
    server = MockServer([failed])
    with pytest.raises(ModelError, match="in the middle of its reply: Upstream went away"):
        await create_agent(compatible(server)).arun("Hi")
    assert len(server.bodies) == 1  # part of it was streamed already


async def test_vllm_error_object_in_the_stream() -> None:
    failed = stream(
        chunk({"role": "assistant", "content": ""}),
        {"object": "error", "message": "length exceeded", "type": "BadRequestError", "code": 400},
    )
    server = MockServer([failed])
    with pytest.raises(ModelError, match="in the middle of its reply: length exceeded") as caught:
        await create_agent(compatible(server)).arun("Hi")
    assert len(server.bodies) == 1  # a bad request is not tried again
    assert not caught.value.transient


async def test_vllm_overloaded_error_object_before_any_reply_is_retried() -> None:
    """vLLM's error chunk is retried as the `{"error": ...}` event is: its code says the
    fault may pass, and nothing of the reply had come."""
    overloaded = {
        "object": "error",
        "message": "The server is overloaded",
        "type": "ServiceUnavailableError",
        "param": None,
        "code": 503,
    }
    failed = stream(chunk({"role": "assistant", "content": ""}), overloaded)
    server = MockServer([failed, text_reply("ok")])
    assert (await create_agent(compatible(server)).arun("Hi")).output == "ok"
    assert len(server.bodies) == 2


async def test_vllm_overloaded_error_object_after_some_reply_is_transient_not_retried() -> None:
    overloaded = {"object": "error", "message": "overloaded", "code": 503}
    failed = stream(chunk({"role": "assistant", "content": "Half"}), overloaded)
    server = MockServer([failed])
    with pytest.raises(ModelError, match="overloaded") as caught:
        await create_agent(compatible(server)).arun("Hi")
    assert len(server.bodies) == 1  # part of it was streamed already
    assert not caught.value.transient


async def test_a_finish_of_error_without_detail_is_not_an_answer() -> None:
    server = MockServer([stream(chunk({"content": "Half"}), chunk({}, "error"))])
    with pytest.raises(ModelError, match="ended its reply with an error"):
        await create_agent(compatible(server)).arun("Hi")


async def test_chunks_without_choices_or_delta() -> None:
    server = MockServer(
        [
            stream(
                {"id": "", "object": "", "created": 0, "model": "", "choices": []},
                {"id": "x", "object": "chat.completion.chunk"},  # no choices at all
                chunk(None),  # a choice with no delta
                chunk({"role": "assistant", "content": [{"type": "text", "text": "Hi"}]}),
                chunk({}, "stop"),
            )
        ]
    )
    assert (await compatible(server).request(request())).message.text == "Hi"


# -- Azure's content filter ---------------------------------------------------------------

_SAFE = {"filtered": False, "severity": "safe"}
_RESULTS = {"hate": _SAFE, "self_harm": _SAFE, "sexual": _SAFE, "violence": _SAFE}
_FLAGGED = {**_RESULTS, "violence": {"filtered": True, "severity": "medium"}}
_PROMPT_RESULTS = {
    "id": "",
    "object": "",
    "created": 0,
    "model": "",
    "choices": [],
    "prompt_filter_results": [{"prompt_index": 0, "content_filter_results": _RESULTS}],
}


def _azure(url: str) -> OpenAIModel:
    return azure_model("gpt-52-prod", endpoint=url, api_key="k")


def _azure_chunk(delta: dict[str, Any] | None, finish: str | None, results: Any) -> Any:
    choice: dict[str, Any] = {
        "index": 0,
        "finish_reason": finish,
        "content_filter_results": results,
    }
    if delta is not None:
        choice["delta"] = delta
    return chunk(choices=[choice], model="gpt-5.2-2025-12-11")


async def test_azure_stream_stopped_part_way_by_its_filter() -> None:
    filtered = body(
        _PROMPT_RESULTS,
        _azure_chunk({"role": "assistant", "content": ""}, None, {}),
        _azure_chunk({"content": "The first half of "}, None, _RESULTS),
        _azure_chunk({}, "content_filter", _FLAGGED),
        chunk(choices=[], usage={"prompt_tokens": 20, "completion_tokens": 5}),
    )
    with serving([Reply(body=filtered)]) as server:
        response = await _azure(server.url).request(request())
    assert response.finish_reason == "content_filter"
    assert response.message.text == "The first half of "
    assert response.usage.output_tokens == 5


async def test_azure_asynchronous_filter_annotation_comes_after_the_stop() -> None:
    """With Azure's asynchronous filter the verdict follows the text, in a chunk with no
    delta; it may come after a finish of "stop", and it is the one that stays."""
    filtered = body(
        _PROMPT_RESULTS,
        _azure_chunk({"role": "assistant", "content": "All of it"}, None, None),
        _azure_chunk({}, "stop", None),
        {
            **chunk(choices=[]),
            "choices": [
                {
                    "index": 0,
                    "finish_reason": "content_filter",
                    "content_filter_offsets": {
                        "check_offset": 0,
                        "start_offset": 0,
                        "end_offset": 9,
                    },
                    "content_filter_results": _FLAGGED,
                }
            ],
        },
        _azure_chunk(None, "stop", _RESULTS),
    )
    with serving([Reply(body=filtered)]) as server:
        response = await _azure(server.url).request(request())
    assert response.finish_reason == "content_filter"


async def test_azure_prompt_filter_is_a_clear_error_not_retried() -> None:
    error = {
        "error": {
            "message": "The response was filtered due to the prompt triggering Azure "
            "OpenAI's content management policy.",
            "type": None,
            "param": "prompt",
            "code": "content_filter",
            "status": 400,
            "innererror": {
                "code": "ResponsibleAIPolicyViolation",
                "content_filter_result": {
                    "hate": _SAFE,
                    "jailbreak": {"filtered": True, "detected": True},
                    "violence": {"filtered": True, "severity": "high"},
                },
            },
        }
    }
    refused = Reply(400, json.dumps(error).encode(), {"content-type": "application/json"})
    with serving([refused]) as server, pytest.raises(ModelHTTPError) as caught:
        await create_agent(_azure(server.url), checkpointer=None).arun("Hi")
    assert len(server.requests) == 1
    assert caught.value.status_code == 400
    assert not caught.value.transient
    said = str(caught.value)
    assert "azure's content filter blocked the request for 'gpt-52-prod' (HTTP 400)" in said
    assert "content management policy" in said
    assert "(flagged: jailbreak, violence)" in said
