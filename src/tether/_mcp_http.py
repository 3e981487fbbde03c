"""The HTTP client tether's MCP connections use: replies read to a bound.

The SDK reads a JSON reply whole and parses it on the event loop, so a server answering
with hundreds of megabytes would hold every run of the process while it is parsed (its
streamed replies stop at 1 MB an event already). Here such a reply fails as it arrives,
and a compressed reply, which the client never asks for, is refused: a few megabytes of
gzip can hold gigabytes.

A server that no longer knows the client's session (it restarted, or let the session
expire) says so with HTTP 404, as the specification asks, or with 400 and words about the
session, as several real servers do. Either becomes one answer the session layer
recognises (`SESSION_GONE`): the request never ran, and a new session is needed.
"""

from __future__ import annotations

import contextlib
import json
import re
from collections.abc import AsyncIterator, Mapping
from typing import Any

import anyio.to_thread
import httpx2

from tether._mcp_stdio import OFF_LOOP_BYTES, fewer_parts

__all__ = ["MAX_JSON_REPLY_BYTES", "SESSION_GONE", "client"]

MAX_JSON_REPLY_BYTES = 16 * 1024 * 1024
"""The largest JSON reply read from an MCP server over HTTP."""
SESSION_GONE = "Session not found"
"""How the error for a request the server refused for want of its session begins."""
_REFUSAL_BYTES = 64 * 1024
"""The most of a 400 reply read to learn whether it is about the session."""
_ABOUT_SESSION = re.compile(r"\bsession\b|not initiali[sz]ed", re.IGNORECASE)
"""Words of a 400 reply saying the server does not know the session: "No valid session
ID provided" (the reference servers), "Server not initialized" (a restarted server that
keeps a single session)."""


class ReplyRefused(httpx2.StreamError):
    """A reply tether will not read (the SDK reports it as a parse error of the reply)."""


class _Capped(httpx2.AsyncByteStream):
    def __init__(self, inner: Any, limit: int = MAX_JSON_REPLY_BYTES) -> None:
        self.inner = inner
        self.limit = limit

    async def __aiter__(self) -> AsyncIterator[bytes]:
        read = 0
        async for chunk in self.inner:
            read += len(chunk)
            if read > self.limit:
                raise ReplyRefused(f"the reply is over {self.limit:,} bytes")
            yield chunk

    async def aclose(self) -> None:
        await self.inner.aclose()


class _Transport(httpx2.AsyncHTTPTransport):
    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        response = await super().handle_async_request(request)
        encoding = response.headers.get("content-encoding", "identity").strip().lower()
        if encoding != "identity":
            await response.aclose()
            raise ReplyRefused(f"the server sent a {encoding!r} reply; none was asked for")
        if response.status_code in (400, 404) and request.headers.get("mcp-session-id"):
            response = await _session_checked(request, response)
        elif response.status_code in (401, 403):
            response = await _unauthorized(request, response)
        if not response.headers.get("content-type", "").startswith("application/json"):
            return response
        response.stream = _Capped(response.stream)
        body = await response.aread()
        if len(body) <= OFF_LOOP_BYTES:
            return response
        shorter = await anyio.to_thread.run_sync(_fewer_parts, body)
        if shorter is None:
            return response
        headers = [(k, v) for k, v in response.headers.raw if k.lower() != b"content-length"]
        return httpx2.Response(
            response.status_code,
            headers=headers,
            content=shorter,
            request=request,
            extensions=response.extensions,
        )


async def _session_checked(request: httpx2.Request, response: httpx2.Response) -> httpx2.Response:
    """`response` (a 400 or 404 to a request naming a session), or, when it says the
    server does not know the session, a 404 with a JSON-RPC error starting with
    `SESSION_GONE` and quoting the server (the SDK passes a JSON error's message on)."""
    said = ""
    if response.status_code == 400:
        response.stream = _Capped(response.stream, _REFUSAL_BYTES)
        try:
            said = (await response.aread()).decode("utf-8", "replace")
        except ReplyRefused:  # too long to be a refusal about the session
            await response.aclose()
            return httpx2.Response(400, request=request, extensions=response.extensions)
        if not _ABOUT_SESSION.search(said):
            return response
        with contextlib.suppress(ValueError, TypeError, KeyError, IndexError):
            said = str(json.loads(said)["error"]["message"])
    await response.aclose()
    quoted = " ".join(said.split())[:200]
    message = f"{SESSION_GONE} (HTTP {response.status_code}{': ' + quoted if quoted else ''})"
    error = {"jsonrpc": "2.0", "id": None, "error": {"code": -32001, "message": message}}
    return httpx2.Response(404, json=error, request=request, extensions=response.extensions)


async def _unauthorized(request: httpx2.Request, response: httpx2.Response) -> httpx2.Response:
    """A 401 or 403 as a JSON-RPC error that says so and what to do (the SDK would say
    "Server returned an error response"): tether sends the credentials it is given in
    `MCPServer(headers=...)` and runs no OAuth flow."""
    await response.aclose()
    wanted = " ".join(response.headers.get("www-authenticate", "").split())[:300]
    message = (
        f"HTTP {response.status_code} {response.reason_phrase}: the server wants credentials"
        f"{f' ({wanted})' if wanted else ''}; give them in MCPServer(headers=...), such as "
        "an Authorization header with a token (tether runs no OAuth flow)"
    )
    error = {"jsonrpc": "2.0", "id": None, "error": {"code": -32001, "message": message}}
    return httpx2.Response(
        response.status_code, json=error, request=request, extensions=response.extensions
    )


def _fewer_parts(body: bytes) -> bytes | None:
    """A long JSON reply with each result's content cut to `MAX_PARTS` (see
    `fewer_parts`), in a worker thread; None when nothing was cut."""
    try:
        data = json.loads(body)
    except ValueError:
        return None  # the SDK says what is wrong with it
    messages = data if isinstance(data, list) else [data]
    cut = [fewer_parts(m.get("result")) for m in messages if isinstance(m, dict)]
    return json.dumps(data).encode() if any(cut) else None


def client(headers: Mapping[str, str], timeout: float) -> httpx2.AsyncClient:
    """An HTTP client for one MCP connection."""
    return httpx2.AsyncClient(
        headers={**headers, "Accept-Encoding": "identity"},
        timeout=timeout,
        transport=_Transport(),
    )
