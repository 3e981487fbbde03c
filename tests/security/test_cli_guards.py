"""The `tether` command's guards, through the real command on repositories built to
attack it: links into .git and .tether, a planted .tether, a project file that switches
approvals off, misleading file names, and the sandbox as root."""

from __future__ import annotations

import json
import os
import shutil
import sys
from pathlib import Path

import pexpect
import pytest

from tests.cli.test_cli import environment, scripted, tether

FSMONITOR = "[core]\n\tfsmonitor = touch /tmp/pwned\n"


@pytest.fixture
def repository(tmp_path: Path) -> Path:
    """A cloned repository: a .git directory, and a `notes` link into it."""
    root = tmp_path / "repo"
    (root / ".git").mkdir(parents=True)
    (root / ".git" / "config").write_text("[core]\n")
    (root / ".git" / "HEAD").write_text("ref: refs/heads/main\n")
    (root / "README.md").write_text("# Repo\n")
    (root / "notes").symlink_to(".git")
    return root


def _env(tmp_path: Path) -> dict[str, str]:
    return environment(XDG_CONFIG_HOME=str(tmp_path / "config"))


def _results(stdout: str) -> list[dict[str, object]]:
    """The finished calls, in the order the model made them: a script numbers its calls
    in the ids it gives them, which tether keeps as the calls' `provider_id`."""
    events = [json.loads(line) for line in stdout.splitlines()]
    finished = [e for e in events if e["kind"] == "tool_call_finished"]
    assert all(e["result"]["call_id"] == e["call"]["id"] for e in finished)
    return sorted(finished, key=lambda e: str(e["call"]["provider_id"]))  # type: ignore[index]


def test_safe_globs_and_the_git_guard_hold_through_links(repository: Path, tmp_path: Path) -> None:
    os.link(repository / ".git" / "config", repository / "config-copy")
    model = scripted(
        repository,
        "attack.json",
        [
            [
                {"tool": "write_file", "args": {"file_path": "/notes/hooks/x", "content": "x"}},
                {
                    "tool": "edit_file",
                    "args": {
                        "file_path": "/notes/config",
                        "old_string": "[core]\n",
                        "new_string": FSMONITOR,
                    },
                },
                {
                    "tool": "edit_file",
                    "args": {
                        "file_path": "/config-copy",
                        "old_string": "[core]\n",
                        "new_string": FSMONITOR,
                    },
                },
                {"tool": "write_file", "args": {"file_path": "/.git/info", "content": "x"}},
            ],
            "done",
        ],
    )
    done = tether(
        repository,
        "run",
        "--json",
        "--no-sandbox",
        "--safe",
        "/notes/**",
        "--safe",
        "/config-copy",
        "--safe",
        "/.git/**",
        "--model",
        model,
        "Change the git config.",
        env=_env(tmp_path),
    )
    assert done.returncode == 0, done.stderr
    texts = [str(r["result"]) for r in _results(done.stdout)]
    assert "/notes is a symbolic link to /.git" in texts[0]
    assert "/notes is a symbolic link to /.git" in texts[1]
    assert "Permission denied: write access to /.git/info" in texts[3]
    assert (repository / ".git" / "config").read_text() == "[core]\n"
    assert not (repository / ".git" / "hooks").exists()
    assert not (repository / ".git" / "info").exists()
    # The hard-linked copy is a file of its own now; .git/config did not change with it.
    assert (repository / "config-copy").read_text() == FSMONITOR


def test_the_run_records_cannot_be_reached_through_links(repository: Path, tmp_path: Path) -> None:
    env = _env(tmp_path)
    first = tether(
        repository,
        "run",
        "--json",
        "--no-sandbox",
        "--model",
        scripted(repository, "hello.json", ["hi"]),
        "Hello.",
        env=env,
    )
    assert first.returncode == 0, first.stderr
    (repository / "dbdir").symlink_to(".tether")
    os.link(repository / ".tether" / "runs.db", repository / "copy.db")
    reads = [
        {"tool": "read_file", "args": {"file_path": path}}
        for path in ("/dbdir/runs.db", "/copy.db", "/.tether/runs.db")
    ]
    done = tether(
        repository,
        "run",
        "--json",
        "--no-sandbox",
        "--model",
        scripted(repository, "steal.json", [reads, "done"]),
        "Read the records.",
        env=env,
    )
    assert done.returncode == 0, done.stderr
    texts = [str(r["result"]) for r in _results(done.stdout)]
    assert "/dbdir is a symbolic link to /.tether" in texts[0]
    assert "hard link to /.tether/runs.db" in texts[1]
    assert "Permission denied: read access to /.tether/runs.db" in texts[2]


def test_a_planted_tether_directory_is_refused(repository: Path, tmp_path: Path) -> None:
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (repository / ".tether").symlink_to(elsewhere)
    done = tether(repository, "threads", env=_env(tmp_path))
    assert done.returncode == 2
    assert "cannot be kept in the project" in done.stderr
    assert list(elsewhere.iterdir()) == []


def test_planted_sqlite_journal_links_are_refused(repository: Path, tmp_path: Path) -> None:
    (repository / ".tether").mkdir()
    target = tmp_path / "victim"
    target.write_text("intact")
    (repository / ".tether" / "runs.db-wal").symlink_to(target)
    done = tether(repository, "threads", env=_env(tmp_path))
    assert done.returncode == 2
    assert ".tether/runs.db-wal in the project is not a regular file" in done.stderr
    assert target.read_text() == "intact"


GATES_OFF = "[interrupt_on]\nwrite_file = false\nexecute = false\n"
WRITE = [[{"tool": "write_file", "args": {"file_path": "/out.txt", "content": "x"}}], "done"]


def test_a_project_cannot_switch_off_approvals_without_trust(
    repository: Path, tmp_path: Path
) -> None:
    (repository / "tether.toml").write_text(GATES_OFF)
    env = _env(tmp_path)
    model = scripted(repository, "write.json", WRITE)
    refused = tether(repository, "run", "--no-sandbox", "--model", model, "Write.", env=env)
    assert refused.returncode == 2
    assert "turns off approval for execute, write_file" in refused.stderr
    assert "--trust" in refused.stderr
    assert not (repository / "out.txt").exists()
    config = json.loads(tether(repository, "config", "--json", env=env).stdout)
    assert config["needs_trust"] == ["interrupt_on"]

    trusted = tether(
        repository, "run", "--trust", "--no-sandbox", "--model", model, "Write.", env=env
    )
    assert trusted.returncode == 0, trusted.stdout + trusted.stderr
    assert (repository / "out.txt").exists()  # no approval was asked
    assert not (tmp_path / "config" / "tether" / "trusted.json").exists()  # for that run only


def test_trust_is_asked_once_on_a_terminal_and_remembered(repository: Path, tmp_path: Path) -> None:
    (repository / "tether.toml").write_text(GATES_OFF)
    env = _env(tmp_path)
    model = scripted(repository, "write.json", WRITE)
    session = pexpect.spawn(
        sys.executable,
        ["-m", "tether.cli", "run", "--no-sandbox", "--model", model, "Write."],
        cwd=str(repository),
        env=env,
        encoding="utf-8",
        timeout=60,
    )
    session.expect("turns off approval for execute, write_file")
    session.expect(r"Trust these settings for .*\?")
    session.sendline("n")  # not trusted: the defaults hold, so the write asks
    session.expect(r"\[a\]pprove")
    session.sendline("r")
    session.expect("Why")
    session.sendline("no")
    session.expect(pexpect.EOF)
    assert not (repository / "out.txt").exists()
    answers = json.loads((tmp_path / "config" / "tether" / "trusted.json").read_text())
    assert answers[str(repository)]["trusted"] is False

    again = tether(repository, "run", "--no-sandbox", "--json", "--model", model, "W.", env=env)
    assert again.returncode == 3  # remembered "no": no question, and the write waits

    (repository / "tether.toml").write_text(GATES_OFF + "\n# changed\n[x]\n")
    changed = tether(repository, "config", "--json", env=env)
    assert changed.returncode == 2  # an unknown table: the file is read again, whole


def test_misleading_names_are_refused_and_shown_escaped(repository: Path, tmp_path: Path) -> None:
    name = "/report\u202etxt.exe"
    model = scripted(
        repository,
        "bidi.json",
        [[{"tool": "write_file", "args": {"file_path": name, "content": "x"}}], "done"],
    )
    env = _env(tmp_path)
    done = tether(
        repository, "run", "--safe", "/**", "--no-sandbox", "--model", model, "W.", env=env
    )
    assert done.returncode == 3  # a name that is not clean is never a safe path
    assert "\u202e" not in done.stdout
    assert "write_file /report\\u202etxt.exe" in done.stdout  # what the person approves
    thread = done.stdout.split("tether resume ")[1].split()[0]
    resumed = tether(
        repository, "resume", thread, "--approve", "--no-sandbox", "--model", model, env=env
    )
    assert "\u202e" not in resumed.stdout
    assert "Paths must not hold control characters" in resumed.stdout
    assert not [p for p in os.listdir(repository) if "\u202e" in p]


@pytest.mark.skipif(
    shutil.which("bwrap") is None or os.geteuid() != 0, reason="needs bubblewrap and root"
)
def test_the_sandbox_as_root_leaves_git_alone_and_gives_the_project_back(
    repository: Path, tmp_path: Path
) -> None:
    (repository / "notes").unlink()
    (repository / "tether.toml").write_text(GATES_OFF)
    command = "echo '[core] fsmonitor = evil' >> .git/config; mv .git g; echo made > made.txt"
    model = scripted(
        repository,
        "exec.json",
        [[{"tool": "execute", "args": {"command": command}}], "done"],
    )
    done = tether(
        repository,
        "run",
        "--json",
        "--trust",
        "--sandbox",
        "--model",
        model,
        "Run it.",
        env=_env(tmp_path),
    )
    assert done.returncode == 0, done.stderr
    assert (repository / ".git" / "config").read_text() == "[core]\n"
    assert not (repository / "g").exists()
    assert (repository / "made.txt").read_text() == "made\n"
    owners = {p.name: p.stat().st_uid for p in [repository, *repository.rglob("*")]}
    assert set(owners.values()) == {0}, owners  # given back when the command ended


def test_a_shipped_thread_cannot_widen_the_users_limits_or_mode(tmp_path: Path) -> None:
    from tether.cli._config import load

    shipped = {
        "model": "test:their.json",
        "max_steps": 100_000,
        "max_cost": None,
        "timeout": 5.0,
        "mode": "yes",  # never recorded by tether; ignored if a record has it
    }
    environ = {"TETHER_MAX_COST": "2", "TETHER_MAX_STEPS": "50"}
    loaded = load(tmp_path, environ, {}, ("t1", shipped))
    settings = loaded.settings
    assert settings.max_steps == 50  # theirs is wider: yours holds
    assert settings.max_cost == 2.0  # "no limit" does not lift yours
    assert settings.timeout == 5.0  # theirs is tighter: it counts, and says so
    assert loaded.sources["timeout"] == "thread t1 (tighter than default)"
    assert settings.mode == "ask"
    assert settings.model == "test:their.json"  # the thread's model, below env and flags
    assert load(
        tmp_path, {"TETHER_MODEL": "test:mine.json"}, {}, ("t1", shipped)
    ).settings.model == ("test:mine.json")
    flagged = load(tmp_path, environ, {"timeout": 60.0}, ("t1", shipped)).settings
    assert flagged.timeout == 60.0  # a flag says otherwise
