"""ContainerSandbox beyond the boundaries every sandbox holds (tests/security/
test_every_sandbox.py): a container per thread, kept and replaced when it must be,
taken back or removed after a tether was killed, and clear errors."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import textwrap
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.conftest import by_server_id
from tests.sandboxes import DOCKER_IMAGE, make, unavailable
from tether import ConfigurationError, create_agent
from tether.backends.sandbox import ContainerSandbox, SandboxBackend, container
from tether.backends.sandbox.base import session
from tether.backends.sandbox.engines import Engine, owner_alive, this_owner
from tether.messages import ToolCall
from tether.models import ScriptedModel


@pytest.fixture(params=["podman", "docker"])
def kind(request: pytest.FixtureRequest) -> str:
    why = unavailable(request.param)
    if why is not None:
        pytest.skip(f"{request.param}: {why}")
    return str(request.param)


def _names(sandbox: ContainerSandbox) -> dict[str, str]:
    return {key: running.name for key, running in sandbox._running.items()}


async def test_a_thread_keeps_its_container_and_threads_do_not_share(
    kind: str, tmp_path: Path
) -> None:
    sandbox = make(kind, tmp_path / "ws")
    assert isinstance(sandbox, ContainerSandbox)
    try:
        with session("a"):
            await sandbox.execute("echo kept > /tmp/state")
            again = await sandbox.execute("cat /tmp/state")
        with session("b"):
            other = await sandbox.execute("cat /tmp/state 2>&1; echo end")
        assert again.output == "kept\n"  # the same container: what it left outside is there
        assert "kept" not in other.output
        assert set(_names(sandbox)) == {"a", "b"}
    finally:
        await asyncio.to_thread(sandbox.close)
    listed = await asyncio.to_thread(sandbox.engine.listed)
    assert not set(_names(sandbox).values()) & {c.name for c in listed}


async def test_the_least_recently_used_container_goes_first(kind: str, tmp_path: Path) -> None:
    sandbox = make(kind, tmp_path / "ws", max_containers=2)
    assert isinstance(sandbox, ContainerSandbox)
    try:
        for key in ("a", "b", "a", "c"):
            with session(key):
                await sandbox.execute("true")
        assert list(_names(sandbox)) == ["a", "c"]
    finally:
        await asyncio.to_thread(sandbox.close)


async def test_a_new_git_directory_replaces_the_container_and_is_protected(
    kind: str, tmp_path: Path
) -> None:
    workspace = tmp_path / "ws"
    sandbox = make(kind, workspace)
    assert isinstance(sandbox, ContainerSandbox)
    try:
        await sandbox.execute("echo kept > /tmp/state")
        (workspace / "sub" / ".git").mkdir(parents=True)  # the user, on the host
        (workspace / "sub" / ".git" / "config").write_text("[core]\n")
        done = await sandbox.execute("cat /tmp/state; echo evil >> sub/.git/config")
        assert "its container was replaced" in done.output
        assert "kept" not in done.output
        assert (workspace / "sub" / ".git" / "config").read_text() == "[core]\n"
    finally:
        await asyncio.to_thread(sandbox.close)


async def test_a_cancelled_command_leaves_nothing_running(kind: str, tmp_path: Path) -> None:
    sandbox = make(kind, tmp_path / "ws")
    assert isinstance(sandbox, ContainerSandbox)
    try:
        task = asyncio.ensure_future(sandbox.execute("touch started; sleep 300"))
        for _ in range(1200):
            if await asyncio.to_thread((tmp_path / "ws" / "started").exists):
                break
            await asyncio.sleep(0.05)
        assert sandbox._running
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        assert not sandbox._running  # the container was removed with what ran in it
        after = await sandbox.execute("echo fresh")
        assert "fresh" in after.output
    finally:
        await asyncio.to_thread(sandbox.close)


def test_an_agents_commands_share_the_threads_container(kind: str, tmp_path: Path) -> None:
    sandbox = make(kind, tmp_path / "ws")
    assert isinstance(sandbox, ContainerSandbox)
    model = ScriptedModel(
        [
            [ToolCall("execute", {"command": "echo one > /tmp/mark"}, id="a")],
            [ToolCall("execute", {"command": "cat /tmp/mark"}, id="b")],
            "done",
        ]
    )
    try:
        agent = create_agent(model, backend=sandbox, checkpointer=f"sqlite:///{tmp_path}/runs.db")
        result = agent.run("go", thread_id="t1")
        assert by_server_id(result.messages)["b"].text == "one\n[exit code 0]"
        assert list(_names(sandbox)) == ["t1"]
    finally:
        sandbox.close()


def test_a_killed_tethers_container_is_removed_and_its_command_put_right(
    kind: str, tmp_path: Path
) -> None:
    workspace = tmp_path / "ws"
    workspace.mkdir()
    script = textwrap.dedent(
        f"""
        import asyncio, sys
        sys.path.insert(0, {str(Path(__file__).parents[2])!r})
        from tests.sandboxes import make
        sandbox = make({kind!r}, __import__("pathlib").Path({str(workspace)!r}))
        async def main():
            await sandbox.execute(
                "echo kept > /tmp/mark; mkdir -p sub/.git/objects sub/.git/refs && "
                "echo 'ref: refs/heads/main' > sub/.git/HEAD; echo ready; "
                "while :; do echo alive >> beat; sleep 0.2; done"
            )
        asyncio.run(main())
        """
    )
    child = subprocess.Popen([sys.executable, "-c", script], env=os.environ)
    try:
        _wait_for(lambda: (workspace / "beat").exists() or child.poll() is not None)
        assert child.poll() is None
        child.send_signal(signal.SIGKILL)  # no close, no atexit: only its watcher is left
    finally:
        child.wait()
    # Its command stops: the watcher removes its container once its pipe closes.
    _wait_for(lambda: _still_beating(workspace / "beat") is False)
    sandbox = make(kind, workspace)
    assert isinstance(sandbox, ContainerSandbox)
    try:

        async def next_command() -> str:
            return (await sandbox.execute("cat /tmp/mark 2>&1; echo next")).output

        output = asyncio.run(next_command())
        assert "next" in output
        assert "kept" not in output  # a fresh container
        assert "a command of a tether that was killed never finished here" in output
        assert "tether renamed" in output  # what its command made is disabled
        assert not (workspace / "sub" / ".git").exists()
        dead = [
            c for c in sandbox.engine.listed() if owner_alive(c.labels["tether.owner"]) is False
        ]
        assert not dead
    finally:
        sandbox.close()


def _wait_for(condition: Callable[[], bool], seconds: float = 60) -> None:
    deadline = time.monotonic() + seconds
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.1)


def _still_beating(beat: Path) -> bool:
    before = beat.read_text()
    time.sleep(1)
    return beat.read_text() != before


def test_owners_are_told_apart_from_a_new_process_with_the_same_number() -> None:
    me = this_owner()
    assert owner_alive(me) is True
    boot, namespace, pid, started = me.split(":")
    assert owner_alive(f"{boot}:{namespace}:{pid}:{int(started) + 1}") is False
    assert owner_alive(f"another-boot:{namespace}:{pid}:{started}") is None  # not ours to judge
    assert owner_alive("garbage") is None


def test_clear_errors(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(ConfigurationError, match="one of image= and rootfs="):
        ContainerSandbox(tmp_path / "ws")
    with pytest.raises(ConfigurationError, match="'podman' or 'docker'"):
        ContainerSandbox(tmp_path / "ws", image="x", engine="lxc")  # type: ignore[arg-type]
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(ConfigurationError, match="apt-get install podman runc"):
        ContainerSandbox(tmp_path / "ws", image="x")


def test_rootless_on_cgroup_v1_is_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    fake = Engine("podman", "/bin/false", rootless=True, cgroup_version=1)
    monkeypatch.setattr(container, "find_engine", lambda choice: fake)
    with pytest.raises(ConfigurationError, match="enforces no memory, CPU or process limit"):
        ContainerSandbox(tmp_path / "ws", image="x")


def test_docker_takes_an_image_not_a_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    fake = Engine("docker", "/bin/false", rootless=False, cgroup_version=2)
    monkeypatch.setattr(container, "find_engine", lambda choice: fake)
    with pytest.raises(ConfigurationError, match="docker import - NAME"):
        ContainerSandbox(tmp_path / "ws", rootfs=tmp_path)


def test_a_workspace_the_engines_cannot_mount_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    fake = Engine("podman", "/bin/false", rootless=False, cgroup_version=2)
    monkeypatch.setattr(container, "find_engine", lambda choice: fake)
    with pytest.raises(ConfigurationError, match="cannot mount"):
        ContainerSandbox(tmp_path / "a:b", image="x")


async def test_a_git_directory_the_engines_cannot_mount_stops_the_command(
    kind: str, tmp_path: Path
) -> None:
    workspace = tmp_path / "ws"
    (workspace / "x:y" / ".git").mkdir(parents=True)
    sandbox: SandboxBackend = make(kind, workspace)
    try:
        done = await sandbox.execute("echo ran")
        assert done.output.startswith("[not run: the container engine cannot mount '/x:y/.git'")
        assert done.exit_code is None
    finally:
        await asyncio.to_thread(sandbox.close)  # type: ignore[attr-defined]


def test_the_container_runs_the_image_or_the_tree_given(kind: str, tmp_path: Path) -> None:
    sandbox = make(kind, tmp_path / "ws")
    assert isinstance(sandbox, ContainerSandbox)
    args = sandbox._run_args("n", "s", container._Plan((), (), (), ()))
    assert args[-4:-3] == ([DOCKER_IMAGE] if kind == "docker" else [sandbox.rootfs])
    sandbox.close()


def test_the_command_runs_a_session_in_a_container(kind: str, tmp_path: Path) -> None:
    from tests.cli.test_cli import environment, scripted, tether

    project = tmp_path / "project"
    project.mkdir()
    command = "cat /proc/1/cmdline | tr '\\0' ' '; echo; echo made > made.txt"
    model = scripted(
        project, "exec.json", [[{"tool": "execute", "args": {"command": command}}], "done"]
    )
    image = os.environ["TETHER_TEST_ROOTFS"] if kind == "podman" else DOCKER_IMAGE
    env = environment(XDG_CONFIG_HOME=str(tmp_path / "config"), TETHER_ENGINE=kind)
    args = ("run", "--yes", "--json", "--sandbox", "container", "--image", image)
    done = tether(project, *args, "--model", model, "go", env=env)
    assert done.returncode == 0, done.stderr
    assert "sleep 86400" in done.stdout  # the container's first process, not the host's
    assert (project / "made.txt").read_text() == "made\n"
    missing = tether(project, "run", "--sandbox", "container", "--model", model, "go", env=env)
    assert missing.returncode == 2
    assert "--sandbox container needs --image" in missing.stderr


async def test_a_read_only_path_a_command_turned_into_a_link_mounts_nothing(
    kind: str, tmp_path: Path
) -> None:
    secret = tmp_path / "secret"
    secret.mkdir()
    (secret / "key").write_text("the host's key")
    sandbox = make(kind, tmp_path / "ws", read_only=["/config"])
    assert isinstance(sandbox, ContainerSandbox)
    try:
        await sandbox.execute(f"ln -s {secret} config")
        done = await sandbox.execute(f"cat config/key {secret}/key 2>&1; ls {secret} 2>&1")
        assert "the host's key" not in done.output
        assert "key" not in done.output.replace("config/key", "").replace("/key:", ""), done
    finally:
        await asyncio.to_thread(sandbox.close)


async def test_a_mount_that_is_not_what_the_scan_found_stops_the_command(
    kind: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The engine resolves each mount's source after tether's scan: what the container
    got is checked against what the scan found, from inside, with no link followed."""
    from tether.backends.sandbox import gitdirs

    workspace = tmp_path / "ws"
    (workspace / "sub" / ".git").mkdir(parents=True)
    scan = gitdirs.scan

    def swapped(*args: object) -> gitdirs.GitScan:
        found = scan(*args)  # type: ignore[arg-type]
        found.paths = {path: (dev, ino + 1) for path, (dev, ino) in found.paths.items()}
        return found

    monkeypatch.setattr(gitdirs, "scan", swapped)
    sandbox = make(kind, workspace)
    assert isinstance(sandbox, ContainerSandbox)
    try:
        done = await sandbox.execute("echo ran")
        assert "ran" not in done.output
        assert "the workspace changed while the container started" in done.output
        assert "/sub/.git is not what was found there" in done.output
        assert not sandbox._running
    finally:
        await asyncio.to_thread(sandbox.close)


async def test_the_containers_own_system_is_read_only(kind: str, tmp_path: Path) -> None:
    """Nothing a command changes outside /workspace and the temporary directories outlives
    it: the container's first process (another user) runs only what the image holds."""
    sandbox = make(kind, tmp_path / "ws")
    assert isinstance(sandbox, ContainerSandbox)
    try:
        done = await sandbox.execute(
            "cp /bin/true /usr/bin/sleep 2>&1; touch /etc/x /usr/local/x 2>&1; "
            "echo t > /tmp/t && echo v > /var/tmp/v && echo ok"
        )
        assert done.output.count("Read-only file system") == 3, done.output
        assert done.output.endswith("ok\n")
    finally:
        await asyncio.to_thread(sandbox.close)


def test_the_threads_container_is_recorded_and_a_later_process_says_it_is_gone(
    kind: str, tmp_path: Path
) -> None:
    from tether.checkpoint.journal import read_thread
    from tether.checkpoint.sqlite import SqliteCheckpointer

    database = tmp_path / "runs.db"

    def run(sandbox: ContainerSandbox, call: str) -> str:
        model = ScriptedModel([[ToolCall("execute", {"command": "echo ran"}, id=call)], "done"])
        agent = create_agent(model, backend=sandbox, checkpointer=f"sqlite:///{database}")
        return by_server_id(agent.run("go", thread_id="t").messages)[call].text

    first = make(kind, tmp_path / "ws")
    assert isinstance(first, ContainerSandbox)
    try:
        run(first, "a")
        [name] = _names(first).values()
        thread = asyncio.run(read_thread(SqliteCheckpointer(database), "t"))
        assert thread.sandbox == {"container": name}
        assert "gone" not in run(first, "b")  # the same process: the same container
    finally:
        first.close()
    later = make(kind, tmp_path / "ws")  # as another process would
    assert isinstance(later, ContainerSandbox)
    try:
        answer = run(later, "c")
        assert f"this thread's container from before ({name}) is gone" in answer
    finally:
        later.close()


def test_time_in_the_container_counts_against_the_runs_limit(kind: str, tmp_path: Path) -> None:
    from tether.limits import Limits

    sandbox = make(kind, tmp_path / "ws")
    assert isinstance(sandbox, ContainerSandbox)
    model = ScriptedModel([[ToolCall("execute", {"command": "sleep 60"}, id="s")], "done"])
    agent = create_agent(model, backend=sandbox, limits=Limits(timeout_seconds=1))
    try:
        started = time.monotonic()
        result = agent.run("go")
        assert result.stop_reason == "timeout"
        assert time.monotonic() - started < 50  # the command was stopped with the run
        assert not sandbox._running  # its container went with it
    finally:
        sandbox.close()
