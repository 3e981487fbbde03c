"""MCP servers that misbehave, for the tests: plain JSON-RPC written by hand, so each
can fail exactly where a test needs it to.

    hostile.py MODE [--log FILE]             stdio
    hostile.py http PORT MODE [--log FILE]   HTTP on loopback (one JSON reply a request)

MODE says what the server does wrong:

- `silent`: never answers `initialize` (it reads and ignores everything).
- `no-list`: answers `initialize`, never `tools/list`.
- `no-call`: answers `initialize` and `tools/list`, never `tools/call`.
- `partial`: answers `initialize` with half a line, then stalls.
- `flood`: never answers; sends notifications as fast as it can instead.
- `trickle`: never answers, but keeps saying a little: a space every 0.1 s on stdio
  (a line that never ends), a comment line every 0.1 s of an event stream over HTTP.
- `huge`: answers `initialize` with one line of 64 MB.
- `gzip` (HTTP only): answers `initialize` gzipped, 128 MB of it.
- `many-parts`: answers its tool `wait` with 300,000 tiny content parts (about 10 MB).

Its tool `crash` kills it. With `--log FILE`, each start appends a line to FILE; with
`--log FILE --silent-after N` too, every start after the first N is `silent`.
"""

from __future__ import annotations

import json
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

TOOLS = [
    {"name": "wait", "description": "Waits.", "inputSchema": {"type": "object"}},
    {"name": "crash", "description": "Kills the server.", "inputSchema": {"type": "object"}},
]
HUGE_BYTES = 64 * 1024 * 1024


def started(log: str | None) -> int:
    """How many times the server started before, this start counted."""
    if log is None:
        return 0
    try:
        with open(log) as file:
            before = len(file.readlines())
    except FileNotFoundError:
        before = 0
    with open(log, "a") as file:
        file.write("start\n")
    return before


def reply(request: dict[str, Any], result: dict[str, Any]) -> bytes:
    return json.dumps({"jsonrpc": "2.0", "id": request["id"], "result": result}).encode() + b"\n"


def initialized(request: dict[str, Any]) -> bytes:
    return reply(
        request,
        {
            "protocolVersion": request["params"]["protocolVersion"],
            "capabilities": {"tools": {}},
            "serverInfo": {"name": "hostile", "version": "1"},
        },
    )


def answer(mode: str, request: dict[str, Any]) -> bytes | None:
    """The reply to one request, or None for none."""
    method = request.get("method")
    if "id" not in request or mode in ("silent", "flood", "trickle"):
        return None
    if method == "initialize":
        if mode == "partial":
            return initialized(request)[:20]
        if mode == "huge":
            line = initialized(request)
            return line[:-3] + b', "padding": "' + b"x" * HUGE_BYTES + b'"}}\n'
        return initialized(request)
    if method == "tools/list" and mode != "no-list":
        return reply(request, {"tools": TOOLS})
    return called(mode, request)


def called(mode: str, request: dict[str, Any]) -> bytes | None:
    """The reply to a tool call, or None for none."""
    if request.get("method") != "tools/call":
        return None  # never answered
    if mode == "many-parts":
        return reply(request, {"content": [{"type": "text", "text": "ab"}] * 300_000})
    if request["params"]["name"] == "crash":
        sys.stdout.flush()
        import os

        os._exit(1)
    return None  # never answered


def bomb(line: bytes) -> bytes:
    """`line` gzipped, with 128 MB of spaces after it (valid JSON, a few hundred KB)."""
    import zlib

    packer = zlib.compressobj(9, zlib.DEFLATED, 31)
    parts = [packer.compress(line[:-1])]
    spaces = b" " * (1024 * 1024)
    parts += [packer.compress(spaces) for _ in range(128)]
    return b"".join([*parts, packer.compress(b"\n"), packer.flush()])


def flood(write: Any, *, sse: bool = False) -> None:
    """Notifications, as fast as the reader takes them, forever."""
    note = {"jsonrpc": "2.0", "method": "notifications/message"}
    line = json.dumps({**note, "params": {"level": "info", "data": "x" * 200}}).encode()
    framed = b"event: message\ndata: " + line + b"\n\n" if sse else line + b"\n"
    while True:
        write(framed * 100)


def trickle(write: Any, piece: bytes) -> None:
    while True:
        write(piece)
        time.sleep(0.1)


def stdio(mode: str) -> None:
    out = sys.stdout.buffer
    send = lambda data: (out.write(data), out.flush())  # noqa: E731
    if mode == "flood":
        threading.Thread(target=flood, args=(send,), daemon=True).start()
    if mode == "trickle":
        threading.Thread(target=trickle, args=(send, b" "), daemon=True).start()
    for line in sys.stdin.buffer:
        try:
            request = json.loads(line)
        except ValueError:
            continue
        said = answer(mode, request)
        if said is not None:
            out.write(said)
            out.flush()
    time.sleep(3600)  # stdin closed: stay, as a stuck server would


def http(port: int, mode: str) -> None:
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args: object) -> None:
            pass

        def do_GET(self) -> None:
            self.send_response(405)
            self.end_headers()

        def do_DELETE(self) -> None:
            self.send_response(200)
            self.end_headers()

        def do_POST(self) -> None:
            length = int(self.headers.get("content-length", 0))
            request = json.loads(self.rfile.read(length))
            said = answer(mode, request)
            if "id" not in request:
                self.send_response(202)
                self.end_headers()
                return
            if mode in ("flood", "trickle"):
                self.send_response(200)
                self.send_header("content-type", "text/event-stream")
                self.end_headers()
                send = lambda data: (self.wfile.write(data), self.wfile.flush())  # noqa: E731
                if mode == "flood":
                    flood(send, sse=True)
                trickle(send, b": still here\n\n")
            if said is None:
                time.sleep(3600)  # the connection stays open, with nothing said
                return
            self.send_response(200)
            self.send_header("content-type", "application/json")
            self.send_header("mcp-session-id", "s1")
            if mode == "gzip":
                said = bomb(said)
                self.send_header("content-encoding", "gzip")
            if mode == "partial":  # promises more than it sends
                self.send_header("content-length", str(len(said) + 100))
                self.end_headers()
                self.wfile.write(said)
                self.wfile.flush()
                time.sleep(3600)
                return
            self.send_header("content-length", str(len(said)))
            self.end_headers()
            self.wfile.write(said)

    ThreadingHTTPServer.daemon_threads = True
    ThreadingHTTPServer(("127.0.0.1", port), Handler).serve_forever()


def option(argv: list[str], name: str) -> str | None:
    """The value of `--name VALUE`, taken out of `argv`."""
    if name not in argv:
        return None
    at = argv.index(name)
    value = argv[at + 1]
    del argv[at : at + 2]
    return value


def main(argv: list[str]) -> None:
    log = option(argv, "--log")
    good = option(argv, "--silent-after")
    if argv[0] == "http":
        port, mode = int(argv[1]), argv[2]
    else:
        port, mode = 0, argv[0]
    if started(log) >= int(good or sys.maxsize):
        mode = "silent"
    if port:
        http(port, mode)
    else:
        stdio(mode)


if __name__ == "__main__":
    main(sys.argv[1:])
