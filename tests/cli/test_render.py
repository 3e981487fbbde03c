"""The pieces of the command's output, and the local-context prompt section."""

from __future__ import annotations

import io
from pathlib import Path

from rich.console import Console

from tether import create_agent
from tether.approval import ApprovalRequest, Respond
from tether.capabilities.local_context import LocalContext
from tether.cli._approve import ask
from tether.cli._render import RichOutput, agent_label, call_line
from tether.events import ApprovalRequested, ModelDelta, RunFinished, StepFinished, ToolCallFinished
from tether.messages import ToolCall, ToolResult, Usage
from tether.models import ScriptedModel


def test_a_call_is_one_short_line_with_its_main_argument() -> None:
    assert (
        call_line(ToolCall("read_file", {"file_path": "/a.py", "offset": 3})) == "read_file /a.py"
    )
    assert call_line(ToolCall("execute", {"command": "ls\n  -la"})) == "execute ls -la"
    task = ToolCall("task", {"subagent_type": "researcher", "description": "find x"})
    assert call_line(task) == "task researcher: find x"
    assert call_line(ToolCall("write_todos", {"todos": [{}, {}]})) == "write_todos 2 items"
    assert call_line(ToolCall("add", {"a": 1})) == 'add {"a": 1}'
    assert call_line(ToolCall("add", "{cut")) == "add (arguments cut off)"
    assert len(call_line(ToolCall("grep", {"pattern": "x" * 500}))) == len("grep ") + 80
    assert agent_label(("main",)) == ""
    assert agent_label(("main", "task:researcher#2", "task:general-purpose#1")) == (
        "researcher#2/general-purpose#1"
    )


def finished(output: str) -> RunFinished:
    result = create_agent(ScriptedModel([output]), checkpointer=None).run("go")
    return RunFinished(("main",), result)


def test_an_answer_is_printed_once_whether_or_not_it_streamed() -> None:
    buffer = io.StringIO()
    printed = RichOutput(Console(file=buffer, width=100))
    printed.event(finished("Not streamed."))  # a model that streamed only tool JSON
    assert buffer.getvalue().count("Not streamed.") == 1

    buffer = io.StringIO()
    streamed = RichOutput(Console(file=buffer, width=100))
    streamed.event(ModelDelta(("main",), "text", "Streamed "))
    streamed.event(ModelDelta(("main",), "text", "answer."))
    streamed.event(StepFinished(("main",), 1, Usage(input_tokens=5), 0.0))
    streamed.event(finished("Streamed answer."))
    assert buffer.getvalue().count("Streamed answer.") == 1
    assert "● completed" in buffer.getvalue()


def test_local_context_names_the_directory_branch_and_top_level(tmp_path: Path) -> None:
    (tmp_path / ".git").mkdir()
    (tmp_path / ".git" / "HEAD").write_text("ref: refs/heads/feature/x\n")
    (tmp_path / "src").mkdir()
    (tmp_path / "README.md").write_text("hi")
    section = LocalContext(tmp_path).prompt()
    assert str(tmp_path) in section
    assert "on `feature/x`" in section
    assert "`README.md`, `src/`" in section
    assert ".git" not in section.split("Top level")[1]
    agent = create_agent(ScriptedModel(["x"]), capabilities=[LocalContext(tmp_path)])
    prompt = agent._plan.system_prompt
    assert prompt.index("## Local context") > prompt.index("## Files")  # its slot is last


def test_local_context_does_not_read_through_a_planted_head(tmp_path: Path) -> None:
    """A repository shipped with .git/HEAD -> a host file must not put it in the prompt."""
    secret = tmp_path / "secret"
    secret.write_text("root:$6$hash-of-a-password\n")
    (tmp_path / "repo" / ".git").mkdir(parents=True)
    (tmp_path / "repo" / ".git" / "HEAD").symlink_to(secret)
    section = LocalContext(tmp_path / "repo").prompt()
    assert "root:" not in section
    assert "git repository" not in section


def test_a_symlinked_agents_file_is_remembered_by_its_target(tmp_path: Path) -> None:
    from tether.cli._agent import _agents_file

    (tmp_path / "CLAUDE.md").write_text("# Rules\n")
    assert _agents_file(tmp_path) == []
    (tmp_path / "AGENTS.md").symlink_to("CLAUDE.md")
    assert _agents_file(tmp_path) == ["/CLAUDE.md"]
    (tmp_path / "AGENTS.md").unlink()
    (tmp_path / "AGENTS.md").symlink_to("/etc/hostname")  # leads out: not memory
    assert _agents_file(tmp_path) == []
    (tmp_path / "AGENTS.md").unlink()
    (tmp_path / "AGENTS.md").write_text("# Mine\n")
    assert _agents_file(tmp_path) == ["/AGENTS.md"]


def printed(*events: object) -> str:
    buffer = io.StringIO()
    output = RichOutput(Console(file=buffer, width=120))
    for event in events:
        output.event(event)  # type: ignore[arg-type]
    return buffer.getvalue()


def finished_call(call: ToolCall, text: str, **given: object) -> ToolCallFinished:
    error = bool(given.pop("is_error", False))
    return ToolCallFinished(("main",), call, ToolResult.of(call, text, is_error=error), **given)  # type: ignore[arg-type]


def test_a_failed_command_is_a_red_cross_with_its_last_lines() -> None:
    make = ToolCall("execute", {"command": "make"}, id="c1")
    lines = "\n".join(f"line {n}" for n in range(1, 11))
    out = printed(finished_call(make, f"{lines}\n[exit code 2]"))
    assert "✗ execute make — exit code 2" in out
    assert "… 6 more lines (tether show THREAD)" in out
    assert "│ line 7" in out
    assert "│ line 10" in out
    assert "line 6\n" not in out
    assert "✓" not in out
    fine = printed(finished_call(make, "ok\n[exit code 0]"))
    assert "✓ execute make" in fine
    assert "│ ok" in fine


def test_decided_calls_say_how_and_an_unasked_edit_shows_its_change() -> None:
    write = ToolCall("write_file", {"file_path": "/a.md", "content": "one\ntwo\n"}, id="w1")
    rejected = "Rejected by the user: not now. Do not retry this call as it was."
    out = printed(finished_call(write, rejected, is_error=True, decided="rejected"))
    assert "✗ write_file /a.md — Rejected by the user: not now." in out
    answered = printed(finished_call(write, "use b.md instead", decided="answered"))
    assert "↩ write_file /a.md — answered: use b.md instead" in answered
    unasked = printed(finished_call(write, "Wrote /a.md"))
    assert "✓ write_file /a.md\n    + one\n    + two\n" in unasked
    edit = ToolCall(
        "edit_file", {"file_path": "/a.md", "old_string": "one", "new_string": "1"}, id="e1"
    )
    asked = ApprovalRequested(("main",), (ApprovalRequest("e1", "edit_file", {}, ("approve",)),))
    assert "- one\n    + 1" in printed(finished_call(edit, "Edited"))
    assert "- one" not in printed(asked, finished_call(edit, "Edited"))  # the question showed it


def test_a_call_that_cannot_succeed_is_not_asked_about(tmp_path: Path) -> None:
    (tmp_path / "a.md").write_text("one\none\n")
    requests = [
        ApprovalRequest("w", "write_file", {"file_path": "/a.md", "content": "x"}, ("approve",)),
        ApprovalRequest(
            "e1", "edit_file", {"file_path": "/a.md", "old_string": "two", "new_string": "2"}, ()
        ),
        ApprovalRequest(
            "e2", "edit_file", {"file_path": "/a.md", "old_string": "one", "new_string": "1"}, ()
        ),
        ApprovalRequest("e3", "edit_file", {"file_path": "/b.md", "old_string": "x"}, ()),
    ]
    buffer = io.StringIO()
    decisions = ask(requests, Console(file=buffer, width=200), tmp_path)  # nothing is read
    assert all(isinstance(d, Respond) for d in decisions)
    said = [d.message for d in decisions]  # type: ignore[attr-defined]
    assert said[0].startswith("Not run: /a.md already exists and write_file only creates")
    assert "old_string was not found in /a.md" in said[1]
    assert "old_string occurs 2 times in /a.md" in said[2]
    assert "/b.md does not exist" in said[3]
    assert buffer.getvalue().count("Not asked: ") == 4
    assert "+++" not in buffer.getvalue()  # no diff of a change that will not happen


def test_show_gives_a_commands_whole_output_and_its_exit_code() -> None:
    from tether.cli._threads import _result_lines

    make = ToolCall("execute", {"command": "make"}, id="c1")
    lines = "\n".join(f"line {n}" for n in range(1, 11))
    shown = _result_lines("execute make", ToolResult.of(make, f"{lines}\n[exit code 2]"))
    assert shown[0] == "  ✗ execute make — exit code 2"
    assert shown[1:] == [*(f"    │ line {n}" for n in range(1, 11)), "    │ [exit code 2]"]
    read = ToolCall("read_file", {"file_path": "/a"}, id="r1")
    assert _result_lines("read_file /a", ToolResult.of(read, "x\n[exit code 1]")) == [
        "  ✓ read_file /a"  # only a command has an exit code
    ]
