"""What a sandboxed command cannot do: fill the host's memory through /tmp, make user
namespaces, change or swap out .git, read .tether, or keep the workspace for itself."""

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
from tether.backends.sandbox.local import NOBODY
from tether.backends.sandbox.seccomp import no_user_namespaces

pytestmark = pytest.mark.skipif(shutil.which("bwrap") is None, reason="needs bubblewrap")


@pytest.fixture
def project(tmp_path: Path) -> Path:
    """A workspace with a git directory and run records, as the `tether` command has."""
    root = tmp_path / "project"
    (root / ".git" / "hooks").mkdir(parents=True)
    (root / ".git" / "config").write_text("[core]\n")
    (root / ".tether").mkdir()
    (root / ".tether" / "runs.db").write_text("records")
    (root / "src").mkdir()
    (root / "src" / "app.py").write_text("print('hi')\n")
    return root


async def test_tmp_and_shm_are_bounded_and_dev_is_read_only(tmp_path: Path) -> None:
    sandbox = LocalSandbox(tmp_path / "ws", memory_mb=64)
    done = await sandbox.execute(
        "head -c 100000000 /dev/zero > /tmp/fill 2>/dev/null; echo tmp=$(stat -c %s /tmp/fill); "
        "head -c 100000000 /dev/zero > /dev/shm/fill 2>/dev/null; "
        "echo shm=$(stat -c %s /dev/shm/fill); echo x > /dev/planted"
    )
    sizes = dict(line.split("=") for line in done.output.splitlines() if "=" in line)
    assert int(sizes["tmp"]) <= 64 * 1024 * 1024  # memory_mb sizes /tmp
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
        "mv .tether t"
    )
    sandbox.close()
    assert "seen=\n" in done.output  # an empty directory in its place
    assert "records" not in done.output
    assert (project / ".tether" / "runs.db").read_text() == "records"
    assert not (project / "t").exists()


@pytest.mark.skipif(os.geteuid() != 0, reason="ownership is lent only by root")
async def test_a_root_owned_workspace_is_lent_to_nobody_and_given_back(project: Path) -> None:
    with LocalSandbox(project) as sandbox:
        assert os.stat(project / "src" / "app.py").st_uid == NOBODY
        assert os.stat(project / ".git" / "config").st_uid == 0  # never lent
        assert os.stat(project / ".tether").st_uid == 0
        await sandbox.execute("mkdir -p made/deep && echo x > made/deep/file")
        await sandbox.write("/by_the_host.txt", b"x")
        assert os.stat(project / "by_the_host.txt").st_uid == NOBODY  # like its directory
    for path in ("", "src", "src/app.py", "made", "made/deep/file", "by_the_host.txt"):
        assert os.stat(project / path).st_uid == 0, path


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to own the workspace as another")
async def test_under_root_a_users_workspace_runs_as_that_user(project: Path) -> None:
    user = 4242
    for current, names, files in os.walk(project):
        for name in [".", *names, *files]:
            os.chown(os.path.join(current, name), user, user, follow_symlinks=False)
    sandbox = LocalSandbox(project)
    done = await sandbox.execute("id -u; echo new > new.txt")
    sandbox.close()
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
            "head -c 50000000 /dev/zero > /tmp/fill; echo ok > mine.txt"))
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
    shutil.rmtree(tmp_path)


def test_the_filter_is_refused_for_an_unknown_machine() -> None:
    with pytest.raises(ConfigurationError, match="not of sparc64"):
        no_user_namespaces("sparc64")
    assert len(no_user_namespaces("x86_64")) == 12 * 8  # twelve BPF instructions


def test_protected_paths_are_checked(tmp_path: Path) -> None:
    with pytest.raises(ConfigurationError, match="cannot hold '/'"):
        LocalSandbox(tmp_path / "ws", read_only=["/"])
    with pytest.raises(ConfigurationError, match="must be a list"):
        LocalSandbox(tmp_path / "ws", hidden="/.tether")


@pytest.mark.skipif(os.geteuid() != 0, reason="ownership is lent only by root")
def test_two_sandboxes_on_one_workspace_give_it_back_once_both_close(project: Path) -> None:
    first, second = LocalSandbox(project), LocalSandbox(project)
    first.close()
    assert os.stat(project / "src" / "app.py").st_uid == NOBODY  # the second still works
    second.close()
    assert os.stat(project / "src" / "app.py").st_uid == 0
    assert os.stat(project).st_uid == 0
