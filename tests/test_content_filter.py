"""A reply the provider's content filter stopped ends the run with a reason of its own."""

from __future__ import annotations

from pathlib import Path

import pytest

from tether import ContentFilterError, ModelError, create_agent, tool
from tether.messages import AssistantMessage, TextPart, ToolCall, ToolResultMessage
from tether.models import ModelResponse, ScriptedModel

ran: list[str] = []


@tool
def note(text: str) -> str:
    """Keep a note."""
    ran.append(text)
    return "kept"


def filtered(*parts: TextPart | ToolCall) -> ModelResponse:
    return ModelResponse(AssistantMessage(parts), finish_reason="content_filter")


def test_a_filtered_reply_is_not_the_answer() -> None:
    model = ScriptedModel([filtered(TextPart("The first half of an answer"))])
    with pytest.raises(ContentFilterError, match="content filter") as caught:
        create_agent(model).run("go")
    assert isinstance(caught.value, ModelError)
    assert not caught.value.transient
    result = caught.value.result
    assert result is not None
    assert result.stop_reason == "content_filter"
    assert result.output is None
    assert result.messages[-1].text == "The first half of an answer"  # kept, not lost
    assert result.steps == 1


def test_the_calls_of_a_filtered_reply_are_answered_never_run() -> None:
    ran.clear()
    reply = filtered(TextPart("Noting"), ToolCall("note", {"text": "x"}, "c1"))
    with pytest.raises(ContentFilterError) as caught:
        create_agent(ScriptedModel([reply]), tools=[note]).run("go")
    assert ran == []
    result = caught.value.result
    assert result is not None
    last = result.messages[-1]
    assert isinstance(last, ToolResultMessage)
    calls = result.messages[-2].tool_calls  # type: ignore[union-attr]
    assert [r.call_id for r in last.results] == [c.id for c in calls]
    assert last.results[0].is_error


def test_a_thread_records_the_stop_and_goes_on_afterwards(tmp_path: Path) -> None:
    ran.clear()
    model = ScriptedModel([filtered(ToolCall("note", {"text": "x"}, "c1")), "a clean answer"])
    agent = create_agent(model, tools=[note], checkpointer=f"sqlite:///{tmp_path}/t.db")
    with pytest.raises(ContentFilterError):
        agent.run("go", thread_id="t")
    result = agent.run("try again, differently", thread_id="t")
    assert ran == []  # the filtered call was not run by the next run either
    assert result.stop_reason == "completed"
    assert result.output == "a clean answer"


def test_a_subagent_stopped_by_the_filter_reports_it_to_its_parent() -> None:
    from tether import SubAgent

    def parent_turns() -> list[object]:
        return [[ToolCall("task", {"subagent_type": "helper", "description": "do it"}, "t1")], "ok"]

    child = ScriptedModel([filtered(TextPart("half"))])
    agent = create_agent(
        ScriptedModel(parent_turns()),
        subagents=[SubAgent(name="helper", description="helps", model=child)],
    )
    result = agent.run("go")
    assert result.stop_reason == "completed"
    reply = result.messages[2]
    assert isinstance(reply, ToolResultMessage)
    assert reply.results[0].is_error
    assert "content filter" in reply.results[0].text
