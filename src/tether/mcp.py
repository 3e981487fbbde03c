"""Tools from MCP servers (extra `tether[mcp]`, the official `mcp` SDK, version 2).

    agent = create_agent(model, mcp_servers=[
        MCPServer("files", command="python", args=["my_server.py"]),     # stdio
        MCPServer("search", url="http://127.0.0.1:8000/mcp"),            # streamable HTTP
    ])

`create_agent` lists each server's tools once, so the model sees them from the first
request; their names get the server's prefix ("files_read"). Each run starts its own
connections and closes them when it ends. A call that times out, fails, or finds the
server gone is a tool error; the run goes on.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import re
import sys
from collections.abc import AsyncIterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TextIO

import pydantic

from tether.capabilities.base import Capability
from tether.errors import ConfigurationError, ToolError, describe
from tether.messages import BinaryPart, TextPart
from tether.state import RunState, ToolContext
from tether.tools.tool import OPEN_CONTEXT, Tool

if TYPE_CHECKING:
    from mcp import ClientSession

__all__ = ["MCPServer", "MCPTools"]

_SESSIONS = "mcp_sessions"


def _sdk() -> Any:
    try:
        import mcp
    except ImportError as exc:
        raise ConfigurationError("MCP servers need the mcp SDK: pip install 'tether[mcp]'") from exc
    return mcp


@dataclass(frozen=True)
class MCPServer:
    """How to reach one MCP server: a command to start (stdio) or a `url` (streamable
    HTTP). `prefix` (default "<name>_") goes before its tool names; `timeout_seconds`
    bounds one tool call."""

    name: str
    command: str | None = None
    args: Sequence[str] = ()
    env: Mapping[str, str] | None = None
    cwd: str | None = None
    url: str | None = None
    headers: Mapping[str, str] = field(default_factory=dict)
    prefix: str | None = None
    timeout_seconds: float = 60.0

    def __post_init__(self) -> None:
        if (self.command is None) == (self.url is None):
            raise ConfigurationError(f"MCPServer {self.name!r} needs a command or a url, not both")
        if not re.fullmatch(r"[A-Za-z0-9_-]{1,40}", self.name):
            raise ConfigurationError(f"MCPServer name {self.name!r}: letters, digits, '_', '-'")
        _sdk()

    @property
    def tool_prefix(self) -> str:
        return f"{self.name}_" if self.prefix is None else self.prefix

    @contextlib.asynccontextmanager
    async def connect(self) -> AsyncIterator[ClientSession]:
        """An initialized session, closed on leaving the block."""
        mcp = _sdk()
        async with contextlib.AsyncExitStack() as stack:
            if self.command is not None:
                from mcp.client.stdio import stdio_client

                params = mcp.StdioServerParameters(
                    command=self.command,
                    args=list(self.args),
                    env=dict(self.env) if self.env is not None else None,
                    cwd=self.cwd,
                )
                errors = _server_log(stack)
                read, write = await stack.enter_async_context(stdio_client(params, errlog=errors))
            else:
                import httpx2
                from mcp.client.streamable_http import streamable_http_client

                client = await stack.enter_async_context(
                    httpx2.AsyncClient(headers=dict(self.headers), timeout=self.timeout_seconds)
                )
                assert self.url is not None
                transport = streamable_http_client(self.url, http_client=client)
                read, write, *_ = await stack.enter_async_context(transport)
            session = await stack.enter_async_context(mcp.ClientSession(read, write))
            await session.initialize()
            yield session

    async def list_tools(self) -> list[Any]:
        """The server's tools, as the SDK describes them."""
        async with self.connect() as session:
            return list((await session.list_tools()).tools)


class _Connection:
    """One server's session for a run, held open by a task of its own: when the server
    goes away, the SDK cancels the scopes of that task, not the run's."""

    def __init__(self, server: MCPServer) -> None:
        self.server = server
        self.session: ClientSession | None = None
        self.error: BaseException | None = None
        self._done = asyncio.Event()
        self._task: asyncio.Task[None] | None = None

    async def open(self) -> None:
        ready = asyncio.Event()

        async def hold() -> None:
            try:
                async with self.server.connect() as session:
                    self.session = session
                    ready.set()
                    await self._done.wait()
            except BaseException as exc:  # the server failed or went away, as the SDK says
                self.error = exc
            finally:
                self.session = None
                ready.set()

        self._task = asyncio.create_task(hold())
        try:
            await ready.wait()
        except BaseException:
            self._task.cancel()
            raise

    async def close(self) -> None:
        """Let the session end, giving a server that hangs 5 seconds (its task keeps any
        error to itself: a crashed server may not close cleanly)."""
        self._done.set()
        if self._task is None:
            return
        try:
            await asyncio.wait_for(asyncio.shield(self._task), 5)
        except TimeoutError:
            self._task.cancel()
        except asyncio.CancelledError:  # the run is being stopped: so is the session
            self._task.cancel()
            raise


def _task_only(spec: Any) -> bool:
    execution = getattr(spec, "execution", None)
    return getattr(execution, "task_support", None) == "required"


def _server_log(stack: contextlib.AsyncExitStack) -> TextIO:
    """Where a stdio server's stderr goes: ours, when it is a real file (a captured
    stderr, such as pytest's, has no descriptor a process could write to), else nowhere."""
    try:
        sys.stderr.fileno()
    except (AttributeError, OSError, ValueError):
        return stack.enter_context(open(os.devnull, "w"))
    return sys.stderr


class _Arguments(pydantic.BaseModel):
    """Any JSON object: the MCP server checks its own arguments."""

    model_config = pydantic.ConfigDict(extra="allow")


class MCPTools(Capability):
    """The tools of `servers`, listed once; each run opens and closes its connections."""

    def __init__(self, servers: Sequence[MCPServer]) -> None:
        self.servers = {s.name: s for s in servers}
        if len(self.servers) != len(servers):
            raise ConfigurationError("two MCP servers have the same name")
        from tether.agent import _run_sync

        self._tools: list[Tool] = []
        for server in servers:
            try:
                listed = _run_sync(server.list_tools)
            except Exception as exc:
                raise ConfigurationError(
                    f"could not list the tools of MCP server {server.name!r} "
                    f"({server.url or server.command}): {describe(exc)}"
                ) from exc
            # A tool that must run as a task (MCP's "taskSupport": "required") cannot be
            # called plainly, and tether does not run MCP tasks: it is left out.
            self._tools += [self._tool(server, t) for t in listed if not _task_only(t)]

    def tools(self) -> Sequence[Tool]:
        return self._tools

    async def on_run_start(self, state: RunState) -> None:
        connections = {name: _Connection(server) for name, server in self.servers.items()}
        state.data[_SESSIONS] = connections
        for connection in connections.values():
            await connection.open()  # a failure is kept: its calls report it

    async def on_run_end(self, state: RunState) -> None:
        for connection in state.data.pop(_SESSIONS, {}).values():
            await connection.close()

    def _tool(self, server: MCPServer, spec: Any) -> Tool:
        remote = spec.name

        async def call(**arguments: Any) -> Any:
            context: ToolContext = arguments.pop(OPEN_CONTEXT)
            connection = context.state.data.get(_SESSIONS, {}).get(server.name)
            session = connection.session if connection is not None else None
            if session is None:
                why = describe(connection.error) if connection and connection.error else "closed"
                raise ToolError(f"MCP server {server.name!r} is not available: {why}")
            try:
                result = await session.call_tool(
                    remote, arguments, read_timeout_seconds=server.timeout_seconds
                )
            except (Exception, asyncio.CancelledError) as exc:
                task = asyncio.current_task()
                if isinstance(exc, asyncio.CancelledError) and task and task.cancelling():
                    raise  # the run itself is being stopped
                why = describe(connection.error) if connection.error else describe(exc)
                raise ToolError(f"MCP server {server.name!r} failed on {remote}: {why}") from exc
            parts = [_part(c) for c in getattr(result, "content", None) or []]
            if getattr(result, "is_error", False):
                raise ToolError(
                    " ".join(p.text for p in parts if isinstance(p, TextPart)) or "failed"
                )
            return parts or "(no output)"

        name = re.sub(r"[^A-Za-z0-9_-]", "_", server.tool_prefix + remote)[:64]
        schema = dict(spec.input_schema or {"type": "object"})
        schema.pop("title", None)
        return Tool(
            name=name,
            description=spec.description or remote,
            args_model=_Arguments,
            function=call,
            context_param=OPEN_CONTEXT,
            parameters=schema,
        )


_SHOWN_BINARY = ("image/", "application/pdf")
"""Binary content a model can be shown; other bytes are described in words."""


def _part(content: Any) -> TextPart | BinaryPart:
    """One piece of an MCP tool result as the model should see it."""
    import base64

    kind = getattr(content, "type", "")
    if kind == "text":
        return TextPart(content.text)
    if kind in ("image", "audio"):
        return BinaryPart(base64.b64decode(content.data), content.mime_type)
    if kind == "resource":
        return _resource(content.resource)
    if kind == "resource_link":
        about = f": {content.description}" if content.description else ""
        mime = f" ({content.mime_type})" if content.mime_type else ""
        return TextPart(f"[resource link {content.name}{mime} {content.uri}{about}]")
    return TextPart(f"[MCP content of type {kind!r}, not shown]")


def _resource(resource: Any) -> TextPart | BinaryPart:
    """An embedded resource: its text, or its bytes when a model can be shown them."""
    import base64

    if hasattr(resource, "text"):
        return TextPart(f"[resource {resource.uri}]\n{resource.text}")
    mime = getattr(resource, "mime_type", None) or "application/octet-stream"
    data = base64.b64decode(resource.blob)
    if mime.startswith(_SHOWN_BINARY):
        return BinaryPart(data, mime)
    return TextPart(f"[resource {resource.uri}: {len(data):,} bytes of {mime}, not shown]")
