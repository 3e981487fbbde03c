"""Spans and GenAI metrics exported over OTLP/HTTP, by OpenTelemetry's own exporter, to a
receiver on the loopback interface that decodes them as a collector (or Arize Phoenix,
which takes OTLP/HTTP the same way) would."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest
from opentelemetry.exporter.otlp.proto.http.metric_exporter import OTLPMetricExporter
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.proto.collector.metrics.v1.metrics_service_pb2 import (
    ExportMetricsServiceRequest,
)
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import PeriodicExportingMetricReader
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor

from tether import create_agent, tool, tracing
from tether.models.google import GoogleModel
from tether.tracing import Tracing

from .models.faults import Reply, serving
from .models.test_google import gemini_stream


@dataclass
class Received:
    """What the receiver was sent: decoded export requests, by signal."""

    traces: list[ExportTraceServiceRequest] = field(default_factory=list)
    metrics: list[ExportMetricsServiceRequest] = field(default_factory=list)
    content_types: set[str] = field(default_factory=set)


@pytest.fixture
def receiver() -> Iterator[tuple[str, Received]]:
    """An OTLP/HTTP receiver (protobuf bodies on /v1/traces and /v1/metrics)."""
    received = Received()

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers["content-length"]))
            received.content_types.add(self.headers["content-type"])
            if self.path == "/v1/traces":
                received.traces.append(ExportTraceServiceRequest.FromString(body))
            elif self.path == "/v1/metrics":
                received.metrics.append(ExportMetricsServiceRequest.FromString(body))
            else:
                self.send_error(404)
                return
            self.send_response(200)
            self.send_header("content-type", "application/x-protobuf")
            self.send_header("content-length", "0")
            self.end_headers()

        def log_message(self, *args: Any) -> None:
            return None

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", received
    finally:
        server.shutdown()
        server.server_close()
        thread.join(10)


def _value(any_value: Any) -> Any:
    kind = any_value.WhichOneof("value")
    return getattr(any_value, kind) if kind else None


def _attributes(item: Any) -> dict[str, Any]:
    return {a.key: _value(a.value) for a in item.attributes}


@tool
def note(text: str) -> str:
    """Save a note."""
    return f"saved {text}"


def test_spans_and_metrics_arrive_over_otlp_http(receiver: tuple[str, Received]) -> None:
    url, received = receiver
    tracer_provider = TracerProvider()
    tracer_provider.add_span_processor(
        BatchSpanProcessor(OTLPSpanExporter(endpoint=f"{url}/v1/traces", timeout=10))
    )
    metric_reader = PeriodicExportingMetricReader(
        OTLPMetricExporter(endpoint=f"{url}/v1/metrics", timeout=10),
        export_interval_millis=3_600_000,  # exported when flushed, not by the clock
    )
    meter_provider = MeterProvider(metric_readers=[metric_reader])
    settings = Tracing(provider=tracer_provider, meter_provider=meter_provider)
    replies = [
        Reply(body=gemini_stream(None, ("g1", "note", '{"text": "hi"}'))),
        Reply(body=gemini_stream("Noted.")),
    ]
    try:
        with serving(replies) as gemini:
            model = GoogleModel("gemini-2.5-flash", api_key="k", base_url=gemini.url, max_retries=0)
            result = create_agent(model, tools=[note], tracing=settings).run("Note hi.")
        assert tracer_provider.force_flush(10_000)
        assert meter_provider.force_flush(10_000)
    finally:
        tracer_provider.shutdown()
        meter_provider.shutdown()
    assert received.content_types == {"application/x-protobuf"}

    spans = {
        span.name: span
        for request in received.traces
        for resource in request.resource_spans
        for scope in resource.scope_spans
        for span in scope.spans
    }
    assert {"invoke_agent main", "chat gemini-2.5-flash", "execute_tool note"} <= set(spans)
    chat = _attributes(spans["chat gemini-2.5-flash"])
    assert chat["gen_ai.provider.name"] == "gcp.gemini"
    assert chat["gen_ai.request.model"] == "gemini-2.5-flash"
    assert chat["server.port"] == gemini.port
    assert _attributes(spans["invoke_agent main"])["gen_ai.provider.name"] == "gcp.gemini"

    metrics = {
        metric.name: metric
        for request in received.metrics
        for resource in request.resource_metrics
        for scope in resource.scope_metrics
        for metric in scope.metrics
    }
    duration = metrics["gen_ai.client.operation.duration"]
    assert duration.unit == "s"
    (point,) = duration.histogram.data_points
    assert point.count == 2  # two model calls
    assert list(point.explicit_bounds) == list(tracing._DURATION_BUCKETS)
    assert _attributes(point)["gen_ai.provider.name"] == "gcp.gemini"
    assert _attributes(point)["gen_ai.response.model"] == "gemini-2.5-flash"
    usage = metrics["gen_ai.client.token.usage"]
    assert usage.unit == "{token}"
    by_type = {_attributes(p)["gen_ai.token.type"]: p for p in usage.histogram.data_points}
    assert by_type["input"].sum == result.usage.input_tokens
    assert by_type["output"].sum == result.usage.output_tokens
    assert list(by_type["input"].explicit_bounds) == list(tracing._TOKEN_BUCKETS)
