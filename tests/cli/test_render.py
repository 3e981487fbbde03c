"""The pieces of the command's output, and the local-context prompt section."""

from __future__ import annotations

import io
from pathlib import Path

from rich.console import Console

from tether import create_agent
from tether.capabilities.local_context import LocalContext
from tether.cli._render import RichOutput, agent_label, call_line
from tether.events import ModelDelta, RunFinished, StepFinished
from tether.messages import ToolCall, Usage
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
    from tether.cli._session import _agents_file

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
