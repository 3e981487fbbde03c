"""What a Gemini or Bedrock server streams cannot make tether misread the reply:

- a filter's stop (or a cut) stands when an ordinary stop follows it, so a call the
  filter stopped never runs (THREATS.md "Quiet success");
- a Bedrock call streamed under one id keeps that id and its own arguments, whatever
  order the server numbers its blocks in;
- many small pieces cost time in proportion to their size, not its square ("Stalling
  everyone"). Measured in this thread's CPU time, which a loaded machine does not
  lengthen: the joined pieces take a fraction of a second, the old way a minute.
"""

from __future__ import annotations

import json
import time
from types import SimpleNamespace
from typing import Any

import pytest

from tests.models.faults import Reply, serving
from tests.models.test_bedrock import STREAM, frame, model
from tests.models.wire import sse
from tether import ContentFilterError, create_agent, tool
from tether.events import ModelDelta, ToolCallStarted
from tether.messages import ThinkingPart, ToolCall, UserMessage
from tether.models import ModelRequest, StreamDelta
from tether.models._bedrock_converse import Reader as BedrockReader
from tether.models.google import GoogleModel
from tether.models.google import _Reader as GoogleReader

ran: list[str] = []


@tool
def note(text: str) -> str:
    """Save a note."""
    ran.append(text)
    return "saved"


@tool
def delete(path: str) -> str:
    """Delete a file."""
    return "deleted"


@tool
def show(path: str) -> str:
    """Show a file."""
    return "shown"


def _gemini(parts: list[dict[str, Any]], finish: str) -> tuple[None, dict[str, Any]]:
    candidate = {"content": {"role": "model", "parts": parts}, "index": 0, "finishReason": finish}
    usage = {"promptTokenCount": 3, "candidatesTokenCount": 2}
    return None, {"candidates": [candidate], "modelVersion": "g", "usageMetadata": usage}


def _bedrock(*frames: bytes) -> bytes:
    usage = {"usage": {"inputTokens": 3, "outputTokens": 2}}
    return b"".join(
        [frame("messageStart", {"role": "assistant"}), *frames, frame("metadata", usage)]
    )


def _call_start(index: int, call_id: str, name: str) -> bytes:
    start = {"toolUse": {"toolUseId": call_id, "name": name}}
    return frame("contentBlockStart", {"contentBlockIndex": index, "start": start})


def _call_delta(index: int, arguments: str) -> bytes:
    delta = {"toolUse": {"input": arguments}}
    return frame("contentBlockDelta", {"contentBlockIndex": index, "delta": delta})


def _stop(reason: str) -> bytes:
    return frame("messageStop", {"stopReason": reason})


# -- a filter's stop stands --------------------------------------------------------


GEMINI_CALL = {"functionCall": {"id": "c1", "name": "note", "args": {"text": "x"}}}


@pytest.mark.parametrize(("first", "then"), [("SAFETY", "STOP"), ("MAX_TOKENS", "STOP")])
async def test_a_gemini_filter_or_cut_is_not_undone_by_a_later_stop(first: str, then: str) -> None:
    body = sse([_gemini([GEMINI_CALL], first), _gemini([], then)])
    with serving([Reply(body=body)]) as server:
        gemini = GoogleModel("gemini-2.5-flash", api_key="k", base_url=server.url, max_retries=0)
        request = ModelRequest("", (UserMessage.of("Hi"),))
        *_, response = [item async for item in gemini.stream(request)]
    assert response.finish_reason == {"SAFETY": "content_filter", "MAX_TOKENS": "length"}[first]


@pytest.mark.parametrize(
    ("first", "then"), [("guardrail_intervened", "tool_use"), ("max_tokens", "end_turn")]
)
async def test_a_bedrock_filter_or_cut_is_not_undone_by_a_later_stop(first: str, then: str) -> None:
    body = _bedrock(
        _call_start(0, "t1", "note"), _call_delta(0, '{"text": "x"}'), _stop(first), _stop(then)
    )
    with serving([Reply(body=body, headers=STREAM)], chunked=True) as server:
        bedrock = model(server.url, max_retries=0)
        request = ModelRequest("", (UserMessage.of("Hi"),))
        *_, response = [item async for item in bedrock.stream(request)]
    expected = {"guardrail_intervened": "content_filter", "max_tokens": "length"}[first]
    assert response.finish_reason == expected


async def test_a_call_a_filter_stopped_never_runs_whatever_stop_follows() -> None:
    gemini_body = sse([_gemini([GEMINI_CALL], "SAFETY"), _gemini([], "STOP")])
    bedrock_body = _bedrock(
        _call_start(0, "t1", "note"),
        _call_delta(0, '{"text": "x"}'),
        _stop("guardrail_intervened"),
        _stop("tool_use"),
    )
    ran.clear()
    with serving([Reply(body=gemini_body)]) as server:
        gemini = GoogleModel("gemini-2.5-flash", api_key="k", base_url=server.url, max_retries=0)
        with pytest.raises(ContentFilterError):
            await create_agent(gemini, tools=[note], checkpointer=None).arun("Hi")
    bedrock_reply = Reply(body=bedrock_body, headers=STREAM)
    with (
        serving([bedrock_reply], chunked=True) as server,
        pytest.raises(ContentFilterError),
    ):
        await create_agent(model(server.url), tools=[note], checkpointer=None).arun("Hi")
    assert ran == []


# -- Bedrock calls keep their own ids and arguments --------------------------------


async def test_bedrock_calls_keep_their_ids_and_arguments_when_blocks_come_out_of_order() -> None:
    calls = _bedrock(
        _call_start(5, "t5", "delete"),
        _call_delta(5, '{"path": "/etc"}'),
        _call_start(2, "t2", "show"),
        _call_delta(2, '{"path": "/tmp"}'),
        _stop("tool_use"),
    )
    text = frame("contentBlockDelta", {"contentBlockIndex": 0, "delta": {"text": "done"}})
    replies = [
        Reply(body=calls, headers=STREAM),
        Reply(body=_bedrock(text, _stop("end_turn")), headers=STREAM),
    ]
    with serving(replies[:1], chunked=True) as server:
        bedrock = model(server.url, max_retries=0)
        items = [item async for item in bedrock.stream(ModelRequest("", (UserMessage.of("Go"),)))]
    *deltas, response = items
    streamed = {d.index: (d.call_id, d.tool, d.delta) for d in deltas if isinstance(d, StreamDelta)}
    made = [p for p in response.message.parts if isinstance(p, ToolCall)]
    for position, call in enumerate(made):
        call_id, name, arguments = streamed[position]
        assert (call.id, call.name, call.args) == (call_id, name, json.loads(arguments))

    seen: dict[str, list[Any]] = {}
    with serving(replies, chunked=True) as server:
        agent = create_agent(model(server.url), tools=[delete, show], checkpointer=None)
        async for event in agent.stream("Go"):
            if isinstance(event, ModelDelta) and event.part == "tool_call":
                assert event.call_id is not None
                seen.setdefault(event.call_id, []).append(
                    ("streamed", event.tool, json.loads(event.delta))
                )
            if isinstance(event, ToolCallStarted):
                seen.setdefault(event.call.id, []).append(
                    ("started", event.call.name, event.call.args)
                )
    assert sorted(seen.values()) == [
        [("streamed", "delete", {"path": "/etc"}), ("started", "delete", {"path": "/etc"})],
        [("streamed", "show", {"path": "/tmp"}), ("started", "show", {"path": "/tmp"})],
    ]


# -- many small pieces -----------------------------------------------------------

PIECES = 60_000  # of 100 characters or bytes: 6 MB; the old way took a minute of CPU
CPU_LIMIT = 3.0


def _gemini_chunk(text: str) -> Any:
    """A streamed chunk as the SDK hands it over, with only what the reader looks at."""
    part = SimpleNamespace(thought_signature=None, function_call=None, text=text, thought=False)
    candidate = SimpleNamespace(finish_reason=None, content=SimpleNamespace(parts=[part]))
    return SimpleNamespace(
        model_version="g",
        response_id="r",
        usage_metadata=None,
        prompt_feedback=None,
        candidates=[candidate],
    )


def test_gemini_text_in_many_pieces_is_read_in_linear_time() -> None:
    chunks = [_gemini_chunk("x" * 99 + str(i % 10)) for i in range(PIECES)]
    chunks[-1].candidates[0].finish_reason = "STOP"
    reader = GoogleReader()
    started = time.thread_time()
    for chunk in chunks:
        reader.read(chunk)
    response = reader.response("g")
    spent = time.thread_time() - started
    assert response.message.text == "".join("x" * 99 + str(i % 10) for i in range(PIECES))
    assert spent < CPU_LIMIT, f"{spent:.1f} s of CPU"


def test_bedrock_thinking_in_many_pieces_is_read_in_linear_time() -> None:
    def reasoning(index: int, **delta: Any) -> dict[str, Any]:
        found = {"contentBlockIndex": index, "delta": {"reasoningContent": delta}}
        return {"contentBlockDelta": found}

    pieces = 2 * PIECES  # each the same event: the reader only reads them
    events = [reasoning(0, redactedContent=b"r" * 100)] * pieces
    events += [reasoning(1, text="t" * 100), *[reasoning(1, signature="s" * 100)] * pieces]
    events.append({"messageStop": {"stopReason": "end_turn"}})
    reader = BedrockReader()
    started = time.thread_time()
    for event in events:
        reader.read(event)
    response = reader.response("m")
    spent = time.thread_time() - started
    redacted, thinking = response.message.parts
    assert isinstance(redacted, ThinkingPart)
    assert isinstance(thinking, ThinkingPart)
    assert redacted.redacted
    assert redacted.signature == (b"r" * 100 * pieces).hex()
    assert thinking.text == "t" * 100
    assert thinking.signature == "s" * 100 * pieces
    assert spent < CPU_LIMIT, f"{spent:.1f} s of CPU"
