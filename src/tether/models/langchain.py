"""Bring LangChain chat models and tools to tether (extra `tether[langchain]`).

```python
from langchain_anthropic import ChatAnthropic
from tether.models.langchain import LangChainModel, tools_from_langchain

agent = create_agent(LangChainModel(ChatAnthropic(model="claude-sonnet-5-5")),
                     tools=tools_from_langchain([search_tool]))
```

The chat model keeps its own client, retries and settings; tether drives it through
`bind_tools` and `astream` (a model that does not stream gives its reply whole).

- Its thinking streams as thinking deltas and is kept in the history; the chat model's
  own goes back to it in LangChain's standard content blocks, so `ChatAnthropic` sends
  each thinking block with its signature (and each redacted one) as Anthropic requires
  with tool use. Thinking from another provider is never sent.
- Tool-call arguments are read as the model sent them: a call whose JSON is cut off or
  broken keeps its raw text, which the loop answers with an error and never runs (a cut
  reported as the output limit, or a reply that ended mid-call, is "length").
- An error the provider reports inside a streamed reply (Anthropic's
  `overloaded_error`, say) becomes the HTTP error it stands for (529), so a
  `FallbackModel` moves on from a fault that may pass, as it does for an HTTP status.

Inside `tether.testing.no_real_models` (the pytest plugin's default), a chat model from
a provider's package (`langchain_openai`, `langchain_anthropic`, ...) is blocked unless
its base URL is on this machine; chat models written for a test are let through.
"""

from __future__ import annotations

import warnings
from collections.abc import AsyncIterator, Mapping
from typing import Any

from tether.errors import (
    ConfigurationError,
    ModelError,
    ModelHTTPError,
    ProviderBlockedError,
    TetherError,
    UsageEstimatedWarning,
    describe,
)
from tether.messages import (
    AssistantMessage,
    AssistantPart,
    Usage,
)
from tether.models import _sdk
from tether.models._langchain_messages import (
    CallPieces,
    cut_short,
    deltas,
    reply_calls,
    reply_parts,
    to_langchain,
)
from tether.models._langchain_tools import Injected, tools_from_langchain
from tether.models.base import ModelRequest, ModelResponse, StreamItem
from tether.models.estimate import InputEstimate, output_tokens
from tether.models.profiles import ModelProfile

__all__ = ["Injected", "LangChainModel", "tools_from_langchain"]

# Finish reasons as LangChain's chat models report them (OpenAI's, Anthropic's, Gemini's,
# Bedrock's, Ollama's, Cohere's words), in tether's.
_FINISH = {
    "stop": "stop",
    "end_turn": "stop",
    "stop_sequence": "stop",
    "STOP": "stop",
    "COMPLETE": "stop",
    "tool_calls": "tool_calls",
    "tool_use": "tool_calls",
    "TOOL_CALL": "tool_calls",
    "length": "length",
    "max_tokens": "length",
    "MAX_TOKENS": "length",
    "max_output_tokens": "length",
    "model_context_window_exceeded": "length",
    "content_filter": "content_filter",
    "refusal": "content_filter",
    "SAFETY": "content_filter",
    "RECITATION": "content_filter",
    "BLOCKLIST": "content_filter",
    "PROHIBITED_CONTENT": "content_filter",
    "SPII": "content_filter",
    "guardrail_intervened": "content_filter",
    "content_filtered": "content_filter",
}
_FINISH_KEYS = ("finish_reason", "stop_reason", "done_reason", "stopReason")

# The HTTP status each error type a provider can report inside a streamed reply (with
# the stream's own status, 200) stands for: Anthropic's `error` events, OpenAI's.
_IN_STREAM_STATUS = {
    "invalid_request_error": 400,
    "authentication_error": 401,
    "permission_error": 403,
    "not_found_error": 404,
    "request_too_large": 413,
    "rate_limit_error": 429,
    "rate_limit_exceeded": 429,
    "api_error": 500,
    "server_error": 500,
    "timeout_error": 504,
    "overloaded_error": 529,
}

# The `model_provider` a provider's LangChain package puts on its replies, for a thread
# resumed before this model has replied once.
_PACKAGE_PROVIDER = {"langchain_anthropic": "anthropic", "langchain_openai": "openai"}


class LangChainModel(_sdk.Adapter):
    """A `langchain_core` `BaseChatModel` as a tether model.

    `name` and `provider` default to what the model reports for LangSmith (its model
    name and provider), which tether uses to find the price.
    """

    def __init__(
        self,
        chat_model: Any,
        *,
        name: str | None = None,
        provider: str | None = None,
        profile: ModelProfile | None = None,
    ) -> None:
        lc = _sdk.require("langchain_core.language_models", "langchain")()
        if not isinstance(chat_model, lc.BaseChatModel):
            raise ConfigurationError(
                f"LangChainModel takes a langchain_core BaseChatModel, "
                f"got {type(chat_model).__name__}"
            )
        self.chat_model = chat_model
        self._estimate = InputEstimate()  # for a model that reports no usage
        self._warned = False
        reported = _ls_params(chat_model)
        super().__init__(
            name or _label(reported.get("ls_model_name")) or type(chat_model).__name__,
            provider or _label(reported.get("ls_provider")),
            profile,
        )
        package = type(chat_model).__module__.split(".")[0]
        self._wire_provider = _PACKAGE_PROVIDER.get(package) or self._provider

    def __repr__(self) -> str:
        return f"LangChainModel({type(self.chat_model).__name__}, name={self._name!r})"

    @property
    def server_url(self) -> str | None:
        """The base URL the chat model was given, when it has one."""
        return _base_url(self.chat_model)

    async def stream(self, request: ModelRequest) -> AsyncIterator[StreamItem]:
        if _sdk.blocked_reason is not None and _reaches_a_provider(self.chat_model):
            raise ProviderBlockedError(  # see tether.testing.no_real_models
                f"{_sdk.blocked_reason} (blocked: {self!r} would reach its provider; a "
                "chat model of your own, or one at a loopback base_url, is let through)"
            )
        runnable = self._bound(request)
        messages = to_langchain(
            request.system_prompt,
            request.messages,
            provider=self._provider,
            wire_provider=self._wire_provider,
        )
        settings = request.settings
        kwargs: dict[str, Any] = dict(settings.extra)
        if settings.max_tokens is not None:
            kwargs["max_tokens"] = settings.max_tokens
        if settings.temperature is not None:
            kwargs["temperature"] = settings.temperature
        chunks: list[Any] = []
        calls = CallPieces()
        streamed = False
        try:
            async for chunk in runnable.astream(messages, **kwargs):
                chunks.append(chunk)
                for delta in deltas(chunk, calls):
                    streamed = True
                    yield delta
            full = _merged(chunks)
        except TetherError:
            raise
        except Exception as exc:
            raise self._error(exc, streamed=streamed) from exc
        if full is None:
            raise ModelError(f"{self._name} streamed nothing")
        yield self._response(full, request)

    def _bound(self, request: ModelRequest) -> Any:
        if not request.tools:
            return self.chat_model
        tools = [
            {
                "type": "function",
                "function": {
                    "name": t.name,
                    "description": t.description,
                    "parameters": dict(t.parameters),
                },
            }
            for t in request.tools
        ]
        output = request.output_spec
        choice = output.name if request.force_output and output is not None else None
        try:
            return self.chat_model.bind_tools(tools, tool_choice=choice)
        except NotImplementedError as exc:
            raise ConfigurationError(
                f"{type(self.chat_model).__name__} does not support tools (no bind_tools)"
            ) from exc

    def _error(self, exc: Exception, *, streamed: bool) -> ModelError:
        """What the chat model raised, as a `ModelError` that says whether the fault may
        pass (`transient`; never once part of the reply was streamed, which a retry or
        another model would repeat)."""
        provider = self._provider or "the provider"
        status = getattr(exc, "status_code", None)
        kind = _error_kind(exc)
        error: ModelError
        if isinstance(status, int) and status >= 400:
            error = _sdk.model_error(exc, provider=provider, model=self._name, key_hint="its key")
        elif kind is not None:  # an error event inside a 200 stream
            status = _IN_STREAM_STATUS[kind]
            error = ModelHTTPError(
                f"{provider} reported {kind} in the middle of its reply for {self._name!r} "
                f"(as HTTP {status}): {_message_of(exc)}",
                status_code=status,
                body=getattr(exc, "body", None),
            )
        elif _sdk._is_transport(exc):
            error = ModelError(f"the connection to {provider} failed: {describe(exc)}")
            error.transient = not streamed
            return error
        else:
            return ModelError(f"{self._name} failed: {describe(exc)}")
        error.transient = not streamed and (status in (408, 409, 429) or status >= 500)
        return error

    def _response(self, full: Any, request: ModelRequest) -> ModelResponse:
        metadata = full.response_metadata or {}
        self._wire_provider = _label(metadata.get("model_provider")) or self._wire_provider
        finish = _finish(metadata)
        parts = reply_parts(full, self._provider)
        calls = reply_calls(full, cut=finish == "length")
        if finish is None and calls and cut_short(calls[-1].args):
            finish = "length"  # the reply ended in the middle of a call's arguments
        parts += calls
        model_name = _label(metadata.get("model_name")) or _label(metadata.get("model"))
        usage = (
            _usage(full.usage_metadata) if full.usage_metadata else self._estimated(request, parts)
        )
        message = AssistantMessage(tuple(parts), model_name or self._name, usage)
        # The provider's reply id (LangChain's own id on the message is a run's).
        return ModelResponse(message, finish, _label(metadata.get("id")))

    def _estimated(self, request: ModelRequest, parts: list[AssistantPart]) -> Usage:
        """Usage worked out from characters, said once: without it, token and cost limits
        would never fire."""
        if not self._warned:
            self._warned = True
            warnings.warn(
                UsageEstimatedWarning(
                    f"{self!r} reports no token usage; tokens (and so cost and the limits "
                    "on them) are estimated at four characters a token"
                ),
                stacklevel=2,
            )
        return Usage(
            input_tokens=self._estimate.tokens(request),
            output_tokens=output_tokens(parts),
            requests=1,
        )


def _finish(metadata: Mapping[str, Any]) -> str | None:
    """The reply's finish reason in tether's words (see `ModelResponse`)."""
    reason = next((metadata[k] for k in _FINISH_KEYS if metadata.get(k)), None)
    if reason is None and metadata.get("status") == "incomplete":  # OpenAI's Responses API
        details = metadata.get("incomplete_details")
        reason = details.get("reason") if isinstance(details, dict) else None
    reason = _label(reason)
    return None if reason is None else _FINISH.get(reason, reason)


def _merged(chunks: list[Any]) -> Any:
    """The reply whole: its chunks added up in one go, as LangChain's own `astream` does.
    Adding each chunk to the sum so far would re-read the tool calls' arguments (LangChain
    parses them on every sum), which is quadratic in a long call."""
    if not chunks:
        return None
    return chunks[0] if len(chunks) == 1 else chunks[0] + chunks[1:]


def _label(value: object) -> str | None:
    """`value` when it is a name a server could mean (a short printable string), else
    None: a model's name or a reply's id goes on to prices and span attributes, and
    servers put numbers, objects or junk where it belongs."""
    if isinstance(value, str) and value.strip() and len(value) <= 256 and value.isprintable():
        return value
    return None


def _error_kind(exc: BaseException) -> str | None:
    """The error type the provider named, when it is one of `_IN_STREAM_STATUS`'s: in its
    error body (Anthropic's `{"error": {"type": ...}}`) or on the SDK's exception
    (OpenAI's `type` or `code`)."""
    body = getattr(exc, "body", None)
    inner = body.get("error", body) if isinstance(body, dict) else None
    named = [getattr(exc, "type", None), getattr(exc, "code", None)]
    if isinstance(inner, dict):
        named = [inner.get("type"), inner.get("code"), *named]
    return next((n for n in named if isinstance(n, str) and n in _IN_STREAM_STATUS), None)


def _message_of(exc: BaseException) -> str:
    """The provider's own words for an error, else the exception's."""
    body = getattr(exc, "body", None)
    inner = body.get("error", body) if isinstance(body, dict) else None
    if isinstance(inner, dict) and isinstance(inner.get("message"), str):
        return str(inner["message"])
    return describe(exc)


def _usage(metadata: Any) -> Usage:
    details = metadata.get("input_token_details") or {}
    return Usage(
        input_tokens=_sdk.usage_int(metadata.get("input_tokens")),
        output_tokens=_sdk.usage_int(metadata.get("output_tokens")),
        cache_read_tokens=_sdk.usage_int(details.get("cache_read")),
        cache_write_tokens=_sdk.usage_int(details.get("cache_creation")),
        requests=1,
    )


_URL_FIELDS = (
    "openai_api_base",
    "base_url",
    "anthropic_api_url",
    "api_base",
    "endpoint",
    "endpoint_url",
    "service_url",
    "url",
)


def _reaches_a_provider(chat_model: Any) -> bool:
    """Whether `chat_model` comes from a provider's LangChain package (langchain_openai,
    langchain_anthropic, ...) and talks to a server off this machine."""
    package = type(chat_model).__module__.split(".")[0]
    if not package.startswith("langchain_") or package == "langchain_core":
        return False
    url = _base_url(chat_model)
    return not _sdk.on_this_machine(url) if url is not None else True


def _base_url(chat_model: Any) -> str | None:
    url = next(
        (getattr(chat_model, f, None) for f in _URL_FIELDS if getattr(chat_model, f, None)), None
    )
    return None if url is None else str(url)


def _ls_params(chat_model: Any) -> dict[str, Any]:
    try:
        return dict(chat_model._get_ls_params())
    except Exception:  # a model that cannot describe itself just has no defaults
        return {}
