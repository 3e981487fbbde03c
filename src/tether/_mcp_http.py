"""The HTTP client tether's MCP connections use: replies read to a bound.

The SDK reads a JSON reply whole and parses it on the event loop, so a server answering
with hundreds of megabytes would hold every run of the process while it is parsed (its
streamed replies stop at 1 MB an event already). Here such a reply fails as it arrives,
and a compressed reply, which the client never asks for, is refused: a few megabytes of
gzip can hold gigabytes.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Mapping
from typing import Any

import anyio.to_thread
import httpx2

from tether._mcp_stdio import OFF_LOOP_BYTES, fewer_parts

__all__ = ["MAX_JSON_REPLY_BYTES", "client"]

MAX_JSON_REPLY_BYTES = 16 * 1024 * 1024
"""The largest JSON reply read from an MCP server over HTTP."""


class ReplyRefused(httpx2.StreamError):
    """A reply tether will not read (the SDK reports it as a parse error of the reply)."""


class _Capped(httpx2.AsyncByteStream):
    def __init__(self, inner: Any) -> None:
        self.inner = inner

    async def __aiter__(self) -> AsyncIterator[bytes]:
        read = 0
        async for chunk in self.inner:
            read += len(chunk)
            if read > MAX_JSON_REPLY_BYTES:
                raise ReplyRefused(f"the reply is over {MAX_JSON_REPLY_BYTES:,} bytes")
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
