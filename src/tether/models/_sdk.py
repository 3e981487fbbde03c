"""What the provider adapters share: lazy SDK imports, keys, clients per event loop,
retries and errors.

tether retries, not the SDKs (their own retries are turned off): 408, 409, 429, 5xx and
529 (but not a 5xx whose body says the request itself is invalid: some servers answer a
request that fails their validation with HTTP 500), errors the provider reports inside a
stream before any of the reply arrived, refused or dropped connections and timeouts,
`max_retries` times with exponential backoff and jitter (0.5 s doubling up to 8 s),
honouring `retry-after`. A server that asks for a wait longer than
`MAX_RETRY_WAIT_SECONDS` is not waited for: the error is raised at once. A run's
`timeout_seconds` cuts any wait short. A reply that breaks off after some of it
arrived is not retried (its deltas were already streamed). Whatever is left becomes a
`ModelError` saying what happened, where (the URL and the provider's request id) and what
to do.
"""

from __future__ import annotations

import asyncio
import contextlib
import email.utils
import functools
import importlib
import importlib.util
import ipaddress
import os
import random
import re
import time
import urllib.parse
import weakref
from collections.abc import AsyncGenerator, AsyncIterator, Callable
from dataclasses import dataclass
from types import ModuleType
from typing import Any, Generic, TypeVar

from tether.errors import (
    ConfigurationError,
    ModelError,
    ModelHTTPError,
    ProviderBlockedError,
    TetherError,
)
from tether.models.base import ModelRequest, ModelResponse, StreamItem, response_of
from tether.models.profiles import ModelProfile, profile_for

__all__ = ["MAX_RETRY_WAIT_SECONDS", "Adapter", "LoopClients", "env_key", "model_error", "require"]

DEFAULT_MAX_RETRIES = 4
DEFAULT_TIMEOUT_SECONDS = 600.0
MAX_RETRY_WAIT_SECONDS = 60.0
"""The longest tether waits before a retry; a `retry-after` asking for more ends the run."""
FIRST_BACKOFF_SECONDS = 0.5
MAX_BACKOFF_SECONDS = 8.0
_RETRIED = frozenset({408, 409, 429})
_RETRIED_TYPES = frozenset({"overloaded_error", "api_error", "rate_limit_error", "server_error"})

Client = TypeVar("Client")


def require(module: str, extra: str) -> Callable[[], ModuleType]:
    """Check that an optional SDK is installed, or say which extra installs it.

    Returns its importer: the import itself (most of a second for some SDKs) waits
    until the first request, so building an agent stays fast.
    """
    try:
        found = importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):
        found = False
    if not found:
        raise ConfigurationError(
            f"this model needs the {module!r} package: pip install 'tether[{extra}]'"
        )
    return functools.partial(importlib.import_module, module)


def env_key(given: str | None, variable: str, *, provider: str) -> str:
    """The API key passed in, or the one in `variable`; a clear error when neither is set."""
    key = given if given is not None else os.environ.get(variable)
    if not key:
        raise ConfigurationError(
            f"no {provider} API key: set the {variable} environment variable "
            "(in Python, the model's api_key=... or client=... does too)"
        )
    return key


class Adapter:
    """What every provider adapter has: a name, a provider, a profile, `request`."""

    def __init__(self, name: str, provider: str | None, profile: ModelProfile | None) -> None:
        self._name = name
        self._provider = provider
        self._profile = profile

    @property
    def name(self) -> str:
        return self._name

    @property
    def provider(self) -> str | None:
        return self._provider

    @property
    def profile(self) -> ModelProfile:
        """This model's limits and features (see `tether.models.profiles`)."""
        if self._profile is None:
            self._profile = profile_for(self._provider, self._name)
        return self._profile

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self._name!r}, provider={self._provider!r})"

    async def request(self, request: ModelRequest) -> ModelResponse:
        """The whole response; adapters always stream underneath."""
        return await response_of(self.stream(request))

    def stream(self, request: ModelRequest) -> AsyncIterator[StreamItem]:
        raise NotImplementedError


class HTTPAdapter(Adapter):
    """An adapter over a provider's HTTP API: tether's retries and errors around
    `_attempt`, which streams one try."""

    key_hint = "the API key"

    def __init__(
        self, name: str, provider: str | None, profile: ModelProfile | None, max_retries: int
    ) -> None:
        super().__init__(name, provider, profile)
        if isinstance(max_retries, bool) or not isinstance(max_retries, int) or max_retries < 0:
            raise ConfigurationError(f"max_retries must be an int >= 0, got {max_retries!r}")
        self._max_retries = max_retries

    def _attempt(self, request: ModelRequest) -> AsyncGenerator[StreamItem, None]:
        raise NotImplementedError

    def _where(self) -> str:
        """The URL requests go to, for errors raised before a request has one."""
        raise NotImplementedError

    def _context(self, exc: Exception, retries: int) -> dict[str, Any]:
        """Where a try failed: its URL, the provider's request id, the retries so far."""
        headers = getattr(getattr(exc, "response", None), "headers", None) or {}
        request_id = getattr(exc, "request_id", None) or headers.get("request-id")
        return {
            "url": _url(exc) or self._where(),
            "request_id": request_id or headers.get("x-request-id"),
            "retries": retries,
        }

    async def stream(self, request: ModelRequest) -> AsyncIterator[StreamItem]:
        retries = 0
        while True:
            streamed = False
            try:
                async with contextlib.aclosing(self._attempt(request)) as attempt:
                    async for item in attempt:
                        streamed = True
                        yield item
                return
            except TetherError as exc:
                if not isinstance(exc, ModelError):
                    raise  # not a fault of the model's (a test blocking providers, say)
                raise _with(exc, self._context(exc, retries)) from exc.__cause__
            except Exception as exc:
                context = self._context(exc, retries)
                fault = _fault(exc, self, context["url"], streamed)
                wait = fault.wait(retries) if not streamed and retries < self._max_retries else None
                if wait is None:
                    fault.error.transient = fault.retryable and not streamed
                    raise _with(fault.error, context) from exc
            retries += 1
            await asyncio.sleep(wait)


@dataclass
class _Fault:
    error: ModelError
    retryable: bool
    retry_after: float | None = None

    def wait(self, retries: int) -> float | None:
        """Seconds to wait before the next try, or None to give up now."""
        if not self.retryable:
            return None
        if self.retry_after is not None:
            return self.retry_after if self.retry_after <= MAX_RETRY_WAIT_SECONDS else None
        backoff = min(FIRST_BACKOFF_SECONDS * 2.0**retries, MAX_BACKOFF_SECONDS)
        return backoff * random.uniform(0.75, 1.0)


def _fault(exc: Exception, adapter: HTTPAdapter, where: str, streamed: bool) -> _Fault:
    """What went wrong with one try (at URL `where`), as the error to raise and whether
    to try again."""
    provider = adapter.provider or "the server"
    headers = getattr(getattr(exc, "response", None), "headers", None) or {}
    status = getattr(exc, "status_code", None)
    kind = getattr(exc, "type", None) or _error_type(getattr(exc, "body", None))
    if isinstance(status, int) and status >= 400:
        error = model_error(exc, provider=provider, model=adapter.name, key_hint=adapter.key_hint)
        retryable = status in _RETRIED or (status >= 500 and not _names_bad_request(exc))
        after = _retry_after(headers)
        if retryable and after is not None and after > MAX_RETRY_WAIT_SECONDS:
            error.args = (
                f"{error}; the server asks to wait {after:g} s before trying again, longer "
                f"than tether waits ({MAX_RETRY_WAIT_SECONDS:g} s).",
            )
        return _Fault(error, retryable, after)
    if isinstance(status, int) or _is_stream_error(exc):  # an error event in a 200 stream
        text = f"{provider} reported an error in the middle of its reply: {_detail(exc)}"
        return _Fault(ModelError(text), retryable=kind in _RETRIED_TYPES or _transient_code(exc))
    if _is_transport(exc):
        text = f"the connection to {provider} failed: {_transport_detail(exc, streamed)}"
        return _Fault(ModelError(text), retryable=True)
    text = (
        f"{provider} sent a reply tether could not read ({type(exc).__name__}: "
        f"{_detail(exc) or 'no detail'}); is {where} the right URL for this model's API?"
    )
    return _Fault(ModelError(text), retryable=False)


_BAD_REQUEST_TYPES = frozenset(
    {
        "invalid_request_error",
        "badrequesterror",
        "bad_request",
        "invalid_request",
        "validation_error",
    }
)
_VALIDATION_FAILED = re.compile(r"^\d+ validation errors?\b")


def _error_fields(exc: BaseException) -> tuple[object, object, str]:
    """The `type`, `code` and message of the error a server's body describes."""
    body = getattr(exc, "body", None)
    inner = body.get("error", body) if isinstance(body, dict) else None
    if not isinstance(inner, dict):
        return getattr(exc, "type", None), getattr(exc, "code", None), ""
    message = inner.get("message")
    return inner.get("type"), inner.get("code"), message if isinstance(message, str) else ""


def _names_bad_request(exc: BaseException) -> bool:
    """Whether a server error's body says the request itself is at fault, which no retry
    mends: its type or code names an invalid request (vLLM, and servers built on
    FastAPI that answer a request failing validation with HTTP 500, as llama.cpp's Python
    server does)."""
    kind, code, message = _error_fields(exc)
    if isinstance(kind, str) and kind.lower() in _BAD_REQUEST_TYPES:
        return True
    if isinstance(code, int) and not isinstance(code, bool) and 400 <= code < 500:
        return code not in _RETRIED
    return bool(_VALIDATION_FAILED.match(message))


def _is_stream_error(exc: BaseException) -> bool:
    """An error the server sent inside a stream that began well (the `openai` SDK raises
    it with the event's body and no status)."""
    names = {c.__name__ for c in type(exc).__mro__}
    return (
        "APIError" in names
        and not names & {"APIStatusError", "APIConnectionError"}
        and (isinstance(getattr(exc, "body", None), dict))
    )


def _transient_code(exc: BaseException) -> bool:
    """Whether an in-stream error's code is one that may pass (OpenRouter sends HTTP
    statuses as codes; OpenAI sends names)."""
    _, code, _ = _error_fields(exc)
    if isinstance(code, int) and not isinstance(code, bool):
        return code in _RETRIED or code >= 500
    return code in ("rate_limit_exceeded", "server_error", "overloaded")


def _with(error: ModelError, context: dict[str, Any]) -> ModelError:
    """`error` with where it happened filled in, and said at the end of its message."""
    for key, value in context.items():
        if getattr(error, key, None) in (None, 0):
            setattr(error, key, value)
    said = [f"POST {error.url}"] if error.url else []
    if error.request_id:
        said.append(f"request id {error.request_id}")
    if error.retries:
        said.append(f"after {error.retries} {'retry' if error.retries == 1 else 'retries'}")
    if said and error.args and "[POST " not in str(error.args[0]):
        error.args = (f"{error.args[0]} [{', '.join(said)}]", *error.args[1:])
    return error


def _url(exc: Exception) -> str | None:
    for source in (getattr(exc, "response", None), exc):
        try:
            request = getattr(source, "request", None)
        except RuntimeError:  # an httpx error raised without its request
            request = None
        if request is not None and getattr(request, "url", None) is not None:
            return str(request.url)
    return None


def _error_type(body: object) -> str | None:
    inner = body.get("error", body) if isinstance(body, dict) else None
    kind = inner.get("type") if isinstance(inner, dict) else None
    return kind if isinstance(kind, str) else None


def _retry_after(headers: Any) -> float | None:
    """The wait a response asks for, in seconds: `retry-after-ms`, or `retry-after` as
    seconds or an HTTP date."""
    try:
        if "retry-after-ms" in headers:
            return max(float(headers["retry-after-ms"]) / 1000, 0.0)
        value = headers.get("retry-after")
        if value is None:
            return None
        try:
            return max(float(value), 0.0)
        except ValueError:
            when = email.utils.parsedate_to_datetime(value)
            return max(when.timestamp() - time.time(), 0.0)
    except (TypeError, ValueError, OverflowError):
        return None


def _is_transport(exc: BaseException) -> bool:
    """A refused, dropped or timed-out connection, as the SDK or httpx reports it."""
    names = {c.__name__ for c in type(exc).__mro__}
    return bool(names & {"APIConnectionError", "TransportError", "TimeoutException"}) or (
        isinstance(exc, OSError | TimeoutError)
    )


def _transport_detail(exc: BaseException, streamed: bool) -> str:
    """What happened to the connection, from the deepest exception that says something."""
    reason = ""
    seen: BaseException | None = exc
    while seen is not None:
        text = str(seen).strip()
        if text and not text.startswith(("Connection error.", "Request timed out")):
            reason = f"{type(seen).__name__}: {text}"
        seen = seen.__cause__ or seen.__context__
    names = {c.__name__ for c in type(exc).__mro__}
    if names & {"APITimeoutError", "TimeoutException"} or isinstance(exc, TimeoutError):
        what = "no data within the model's timeout_seconds"
    elif names & {"RemoteProtocolError"}:
        what = "the server closed the connection in the middle of the reply"
    elif streamed or names & {"ReadError"}:
        what = "the connection broke in the middle of the reply"
    else:
        what = "could not connect, or the connection broke"
    return f"{what} ({reason})" if reason else what


blocked_reason: str | None = None
"""Set by `tether.testing.no_real_models`: why SDK clients may not be made now."""


CLOSE_TIMEOUT_SECONDS = 5.0
"""The longest a client made for an event loop is waited for as it closes with its loop."""


class LoopClients(Generic[Client]):
    """One SDK client per event loop, closed when its loop shuts down.

    An async HTTP client's connections belong to the loop that opened them, and every
    `agent.run()` call starts a new loop. Left open, a client outlives its loop: when the
    garbage collector finds it later, inside another loop, the SDK closes it there, and
    its connections fail with "Event loop is closed" ("Task exception was never
    retrieved"). So each client tether makes is closed as its loop shuts down
    (`asyncio.run` finalizes async generators then), or when the model is dropped while
    the loop still runs. A user-supplied client, or one over a user-supplied HTTP
    client, is the user's to close and is used as it is.
    """

    def __init__(self, make: Callable[..., Client], given: Client | None, **options: Any) -> None:
        # tether retries (see HTTPAdapter): the SDK's own retries would wait as long as
        # any retry-after asks, and multiply with tether's.
        self._make = functools.partial(make, **options, max_retries=0)
        if given is not None and hasattr(given, "with_options"):
            given = given.with_options(max_retries=0)
        self._given = given
        # A client or HTTP client of the caller's (a mock in tests) decides where requests
        # go; a server on this machine is no provider's.
        self._own_transport = (
            given is not None
            or options.get("http_client") is not None
            or on_this_machine(options.get("base_url"))
        )
        self._closes = given is None and options.get("http_client") is None
        self._by_loop: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, Client] = (
            weakref.WeakKeyDictionary()
        )
        # The async generators that close each loop's client as the loop shuts down.
        self._closers: weakref.WeakKeyDictionary[
            asyncio.AbstractEventLoop, AsyncGenerator[None, None]
        ] = weakref.WeakKeyDictionary()

    def base_url(self) -> Any:
        """Where the clients send requests (the SDK's default unless one was given),
        known with or without a running loop: no request is made."""
        if self._given is not None:
            return self._given.base_url  # type: ignore[attr-defined]
        try:
            asyncio.get_running_loop()
        except RuntimeError:  # outside a loop: a client made only to be asked
            return self._make().base_url  # type: ignore[attr-defined]
        return self.get().base_url  # type: ignore[attr-defined]

    def get(self) -> Client:
        """The client for the running loop, made on first use."""
        if self._given is not None:
            return self._given
        if blocked_reason is not None and not self._own_transport:
            raise ProviderBlockedError(blocked_reason)  # see tether.testing.no_real_models
        loop = asyncio.get_running_loop()
        client = self._by_loop.get(loop)
        if client is None:
            client = self._by_loop[loop] = self._make()
            if self._closes:
                self._closers[loop] = _closed_with_loop(client, self._by_loop, weakref.ref(loop))
        return client


def _closed_with_loop(
    client: Any,
    by_loop: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, Any],
    loop: weakref.ref[asyncio.AbstractEventLoop],
) -> AsyncGenerator[None, None]:
    """A started async generator that closes `client` when it is finalized: by the loop's
    `shutdown_asyncgens()` (which `asyncio.run` calls before closing the loop), or once
    it is dropped while its loop runs (the loop's finalizer hook closes it there)."""

    async def closer() -> AsyncGenerator[None, None]:
        try:
            yield
        finally:
            running = loop()
            if running is not None:
                by_loop.pop(running, None)
            # Closing is clean-up: a connection that already broke must not stop the
            # loop's shutdown, and no close is waited for without end.
            with contextlib.suppress(Exception):
                await asyncio.wait_for(_close(client), CLOSE_TIMEOUT_SECONDS)

    generator = closer()
    # Run it to its `yield` now, with no await (nothing in it suspends before): the loop
    # learns of it on this first step, and its `finally` is armed.
    with contextlib.suppress(StopIteration):
        generator.__anext__().send(None)
    return generator


async def _close(client: Any) -> None:
    """Close an SDK's async client (`aclose` for google-genai, `close` for the others)."""
    close = getattr(client, "aclose", None) or getattr(client, "close", None)
    if close is not None:
        result = close()
        if hasattr(result, "__await__"):
            await result


def on_this_machine(url: object) -> bool:
    """Whether `url` points at the loopback interface."""
    if not isinstance(url, str):
        return False
    host = urllib.parse.urlsplit(url).hostname or ""
    try:
        return host == "localhost" or ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def endpoint(clients: LoopClients[Any], path: str) -> str:
    """The URL of `path` on the client's base URL."""
    try:
        base = str(clients.base_url())
    except Exception:
        return path
    return f"{base.rstrip('/')}/{path}"


async def check_event_stream(response: Any, provider: str) -> None:
    """A `ModelError` unless `response` is an event stream: a proxy's HTML page or a JSON
    body where a stream should be is named for what it is, not parsed as garbage."""
    kind = response.headers.get("content-type", "")
    if not kind or "event-stream" in kind:
        return
    start = b""
    async for chunk in response.aiter_bytes():
        start += chunk
        if len(start) >= 300:
            break
    shown = start[:300].decode("utf-8", errors="replace")
    raise ModelError(
        f"{provider} answered HTTP {response.status_code} with {kind}, not an event stream "
        f"(a proxy or the wrong base URL?); it began: {shown!r}",
        request_id=response.headers.get("request-id") or response.headers.get("x-request-id"),
    )


def model_error(exc: BaseException, *, provider: str, model: str, key_hint: str) -> ModelError:
    """A `ModelError` for an SDK exception, saying what went wrong and what to do."""
    status = getattr(exc, "status_code", None)
    detail = _detail(exc)
    if not isinstance(status, int):
        return ModelError(
            f"{provider} request for {model!r} failed: {type(exc).__name__}: {detail}"
        )
    _, code, _ = _error_fields(exc)
    if code == "content_filter":  # Azure's filter blocked the prompt: another try is no use
        text = (
            f"{provider}'s content filter blocked the request for {model!r} (HTTP {status}): "
            f"{detail}{_filtered_categories(exc)}"
        )
    elif status in (401, 403):
        text = f"{provider} refused the credentials (HTTP {status}): {detail}. Check {key_hint}."
    elif status == 404:
        text = f"{provider} does not know model {model!r} (HTTP 404): {detail}"
    elif status == 429:
        text = f"{provider} is rate limiting the requests (HTTP 429): {detail}"
    elif status >= 500 and _names_bad_request(exc):
        text = f"{provider} failed on the request for {model!r} (HTTP {status}): {detail}"
    elif status == 500:
        text = f"{provider} had an internal error (HTTP {status}): {detail}"
    elif status >= 500:
        text = f"{provider} is failing or overloaded (HTTP {status}): {detail}"
    else:
        text = f"{provider} rejected the request for {model!r} (HTTP {status}): {detail}"
    return ModelHTTPError(text, status_code=status, body=getattr(exc, "body", None))


def _filtered_categories(exc: BaseException) -> str:
    """The categories Azure's prompt filter flagged, as the end of a sentence."""
    body = getattr(exc, "body", None)
    inner = body.get("error", body) if isinstance(body, dict) else None
    results = (inner or {}).get("innererror", {}) if isinstance(inner, dict) else {}
    results = results.get("content_filter_result", {}) if isinstance(results, dict) else {}
    flagged = sorted(
        name
        for name, result in (results.items() if isinstance(results, dict) else ())
        if isinstance(result, dict) and result.get("filtered") is True
    )
    return f" (flagged: {', '.join(flagged)})" if flagged else ""


def _detail(exc: BaseException) -> str:
    """The provider's own error message when the body has one, else the exception's."""
    body = getattr(exc, "body", None)
    if isinstance(body, dict):
        inner = body.get("error", body)
        if isinstance(inner, dict) and isinstance(inner.get("message"), str):
            return str(inner["message"])
    return str(getattr(exc, "message", None) or exc)


def omitted(part: Any, reader: str) -> str:
    """The text sent in place of binary content `reader` (a model) cannot take."""
    return f"[{part.media_type} content omitted: {reader} cannot read it]"


def schema_name(name: str) -> str:
    """A name the providers accept for a JSON schema: letters, digits, `_` and `-`."""
    cleaned = "".join(c if c.isalnum() or c in "_-" else "_" for c in name)
    return cleaned[:64] or "output"


def usage_int(value: Any) -> int:
    """A token count from a usage field, 0 when it holds none (missing, None, negative,
    not a number: see `token_count`); the loop estimates an input or output count of 0."""
    from tether.models.usage import token_count

    return token_count(value) or 0
