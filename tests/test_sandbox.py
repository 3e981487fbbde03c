"""LocalSandbox (bubblewrap) and the execute tool: limits, errors, policy. The boundaries
every sandbox backend holds are in tests/security/test_every_sandbox.py."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.conftest import by_server_id
from tether import ConfigurationError, create_agent
from tether.backends.sandbox import LocalSandbox, SandboxBackend, UnsafeLocalShell
from tether.capabilities.sandbox import CommandPolicy
from tether.messages import ToolCall
from tether.models import ScriptedModel


@pytest.fixture
def sandbox(tmp_path: Path) -> LocalSandbox:
    return LocalSandbox(tmp_path / "ws", timeout_seconds=20, max_processes=64, cpu_seconds=3)


async def test_a_fork_bomb_and_an_endless_loop_are_stopped(sandbox: LocalSandbox) -> None:
    bomb = await sandbox.execute("bomb() { bomb | bomb & }; bomb; sleep 1; echo still here")
    assert "Cannot fork" in bomb.output or bomb.exit_code is None
    loop = await sandbox.execute("while :; do :; done")
    assert loop.exit_code is None  # the execute tool turns this into an error
    assert "killed by signal" in loop.output
    healthy = await sandbox.execute("echo fine")
    assert healthy.output == "fine\n"


def test_the_execute_tool_with_a_policy(tmp_path: Path) -> None:
    model = ScriptedModel(
        [
            [ToolCall("execute", {"command": "echo hi > hi.txt; cat hi.txt"}, id="a")],
            [ToolCall("execute", {"command": "rm -rf /workspace"}, id="b")],
            [ToolCall("execute", {"command": "sleep 5", "timeout_seconds": 1}, id="c")],
            "done",
        ]
    )
    agent = create_agent(
        model,
        backend=LocalSandbox(tmp_path / "ws"),
        command_policy=CommandPolicy(deny=[r"\brm\s+-rf\b"]),
    )
    result = agent.run("go")
    answers = by_server_id(result.messages)  # by the ids the script gave the calls
    assert answers["a"].text == "hi\n[exit code 0]"
    assert answers["b"].is_error
    assert "Command refused" in answers["b"].text
    assert answers["c"].is_error
    assert "ran longer than 1 s" in answers["c"].text
    assert "## Shell" in agent._plan.system_prompt
    assert "no network" in agent._plan.system_prompt


def test_execute_is_absent_without_a_sandbox_and_a_policy_needs_one(tmp_path: Path) -> None:
    plain = create_agent(ScriptedModel(["x"]))
    assert "execute" not in {t.name for t in plain._plan.tool_specs}
    assert "## Shell" not in plain._plan.system_prompt
    with pytest.raises(ConfigurationError, match="needs a SandboxBackend"):
        create_agent(ScriptedModel(["x"]), command_policy=CommandPolicy(deny=["rm"]))
    with pytest.raises(ConfigurationError, match="bad pattern"):
        CommandPolicy(deny=["("])


def test_execute_can_wait_for_approval(tmp_path: Path) -> None:
    model = ScriptedModel([[ToolCall("execute", {"command": "echo hi"}, id="x")], "done"])
    agent = create_agent(
        model,
        backend=LocalSandbox(tmp_path / "ws"),
        checkpointer=f"sqlite:///{tmp_path}/runs.db",
        interrupt_on={"execute": {"allow": ["approve", "reject"]}},
    )
    waiting = agent.run("go", thread_id="t")
    assert waiting.stop_reason == "interrupted"
    assert waiting.interrupts[0].args == {"command": "echo hi"}


async def test_the_unsafe_shell_is_a_sandbox_backend_without_isolation(tmp_path: Path) -> None:
    shell = UnsafeLocalShell(tmp_path / "ws")
    assert isinstance(shell, SandboxBackend)
    result = await shell.execute("pwd")
    assert result.output.strip() == str((tmp_path / "ws").resolve())


def test_a_missing_bwrap_is_a_clear_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(ConfigurationError, match="apt-get install bubblewrap"):
        LocalSandbox(tmp_path / "ws")


def test_no_user_namespaces_is_a_clear_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    fake = tmp_path / "bin" / "bwrap"
    fake.parent.mkdir()
    fake.write_text("#!/bin/sh\necho 'bwrap: No permissions to create new namespace' >&2\nexit 1\n")
    fake.chmod(0o755)
    monkeypatch.setenv("PATH", str(fake.parent))
    with pytest.raises(ConfigurationError, match="No permissions to create new namespace"):
        LocalSandbox(tmp_path / "ws")


def test_a_composite_over_a_sandbox_runs_commands_there(tmp_path: Path) -> None:
    from tether.backends import CompositeBackend, StateBackend

    shell = UnsafeLocalShell(tmp_path / "ws")
    routed = CompositeBackend(shell, {"/scratch/": StateBackend()})
    model = ScriptedModel(
        [
            [
                ToolCall("write_file", {"file_path": "/scratch/n.md", "content": "x"}, id="w"),
                ToolCall("execute", {"command": "echo hi > out.txt; ls"}, id="x"),
            ],
            "done",
        ]
    )
    result = create_agent(model, backend=routed, command_policy=CommandPolicy(deny=["rm"])).run(
        "go"
    )
    assert result.output == "done"
    assert (tmp_path / "ws" / "out.txt").read_text() == "hi\n"
    assert not (tmp_path / "ws" / "scratch").exists()  # the routed file is elsewhere


def test_a_commands_cgroup_is_found_below_this_processs_own() -> None:
    """cgroup v1 with a controller per hierarchy or two sharing one, and cgroup v2."""
    from tether.backends.sandbox.cgroups import _directory

    mounts = [
        ("/", "/sys/fs/cgroup/memory", "cgroup", frozenset({"rw", "memory"})),
        ("/", "/sys/fs/cgroup/cpu,pids", "cgroup", frozenset({"rw", "cpu", "pids"})),
        ("/", "/sys/fs/cgroup/unified", "cgroup2", frozenset({"rw"})),
    ]
    own = {"memory": "/user/a", "pids": "/", "cpu": "/", "": "/session.scope"}
    assert _directory(mounts, "cgroup", "memory", own) == "/sys/fs/cgroup/memory/user/a"
    assert _directory(mounts, "cgroup", "pids", own) == "/sys/fs/cgroup/cpu,pids"
    assert _directory(mounts, "cgroup2", "", own) == "/sys/fs/cgroup/unified/session.scope"
    assert _directory(mounts, "cgroup", "blkio", own) is None
    # In a cgroup namespace the mount's root is where this process is.
    inside = [("/docker/x", "/sys/fs/cgroup", "cgroup2", frozenset({"rw"}))]
    assert _directory(inside, "cgroup2", "", {"": "/docker/x"}) == "/sys/fs/cgroup"


async def test_the_sandbox_says_what_holds_its_limits(tmp_path: Path) -> None:
    sandbox = LocalSandbox(tmp_path / "ws")
    # As root these machines make cgroups (see ENVIRONMENT.md); a user here cannot.
    assert sandbox.limits_by == ("cgroup" if os.geteuid() == 0 else "watchdog")
    done = await sandbox.execute("echo fine")
    assert (done.output, done.over_limit) == ("fine\n", None)
