"""What the provider adapters share: lazy SDK imports, keys, clients per event loop, errors.

Both official SDKs (anthropic, openai) retry 408/409/429/5xx, connection errors and
timeouts with exponential backoff and jitter, honouring `retry-after`; tether sets how
many times and turns what is left into a `ModelError` that says what to do.
"""

from __future__ import annotations

import asyncio
import functools
import importlib
import importlib.util
import os
import weakref
from collections.abc import AsyncIterator, Callable
from types import ModuleType
from typing import Any, Generic, TypeVar

from tether.errors import ConfigurationError, ModelError, ModelHTTPError, ProviderBlockedError
from tether.models.base import ModelRequest, ModelResponse, StreamItem, response_of
from tether.models.profiles import ModelProfile, profile_for

__all__ = ["Adapter", "LoopClients", "env_key", "model_error", "require"]

DEFAULT_MAX_RETRIES = 4
DEFAULT_TIMEOUT_SECONDS = 600.0

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
            "or pass api_key=... (or a ready client=...)"
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


blocked_reason: str | None = None
"""Set by `tether.testing.no_real_models`: why SDK clients may not be made now."""


class LoopClients(Generic[Client]):
    """One SDK client per event loop.

    An async HTTP client's connections belong to the loop that opened them, and every
    `agent.run()` call starts a new loop; a user-supplied client is used as it is.
    """

    def __init__(self, make: Callable[..., Client], given: Client | None, **options: Any) -> None:
        self._make = functools.partial(make, **options)
        self._given = given
        # A client or HTTP client of the caller's (a mock in tests) decides where requests go.
        self._own_transport = given is not None or options.get("http_client") is not None
        self._by_loop: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, Client] = (
            weakref.WeakKeyDictionary()
        )

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
        return client


def model_error(exc: BaseException, *, provider: str, model: str, key_hint: str) -> ModelError:
    """A `ModelError` for an SDK exception, saying what went wrong and what to do."""
    status = getattr(exc, "status_code", None)
    detail = _detail(exc)
    if not isinstance(status, int):
        return ModelError(
            f"{provider} request for {model!r} failed: {type(exc).__name__}: {detail}"
        )
    if status in (401, 403):
        text = f"{provider} refused the credentials (HTTP {status}): {detail}. Check {key_hint}."
    elif status == 404:
        text = f"{provider} does not know model {model!r} (HTTP 404): {detail}"
    elif status == 429 or status >= 500:
        # Retried by the SDK before it got here, unless it came mid-stream.
        text = f"{provider} is failing or overloaded (HTTP {status}): {detail}"
    else:
        text = f"{provider} rejected the request for {model!r} (HTTP {status}): {detail}"
    return ModelHTTPError(text, status_code=status, body=getattr(exc, "body", None))


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
    """A token count from a usage field that may be missing or None."""
    return value if isinstance(value, int) else 0
