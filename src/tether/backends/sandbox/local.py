"""Commands on this machine: isolated by bubblewrap (`LocalSandbox`), or not at all
(`UnsafeLocalShell`).

The workspace directory is the backend's `/` for the file tools and `/workspace` (the
current directory) for commands. A `LocalSandbox` command sees the system read-only,
a private `/tmp`, no network unless asked, and none of the host's processes. It is
killed with everything it started when it runs out of time; rlimits cap its memory, CPU
time, file size and number of processes (a fork bomb fails to fork). Run as root,
commands run as the unprivileged user `nobody` (uid 65534, no capabilities), who owns
the workspace, because the kernel does not hold root to a process limit.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import os
import shutil
import signal
import subprocess
import uuid
from collections.abc import Sequence
from pathlib import Path
from typing import BinaryIO

from tether.backends.base import DEFAULT_MAX_FILE_BYTES
from tether.backends.filesystem import FilesystemBackend
from tether.backends.sandbox.base import ExecResult
from tether.errors import ConfigurationError

__all__ = ["LocalSandbox", "UnsafeLocalShell"]

WORKSPACE = "/workspace"
NOBODY = 65534
_LIMIT_SIGNALS = {signal.SIGKILL, signal.SIGXCPU, signal.SIGXFSZ, signal.SIGSEGV}
OUTPUT_DIR = "/large_tool_results"
_SAVED_OUTPUT_LIMIT = 50 * 1024 * 1024  # the full-output file stops growing here
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
_INSTALL = (
    "install bubblewrap (Debian/Ubuntu: apt-get install bubblewrap; Fedora: dnf install bubblewrap)"
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

    async def execute(self, command: str, *, timeout_seconds: float | None = None) -> ExecResult:
        limit = self.timeout_seconds if timeout_seconds is None else timeout_seconds
        process = await asyncio.create_subprocess_exec(
            *self._argv(command),
            cwd=self.root,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            start_new_session=True,  # its own process group, killed as a whole
        )
        output = _Output(self.root, self.max_output_chars)
        timed_out = False
        try:
            async with asyncio.timeout(limit):
                assert process.stdout is not None
                while chunk := await process.stdout.read(65_536):
                    output.add(chunk)
                await process.wait()
        except TimeoutError:
            timed_out = True
        finally:
            _kill(process)
            await process.wait()
            output.close()
        code = process.returncode
        # The shell reports a child killed by a signal as 128 + the signal's number.
        signalled = code is not None and code - 128 in _LIMIT_SIGNALS
        killed = timed_out or signalled or code is None or code < 0
        if timed_out:
            note = f"\n[killed: the command ran longer than {limit:g} s]"
        elif signalled:
            assert code is not None
            note = (
                f"\n[killed by signal {code - 128}: the command probably hit a limit of the "
                "sandbox (CPU time, memory or file size)]"
            )
        else:
            note = ""
        return ExecResult(
            output=output.text() + note,
            exit_code=None if killed else code,
            truncated=output.truncated,
            timed_out=timed_out,
            full_output=output.virtual_path,
        )

    def _argv(self, command: str) -> list[str]:
        return ["/bin/sh", "-c", command]


class UnsafeLocalShell(_Shell):
    """Runs commands directly on this machine, in the workspace directory, with no
    isolation at all: a command can read, change or delete anything the Python process
    can, and use the network. Only for code you would run yourself."""


class LocalSandbox(_Shell):
    """The workspace directory, with commands run inside bubblewrap (`bwrap`).

    `network=True` lets commands use the host's network. `memory_mb`, `cpu_seconds` and
    `max_processes` bound one command; `max_output_chars` bounds what the model sees of
    its output (the rest is saved under /large_tool_results/).
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
    ) -> None:
        super().__init__(
            workspace,
            timeout_seconds=timeout_seconds,
            max_output_chars=max_output_chars,
            max_file_bytes=max_file_bytes,
        )
        self.network = network
        self.memory_mb = memory_mb
        self.cpu_seconds = cpu_seconds
        self.max_processes = max_processes
        self.bwrap = _bwrap()
        self.uid = NOBODY if os.geteuid() == 0 else os.geteuid()
        if self.uid == NOBODY:
            _give(self.root, self.root)
        _probe((self.bwrap, *self._mounts()))

    async def write(self, path: str, data: bytes) -> None:
        await super().write(path, data)
        if self.uid == NOBODY:  # the sandbox user must be able to change what it is given
            _give(self.host(path), self.root)

    def _as_nobody(self) -> list[str]:
        """Run as root, the command drops to nobody, with no capabilities left."""
        if self.uid != NOBODY:
            return []
        return [
            "/usr/bin/setpriv",
            f"--reuid={NOBODY}",
            f"--regid={NOBODY}",
            "--clear-groups",
            "--inh-caps=-all",
            "--bounding-set=-all",
        ]

    def _mounts(self) -> list[str]:
        args: list[str] = []
        for directory in _SYSTEM_DIRS:
            if os.path.islink(directory):
                args += ["--symlink", os.readlink(directory), directory]
            elif os.path.isdir(directory):
                args += ["--ro-bind", directory, directory]
        for name in (*_ETC, *(("resolv.conf",) if self.network else ())):
            args += ["--ro-bind-try", f"/etc/{name}", f"/etc/{name}"]
        if self.uid == NOBODY:  # as root: no user namespace, so nobody is really nobody
            namespaces = ["--unshare-ipc", "--unshare-pid", "--unshare-uts", "--unshare-cgroup-try"]
            namespaces += [] if self.network else ["--unshare-net"]
        else:
            namespaces = ["--unshare-all", *(["--share-net"] if self.network else [])]
        args += [
            "--proc", "/proc",
            "--dev", "/dev",
            "--perms", "1777", "--tmpfs", "/tmp",
            *namespaces,
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

    def _argv(self, command: str) -> list[str]:
        # Processes the sandbox user already runs count against its limit too.
        processes = self.max_processes + _processes_of(self.uid)
        return [
            self.bwrap,
            *self._mounts(),
            "--bind", str(self.root), WORKSPACE,
            "--chdir", WORKSPACE,
            "--",
            *self._as_nobody(),
            "/usr/bin/prlimit",
            f"--as={self.memory_mb * 1024 * 1024}",
            f"--cpu={self.cpu_seconds}",
            f"--fsize={self.max_file_bytes * 10}",
            f"--nproc={processes}",
            "--",
            "/bin/sh", "-c", command,
        ]  # fmt: skip


class _Output:
    """A command's output: the start kept for the model; once it passes `limit`, all of
    it (up to 50 MB) also goes to a file in the workspace."""

    def __init__(self, root: Path, limit: int) -> None:
        self.root, self.limit = root, limit
        self.head = bytearray()
        self.saved = 0
        self.file: BinaryIO | None = None
        self.virtual_path: str | None = None

    @property
    def truncated(self) -> bool:
        return self.file is not None

    def add(self, chunk: bytes) -> None:
        if self.file is not None:
            self._save(chunk)
            return
        self.head += chunk
        if len(self.head) <= self.limit:  # bytes: never fewer than characters
            return
        self.virtual_path = f"{OUTPUT_DIR}/execute-{uuid.uuid4().hex[:12]}.txt"
        host = self.root / self.virtual_path.lstrip("/")
        host.parent.mkdir(parents=True, exist_ok=True)
        self.file = host.open("wb")
        self._save(bytes(self.head))
        del self.head[self.limit * 4 :]  # enough bytes for `limit` characters

    def _save(self, data: bytes) -> None:
        room = _SAVED_OUTPUT_LIMIT - self.saved
        if room > 0 and self.file is not None:
            self.file.write(data[:room])
            self.saved += min(room, len(data))

    def text(self) -> str:
        text = self.head.decode("utf-8", errors="replace")
        if self.file is None:
            return text
        return (
            text[: self.limit] + f"\n[output cut at {self.limit} characters; the full output is in "
            f"{self.virtual_path}: read it in parts with read_file or search it with grep]"
        )

    def close(self) -> None:
        if self.file is not None:
            self.file.close()


def _kill(process: asyncio.subprocess.Process) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(process.pid, signal.SIGKILL)


def _processes_of(uid: int) -> int:
    count = 0
    for entry in os.scandir("/proc"):
        if entry.name.isdigit():
            with contextlib.suppress(OSError):
                count += entry.stat().st_uid == uid
    return count


def _give(path: Path, root: Path) -> None:
    """Make `path` (a file or a tree) and its directories up to `root` belong to nobody."""
    if path.is_dir():
        for directory, _, names in os.walk(path):
            os.chown(directory, NOBODY, NOBODY)
            for name in names:
                os.chown(os.path.join(directory, name), NOBODY, NOBODY, follow_symlinks=False)
    else:
        os.chown(path, NOBODY, NOBODY, follow_symlinks=False)
    for parent in path.parents:
        if not parent.is_relative_to(root):
            break
        os.chown(parent, NOBODY, NOBODY)


def _bwrap() -> str:
    found = shutil.which("bwrap")
    if found is None:
        raise ConfigurationError(
            f"LocalSandbox needs bubblewrap, which is not installed: {_INSTALL}. "
            "UnsafeLocalShell runs commands without isolation, if you accept that."
        )
    return found


@functools.cache
def _probe(argv: Sequence[str]) -> None:
    """Fails with a clear error when this machine cannot make the namespaces."""
    done = subprocess.run([*argv, "--", "/bin/true"], capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise ConfigurationError(
            f"bubblewrap cannot create a sandbox here ({done.stderr.strip()}). It needs "
            "user namespaces: on Debian and Ubuntu, sysctl kernel.unprivileged_userns_clone=1 "
            "(and on Ubuntu 24.04+, an AppArmor profile for bwrap); in a container, run it "
            "with user namespaces allowed."
        )
