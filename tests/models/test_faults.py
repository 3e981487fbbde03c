"""Provider faults, injected by a real loopback server speaking each wire format: every
one ends as a `ModelError` that says what happened and where, is retried when it should
be (and only then), and leaves the thread saved and loadable."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tether import (
    Limits,
    ModelError,
    ModelHTTPError,
    TetherError,
    create_agent,
    tool,
)
from tether.events import ToolCallFinished, ToolCallStarted
from tether.messages import ToolResultMessage, UserMessage
from tether.models import _sdk
from tether.models.anthropic import AnthropicModel
from tether.models.bedrock import BedrockModel
from tether.models.google import GoogleModel
from tether.models.openai import AZURE_API_VERSION, OpenAIModel, azure_model
from tether.models.usage import MOST_TOKENS

from .faults import Reply, error, serving
from .test_anthropic import claude_stream, text_block, tool_block
from .test_bedrock import bedrock_error, converse_stream, frame_end
from .test_chat_servers import llama_call, llama_text
from .test_google import gemini_stream
from .test_openai import call_item, chat_stream, message_item, responses_stream

# llama-cpp-python's server reports no usage: its replies are estimated, and warned about.
pytestmark = pytest.mark.filterwarnings("ignore::tether.errors.UsageEstimatedWarning")


def _sse_piece_end(body: bytes, offset: int) -> int:
    """Where the server-sent event holding byte `offset` ends."""
    return body.index(b"\n\n", offset) + 2


@dataclass(frozen=True)
class Wire:
    """One provider API: how to make a model for a server, what its streams and errors
    look like, and where a piece of a stream ends (to cut it there)."""

    name: str
    model: Callable[..., Any]
    text: Callable[[str], bytes]
    call: Callable[[str, str, str], bytes]
    path: str
    error: Callable[..., Reply] = error
    piece_end: Callable[[bytes, int], int] = _sse_piece_end
    huge_input: Callable[[int], bytes] | None = None
    """A text stream reporting this many input tokens, where a number cannot simply be
    replaced in the bytes (a framed stream)."""
    chunked: bool = False
    """Its streams come in HTTP chunks (AWS's do)."""


WIRES = [
    Wire(
        "anthropic",
        lambda url, **kw: AnthropicModel("claude-sonnet-5-5", api_key="k", base_url=url, **kw),
        lambda text: claude_stream([text_block(text)]),
        lambda cid, name, args: claude_stream(
            [tool_block(cid, name, args)], stop_reason="tool_use"
        ),
        "/v1/messages",
    ),
    Wire(
        "chat",
        lambda url, **kw: OpenAIModel("gpt-5.2", api="chat", base_url=url + "/v1", **kw),
        lambda text: chat_stream(text).content,
        lambda cid, name, args: chat_stream(None, [(cid, name, args)]).content,
        "/v1/chat/completions",
    ),
    Wire(
        "llama-cpp",  # llama-cpp-python's server, as recorded (see test_chat_servers.py)
        lambda url, **kw: OpenAIModel("smollm2", base_url=url + "/v1", **kw),
        llama_text,
        llama_call,
        "/v1/chat/completions",
        huge_input=lambda tokens: llama_text(
            "ok", usage={"prompt_tokens": tokens, "completion_tokens": 1}
        ),
    ),
    Wire(
        "azure",
        lambda url, **kw: azure_model("gpt-52-prod", endpoint=url, api_key="k", **kw),
        lambda text: chat_stream(text).content,
        lambda cid, name, args: chat_stream(None, [(cid, name, args)]).content,
        f"/openai/deployments/gpt-52-prod/chat/completions?api-version={AZURE_API_VERSION}",
    ),
    Wire(
        "azure-responses",
        lambda url, **kw: azure_model(
            "gpt-52-prod", endpoint=url, api_key="k", api="responses", **kw
        ),
        lambda text: responses_stream([message_item(text)]).content,
        lambda cid, name, args: responses_stream([call_item(cid, name, args)]).content,
        "/openai/v1/responses",
    ),
    Wire(
        "google",
        lambda url, **kw: GoogleModel("gemini-2.5-flash", api_key="k", base_url=url, **kw),
        gemini_stream,
        lambda cid, name, args: gemini_stream(None, (cid, name, args)),
        "/v1beta/models/gemini-2.5-flash:streamGenerateContent?alt=sse",
    ),
    Wire(
        "bedrock",
        lambda url, **kw: BedrockModel(
            "anthropic.claude-sonnet-4-5-20250929-v1:0",
            region="us-east-1",
            base_url=url,
            aws_access_key_id="AKIDTEST",
            aws_secret_access_key="secret",
            **kw,
        ),
        converse_stream,
        lambda cid, name, args: converse_stream(None, (cid, name, args)),
        "/model/anthropic.claude-sonnet-4-5-20250929-v1%3A0/converse-stream",
        error=bedrock_error,
        piece_end=frame_end,
        huge_input=lambda tokens: converse_stream(
            "ok", usage={"inputTokens": tokens, "outputTokens": 1, "totalTokens": tokens + 1}
        ),
        chunked=True,
    ),
    Wire(
        "responses",
        lambda url, **kw: OpenAIModel(
            "gpt-5.2", api="responses", api_key="k", base_url=url + "/v1", **kw
        ),
        lambda text: responses_stream([message_item(text)]).content,
        lambda cid, name, args: responses_stream([call_item(cid, name, args)]).content,
        "/v1/responses",
    ),
]


@pytest.fixture(params=WIRES, ids=[w.name for w in WIRES])
def wire(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> Wire:
    monkeypatch.setattr(_sdk, "FIRST_BACKOFF_SECONDS", 0.01)  # backoff, not retry-after
    return request.param  # type: ignore[no-any-return]


@tool
def note(text: str) -> str:
    """Save a note."""
    return f"saved {text}"


async def _run(
    wire: Wire, replies: list[Reply], tmp_path: Path, **model_options: Any
) -> tuple[Any, TetherError | None, list[dict[str, Any]], list[Any]]:
    """Run an agent against `replies`: its result or error, the requests, the saved thread."""
    with serving(replies, chunked=wire.chunked) as server:
        model = wire.model(server.url, max_retries=2, **model_options)
        agent = create_agent(model, tools=[note], checkpointer=f"sqlite:///{tmp_path}/runs.db")
        result: Any = None
        caught: TetherError | None = None
        try:
            result = await agent.arun("Take a note", thread_id="t1")
        except TetherError as exc:  # anything else escaping fails the test
            caught = exc
        assert set(server.paths) <= {wire.path}
        history = await agent.ahistory("t1")  # the thread loads, whatever happened
        assert history[0] == UserMessage.of("Take a note")
        return result, caught, server.requests, history


def _where(error: ModelError, wire: Wire) -> None:
    """The error says where: the URL it went to."""
    assert error.url is not None
    assert error.url.endswith(wire.path), error.url
    assert f"POST {error.url}" in str(error)


async def _fails(
    wire: Wire, replies: list[Reply], tmp_path: Path, *, tries: int = 1, **model_options: Any
) -> str:
    """The message of the plain `ModelError` the run ends with, after `tries` requests;
    it says where it happened."""
    _, caught, requests, _ = await _run(wire, replies, tmp_path, **model_options)
    assert type(caught) is ModelError
    _where(caught, wire)
    assert len(requests) == tries
    return str(caught)


# -- answers the server refuses -------------------------------------------------------


async def test_rate_limit_is_retried_after_the_wait_asked(wire: Wire, tmp_path: Path) -> None:
    limited = wire.error(429, "slow down", "rate_limit_error", **{"retry-after": "0"})
    result, caught, requests, _ = await _run(wire, [limited, Reply(body=wire.text("ok"))], tmp_path)
    assert caught is None
    assert result.output == "ok"
    assert len(requests) == 2


@pytest.mark.parametrize("status", [500, 503, 529])
async def test_server_errors_are_retried_then_named(
    wire: Wire, tmp_path: Path, status: int
) -> None:
    replies = [wire.error(status, "the server is unwell", "overloaded_error") for _ in range(3)]
    _, caught, requests, history = await _run(wire, replies, tmp_path)
    assert isinstance(caught, ModelHTTPError)
    assert caught.status_code == status
    assert f"HTTP {status}" in str(caught)
    assert "the server is unwell" in str(caught)
    assert caught.request_id == "req_fault"
    assert "request id req_fault, after 2 retries" in str(caught)
    assert caught.retries == 2
    _where(caught, wire)
    assert len(requests) == 3  # one try and two retries
    assert len(history) == 1


async def test_a_retry_after_longer_than_the_cap_fails_at_once(wire: Wire, tmp_path: Path) -> None:
    limited = wire.error(429, "come back in an hour", "rate_limit_error", **{"retry-after": "3600"})
    _, caught, requests, _ = await _run(wire, [limited], tmp_path)
    assert isinstance(caught, ModelHTTPError)
    assert caught.status_code == 429
    assert "rate limiting the requests (HTTP 429): come back in an hour" in str(caught)
    assert "asks to wait 3600 s" in str(caught)
    assert f"({_sdk.MAX_RETRY_WAIT_SECONDS:g} s)" in str(caught)
    assert len(requests) == 1


async def test_a_retry_wait_never_outlasts_the_run(wire: Wire, tmp_path: Path) -> None:
    limited = wire.error(429, "wait a bit", "rate_limit_error", **{"retry-after": "30"})
    replies = [Reply(body=wire.text("ok")), limited, limited]
    with serving(replies, chunked=wire.chunked) as server:
        model = wire.model(server.url)
        # A first run loads the SDK and opens its client, which on a busy machine can take
        # longer than the timed run's whole budget.
        assert (await create_agent(model, checkpointer=None).arun("Hi")).output == "ok"
        agent = create_agent(model, limits=Limits(timeout_seconds=1), checkpointer=None)
        result = await agent.arun("Hi")
    assert result.stop_reason == "timeout"  # not the 30 s the server asked to wait
    assert len(server.requests) == 2  # the warm-up's, and one of the timed run's


async def test_a_tool_round_trip(wire: Wire, tmp_path: Path) -> None:
    replies = [
        Reply(body=wire.call("call_1", "note", '{"text": "hi"}')),
        Reply(body=wire.text("ok")),
    ]
    result, caught, requests, history = await _run(wire, replies, tmp_path)
    assert caught is None
    assert result.output == "ok"
    (answer,) = next(m for m in history if isinstance(m, ToolResultMessage)).results
    assert answer.text == "saved hi"
    assert "saved hi" in json.dumps(requests[1])  # the result went back to the model


async def test_a_call_streams_its_arguments_with_its_tool_named(wire: Wire) -> None:
    replies = [
        Reply(body=wire.call("call_1", "note", '{"text": "hi"}')),
        Reply(body=wire.text("ok")),
    ]
    with serving(replies, chunked=wire.chunked) as server:
        agent = create_agent(wire.model(server.url), tools=[note], checkpointer=None)
        events = [e async for e in agent.stream("Take a note")]
    deltas = [e for e in events if getattr(e, "part", "") == "tool_call"]
    if wire.name == "google":
        assert deltas == []  # Gemini sends each call whole: it is announced when it starts
        return
    # The deltas name the call by tether's id: that of the one call that starts and
    # finishes, the call the server named call_1.
    (started,) = [e.call for e in events if isinstance(e, ToolCallStarted)]
    (finished,) = [e.call for e in events if isinstance(e, ToolCallFinished)]
    assert started.id == finished.id
    assert started.provider_id == "call_1"
    assert {(d.call_id, d.tool) for d in deltas} == {(started.id, "note")}
    assert json.loads("".join(d.delta for d in deltas)) == {"text": "hi"}


async def test_a_refused_key_is_not_retried(wire: Wire, tmp_path: Path) -> None:
    refused = wire.error(401, "invalid api key", "authentication_error")
    _, caught, requests, _ = await _run(wire, [refused], tmp_path)
    assert isinstance(caught, ModelHTTPError)
    assert caught.status_code == 401
    assert not caught.transient  # nor handed to a fallback model
    assert len(requests) == 1
    if wire.name.startswith("azure"):
        assert "AZURE_OPENAI_API_KEY" in str(caught)  # the variable to check


async def test_client_errors_are_not_retried(wire: Wire, tmp_path: Path) -> None:
    _, caught, requests, _ = await _run(wire, [wire.error(400, "bad max_tokens")], tmp_path)
    assert isinstance(caught, ModelHTTPError)
    assert "rejected the request" in str(caught)
    assert "bad max_tokens" in str(caught)
    assert len(requests) == 1


# -- connections that break ----------------------------------------------------------


async def test_a_reset_before_the_reply_is_retried(wire: Wire, tmp_path: Path) -> None:
    reset = Reply(head=False, then="reset")
    result, caught, requests, _ = await _run(
        wire, [reset, reset, Reply(body=wire.text("ok"))], tmp_path
    )
    assert caught is None
    assert result.output == "ok"
    assert len(requests) == 3


async def test_resets_every_time_name_the_connection(wire: Wire, tmp_path: Path) -> None:
    reset = Reply(head=False, then="reset")
    said = await _fails(wire, [reset] * 3, tmp_path, tries=3)
    assert "the connection to" in said
    assert ": " in said.split("failed: ", 1)[1]  # never an empty reason


def _after_first_text(body: bytes, wire: Wire) -> int:
    """Where a stream ends once its first piece of answer text was sent whole."""
    return wire.piece_end(body, body.index(b"answer"))


async def test_a_reset_in_the_middle_of_the_reply(wire: Wire, tmp_path: Path) -> None:
    body = wire.text("a long answer that never arrives whole")
    cut = Reply(body=body, cut=_after_first_text(body, wire), then="reset")
    said = await _fails(wire, [cut], tmp_path)  # its first deltas were streamed: not retried
    assert "the connection broke in the middle of the reply" in said
    assert "Connection reset" in said or "ReadError" in said


async def test_a_server_that_stops_answering_times_out(wire: Wire, tmp_path: Path) -> None:
    body = wire.text("an answer that stalls")
    stall = Reply(body=body, cut=_after_first_text(body, wire), then="hang", hang=3)
    said = await _fails(wire, [stall], tmp_path, timeout_seconds=0.5)
    assert "no data within the model's timeout_seconds" in said


async def test_a_stream_cut_inside_a_tool_call(wire: Wire, tmp_path: Path) -> None:
    body = wire.call("call_1", "note", '{"text": "half a no')
    cut = Reply(body=body, cut=body.index(b"half a") + 4)
    said = await _fails(wire, [cut], tmp_path)
    if wire.name == "google":  # Gemini sends each call whole: cut, it is unreadable JSON
        assert "could not read" in said
        assert "Failed to parse response as JSON" in said
    elif wire.chunked:  # the last chunk never came: a break, not an end
        assert "the connection broke in the middle of the reply" in said
    else:
        assert "ended before the reply was complete" in said


# -- replies that are not what they should be ---------------------------------------


@pytest.mark.parametrize(
    "arguments", ['{"text": "a" "b": 2}', "[1, 2]", '"just text"', "{not json"]
)
async def test_broken_tool_arguments_go_back_to_the_model(
    wire: Wire, tmp_path: Path, arguments: str
) -> None:
    if wire.name == "google":
        pytest.skip("Gemini sends arguments as a JSON object inside its event, never as text")
    replies = [Reply(body=wire.call("call_1", "note", arguments)), Reply(body=wire.text("ok"))]
    result, caught, requests, history = await _run(wire, replies, tmp_path)
    assert caught is None
    assert result.output == "ok"
    (answer,) = next(m for m in history if isinstance(m, ToolResultMessage)).results
    assert answer.is_error
    assert "JSON" in answer.text
    assert json.dumps(requests[1])  # the next request was well formed


async def test_an_html_page_where_the_stream_should_be(wire: Wire, tmp_path: Path) -> None:
    page = Reply(
        body=b"<html><body>Sign in to the hotel wifi</body></html>",
        headers={"content-type": "text/html"},
    )
    said = await _fails(wire, [page], tmp_path)
    if wire.name != "google":  # google-genai parses the body before tether sees its type
        assert "with text/html, not an event stream" in said
    assert "hotel wifi" in said


@pytest.mark.parametrize("content_type", ["text/event-stream", None])
async def test_an_empty_reply(wire: Wire, tmp_path: Path, content_type: str | None) -> None:
    headers = {"content-type": content_type} if content_type else {}
    said = await _fails(wire, [Reply(headers=headers)], tmp_path)
    assert "ended before the reply was complete" in said


async def test_garbage_in_the_event_stream(wire: Wire, tmp_path: Path) -> None:
    garbage = Reply(body=b"event: message_start\ndata: {this is not json\n\n")
    said = await _fails(wire, [garbage], tmp_path)
    assert "could not read" in said
    named = {"google": "UnknownApiResponseError", "bedrock": "ChecksumMismatch"}
    assert named.get(wire.name, "JSONDecodeError") in said


async def test_huge_usage_numbers(wire: Wire, tmp_path: Path) -> None:
    huge = 10**30
    body = wire.text("ok") if wire.huge_input is None else wire.huge_input(huge)
    numbers = (b'"input_tokens": 25', b'"prompt_tokens": 40', b'"input_tokens": 36')
    for field in (*numbers, b'"promptTokenCount": 40'):
        body = body.replace(field, field.split(b":")[0] + b": " + str(huge).encode())
    result, caught, _, _ = await _run(wire, [Reply(body=body)], tmp_path)
    assert caught is None
    assert result.output == "ok"
    # Counted as the most one reply can count for: past any budget, yet a number that
    # every exporter and price table can still take (10**30 does not fit in 64 bits).
    assert result.usage.input_tokens == MOST_TOKENS
