"""A limit the user set holds whatever the model asks (the smaller of the two wins), and
for a sandboxed command's whole process tree, however many processes it starts: through
a cgroup, or tether's watchdog where none can be made."""

from __future__ import annotations

import asyncio
import os
import shutil
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import by_server_id
from tether import create_agent
from tether.backends.sandbox import LocalSandbox, UnsafeLocalShell, cgroups
from tether.messages import ToolCall
from tether.models import ScriptedModel


def test_the_model_cannot_lengthen_the_sandbox_timeout(tmp_path: Path) -> None:
    model = ScriptedModel(
        [
            [ToolCall("execute", {"command": "sleep 6", "timeout_seconds": 10**9}, id="long")],
            [ToolCall("execute", {"command": "sleep 6", "timeout_seconds": 1}, id="short")],
            "done",
        ]
    )
    agent = create_agent(model, backend=UnsafeLocalShell(tmp_path, timeout_seconds=2))
    result = agent.run("go")
    answers = by_server_id(result.messages)  # by the ids the script gave the calls
    assert "ran longer than 2 s" in answers["long"].text
    assert "ran longer than 1 s" in answers["short"].text  # shortening is allowed


async def test_a_backend_limit_holds_for_direct_calls_too(tmp_path: Path) -> None:
    shell = UnsafeLocalShell(tmp_path, timeout_seconds=1)
    result = await shell.execute("sleep 5", timeout_seconds=3600)
    assert result.timed_out
    assert "ran longer than 1 s" in result.output


# -- limits on a sandboxed command hold for its whole process tree ------------------

needs_bwrap = pytest.mark.skipif(shutil.which("bwrap") is None, reason="needs bubblewrap")
USER = 4242  # under root, the owner of the workspace the watchdog tests use
# Children each well below the per-process limits, together far above the tree's.
MANY_CHILDREN = (
    'for i in $(seq 1 14); do python3 -c \'import time; b = b"x" * (30 << 20); '
    "time.sleep(120)' & done; wait; echo all-ended"
)


@pytest.fixture(params=["cgroup", "watchdog"])
def limits_by(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Which of the two holds a tree: the kernel's cgroup, or tether's watchdog (forced
    by making cgroups unavailable)."""
    if request.param == "cgroup" and os.geteuid() != 0:
        pytest.skip("this process cannot make cgroups")
    if request.param == "watchdog":

        def unavailable(*args: object) -> cgroups.Cgroup:
            raise cgroups.CgroupUnavailable("switched off by the test")

        monkeypatch.setattr(cgroups, "make", unavailable)
    return str(request.param)


def sandbox_for(limits_by: str, workspace: Path, **options: Any) -> LocalSandbox:
    """A sandbox whose limits hold by `limits_by`. Under root, the watchdog one works on a
    workspace a user owns: root's own commands need a cgroup."""
    workspace.mkdir(parents=True, exist_ok=True)
    if limits_by == "watchdog" and os.geteuid() == 0:
        os.chown(workspace, USER, USER)
    sandbox = LocalSandbox(workspace, **options)
    assert sandbox.limits_by == limits_by
    return sandbox


@needs_bwrap
async def test_memory_holds_for_the_whole_tree(limits_by: str, tmp_path: Path) -> None:
    """14 children of 30 MB, each below the 64 MB a process may have: 420 MB in all."""
    sandbox = sandbox_for(limits_by, tmp_path / "ws", memory_mb=64, timeout_seconds=100)
    done = await sandbox.execute(MANY_CHILDREN)
    assert done.over_limit == "memory", done
    assert done.exit_code is None
    assert "all-ended" not in done.output
    assert "its processes together went over memory_mb (64 MB of memory)" in done.output


@needs_bwrap
async def test_what_fills_tmp_counts_as_memory(limits_by: str, tmp_path: Path) -> None:
    sandbox = sandbox_for(limits_by, tmp_path / "ws", memory_mb=64, timeout_seconds=100)
    done = await sandbox.execute(
        "head -c 100000000 /dev/zero > /tmp/fill; echo tmp=$(stat -c %s /tmp/fill); sleep 90"
    )
    assert done.over_limit == "memory", done
    assert not done.timed_out


@needs_bwrap
async def test_cpu_time_holds_for_the_whole_tree(limits_by: str, tmp_path: Path) -> None:
    """Four children that each burn 1.5 s of CPU, below the 2 s a process may: 6 s."""
    burn = "python3 -c 'import time\nwhile time.process_time() < 1.5: pass\ntime.sleep(120)'"
    sandbox = sandbox_for(
        limits_by, tmp_path / "ws", cpu_seconds=2, timeout_seconds=110, memory_mb=512
    )
    done = await sandbox.execute(f"for i in 1 2 3 4; do {burn} & done; wait; echo all-ended")
    assert done.over_limit == "cpu", done
    assert "its processes together used more than cpu_seconds (2 s)" in done.output


@needs_bwrap
async def test_processes_hold_for_the_whole_tree(limits_by: str, tmp_path: Path) -> None:
    sandbox = sandbox_for(limits_by, tmp_path / "ws", max_processes=20, timeout_seconds=60)
    done = await sandbox.execute(
        "python3 -c 'import os, time; time.sleep(3); "
        'print("running=%d" % sum(n.isdigit() for n in os.listdir("/proc")))\' & '
        "counter=$!; (for i in $(seq 1 60); do sleep 6 & done) 2>/dev/null; wait $counter"
    )
    running = int(done.output.split("running=")[1].split()[0])
    assert running <= 20 + 3, done.output  # bubblewrap's, the shell's, ls and grep
    if limits_by == "cgroup":
        assert "of its forks failed: it had max_processes (20) processes at once" in done.output


@needs_bwrap
@pytest.mark.skipif(os.geteuid() != 0, reason="makes cgroups")
async def test_a_cancelled_command_leaves_no_cgroup(tmp_path: Path) -> None:
    sandbox = LocalSandbox(tmp_path / "ws", timeout_seconds=60)
    before = _our_cgroups()
    running = asyncio.create_task(sandbox.execute("sleep 50"))
    for _ in range(2000):  # up to 20 s for it to start
        if _our_cgroups() - before:
            break
        await asyncio.sleep(0.01)
    assert _our_cgroups() - before, "the command never got a cgroup"
    running.cancel()
    with pytest.raises(asyncio.CancelledError):
        await running
    assert _our_cgroups() == before


@needs_bwrap
@pytest.mark.skipif(os.geteuid() != 0, reason="makes cgroups")
async def test_a_cgroup_left_by_a_killed_process_is_swept(tmp_path: Path) -> None:
    dead = _a_dead_pid()
    sandbox = LocalSandbox(tmp_path / "ws")
    probe = cgroups.make(1 << 26, 10)
    probe.remove()
    parents = {os.path.dirname(d) for d in probe.directories}
    left = [os.path.join(parent, f"tether-{dead}-0123456789ab") for parent in parents]
    for directory in left:
        os.mkdir(directory)
    done = await sandbox.execute("echo ran")
    assert done.output == "ran\n"
    assert not _any_exists(left)


def test_the_watchdog_holds_for_a_user_who_is_not_root(tmp_path: Path) -> None:
    """Without root nothing makes cgroups here: the watchdog holds, as that user."""
    if os.geteuid() != 0 or shutil.which("bwrap") is None:
        pytest.skip("switches to an unprivileged user; needs bubblewrap")
    base = Path(tempfile.mkdtemp(dir="/tmp"))  # pytest's is not open to other users
    (base / "ws").mkdir()
    for path in (base, base / "ws"):
        os.chown(path, NOBODY, NOBODY)
    script = textwrap.dedent(
        f"""
        import asyncio
        from tether.backends.sandbox import LocalSandbox
        sandbox = LocalSandbox({str(base / "ws")!r}, memory_mb=64, timeout_seconds=100)
        done = asyncio.run(sandbox.execute({MANY_CHILDREN!r}))
        print(sandbox.limits_by, done.over_limit)
        """
    )
    python = [sys.executable, "-c", script]
    ran = subprocess.run(
        ["setpriv", f"--reuid={NOBODY}", f"--regid={NOBODY}", "--clear-groups", "--", *python],
        capture_output=True,
        text=True,
        check=False,
        cwd=base,
        env={**os.environ, "HOME": str(base)},
        timeout=200,
    )
    shutil.rmtree(base)
    assert ran.returncode == 0, ran.stderr
    assert ran.stdout.split() == ["watchdog", "memory"]


NOBODY = 65534


def _our_cgroups() -> set[str]:
    """The cgroups this test process has made (named after its pid)."""
    found = set()
    for root in ("/sys/fs/cgroup/pids", "/sys/fs/cgroup/memory", "/sys/fs/cgroup"):
        for directory, names, _ in os.walk(root):
            found |= {
                os.path.join(directory, n) for n in names if n.startswith(f"tether-{os.getpid()}-")
            }
    return found


def _a_dead_pid() -> int:
    child = subprocess.Popen(["true"])
    child.wait()
    return child.pid


def _any_exists(paths: list[str]) -> bool:
    return any(os.path.exists(path) for path in paths)
