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
server refused unseen is sent once more (a restarted HTTP server answering the old session
with 404, or 400 about the session, as several do, refused it unseen).

Nothing waits on a server for ever: each request gets `timeout_seconds`, and starting
it (up to its answer to `initialize`) `start_timeout_seconds`. A call waiting while
another call connects takes that attempt's outcome instead of trying again, so calls
queued behind a server that never answers do not wait one start each.

The servers' resources and prompts are for the user's code: `MCPServer.read_resource`,
`get_prompt` and their listings. A resource of a text type sent as bytes (text/plain,
JSON, XML, ...) is read as text, for the model and for the user's code alike.

Servers are told the agent's roots (the host directories of its file backend that it
may list; see `tether._mcp_client`), and a server's progress notifications during a call
become `ToolProgress` events of that call, at most ten a second.

During a tool call a server may ask for a reply from the agent's model (sampling: that
agent's model answers, counted in the run's usage, cost and budget and refused once it is
spent; `MCPServer(sampling=False)` refuses it) or ask the person a question (elicitation:
the run stops with the question in `RunResult.interrupts`, and once it is answered with
`Answer(...)` on `resume` the call is made again and the server's same question gets the
answer; a run without a thread declines the question and tells the model).
`MCPServer(elicitation=False)` declares no questions; a function answers them in-process
instead. See `tether._mcp_asks` for the bounds.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import re
import sys
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TextIO, TypeVar

import pydantic

from tether._mcp_asks import Calls, Running, declare_form_only, session_options
from tether._mcp_client import Progress, Root, list_roots
from tether.capabilities.base import Capability
from tether.errors import ConfigurationError, MCPServerError, ToolError, describe
from tether.messages import AssistantMessage, BinaryPart, TextPart, UserMessage
from tether.state import RunState, ToolContext
from tether.tools.tool import OPEN_CONTEXT, Tool

if TYPE_CHECKING:
    from mcp import ClientSession

    from tether.approval import Decision
    from tether.questions import Question

__all__ = ["MCPServer", "MCPTools"]

_SESSIONS = "mcp_sessions"
_MIN_START_SECONDS = 10.0
_T = TypeVar("_T")


def _sdk() -> Any:
    try:
        import mcp
    except ImportError as exc:
        raise ConfigurationError("MCP servers need the mcp SDK: pip install 'tether[mcp]'") from exc
    return mcp


async def _answer(request: Awaitable[_T], seconds: float) -> _T:
    """`request`'s answer, or a `TimeoutError` after `seconds`. The bound is ours, not the
    SDK's read timeout, which leaves out the time spent sending: a server that stops
    reading its input would make that endless."""
    try:
        async with asyncio.timeout(seconds):
            return await request
    except TimeoutError:
        raise TimeoutError(f"no answer within {seconds:g} s") from None


@dataclass(frozen=True)
class MCPServer:
    """How to reach one MCP server: a command to start (stdio) or a `url` (streamable
    HTTP). `prefix` (default "<name>_") goes before its tool names; `timeout_seconds`
    bounds each request, a tool call's included, and `start_timeout_seconds` starting
    the server up to its answer to `initialize` (by default as long as a request, and at
    least 10 s: a process can take seconds to start).

    `sampling` (default True) lets the server ask the agent's model for a reply during a
    call, counted in the run's budget; False declares no sampling. `elicitation` (default
    True) lets it ask the person a question during a call, through the approval path
    (the run stops until it is answered); False declares no questions; an async function
    of a `Question` returning `Answer(...)` or `Reject()` answers them in-process."""

    name: str
    command: str | None = None
    args: Sequence[str] = ()
    env: Mapping[str, str] | None = None
    cwd: str | None = None
    url: str | None = None
    headers: Mapping[str, str] = field(default_factory=dict)
    prefix: str | None = None
    timeout_seconds: float = 60.0
    start_timeout_seconds: float | None = None
    sampling: bool = True
    elicitation: bool | Callable[[Question], Awaitable[Decision]] = True

    def __post_init__(self) -> None:
        if (self.command is None) == (self.url is None):
            raise ConfigurationError(f"MCPServer {self.name!r} needs a command or a url, not both")
        if not re.fullmatch(r"[A-Za-z0-9_-]{1,40}", self.name):
            raise ConfigurationError(f"MCPServer name {self.name!r}: letters, digits, '_', '-'")
        for name in ("timeout_seconds", "start_timeout_seconds"):
            seconds = getattr(self, name)
            if seconds is not None and not 0 < seconds < float("inf"):
                raise ConfigurationError(
                    f"MCPServer {self.name!r}: {name} must be a positive number of seconds, "
                    f"got {seconds!r}"
                )
        if not isinstance(self.sampling, bool):
            raise ConfigurationError(f"MCPServer {self.name!r}: sampling is True or False")
        if not isinstance(self.elicitation, bool) and not callable(self.elicitation):
            raise ConfigurationError(
                f"MCPServer {self.name!r}: elicitation is True, False, or an async function "
                f"answering a Question; got {self.elicitation!r}"
            )
        _sdk()

    @property
    def tool_prefix(self) -> str:
        return f"{self.name}_" if self.prefix is None else self.prefix

    @property
    def start_seconds(self) -> float:
        """How long starting the server may take, up to its answer to `initialize`."""
        if self.start_timeout_seconds is not None:
            return self.start_timeout_seconds
        return max(self.timeout_seconds, _MIN_START_SECONDS)

    @contextlib.asynccontextmanager
    async def connect(
        self, *, roots: Sequence[Root] = (), calls: Calls | None = None
    ) -> AsyncIterator[ClientSession]:
        """An initialized session, closed on leaving the block. A server that has not
        answered `initialize` within `start_seconds` raises `TimeoutError`. `roots` is
        what the session answers the server's `roots/list` with (see
        `tether._mcp_client.backend_roots`; an agent passes its backend's). `calls` are
        the tool calls in progress on it, whose runs answer the server's sampling and
        questions (none by default: they are refused)."""
        async with contextlib.AsyncExitStack() as stack:
            try:
                async with asyncio.timeout(self.start_seconds):
                    session = await self._handshake(stack, roots=roots, calls=calls)
            except TimeoutError:
                raise TimeoutError(
                    f"no answer to initialize within {self.start_seconds:g} s"
                ) from None
            yield session

    async def _handshake(
        self,
        stack: contextlib.AsyncExitStack,
        *,
        roots: Sequence[Root] = (),
        calls: Calls | None = None,
    ) -> ClientSession:
        """Start or reach the server and initialize a session, closed with `stack`."""
        mcp = _sdk()
        streams: tuple[Any, ...]  # what the session reads from and writes to, and more
        if self.command is not None:
            from tether._mcp_stdio import stdio_transport

            stdio = stdio_transport(
                self.command, self.args, env=self.env, cwd=self.cwd, errors=_server_log(stack)
            )
            streams = await stack.enter_async_context(stdio)
        else:
            from mcp.client.streamable_http import logger, streamable_http_client

            from tether import _mcp_http

            if _gone_session_filter not in logger.filters:
                logger.addFilter(_gone_session_filter)

            # The client's own timeout is a backstop for what the SDK sends by itself:
            # requests are bounded by ours, which fires first and says what happened.
            # Made in a thread: it loads the system's certificates (tens of ms).
            backstop = max(self.timeout_seconds, self.start_seconds) + 5
            made = await asyncio.to_thread(_mcp_http.client, self.headers, backstop)
            client = await stack.enter_async_context(made)
            assert self.url is not None
            transport = streamable_http_client(self.url, http_client=client)
            streams = await stack.enter_async_context(transport)
        opened = mcp.ClientSession(
            *streams[:2],
            list_roots_callback=list_roots(roots),
            **session_options(self, calls if calls is not None else Calls()),
        )
        declare_form_only(opened)
        session: ClientSession = await stack.enter_async_context(opened)
        await session.initialize()
        return session

    async def _ask(self, what: str, request: Callable[[ClientSession], Awaitable[_T]]) -> _T:
        """`request`'s answer on a session of its own, its failure an `MCPServerError`
        saying `what` failed."""
        try:
            async with self.connect() as session:
                return await _answer(request(session), self.timeout_seconds)
        except Exception as exc:
            where = self.url or self.command
            raise MCPServerError(
                f"MCP server {self.name!r} ({where}) could not {what}: {describe(exc)}"
            ) from exc

    async def list_tools(self) -> list[Any]:
        """The server's tools, as the SDK describes them."""
        listed = await self._ask("list its tools", lambda session: session.list_tools())
        return list(listed.tools)

    async def list_resources(self) -> list[Any]:
        """The server's resources (`uri`, `name`, `description`, `mime_type`), as the SDK
        describes them."""
        listed = await self._ask("list its resources", lambda session: session.list_resources())
        return list(listed.resources)

    async def read_resource(self, uri: str) -> list[TextPart | BinaryPart]:
        """A resource's contents, ready to put in a `UserMessage`: text (a blob of a text
        type, such as text/plain or application/json, decoded), or bytes as a `BinaryPart`
        (any other media type: the caller decides what to do with them)."""
        read = await self._ask(f"read {uri}", lambda session: session.read_resource(uri))
        return await _off_loop_if_big(read.contents, _read)

    async def list_prompts(self) -> list[Any]:
        """The server's prompts (`name`, `description`, `arguments`), as the SDK describes
        them."""
        listed = await self._ask("list its prompts", lambda session: session.list_prompts())
        return list(listed.prompts)

    async def get_prompt(
        self, name: str, arguments: Mapping[str, str] | None = None
    ) -> list[UserMessage | AssistantMessage]:
        """A prompt filled in with `arguments`, as messages to start a run with
        (`message_history=`) or to send."""
        prompt = await self._ask(
            f"give the prompt {name!r}",
            lambda session: session.get_prompt(name, dict(arguments or {})),
        )
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

    def __init__(self, server: MCPServer, roots: Sequence[Root] = ()) -> None:
        self.server = server
        self.roots = roots
        self.calls = Calls()
        """The tool calls in progress on this connection (see `tether._mcp_asks`)."""
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
                async with self.server.connect(roots=self.roots, calls=self.calls) as session:
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

    def __init__(self, server: MCPServer, roots: Sequence[Root] = ()) -> None:
        self.server = server
        self.roots = roots
        self._connection: _Connection | None = None
        self._users: dict[_Connection, int] = {}
        self._lock = asyncio.Lock()
        self._attempts = 0
        """Connections tried so far, to tell whether one was tried while a call waited."""

    @contextlib.asynccontextmanager
    async def use(
        self, stale: _Connection | None = None
    ) -> AsyncIterator[tuple[_Connection, ClientSession]]:
        """A live session for one call, opening a new connection when there is none,
        when the last one died, or when it is `stale` (a call found it gone). A call that
        waited while another connected takes that outcome, failed or not: trying again
        would make each call in the queue wait a whole timeout of its own."""
        attempts = self._attempts
        async with self._lock:
            current = self._connection
            tried = self._attempts != attempts
            if not tried and (current is None or current is stale or not current.alive):
                if current is not None and not self._users.get(current):
                    await current.close()
                current = self._connection = _Connection(self.server, self.roots)
                self._attempts += 1
                await current.open()
            if current is None:  # only when a close came in between: nothing to use
                raise ToolError(f"MCP server {self.server.name!r} is not available: closed")
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
        if isinstance(error, MCPError) and error.message.startswith(_SESSION_GONE):
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
"""How the error for a request refused for want of its session begins: the SDK's server
says the first, its client the second for a bare 404, and tether's HTTP client turns every
404 or 400 about the session into the first (see `tether._mcp_http`)."""


def _gone_session_filter(record: logging.LogRecord) -> bool:
    """Drops the SDK's warning that ending a session failed with 404 (the server had
    already lost it, as a restarted server has): nothing went wrong then; and its
    traceback of a reply tether refused, which the caller is told of anyway."""
    from tether._mcp_http import ReplyRefused

    refused = record.exc_info is not None and isinstance(record.exc_info[1], ReplyRefused)
    return not refused and record.getMessage() != "Session termination failed: 404"


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
    disconnects when it ends, unless an `async with agent:` block holds the connections.
    `roots` are the directories the servers are told the agent works in."""

    def __init__(self, servers: Sequence[MCPServer], *, roots: Sequence[Root] = ()) -> None:
        self.servers = {s.name: s for s in servers}
        self.roots = tuple(roots)
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
            self._held = {name: _Link(s, self.roots) for name, s in self.servers.items()}
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
            state.data[_SESSIONS] = {n: _Link(s, self.roots) for n, s in self.servers.items()}

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
            progress = Progress(context)
            running = Running(context)
            try:
                result = await _call(link, remote, arguments, progress, running)
            except ToolError as exc:  # what tether declined is told all the same
                raise ToolError(" ".join([str(exc), *running.notes])) from exc
            finally:
                progress.close()  # its last word goes out before the call's end
                await running.end()  # no sample runs past it, nor is charged after
            parts = await _parts(getattr(result, "content", None) or [])
            notes = [TextPart(note) for note in running.notes]  # what tether declined
            if getattr(result, "is_error", False):
                raise ToolError(
                    " ".join(p.text for p in [*parts, *notes] if isinstance(p, TextPart))
                    or "failed"
                )
            return [*parts, *notes] or "(no output)"

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


async def _call(
    link: _Link, remote: str, arguments: dict[str, Any], progress: Progress, running: Running
) -> Any:
    """The server's answer to calling its tool `remote`, sent once more on a new
    connection when the first try certainly did not reach the server. A question the
    server asks the person meanwhile stops the call (`running.until_asked`)."""
    server = link.server
    stale = None
    for again in (True, False):
        async with link.use(stale) as (connection, session):
            try:
                called = session.call_tool(remote, arguments, progress_callback=progress)
                with connection.calls.holding(running):
                    return await running.until_asked(_answer(called, server.timeout_seconds))
            except (Exception, asyncio.CancelledError) as exc:
                task = asyncio.current_task()
                if isinstance(exc, asyncio.CancelledError) and task and task.cancelling():
                    raise  # the run itself is being stopped
                never_ran = _never_ran(exc)
                if never_ran or _closed(exc):
                    connection.broken = True  # the next call connects anew
                if again and never_ran:
                    stale = connection  # refused unseen: once more, newly connected
                    continue
                why = describe(connection.error) if connection.error else describe(exc)
                raise ToolError(f"MCP server {server.name!r} failed on {remote}: {why}") from exc
    raise AssertionError("unreachable: the second try returns or raises")


_SHOWN_BINARY = ("image/", "application/pdf")
"""Binary content a model can be shown; other bytes are described in words."""
_TEXT_TYPES = re.compile(
    r"text/.+|application/(json|xml|javascript|ecmascript|x-javascript|yaml|x-yaml|toml|sql|"
    r"graphql|x-sh|x-python|csv|x-ndjson|[\w.-]+\+(json|xml|yaml))"
)
"""Media types of bytes that are text: a resource of one is decoded, not described."""


_CHARSETS = re.compile(r"utf-8(-sig)?|utf-(16|32)(-[lb]e)?|ascii|iso8859-\d+|cp125\d")
"""Charsets a server's text blob is decoded in (by `codecs.lookup`'s name): the common
ones, each linear in time. Any other (a server could name `punycode`, quadratic in the
blob's size, or `idna`, which refuses bytes it does not like) reads as UTF-8."""


def _charset(parameters: str) -> str:
    """The charset named in a media type's `parameters`, when one tether decodes."""
    import codecs

    named = re.search(r"charset\s*=\s*\"?([\w.:-]+)", parameters, re.IGNORECASE)
    if named is None:
        return "utf-8"
    try:
        name = codecs.lookup(named.group(1)).name
    except LookupError:
        return "utf-8"
    return name if _CHARSETS.fullmatch(name) else "utf-8"


def _text_of(data: bytes, mime: str) -> str | None:
    """`data` as text when `mime` says it is text: in its charset when it is a common
    one (`_CHARSETS`), else UTF-8; what does not decode is replaced, never refused."""
    media, _, parameters = mime.partition(";")
    if not _TEXT_TYPES.fullmatch(media.strip().lower()):
        return None
    return data.decode(_charset(parameters), "replace")


async def _off_loop_if_big(contents: Sequence[Any], convert: Callable[[Any], _T]) -> list[_T]:
    """`convert` of each item, in a worker thread when they carry much base64 (decoding
    megabytes would hold the event loop)."""
    from tether._mcp_stdio import OFF_LOOP_BYTES

    def weight(item: Any) -> int:
        inner = getattr(item, "resource", item)
        return len(getattr(item, "data", None) or "") + len(getattr(inner, "blob", None) or "")

    if sum(map(weight, contents)) <= OFF_LOOP_BYTES:
        return [convert(c) for c in contents]
    return await asyncio.to_thread(lambda: [convert(c) for c in contents])


async def _parts(contents: Sequence[Any]) -> list[TextPart | BinaryPart]:
    """An MCP tool result's content as the model should see it."""
    return await _off_loop_if_big(contents, _part)


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
    """An embedded resource: its text (a blob of a text type decoded), or its bytes when
    a model can be shown them, else a line saying what they are."""
    import base64

    if hasattr(resource, "text"):
        return TextPart(f"[resource {resource.uri}]\n{resource.text}")
    mime = getattr(resource, "mime_type", None) or "application/octet-stream"
    data = base64.b64decode(resource.blob)
    text = _text_of(data, mime)
    if text is not None:
        return TextPart(f"[resource {resource.uri}]\n{text}")
    if mime.startswith(_SHOWN_BINARY):
        return BinaryPart(data, mime)
    return TextPart(f"[resource {resource.uri}: {len(data):,} bytes of {mime}, not shown]")


def _read(contents: Any) -> TextPart | BinaryPart:
    """One piece of a resource read for the user's code: text (a blob of a text type
    decoded), or the bytes of any other type."""
    import base64

    if hasattr(contents, "text"):
        return TextPart(contents.text)
    mime = contents.mime_type or "application/octet-stream"
    data = base64.b64decode(contents.blob)
    text = _text_of(data, mime)
    return BinaryPart(data, mime) if text is None else TextPart(text)
