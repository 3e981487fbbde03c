"""A real HTTP server on the loopback interface that answers each request with a scripted
reply, and can break it: cut the body short, reset the connection, or stop answering.

Unlike a mock transport, the SDK's own HTTP client, connection handling and timeouts are
all in play.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import socket
import struct
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any, Literal


@dataclass
class Reply:
    """One answer. `cut` sends only that many bytes of the body; `then` is what happens
    after what is sent: a clean close, a TCP reset, or silence for `hang` seconds."""

    status: int = 200
    body: bytes = b""
    headers: dict[str, str] = field(default_factory=lambda: {"content-type": "text/event-stream"})
    cut: int | None = None
    then: Literal["close", "reset", "hang"] = "close"
    hang: float = 5.0
    head: bool = True  # False: not even the status line is sent


def error(status: int, message: str, kind: str = "api_error", **headers: str) -> Reply:
    """An error reply in the shape both providers use: {"error": {"type", "message"}}."""
    body = json.dumps({"type": "error", "error": {"type": kind, "message": message}}).encode()
    return Reply(
        status,
        body,
        {"content-type": "application/json", "request-id": "req_fault", **headers},
    )


class FaultServer:
    """Serves `replies` in order, one connection each, from a thread of its own.

    `chunked` sends each body in HTTP chunks of `CHUNK` bytes, as AWS streams do: a
    client then reads what came so far, and a cut or a reset ends the body before its
    last chunk (a break it can tell from the end)."""

    def __init__(self, replies: list[Reply], *, chunked: bool = False) -> None:
        self.chunked = chunked
        self.replies = list(replies)
        self.requests: list[dict[str, Any]] = []
        self.paths: list[str] = []
        self._loop = asyncio.new_event_loop()
        self._ready = threading.Event()
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self.port = 0

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def __enter__(self) -> FaultServer:
        self._thread.start()
        self._ready.wait(10)
        return self

    def __exit__(self, *exc: object) -> None:
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(10)

    def _serve(self) -> None:
        asyncio.set_event_loop(self._loop)
        server = self._loop.run_until_complete(asyncio.start_server(self._handle, "127.0.0.1", 0))
        self.port = server.sockets[0].getsockname()[1]
        self._ready.set()
        self._loop.run_forever()
        pending = asyncio.all_tasks(self._loop)
        for task in pending:  # a reply still hanging
            task.cancel()
        self._loop.run_until_complete(asyncio.gather(*pending, return_exceptions=True))
        server.close()
        with contextlib.suppress(Exception):
            self._loop.run_until_complete(server.wait_closed())
        self._loop.close()

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            head = await reader.readuntil(b"\r\n\r\n")
        except (asyncio.IncompleteReadError, ConnectionError):
            writer.close()
            return
        lines = head.decode("latin-1").split("\r\n")
        self.paths.append(lines[0].split(" ")[1])
        length = 0
        for line in lines[1:]:
            name, _, value = line.partition(":")
            if name.strip().lower() == "content-length":
                length = int(value)
        body = await reader.readexactly(length) if length else b""
        self.requests.append(json.loads(body or b"{}"))
        reply = self.replies.pop(0) if self.replies else error(500, "no reply scripted")
        sent = reply.body if reply.cut is None else reply.body[: reply.cut]
        headers = {**reply.headers, "connection": "close"}
        if self.chunked:
            headers["transfer-encoding"] = "chunked"
            whole = reply.cut is None and reply.then == "close"
            sent = _chunked(sent, last=whole)
        elif reply.cut is None and reply.then == "close":
            headers["content-length"] = str(len(sent))
        status = f"HTTP/1.1 {reply.status} {'OK' if reply.status < 400 else 'Error'}\r\n"
        if reply.head:
            head_text = status + "".join(f"{k}: {v}\r\n" for k, v in headers.items())
            writer.write((head_text + "\r\n").encode())
            writer.write(sent)
        with contextlib.suppress(ConnectionError):
            await writer.drain()
        if reply.then == "hang":
            await asyncio.sleep(reply.hang)
        if reply.then == "reset":
            sock = writer.get_extra_info("socket")
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            writer.transport.abort()
            return
        writer.close()


CHUNK = 64


def _chunked(body: bytes, *, last: bool) -> bytes:
    """`body` in HTTP chunks, with the closing empty chunk when it is all there is."""
    pieces = [body[i : i + CHUNK] for i in range(0, len(body), CHUNK)]
    encoded = b"".join(f"{len(p):x}\r\n".encode() + p + b"\r\n" for p in pieces)
    return encoded + (b"0\r\n\r\n" if last else b"")


@contextlib.contextmanager
def serving(replies: list[Reply], *, chunked: bool = False) -> Iterator[FaultServer]:
    with FaultServer(replies, chunked=chunked) as server:
        yield server
