"""LocalSandbox (bubblewrap) and the execute tool: isolation, limits, output, policy."""

from __future__ import annotations

import os
import socket
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


async def test_commands_run_in_the_workspace_with_exit_codes(sandbox: LocalSandbox) -> None:
    await sandbox.write("/src/app.py", b"print('hello from the workspace')\n")
    result = await sandbox.execute("pwd; python3 src/app.py; echo oops >&2; exit 3")
    assert result.output == "/workspace\nhello from the workspace\noops\n"
    assert result.exit_code == 3
    made = await sandbox.execute(
        "echo data > out.txt && chmod 600 out.txt && echo more >> src/app.py"
    )
    assert made.exit_code == 0
    assert await sandbox.read("/out.txt") == b"data\n"  # the file tools see what commands made
    assert (await sandbox.read("/src/app.py")).endswith(b"more\n")


async def test_no_network(sandbox: LocalSandbox) -> None:
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen()
    port = server.getsockname()[1]
    # A listening socket completes connections into its backlog without accept().
    probe = (
        f"python3 -c \"import socket; socket.create_connection(('127.0.0.1', {port}), "
        "timeout=2); print('connected')\""
    )
    result = await sandbox.execute(probe)
    assert "connected" not in result.output
    assert result.exit_code != 0
    server.close()


async def test_nothing_outside_the_workspace_can_be_read_or_written(
    sandbox: LocalSandbox, tmp_path: Path
) -> None:
    secret = tmp_path / "secret.txt"
    secret.write_text("the host's secret")
    read = await sandbox.execute(f"cat {secret}; cat /etc/shadow; ls /root")
    assert "the host's secret" not in read.output
    assert read.exit_code != 0
    wrote = await sandbox.execute("touch /usr/evil; touch /etc/evil; echo ok > /tmp/private")
    assert "Read-only file system" in wrote.output
    assert not _host_has("/usr/evil")
    assert not _host_has("/etc/evil")
    assert not _host_has("/tmp/private", "ok\n")  # its /tmp is its own


async def test_host_processes_are_invisible(sandbox: LocalSandbox) -> None:
    result = await sandbox.execute("ls /proc | grep -cE '^[0-9]+$'; cat /proc/1/cmdline")
    count = int(result.output.split()[0])
    assert count < 10  # a handful of its own, not the host's
    assert str(os.getpid()) not in result.output.split()


async def test_a_fork_bomb_and_an_endless_loop_are_stopped(sandbox: LocalSandbox) -> None:
    bomb = await sandbox.execute("bomb() { bomb | bomb & }; bomb; sleep 1; echo still here")
    assert "Cannot fork" in bomb.output or bomb.exit_code is None
    loop = await sandbox.execute("while :; do :; done")
    assert loop.exit_code is None  # the execute tool turns this into an error
    assert "killed by signal" in loop.output
    healthy = await sandbox.execute("echo fine")
    assert healthy.output == "fine\n"


async def test_a_timeout_kills_the_command_and_its_children(sandbox: LocalSandbox) -> None:
    result = await sandbox.execute("(sleep 30 &); sleep 30", timeout_seconds=1)
    assert result.timed_out
    assert result.exit_code is None
    assert result.output.endswith("[killed: the command ran longer than 1 s]")


async def test_binary_and_huge_output(sandbox: LocalSandbox) -> None:
    binary = await sandbox.execute("printf 'a\\377\\000b'")
    assert binary.output == "a\ufffd\x00b"
    huge = await sandbox.execute("seq 1 200000")
    assert huge.truncated
    assert huge.full_output is not None
    assert huge.output.startswith("1\n2\n3\n")
    assert f"the full output is in {huge.full_output}" in huge.output
    saved = await sandbox.read(huge.full_output)
    assert saved.splitlines()[-1] == b"200000"
    assert len(saved.splitlines()) == 200_000


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


def _host_has(path: str, content: str | None = None) -> bool:
    """Whether the host has `path` (with `content`, when given)."""
    found = Path(path)
    if not found.exists():
        return False
    return content is None or found.read_text() == content


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
