"""One command of a `LocalSandbox`: what is set up before it, watched while it runs,
and put right after it, however it ends (done, killed, timed out, cancelled).

Before: the workspace's lock is taken (commands in one workspace run one at a time, in
every process, so that none can move what the next one's mounts protect while they are
being made), every git directory is found and opened to be mounted read-only, a cgroup
is made where one can be, and a record of the command is left in `.tether/` (hidden
from commands).

After: the whole tree is killed and waited for, the cgroup removed, the git
directories the command made disabled, the record deleted and the lock released. A
record that outlives its process (killed with `kill -9` mid-command) is found by the
next `LocalSandbox` on the workspace, or its next command, which disables what that
command made.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import resource
import signal
import stat
import subprocess
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING

from tether.backends.base import finished
from tether.backends.sandbox import cgroups, gitdirs, records
from tether.backends.sandbox.system import seccomp_fd
from tether.backends.sandbox.watchdog import Limit, TreeLimits, Watchdog

if TYPE_CHECKING:
    from tether.backends.sandbox.local import LocalSandbox

__all__ = ["Command", "Outcome", "git_refusal"]

_MOUNT_FLAGS = getattr(os, "O_PATH", os.O_RDONLY) | os.O_CLOEXEC | os.O_NOFOLLOW
_MAX_GIT_MOUNTS = 1_000
# Waits for "go" (see `Command.start`), joins the cgroup (its procs files are the first
# arguments, after their count) and becomes bubblewrap.
_STARTER = (
    'read -r go || exit 125; n=$1; shift; while [ "$n" -gt 0 ]; do '
    'echo $$ > "$1" || exit 125; shift; n=$((n - 1)); done; exec "$@" </dev/null'
)


@dataclass(frozen=True, slots=True)
class Outcome:
    """How a command's tree ended: the limit it went over (with why, in words), and what
    else the model and the person should know."""

    over: Limit | None = None
    killed: str | None = None
    notes: tuple[str, ...] = ()


class Command:
    """One command's run; `prepare`, `start` and, always, `finish`."""

    def __init__(self, sandbox: LocalSandbox, limit: float) -> None:
        self.sandbox, self.limit = sandbox, limit
        self.deadline = time.monotonic() + limit
        self.process: asyncio.subprocess.Process | None = None
        self.cgroup: cgroups.Cgroup | None = None
        self.processes_allowed = sandbox.max_processes
        self.known: gitdirs.GitScan | None = None
        self._hidden: set[str] = set()  # the hidden directories this command cannot see
        self._lock: int | None = None
        self._passed: list[int] = []  # fds bubblewrap gets, closed here once it has them
        self._mounts: list[tuple[str, str, str]] = []  # (path, option, fd)
        self._info: tuple[int, int] | None = None
        self._pidfd: int | None = None
        self._watchdog: Watchdog | None = None
        self._record: str | None = None
        self._notes: list[str] = []

    @property
    def info_fd(self) -> int:
        assert self._info is not None
        return self._info[1]

    def remaining(self) -> float:
        return max(0.0, self.deadline - time.monotonic())

    # -- before ------------------------------------------------------------------

    async def prepare(self) -> str | None:
        """Set everything up; None, or why the command cannot run."""
        self._lock = await records.lock_workspace(self.sandbox.host, self.deadline)
        if self._lock is None:
            return f"another command in this workspace was still running after {self.limit:g} s"
        return await finished(asyncio.to_thread(self._set_up))

    def _set_up(self) -> str | None:
        sandbox = self.sandbox
        self._notes += [*sandbox.recovered, *records.recover(sandbox.host)]
        sandbox.recovered.clear()
        self._hidden = {path for path in sandbox.hidden if _is_dir(sandbox, path)}
        self.known = known = gitdirs.scan(sandbox.host, frozenset(self._hidden))
        refusal = git_refusal(known)
        if refusal is None:
            refusal = self._open_mounts(known)
        if refusal is not None:
            return refusal
        if sandbox.limits_by == "cgroup":
            try:
                self.cgroup = cgroups.make(sandbox.memory_mb * 1024 * 1024, sandbox.max_processes)
            except cgroups.CgroupUnavailable as why:
                return f"no cgroup could be made to hold its limits ({why})"
        # Processes the user already runs count against a per-user limit too.
        self.processes_allowed = sandbox.max_processes + _processes_of(sandbox.uid)
        self._record = records.write(sandbox.host, known, self._hidden)
        self._info = os.pipe()
        return None

    def _open_mounts(self, known: gitdirs.GitScan) -> str | None:
        """Open what is mounted over the workspace: each git entry read-only, checked to
        be the one scanned; the `read_only` and `hidden` paths when they exist."""
        host = self.sandbox.host
        self._passed += [seccomp_fd(), host.open("/", _MOUNT_FLAGS)]
        for path, identity in known.paths.items():
            try:
                self._passed.append(host.open(path, _MOUNT_FLAGS))
            except OSError:
                return f"{path} changed while the command was being set up; run it again"
            if gitdirs.identity(os.fstat(self._passed[-1])) != identity:
                return f"{path} changed while the command was being set up; run it again"
            self._mounts.append((path, "--ro-bind-fd", str(self._passed[-1])))
        for path in self.sandbox.read_only:
            with contextlib.suppress(OSError):  # absent, or a symlink: nothing to protect
                self._passed.append(host.open(path, _MOUNT_FLAGS))
                self._mounts.append((path, "--ro-bind-fd", str(self._passed[-1])))
        # Hidden paths are covered by path, not fd: bubblewrap leaves an fd it does not
        # mount from open in the command, which could reach the original through it.
        for path in self.sandbox.hidden:
            if path in self._hidden:
                self._mounts.append((path, "--tmpfs", ""))
            elif _is_file(self.sandbox, path):
                self._mounts.append((path, "--ro-bind", "/dev/null"))
        return None

    def mounts(self, workspace: str) -> list[str]:
        """bubblewrap's arguments for the filter and the workspace's mounts, outer first
        (a hidden directory after what it hides; bubblewrap checks each fd's mount is that
        very file, and a mount point cannot be renamed from inside)."""
        seccomp, top = self._passed[:2]
        args = ["--seccomp", str(seccomp), "--bind-fd", str(top), workspace]
        for path, option, fd in sorted(self._mounts, key=lambda m: (m[0].count("/"), m[1])):
            if option == "--tmpfs":
                args += ["--size", "65536", "--tmpfs", workspace + path]
            else:
                args += [option, fd, workspace + path]  # fd: an fd, or /dev/null
        return args

    # -- while -------------------------------------------------------------------

    async def start(self, argv: list[str]) -> asyncio.subprocess.Process:
        """Start `argv` (bubblewrap), in the cgroup when there is one."""
        sandbox = self.sandbox
        procs = self.cgroup.procs_files() if self.cgroup is not None else []
        assert self._info is not None
        try:
            self.process = process = await asyncio.create_subprocess_exec(
                *["/bin/sh", "-c", _STARTER, "tether-start", str(len(procs)), *procs, *argv],
                cwd=sandbox.root,
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                start_new_session=True,
                pass_fds=(*self._passed, self.info_fd),
            )
        finally:
            for fd in (*self._passed, self.info_fd):
                os.close(fd)
            self._passed.clear()
            self._info = (self._info[0], -1)  # the write end is bubblewrap's alone now
        # It waits for a line before it goes on, so it is still there (and its number
        # still its own) while it is pinned with a pidfd: `_kill` can never hit another.
        self._pidfd = os.pidfd_open(process.pid)
        assert process.stdin is not None
        process.stdin.write(b"go\n")
        process.stdin.close()
        assert self._info is not None
        limits = TreeLimits(sandbox.memory_mb * 1024 * 1024, sandbox.cpu_seconds)
        self._watchdog = Watchdog(self._info[0], limits, self.cgroup, self._kill)
        return self.process

    def _kill(self) -> None:
        """End the whole tree: bubblewrap, whose sandbox dies with it, and the cgroup."""
        if self._pidfd is not None:
            with contextlib.suppress(OSError):
                signal.pidfd_send_signal(self._pidfd, signal.SIGKILL)
        if self.cgroup is not None:
            self.cgroup.kill()

    # -- after -------------------------------------------------------------------

    async def finish(self) -> Outcome:
        if self.process is not None:
            self._kill()  # what the command left running goes too
            if self.process.stdin is not None:
                self.process.stdin.close()  # a starter never told to go gives up
            await finished(self.process.wait())
        return await finished(asyncio.to_thread(self._tear_down))

    def _tear_down(self) -> Outcome:
        over, killed = None, None
        try:
            if self._watchdog is not None:
                over = self._watchdog.stop()
                killed = _over_text(over, self.sandbox)
            elif self._info is not None:  # no watchdog took the read end
                for fd in self._info:
                    if fd >= 0:
                        os.close(fd)
            self._wait_gone()
            if self.process is not None and self.known is not None:
                self._disable_new(self.known)
            if self._record is not None:
                records.drop(self._record)
        finally:
            # No kill may use the pidfd once its number can be another's.
            held = [fd for fd in (self._pidfd, self._lock, *self._passed) if fd is not None]
            self._pidfd, self._lock, self._passed = None, None, []
            for fd in held:
                os.close(fd)  # the lock too: released once all is put right
        return Outcome(over, killed, tuple(self._notes))

    def _wait_gone(self) -> None:
        if self.cgroup is not None:
            refused = self.cgroup.forks_refused()
            if refused:
                self._notes.append(
                    f"{refused} of its forks failed: it had max_processes "
                    f"({self.sandbox.max_processes}) processes at once"
                )
            gone = self.cgroup.remove()
        else:
            gone = self._watchdog is None or self._watchdog.wait_gone()
        if not gone:
            self._notes.append("tether could not make sure every process of it had ended")

    def _disable_new(self, known: gitdirs.GitScan) -> None:
        done = gitdirs.disable_new(self.sandbox.host, frozenset(self._hidden), known)
        self._notes += gitdirs.notes(done)


def _over_text(over: Limit | None, sandbox: LocalSandbox) -> str | None:
    if over == "memory":
        return f"its processes together went over memory_mb ({sandbox.memory_mb} MB of memory)"
    if over == "cpu":
        return f"its processes together used more than cpu_seconds ({sandbox.cpu_seconds} s)"
    return None


def git_refusal(known: gitdirs.GitScan) -> str | None:
    """Why a command cannot run with the git entries `known`, or None."""
    if known.unprotectable:
        return (
            "tether keeps every .git in the workspace read-only to commands, and cannot "
            f"here: {'; '.join(known.unprotectable)}. Replace a symbolic link named .git "
            "with a `gitdir: PATH` file"
        )
    if gitdirs.MOVED in known.unsearched:
        return "the workspace changed while it was searched for git directories; run it again"
    most = min(_MAX_GIT_MOUNTS, resource.getrlimit(resource.RLIMIT_NOFILE)[0] - 64)
    if len(known.paths) > most:
        return f"the workspace holds more than {most} git directories to keep read-only"
    return None


def _processes_of(uid: int) -> int:
    count = 0
    for entry in os.scandir("/proc"):
        if entry.name.isdigit():
            with contextlib.suppress(OSError):
                count += entry.stat().st_uid == uid
    return count


def _is_dir(sandbox: LocalSandbox, path: str) -> bool:
    try:
        found = sandbox.host.lstat(path)
    except OSError:
        return False
    return found is not None and stat.S_ISDIR(found.st_mode)


def _is_file(sandbox: LocalSandbox, path: str) -> bool:
    try:
        found = sandbox.host.lstat(path)
    except OSError:
        return False
    return found is not None and stat.S_ISREG(found.st_mode)
