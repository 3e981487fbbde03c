"""An OpenAI-compatible server is outside input like any other: what it leaves out, repeats
or ends badly never widens a limit or passes for a finished answer."""

from __future__ import annotations

import json
from types import SimpleNamespace as NS
from typing import Any

import pytest

from tests.models.test_chat_servers import llama_call, llama_text
from tests.models.test_openai import call_item, response_object
from tests.models.wire import MockServer, sse, stream_reply
from tether import ContentFilterError, Limits, ModelError, create_agent, tool
from tether.models import _chat_stream
from tether.models.openai import OpenAIModel

pytestmark = pytest.mark.filterwarnings("ignore::tether.errors.UsageEstimatedWarning")

ran: list[str] = []


@tool
def note(text: str) -> str:
    """Save a note."""
    ran.append(text)
    return "saved"


def _model(server: MockServer) -> OpenAIModel:
    return OpenAIModel("smollm2", base_url="http://127.0.0.1:8000/v1", http_client=server.client())


async def test_a_server_that_reports_no_usage_still_stops_at_the_token_budget() -> None:
    """llama.cpp's Python server never reports usage: the estimate is what is spent."""
    calls = [
        stream_reply(llama_call(f"call_{n}", "note", json.dumps({"text": f"{n} " + "x" * 2000})))
        for n in range(60)
    ]
    server = MockServer(calls)
    limits = Limits(max_steps=60, max_total_tokens=30_000, loop_stop_after=None)
    result = await create_agent(_model(server), tools=[note], limits=limits).arun("Take notes")
    assert result.stop_reason == "budget"
    assert result.usage.total_tokens >= 30_000
    assert result.steps < 30  # the budget stopped it, long before the step limit


async def test_a_call_cut_at_the_token_limit_never_runs_even_when_sent_whole_before() -> None:
    ran.clear()
    head = json.dumps({"text": "all of it"})
    cut = llama_call("call_1", "note", head + head[:6]).replace(
        b'"finish_reason": "tool_calls"', b'"finish_reason": "length"'
    )
    server = MockServer([stream_reply(cut), stream_reply(llama_text("Stopped."))])
    result = await create_agent(_model(server), tools=[note]).arun("Take a note")
    assert ran == []
    assert "cut off" in result.messages[2].results[0].text  # type: ignore[union-attr]


async def test_a_reply_that_ended_in_an_error_is_not_an_answer() -> None:
    """OpenRouter ends a reply that failed part-way with finish_reason "error"."""
    failed = llama_text("Half an answer").replace(
        b'"finish_reason": "stop"', b'"finish_reason": "error"'
    )
    server = MockServer([stream_reply(failed)])
    with pytest.raises(ModelError, match="ended its reply with an error") as caught:
        await create_agent(_model(server)).arun("Hi")
    assert caught.value.result is not None
    assert caught.value.result.stop_reason == "error"


deployed: list[dict[str, object]] = []


@tool
def deploy(env: str = "production", options: dict[str, object] | None = None) -> str:
    """Deploy (its defaults are what a call with arguments `{}` would do)."""
    deployed.append({"env": env, "options": options})
    return "deployed"


def _chunk(delta: dict[str, object], finish: str | None = None) -> dict[str, object]:
    choice = {"index": 0, "delta": delta, "finish_reason": finish}
    return {"id": "c1", "object": "chat.completion.chunk", "model": "m", "choices": [choice]}


def _piece(index: int, arguments: str, call_id: str | None = None, name: str | None = None) -> Any:
    function = {"arguments": arguments} | ({"name": name} if name else {})
    call = {"index": index, "function": function} | ({"id": call_id} if call_id else {})
    return _chunk({"tool_calls": [call]})


def _stream(*chunks: dict[str, object]) -> Any:
    lines = [f"data: {json.dumps(c)}\n\n" for c in chunks]
    return stream_reply("".join([*lines, "data: [DONE]\n\n"]).encode())


async def _deploy_run(*chunks: dict[str, object]) -> list[str]:
    """Runs one reply of `chunks`, then a plain answer; what the calls were answered."""
    deployed.clear()
    done = _stream(_chunk({"content": "Done."}, "stop"))
    server = MockServer([_stream(*chunks), done])
    result = await create_agent(_model(server), tools=[deploy, note]).arun("Deploy to staging")
    return [r.text for m in result.messages for r in getattr(m, "results", ())]


@pytest.mark.parametrize(
    ("pieces", "finish"),
    [
        (['{"env": "staging", ', '"options": ', "{}"], "tool_calls"),
        (['{"env": "staging", "options": ', '{"env": "production"}', ', "x": 1'], "tool_calls"),
        (['{"env": "staging", "options": ', '{"env": "dev"}'], "stop"),
        (['{"options": ', '{"options": {}}'], "tool_calls"),  # a beginning of it, but cut
    ],
    ids=["token-{}", "nested-then-more", "nested-stop", "could-go-on"],
)
async def test_a_broken_call_never_runs_with_arguments_taken_from_one_piece(
    pieces: list[str], finish: str
) -> None:
    """A piece that is a whole object on its own is not the call's arguments when the
    call's text is broken: only a whole re-sent after the same text or its beginning is."""
    first, *rest = pieces
    answers = await _deploy_run(
        _piece(0, first, "call_1", "deploy"),
        *[_piece(0, p) for p in rest],
        _chunk({}, finish),
    )
    assert deployed == []
    assert len(answers) == 1
    assert "deployed" not in answers[0]


async def test_a_call_the_limit_cut_never_runs_when_another_came_after_it() -> None:
    """Calls interleaved: "length" cut the first, which a whole piece must not complete."""
    answers = await _deploy_run(
        _piece(0, '{"env": "staging", "options": ', "a", "deploy"),
        _piece(1, '{"text": "hi"}', "b", "note"),
        _piece(0, "{}"),
        _chunk({}, "length"),
    )
    assert deployed == []
    assert "deployed" not in answers[0]


async def test_a_stop_after_length_does_not_undo_the_cut() -> None:
    """A server that says "stop" after "length" has still cut the call: it never runs."""
    ran.clear()
    chunks = [
        _piece(0, '{"text": "x"}', "a", "note"),
        _piece(0, '{"text": "rm -rf'),
        _chunk({}, "length"),
        _chunk({}, "stop"),
    ]
    server = MockServer([_stream(*chunks), _stream(_chunk({"content": "Done."}, "stop"))])
    result = await create_agent(_model(server), tools=[note]).arun("Take a note")
    assert ran == []
    assert "cut off" in result.messages[2].results[0].text  # type: ignore[union-attr]


def test_pieces_without_index_or_id_are_read_in_linear_time(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Ollama-style pieces (no index, no id, the name in each) must not make each chunk
    re-read the whole call so far: the text parsed stays in proportion to the text sent
    (it was quadratic: 40,000 chunks held the event loop for a minute)."""
    parsed: list[int] = []
    real = _chat_stream._is_object

    def counting(text: str) -> bool:
        parsed.append(len(text))
        return real(text)

    monkeypatch.setattr(_chat_stream, "_is_object", counting)

    def chunk(piece: str) -> Any:
        call = NS(index=None, id=None, function=NS(name="note", arguments=piece))
        delta = NS(content=None, reasoning_content=None, reasoning=None, tool_calls=[call])
        return NS(
            object="chat.completion.chunk",
            model="m",
            id="x",
            usage=None,
            choices=[NS(finish_reason=None, delta=delta)],
        )

    pieces = ['{"text": "', *['a}\\"{ [' for _ in range(3000)], '"}']
    reader = _chat_stream.ChatReader("m")
    for piece in pieces:
        reader.read(chunk(piece))
    reader.read(
        NS(
            object="",
            model="m",
            id="x",
            usage=None,
            choices=[NS(finish_reason="tool_calls", delta=None)],
        )
    )
    (call,) = reader.response().message.tool_calls
    sent = sum(map(len, pieces))
    assert call.args == {"text": 'a}"{ [' * 3000}
    assert sum(parsed) <= 3 * sent  # was about 3000 times the text sent


async def test_a_later_completed_response_does_not_undo_a_content_filter() -> None:
    """Responses API: `response.incomplete` for the content filter, then a server (a
    proxy) sending `response.completed`: the filter's word stands, the call never runs."""
    ran.clear()
    output = [call_item("call_1", "note", '{"text": "x"}')]
    events = [
        (kind, {"type": kind, "sequence_number": n, "response": response})
        for n, (kind, response) in enumerate(
            [
                (
                    "response.incomplete",
                    response_object(
                        output, status="incomplete", incomplete_details={"reason": "content_filter"}
                    ),
                ),
                ("response.completed", response_object(output)),
            ]
        )
    ]
    server = MockServer([stream_reply(sse(events))])
    model = OpenAIModel("gpt-5.2", api_key="sk-test", http_client=server.client())
    with pytest.raises(ContentFilterError):
        await create_agent(model, tools=[note]).arun("Take a note")
    assert ran == []
