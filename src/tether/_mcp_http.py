"""The HTTP client tether's MCP connections use: replies read to a bound.

The SDK reads a JSON reply whole and parses it on the event loop, so a server answering
with hundreds of megabytes would hold every run of the process while it is parsed (its
streamed replies stop at 1 MB an event already). Here such a reply fails as it arrives,
and a compressed reply, which the client never asks for, is refused: a few megabytes of
gzip can hold gigabytes.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping
from typing import Any

import httpx2

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
        if response.headers.get("content-type", "").startswith("application/json"):
            response.stream = _Capped(response.stream)
        return response


def client(headers: Mapping[str, str], timeout: float) -> httpx2.AsyncClient:
    """An HTTP client for one MCP connection."""
    return httpx2.AsyncClient(
        headers={**headers, "Accept-Encoding": "identity"},
        timeout=timeout,
        transport=_Transport(),
    )
