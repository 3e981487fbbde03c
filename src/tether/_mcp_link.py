"""A connection to an MCP server as an agent's tool calls use it: opened at the first
call, opened again when a call finds it gone, and a call sent once more when it certainly
never reached the server (a restarted server that no longer knows the session)."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Sequence
from typing import TYPE_CHECKING, Any

from tether._mcp_asks import Calls, Running
from tether._mcp_client import Progress, Root
from tether._mcp_server import MCPServer, answer_within
from tether.errors import ToolError, describe

if TYPE_CHECKING:
    from mcp import ClientSession

__all__ = ["Connection", "Link", "call_tool", "closed", "never_ran"]

_SESSION_GONE = ("Session not found", "Session terminated")
"""How the error for a request refused for want of its session begins: the SDK's server
says the first, its client the second for a bare 404, and tether's HTTP client turns every
404 or 400 about the session into the first (see `tether._mcp_http`)."""


class Connection:
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


class Link:
    """A server as tool calls see it: connected at the first call, and connected again
    when a call finds the connection gone (a crashed process, a restarted server). A
    replaced connection is closed once no call is using it any more."""

    def __init__(self, server: MCPServer, roots: Sequence[Root] = ()) -> None:
        self.server = server
        self.roots = roots
        self._connection: Connection | None = None
        self._users: dict[Connection, int] = {}
        self._lock = asyncio.Lock()
        self._attempts = 0
        """Connections tried so far, to tell whether one was tried while a call waited."""

    @contextlib.asynccontextmanager
    async def use(
        self, stale: Connection | None = None
    ) -> AsyncIterator[tuple[Connection, ClientSession]]:
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
                current = self._connection = Connection(self.server, self.roots)
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


async def call_tool(
    link: Link, remote: str, arguments: dict[str, Any], progress: Progress, running: Running
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
                    return await running.until_asked(answer_within(called, server.timeout_seconds))
            except (Exception, asyncio.CancelledError) as exc:
                task = asyncio.current_task()
                if isinstance(exc, asyncio.CancelledError) and task and task.cancelling():
                    raise  # the run itself is being stopped
                unseen = never_ran(exc)
                if unseen or closed(exc):
                    connection.broken = True  # the next call connects anew
                if again and unseen:
                    stale = connection  # refused unseen: once more, newly connected
                    continue
                why = describe(connection.error) if connection.error else describe(exc)
                raise ToolError(f"MCP server {server.name!r} failed on {remote}: {why}") from exc
    raise AssertionError("unreachable: the second try returns or raises")


def never_ran(exc: BaseException) -> bool:
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


def closed(exc: BaseException) -> bool:
    """Whether a call failed because the transport closed under it (maybe after the
    server ran it, so it is not sent again)."""
    from mcp.shared.exceptions import MCPError
    from mcp.types import CONNECTION_CLOSED

    return isinstance(exc, MCPError) and exc.code == CONNECTION_CLOSED
