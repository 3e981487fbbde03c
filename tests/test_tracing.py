"""OpenTelemetry spans: one per run, model request and tool call, subagents nested."""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from typing import Any

import pytest
from opentelemetry import trace
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.semconv._incubating.attributes import gen_ai_attributes as gen_ai
from opentelemetry.semconv.attributes import error_attributes

from tests.conftest import own_id
from tether import ConfigurationError, create_agent, tracing
from tether.messages import Message, ToolCall
from tether.models import ScriptedModel
from tether.tracing import Tracing


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
    assert chat.attributes[gen_ai.GEN_AI_OPERATION_NAME] == "chat"
    assert chat.attributes[gen_ai.GEN_AI_REQUEST_MODEL] == "scripted"
    assert chat.attributes[gen_ai.GEN_AI_USAGE_INPUT_TOKENS] > 0
    assert chat.attributes[gen_ai.GEN_AI_RESPONSE_FINISH_REASONS] == ("tool_calls",)
    assert run.attributes["tether.stop_reason"] == "completed"  # tether's own
    assert ls.attributes[gen_ai.GEN_AI_TOOL_NAME] == "ls"


def test_a_failed_tool_call_marks_its_span(spans: InMemorySpanExporter) -> None:
    model = ScriptedModel([[ToolCall("read_file", {"file_path": "/missing"})], "ok"])
    create_agent(model).run("go")
    read = next(s for s in spans.get_finished_spans() if s.name == "execute_tool read_file")
    assert read.attributes[error_attributes.ERROR_TYPE] == "tool_error"


def test_no_provider_means_no_spans() -> None:
    assert isinstance(trace.get_tracer_provider(), trace.ProxyTracerProvider)
    assert tracing.span("x", {}) is tracing._OFF


def test_spans_carry_the_gen_ai_attributes_by_their_registered_names(
    spans: InMemorySpanExporter, tmp_path: object
) -> None:
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
    assert gen_ai.GEN_AI_CONVERSATION_ID not in (run.attributes or {})


def own_provider() -> tuple[TracerProvider, InMemorySpanExporter]:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    return provider, exporter


DELEGATING = [
    [ToolCall("task", {"description": "look around", "subagent_type": "general-purpose"})],
    [ToolCall("ls", {"path": "/"})],
    "nothing here",
    "the subagent found nothing",
]


def test_an_agent_traces_to_the_provider_it_is_given() -> None:
    assert isinstance(trace.get_tracer_provider(), trace.ProxyTracerProvider)  # none global
    provider, exporter = own_provider()
    agent = create_agent(ScriptedModel(DELEGATING), tracing=Tracing(provider=provider))
    agent.run("Explore.")
    names = [s.name for s in exporter.get_finished_spans()]
    assert names.count("chat scripted") == 4  # the subagent's too
    assert "invoke_agent task:general-purpose#1" in names
    with pytest.raises(ConfigurationError, match=r"tracing must be a tether\.tracing\.Tracing"):
        create_agent(ScriptedModel(["x"]), tracing=provider)  # type: ignore[arg-type]


def test_model_spans_can_be_left_to_a_provider_instrumentation() -> None:
    provider, exporter = own_provider()
    tracing_off = Tracing(provider=provider, model_spans=False)
    create_agent(ScriptedModel(DELEGATING), tracing=tracing_off).run("Explore.")
    names = {s.name for s in exporter.get_finished_spans()}
    assert names == {
        "invoke_agent main",
        "invoke_agent task:general-purpose#1",
        "execute_tool task",
        "execute_tool ls",
    }


def content_spans(capture: bool | None) -> tuple[list[ReadableSpan], Sequence[Message]]:
    """The spans of a run that makes one call, and the run's messages."""
    provider, exporter = own_provider()
    model = ScriptedModel([[ToolCall("write_todos", {"todos": []}, id="w")], "Planned."])
    settings = Tracing(provider=provider, capture_content=capture)
    result = create_agent(model, system_prompt="Be brief.", tracing=settings).run("Plan it.")
    return list(exporter.get_finished_spans()), result.messages


CONTENT = (
    gen_ai.GEN_AI_INPUT_MESSAGES,
    gen_ai.GEN_AI_OUTPUT_MESSAGES,
    gen_ai.GEN_AI_SYSTEM_INSTRUCTIONS,
    gen_ai.GEN_AI_TOOL_DEFINITIONS,
    gen_ai.GEN_AI_TOOL_CALL_ARGUMENTS,
    gen_ai.GEN_AI_TOOL_CALL_RESULT,
)


def test_message_content_is_recorded_only_when_asked(monkeypatch: pytest.MonkeyPatch) -> None:
    for span in content_spans(None)[0]:  # the default: nothing anyone said
        assert not set(CONTENT) & set(span.attributes or {}), span.name
    captured, messages = content_spans(True)
    spans = {s.name: s for s in captured}
    first = next(s for s in captured if s.name == "chat scripted")
    sent = json.loads(first.attributes[gen_ai.GEN_AI_INPUT_MESSAGES])  # type: ignore[arg-type, index]
    assert sent == [{"role": "user", "parts": [{"type": "text", "content": "Plan it."}]}]
    (instructions,) = json.loads(first.attributes[gen_ai.GEN_AI_SYSTEM_INSTRUCTIONS])  # type: ignore[arg-type, index]
    assert "Be brief." in instructions["content"]
    tools = json.loads(first.attributes[gen_ai.GEN_AI_TOOL_DEFINITIONS])  # type: ignore[arg-type, index]
    assert "write_todos" in [t["name"] for t in tools]
    (answer,) = json.loads(first.attributes[gen_ai.GEN_AI_OUTPUT_MESSAGES])  # type: ignore[arg-type, index]
    assert answer == {
        "role": "assistant",
        "parts": [
            {  # the call under tether's id, which its result answers by
                "type": "tool_call",
                "id": own_id(messages, "w"),
                "name": "write_todos",
                "arguments": {"todos": []},
            }
        ],
        "finish_reason": "tool_calls",
    }
    todo = spans["execute_tool write_todos"].attributes or {}
    assert json.loads(todo[gen_ai.GEN_AI_TOOL_CALL_ARGUMENTS]) == {"todos": []}  # type: ignore[arg-type]
    assert todo[gen_ai.GEN_AI_TOOL_CALL_RESULT]
    monkeypatch.setenv(tracing.CAPTURE_CONTENT_VARIABLE, "true")  # the conventions' switch
    chat = next(s for s in content_spans(None)[0] if s.name == "chat scripted")
    assert gen_ai.GEN_AI_INPUT_MESSAGES in (chat.attributes or {})


def test_a_provider_request_names_the_server_and_the_response_id() -> None:
    from opentelemetry.semconv.attributes import server_attributes

    from tether.models.openai import OpenAIModel

    from .models.faults import Reply, serving
    from .models.test_openai import chat_stream

    provider, exporter = own_provider()
    with serving([Reply(body=chat_stream("Hi.").content)]) as server:
        model = OpenAIModel("gpt-5.2", api="chat", api_key="k", base_url=server.url + "/v1")
        create_agent(model, tracing=Tracing(provider=provider)).run("Hello")
    (chat,) = [s for s in exporter.get_finished_spans() if s.name == "chat gpt-5.2"]
    attributes = chat.attributes or {}
    assert attributes[server_attributes.SERVER_ADDRESS] == "127.0.0.1"
    assert attributes[server_attributes.SERVER_PORT] == server.port
    assert attributes[gen_ai.GEN_AI_RESPONSE_ID] == "chatcmpl-B9MBs8CjcvOU2jLn4n570S5qMJKcT"


# -- the conventions' provider names, and the GenAI client metrics ----------------------


def test_provider_names_are_the_conventions_on_spans_and_tethers_own_elsewhere() -> None:
    from opentelemetry.semconv._incubating.attributes.gen_ai_attributes import (
        GenAiProviderNameValues as Known,
    )

    from tether.models.bedrock import BedrockModel
    from tether.models.google import GoogleModel
    from tether.models.openai import azure_model

    gemini = GoogleModel("gemini-2.5-flash", api_key="k")
    vertex = GoogleModel("gemini-2.5-flash", vertex=True, project="p", location="us-central1")
    bedrock = BedrockModel("amazon.nova-pro-v1:0", region="us-east-1")
    azure = azure_model("gpt-5.2", endpoint="https://x.openai.azure.com", api_key="k")
    named = {m: tracing.provider_name(m) for m in (gemini, vertex, bedrock, azure)}
    assert named == {
        gemini: Known.GCP_GEMINI.value,
        vertex: Known.GCP_VERTEX_AI.value,
        bedrock: Known.AWS_BEDROCK.value,
        azure: Known.AZURE_AI_OPENAI.value,
    }
    assert [m.provider for m in named] == ["google", "google", "bedrock", "azure"]  # as before
    assert tracing.provider_name(ScriptedModel(["x"])) == "test"  # not the conventions': kept


def test_a_gemini_run_is_traced_as_gcp_gemini_and_still_priced_as_google() -> None:
    from tether.models.google import GoogleModel

    from .models.faults import Reply, serving
    from .models.test_google import gemini_stream

    provider, exporter = own_provider()
    with serving([Reply(body=gemini_stream("Hi."))]) as server:
        model = GoogleModel("gemini-2.5-flash", api_key="k", base_url=server.url, max_retries=0)
        result = create_agent(model, tracing=Tracing(provider=provider)).run("Hello")
    assert result.cost_usd  # priced by tether's provider id, "google"
    done = {s.name: s for s in exporter.get_finished_spans()}
    for name in ("invoke_agent main", "chat gemini-2.5-flash"):
        assert done[name].attributes[gen_ai.GEN_AI_PROVIDER_NAME] == "gcp.gemini", name  # type: ignore[index]


def own_meter() -> tuple[Any, Any]:
    from opentelemetry.sdk.metrics import MeterProvider
    from opentelemetry.sdk.metrics.export import InMemoryMetricReader

    reader = InMemoryMetricReader()
    return MeterProvider(metric_readers=[reader]), reader


def points(reader: Any) -> dict[str, list[Any]]:
    """The data points of each metric the reader holds, by name."""
    found: dict[str, list[Any]] = {}
    data = reader.get_metrics_data()
    for resource in data.resource_metrics if data else ():
        for scope in resource.scope_metrics:
            for metric in scope.metrics:
                assert metric.unit == {"gen_ai.client.token.usage": "{token}"}.get(metric.name, "s")
                found.setdefault(metric.name, []).extend(metric.data.data_points)
    return found


def test_each_model_call_records_the_gen_ai_client_metrics() -> None:
    from tether import ModelError

    meters, reader = own_meter()
    model = ScriptedModel([[ToolCall("ls", {"path": "/"})], "done", ModelError("down")])
    agent = create_agent(model, tracing=Tracing(meter_provider=meters), checkpointer=None)
    first = agent.run("Look.")
    with pytest.raises(ModelError):
        agent.run("Again.")
    found = points(reader)
    assert set(found) == {"gen_ai.client.operation.duration", "gen_ai.client.token.usage"}

    durations = {
        point.attributes.get("error.type"): point
        for point in found["gen_ai.client.operation.duration"]
    }
    assert durations[None].count == 2  # the first run's two calls
    assert durations["ModelError"].count == 1  # the failed call
    assert list(durations[None].explicit_bounds) == list(tracing._DURATION_BUCKETS)
    ok = dict(durations[None].attributes)
    assert ok == {
        "gen_ai.operation.name": "chat",
        "gen_ai.provider.name": "test",
        "gen_ai.request.model": "scripted",
        "gen_ai.response.model": "scripted",
    }
    assert "gen_ai.response.model" not in durations["ModelError"].attributes

    tokens = {p.attributes["gen_ai.token.type"]: p for p in found["gen_ai.client.token.usage"]}
    assert set(tokens) == {"input", "output"}  # none for the failed call: no usage known
    assert tokens["input"].count == 2
    assert tokens["input"].sum == first.usage.input_tokens
    assert tokens["output"].sum == first.usage.output_tokens
    assert list(tokens["input"].explicit_bounds) == [4**n for n in range(14)]
    assert "error.type" not in tokens["input"].attributes


def test_a_global_meter_provider_is_used_and_none_costs_nothing(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from opentelemetry import metrics

    from tether.models.base import ModelRequest

    model = ScriptedModel(["hi"])
    request = ModelRequest("", ())
    assert tracing.model_call(model, request, None, Tracing()) is None  # nothing set up
    meters, reader = own_meter()
    monkeypatch.setattr(metrics, "get_meter_provider", lambda: meters)
    create_agent(ScriptedModel(["hi"]), checkpointer=None).run("go")
    assert len(points(reader)["gen_ai.client.token.usage"]) == 2
    # model_spans=False leaves the model calls to a provider's instrumentation entirely
    meters, reader = own_meter()
    left = Tracing(meter_provider=meters, model_spans=False)
    create_agent(ScriptedModel(["hi"]), tracing=left, checkpointer=None).run("go")
    assert points(reader) == {}


def test_metrics_and_spans_of_one_call_agree(spans: InMemorySpanExporter) -> None:
    meters, reader = own_meter()
    agent = create_agent(ScriptedModel(["hi"]), tracing=Tracing(meter_provider=meters))
    result = agent.run("go")
    (chat,) = [s for s in spans.get_finished_spans() if s.name == "chat scripted"]
    assert chat.attributes[gen_ai.GEN_AI_USAGE_OUTPUT_TOKENS] == result.usage.output_tokens  # type: ignore[index]
    (duration,) = points(reader)["gen_ai.client.operation.duration"]
    assert duration.sum <= (chat.end_time - chat.start_time) / 1e9  # type: ignore[operator]
