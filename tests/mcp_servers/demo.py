"""A real MCP server for the tests, written with the mcp SDK: stdio by default,
streamable HTTP on loopback with `http PORT`."""

import os
import sys
import time

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
def crash() -> str:
    """Kills the server process."""
    os._exit(1)


if __name__ == "__main__":
    if sys.argv[1:2] == ["http"]:
        import anyio

        anyio.run(lambda: server.run_streamable_http_async(port=int(sys.argv[2])))
    else:
        server.run("stdio")
