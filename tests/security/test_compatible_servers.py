"""An OpenAI-compatible server is outside input like any other: what it leaves out, repeats
or ends badly never widens a limit or passes for a finished answer."""

from __future__ import annotations

import json

import pytest

from tests.models.test_chat_servers import llama_call, llama_text
from tests.models.wire import MockServer, stream_reply
from tether import Limits, ModelError, create_agent, tool
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
