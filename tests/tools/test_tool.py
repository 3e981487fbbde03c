from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from typing import Annotated

import pytest
from pydantic import BaseModel, Field

from tether import ToolContext, ToolFatalError, tool
from tether.errors import ConfigurationError
from tether.messages import BinaryPart, TextPart, ToolCall


@tool
async def add(a: int, b: int = 1) -> int:
    """Add two integers.

    Args:
        a: The first number.
        b: The second number.
    """
    return a + b


async def run(t, args, context, **kw):  # type: ignore[no-untyped-def]
    return await t.run(ToolCall(t.name, args), context, **kw)


def test_schema_comes_from_the_signature_and_docstring() -> None:
    assert add.name == "add"
    assert add.description == "Add two integers."
    assert add.parameters == {
        "type": "object",
        "properties": {
            "a": {"type": "integer", "description": "The first number."},
            "b": {"type": "integer", "default": 1, "description": "The second number."},
        },
        "required": ["a"],
        "additionalProperties": False,
    }


def test_sphinx_and_numpy_docstrings_describe_arguments() -> None:
    @tool
    def sphinx(path: str) -> str:
        """Read a file.

        :param path: Where the file is.
        """
        return path

    @tool
    def numpy(path: str) -> str:
        """Read a file.

        Parameters
        ----------
        path : str
            Where the file is.
        """
        return path

    for t in (sphinx, numpy):
        assert t.parameters["properties"]["path"]["description"] == "Where the file is."


def test_a_context_parameter_is_hidden_from_the_model() -> None:
    @tool
    def whoami(ctx: ToolContext, loud: bool = False) -> str:
        """Say which run this is."""
        return ctx.run_id

    assert whoami.context_param == "ctx"
    assert list(whoami.parameters["properties"]) == ["loud"]


def test_decorator_options_override_name_and_description() -> None:
    @tool(name="sum-two", description="Sum.", read_only=True, timeout_seconds=2)
    def anything(x: int) -> int:
        return x

    assert (anything.name, anything.description, anything.read_only) == ("sum-two", "Sum.", True)
    assert anything.timeout_seconds == 2


def test_pydantic_constraints_reach_the_schema() -> None:
    @tool
    def pick(n: Annotated[int, Field(ge=1, le=5)]) -> int:
        """Pick."""
        return n

    assert pick.parameters["properties"]["n"] == {"type": "integer", "minimum": 1, "maximum": 5}


async def test_async_and_sync_tools_both_run(context: ToolContext) -> None:
    @tool
    def double(x: int) -> int:
        """Double."""
        return 2 * x

    assert (await run(add, {"a": 2, "b": 3}, context)).text == "5"
    assert (await run(double, {"x": 4}, context)).text == "8"


async def test_the_context_reaches_the_tool(context: ToolContext) -> None:
    @tool
    async def whoami(ctx: ToolContext) -> str:
        """Who."""
        return f"{ctx.run_id} {ctx.agent_path}"

    assert (await run(whoami, {}, context)).text == "run_test ('main',)"


async def test_wrong_types_name_the_field_and_the_value(context: ToolContext) -> None:
    result = await run(add, {"a": "two"}, context)
    assert result.is_error
    assert "- a: Input should be a valid integer" in result.text
    assert "(got 'two')" in result.text
    assert "call 'add' again" in result.text


async def test_missing_and_extra_arguments_are_reported(context: ToolContext) -> None:
    result = await run(add, {"b": 2, "c": 3}, context)
    assert "- a: Field required" in result.text
    assert "- c: Extra inputs are not permitted" in result.text


async def test_malformed_json_arguments_are_reported(context: ToolContext) -> None:
    result = await run(add, '{"a": 2,', context)
    assert result.is_error
    assert "not valid JSON" in result.text


async def test_json_that_is_not_an_object_is_reported(context: ToolContext) -> None:
    result = await run(add, "[1, 2]", context)
    assert "must be a JSON object, got list" in result.text


async def test_json_text_arguments_are_decoded(context: ToolContext) -> None:
    assert (await run(add, '{"a": 2, "b": 2}', context)).text == "4"


async def test_an_exception_in_a_tool_becomes_an_error_result(context: ToolContext) -> None:
    @tool
    def broken() -> str:
        """Break."""
        raise ValueError("disk on fire")

    result = await run(broken, {}, context)
    assert result.is_error
    assert result.text == "Tool 'broken' failed: ValueError: disk on fire"


async def test_a_timeout_error_raised_by_the_tool_itself_is_a_failure(context: ToolContext) -> None:
    @tool
    async def flaky() -> str:
        """Flaky."""
        raise TimeoutError("upstream timed out")

    result = await run(flaky, {}, context, timeout_seconds=10)
    assert result.text == "Tool 'flaky' failed: TimeoutError: upstream timed out"


async def test_a_hanging_tool_times_out(context: ToolContext) -> None:
    @tool(timeout_seconds=0.05)
    async def hang() -> str:
        """Hang."""
        await asyncio.sleep(60)
        return "never"

    started = time.monotonic()
    result = await run(hang, {}, context)
    assert result.is_error
    assert (
        result.text == "Tool 'hang' timed out after 0.05 s. "
        "It may have taken effect: check before calling it again."
    )
    assert time.monotonic() - started < 5


async def test_the_run_default_timeout_applies_when_the_tool_has_none(context: ToolContext) -> None:
    @tool
    def slow() -> str:
        """Slow."""
        time.sleep(0.5)
        return "late"

    result = await run(slow, {}, context, timeout_seconds=0.05)
    assert (
        result.text == "Tool 'slow' timed out after 0.05 s. "
        "It may have taken effect: check before calling it again."
    )


async def test_tool_fatal_error_propagates(context: ToolContext) -> None:
    @tool
    def stop() -> str:
        """Stop."""
        raise ToolFatalError("the database is gone")

    with pytest.raises(ToolFatalError, match="database is gone"):
        await run(stop, {}, context)


async def test_return_values_become_content(context: ToolContext) -> None:
    class Point(BaseModel):
        x: int
        y: int

    @tool
    def point() -> Point:
        """Point."""
        return Point(x=1, y=2)

    @tool
    def picture() -> list[object]:
        """Picture."""
        return ["a caption", BinaryPart(b"\x89PNG", "image/png")]

    assert (await run(point, {}, context)).text == '{"x":1,"y":2}'
    result = await run(picture, {}, context)
    assert result.content == (TextPart("a caption"), BinaryPart(b"\x89PNG", "image/png"))


def test_var_args_are_rejected() -> None:
    def bad(*items: int) -> int:
        return sum(items)

    with pytest.raises(ConfigurationError, match="\\*args"):
        tool(bad)


def test_a_lambda_needs_a_name() -> None:
    with pytest.raises(ConfigurationError, match="tool name '<lambda>'"):
        tool(lambda x: x)


def test_a_non_positive_timeout_is_rejected() -> None:
    with pytest.raises(ConfigurationError, match="timeout_seconds"):
        tool(timeout_seconds=0)(add.function)


def test_unresolvable_type_hints_are_a_configuration_error() -> None:
    def odd(x: NotDefined) -> int:  # type: ignore[name-defined]  # noqa: F821
        return 1

    with pytest.raises(ConfigurationError, match="type hints"):
        tool(odd)


def test_a_parameter_without_a_json_schema_is_a_configuration_error() -> None:
    def takes_callback(callback: Callable[[int], int]) -> int:
        return callback(1)

    with pytest.raises(ConfigurationError, match="cannot describe"):
        tool(takes_callback)


def test_path_param_must_name_a_parameter() -> None:
    def fix(file_path: str) -> str:
        """Fix a file."""
        return file_path

    assert tool(path_param="file_path")(fix).path_param == "file_path"
    with pytest.raises(
        ConfigurationError, match=r"path_param 'path' is not one of its parameters \(file_path\)"
    ):
        tool(path_param="path")(fix)


def test_a_first_sentence_wrapped_over_two_lines_is_not_split_into_paragraphs() -> None:
    @tool
    async def look(path: str) -> str:
        """List a directory, each entry with its size; symbolic links
        with the path they name.

        More about it.

        Args:
            path: Where.
        """
        return path

    assert look.description == (
        "List a directory, each entry with its size; symbolic links\n"
        "with the path they name.\n\nMore about it."
    )


def test_no_built_in_tool_description_breaks_a_sentence_with_a_paragraph() -> None:
    from tether import create_agent
    from tether.models import ScriptedModel

    agent = create_agent(ScriptedModel(["ok"]))
    for name, built in agent._plan.tools.items():
        for paragraph in built.description.split("\n\n")[:-1]:
            assert paragraph.rstrip().endswith((".", ":")), (name, paragraph)
