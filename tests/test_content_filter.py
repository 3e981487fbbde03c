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


def test_a_reply_cut_off_by_the_output_limit_is_not_the_answer() -> None:
    cut = ModelResponse(AssistantMessage((TextPart("The answer is: first, open the"),)), "length")
    model = ScriptedModel([cut, "The answer is 42."])
    result = create_agent(model).run("go")
    assert result.output == "The answer is 42."
    told = result.messages[2].text
    assert "cut off" in told


def test_a_reply_always_cut_off_ends_in_an_output_error() -> None:
    from tether import OutputError

    cut = ModelResponse(AssistantMessage((TextPart("Half"),)), "length")
    with pytest.raises(OutputError, match="cut off by the output token limit") as caught:
        create_agent(ScriptedModel([cut] * 5), output_retries=1).run("go")
    assert caught.value.result is not None
    assert caught.value.result.stop_reason == "error"


def test_a_dropped_malformed_call_is_asked_again_not_taken_as_the_answer() -> None:
    ran.clear()
    dropped = ModelResponse(
        AssistantMessage((TextPart("I'll save the note now."),)), "malformed_call"
    )
    model = ScriptedModel([dropped, [ToolCall("note", {"text": "x"})], "saved"])
    result = create_agent(model, tools=[note]).run("go")
    assert result.output == "saved"
    assert ran == ["x"]
    assert "malformed" in result.messages[2].text
    assert not model.requests[1].force_output
