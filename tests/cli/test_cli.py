"""The `tether` command, driven end to end in subprocesses with a scripted model."""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pexpect
import pytest

NOTES = {"tool": "write_file", "args": {"file_path": "/NOTES.md", "content": "# Notes\n"}}
SCRIPT = {
    "Summarize the README.": ["The README is one heading."],
    "": [
        ["Let me look around.", {"tool": "ls", "args": {"path": "/"}}],
        [
            {
                "tool": "write_todos",
                "args": {
                    "todos": [
                        {"content": "read the README", "status": "completed"},
                        {"content": "write NOTES.md", "status": "in_progress"},
                    ]
                },
            }
        ],
        [
            {
                "tool": "task",
                "args": {
                    "subagent_type": "general-purpose",
                    "description": "Summarize the README.",
                },
            },
            {"tool": "read_file", "args": {"file_path": "/missing.md"}},
        ],
        [NOTES],
        "I wrote NOTES.md.",
    ],
}


def environment(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.endswith("_API_KEY")}
    env.pop("TETHER_MODEL", None)
    return {**env, "COLUMNS": "200", **extra}


def tether(
    project: Path, *args: str, env: dict[str, str] | None = None, stdin: str | None = None
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "tether.cli", *args],
        cwd=project,
        env=env or environment(),
        input=stdin,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


@pytest.fixture
def project(tmp_path: Path) -> Path:
    root = tmp_path / "project"
    root.mkdir()
    (root / "README.md").write_text("# Demo\n")
    (tmp_path / "script.json").write_text(json.dumps(SCRIPT))
    return root


def scripted(project: Path, name: str, turns: object) -> str:
    """The model string of a script of `turns`, written beside the project."""
    (project.parent / name).write_text(json.dumps(turns))
    return model(project, name)


def model(project: Path, name: str = "script.json") -> str:
    return f"test:{project.parent / name}"


def test_a_run_streams_its_work_and_stops_for_approval_until_resumed(project: Path) -> None:
    done = tether(project, "run", "--model", model(project), "--no-sandbox", "Write notes.")
    assert done.returncode == 3, done.stderr
    out = done.stdout
    assert "Let me look around." in out
    assert "✓ ls /" in out
    assert "▶ write NOTES.md" in out
    assert "✔ read the README" in out
    assert "✓ task general-purpose: Summarize the README." in out
    assert "✗ read_file /missing.md — " in out
    assert "Waiting for approval of 1 call(s):\n  write_file /NOTES.md" in out
    assert not (project / "NOTES.md").exists()
    thread = out.split("tether resume ")[1].split()[0]

    listed = tether(project, "threads")
    assert thread in listed.stdout
    assert "waiting for approval" in listed.stdout
    assert "Write notes." in listed.stdout
    pending = tether(project, "show", thread).stdout
    assert f"# {thread} · waiting for approval\nmodel: {model(project)}\nstarted: " in pending
    assert f"waiting for approval: write_file /NOTES.md (tether resume {thread})" in pending

    waiting = tether(project, "resume", thread, "--model", model(project), "--no-sandbox")
    assert waiting.returncode == 3  # no terminal and no decision: it says how, and waits
    assert "--approve" in waiting.stdout

    resumed = tether(project, "resume", thread, "--approve", "--model", model(project))
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    assert "✓ write_file /NOTES.md" in resumed.stdout
    assert "I wrote NOTES.md." in resumed.stdout
    assert "● completed · 5 steps" in resumed.stdout
    assert (project / "NOTES.md").read_text() == "# Notes\n"

    shown = tether(project, "show", thread)
    assert "you: Write notes." in shown.stdout
    assert "agent: I wrote NOTES.md." in shown.stdout
    assert "  ✓ write_file /NOTES.md" in shown.stdout
    assert "spent: 6 model calls · " in shown.stdout  # the subagent's call included
    history = json.loads(tether(project, "show", thread, "--json").stdout)
    assert history[0]["content"][0]["text"] == "Write notes."


def test_json_output_is_one_event_per_line(project: Path) -> None:
    done = tether(
        project, "run", "--json", "--safe", "/NOTES.md", "--model", model(project), "Write notes."
    )
    assert done.returncode == 0, done.stderr
    events = [json.loads(line) for line in done.stdout.splitlines()]
    kinds = [e["kind"] for e in events]
    assert kinds[0] == "run_started"
    assert {"model_delta", "step_finished", "tool_call_finished", "todos_updated"} <= set(kinds)
    subagent = [e for e in events if e["path"] != ["main"]]
    assert subagent
    assert subagent[0]["path"] == ["main", "task:general-purpose#1"]
    steps = [e["steps"] for e in events if e["kind"] == "step_finished"]
    assert steps == list(range(1, 7))  # totals of the tree: the subagent's step counts too
    last = events[-1]
    assert last["kind"] == "run_finished"
    assert last["stop_reason"] == "completed"
    assert last["output"] == "I wrote NOTES.md."
    assert last["thread_id"].startswith("thread_")
    assert "messages" not in last
    assert (project / "NOTES.md").exists()  # inside the safe path: no approval asked


def test_quiet_prints_only_the_answer(project: Path) -> None:
    done = tether(
        project, "run", "-q", "--safe", "/*.md", "--model", model(project), "Write notes."
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout == "I wrote NOTES.md.\n"


def test_a_budget_stop_says_how_to_go_on(project: Path) -> None:
    done = tether(project, "run", "--max-steps", "2", "--model", model(project), "Write notes.")
    assert done.returncode == 4
    assert "● budget" in done.stdout
    assert "Stopped: a limit (--max-steps or --max-cost) was reached." in done.stdout


def test_settings_come_from_the_file_then_the_environment_then_flags(project: Path) -> None:
    (project / "tether.toml").write_text(
        'model = "test:from-file.json"\nmax_steps = 7\nmax_cost = 0.5\n'
        "[interrupt_on]\nwrite_file = false\n"
        '[[permissions]]\noperations = ["read"]\npaths = ["/secret/**"]\nmode = "deny"\n'
    )
    env = environment(TETHER_MAX_COST="1.5", TETHER_MODEL="test:from-env.json")
    done = tether(project, "config", "--json", "--max-steps", "9", env=env)
    assert done.returncode == 0, done.stderr
    shown = json.loads(done.stdout)
    settings, sources = shown["settings"], shown["sources"]
    assert (settings["max_steps"], sources["max_steps"]) == (9, "flag --max-steps")
    assert (settings["max_cost"], sources["max_cost"]) == (1.5, "env TETHER_MAX_COST")
    assert (settings["model"], sources["model"]) == ("test:from-env.json", "env TETHER_MODEL")
    assert settings["interrupt_on"] == {"execute": True, "write_file": False, "edit_file": True}
    assert sources["permissions"] == "tether.toml"
    assert sources["timeout"] == "default"
    text = tether(project, "config", env=env).stdout
    assert "max_cost = 1.5" in text
    assert "# env TETHER_MAX_COST" in text


def test_pyproject_tool_table_is_read_and_no_key_means_the_offline_model(project: Path) -> None:
    (project / "pyproject.toml").write_text('[project]\nname = "x"\n[tool.tether]\nmax_steps = 3\n')
    shown = json.loads(tether(project, "config", "--json").stdout)
    assert shown["file"].endswith("pyproject.toml")
    assert shown["sources"]["max_steps"] == "pyproject.toml [tool.tether]"
    assert shown["settings"]["model"] == "local:smollm2"
    assert "no API key" in shown["sources"]["model"]
    keyed = tether(project, "config", "--json", env=environment(OPENAI_API_KEY="sk-test"))
    assert json.loads(keyed.stdout)["settings"]["model"].startswith("openai:")


def test_bad_settings_and_missing_keys_are_errors_a_person_can_act_on(project: Path) -> None:
    (project / "tether.toml").write_text('max_cost = "lots"\nmax_stpes = 3\n')
    done = tether(project, "config")
    assert done.returncode == 2
    assert "max_cost (tether.toml): Input should be a valid number" in done.stderr
    assert "unknown setting 'max_stpes' (tether.toml)" in done.stderr
    (project / "tether.toml").unlink()

    keyless = tether(project, "run", "--model", "anthropic:claude-sonnet-4-5", "hi")
    assert keyless.returncode == 2
    assert "ANTHROPIC_API_KEY" in keyless.stderr

    unknown = tether(project, "show", "thread_nope")
    assert unknown.returncode == 2
    assert "there is no thread thread_nope" in unknown.stderr

    (project / "tether.toml").write_text("[interrupt_on]\nwirte_file = true\n")
    typo = tether(project, "run", "--model", model(project), "go")
    assert typo.returncode == 2
    assert "interrupt_on names ['wirte_file']" in typo.stderr


def test_a_thread_goes_on_with_the_next_task(project: Path) -> None:
    script = [[{"tool": "ls", "args": {"path": "/"}}], "first", "second"]
    two = scripted(project, "two.json", script)
    first = tether(project, "run", "--thread", "t1", "-q", "--model", two, "a")
    assert first.stdout == "first\n"
    again = tether(project, "run", "--thread", "t1", "-q", "--model", two, "b")
    assert again.stdout == "second\n"
    assert tether(project, "delete", "t1").stdout == "deleted t1\n"
    assert "no threads yet" in tether(project, "threads").stdout


def spawn(project: Path, *args: str) -> pexpect.spawn:
    return pexpect.spawn(
        sys.executable,
        ["-m", "tether.cli", *args],
        cwd=str(project),
        env=environment(),
        encoding="utf-8",
        timeout=60,
        dimensions=(50, 160),
    )


def test_an_approval_session_in_a_terminal_approves_one_call_and_rejects_another(
    project: Path,
) -> None:
    (project / "b.md").write_text("old\n")
    script = [
        [
            {"tool": "write_file", "args": {"file_path": "/a.md", "content": "A\n"}},
            {
                "tool": "edit_file",
                "args": {"file_path": "/b.md", "old_string": "old", "new_string": "new"},
            },
        ],
        "Done with what I was allowed.",
    ]
    approve = scripted(project, "approve.json", script)
    child = spawn(project, "run", "--no-sandbox", "--model", approve, "go")
    child.expect_exact("Approval 1 of 2: write_file")
    child.expect_exact("+A")
    child.expect_exact("re[s]pond? ")
    child.sendline("a")
    child.expect_exact("Approval 2 of 2: edit_file")
    child.expect_exact("-old")
    child.expect_exact("+new")
    child.expect_exact("re[s]pond? ")
    child.sendline("x")
    child.expect_exact("Answer one of: approve, edit, reject, respond")
    child.sendline("r")
    child.expect_exact("Why")
    child.sendline("keep the old text")
    child.expect_exact("Done with what I was allowed.")
    child.expect(pexpect.EOF)
    child.close()
    assert child.exitstatus == 0
    assert (project / "a.md").read_text() == "A\n"
    assert (project / "b.md").read_text() == "old\n"
    shown = tether(project, "show", "--json", _only_thread(project))
    (rejection,) = [
        r
        for m in json.loads(shown.stdout)
        if m["kind"] == "tool_results"
        for r in m["results"]
        if r["is_error"]
    ]
    assert "keep the old text" in rejection["content"][0]["text"]


def _only_thread(project: Path) -> str:
    rows = tether(project, "threads", "--json").stdout.splitlines()
    assert len(rows) == 1
    thread: Any = json.loads(rows[0])["thread_id"]
    return str(thread)


@pytest.mark.skipif(shutil.which("bwrap") is None, reason="the sandbox needs bubblewrap")
def test_ctrl_c_stops_cleanly_and_the_thread_resumes(project: Path) -> None:
    script = [
        [{"tool": "execute", "args": {"command": "sleep 30"}}],
        "Resumed after the stop.",
    ]
    slow = scripted(project, "slow.json", script)
    child = spawn(project, "run", "--sandbox", "--model", slow, "wait")
    child.expect_exact("Approval 1 of 1: execute")
    child.expect_exact("re[s]pond? ")
    child.sendline("a")
    child.expect_exact("running execute sleep 30")
    child.kill(signal.SIGINT)
    child.expect_exact("Stopped. The thread is saved; continue it with: tether resume ")
    child.expect(pexpect.EOF)
    child.close()
    assert child.exitstatus == 130
    thread = _only_thread(project)
    assert "stopped (resumable)" in tether(project, "threads").stdout
    resumed = tether(project, "resume", thread, "--sandbox", "--model", slow)
    assert resumed.returncode == 0, resumed.stdout
    assert "Resumed after the stop." in resumed.stdout
    shown = tether(project, "show", thread).stdout
    assert "  ✗ execute sleep 30 — Interrupted" in shown, shown


def test_the_cli_guide_settings_example_is_valid(tmp_path: Path) -> None:
    guide = (Path(__file__).resolve().parents[2] / "docs/guides/cli.md").read_text()
    example = guide.split("```toml\n# tether.toml\n")[1].split("```")[0]
    (tmp_path / "tether.toml").write_text(example)
    (tmp_path / "skills").mkdir()
    shown = tether(tmp_path, "config", "--json")
    assert shown.returncode == 0, shown.stderr
    settings = json.loads(shown.stdout)["settings"]
    assert settings["interrupt_on"] == {"execute": True, "write_file": True, "edit_file": True}
    assert settings["permissions"][0]["paths"] == ["/**/.env", "/secrets/**"]
    assert settings["commands"]["allow"] == ["git status", "git diff", "pytest"]
    assert [s["name"] for s in settings["subagents"]] == ["reviewer"]
    assert settings["prices"]["openai-chat:qwen3"]["output_per_mtok"] == 0.4


def test_decisions_from_a_file_must_fit_the_waiting_calls(project: Path) -> None:
    done = tether(project, "run", "--json", "--model", model(project), "Write notes.")
    assert done.returncode == 3
    finished = json.loads(done.stdout.splitlines()[-1])
    thread = finished["thread_id"]
    [waiting] = finished["interrupts"]
    assert waiting["tool"] == "write_file"
    wrong = tether(project, "resume", thread, "--decisions", "-", stdin='[{"kind": "maybe"}]')
    assert wrong.returncode == 2
    assert 'a decision is {"kind": "approve"}' in wrong.stderr
    too_many = tether(project, "resume", thread, "--decisions", "-", stdin="[{}, {}]")
    assert too_many.returncode == 2
    edit = {"kind": "edit", "args": {"file_path": "/N2.md", "content": "x"}}
    edited = json.dumps({waiting["call_id"]: edit})  # the call by tether's id
    done = tether(
        project, "resume", thread, "--decisions", "-", "--model", model(project), stdin=edited
    )
    assert done.returncode == 0, done.stderr
    assert (project / "N2.md").read_text() == "x"


def test_the_project_directory_can_follow_the_command(project: Path) -> None:
    done = tether(project, "run", "--model", model(project), "--no-sandbox", "Write notes.")
    assert done.returncode == 3, done.stderr
    elsewhere = project.parent
    before = tether(elsewhere, "-C", str(project), "threads", "--json")
    after = tether(elsewhere, "threads", "--json", "-C", str(project))
    assert before.returncode == after.returncode == 0, after.stderr
    assert before.stdout == after.stdout
    assert len(after.stdout.splitlines()) == 1


def test_a_reader_that_leaves_early_gets_no_traceback(project: Path) -> None:
    read, write = os.pipe()
    os.close(read)  # like `tether config | head -0`: nobody reads what tether prints
    try:
        done = subprocess.run(
            [sys.executable, "-m", "tether.cli", "config"],
            cwd=project,
            env=environment(),
            stdout=write,
            stderr=subprocess.PIPE,
            text=True,
            timeout=120,
            check=False,
        )
    finally:
        os.close(write)
    assert done.returncode == 141
    assert done.stderr == ""


def test_looking_at_threads_creates_nothing(project: Path) -> None:
    assert tether(project, "threads").stdout.startswith("no threads yet")
    assert tether(project, "threads", "--json").stdout == ""
    assert tether(project, "show", "t1").returncode == 2
    assert tether(project, "delete", "t1").returncode == 2
    assert sorted(p.name for p in project.iterdir()) == ["README.md"]  # no .tether


def test_the_project_is_the_git_root_and_tether_keeps_to_itself(project: Path) -> None:
    (project / ".git").mkdir()
    below = project / "src" / "deep"
    below.mkdir(parents=True)
    script = scripted(project, "hello.json", ["hello"])
    done = tether(below, "run", "--model", script, "--no-sandbox", "Say hello.")
    assert done.returncode == 0, done.stderr
    assert not (below / ".tether").exists()
    assert (project / ".tether" / "runs.db").is_file()
    assert (project / ".tether" / ".gitignore").read_text().splitlines()[-1] == "*"
    listed = tether(project, "threads", "--json")
    assert len(listed.stdout.splitlines()) == 1


def test_the_root_search_stops_below_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from tether.cli._commands import project_root

    home = tmp_path / "home"
    (home / ".git").mkdir(parents=True)  # dotfiles kept in git
    work = home / "notes" / "today"
    work.mkdir(parents=True)
    monkeypatch.setenv("HOME", str(home))
    assert project_root(work) == work
    assert project_root(home) == home
    (home / "notes" / "tether.toml").write_text("")
    assert project_root(work) == home / "notes"


def test_a_warning_is_one_line(project: Path) -> None:
    script = scripted(project, "hello.json", ["hello"])
    done = tether(project, "run", "--model", script, "--no-sandbox", "--skills", "/nope", "Hi")
    assert done.returncode == 0, done.stderr
    warned = [line for line in done.stderr.splitlines() if "/nope" in line]
    assert warned == ["warning: no skills read from /nope: No such directory: /nope"]
    assert "SkillWarning" not in done.stderr


def test_a_thread_keeps_its_model_and_limits_unless_a_flag_says_otherwise(
    project: Path,
) -> None:
    notes = scripted(project, "notes.json", [[NOTES], "Wrote the notes."])
    waiting = tether(project, "run", "--model", notes, "--max-steps", "7", "--no-sandbox", "go")
    assert waiting.returncode == 3, waiting.stderr
    thread = _only_thread(project)
    # No --model: the thread's own, not the default (the offline model, here).
    resumed = tether(project, "resume", thread, "--approve", "--no-sandbox")
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    assert "Wrote the notes." in resumed.stdout
    other = scripted(project, "other.json", ["x", "x", "From the flag."])  # its third reply
    again = tether(project, "run", "--thread", thread, "-q", "--model", other, "more")
    assert again.stdout == "From the flag.\n"
    ended = tether(project, "resume", thread, "--no-sandbox")
    assert ended.returncode == 2
    assert ended.stderr == (
        f"error: thread {thread} has nothing to resume: its last run ended (completed); go on "
        f'with: tether chat {thread}, or tether run --thread {thread} "..."\n'
    )


def test_the_agents_own_files_go_under_dot_tether(project: Path) -> None:
    long_answer = "\n".join(f"finding {n}" for n in range(12_000))  # past the eviction limit
    report = [
        {
            "tool": "task",
            "args": {"subagent_type": "general-purpose", "description": "Report at length"},
        }
    ]
    big = scripted(project, "big.json", {"Report at length": [long_answer], "": [report, "Saved."]})
    done = tether(project, "run", "--no-sandbox", "--yes", "--model", big, "report")
    assert done.returncode == 0, done.stdout + done.stderr
    thread = _only_thread(project)
    # A script cannot know the file's name beforehand: like a real model, it takes the
    # path from the result, and reads it back in the thread's next run.
    history = json.loads(tether(project, "show", "--json", thread).stdout)
    [task] = [p for m in history if m["kind"] == "assistant" for p in m["parts"] if "id" in p]
    [result] = [r for m in history if m["kind"] == "tool_results" for r in m["results"]]
    assert result["call_id"] == task["id"]
    [path] = re.findall(r"saved to (/large_tool_results/\S+)\. ", result["content"][0]["text"])
    assert path == f"/large_tool_results/{task['id']}"  # the call's own id names the file
    read_back = [report, "Saved.", [{"tool": "read_file", "args": {"file_path": path}}]]
    again = scripted(
        project, "again.json", {"Report at length": [long_answer], "": [*read_back, "Read it."]}
    )
    done = tether(
        project,
        "run",
        "--thread",
        thread,
        "--no-sandbox",
        "--yes",
        "--model",
        again,
        "Now read it.",
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert f"✓ read_file {path}" in done.stdout
    saved = project / ".tether" / path.lstrip("/")
    assert saved.read_text().startswith("finding 0\nfinding 1\n")
    assert not (project / "large_tool_results").exists()  # never in the user's tree
    assert sorted(p.name for p in project.iterdir()) == [".tether", "README.md"]


def test_mcp_servers_subagents_and_prices_come_from_the_project_file(project: Path) -> None:
    server = Path(__file__).parents[1] / "mcp_servers" / "demo.py"
    (project / "tether.toml").write_text(
        f"""
system_prompt = "Answer in one line."

[prices."test:extend.json"]
input_per_mtok = 1000
output_per_mtok = 1000

[[mcp_servers]]
name = "demo"
command = {json.dumps(sys.executable)}
args = [{json.dumps(str(server))}]

[[subagents]]
name = "reader"
description = "Reads files and reports."
prompt = "You only read."
tools = ["read_file", "ls"]
"""
    )
    script = {
        "Count the files": ["Two files."],
        "": [
            [{"tool": "demo_add", "args": {"a": 2, "b": 3}}],
            [
                {
                    "tool": "task",
                    "args": {"subagent_type": "reader", "description": "Count the files"},
                }
            ],
            "Five, and two files.",
        ],
    }
    extend = scripted(project, "extend.json", script)
    refused = tether(project, "run", "--no-sandbox", "--model", extend, "go")
    assert refused.returncode == 2  # the project's servers and prices need the user's trust
    assert "starts or connects to the MCP servers demo" in refused.stderr
    assert "sets the prices that --max-cost counts with" in refused.stderr
    done = tether(project, "run", "--trust", "--no-sandbox", "--model", extend, "--json", "go")
    assert done.returncode == 0, done.stdout + done.stderr
    events = [json.loads(line) for line in done.stdout.splitlines()]
    results = {e["call"]["name"]: e["result"] for e in events if e["kind"] == "tool_call_finished"}
    assert results["demo_add"]["content"][0]["text"] == "5"
    assert results["task"]["content"][0]["text"] == "Two files."
    (end,) = [e for e in events if e["kind"] == "run_finished" and e["path"] == ["main"]]
    assert end["output"] == "Five, and two files."
    assert end["cost_usd"] > 1  # a thousand dollars per million tokens
    planning = tether(
        project, "run", "--trust", "--mode", "plan", "--model", extend, "--json", "go"
    )
    events = [json.loads(line) for line in planning.stdout.splitlines()]
    finished = [e for e in events if e["kind"] == "tool_call_finished"]
    (add,) = [e["result"] for e in finished if e["call"]["name"] == "demo_add"]
    assert add["is_error"]  # plan mode has no MCP tool: it could change anything


def test_warnings_speak_the_commands_language(project: Path) -> None:
    answer = scripted(project, "answer.json", ["Done."])
    done = tether(project, "run", "--max-cost", "1", "--model", answer, "--no-sandbox", "go")
    assert done.returncode == 0, done.stderr
    (line,) = done.stderr.splitlines()
    assert line.startswith("warning: --max-cost is set, but the price of test:answer.json")
    assert '[prices."test:answer.json"] input_per_mtok = ...' in line
    assert "create_agent" not in line


def test_a_subagents_edit_waits_for_approval_and_runs_once_resumed(project: Path) -> None:
    script = {
        "Write the notes.": [
            [{"tool": "write_file", "args": {"file_path": "/NOTES.md", "content": "# N\n"}}],
            "Wrote NOTES.md.",
        ],
        "": [
            [
                {
                    "tool": "task",
                    "args": {"subagent_type": "general-purpose", "description": "Write the notes."},
                }
            ],
            "The subagent wrote them.",
        ],
    }
    delegate = scripted(project, "delegate.json", script)
    done = tether(project, "run", "--model", delegate, "--no-sandbox", "Notes, please.")
    assert done.returncode == 3, done.stdout + done.stderr
    waiting = "  write_file /NOTES.md (by subagent general-purpose#1)"
    assert f"Waiting for approval of 1 call(s):\n{waiting}" in done.stdout
    assert not (project / "NOTES.md").exists()
    thread = done.stdout.split("tether resume ")[1].split()[0]
    resumed = tether(project, "resume", thread, "--approve", "--model", delegate, "--no-sandbox")
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    assert "The subagent wrote them." in resumed.stdout
    assert (project / "NOTES.md").read_text() == "# N\n"


CTRL_C_ON_A_WORKER = r"""
import asyncio, signal, threading, time
from tether.cli._render import QuietOutput
from tether.cli._session import consume

async def forever():
    await asyncio.Event().wait()  # a run with nothing to wake the loop (a long command)
    yield

def press_ctrl_c_on_this_thread():
    time.sleep(0.5)
    signal.pthread_kill(threading.get_ident(), signal.SIGINT)

threading.Thread(target=press_ctrl_c_on_this_thread, daemon=True).start()
try:
    asyncio.run(consume(forever(), QuietOutput(None)))
except BaseException as stopped:
    print("stopped by", type(stopped).__name__)
"""


def test_ctrl_c_stops_a_run_whichever_thread_the_signal_lands_on(tmp_path: Path) -> None:
    # The kernel hands a process's signal to any of its threads. asyncio.run's handler
    # runs only once the event loop wakes, and a long command kept it asleep: the run
    # went on to its end as if Ctrl-C had not been pressed.
    script = tmp_path / "press.py"
    script.write_text(CTRL_C_ON_A_WORKER)
    done = subprocess.run(
        [sys.executable, str(script)], capture_output=True, text=True, timeout=60, check=False
    )  # before, the run slept on: this timed out
    assert done.stdout == "stopped by Interrupted\n", done.stderr
