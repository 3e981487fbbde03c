"""`MCPServer`: how to reach one MCP server, and what a user's code can ask of it (its
tools, resources and prompts). What an agent does with its tools is `tether.mcp`."""

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

from tether._mcp_asks import Calls, declare_form_only, session_options
from tether._mcp_client import Root, list_roots
from tether._mcp_content import content_part, off_loop_if_big, resource_part
from tether.errors import ConfigurationError, MCPServerError, describe
from tether.messages import AssistantMessage, BinaryPart, TextPart, UserMessage

if TYPE_CHECKING:
    from mcp import ClientSession

    from tether.approval import Decision
    from tether.questions import Question

__all__ = ["MCPServer", "answer_within", "sdk"]

_MIN_START_SECONDS = 10.0
_T = TypeVar("_T")


def sdk() -> Any:
    """The `mcp` SDK, or a `ConfigurationError` naming the extra to install."""
    try:
        import mcp
    except ImportError as exc:
        raise ConfigurationError("MCP servers need the mcp SDK: pip install 'tether[mcp]'") from exc
    return mcp


async def answer_within(request: Awaitable[_T], seconds: float) -> _T:
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
        sdk()

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
        mcp = sdk()
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
                return await answer_within(request(session), self.timeout_seconds)
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
        return await off_loop_if_big(read.contents, resource_part)

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
            part = content_part(message.content)
            if message.role == "user":
                messages.append(UserMessage((part,)))
            elif isinstance(part, TextPart):
                messages.append(AssistantMessage((part,)))
            else:  # a model's own turn holds text only
                messages.append(AssistantMessage((TextPart(f"[{part.media_type} content]"),)))
        return messages


def _gone_session_filter(record: logging.LogRecord) -> bool:
    """Drops the SDK's warning that ending a session failed with 404 (the server had
    already lost it, as a restarted server has): nothing went wrong then; and its
    traceback of a reply tether refused, which the caller is told of anyway."""
    from tether._mcp_http import ReplyRefused

    refused = record.exc_info is not None and isinstance(record.exc_info[1], ReplyRefused)
    return not refused and record.getMessage() != "Session termination failed: 404"


def _server_log(stack: contextlib.AsyncExitStack) -> TextIO:
    """Where a stdio server's stderr goes: ours, when it is a real file (a captured
    stderr, such as pytest's, has no descriptor a process could write to), else nowhere."""
    try:
        sys.stderr.fileno()
    except (AttributeError, OSError, ValueError):
        return stack.enter_context(open(os.devnull, "w"))
    return sys.stderr
