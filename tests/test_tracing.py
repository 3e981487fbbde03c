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


def test_spans_carry_the_gen_ai_attributes_by_their_registered_names(
    spans: InMemorySpanExporter, tmp_path: object
) -> None:
    from opentelemetry.semconv._incubating.attributes import gen_ai_attributes as gen_ai
    from opentelemetry.semconv.attributes import error_attributes
    from opentelemetry.trace import SpanKind, StatusCode

    from tether import ModelError

    model = ScriptedModel(
        [[ToolCall("read_file", {"file_path": "/missing"}, id="r")], ModelError("down")]
    )
    agent = create_agent(model, checkpointer=f"sqlite:///{tmp_path}/runs.db")
    with pytest.raises(ModelError):
        agent.run("go", thread_id="t1")
    done = spans.get_finished_spans()
    run = next(s for s in done if s.name == "invoke_agent main")
    assert run.attributes[gen_ai.GEN_AI_PROVIDER_NAME] == "test"
    assert run.attributes[gen_ai.GEN_AI_REQUEST_MODEL] == "scripted"
    assert run.attributes[gen_ai.GEN_AI_OUTPUT_TYPE] == "text"
    assert run.attributes[gen_ai.GEN_AI_CONVERSATION_ID] == "t1"
    first, second = [s for s in done if s.name == "chat scripted"]
    assert first.kind == SpanKind.CLIENT
    assert first.attributes[gen_ai.GEN_AI_CONVERSATION_ID] == "t1"
    assert first.attributes[gen_ai.GEN_AI_USAGE_CACHE_READ_INPUT_TOKENS] == 0
    assert second.attributes[error_attributes.ERROR_TYPE] == "ModelError"
    assert second.status.status_code == StatusCode.ERROR
    read = next(s for s in done if s.name == "execute_tool read_file")
    assert read.attributes[gen_ai.GEN_AI_TOOL_TYPE] == "function"
    assert read.attributes[gen_ai.GEN_AI_TOOL_DESCRIPTION]
    assert read.status.status_code == StatusCode.ERROR
    assert read.attributes[error_attributes.ERROR_TYPE] == "tool_error"


def test_a_run_without_a_thread_has_no_conversation_id(spans: InMemorySpanExporter) -> None:
    create_agent(ScriptedModel(["hi"]), checkpointer=None).run("go")
    run = next(s for s in spans.get_finished_spans() if s.name == "invoke_agent main")
    assert "gen_ai.conversation.id" not in (run.attributes or {})
