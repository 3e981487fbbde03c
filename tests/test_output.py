"""Guaranteed structured output through the final_result tool."""

from __future__ import annotations

import pytest
from pydantic import BaseModel, Field

from tether import ConfigurationError, OutputError, create_agent, tool
from tether.messages import ToolCall, ToolResultMessage, UserMessage
from tether.models import ScriptedModel
from tether.output import OutputSpec


class Answer(BaseModel):
    total: int = Field(description="The sum.")


@tool
async def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


def final(**args: object) -> list[ToolCall]:
    return [ToolCall("final_result", dict(args))]


def results_of(message: object) -> list[str]:
    assert isinstance(message, ToolResultMessage)
    return [r.text for r in message.results]


def test_the_issue_example_completes_with_a_validated_answer() -> None:
    model = ScriptedModel([[ToolCall("add", {"a": 2, "b": 3})], final(total=5)])
    result = create_agent(model, tools=[add], output_type=Answer).run("What is 2 + 3?")
    assert result.output == Answer(total=5)
    assert result.stop_reason == "completed"
    assert results_of(result.messages[-1]) == ["Final answer received."]


def test_the_model_sees_final_result_with_the_output_schema() -> None:
    model = ScriptedModel([final(total=1)])
    create_agent(model, output_type=Answer).run("go")
    request = model.requests[0]
    spec = request.tools[-1]
    assert spec.name == "final_result"
    assert spec.parameters["properties"]["total"]["type"] == "integer"
    assert request.output_tool == "final_result"
    assert "by calling `final_result` once" in request.system_prompt


def test_an_invalid_answer_goes_back_to_the_model_to_retry() -> None:
    model = ScriptedModel([final(total="five"), final(total=5)])
    result = create_agent(model, output_type=Answer).run("go")
    assert result.output == Answer(total=5)
    assert "- total: Input should be a valid integer" in results_of(result.messages[2])[0]


def test_a_text_reply_is_told_to_call_final_result() -> None:
    model = ScriptedModel(["The total is 5.", final(total=5)])
    result = create_agent(model, output_type=Answer).run("go")
    assert result.output == Answer(total=5)
    assert result.messages[2] == UserMessage.of(
        "Your reply did not use `final_result`. Give your final answer by calling "
        "`final_result` with arguments that match its schema."
    )


def test_a_text_reply_that_is_valid_json_is_accepted() -> None:
    model = ScriptedModel(['```json\n{"total": 5}\n```'])
    result = create_agent(model, output_type=Answer).run("go")
    assert result.output == Answer(total=5)


def test_giving_up_after_the_retries_raises_output_error_with_the_partial_result() -> None:
    model = ScriptedModel(["no", "still no", final(total="x")])
    agent = create_agent(model, output_type=Answer, output_retries=2)
    with pytest.raises(OutputError, match="after 2 retries") as caught:
        agent.run("go")
    result = caught.value.result
    assert result is not None
    assert result.stop_reason == "error"
    assert result.steps == 3
    assert isinstance(result.messages[-1], ToolResultMessage)


def test_zero_retries_fail_at_the_first_bad_answer() -> None:
    with pytest.raises(OutputError):
        create_agent(ScriptedModel(["plain text"]), output_type=Answer, output_retries=0).run("go")


def test_the_first_valid_answer_wins_and_later_ones_are_refused() -> None:
    calls = [
        ToolCall("final_result", {"total": "bad"}),
        ToolCall("final_result", {"total": 1}),
        ToolCall("final_result", {"total": 2}),
    ]
    result = create_agent(ScriptedModel([calls]), output_type=Answer).run("go")
    assert result.output == Answer(total=1)
    bad, good, later = results_of(result.messages[-1])
    assert "valid integer" in bad
    assert good == "Final answer received."
    assert later.startswith("Ignored")


def test_other_tools_in_the_answer_turn_are_not_run() -> None:
    ran: list[int] = []

    @tool
    def record(n: int) -> str:
        """Record."""
        ran.append(n)
        return "ok"

    calls = [ToolCall("record", {"n": 1}), ToolCall("final_result", {"total": 1})]
    result = create_agent(ScriptedModel([calls]), tools=[record], output_type=Answer).run("go")
    assert ran == []
    assert results_of(result.messages[-1])[0].startswith("Not run")


def test_non_object_types_are_wrapped_in_a_result_field() -> None:
    model = ScriptedModel([final(result=[1, 2, 3])])
    result = create_agent(model, output_type=list[int]).run("go")  # type: ignore[arg-type]
    assert result.output == [1, 2, 3]
    assert model.requests[0].tools[-1].parameters["required"] == ["result"]


def test_nested_definitions_survive_wrapping() -> None:
    spec = OutputSpec(list[Answer])
    assert spec.tool is not None
    assert "$defs" in spec.tool.parameters
    assert spec.tool.parameters["properties"]["result"]["items"] == {"$ref": "#/$defs/Answer"}


def test_a_tool_named_final_result_is_refused_with_structured_output() -> None:
    @tool
    def final_result() -> str:
        """Clash."""
        return ""

    with pytest.raises(ConfigurationError, match="reserved"):
        create_agent(ScriptedModel(["x"]), tools=[final_result], output_type=Answer)


def test_an_output_type_pydantic_cannot_describe_is_refused() -> None:
    class Opaque:
        pass

    with pytest.raises(ConfigurationError, match="output_type"):
        create_agent(ScriptedModel(["x"]), output_type=Opaque)


def test_malformed_json_in_final_result_is_sent_back() -> None:
    model = ScriptedModel([[ToolCall("final_result", '{"total": ')], final(total=2)])
    result = create_agent(model, output_type=Answer).run("go")
    assert "not valid JSON" in results_of(result.messages[2])[0]
    assert result.output == Answer(total=2)


def test_an_unknown_tool_error_lists_final_result() -> None:
    model = ScriptedModel([[ToolCall("answer", {"total": 1})], final(total=1)])
    result = create_agent(model, tools=[add], output_type=Answer).run("go")
    assert results_of(result.messages[2]) == [
        "There is no tool named 'answer'. Available tools: "
        "add, edit_file, final_result, glob, grep, ls, read_file, task, write_file, write_todos."
    ]
