"""THREATS.md, "Names that alias": a rule on one spelling holds for every spelling. The
docs say a read goes stale "when ... a write_file or edit_file of the file a read_file
showed". The masker compares the raw argument strings, so `src/app.py`, `/src/app.py`
and `/src//app.py` (one file to the tools, which `clean` every path) are three files to
it: after the edit, the pre-edit text keeps being sent whole as if current."""

from __future__ import annotations

from tether import Masking
from tether.capabilities.masking import ResultMasker
from tether.messages import (
    AssistantMessage,
    Message,
    ToolCall,
    ToolResult,
    ToolResultMessage,
    UserMessage,
)

PATHS = {"read_file": "file_path", "edit_file": "file_path", "write_file": "file_path"}


def test_an_edit_supersedes_a_read_of_the_same_file_under_another_spelling() -> None:
    masker = ResultMasker(
        Masking(keep_turns=50, min_chars=10, batch_tokens=1), frozenset({"read_file"}), PATHS
    )
    messages: list[Message] = [UserMessage.of("go")]
    for n, (tool, args, text) in enumerate(
        [
            ("read_file", {"file_path": "src/app.py"}, "x = 1\n" * 100),
            (
                "edit_file",
                {
                    "file_path": "/src/app.py",
                    "old_string": "x = 1",
                    "new_string": "x = 2",
                    "replace_all": True,
                },
                "Replaced 100 occurrence(s) in /src/app.py.",
            ),
            ("read_file", {"file_path": "/src/other.py"}, "y = 1\n" * 100),
        ]
    ):
        call = ToolCall(tool, args, id=f"c{n}")
        messages += [AssistantMessage((call,)), ToolResultMessage((ToolResult.of(call, text),))]
    view, _ = masker.view(messages)
    first = view[2]
    assert isinstance(first, ToolResultMessage)
    assert first.results[0].text != "x = 1\n" * 100, (
        "the read of src/app.py is still sent whole after /src/app.py was edited"
    )
