"""What the server tests share: a client speaking to the app, AG-UI events read back,
and a real server on a loopback port for tests that need one."""

from __future__ import annotations

import contextlib
import json
import socket
import threading
import time
from collections.abc import AsyncIterator, Iterator
from typing import Any

import httpx
from ag_ui.core import Event
from pydantic import TypeAdapter

TOKEN = "test-token-0123456789abcdef"
AUTH = {"Authorization": f"Bearer {TOKEN}"}

_EVENTS: TypeAdapter[Any] = TypeAdapter(Event)


@contextlib.asynccontextmanager
async def client(application: Any) -> AsyncIterator[httpx.AsyncClient]:
    transport = httpx.ASGITransport(app=application)
    async with httpx.AsyncClient(
        transport=transport, base_url="http://127.0.0.1", headers=AUTH, timeout=30
    ) as c:
        yield c


def events(body: str) -> list[dict[str, Any]]:
    """The AG-UI events of a server-sent stream, each checked against the protocol."""
    found = []
    for block in body.split("\n\n"):
        data = [line[6:] for line in block.splitlines() if line.startswith("data: ")]
        if data:
            event = json.loads("\n".join(data))
            _EVENTS.validate_python(event)  # raises when it is not AG-UI
            found.append(event)
    return found


def types(found: list[dict[str, Any]]) -> list[str]:
    return [e["type"] for e in found]


def run_input(thread_id: str, text: str | None = None, **more: Any) -> dict[str, Any]:
    """An AG-UI RunAgentInput: a user message `text` on the thread, or none."""
    messages = [] if text is None else [{"id": "u1", "role": "user", "content": text}]
    return {
        "threadId": thread_id,
        "runId": f"r-{time.monotonic_ns()}",
        "messages": messages,
        **more,
    }


def approve(interrupt_id: str, payload: dict[str, Any] | None = None) -> list[dict[str, Any]]:
    return [
        {
            "interruptId": interrupt_id,
            "status": "resolved",
            "payload": payload or {"kind": "approve"},
        }
    ]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


@contextlib.contextmanager
def served(application: Any) -> Iterator[str]:
    """`application` on a real uvicorn server in a thread; its base URL."""
    import uvicorn

    port = free_port()
    config = uvicorn.Config(application, host="127.0.0.1", port=port, log_level="warning")
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 20
    while not server.started:
        if time.monotonic() > deadline or not thread.is_alive():
            raise RuntimeError("the server did not start")
        time.sleep(0.02)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(20)
