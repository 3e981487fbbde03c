"""One Bedrock request's stream, read by a thread of its own and handed to the event
loop, and boto3's errors in the shape tether's retries read.

boto3 is synchronous, so each request's stream is read in a thread of its own; a run
that stops early (its time limit, a cancel) shuts that request's socket, so a read
blocked in the thread returns at once and the thread ends; nothing waits for it on the
event loop.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from tether.errors import ModelError
from tether.models._bedrock_converse import PROVIDER

if TYPE_CHECKING:
    from tether.models.bedrock import BedrockModel

__all__ = ["END", "Feed", "watch_connections"]

# What an error event inside the stream is, in the terms tether's retries read.
_STREAM_ERRORS = {
    "throttlingException": "rate_limit_error",
    "serviceUnavailableException": "overloaded_error",
    "internalServerException": "api_error",
    "modelStreamErrorException": "api_error",
}
END = object()
"""What `Feed.next` gives once the stream was read to its end."""


class Feed:
    """One request's stream, read by a thread of its own and handed to the event loop.

    Leaving the block never waits: it marks the feed closed and shuts the socket of the
    request's connection (caught as it connected, or the response's own), so a read or
    a send blocked in the thread returns at once; the thread then closes the stream
    itself and ends. A stream that was read to its end is left alone (its connection
    may be back in boto3's pool)."""

    def __init__(self, loop: asyncio.AbstractEventLoop, model: BedrockModel, params: Any) -> None:
        self._loop = loop
        self._model = model
        self._params = params
        self._queue: asyncio.Queue[Any] = asyncio.Queue()
        self._lock = threading.Lock()
        self._closed = False
        self._done = False
        self._stops: list[Callable[[], object]] = []
        self.request_id: str | None = None

    def __enter__(self) -> Feed:
        threading.Thread(target=self._read, name="tether-bedrock", daemon=True).start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        with self._lock:
            self._closed = True
            stops, self._stops = self._stops, []
            if self._done:
                return
        for stop in stops:
            with contextlib.suppress(Exception):
                stop()

    def on_close(self, stop: Callable[[], object] | None) -> None:
        """Call `stop` (which unblocks the thread's read) when the feed closes early, or
        now if it already has."""
        if stop is None:
            return
        with self._lock:
            if not self._closed:
                if not self._done:
                    self._stops.append(stop)
                return
        with contextlib.suppress(Exception):
            stop()

    async def next(self) -> Any:
        item = await self._queue.get()
        if isinstance(item, BaseException):
            raise item
        return item

    def _put(self, item: Any, *, last: bool = False) -> None:
        with self._lock:
            if last:
                self._done, self._stops = True, []
            if self._closed:
                return
        with contextlib.suppress(RuntimeError):  # the loop is gone
            self._loop.call_soon_threadsafe(self._queue.put_nowait, item)

    def _read(self) -> None:
        _current.feed = self
        stream: Any = None
        try:
            if self._closed:
                return
            response = self._model._bedrock().converse_stream(**self._params)
            meta = response.get("ResponseMetadata") or {}
            self.request_id = meta.get("RequestId")
            stream = response["stream"]
            self.on_close(getattr(getattr(stream, "_raw_stream", None), "shutdown", None))
            _check_event_stream(stream, meta, self.request_id)
            for event in stream:
                if self._closed:
                    return
                self._put(event)
            self._put(END, last=True)
        except Exception as exc:
            if not self._closed:
                self._put(_translated(exc, self._model._where()), last=True)
        finally:
            _current.feed = None
            if stream is not None:
                with contextlib.suppress(Exception):
                    stream.close()


_current = threading.local()
"""`feed`: the `Feed` whose request this thread sends, if any."""


def _watch(sock: Any) -> None:
    """Tell the feed this thread reads for (if any) which socket its request uses."""
    feed = getattr(_current, "feed", None)
    if feed is not None and isinstance(sock, socket.socket):
        feed.on_close(lambda: _shut(sock))


def _shut(sock: socket.socket) -> None:
    """Shut both ways, which makes a read or send blocked in another thread return. The
    plain socket's call, also under TLS: the thread reading keeps its TLS state."""
    socket.socket.shutdown(sock, socket.SHUT_RDWR)


def watch_connections(client: Any) -> None:
    """Make `client`'s new HTTP connections report their sockets to the feed of the
    thread that uses them (when the client is boto3's usual urllib3 one; otherwise a
    stopped run still shuts the response's socket once the headers came)."""
    session = getattr(getattr(client, "_endpoint", None), "http_session", None)
    pools = getattr(session, "_pool_classes_by_scheme", None)
    if not isinstance(pools, dict):
        return
    for scheme, pool in list(pools.items()):
        connection = getattr(pool, "ConnectionCls", None)
        if connection is None or getattr(pool, "_tether_watched", False):
            continue
        watched = {"ConnectionCls": _watched(connection), "_tether_watched": True}
        # the same dict object is the pool managers' own: new pools use these
        pools[scheme] = type(pool.__name__, (pool,), watched)


def _watched(connection: Any) -> Any:
    """`connection` (a urllib3 connection class) that reports its socket to `_watch`."""

    def connect(self: Any) -> None:
        connection.connect(self)
        _watch(self.sock)

    def request(self: Any, *args: Any, **kwargs: Any) -> Any:
        _watch(self.sock)  # a connection kept from an earlier request
        return connection.request(self, *args, **kwargs)

    return type(connection.__name__, (connection,), {"connect": connect, "request": request})


def _check_event_stream(stream: Any, meta: Any, request_id: str | None) -> None:
    """A `ModelError` unless the reply is an event stream: a proxy's HTML page where the
    stream should be is named for what it is, not read as broken frames."""
    kind = str((meta.get("HTTPHeaders") or {}).get("content-type", ""))
    if not kind or "eventstream" in kind or "event-stream" in kind:
        return
    start = stream._raw_stream.read(300)
    shown = start.decode("utf-8", errors="replace")
    raise ModelError(
        f"{PROVIDER} answered HTTP {meta.get('HTTPStatusCode')} with {kind}, not an event "
        f"stream (a proxy or the wrong base URL?); it began: {shown!r}",
        request_id=request_id,
    )


def _translated(exc: Exception, url: str) -> Exception:
    """A boto3 exception as tether's retry code reads it."""
    names = {c.__name__ for c in type(exc).__mro__}
    response = getattr(exc, "response", None)
    if isinstance(response, dict) and "Error" in response:  # ClientError, EventStreamError
        error = response.get("Error") or {}
        meta = response.get("ResponseMetadata") or {}
        code, message = str(error.get("Code", "")), str(error.get("Message", ""))
        # An error event inside the stream has no status of its own: it came in a 200.
        status = 200 if "EventStreamError" in names else int(meta.get("HTTPStatusCode") or 500)
        translated: Exception = _APIStatus(status, code, message, url, meta)
    elif names & {"ReadTimeoutError", "ConnectTimeoutError"}:
        translated = _Slow(str(exc))
    elif names & {"NoCredentialsError", "PartialCredentialsError", "NoAuthTokenError"}:
        return ModelError(f"{PROVIDER} has no credentials to sign with: {exc}")
    elif names & {"HTTPClientError", "ConnectionError", "ResponseStreamingError", "ProtocolError"}:
        # botocore's, or urllib3's own while the stream is read
        translated = _Broken(str(exc))
    else:
        return exc
    translated.__cause__ = exc
    return translated


class _APIStatus(Exception):
    """An error boto3 raised, in the shape tether's retry code reads (`status_code`,
    `body`, `response` with its headers and the request's URL, `request_id`)."""

    def __init__(self, status: int, code: str, message: str, url: str, meta: Any) -> None:
        super().__init__(message or code)
        self.status_code = status
        self.type = _STREAM_ERRORS.get(code, code)
        self.body = {"error": {"type": code, "message": message or code}}
        headers = dict((meta or {}).get("HTTPHeaders") or {})
        self.request_id = (meta or {}).get("RequestId") or headers.get("x-amzn-requestid")
        self.response = _Seen(headers, url)


@dataclass
class _Seen:
    """What tether's error messages read off a response: its headers and its URL."""

    headers: dict[str, str]
    url: str

    @property
    def request(self) -> Any:
        return self


class _Broken(OSError):
    """The connection failed (refused, reset, cut in the middle of the reply)."""


class _Slow(TimeoutError):
    """No data came within the model's timeout."""
