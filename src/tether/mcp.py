"""Tools from MCP servers (extra `tether[mcp]`, the official `mcp` SDK, version 2).

    agent = create_agent(model, mcp_servers=[
        MCPServer("files", command="python", args=["my_server.py"]),     # stdio
        MCPServer("search", url="http://127.0.0.1:8000/mcp"),            # streamable HTTP
    ])

`create_agent` lists each server's tools once, so the model sees them from the first
request; their names get the server's prefix ("files_read"). A run connects to a server
at its first call and disconnects when it ends; inside `async with agent:` runs share
the block's connections instead. A call that times out, fails, or finds the server gone
is a tool error; the run goes on. A connection found gone is made again, and a call the
server refused unseen is sent once more.

The servers' resources and prompts are for the user's code: `MCPServer.read_resource`,
`get_prompt` and their listings.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import re
import sys
from collections.abc import AsyncIterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TextIO

import pydantic

from tether.capabilities.base import Capability
from tether.errors import ConfigurationError, MCPServerError, ToolError, describe
from tether.messages import AssistantMessage, BinaryPart, TextPart, UserMessage
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
                from mcp.client.streamable_http import logger, streamable_http_client

                if _gone_session_filter not in logger.filters:
                    logger.addFilter(_gone_session_filter)

                client = await stack.enter_async_context(
                    httpx2.AsyncClient(headers=dict(self.headers), timeout=self.timeout_seconds)
                )
                assert self.url is not None
                transport = streamable_http_client(self.url, http_client=client)
                read, write, *_ = await stack.enter_async_context(transport)
            session = await stack.enter_async_context(mcp.ClientSession(read, write))
            await session.initialize()
            yield session

    @contextlib.asynccontextmanager
    async def _asking(self, what: str) -> AsyncIterator[ClientSession]:
        """A session for one request, its failure an `MCPServerError` saying `what` failed."""
        try:
            async with self.connect() as session:
                yield session
        except Exception as exc:
            where = self.url or self.command
            raise MCPServerError(
                f"MCP server {self.name!r} ({where}) could not {what}: {describe(exc)}"
            ) from exc

    async def list_tools(self) -> list[Any]:
        """The server's tools, as the SDK describes them."""
        async with self._asking("list its tools") as session:
            return list((await session.list_tools()).tools)

    async def list_resources(self) -> list[Any]:
        """The server's resources (`uri`, `name`, `description`, `mime_type`), as the SDK
        describes them."""
        async with self._asking("list its resources") as session:
            return list((await session.list_resources()).resources)

    async def read_resource(self, uri: str) -> list[TextPart | BinaryPart]:
        """A resource's contents: text, or bytes as a `BinaryPart` (any media type: the
        caller decides what to do with them), ready to put in a `UserMessage`."""
        import base64

        async with self._asking(f"read {uri}") as session:
            contents = (await session.read_resource(uri)).contents
        return [
            TextPart(c.text)
            if hasattr(c, "text")
            else BinaryPart(base64.b64decode(c.blob), c.mime_type or "application/octet-stream")
            for c in contents
        ]

    async def list_prompts(self) -> list[Any]:
        """The server's prompts (`name`, `description`, `arguments`), as the SDK describes
        them."""
        async with self._asking("list its prompts") as session:
            return list((await session.list_prompts()).prompts)

    async def get_prompt(
        self, name: str, arguments: Mapping[str, str] | None = None
    ) -> list[UserMessage | AssistantMessage]:
        """A prompt filled in with `arguments`, as messages to start a run with
        (`message_history=`) or to send."""
        async with self._asking(f"give the prompt {name!r}") as session:
            prompt = await session.get_prompt(name, dict(arguments or {}))
        messages: list[UserMessage | AssistantMessage] = []
        for message in prompt.messages:
            part = _part(message.content)
            if message.role == "user":
                messages.append(UserMessage((part,)))
            elif isinstance(part, TextPart):
                messages.append(AssistantMessage((part,)))
            else:  # a model's own turn holds text only
                messages.append(AssistantMessage((TextPart(f"[{part.media_type} content]"),)))
        return messages


class _Connection:
    """One server's session, held open by a task of its own: when the server goes away,
    the SDK cancels the scopes of that task, not the caller's."""

    def __init__(self, server: MCPServer) -> None:
        self.server = server
        self.session: ClientSession | None = None
        self.error: BaseException | None = None
        self.broken = False
        """A call found the transport closed: the next call needs a new connection."""
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

    @property
    def alive(self) -> bool:
        """Whether the session can still carry a call, as far as is known without sending
        one. The SDK has no public flag for a transport that closed (a stdio server that
        exited), so its dispatcher's is read when it is there."""
        if self.session is None or self.broken:
            return False
        dispatcher = getattr(self.session, "_dispatcher", None)
        return getattr(dispatcher, "_closed", False) is not True

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
        except asyncio.CancelledError:  # the caller is being stopped: so is the session
            self._task.cancel()
            raise


class _Link:
    """A server as tool calls see it: connected at the first call, and connected again
    when a call finds the connection gone (a crashed process, a restarted server). A
    replaced connection is closed once no call is using it any more."""

    def __init__(self, server: MCPServer) -> None:
        self.server = server
        self._connection: _Connection | None = None
        self._users: dict[_Connection, int] = {}
        self._lock = asyncio.Lock()

    @contextlib.asynccontextmanager
    async def use(
        self, stale: _Connection | None = None
    ) -> AsyncIterator[tuple[_Connection, ClientSession]]:
        """A live session for one call, opening a new connection when there is none,
        when the last one died, or when it is `stale` (a call found it gone)."""
        async with self._lock:
            current = self._connection
            if current is None or current is stale or not current.alive:
                if current is not None and not self._users.get(current):
                    await current.close()
                current = self._connection = _Connection(self.server)
                await current.open()
            if current.session is None:
                why = describe(current.error) if current.error else "closed"
                raise ToolError(f"MCP server {self.server.name!r} is not available: {why}")
            session = current.session
            self._users[current] = self._users.get(current, 0) + 1
        try:
            yield current, session
        finally:
            self._users[current] -= 1
            if not self._users[current]:
                del self._users[current]
                if current is not self._connection:
                    await current.close()

    async def close(self) -> None:
        async with self._lock:
            if self._connection is not None:
                await self._connection.close()
                self._connection = None


def _never_ran(exc: BaseException) -> bool:
    """Whether a failed call certainly did not reach the tool: the server no longer
    knows the session (it restarted), or the connection was refused."""
    import httpx2
    from mcp.shared.exceptions import MCPError

    seen: list[BaseException | None] = [exc]
    visited: set[int] = set()
    while seen:
        error = seen.pop()
        if error is None or id(error) in visited:
            continue
        visited.add(id(error))
        if isinstance(error, MCPError) and error.message in _SESSION_GONE:
            return True
        if isinstance(error, httpx2.ConnectError):
            return True
        if isinstance(error, BaseExceptionGroup):
            seen += error.exceptions
        seen += [error.__cause__, error.__context__]
    return False


def _closed(exc: BaseException) -> bool:
    """Whether a call failed because the transport closed under it (maybe after the
    server ran it, so it is not sent again)."""
    from mcp.shared.exceptions import MCPError
    from mcp.types import CONNECTION_CLOSED

    return isinstance(exc, MCPError) and exc.code == CONNECTION_CLOSED


_SESSION_GONE = ("Session not found", "Session terminated")
"""What the SDK's server says, and its client reports, for a session the server lost."""


def _gone_session_filter(record: logging.LogRecord) -> bool:
    """Drops the SDK's warning that ending a session failed with 404 (the server had
    already lost it, as a restarted server has): nothing went wrong then."""
    return record.getMessage() != "Session termination failed: 404"


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
    """The tools of `servers`, listed once. A run connects at its first call to a server and
    disconnects when it ends, unless an `async with agent:` block holds the connections."""

    def __init__(self, servers: Sequence[MCPServer]) -> None:
        self.servers = {s.name: s for s in servers}
        self._held: dict[str, _Link] | None = None
        self._held_loop: asyncio.AbstractEventLoop | None = None
        self._holders = 0
        if len(self.servers) != len(servers):
            raise ConfigurationError("two MCP servers have the same name")
        from tether.agent import _run_sync

        self._tools: list[Tool] = []
        for server in servers:
            try:
                listed = _run_sync(server.list_tools)
            except MCPServerError as exc:
                raise ConfigurationError(str(exc)) from exc
            # A tool that must run as a task (MCP's "taskSupport": "required") cannot be
            # called plainly, and tether does not run MCP tasks: it is left out.
            self._tools += [self._tool(server, t) for t in listed if not _task_only(t)]

    def tools(self) -> Sequence[Tool]:
        return self._tools

    async def on_agent_open(self) -> None:
        if self._held is None:
            self._held = {name: _Link(server) for name, server in self.servers.items()}
            self._held_loop = asyncio.get_running_loop()
        self._holders += 1

    async def on_agent_close(self) -> None:
        self._holders -= 1
        if self._holders == 0 and self._held is not None:
            held, self._held = self._held, None
            for link in held.values():
                await link.close()

    async def on_run_start(self, state: RunState) -> None:
        if self._held is not None and self._held_loop is asyncio.get_running_loop():
            state.data[_SESSIONS] = self._held  # the agent's, kept when the run ends
        else:
            state.data[_SESSIONS] = {n: _Link(s) for n, s in self.servers.items()}

    async def on_run_end(self, state: RunState) -> None:
        links = state.data.pop(_SESSIONS, {})
        if links is not self._held:  # the run's own (closing twice does nothing)
            for link in links.values():
                await link.close()

    def _tool(self, server: MCPServer, spec: Any) -> Tool:
        remote = spec.name

        async def call(**arguments: Any) -> Any:
            context: ToolContext = arguments.pop(OPEN_CONTEXT)
            link: _Link | None = context.state.data.get(_SESSIONS, {}).get(server.name)
            if link is None:
                raise ToolError(f"MCP server {server.name!r} is not available: closed")
            stale = None
            for again in (True, False):
                async with link.use(stale) as (connection, session):
                    try:
                        result = await session.call_tool(
                            remote, arguments, read_timeout_seconds=server.timeout_seconds
                        )
                        break
                    except (Exception, asyncio.CancelledError) as exc:
                        task = asyncio.current_task()
                        if isinstance(exc, asyncio.CancelledError) and task and task.cancelling():
                            raise  # the run itself is being stopped
                        if _closed(exc):
                            connection.broken = True
                        if again and _never_ran(exc):
                            stale = connection  # refused unseen: once more, newly connected
                            continue
                        why = describe(connection.error) if connection.error else describe(exc)
                        raise ToolError(
                            f"MCP server {server.name!r} failed on {remote}: {why}"
                        ) from exc
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
