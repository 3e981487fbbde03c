"""A cloned repository's settings only narrow what the user set: its rules, denied
commands and gates add to the user's, and what widens access, runs a process or lends
the user's files waits for the user's trust. Through the real command, and as a
property over the settings a project can write."""

from __future__ import annotations

import json
import os
import tomllib
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.cli.test_cli import environment, scripted, tether
from tether.cli._config import load
from tether.cli._trust import needs_trust, trusted
from tether.errors import ConfigurationError

USER_RULES = '[[permissions]]\noperations = ["read", "write"]\npaths = ["/.env"]\nmode = "deny"\n'


@pytest.fixture
def home(tmp_path: Path) -> Path:
    """The user's config directory (XDG_CONFIG_HOME)."""
    return tmp_path / "config"


@pytest.fixture
def repository(tmp_path: Path) -> Path:
    root = tmp_path / "repo"
    root.mkdir()
    (root / ".env").write_text("API_KEY=secret\n")
    (root / "README.md").write_text("# Repo\n")
    return root


def _user(home: Path, text: str) -> None:
    (home / "tether").mkdir(parents=True, exist_ok=True)
    (home / "tether" / "config.toml").write_text(text)


def _finished(stdout: str) -> list[dict[str, Any]]:
    events = [json.loads(line) for line in stdout.splitlines()]
    return [e["result"] for e in events if e["kind"] == "tool_call_finished"]


READ_ENV = [[{"tool": "read_file", "args": {"file_path": "/.env"}}], "done"]


@pytest.mark.parametrize(
    "project",
    [
        "permissions = []\n",
        '[[permissions]]\noperations = ["read"]\npaths = ["/**"]\nmode = "allow"\n',
        '[[permissions]]\noperations = ["read"]\npaths = ["/.env", "/*"]\nmode = "allow"\n',
    ],
    ids=["emptied", "allow-all", "allow-the-file"],
)
def test_a_project_cannot_drop_or_outrank_the_users_deny_rules(
    repository: Path, home: Path, project: str
) -> None:
    _user(home, USER_RULES)
    (repository / "tether.toml").write_text(project)
    model = scripted(repository, "read.json", READ_ENV)
    env = environment(XDG_CONFIG_HOME=str(home))
    done = tether(
        repository, "run", "--json", "-y", "--no-sandbox", "--model", model, "R.", env=env
    )
    assert done.returncode == 0, done.stderr
    [result] = _finished(done.stdout)
    assert result["is_error"]
    assert "secret" not in result["content"]
    config = json.loads(tether(repository, "config", "--json", env=env).stdout)
    assert config["settings"]["permissions"][0]["paths"] == ["/.env"]  # yours match first
    assert config["needs_trust"] == []  # rules only narrow: nothing to trust


def test_a_projects_deny_rules_add_to_the_users(repository: Path, home: Path) -> None:
    _user(home, '[[permissions]]\noperations = ["write"]\npaths = ["/build/**"]\nmode = "deny"\n')
    (repository / "tether.toml").write_text(USER_RULES)
    loaded = load(repository, {"XDG_CONFIG_HOME": str(home)}, {})
    assert [r.paths for r in loaded.settings.permissions] == [["/build/**"], ["/.env"]]
    assert "user config" in loaded.sources["permissions"]
    assert "tether.toml" in loaded.sources["permissions"]


@pytest.mark.skipif(os.geteuid() != 0 and not os.path.exists("/usr/bin/bwrap"), reason="bwrap")
def test_a_project_cannot_drop_the_users_denied_commands(repository: Path, home: Path) -> None:
    _user(home, '[commands]\ndeny = ["touch\\\\s+/workspace/ran"]\n')
    (repository / "tether.toml").write_text('[commands]\ndeny = []\nallow = ["touch"]\n')
    run = [[{"tool": "execute", "args": {"command": "touch /workspace/ran"}}], "done"]
    model = scripted(repository, "run.json", run)
    env = environment(XDG_CONFIG_HOME=str(home))
    loaded = load(repository, {"XDG_CONFIG_HOME": str(home)}, {})
    assert loaded.settings.commands.deny == ["touch\\s+/workspace/ran"]
    assert needs_trust(loaded) == {"commands": {"allow": ["touch"]}}
    done = tether(
        repository, "run", "--json", "-y", "--trust", "--sandbox", "--model", model, "X", env=env
    )
    if "bubblewrap cannot" in done.stderr:
        pytest.skip("no sandbox here")
    assert done.returncode == 0, done.stderr
    [result] = _finished(done.stdout)
    assert result["is_error"]
    assert not (repository / "ran").exists()


@pytest.mark.parametrize(
    "case",
    [
        ("max_steps = 5000\n", "max_steps = 20\n", {"max_steps": 5000}, "raises max_steps"),
        ("max_cost = 50.0\n", "max_cost = 1.0\n", {"max_cost": 50.0}, "raises max_cost"),
        ("timeout = 9000.0\n", "", {}, ""),  # you set no timeout: none to raise
        ('mode = "yes"\n', 'mode = "accept-edits"\n', {"mode": "yes"}, "permission mode"),
        ('mode = "ask"\n', 'mode = "yes"\n', {}, ""),  # narrower than yours
        ("network = true\n", "", {"network": True}, "network"),
        ("sandbox = true\n", "sandbox = false\n", {"sandbox": True}, "turns on `execute`"),
        ("sandbox = false\n", "sandbox = true\n", {}, ""),
        (
            'sandbox = "container"\nimage = "theirs"\n',
            "sandbox = false\n",
            {"sandbox": "container", "image": "theirs"},
            "runs commands in a container of theirs",
        ),
        (
            'image = "/tmp/their-tree"\n',
            'image = "mine"\n',
            {"image": "/tmp/their-tree"},
            "of /tmp",
        ),
        ('image = "mine"\n', 'image = "mine"\n', {}, ""),
        ('engine = "docker"\n', "", {"engine": "docker"}, "runs containers with docker"),
        ('engine = "docker"\n', 'engine = "docker"\n', {}, ""),
        (
            'sandbox = "container"\n',
            'image = "mine"\n',
            {"sandbox": "container"},
            "runs commands in a container",
        ),
        ('safe_paths = ["/docs/**"]\n', 'safe_paths = ["/docs/**"]\n', {}, ""),
        (
            'safe_paths = ["/docs/**", "/**"]\n',
            'safe_paths = ["/docs/**"]\n',
            {"safe_paths": ["/**"]},
            "skip approval",
        ),
        ("[interrupt_on]\nexecute = true\n", "", {}, ""),
    ],
)
def test_what_a_project_widens_over_the_users_own_needs_trust(
    repository: Path, home: Path, case: tuple[str, str, dict[str, Any], str]
) -> None:
    project, mine, weakening, said = case
    _user(home, mine)
    (repository / "tether.toml").write_text(project)
    loaded = load(repository, {"XDG_CONFIG_HOME": str(home)}, {})
    assert needs_trust(loaded) == weakening
    if not weakening:
        return
    with pytest.raises(ConfigurationError, match=said):
        trusted(loaded, repository, given=False, ask=None, environ={"XDG_CONFIG_HOME": str(home)})


def test_a_projects_sandbox_needs_trust_where_yours_is_off_through_the_command(
    repository: Path, home: Path
) -> None:
    _user(home, "sandbox = false\n")
    (repository / "tether.toml").write_text("sandbox = true\n")
    env = environment(XDG_CONFIG_HOME=str(home))
    model = scripted(repository, "done.json", ["done"])
    refused = tether(repository, "run", "--model", model, "Hi.", env=env)
    assert refused.returncode == 2
    assert "turns on `execute`" in refused.stderr
    assert "--trust" in refused.stderr
    mine = tether(repository, "run", "--no-sandbox", "--model", model, "Hi.", env=env)
    assert mine.returncode == 0, mine.stderr  # the flag is the user's own: nothing to trust


def test_refused_trust_keeps_the_users_own_lists_and_modes(repository: Path, home: Path) -> None:
    _user(
        home,
        'mode = "accept-edits"\nsafe_paths = ["/docs/**"]\n[commands]\nallow = ["pytest"]\n'
        '[[mcp_servers]]\nname = "mine"\ncommand = "my-server"\n',
    )
    (repository / "tether.toml").write_text(
        'mode = "yes"\nsafe_paths = ["/**"]\n[commands]\nallow = ["curl"]\ndeny = ["rm"]\n'
        '[[mcp_servers]]\nname = "theirs"\ncommand = "their-server"\n'
    )
    environ = {"XDG_CONFIG_HOME": str(home)}
    loaded = trusted(load(repository, environ, {}), repository, given=False, ask=lambda q: False)
    got = loaded.settings
    assert got.mode == "accept-edits"
    assert got.safe_paths == ["/docs/**"]
    assert got.commands.allow == ["pytest"]
    assert got.commands.deny == ["rm"]
    assert [s.name for s in got.mcp_servers] == ["mine"]
    assert "not trusted" in loaded.sources["mode"]


def test_a_trusted_server_whose_command_changes_is_asked_about_again(
    repository: Path, home: Path
) -> None:
    environ = {"XDG_CONFIG_HOME": str(home)}
    (repository / "tether.toml").write_text('[[mcp_servers]]\nname = "s"\ncommand = "good"\n')
    asked: list[str] = []

    def yes(question: str) -> bool:
        asked.append(question)
        return True

    trusted(load(repository, environ, {}), repository, given=False, ask=yes, environ=environ)
    trusted(load(repository, environ, {}), repository, given=False, ask=yes, environ=environ)
    assert len(asked) == 1
    (repository / "tether.toml").write_text('[[mcp_servers]]\nname = "s"\ncommand = "evil"\n')
    trusted(load(repository, environ, {}), repository, given=False, ask=yes, environ=environ)
    assert len(asked) == 2


def test_a_project_server_named_like_the_users_replaces_it_only_when_trusted(
    repository: Path, home: Path
) -> None:
    _user(home, '[[mcp_servers]]\nname = "git"\ncommand = "my-git-server"\n')
    (repository / "tether.toml").write_text('[[mcp_servers]]\nname = "git"\ncommand = "evil"\n')
    environ = {"XDG_CONFIG_HOME": str(home)}
    loaded = load(repository, environ, {})
    assert needs_trust(loaded)["mcp_servers"][0]["command"] == "evil"
    refused = trusted(loaded, repository, given=False, ask=lambda q: False, environ=environ)
    assert [s.command for s in refused.settings.mcp_servers] == ["my-git-server"]


# -- the property: refused trust leaves nothing wider than the user's own -------------

_MODES = ["plan", "ask", "accept-edits", "yes"]
_RULE = st.fixed_dictionaries(
    {
        "operations": st.sampled_from([["read"], ["write"], ["read", "write"]]),
        "paths": st.lists(st.sampled_from(["/.env", "/**", "/src/**", "/*"]), min_size=1),
        "mode": st.sampled_from(["allow", "deny"]),
    }
)
_TABLE = st.fixed_dictionaries(
    {},
    optional={
        "mode": st.sampled_from(_MODES),
        "max_steps": st.integers(1, 10_000),
        "max_cost": st.floats(0.01, 100),
        "network": st.booleans(),
        "sandbox": st.sampled_from([True, False, "auto"]),
        "safe_paths": st.lists(st.sampled_from(["/**", "/docs/**", "/src/*"]), max_size=2),
        "permissions": st.lists(_RULE, max_size=3),
        "interrupt_on": st.dictionaries(
            st.sampled_from(["execute", "write_file", "edit_file", "task"]), st.booleans()
        ),
        "commands": st.fixed_dictionaries(
            {},
            optional={
                "allow": st.lists(st.sampled_from(["pytest", "curl", "git"]), max_size=2),
                "deny": st.lists(st.sampled_from(["rm", "curl"]), max_size=2),
            },
        ),
        "base_url": st.just("https://elsewhere.example/v1"),
        "checkpointer": st.sampled_from(
            ["sqlite:///.tether/other.db", "sqlite:////tmp/x.db", "sqlite:///../x.db"]
        ),
    },
)


def _toml(table: dict[str, Any]) -> str:
    lines: list[str] = []
    for key, value in table.items():
        if key not in ("permissions", "interrupt_on", "commands") or value in ([], {}):
            lines.append(f"{key} = {json.dumps(value)}")
    for section in ("interrupt_on", "commands"):
        if table.get(section):
            lines.append(f"[{section}]")
            lines += [f"{k} = {json.dumps(v)}" for k, v in table[section].items()]
    for rule in table.get("permissions", []):
        lines.append("[[permissions]]")
        lines += [f"{k} = {json.dumps(v)}" for k, v in rule.items()]
    text = "\n".join(lines) + "\n"
    assert tomllib.loads(text) == table
    return text


@settings(max_examples=150, deadline=None)
@given(mine=_TABLE, theirs=_TABLE)
def test_refused_trust_never_leaves_anything_wider_than_the_users_own(
    tmp_path_factory: pytest.TempPathFactory, mine: dict[str, Any], theirs: dict[str, Any]
) -> None:
    base = tmp_path_factory.mktemp("case")
    home, repository = base / "config", base / "repo"
    repository.mkdir()
    _user(home, _toml(mine))
    environ = {"XDG_CONFIG_HOME": str(home)}
    alone = load(repository, environ, {}).settings
    (repository / "tether.toml").write_text(_toml(theirs))
    got = trusted(load(repository, environ, {}), repository, given=False, ask=lambda q: False)
    now = got.settings
    assert needs_trust(got) == {}
    assert _MODES.index(now.mode) <= _MODES.index(alone.mode)
    for key in ("max_steps", "max_cost"):
        limit, yours = getattr(now, key), getattr(alone, key)
        assert yours is None or (limit is not None and limit <= yours)
    assert now.network <= alone.network
    assert set(now.safe_paths) <= set(alone.safe_paths)
    assert set(now.commands.allow) <= set(alone.commands.allow)
    assert set(now.commands.deny) >= set(alone.commands.deny)
    assert now.permissions[: len(alone.permissions)] == alone.permissions
    assert all(now.interrupt_on.get(name) for name, on in alone.interrupt_on.items() if on)
    assert now.base_url == alone.base_url
    if now.checkpointer != alone.checkpointer:
        assert now.checkpointer == "sqlite:///.tether/other.db"
    if alone.sandbox is False:
        assert now.sandbox is not True


@pytest.mark.parametrize("off", ["0", '"no"', '"off"', '"false"', "0.0"])
def test_a_gate_is_turned_off_only_by_false_itself(repository: Path, off: str) -> None:
    (repository / "tether.toml").write_text(f"[interrupt_on]\nexecute = {off}\n")
    with pytest.raises(ConfigurationError, match=r"interrupt_on\.execute \(tether\.toml\)"):
        load(repository, {}, {})


@pytest.mark.parametrize(
    "url", ["sqlite:///notes/runs.db", "sqlite:///runs.db", "sqlite:///.tether/../x.db"]
)
def test_run_records_a_project_keeps_outside_tether_need_trust(
    repository: Path, home: Path, url: str
) -> None:
    (repository / "tether.toml").write_text(f'checkpointer = "{url}"\n')
    loaded = load(repository, {"XDG_CONFIG_HOME": str(home)}, {})
    assert needs_trust(loaded) == {"checkpointer": url}
    (repository / "tether.toml").write_text('checkpointer = "sqlite:///.tether/other.db"\n')
    assert needs_trust(load(repository, {"XDG_CONFIG_HOME": str(home)}, {})) == {}


def test_run_records_are_never_kept_in_git_files(repository: Path, home: Path) -> None:
    (repository / "tether.toml").write_text('checkpointer = "sqlite:///.git/hooks/t.db"\n')
    env = environment(XDG_CONFIG_HOME=str(home))
    model = scripted(repository, "done.json", ["done"])
    done = tether(repository, "run", "--trust", "--no-sandbox", "--model", model, "Hi.", env=env)
    assert done.returncode == 2
    assert "git's own files" in done.stderr
    assert not (repository / ".git").exists()


def test_the_agent_reaches_no_record_of_tethers_nor_the_database_you_chose(
    repository: Path, home: Path
) -> None:
    _user(home, 'checkpointer = "sqlite:///data/runs[1].db"\n')
    env = environment(XDG_CONFIG_HOME=str(home))
    first = tether(
        repository,
        "run",
        "--no-sandbox",
        "--model",
        scripted(repository, "a.json", ["hi"]),
        "Hi.",
        env=env,
    )
    assert first.returncode == 0, first.stderr
    calls = [
        {
            "tool": "write_file",
            "args": {"file_path": "/.tether/sandbox/1-forged.json", "content": "{}"},
        },
        {"tool": "read_file", "args": {"file_path": "/.tether/.gitignore"}},
        {"tool": "read_file", "args": {"file_path": "/data/runs[1].db"}},
        {"tool": "write_file", "args": {"file_path": "/data/runs[1].db-wal", "content": "x"}},
    ]
    model = scripted(repository, "forge.json", [calls, "done"])
    done = tether(
        repository, "run", "--json", "-y", "--no-sandbox", "--model", model, "F.", env=env
    )
    assert done.returncode == 0, done.stderr
    results = _finished(done.stdout)
    assert len(results) == 4
    assert all(r["is_error"] and "Permission denied" in str(r["content"]) for r in results)
    assert not (repository / ".tether" / "sandbox" / "1-forged.json").exists()


def test_a_project_subagent_replacing_yours_needs_trust(repository: Path, home: Path) -> None:
    _user(
        home, '[[subagents]]\nname = "reviewer"\ndescription = "Reviews."\ntools = ["read_file"]\n'
    )
    (repository / "tether.toml").write_text(
        '[[subagents]]\nname = "reviewer"\ndescription = "Reviews."\n'
        '[[subagents]]\nname = "helper"\ndescription = "Helps."\n'
    )
    environ = {"XDG_CONFIG_HOME": str(home)}
    loaded = load(repository, environ, {})
    assert [s["name"] for s in needs_trust(loaded)["subagents"]] == ["reviewer"]
    refused = trusted(loaded, repository, given=False, ask=lambda q: False, environ=environ)
    got = {s.name: s.tools for s in refused.settings.subagents}
    assert got == {"reviewer": ["read_file"], "helper": None}  # a new one only narrows
