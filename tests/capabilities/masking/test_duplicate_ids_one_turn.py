"""Two calls of ONE turn with the same id (a history from outside; the loop gives its own
calls unique ids, a `message_history` keeps what it is given). A command's output must
never be lost or masked. It is: `repair_dangling_calls` answers both calls with the last
result of that id (dropping the first), and the masker then masks that message by id,
so the model is told "[Old read_file result cleared...]" where the test output was.
(The repair's half is older than masking; the masking half is new.)"""

from __future__ import annotations

from tether import create_agent, tool
from tether.messages import (
    AssistantMessage,
    Message,
    ToolCall,
    ToolResult,
    ToolResultMessage,
    UserMessage,
)
from tether.models import ModelRequest

from ._paging import paging_model

OUTPUT = "FAILED tests/test_x.py::test_y - AssertionError: 3 != 4\n" * 20


@tool
def run_tests() -> str:
    """Run the test suite (not read-only: its output is not given again)."""
    return "ok"


def test_a_command_output_in_a_turn_with_a_repeated_id_reaches_the_model() -> None:
    tests = ToolCall("run_tests", {}, id="call_0")
    read = ToolCall("read_file", {"file_path": "/x.py"}, id="call_0")  # same id, same turn
    history: list[Message] = [
        UserMessage.of("Fix the tests."),
        AssistantMessage((tests, read)),
        ToolResultMessage((ToolResult.of(tests, OUTPUT), ToolResult.of(read, "x = 1\n" * 200))),
        UserMessage.of("Go on."),
    ]
    sent: list[ModelRequest] = []

    create_agent(paging_model(sent), tools=[run_tests]).run(message_history=history)
    first_results = sent[0].messages[2]
    assert isinstance(first_results, ToolResultMessage)
    assert OUTPUT in [r.text for r in first_results.results], "the repair dropped the test output"
    last_results = sent[-1].messages[2]
    assert isinstance(last_results, ToolResultMessage)
    assert OUTPUT in [r.text for r in last_results.results], (
        f"the test output was masked: {[r.text[:60] for r in last_results.results]}"
    )


def test_the_masker_alone_never_masks_a_command_output_sharing_an_id() -> None:
    from tether import Masking
    from tether.capabilities.masking import ResultMasker

    masker = ResultMasker(
        Masking(keep_turns=1, min_chars=10, batch_tokens=1),
        frozenset({"read_file"}),
        {"read_file": "file_path"},
    )
    tests = ToolCall("run_tests", {}, id="call_0")
    read = ToolCall("read_file", {"file_path": "/x.py"}, id="call_0")
    messages: list[Message] = [
        UserMessage.of("go"),
        AssistantMessage((tests, read)),
        ToolResultMessage((ToolResult.of(tests, OUTPUT), ToolResult.of(read, "x = 1\n" * 200))),
    ]
    for n in range(4):
        call = ToolCall("read_file", {"file_path": f"/f{n}"}, id=f"own_{n}")
        messages += [
            AssistantMessage((call,)),
            ToolResultMessage((ToolResult.of(call, "y" * 900),)),
        ]
    view, _ = masker.view(messages)
    shown = view[2]
    assert isinstance(shown, ToolResultMessage)
    assert shown.results[0].text == OUTPUT, (
        f"run_tests' output (not re-runnable) was sent as {shown.results[0].text!r}"
    )
