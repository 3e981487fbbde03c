"""What tether's MCP client offers servers besides calls (roots, progress as events) and
how it reads what they send back (text blobs, sessions a server lost), against a real
server written with the SDK (tests/mcp_servers/features.py)."""

from __future__ import annotations

import sys
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path

import httpx2
import pytest

from tether import create_agent
from tether._mcp_client import PROGRESS_MESSAGE_CHARS, backend_roots
from tether._mcp_http import SESSION_GONE, _session_checked, _unauthorized
from tether.backends import CompositeBackend, StateBackend
from tether.backends.filesystem import FilesystemBackend
from tether.events import Event, RunFinished, ToolCallFinished, ToolProgress
from tether.mcp import MCPServer
from tether.messages import BinaryPart, TextPart, ToolCall
from tether.models import ScriptedModel

from .conftest import by_server_id
from .test_mcp_interop import Listening

FEATURES = str(Path(__file__).parent / "mcp_servers" / "features.py")


@pytest.fixture(scope="module")
def features_url() -> Iterator[str]:
    """The server over streamable HTTP, one process for the module (each test's agent has
    sessions of its own)."""
    server = Listening([sys.executable, FEATURES, "http", "{port}"])
    server.start()
    yield f"http://127.0.0.1:{server.port}/mcp"
    server.kill()


@pytest.fixture
def features(features_url: str) -> Callable[..., MCPServer]:
    return lambda **kwargs: MCPServer("f", url=features_url, **kwargs)


async def events_of(agent: object, prompt: str = "go") -> list[Event]:
    return [e async for e in agent.stream(prompt)]  # type: ignore[attr-defined]


def answers_of(events: list[Event]) -> dict[str, object]:
    (finished,) = [e for e in events if isinstance(e, RunFinished)]
    return by_server_id(finished.result.messages)  # type: ignore[return-value]


async def test_a_server_asking_for_roots_gets_the_agents_backend_directories(
    tmp_path: Path, features: Callable[..., MCPServer]
) -> None:
    work, notes = tmp_path / "work", tmp_path / "notes"
    work.mkdir()
    notes.mkdir()
    backend = CompositeBackend(
        FilesystemBackend(work),
        {"/notes/": FilesystemBackend(notes), "/scratch/": StateBackend()},
    )
    model = ScriptedModel([[ToolCall("f_roots", {}, id="r")], "ok"])
    agent = create_agent(model, mcp_servers=[features()], backend=backend)
    answers = answers_of(await events_of(agent))
    assert answers["r"].text.splitlines() == [  # type: ignore[attr-defined]
        f"{work.resolve().as_uri()} /",
        f"{notes.resolve().as_uri()} /notes",
    ]


async def test_an_agent_without_files_on_the_host_gives_no_roots(
    features: Callable[..., MCPServer],
) -> None:
    for options in ({}, {"filesystem": False}):
        model = ScriptedModel([[ToolCall("f_roots", {}, id="r")], "ok"])
        agent = create_agent(model, mcp_servers=[features()], **options)  # type: ignore[arg-type]
        answers = answers_of(await events_of(agent))
        assert answers["r"].text == "(no roots)"  # type: ignore[attr-defined]


async def test_progress_notifications_become_events_of_the_call(
    features: Callable[..., MCPServer],
) -> None:
    model = ScriptedModel([[ToolCall("f_steps", {"count": 3}, id="s")], "ok"])
    events = await events_of(create_agent(model, mcp_servers=[features()]))
    (call,) = [e.call for e in events if isinstance(e, ToolCallFinished)]
    progress = [e for e in events if isinstance(e, ToolProgress)]
    assert progress
    assert {(e.call_id, e.total, e.path) for e in progress} == {(call.id, 3.0, ("main",))}
    assert progress[-1].progress == 3  # the last word is always passed on
    assert progress[-1].message == "step 3 of 3"
    # in order, and before the call's end
    assert [e.progress for e in progress] == sorted(e.progress for e in progress)
    finished = next(i for i, e in enumerate(events) if isinstance(e, ToolCallFinished))
    assert events.index(progress[-1]) < finished


async def test_progress_a_server_should_not_be_believed_is_dropped_or_cut(
    features: Callable[..., MCPServer],
) -> None:
    model = ScriptedModel([[ToolCall("f_odd_progress", {}, id="o")], "ok"])
    events = await events_of(create_agent(model, mcp_servers=[features()]))
    progress = [e for e in events if isinstance(e, ToolProgress)]
    assert progress  # the last one is sound
    assert all(e.progress >= 0 for e in progress)  # a negative count is dropped
    assert all(e.total is None for e in progress)  # a total of NaN or -5 is none
    assert all(len(e.message or "") <= PROGRESS_MESSAGE_CHARS for e in progress)
    assert progress[-1].progress == 4


async def test_text_blobs_are_shown_to_the_model_as_text(
    features: Callable[..., MCPServer],
) -> None:
    """A blob of a text type (text/*, JSON, XML...) is decoded, in its charset when it
    names one, with what does not decode replaced; an image stays an image; other bytes
    are a line saying what they are."""
    model = ScriptedModel([[ToolCall("f_blobs", {}, id="b")], "ok"])
    answers = answers_of(await events_of(create_agent(model, mcp_servers=[features()])))
    parts = answers["b"].content  # type: ignore[attr-defined]
    assert parts[:4] == (
        TextPart("[resource file:///notes.txt]\nhéllo notes\n"),
        TextPart('[resource file:///data.json]\n{"a": 1}'),
        TextPart("[resource file:///old.txt]\ncafé"),
        TextPart("[resource file:///broken.txt]\nok \ufffd\ufffd end"),
    )
    assert parts[4] == BinaryPart(b"\x89PNG\r\n", "image/png")
    assert parts[5] == TextPart(
        "[resource file:///bundle.zip: 4 bytes of application/zip, not shown]"
    )


async def test_a_big_text_blob_is_decoded_off_the_event_loop_and_evicted_like_any_result(
    tmp_path: Path,
) -> None:
    """Over stdio (an event of the HTTP transport stops at 1 MB)."""
    stdio = MCPServer("f", command=sys.executable, args=[FEATURES])
    model = ScriptedModel([[ToolCall("f_big_text_blob", {"megabytes": 2}, id="b")], "ok"])
    agent = create_agent(model, mcp_servers=[stdio], backend=FilesystemBackend(tmp_path))
    answers = answers_of(await events_of(agent))
    (note,) = answers["b"].content  # type: ignore[attr-defined]
    assert "saved to /large_tool_results/" in note.text  # bounded like other results
    (saved,) = (tmp_path / "large_tool_results").iterdir()
    assert saved.read_text().endswith("a" * 1000)


async def test_resources_read_as_blobs_of_a_text_type_are_text(
    features: Callable[..., MCPServer],
) -> None:
    server = features()
    assert await server.read_resource("file:///blob.txt") == [
        TextPart("plain words, sent as bytes")
    ]
    assert await server.read_resource("file:///blob.csv") == [TextPart("a,b\n1,2\n")]
    assert await server.read_resource("file:///blob.bin") == [
        BinaryPart(b"\x00\x01", "application/octet-stream")
    ]


class _Arriving(httpx2.AsyncByteStream):
    """A reply's body as it comes off the network, in pieces."""

    def __init__(self, body: bytes) -> None:
        self.body = body

    async def __aiter__(self) -> AsyncIterator[bytes]:
        for start in range(0, len(self.body), 4096):
            yield self.body[start : start + 4096]


def _request(session: str | None = "abc") -> httpx2.Request:
    headers = {"mcp-session-id": session} if session else {}
    return httpx2.Request("POST", "http://127.0.0.1:9/mcp", headers=headers)


@pytest.mark.parametrize(
    ("status", "body", "gone"),
    [
        (404, b"", True),
        (404, b'{"jsonrpc":"2.0","id":null,"error":{"code":-32600,"message":"x"}}', True),
        (
            400,
            b'{"jsonrpc":"2.0","error":{"code":-32000,"message":"Bad Request: No valid '
            b'session ID provided"}}',
            True,
        ),
        (400, b"Invalid or missing session ID", True),
        (400, b"Bad Request: Server not initialized", True),
        (400, b'{"jsonrpc":"2.0","id":3,"error":{"code":-32602,"message":"bad a"}}', False),
        (400, b"session " * 20_000, False),  # too long to be about the session
    ],
)
async def test_a_server_that_lost_the_session_is_told_apart(
    status: int, body: bytes, gone: bool
) -> None:
    request = _request()
    response = httpx2.Response(status, stream=_Arriving(body), request=request)
    checked = await _session_checked(request, response)
    said = (await checked.aread()).decode()
    assert (SESSION_GONE in said) is gone
    if gone:
        assert checked.status_code == 404
        assert f"(HTTP {status}" in said
    elif len(body) < 1000:
        assert said == body.decode()  # passed on as it came


async def test_a_refusal_for_want_of_credentials_says_where_they_go() -> None:
    request = _request(None)
    response = httpx2.Response(
        401, headers={"www-authenticate": 'Bearer realm="x"'}, request=request
    )
    said = (await (await _unauthorized(request, response)).aread()).decode()
    assert 'HTTP 401 Unauthorized: the server wants credentials (Bearer realm=\\"x\\")' in said
    assert "MCPServer(headers=...)" in said


def test_roots_name_the_agents_paths() -> None:
    assert backend_roots(None) == ()
    assert backend_roots(StateBackend()) == ()
