"""`tether` as a conversation, driven through a pseudo-terminal with scripted models."""

from __future__ import annotations

import io
import json
import re
import sys
from pathlib import Path

import pexpect
import pytest

from .test_cli import environment, project, scripted, tether

__all__ = ["project"]  # the fixture, shared

# prompt_toolkit draws its "> " prompt and moves the cursor past it.
PROMPT = r"> ?(\x08)?(\x1b\[\d*C)?"
WRITE_A = {"tool": "write_file", "args": {"file_path": "/a.md", "content": "A\n"}}
WRITE_B = {"tool": "write_file", "args": {"file_path": "/b.md", "content": "B\n"}}
SLOW = {"tool": "task", "args": {"subagent_type": "general-purpose", "description": "Dig deep"}}
CONVERSATION = {
    "Dig deep": [[{"pause": 60}, "never said"]],
    "": [
        "Hello! What should I do?",
        [WRITE_A],
        "Wrote a.md.",
        [
            {
                "tool": "write_todos",
                "args": {"todos": [{"content": "write b.md", "status": "in_progress"}]},
            },
            WRITE_B,
        ],
        "Wrote b.md without asking.",
        [SLOW],
        "Back after the stop.",
        "You asked me to dig deep.",
    ],
}


def terminal(tmp_path: Path, **extra: str) -> dict[str, str]:
    """The environment of a terminal session: the user's own directories (history,
    trust) inside the test's, and no API key."""
    return environment(
        XDG_STATE_HOME=str(tmp_path / "state"),
        XDG_CONFIG_HOME=str(tmp_path / "config"),
        PROMPT_TOOLKIT_NO_CPR="1",
        TERM="xterm",
        **extra,
    )


@pytest.fixture
def home(tmp_path: Path) -> dict[str, str]:
    return terminal(tmp_path, NO_COLOR="1")  # the lines read as plain text


def session(
    project: Path, env: dict[str, str], *args: str, size: tuple[int, int] = (50, 160)
) -> pexpect.spawn:
    """`tether ARGS` in `project` on a terminal of `size` (rows, columns)."""
    return pexpect.spawn(
        sys.executable,
        ["-m", "tether.cli", *args],
        cwd=str(project),
        env=env,
        encoding="utf-8",
        timeout=60,
        dimensions=size,
    )


def say(child: pexpect.spawn, line: str) -> None:
    child.expect(PROMPT)
    child.sendline(line)


def test_a_conversation_with_approvals_a_stop_and_slash_commands(
    project: Path, home: dict[str, str]
) -> None:
    model = scripted(project, "talk.json", CONVERSATION)
    child = session(project, home, "--model", model, "--no-sandbox")
    child.expect_exact("mode ask · new thread thread_")
    say(child, "hi")
    child.expect_exact("Hello! What should I do?")
    child.expect_exact("● completed")

    say(child, "write a.md")
    child.expect_exact("Approval 1 of 1: write_file")
    child.expect_exact("+A")
    child.expect_exact("al[w]ays allow")
    child.sendline("w")
    child.expect_exact("Allowed every write_file call for the rest of this session")
    child.expect_exact("✓ write_file /a.md")
    child.expect_exact("Wrote a.md.")

    say(child, "and b.md")  # allowed always: no question this time
    child.expect_exact("✓ write_file /b.md")
    index = child.expect_exact(["Approval", "Wrote b.md without asking."])
    assert index == 1, "an always-allowed call was asked about again"

    say(child, "/todos")
    child.expect_exact("▶ write b.md")
    say(child, "/allowed")
    child.expect_exact("every write_file call")

    say(child, "dig")  # the subagent's model takes a minute: stop it midway
    child.expect_exact("running task general-purpose: Dig deep")
    child.sendintr()
    child.expect_exact("Stopped.")
    say(child, "/cost")
    child.expect(r"thread thread_\w+: 6 model calls")

    say(child, "go on")  # the stopped turn is set aside, the session goes on
    child.expect_exact("Back after the stop.")
    say(child, "/bogus")
    child.expect_exact("No command /bogus; /help lists them.")
    say(child, "/exit")
    child.expect(pexpect.EOF)
    child.close()
    assert child.exitstatus == 0
    assert (project / "a.md").read_text() == "A\n"
    assert (project / "b.md").read_text() == "B\n"

    # A new process: `-c` reopens the same thread, on the model it ran with.
    again = session(project, home, "-c", "--no-sandbox")
    again.expect_exact(model)
    again.expect_exact("you: go on")
    again.expect_exact("agent: Back after the stop.")
    say(again, "what did I ask?")
    again.expect_exact("You asked me to dig deep.")
    again.expect(PROMPT)
    again.sendcontrol("d")
    again.expect(pexpect.EOF)
    again.close()
    assert again.exitstatus == 0
    rows = tether(project, "threads", "--json").stdout.splitlines()
    assert len(rows) == 1
    shown = tether(project, "show", json.loads(rows[0])["thread_id"]).stdout
    assert "✗ task general-purpose: Dig deep — Abandoned" in shown, shown


def test_esc_stops_a_turn_and_ctrl_c_twice_leaves(project: Path, home: dict[str, str]) -> None:
    model = scripted(project, "slow.json", {"Dig deep": [[{"pause": 60}, "x"]], "": [[SLOW]]})
    child = session(project, home, "chat", "--model", model, "--no-sandbox")
    child.logfile_read = seen = io.StringIO()
    say(child, "dig")
    child.expect_exact("running task general-purpose: Dig deep")
    child.send("\x1b")
    child.expect_exact("Stopped.")
    child.expect(PROMPT)
    child.sendintr()
    child.expect_exact("Ctrl-C again")
    child.sendintr()
    child.expect(pexpect.EOF)
    child.close()
    assert child.exitstatus == 0, seen.getvalue()[-3000:]


def test_a_plan_mode_session_writes_nothing_and_the_mode_can_be_switched(
    project: Path, home: dict[str, str]
) -> None:
    script = [[WRITE_A], "Here is the plan.", [WRITE_A], "Done."]
    model = scripted(project, "plan.json", script)
    child = session(project, home, "--mode", "plan", "--model", model, "--no-sandbox")
    child.expect_exact("mode plan")
    say(child, "plan it")
    child.expect_exact("✗ write_file /a.md")
    child.expect_exact("Here is the plan.")
    say(child, "/mode accept-edits")
    child.expect_exact("mode: accept-edits — file writes run without asking")
    say(child, "do it")
    child.expect_exact("✓ write_file /a.md")
    child.expect_exact("Done.")
    say(child, "/exit")
    child.expect(pexpect.EOF)
    assert (project / "a.md").read_text() == "A\n"


def test_a_piped_conversation_reads_one_message_per_line(project: Path) -> None:
    model = scripted(project, "pipe.json", ["One.", "Two."])
    done = tether(project, "--model", model, "--no-sandbox", stdin="first\n\n/cost\nsecond\n")
    assert done.returncode == 0, done.stderr
    assert "One." in done.stdout
    assert "Two." in done.stdout
    assert "1 model call ·" in done.stdout  # /cost, between the two messages


def test_continue_without_a_thread_says_so(project: Path) -> None:
    done = tether(project, "-c")
    assert done.returncode == 2
    assert "no thread to continue yet" in done.stderr


def test_compact_summarizes_the_thread_in_a_session(project: Path) -> None:
    model = scripted(project, "compact.json", ["One.", "Two."])  # the summary is "One." too
    done = tether(
        project, "--model", model, "--no-sandbox", stdin="first\n/compact\nsecond\n/compact\n"
    )
    assert done.returncode == 0, done.stderr
    assert "nothing to compact: only the latest exchange is left" in done.stdout
    assert "compacted (summary): " in done.stdout
    assert "the full history is in /conversation_history/thread_" in done.stdout
    saved = list((project / ".tether" / "conversation_history").glob("thread_*/1.md"))
    assert len(saved) == 1
    assert "first" in saved[0].read_text()


def test_a_model_that_cannot_be_used_leaves_the_session_as_it_was(project: Path) -> None:
    model = scripted(project, "keep.json", ["Still here."])
    typed = "/model anthropic:claude-sonnet-4-5\n/model nonsense\n/model\nhello\n"
    done = tether(project, "--model", model, "--no-sandbox", stdin=typed)
    assert done.returncode == 0, done.stderr
    assert "ANTHROPIC_API_KEY" in done.stdout  # what is missing, said in one line
    assert "cannot tell the provider of model 'nonsense'" in done.stdout
    assert f"model: {model}" in done.stdout
    assert "Still here." in done.stdout


def test_a_session_keeps_its_mcp_servers_from_turn_to_turn(project: Path) -> None:
    server = Path(__file__).parents[1] / "mcp_servers" / "demo.py"
    (project / "tether.toml").write_text(
        f"""
[[mcp_servers]]
name = "demo"
command = {json.dumps(sys.executable)}
args = [{json.dumps(str(server))}]
"""
    )
    pid = [{"tool": "demo_pid", "args": {}}]
    model = scripted(project, "pids.json", [pid, "One.", pid, "Two."])
    done = tether(project, "--trust", "--model", model, "--no-sandbox", stdin="one\ntwo\n")
    assert done.returncode == 0, done.stderr
    thread = re.search(r"new thread (\S+)", done.stdout)
    assert thread, done.stdout
    shown = tether(project, "show", "--trust", "--json", thread[1])
    results = [
        r["content"][0]["text"]
        for m in json.loads(shown.stdout)
        if m["kind"] == "tool_results"
        for r in m["results"]
    ]
    assert len(results) == 2
    assert results[0] == results[1]  # the same server process answered both turns
