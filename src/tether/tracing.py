"""OpenTelemetry spans for runs, model requests, tool calls and subagents, and the GenAI
client metrics of model requests.

Tracing is on when `opentelemetry-api` is installed (extra `tether[otel]`) and a tracer
provider is set, by the application for the process or by `Tracing(provider=...)` for
one agent; otherwise `span()` returns one shared object that does nothing, so tracing
that is off costs a dictionary lookup a span. Span names and attributes follow the
OpenTelemetry GenAI conventions: `invoke_agent <agent>`, `chat <model>` and
`execute_tool <tool>`, with `gen_ai.*` attributes. A subagent's run is a child of the
`task` call that started it.

Metrics are on the same way, when a meter provider is set (for the process, or by
`Tracing(meter_provider=...)`): every model request records
`gen_ai.client.operation.duration` (seconds) and `gen_ai.client.token.usage` (input and
output tokens), with the bucket boundaries the conventions advise. `gen_ai.provider.name` is the
conventions' name for the provider (`gcp.gemini`, `aws.bedrock`, `azure.ai.openai`,
...; see `provider_name`), while tether's own provider ids stay as they are everywhere
else.
"""

from __future__ import annotations

import json
import os
import sys
import time
from collections.abc import Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

if TYPE_CHECKING:
    from tether.messages import Message, ToolResult
    from tether.models.base import Model, ModelRequest, ModelResponse, ToolSpec
    from tether.result import RunResult
    from tether.state import RunState

__all__ = [
    "CAPTURE_CONTENT_VARIABLE",
    "ModelCall",
    "Tracing",
    "enabled",
    "failed",
    "model_call",
    "provider_name",
    "span",
]

CAPTURE_CONTENT_VARIABLE = "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT"
"""The environment variable the GenAI instrumentations read to record message content."""

_cached: dict[int, tuple[Any, Any]] = {}  # id(provider) -> (provider, tracer)
_metered: dict[int, tuple[Any, _Instruments]] = {}  # id(meter provider) -> its histograms

# The conventions' explicit bucket boundaries for the two client histograms.
_DURATION_BUCKETS = tuple(0.01 * 2**power for power in range(14))  # 0.01 s, ... 81.92 s
_TOKEN_BUCKETS = tuple(4**power for power in range(14))  # 1, 4, 16, ... 67,108,864

_PROVIDER_NAMES = {
    "google": "gcp.gemini",
    "google_genai": "gcp.gemini",  # LangChain's names (ls_provider) for the same services
    "google_vertexai": "gcp.vertex_ai",
    "bedrock": "aws.bedrock",
    "amazon_bedrock": "aws.bedrock",
    "azure": "azure.ai.openai",
    "azure_openai": "azure.ai.openai",
    "azure_ai": "azure.ai.inference",
    "mistral": "mistral_ai",
    "mistralai": "mistral_ai",
    "xai": "x_ai",
}
"""tether's (and LangChain's) provider ids whose well-known `gen_ai.provider.name` in the
GenAI conventions differs; the others ("openai", "anthropic", "groq", "deepseek", ...)
are the same word, and a provider the conventions do not list keeps its own."""


@dataclass(frozen=True, slots=True)
class Tracing:
    """How an agent's runs are traced.

    `provider`: a `TracerProvider` for this agent (default: the process's global one).
    `model_spans=False` leaves out the `chat` spans and the client metrics, for when a
    provider SDK's own instrumentation (opentelemetry-instrumentation-openai, say)
    already makes them; the run and tool spans stay. `meter_provider`: a `MeterProvider`
    for the GenAI client metrics (default: the process's global one; none set, none
    recorded). `capture_content=True` records the messages, the system
    prompt, the tool definitions, and tool arguments and results on the spans
    (`gen_ai.input.messages` and the rest); they can hold anything a user or a tool
    said, so it is off by default, and None follows the
    `OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT` variable.
    """

    provider: Any = None
    model_spans: bool = True
    capture_content: bool | None = None
    meter_provider: Any = None

    @property
    def content(self) -> bool:
        """Whether message content goes on the spans."""
        if self.capture_content is not None:
            return self.capture_content
        return os.environ.get(CAPTURE_CONTENT_VARIABLE, "").strip().lower() in ("1", "true")


DEFAULT_TRACING = Tracing()


class _Off:
    """The span of tracing that is off: enters to None, does nothing."""

    def __enter__(self) -> None:
        return None

    def __exit__(self, *exc: object) -> None:
        return None


_OFF = _Off()


def span(
    name: str,
    attributes: dict[str, Any],
    *,
    client: bool = False,
    tracing: Tracing = DEFAULT_TRACING,
) -> AbstractContextManager[Any]:
    """A span made current for the `with` block, or a no-op when tracing is off. A
    `client` span stands for a call to another service (a model request)."""
    tracer = _tracer(tracing.provider)
    if tracer is None:
        return _OFF
    trace = sys.modules["opentelemetry.trace"]
    kind = trace.SpanKind.CLIENT if client else trace.SpanKind.INTERNAL
    return tracer.start_as_current_span(name, kind=kind, attributes=attributes)  # type: ignore[no-any-return]


def enabled(tracing: Tracing = DEFAULT_TRACING) -> bool:
    """Whether spans are recorded: worth working out their attributes (the server's
    address, the messages) only then."""
    return _tracer(tracing.provider) is not None


def failed(current: Any, error_type: str, description: str) -> None:
    """Mark `current` (a span, or None when tracing is off) as failed without an
    exception: a tool call whose error went back to the model."""
    if current is None:
        return
    trace = sys.modules["opentelemetry.trace"]
    current.set_attribute("error.type", error_type)
    current.set_status(trace.Status(trace.StatusCode.ERROR, description))


def provider_name(model: Model) -> str:
    """`gen_ai.provider.name` for `model`: the GenAI conventions' well-known name for its
    provider ("gcp.gemini", or "gcp.vertex_ai" for Gemini on Vertex AI; "aws.bedrock";
    "azure.ai.openai"), else tether's provider id, else "unknown"."""
    provider = model.provider or "unknown"
    if provider == "google" and getattr(model, "vertex", False) is True:
        return "gcp.vertex_ai"
    return _PROVIDER_NAMES.get(provider, provider)


def model_call(
    model: Model, request: ModelRequest, thread_id: str | None, tracing: Tracing
) -> ModelCall | None:
    """What OpenTelemetry records of one request to `model`, or None when it records
    nothing (no tracer, no meter, or `model_spans=False`): the request then costs
    nothing more."""
    if not tracing.model_spans:
        return None
    tracer = _tracer(tracing.provider)
    instruments = _instruments(tracing.meter_provider)
    if tracer is None and instruments is None:
        return None
    return ModelCall(
        model, request, thread_id=thread_id, tracing=tracing, tracer=tracer, instruments=instruments
    )


class ModelCall:
    """One model request's `chat` span and client metrics. Enter it around the request
    and call `answered` with the response; leaving it by an exception marks both with
    `error.type` (the exception's class)."""

    def __init__(
        self,
        model: Model,
        request: ModelRequest,
        *,
        thread_id: str | None,
        tracing: Tracing,
        tracer: Any,
        instruments: _Instruments | None,
    ) -> None:
        self._model = model
        self._content = tracing.content
        self._tracer = tracer
        self._instruments = instruments
        self._request = (request, thread_id)
        self._scope: Any = None
        self._span: Any = None
        self._response: ModelResponse | None = None
        self._started = 0.0

    def __enter__(self) -> ModelCall:
        if self._tracer is not None:
            request, thread_id = self._request
            attributes = chat_request(self._model, request, thread_id, self._content)
            trace = sys.modules["opentelemetry.trace"]
            self._scope = self._tracer.start_as_current_span(
                f"chat {self._model.name}", kind=trace.SpanKind.CLIENT, attributes=attributes
            )
            self._span = self._scope.__enter__()
        self._started = time.perf_counter()
        return self

    def answered(self, response: ModelResponse) -> None:
        """The model's response: its attributes go on the span, its usage on the metrics."""
        self._response = response
        if self._span is not None:
            self._span.set_attributes(chat_response(response, self._model, self._content))

    def __exit__(self, kind: Any, error: BaseException | None, traceback: Any) -> Any:
        seconds = time.perf_counter() - self._started
        error_type = type(error).__qualname__ if error is not None else None
        if self._span is not None and error_type is not None:
            self._span.set_attribute("error.type", error_type)
        if self._instruments is not None:
            self._record(seconds, error_type)
        if self._scope is not None:  # the span records the exception and its status
            return self._scope.__exit__(kind, error, traceback)
        return None

    def _record(self, seconds: float, error_type: str | None) -> None:
        assert self._instruments is not None
        model = self._model
        attributes: dict[str, Any] = {
            "gen_ai.operation.name": "chat",
            "gen_ai.provider.name": provider_name(model),
            "gen_ai.request.model": model.name,
            **_server(getattr(model, "server_url", None)),
        }
        response = self._response
        if error_type is not None:
            attributes["error.type"] = error_type
        elif response is not None:
            attributes["gen_ai.response.model"] = response.model_name or model.name
        self._instruments.duration.record(seconds, attributes)
        if response is None or error_type is not None:
            return  # no usage is known of a request that failed
        usage = response.usage
        for token_type, count in (("input", usage.input_tokens), ("output", usage.output_tokens)):
            self._instruments.tokens.record(count, {**attributes, "gen_ai.token.type": token_type})


@dataclass(frozen=True, slots=True)
class _Instruments:
    """The GenAI client histograms of one meter provider."""

    duration: Any
    tokens: Any


def _instruments(given: Any) -> _Instruments | None:
    """The histograms of `given` (or of the process's meter provider), or None when no
    meter provider is set."""
    if given is None:
        metrics = sys.modules.get("opentelemetry.metrics")
        if metrics is None:  # nobody set up OpenTelemetry in this process
            return None
        given = metrics.get_meter_provider()
        internal = sys.modules.get("opentelemetry.metrics._internal")
        unset = (metrics.NoOpMeterProvider, getattr(internal, "_ProxyMeterProvider", ()))
        if isinstance(given, unset):
            return None
    cached = _metered.get(id(given))
    if cached is None or cached[0] is not given:
        from tether._version import __version__

        if len(_metered) >= 8:  # providers come and go (tests): keep only the last few
            _metered.clear()
        meter = given.get_meter("tether", __version__)
        instruments = _Instruments(
            meter.create_histogram(
                "gen_ai.client.operation.duration",
                unit="s",
                description="GenAI operation duration.",
                explicit_bucket_boundaries_advisory=_DURATION_BUCKETS,
            ),
            meter.create_histogram(
                "gen_ai.client.token.usage",
                unit="{token}",
                description="Number of input and output tokens used.",
                explicit_bucket_boundaries_advisory=_TOKEN_BUCKETS,
            ),
        )
        cached = _metered[id(given)] = (given, instruments)
    return cached[1]


def chat_request(
    model: Model, request: ModelRequest, thread_id: str | None, content: bool
) -> dict[str, Any]:
    """The attributes of a `chat` span known before the model answers."""
    settings = request.settings
    found: dict[str, Any] = {
        "gen_ai.operation.name": "chat",
        "gen_ai.request.model": model.name,
        "gen_ai.provider.name": provider_name(model),
        **_server(getattr(model, "server_url", None)),
    }
    if thread_id is not None:
        found["gen_ai.conversation.id"] = thread_id
    if settings.max_tokens is not None:
        found["gen_ai.request.max_tokens"] = settings.max_tokens
    if settings.temperature is not None:
        found["gen_ai.request.temperature"] = settings.temperature
    if content:
        found |= _input_content(request.system_prompt, request.messages, request.tools)
    return found


def chat_response(response: ModelResponse, model: Model, content: bool) -> dict[str, Any]:
    """The attributes of a `chat` span the model's reply gives."""
    usage = response.usage
    found: dict[str, Any] = {
        "gen_ai.response.model": response.model_name or model.name,
        "gen_ai.response.finish_reasons": [response.finish_reason or "unknown"],
        "gen_ai.usage.input_tokens": usage.input_tokens,
        "gen_ai.usage.output_tokens": usage.output_tokens,
        "gen_ai.usage.cache_read.input_tokens": usage.cache_read_tokens,
        "gen_ai.usage.cache_creation.input_tokens": usage.cache_write_tokens,
    }
    if response.response_id:
        found["gen_ai.response.id"] = response.response_id
    if content:
        message = _message(response.message)
        message["finish_reason"] = response.finish_reason or "unknown"
        found["gen_ai.output.messages"] = _json([message])
    return found


def _server(url: str | None) -> dict[str, Any]:
    """`server.address` and `server.port` of the URL a model request goes to."""
    if not url:
        return {}
    parts = urlsplit(url)
    port = parts.port or {"https": 443, "http": 80}.get(parts.scheme)
    if not parts.hostname:
        return {}
    found: dict[str, Any] = {"server.address": parts.hostname}
    if port is not None:
        found["server.port"] = port
    return found


def _tracer(given: Any) -> Any:
    trace = sys.modules.get("opentelemetry.trace")
    if trace is None:  # nobody set up OpenTelemetry in this process
        return None
    provider = given if given is not None else trace.get_tracer_provider()
    if isinstance(provider, trace.ProxyTracerProvider | trace.NoOpTracerProvider):
        return None
    cached = _cached.get(id(provider))
    if cached is None or cached[0] is not provider:
        from tether._version import __version__

        if len(_cached) >= 8:  # providers come and go (tests): keep only the last few
            _cached.clear()
        cached = _cached[id(provider)] = (provider, provider.get_tracer("tether", __version__))
    return cached[1]


# -- message content, in the shapes the GenAI conventions give ---------------------------


def _input_content(
    system_prompt: str, messages: Sequence[Message], tools: Sequence[ToolSpec]
) -> dict[str, str]:
    """What a model request sends, as `gen_ai.*` attributes of JSON text."""
    found = {
        "gen_ai.input.messages": _json([_message(m) for m in messages]),
        "gen_ai.tool.definitions": _json(
            [
                {
                    "type": "function",
                    "name": t.name,
                    "description": t.description,
                    "parameters": t.parameters,
                }
                for t in tools
            ]
        ),
    }
    if system_prompt:
        found["gen_ai.system_instructions"] = _json([{"type": "text", "content": system_prompt}])
    return found


def agent_attributes(model: Model, state: RunState, *, structured: bool) -> dict[str, Any]:
    """The attributes of the `invoke_agent` span of the run `state` as it starts."""
    attributes = {
        "gen_ai.operation.name": "invoke_agent",
        "gen_ai.agent.name": state.path[-1],
        "gen_ai.provider.name": provider_name(model),
        "gen_ai.request.model": model.name,
        "gen_ai.output.type": "json" if structured else "text",
        "tether.run_id": state.run_id,
    }
    if state.thread_id is not None:
        attributes["gen_ai.conversation.id"] = state.thread_id
    return attributes


def agent_outcome(result: RunResult[Any]) -> dict[str, Any]:
    """What the `invoke_agent` span of a run records when the run ends."""
    return {
        "tether.stop_reason": result.stop_reason,
        "tether.steps": result.steps,
        "gen_ai.usage.input_tokens": result.usage.input_tokens,
        "gen_ai.usage.output_tokens": result.usage.output_tokens,
    }


def tool_content(arguments: Any, result: ToolResult) -> dict[str, str]:
    """A tool call's arguments and result, as attributes."""
    return {
        "gen_ai.tool.call.arguments": _json(arguments),
        "gen_ai.tool.call.result": result.text,
    }


def _message(message: Message) -> dict[str, Any]:
    from tether.messages import (
        AssistantMessage,
        BinaryPart,
        TextPart,
        ThinkingPart,
        ToolCall,
        ToolResultMessage,
        UserMessage,
    )

    def part(item: Any) -> dict[str, Any]:
        if isinstance(item, TextPart):
            return {"type": "text", "content": item.text}
        if isinstance(item, ThinkingPart):
            return {"type": "reasoning", "content": item.text}
        if isinstance(item, ToolCall):
            return {"type": "tool_call", "id": item.id, "name": item.name, "arguments": item.args}
        if isinstance(item, BinaryPart):  # the bytes stay out of the trace
            return {"type": "blob", "modality": item.category, "mime_type": item.media_type}
        return {"type": getattr(item, "kind", type(item).__name__)}

    if isinstance(message, UserMessage):
        return {"role": "user", "parts": [part(p) for p in message.content]}
    if isinstance(message, AssistantMessage):
        return {"role": "assistant", "parts": [part(p) for p in message.parts]}
    assert isinstance(message, ToolResultMessage)
    return {
        "role": "tool",
        "parts": [
            {"type": "tool_call_response", "id": r.call_id, "response": r.text}
            for r in message.results
        ],
    }


def _json(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, default=str)
