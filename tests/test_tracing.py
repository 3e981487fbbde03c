"""OpenTelemetry spans: one per run, model request and tool call, subagents nested."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from tether import create_agent, tracing
from tether.messages import ToolCall
from tether.models import ScriptedModel


@pytest.fixture
def spans(monkeypatch: pytest.MonkeyPatch) -> Iterator[InMemorySpanExporter]:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    # The global provider can be set once per process; the tests swap it in and out.
    monkeypatch.setattr(trace, "get_tracer_provider", lambda: provider)
    return exporter


def test_a_run_with_a_subagent_makes_nested_gen_ai_spans(spans: InMemorySpanExporter) -> None:
    model = ScriptedModel(
        [
            [ToolCall("task", {"description": "look around", "subagent_type": "general-purpose"})],
            [ToolCall("ls", {"path": "/"})],
            "nothing here",
            "the subagent found nothing",
        ]
    )
    create_agent(model).run("Explore.")
    finished = {s.name: s for s in spans.get_finished_spans()}
    names = [s.name for s in spans.get_finished_spans()]
    assert names.count("invoke_agent main") == 1
    assert names.count("invoke_agent task:general-purpose#1") == 1
    assert names.count("chat scripted") == 4
    assert {"execute_tool task", "execute_tool ls"} <= set(names)

    run = finished["invoke_agent main"]
    task = finished["execute_tool task"]
    sub = finished["invoke_agent task:general-purpose#1"]
    ls = finished["execute_tool ls"]
    assert run.parent is None
    assert task.parent.span_id == run.context.span_id  # type: ignore[union-attr]
    assert sub.parent.span_id == task.context.span_id  # type: ignore[union-attr]
    assert ls.parent.span_id == sub.context.span_id  # type: ignore[union-attr]
    chat = next(s for s in spans.get_finished_spans() if s.name == "chat scripted")
    assert chat.attributes["gen_ai.operation.name"] == "chat"
    assert chat.attributes["gen_ai.request.model"] == "scripted"
    assert chat.attributes["gen_ai.usage.input_tokens"] > 0
    assert chat.attributes["gen_ai.response.finish_reasons"] == ("tool_calls",)
    assert run.attributes["tether.stop_reason"] == "completed"
    assert ls.attributes["gen_ai.tool.name"] == "ls"


def test_a_failed_tool_call_marks_its_span(spans: InMemorySpanExporter) -> None:
    model = ScriptedModel([[ToolCall("read_file", {"file_path": "/missing"})], "ok"])
    create_agent(model).run("go")
    read = next(s for s in spans.get_finished_spans() if s.name == "execute_tool read_file")
    assert read.attributes["error.type"] == "tool_error"


def test_no_provider_means_no_spans() -> None:
    assert isinstance(trace.get_tracer_provider(), trace.ProxyTracerProvider)
    assert tracing.span("x", {}) is tracing._OFF
