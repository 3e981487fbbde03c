"""A real MCP server for the tests, written with the mcp SDK: stdio by default,
streamable HTTP on loopback with `http PORT`, stateless and with JSON replies (not
streams) when `stateless` and `json` follow."""

import base64
import os
import sys
import time

from mcp import types
from mcp.server.mcpserver import MCPServer

server = MCPServer("demo")


@server.tool()
def add(a: int, b: int) -> int:
    """Add two numbers."""
    return a + b


@server.tool()
def refuse(reason: str) -> str:
    """Always fails with the reason."""
    raise ValueError(reason)


@server.tool()
def slow(seconds: float) -> str:
    """Sleeps, then answers."""
    time.sleep(seconds)
    return "woke up"


@server.tool()
def quote(context: str, state: str = "", function: str = "") -> str:
    """Echoes arguments whose names a client might use for itself."""
    return f"context={context} state={state} function={function}"


@server.tool()
def attach() -> list[types.ContentBlock]:
    """Returns an embedded text resource, an embedded binary one and a resource link."""
    return [
        types.EmbeddedResource(
            type="resource",
            resource=types.TextResourceContents(
                uri="file:///notes.txt", mime_type="text/plain", text="hello notes"
            ),
        ),
        types.EmbeddedResource(
            type="resource",
            resource=types.BlobResourceContents(
                uri="file:///a.bin",
                mime_type="application/octet-stream",
                blob=base64.b64encode(b"\x00\x01\x02").decode(),
            ),
        ),
        types.ResourceLink(
            type="resource_link",
            name="report",
            uri="file:///report.pdf",
            mime_type="application/pdf",
            description="The quarterly report",
        ),
    ]


@server.tool()
def pid() -> int:
    """The server's process id."""
    return os.getpid()


@server.tool()
def tally_then_crash(path: str) -> str:
    """Appends a line to a file, then kills the server before answering."""
    with open(path, "a") as file:
        file.write("ran\n")
    os._exit(1)


@server.tool()
def crash() -> str:
    """Kills the server process."""
    os._exit(1)


@server.resource("file:///notes.txt", name="notes", mime_type="text/plain")
def notes() -> str:
    """The team's notes."""
    return "buy milk"


@server.resource("file:///logo.png", name="logo", mime_type="image/png")
def logo() -> bytes:
    return b"\x89PNG-ish"


@server.prompt()
def review(language: str) -> list[dict[str, object]]:
    """Asks for a code review."""
    return [
        {"role": "user", "content": f"Review this {language} code."},
        {"role": "assistant", "content": "Paste it and I will."},
    ]


if __name__ == "__main__":
    if sys.argv[1:2] == ["http"]:  # http PORT [stateless] [json]
        import anyio

        modes = sys.argv[3:]
        anyio.run(
            lambda: server.run_streamable_http_async(
                port=int(sys.argv[2]),
                stateless_http="stateless" in modes,
                json_response="json" in modes,
            )
        )
    else:
        server.run("stdio")
