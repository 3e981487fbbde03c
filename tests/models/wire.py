"""Helpers for adapter tests: a recording mock HTTP server speaking SSE or JSON."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

import httpx2

Reply = httpx2.Response | Callable[[httpx2.Request], httpx2.Response]


def sse(events: Iterable[tuple[str | None, Any]]) -> bytes:
    """A server-sent-events body: `event:` lines when named, JSON (or raw str) data."""
    chunks = []
    for name, data in events:
        payload = data if isinstance(data, str) else json.dumps(data)
        head = f"event: {name}\n" if name else ""
        chunks.append(f"{head}data: {payload}\n\n")
    return "".join(chunks).encode()


def stream_reply(body: bytes, status: int = 200) -> httpx2.Response:
    return httpx2.Response(status, content=body, headers={"content-type": "text/event-stream"})


def error_reply(status: int, body: dict[str, Any]) -> httpx2.Response:
    # retry-after-ms keeps the SDK's honoured backoff at a millisecond in tests.
    return httpx2.Response(status, json=body, headers={"retry-after-ms": "1"})


@dataclass
class MockServer:
    """Answers each request with the next reply and keeps the JSON bodies it was sent."""

    replies: list[Reply]
    bodies: list[dict[str, Any]] = field(default_factory=list)
    paths: list[str] = field(default_factory=list)

    def handle(self, request: httpx2.Request) -> httpx2.Response:
        self.bodies.append(json.loads(request.content or b"{}"))
        self.paths.append(request.url.path)
        if not self.replies:
            raise AssertionError(f"unexpected request #{len(self.bodies)} to {request.url}")
        reply = self.replies.pop(0)
        return reply(request) if callable(reply) else reply

    def client(self) -> httpx2.AsyncClient:
        return httpx2.AsyncClient(transport=httpx2.MockTransport(self.handle))
