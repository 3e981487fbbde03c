"""Whatever a tool returns becomes valid content, or a clear error for the model: the
run goes on, what it sends is valid, and the thread it saves reads back."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.conftest import own_id
from tether import create_agent, tool
from tether.backends.permissions import Rule
from tether.messages import ToolCall, ToolResult, ToolResultMessage
from tether.models import ScriptedModel


class Unprintable:
    def __str__(self) -> str:
        raise RuntimeError("no text for you")


def _answer(value: Any, tmp_path: Path, **options: Any) -> ToolResult:
    @tool
    def hostile() -> Any:
        """Return something awkward."""
        return value

    model = ScriptedModel([[ToolCall("hostile", {}, "c1")], "done"])
    agent = create_agent(
        model, tools=[hostile], checkpointer=f"sqlite:///{tmp_path}/runs.db", **options
    )
    result = agent.run("go", thread_id="t")
    assert result.output == "done"
    saved = agent.history("t")  # what was saved reads back, equal to what was sent
    assert saved == list(result.messages)
    (answer,) = next(m for m in result.messages if isinstance(m, ToolResultMessage)).results
    assert answer.call_id == own_id(result.messages, "c1")  # it answers the call, by tether's id
    answer.text.encode("utf-8")  # valid Unicode: a provider's JSON encoder takes it
    return answer


@pytest.mark.parametrize(
    ("value", "shown"),
    [
        (b"\xff\xfe caf\xc3\xa9", "\ufffd\ufffd café"),
        (bytearray(b"plain"), "plain"),
        ("lone \ud800 surrogate", "lone \ufffd surrogate"),
        ({"blob": b"\x00\xff"}, '{"blob":"AP8="}'),
    ],
)
def test_bytes_and_broken_text_become_valid_text(tmp_path: Path, value: object, shown: str) -> None:
    answer = _answer(value, tmp_path)
    assert not answer.is_error
    assert answer.text == shown


def test_a_value_that_cannot_be_shown_is_an_error_for_the_model(tmp_path: Path) -> None:
    answer = _answer([1, Unprintable()], tmp_path)
    assert answer.is_error
    assert "cannot be shown as text" in answer.text
    assert "no text for you" in answer.text


def test_a_preview_is_small_however_long_its_lines(tmp_path: Path) -> None:
    answer = _answer("x" * 5_000_000, tmp_path)
    assert f"saved to /large_tool_results/{answer.call_id}" in answer.text
    assert len(answer.text) < 1_000
    assert "[... line cut]" in answer.text


def test_a_refused_eviction_cuts_the_result_instead(tmp_path: Path) -> None:
    deny = [Rule(operations={"write"}, paths=["/large_tool_results/**"], mode="deny")]
    answer = _answer("y" * 500_000, tmp_path, permissions=deny)
    assert len(answer.text) < 90_000  # 20,000 tokens, and the note
    assert "more characters not shown" in answer.text
    assert f"saving the whole result to /large_tool_results/{answer.call_id} failed" in answer.text
