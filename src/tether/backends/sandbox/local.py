"""Commands on this machine: isolated by bubblewrap (`LocalSandbox`), or not at all
(`UnsafeLocalShell`).

The workspace directory is the backend's `/` for the file tools and `/workspace` (the
current directory) for commands. A `LocalSandbox` command sees the system read-only, a
private and size-limited `/tmp`, a read-only `/proc` of its own processes, no network
unless asked and none of the host's processes; it cannot make user namespaces or
setuid files, nor use kernel keyrings (see `seccomp`). Every `.git` and git directory
in the workspace is read-only to it, and those it makes are disabled once it ends (see
`gitdirs`); `.tether` (the run records) is hidden.

Its limits hold for its whole process tree (see `command`): a cgroup bounds its memory
and processes where this process can make one, a watchdog sums its memory where not,
and its CPU time either way; per-process rlimits stay as a backstop. Commands run as
the user this process runs as; under root, as the workspace's owner with no
capabilities left. That owner may be root only where a cgroup holds the tree, since
the kernel holds root to no process limit otherwise: `LocalSandbox` refuses to start
there. Nothing in the workspace ever changes owner.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import os
import signal
import subprocess
from collections.abc import Sequence
from pathlib import Path
from types import TracebackType
from typing import Literal

from tether.backends.base import DEFAULT_MAX_FILE_BYTES
from tether.backends.filesystem import FilesystemBackend
from tether.backends.hostfs import config_home, state_home
from tether.backends.paths import clean
from tether.backends.sandbox import cgroups
from tether.backends.sandbox.base import ExecResult
from tether.backends.sandbox.command import Command, Outcome
from tether.backends.sandbox.output import OUTPUT_DIR, Output
from tether.backends.sandbox.records import recover_at_start
from tether.backends.sandbox.system import bwrap_path, probe
from tether.errors import ConfigurationError

__all__ = ["OUTPUT_DIR", "LocalSandbox", "UnsafeLocalShell"]

WORKSPACE = "/workspace"
_LIMIT_SIGNALS = {signal.SIGKILL, signal.SIGXCPU, signal.SIGXFSZ, signal.SIGSEGV}
_SHM_MB = 64
_SYSTEM_DIRS = ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32")
_ETC = (
    "alternatives",
    "ca-certificates",
    "ssl",
    "ld.so.cache",
    "ld.so.conf",
    "ld.so.conf.d",
    "passwd",
    "group",
    "nsswitch.conf",
    "hosts",
    "localtime",
    "mime.types",
)


class _Shell(FilesystemBackend):
    """What both local shells share: the workspace files and running a command."""

    def __init__(
        self,
        workspace: str | os.PathLike[str],
        *,
        timeout_seconds: float = 120,
        max_output_chars: int = 30_000,
        max_file_bytes: int = DEFAULT_MAX_FILE_BYTES,
    ) -> None:
        Path(workspace).mkdir(parents=True, exist_ok=True)
        super().__init__(workspace, virtual_mode=True, max_file_bytes=max_file_bytes)
        if timeout_seconds <= 0 or max_output_chars < 100:
            raise ConfigurationError(
                "timeout_seconds must be positive and max_output_chars at least 100"
            )
        self.timeout_seconds = timeout_seconds
        self.max_output_chars = max_output_chars

    async def upload(self, path: str, data: bytes) -> None:
        await self.write(path, data)

    async def download(self, path: str) -> bytes:
        return await self.read(path)

    def _limit(self, timeout_seconds: float | None) -> float:
        # The caller (the model, through `execute`) can shorten the limit, never lengthen it.
        return min(self.timeout_seconds, timeout_seconds or self.timeout_seconds)

    async def execute(self, command: str, *, timeout_seconds: float | None = None) -> ExecResult:
        limit = self._limit(timeout_seconds)
        process = await asyncio.create_subprocess_exec(
            "/bin/sh",
            "-c",
            command,
            cwd=self.root,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            start_new_session=True,  # its own process group, killed as a whole
        )
        output = Output(self.host, self.max_output_chars)
        try:
            timed_out = await _drain(process, output, limit)
        finally:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(process.pid, signal.SIGKILL)  # and what it left in its group
            await process.wait()
            output.close()
        return _result(output, process.returncode, Outcome(), limit=limit, timed_out=timed_out)


class UnsafeLocalShell(_Shell):
    """Runs commands directly on this machine, in the workspace directory, with no
    isolation at all: a command can read, change or delete anything the Python process
    can, and use the network. Only for code you would run yourself."""


class LocalSandbox(_Shell):
    """The workspace directory, with commands run inside bubblewrap (`bwrap`).

    `network=True` lets commands use the host's network. `memory_mb`, `cpu_seconds` and
    `max_processes` bound one command with everything it starts (`memory_mb` also sizes
    its `/tmp`); `limits_by` says what holds them here: `"cgroup"` (the kernel) or
    `"watchdog"` (tether, looking every tenth of a second). `max_output_chars` bounds
    what the model sees of its output (the rest is saved under /large_tool_results/).
    Every `.git` and git directory, at any depth, is read-only to commands, and one a
    command makes is disabled when it ends; `read_only` paths are also read-only, and
    `hidden` ones (default `/.tether`) replaced by an empty directory.
    """

    def __init__(
        self,
        workspace: str | os.PathLike[str],
        *,
        network: bool = False,
        timeout_seconds: float = 120,
        memory_mb: int = 2_048,
        cpu_seconds: int = 120,
        max_processes: int = 256,
        max_output_chars: int = 30_000,
        max_file_bytes: int = DEFAULT_MAX_FILE_BYTES,
        read_only: Sequence[str] = (),
        hidden: Sequence[str] = ("/.tether",),
    ) -> None:
        super().__init__(
            workspace,
            timeout_seconds=timeout_seconds,
            max_output_chars=max_output_chars,
            max_file_bytes=max_file_bytes,
        )
        if min(memory_mb, cpu_seconds, max_processes) <= 0:
            raise ConfigurationError("memory_mb, cpu_seconds and max_processes must be positive")
        self.network = network
        self.memory_mb = memory_mb
        self.cpu_seconds = cpu_seconds
        self.max_processes = max_processes
        self.read_only = _protected_paths(read_only, "read_only")
        self.hidden = (*_protected_paths(hidden, "hidden"), *tethers_own(self.root))
        self.bwrap = bwrap_path()
        self.uid, self.gid = _sandbox_user(self.root)
        self.limits_by: Literal["cgroup", "watchdog"] = "watchdog"
        try:
            cgroups.make(memory_mb * 1024 * 1024, max_processes).remove()
            self.limits_by = "cgroup"
        except cgroups.CgroupUnavailable as why:
            if os.geteuid() == 0 and self.uid == 0:
                raise ConfigurationError(
                    f"LocalSandbox will not run commands as root here: root owns {self.root}, "
                    f"and without a cgroup ({why}) nothing bounds how many processes root "
                    "starts. Run tether as a normal user, give the directory to one (chown), "
                    "or use UnsafeLocalShell if you accept no isolation (the CLI's --no-sandbox "
                    "leaves execute out instead)."
                ) from None
        probe((self.bwrap, *self._namespaces(), *self._system()))
        # What a command of a tether killed mid-way made: told with the next result.
        self.recovered: list[str] = recover_at_start(self.host)

    def close(self) -> None:
        """Nothing to give back: the workspace never changes owner. Kept so that
        `with LocalSandbox(...)` and `close()` work as they did."""

    def __enter__(self) -> LocalSandbox:
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.close()

    async def execute(self, command: str, *, timeout_seconds: float | None = None) -> ExecResult:
        limit = self._limit(timeout_seconds)
        run = Command(self, limit)
        output = Output(self.host, self.max_output_chars)
        refusal, timed_out = None, False
        try:
            refusal = await run.prepare()
            if refusal is None:
                process = await run.start(self._argv(command, run))
                timed_out = await _drain(process, output, run.remaining())
        finally:
            outcome = await run.finish()  # whatever happened: the lock is released here
            output.close()
        if refusal is not None:
            notes = "".join(f"\n[{text}]" for text in outcome.notes)
            return ExecResult(output=f"[not run: {refusal}]{notes}", exit_code=None)
        code = None if run.process is None else run.process.returncode
        return _result(output, code, outcome, limit=limit, timed_out=timed_out)

    def _argv(self, command: str, run: Command) -> list[str]:
        return [
            # Per process, for bubblewrap's own processes too: a backstop to what holds
            # for the tree (the command can reach the sandbox's first process).
            "/usr/bin/prlimit",
            f"--as={self.memory_mb * 1024 * 1024}",
            f"--cpu={self.cpu_seconds}",
            f"--fsize={self.max_file_bytes * 10}",
            f"--nproc={run.processes_allowed}",
            "--",
            self.bwrap,
            *self._namespaces(),
            *self._system(),
            *run.mounts(WORKSPACE),
            "--remount-ro", "/",  # its own root: nothing to fill there
            "--info-fd", str(run.info_fd),
            "--chdir", WORKSPACE,
            "--",
            *self._as_user(),
            "/bin/sh", "-c", command,
        ]  # fmt: skip

    def _as_user(self) -> list[str]:
        """Under root, the command drops to the workspace's owner (root too, maybe) with no
        capabilities, and none to gain by running anything: root is not special to exec."""
        if os.geteuid() != 0:
            return []
        return [
            "/usr/bin/setpriv",
            f"--reuid={self.uid}",
            f"--regid={self.gid}",
            "--clear-groups",
            "--inh-caps=-all",
            "--bounding-set=-all",
            "--securebits=+noroot,+noroot_locked,+no_setuid_fixup,+no_setuid_fixup_locked",
            "--",
        ]

    def _namespaces(self) -> list[str]:
        if os.geteuid() == 0:  # no user namespace: the command's user is really that user
            args = ["--unshare-ipc", "--unshare-pid", "--unshare-uts", "--unshare-cgroup-try"]
            return args + ([] if self.network else ["--unshare-net"])
        return ["--unshare-all", *(["--share-net"] if self.network else [])]

    def _system(self) -> list[str]:
        """The read-only system, a read-only /proc, a read-only /dev, and a private /tmp and
        /dev/shm, sized on their own as a cgroup may not hold them."""
        args: list[str] = []
        for directory in _SYSTEM_DIRS:
            if os.path.islink(directory):
                args += ["--symlink", os.readlink(directory), directory]
            elif os.path.isdir(directory):
                args += ["--ro-bind", directory, directory]
        for name in (*_ETC, *(("resolv.conf",) if self.network else ())):
            args += ["--ro-bind-try", f"/etc/{name}", f"/etc/{name}"]
        shm = min(_SHM_MB, self.memory_mb) * 1024 * 1024
        args += ["--proc", "/proc"]
        # What /proc keeps for root alone (kernel memory maps, the kernel log) is covered:
        # a command may run as root, without capabilities.
        for name in _root_only_proc_files():
            args += ["--ro-bind", "/dev/null", f"/proc/{name}"]
        args += [
            "--remount-ro", "/proc",  # /proc/sys: root's sysctls are root's by file mode alone
            "--dev", "/dev",
            "--size", str(shm), "--perms", "1777", "--tmpfs", "/dev/shm",
            "--remount-ro", "/dev",
            "--size", str(self.memory_mb * 1024 * 1024), "--perms", "1777", "--tmpfs", "/tmp",
            "--hostname", "sandbox",
            "--die-with-parent",
            "--new-session",
            "--clearenv",
            "--setenv", "PATH", "/usr/local/bin:/usr/bin:/bin",
            "--setenv", "HOME", WORKSPACE,
            "--setenv", "TMPDIR", "/tmp",
            "--setenv", "LANG", "C.UTF-8",
        ]  # fmt: skip
        return args


async def _drain(process: asyncio.subprocess.Process, output: Output, limit: float) -> bool:
    """Read the command's output until it ends; True when `limit` seconds ran out first."""
    try:
        async with asyncio.timeout(limit):
            assert process.stdout is not None
            while chunk := await process.stdout.read(65_536):
                output.add(chunk)
            await process.wait()
    except TimeoutError:
        return True
    return False


def _result(
    output: Output, code: int | None, outcome: Outcome, *, limit: float, timed_out: bool
) -> ExecResult:
    # The shell reports a child killed by a signal as 128 + the signal's number.
    signalled = code is not None and code - 128 in _LIMIT_SIGNALS
    killed = timed_out or outcome.killed is not None or signalled or code is None or code < 0
    if timed_out:
        note = f"\n[killed: the command ran longer than {limit:g} s]"
    elif outcome.killed is not None:
        note = f"\n[killed: {outcome.killed}]"
    elif signalled:
        assert code is not None
        note = (
            f"\n[killed by signal {code - 128}: the command probably hit a limit of the "
            "sandbox (CPU time, memory or file size)]"
        )
    else:
        note = ""
    return ExecResult(
        output=output.text() + note + "".join(f"\n[{text}]" for text in outcome.notes),
        exit_code=None if killed else code,
        truncated=output.truncated,
        timed_out=timed_out,
        full_output=output.virtual_path,
        over_limit=outcome.over,
    )


def tethers_own(root: Path) -> tuple[str, ...]:
    """tether's directories of the user's (settings, trust, the sandbox's records, the
    seccomp profile) that lie in the workspace `root`, as in a workspace that is the home
    directory: made now, so that commands are kept from them from the first on."""
    found = []
    for home in (config_home(), state_home()):
        directory = Path(home, "tether").absolute()
        if directory.is_relative_to(root):
            directory.mkdir(parents=True, exist_ok=True, mode=0o700)
            found.append("/" + directory.relative_to(root).as_posix())
    return tuple(found)


def _protected_paths(paths: Sequence[str], name: str) -> tuple[str, ...]:
    if isinstance(paths, str):
        raise ConfigurationError(f"{name} must be a list of paths, got the string {paths!r}")
    cleaned = tuple(clean(p) for p in paths)
    if "/" in cleaned:
        raise ConfigurationError(f"{name} cannot hold '/', the whole workspace")
    return cleaned


def _sandbox_user(root: Path) -> tuple[int, int]:
    """Who commands run as: this process's user; under root, the workspace's owner."""
    if os.geteuid() != 0:
        return os.geteuid(), os.getegid()
    owner = os.stat(root)
    return owner.st_uid, owner.st_gid


@functools.cache
def _root_only_proc_files() -> tuple[str, ...]:
    """The files at the top of /proc that only root may read."""
    names = []
    with os.scandir("/proc") as entries:
        for entry in entries:
            with contextlib.suppress(OSError):
                st = entry.stat(follow_symlinks=False)
                if entry.is_file(follow_symlinks=False) and not st.st_mode & 0o004:
                    names.append(entry.name)
    return tuple(sorted(names))
