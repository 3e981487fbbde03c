"""What a sandboxed command cannot do: fill the host's memory through /tmp, make user
namespaces, setuid files or use keyrings, change or swap out .git, read .tether, gain
anything by running as root, or take the workspace from its owner."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path

import pytest

from tether import ConfigurationError
from tether.backends.sandbox import LocalSandbox
from tether.backends.sandbox.seccomp import command_filter

pytestmark = pytest.mark.skipif(shutil.which("bwrap") is None, reason="needs bubblewrap")
NOBODY = 65534
SYSCTL = "/proc/sys/vm/overcommit_ratio"


async def test_shm_is_bounded_and_dev_is_read_only(tmp_path: Path) -> None:
    """(What fills /tmp counts against memory_mb: see test_limits_hold.)"""
    sandbox = LocalSandbox(tmp_path / "ws", memory_mb=512)
    done = await sandbox.execute(
        "head -c 100000000 /dev/zero > /dev/shm/fill 2>/dev/null; "
        "echo shm=$(stat -c %s /dev/shm/fill); echo x > /dev/planted"
    )
    sizes = dict(line.split("=") for line in done.output.splitlines() if "=" in line)
    assert int(sizes["shm"]) <= 64 * 1024 * 1024
    assert "/dev/planted: Read-only file system" in done.output


async def test_commands_cannot_make_user_namespaces(tmp_path: Path) -> None:
    sandbox = LocalSandbox(tmp_path / "ws")
    done = await sandbox.execute(
        "unshare --user true && echo made-one; unshare -Ur id && echo made-root; "
        "python3 -c 'import os; os.unshare(os.CLONE_NEWUSER); print(\"made-py\")'; "
        'python3 -c \'import threading; t = threading.Thread(target=print, args=("threads",));'
        " t.start(); t.join()'"
    )
    assert "made-" not in done.output
    assert "Operation not permitted" in done.output
    assert "threads" in done.output  # clone3 falls back to clone: threads still work


async def test_git_is_read_only_and_cannot_be_swapped_out(project: Path) -> None:
    sandbox = LocalSandbox(project)
    done = await sandbox.execute(
        "echo '[core] fsmonitor = evil' >> .git/config; "
        "echo evil > .git/hooks/pre-commit; "
        "mv .git .git-old; rm -rf .git; "
        "cat .git/config; echo planted > src/app.py"
    )
    sandbox.close()
    assert (project / ".git" / "config").read_text() == "[core]\n"
    assert not (project / ".git" / "hooks" / "pre-commit").exists()
    assert not (project / ".git-old").exists()
    assert "[core]" in done.output  # readable: git log, git diff work
    assert (project / "src" / "app.py").read_text() == "planted\n"  # the rest is writable


async def test_tether_records_are_hidden_and_untouched(project: Path) -> None:
    sandbox = LocalSandbox(project)
    done = await sandbox.execute(
        "echo seen=$(ls -A .tether); cat .tether/runs.db; echo forged > .tether/runs.db; "
        "mv .tether t; for fd in /proc/self/fd/* /proc/1/fd/*; do cat $fd/runs.db; "
        "echo forged > $fd/runs.db; done 2>/dev/null; true"
    )
    sandbox.close()
    assert "seen=\n" in done.output  # an empty directory in its place
    assert "records" not in done.output
    assert (project / ".tether" / "runs.db").read_text() == "records"
    assert not (project / "t").exists()


@pytest.mark.skipif(os.geteuid() != 0, reason="runs as root")
async def test_a_root_owned_workspace_is_never_lent_and_root_gains_nothing(project: Path) -> None:
    """As root on a directory root owns, commands run as root with no capabilities
    (a cgroup bounds their processes); nothing in the workspace changes owner."""
    with LocalSandbox(project) as sandbox:
        assert sandbox.limits_by == "cgroup"
        done = await sandbox.execute(
            "id -u; grep -E '^Cap(Eff|Prm|Bnd|Amb)' /proc/self/status; stat -c %u src/app.py; "
            "mkdir -p made/deep && echo x > made/deep/file"
        )
        await sandbox.write("/by_the_host.txt", b"x")
    lines = done.output.splitlines()
    assert lines[0] == "0"
    assert all(line.endswith("0000000000000000") for line in lines[1:5]), lines
    assert lines[5] == "0"  # not lent to anyone while it ran
    assert _owners(project) == {0}


@pytest.mark.skipif(os.geteuid() != 0, reason="runs as root")
async def test_root_without_capabilities_cannot_reach_roots_things(project: Path) -> None:
    """What uid 0 could do by file modes alone, with no capability: write sysctls, read
    the kernel's memory maps and log, make a setuid-root file for a host user to run,
    read root's keys, fill the sandbox's own root file system."""
    sandbox = LocalSandbox(project)
    before = _read(SYSCTL)
    done = await sandbox.execute(
        "echo 51 > /proc/sys/vm/overcommit_ratio; echo 1 > /proc/sys/vm/drop_caches; "
        "cat /proc/kpageflags /proc/slabinfo /proc/kmsg | head -c 100 | wc -c; "
        "cp /bin/true rootshell && chmod u+s rootshell; chmod 4755 rootshell; "
        "chmod g+s rootshell; python3 -c 'import os; os.chmod(\"rootshell\", 0o6755)'; "
        'python3 -c \'import os; fd = os.open("made", os.O_CREAT | os.O_WRONLY, 0o6755); '
        'os.write(fd, open("/bin/true", "rb").read())\'; '
        'python3 -c \'import os; os.mknod("node", 0o106755); '
        'open("node", "ab").write(b"x")\'; '
        "python3 -c 'import ctypes; l = ctypes.CDLL(None, use_errno=True); "
        'print("keyctl", l.syscall(250, 0, -4, 0, 0, 0), ctypes.get_errno())\'; '
        "touch /planted; echo done"
    )
    assert _read(SYSCTL) == before
    assert done.output.count("Read-only file system") >= 3, done.output  # sysctls, /planted
    assert "\n0\n" in done.output  # nothing read from the root-only files
    assert not (project / "rootshell").stat().st_mode & 0o6000
    for name in ("made", "node"):  # made with those bits: refused
        assert not (project / name).exists(), name
    assert "keyctl -1 1\n" in done.output  # EPERM
    assert not _exists("/planted")
    assert done.output.endswith("done\n")


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to own the workspace as another")
async def test_under_root_a_users_workspace_runs_as_that_user(project: Path) -> None:
    user = 4242
    for current, names, files in os.walk(project):
        for name in [".", *names, *files]:
            os.chown(os.path.join(current, name), user, user, follow_symlinks=False)
    sandbox = LocalSandbox(project)
    done = await sandbox.execute("id -u; echo new > new.txt")
    assert done.output.split()[0] == str(user)
    assert os.stat(project / "new.txt").st_uid == user
    assert os.stat(project / "src" / "app.py").st_uid == user  # nothing was lent or taken
    await sandbox.write("/host.txt", b"x")
    assert os.stat(project / "host.txt").st_uid == user


@pytest.mark.skipif(os.geteuid() != 0, reason="switches to an unprivileged user")
def test_the_unprivileged_sandbox_has_the_same_boundaries() -> None:
    """What a user who is not root gets: bubblewrap in a user namespace."""
    tmp_path = Path(tempfile.mkdtemp(dir="/tmp"))  # pytest's is not open to other users
    workspace = tmp_path / "ws"
    (workspace / ".git").mkdir(parents=True)
    (workspace / ".git" / "config").write_text("[core]\n")
    for path in (tmp_path, workspace, workspace / ".git", workspace / ".git" / "config"):
        os.chown(path, NOBODY, NOBODY)
    script = textwrap.dedent(
        f"""
        import asyncio, os
        from tether.backends.sandbox import LocalSandbox
        sandbox = LocalSandbox({str(workspace)!r}, memory_mb=32)
        done = asyncio.run(sandbox.execute(
            "id -u; unshare --user true && echo made-one; echo x >> .git/config; "
            "head -c 50000000 /dev/zero > /tmp/fill; echo ok > mine.txt; "
            "mkdir -p locked/x/.git && chmod 000 locked"))
        print(done.output)
        """
    )
    python = [sys.executable, "-c", script]
    ran = subprocess.run(
        ["setpriv", f"--reuid={NOBODY}", f"--regid={NOBODY}", "--clear-groups", "--", *python],
        capture_output=True,
        text=True,
        check=False,
        cwd=tmp_path,
        env={**os.environ, "HOME": str(tmp_path)},
    )
    assert ran.returncode == 0, ran.stderr
    output = ran.stdout
    assert output.split()[0] == str(NOBODY)
    assert "made-one" not in output
    assert "Read-only file system" in output
    assert "No space left on device" in output
    assert (workspace / ".git" / "config").read_text() == "[core]\n"
    assert (workspace / "mine.txt").read_text() == "ok\n"
    assert "tether renamed" in output  # the .git a command hid in a locked directory
    (disabled,) = (workspace / "locked" / "x").iterdir()
    assert disabled.name.startswith(".git.disabled-by-tether-")
    shutil.rmtree(tmp_path)


def test_protected_paths_are_checked(tmp_path: Path) -> None:
    with pytest.raises(ConfigurationError, match="cannot hold '/'"):
        LocalSandbox(tmp_path / "ws", read_only=["/"])
    with pytest.raises(ConfigurationError, match="must be a list"):
        LocalSandbox(tmp_path / "ws", hidden="/.tether")


def test_the_filter_is_refused_for_an_unknown_machine() -> None:
    with pytest.raises(ConfigurationError, match="not of sparc64"):
        command_filter("sparc64")
    assert len(command_filter("aarch64")) < len(command_filter("x86_64"))  # no chmod there


def _owners(root: Path) -> set[int]:
    return {p.lstat().st_uid for p in [root, *root.rglob("*")]}


def _read(path: str) -> str:
    return Path(path).read_text()


def _exists(path: str) -> bool:
    return Path(path).exists()
