"""OpenTelemetry spans for runs, model requests, tool calls and subagents.

Tracing is on when `opentelemetry-api` is installed (extra `tether[otel]`) and a tracer
provider is set, by the application for the process or by `Tracing(provider=...)` for
one agent; otherwise `span()` returns one shared object that does nothing, so tracing
that is off costs a dictionary lookup a span. Span names and attributes follow the
OpenTelemetry GenAI conventions: `invoke_agent <agent>`, `chat <model>` and
`execute_tool <tool>`, with `gen_ai.*` attributes. A subagent's run is a child of the
`task` call that started it.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

if TYPE_CHECKING:
    from tether.messages import Message, ToolResult
    from tether.models.base import Model, ModelRequest, ModelResponse, ToolSpec

__all__ = ["CAPTURE_CONTENT_VARIABLE", "Tracing", "enabled", "failed", "span"]

CAPTURE_CONTENT_VARIABLE = "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT"
"""The environment variable the GenAI instrumentations read to record message content."""

_cached: dict[int, tuple[Any, Any]] = {}  # id(provider) -> (provider, tracer)


@dataclass(frozen=True, slots=True)
class Tracing:
    """How an agent's runs are traced.

    `provider`: a `TracerProvider` for this agent (default: the process's global one).
    `model_spans=False` leaves out the `chat` spans, for when a provider SDK's own
    instrumentation (opentelemetry-instrumentation-openai, say) already makes them; the
    run and tool spans stay. `capture_content=True` records the messages, the system
    prompt, the tool definitions, and tool arguments and results on the spans
    (`gen_ai.input.messages` and the rest); they can hold anything a user or a tool
    said, so it is off by default, and None follows the
    `OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT` variable.
    """

    provider: Any = None
    model_spans: bool = True
    capture_content: bool | None = None

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


def chat_request(
    model: Model, request: ModelRequest, thread_id: str | None, content: bool
) -> dict[str, Any]:
    """The attributes of a `chat` span known before the model answers."""
    settings = request.settings
    found: dict[str, Any] = {
        "gen_ai.operation.name": "chat",
        "gen_ai.request.model": model.name,
        "gen_ai.provider.name": model.provider or "unknown",
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
        from tether import __version__

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
