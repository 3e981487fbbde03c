"""OpenTelemetry spans for runs, model requests, tool calls and subagents.

Tracing is on when `opentelemetry-api` is installed (extra `tether[otel]`) and the
application has set a tracer provider; otherwise `span()` returns one shared object that
does nothing, so tracing that is off costs a dictionary lookup a span. Span names and
attributes follow the OpenTelemetry GenAI conventions: `invoke_agent <agent>`,
`chat <model>` and `execute_tool <tool>`, with `gen_ai.*` attributes. A subagent's run
is a child of the `task` call that started it.
"""

from __future__ import annotations

import sys
from contextlib import AbstractContextManager
from typing import Any

__all__ = ["failed", "span"]

_cached: tuple[Any, Any] | None = None  # (tracer provider, tracer)


class _Off:
    """The span of tracing that is off: enters to None, does nothing."""

    def __enter__(self) -> None:
        return None

    def __exit__(self, *exc: object) -> None:
        return None


_OFF = _Off()


def span(
    name: str, attributes: dict[str, Any], *, client: bool = False
) -> AbstractContextManager[Any]:
    """A span made current for the `with` block, or a no-op when tracing is off. A
    `client` span stands for a call to another service (a model request)."""
    tracer = _tracer()
    if tracer is None:
        return _OFF
    trace = sys.modules["opentelemetry.trace"]
    kind = trace.SpanKind.CLIENT if client else trace.SpanKind.INTERNAL
    return tracer.start_as_current_span(name, kind=kind, attributes=attributes)  # type: ignore[no-any-return]


def failed(current: Any, error_type: str, description: str) -> None:
    """Mark `current` (a span, or None when tracing is off) as failed without an
    exception: a tool call whose error went back to the model."""
    if current is None:
        return
    trace = sys.modules["opentelemetry.trace"]
    current.set_attribute("error.type", error_type)
    current.set_status(trace.Status(trace.StatusCode.ERROR, description))


def _tracer() -> Any:
    global _cached
    trace = sys.modules.get("opentelemetry.trace")
    if trace is None:  # nobody set up OpenTelemetry in this process
        return None
    provider = trace.get_tracer_provider()
    if isinstance(provider, trace.ProxyTracerProvider | trace.NoOpTracerProvider):
        return None
    if _cached is None or _cached[0] is not provider:
        from tether import __version__

        _cached = (provider, provider.get_tracer("tether", __version__))
    return _cached[1]
