"""Synchronous `agent.run()`, again and again, with the OpenAI and Anthropic adapters
against a loopback server that keeps connections alive, as a real one does.

Run by `test_sync_runs.py` in a process of its own, so that what Python and asyncio print
on stderr is seen: each `run()` has an event loop of its own, and a client left open by
one loop used to be closed by the garbage collector inside the next ("Task exception was
never retrieved ... Event loop is closed"). A tool collects garbage inside a run to make
that happen every time. Exits non-zero when anything went unraised or a connection was
left open.
"""

from __future__ import annotations

import gc
import socket
import sys
import threading
import time
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from tether import create_agent, tool
from tether.models.anthropic import AnthropicModel
from tether.models.openai import OpenAIModel

from .test_anthropic import claude_stream, text_block, tool_block
from .test_openai import chat_stream

unraisable: list[str] = []
sys.unraisablehook = lambda hook: unraisable.append(f"{hook.exc_type.__name__}: {hook.exc_value}")

REPLIES = {
    "/v1/chat/completions": [
        chat_stream(None, [("call_1", "collect", "{}")]).content,
        chat_stream("ok").content,
    ],
    "/v1/messages": [
        claude_stream([tool_block("call_1", "collect", "{}")], stop_reason="tool_use"),
        claude_stream([text_block("ok")]),
    ],
}


class Server(ThreadingHTTPServer):
    daemon_threads = True
    open_connections = 0
    answered = 0
    lock = threading.Lock()


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive
    server: Server

    def setup(self) -> None:
        super().setup()
        self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)  # no Nagle waits
        with self.server.lock:
            self.server.open_connections += 1

    def finish(self) -> None:
        super().finish()
        with self.server.lock:
            self.server.open_connections -= 1

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers["content-length"]))
        with self.server.lock:
            replies = REPLIES[self.path]
            reply = replies[self.server.answered % 2]
            self.server.answered += 1
        self.send_response(200)
        self.send_header("content-type", "text/event-stream")
        self.send_header("content-length", str(len(reply)))
        self.end_headers()
        self.wfile.write(reply)

    def log_message(self, *args: Any) -> None:
        pass


@tool
def collect() -> str:
    """Collect garbage (inside the run's event loop)."""
    gc.collect()
    return "collected"


def main() -> int:
    server = Server(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    url = f"http://127.0.0.1:{server.server_address[1]}"
    models: dict[str, Callable[[], Any]] = {
        "openai": lambda: OpenAIModel("gpt-5.2", api="chat", api_key="k", base_url=f"{url}/v1"),
        "anthropic": lambda: AnthropicModel("claude-sonnet-5-5", api_key="k", base_url=url),
    }
    for name, make in models.items():
        agent = create_agent(make(), tools=[collect], checkpointer=None)
        for _ in range(3):  # one agent, three loops
            assert agent.run("Go").output == "ok", name
        for _ in range(3):  # a new model each time: the last one is collected in a run
            assert create_agent(make(), tools=[collect], checkpointer=None).run("Go").output == "ok"
    gc.collect()
    deadline = time.monotonic() + 10
    while server.open_connections and time.monotonic() < deadline:
        time.sleep(0.02)  # the server sees each close a moment after it happens
    failed = False
    if server.open_connections:
        print(f"{server.open_connections} connections left open", file=sys.stderr)
        failed = True
    for said in unraisable:
        print(f"unraisable: {said}", file=sys.stderr)
        failed = True
    server.shutdown()
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
