"""Commands on this machine: isolated by bubblewrap (`LocalSandbox`), or not at all
(`UnsafeLocalShell`).

The workspace directory is the backend's `/` for the file tools and `/workspace` (the
current directory) for commands. A `LocalSandbox` command sees the system read-only, a
private and size-limited `/tmp`, no network unless asked, none of the host's processes,
and cannot make user namespaces of its own. `.git` is read-only to it and `.tether` (the
run records) hidden, and neither can be renamed away. It is killed with everything it
started when it runs out of time; rlimits cap its memory, CPU time, file size and number
of processes (a fork bomb fails to fork).

Every mount is made from a file descriptor opened beneath the workspace without
following symlinks (see `tether.backends.hostfs`), so no symlink planted by an earlier
command can redirect one. Commands run as the user this process runs as; under root,
as the workspace's owner, or as `nobody` (uid 65534, no capabilities) when root owns
the workspace, because the kernel does not hold root to a process limit. In that last
case the workspace, all but `.git` and `.tether`, is lent to `nobody` and given back
by `close()` (or when the sandbox is garbage collected, or at exit).
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import os
import shutil
import signal
import stat
import subprocess
import threading
import uuid
import weakref
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from types import TracebackType
from typing import BinaryIO

from tether.backends.base import DEFAULT_MAX_FILE_BYTES
from tether.backends.filesystem import FilesystemBackend
from tether.backends.hostfs import Root
from tether.backends.paths import clean, join
from tether.backends.sandbox.base import ExecResult
from tether.errors import ConfigurationError

__all__ = ["LocalSandbox", "UnsafeLocalShell"]

WORKSPACE = "/workspace"
NOBODY = 65534
_LIMIT_SIGNALS = {signal.SIGKILL, signal.SIGXCPU, signal.SIGXFSZ, signal.SIGSEGV}
OUTPUT_DIR = "/large_tool_results"
_SAVED_OUTPUT_LIMIT = 50 * 1024 * 1024  # the full-output file stops growing here
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
        # The caller (the model, through `execute`) can shorten the limit, never lengthen it.
        limit = min(self.timeout_seconds, timeout_seconds or self.timeout_seconds)
        with self._command(command) as (argv, fds):
            process = await asyncio.create_subprocess_exec(
                *argv,
                cwd=self.root,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                start_new_session=True,  # its own process group, killed as a whole
                pass_fds=fds,
            )
        output = _Output(self.host, self.max_output_chars)
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

    @contextlib.contextmanager
    def _command(self, command: str) -> Iterator[tuple[list[str], tuple[int, ...]]]:
        """The argv that runs `command`, and the fds it needs, open while spawning."""
        yield ["/bin/sh", "-c", command], ()


class UnsafeLocalShell(_Shell):
    """Runs commands directly on this machine, in the workspace directory, with no
    isolation at all: a command can read, change or delete anything the Python process
    can, and use the network. Only for code you would run yourself."""


class LocalSandbox(_Shell):
    """The workspace directory, with commands run inside bubblewrap (`bwrap`).

    `network=True` lets commands use the host's network. `memory_mb`, `cpu_seconds` and
    `max_processes` bound one command (`memory_mb` also sizes its `/tmp`);
    `max_output_chars` bounds what the model sees of its output (the rest is saved under
    /large_tool_results/). `read_only` paths (default `/.git`) can be read but not
    changed or renamed by commands, `hidden` ones (default `/.tether`) are replaced by an
    empty directory; both stay as they are on the host.
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
        read_only: Sequence[str] = ("/.git",),
        hidden: Sequence[str] = ("/.tether",),
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
        self.read_only = _protected_paths(read_only, "read_only")
        self.hidden = _protected_paths(hidden, "hidden")
        self.bwrap = _bwrap()
        self.uid, self.gid = _sandbox_user(self.root)
        _probe((self.bwrap, *self._namespaces(), *self._system()))
        self._loan: weakref.finalize[[tuple[int, int]], LocalSandbox] | None = None
        if os.geteuid() == 0 and self.uid == NOBODY:
            key = _borrow(self.host, frozenset((*self.read_only, *self.hidden)))
            self._loan = weakref.finalize(self, _give_back, key)

    def close(self) -> None:
        """Give the workspace back to its owners, when it was lent to `nobody`."""
        if self._loan is not None:
            self._loan()

    def __enter__(self) -> LocalSandbox:
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.close()

    def _as_user(self) -> list[str]:
        """Under root, the command drops to the sandbox user, with no capabilities left."""
        if os.geteuid() != 0:
            return []
        return [
            "/usr/bin/setpriv",
            f"--reuid={self.uid}",
            f"--regid={self.gid}",
            "--clear-groups",
            "--inh-caps=-all",
            "--bounding-set=-all",
            "--",
        ]

    def _namespaces(self) -> list[str]:
        if os.geteuid() == 0:  # no user namespace: the command's user is really that user
            args = ["--unshare-ipc", "--unshare-pid", "--unshare-uts", "--unshare-cgroup-try"]
            return args + ([] if self.network else ["--unshare-net"])
        return ["--unshare-all", *(["--share-net"] if self.network else [])]

    def _system(self) -> list[str]:
        """The read-only system, /proc, a read-only /dev, and a private /tmp and /dev/shm
        whose size counts against `memory_mb` nowhere else, so they have their own."""
        args: list[str] = []
        for directory in _SYSTEM_DIRS:
            if os.path.islink(directory):
                args += ["--symlink", os.readlink(directory), directory]
            elif os.path.isdir(directory):
                args += ["--ro-bind", directory, directory]
        for name in (*_ETC, *(("resolv.conf",) if self.network else ())):
            args += ["--ro-bind-try", f"/etc/{name}", f"/etc/{name}"]
        shm = min(_SHM_MB, self.memory_mb) * 1024 * 1024
        args += [
            "--proc", "/proc",
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

    @contextlib.contextmanager
    def _command(self, command: str) -> Iterator[tuple[list[str], tuple[int, ...]]]:
        fds: list[int] = []
        try:
            fds.append(_seccomp_filter())
            fds.append(self.host.open("/", _MOUNT_FLAGS))
            mounts = ["--seccomp", str(fds[0]), "--bind-fd", str(fds[1]), WORKSPACE]
            mounts += self._protections(fds)
            # Processes the sandbox user already runs count against its limit too.
            processes = self.max_processes + _processes_of(self.uid)
            yield [
                self.bwrap,
                *self._namespaces(),
                *self._system(),
                *mounts,
                "--chdir", WORKSPACE,
                "--",
                *self._as_user(),
                "/usr/bin/prlimit",
                f"--as={self.memory_mb * 1024 * 1024}",
                f"--cpu={self.cpu_seconds}",
                f"--fsize={self.max_file_bytes * 10}",
                f"--nproc={processes}",
                "--",
                "/bin/sh", "-c", command,
            ], tuple(fds)  # fmt: skip
        finally:
            for fd in fds:
                os.close(fd)

    def _protections(self, fds: list[int]) -> list[str]:
        """Mounts over the read-only and hidden paths; their fds are added to `fds`.

        bubblewrap checks that each mount is the very directory or file the fd holds,
        and a mount point cannot be renamed from inside, so no command can swap one out.
        """
        mounts: list[str] = []
        for path in (*self.read_only, *self.hidden):
            try:
                fd = self.host.open(path, _MOUNT_FLAGS)
            except OSError:
                continue  # absent, or a symlink: nothing there to protect
            fds.append(fd)
            inside = WORKSPACE + path
            if path in self.hidden and stat.S_ISDIR(os.fstat(fd).st_mode):
                mounts += ["--size", "65536", "--tmpfs", inside]
            else:
                mounts += ["--ro-bind-fd", str(fd), inside]
        return mounts


_MOUNT_FLAGS = getattr(os, "O_PATH", os.O_RDONLY) | os.O_CLOEXEC


def _protected_paths(paths: Sequence[str], name: str) -> tuple[str, ...]:
    if isinstance(paths, str):
        raise ConfigurationError(f"{name} must be a list of paths, got the string {paths!r}")
    cleaned = tuple(clean(p) for p in paths)
    if "/" in cleaned:
        raise ConfigurationError(f"{name} cannot hold '/', the whole workspace")
    return cleaned


def _sandbox_user(root: Path) -> tuple[int, int]:
    """Who commands run as: this process's user; under root, the workspace's owner,
    or nobody when that is root too."""
    if os.geteuid() != 0:
        return os.geteuid(), os.getegid()
    owner = os.stat(root)
    if owner.st_uid != 0:
        return owner.st_uid, owner.st_gid
    return NOBODY, NOBODY


_LOANS: dict[tuple[int, int], tuple[_Loan, int]] = {}
_LOANS_LOCK = threading.Lock()


def _borrow(host: Root, kept: frozenset[str]) -> tuple[int, int]:
    """Lend the workspace to nobody, or count one more borrower of a loan under way
    (two sandboxes on one workspace must not record each other's loan as the owners)."""
    top = os.fstat(host.fd)
    key = (top.st_dev, top.st_ino)
    with _LOANS_LOCK:
        loan, count = _LOANS.get(key, (None, 0))
        _LOANS[key] = (loan or _Loan(host, kept), count + 1)
    return key


def _give_back(key: tuple[int, int]) -> None:
    """One borrower less; the last gives the workspace back."""
    with _LOANS_LOCK:
        loan, count = _LOANS.pop(key)
        if count > 1:
            _LOANS[key] = (loan, count - 1)
            return
    loan.end()


class _Loan:
    """The workspace lent to nobody: everything but `kept` (the protected paths)
    belongs to nobody until `end`, which gives each entry back to its earlier owner and
    what was made meanwhile to the owner of the workspace."""

    def __init__(self, host: Root, kept: frozenset[str]) -> None:
        self.host, self.kept = host, kept
        self.owners: dict[tuple[int, int], tuple[int, int]] = {}
        self._each(self._lend)

    def _each(self, change: Callable[[int, str | None, os.stat_result], None]) -> None:
        top = self.host.open_dir("/")
        try:
            change(top, None, os.fstat(top))
        finally:
            os.close(top)
        for directory, fd, entries in self.host.walk("/", skip=self.kept):
            for entry in entries:
                if join(directory, entry.name) in self.kept:
                    continue
                with contextlib.suppress(OSError):
                    change(fd, entry.name, entry.stat(follow_symlinks=False))

    def _lend(self, directory: int, name: str | None, st: os.stat_result) -> None:
        self.owners[(st.st_dev, st.st_ino)] = (st.st_uid, st.st_gid)
        _chown(directory, name, NOBODY, NOBODY)

    def _give_back(self, directory: int, name: str | None, st: os.stat_result) -> None:
        owner = self.owners.get((st.st_dev, st.st_ino))
        if owner is None and st.st_uid == NOBODY:
            owner = self.workspace_owner
        if owner is not None and owner != (st.st_uid, st.st_gid):
            _chown(directory, name, *owner)

    def end(self) -> None:
        top = self.host.lstat("/")
        assert top is not None
        self.workspace_owner = self.owners.get((top.st_dev, top.st_ino), (0, 0))
        self._each(self._give_back)


def _chown(directory: int, name: str | None, uid: int, gid: int) -> None:
    """Change the owner of `name` in `directory` (of `directory` itself when None)."""
    if name is None:
        os.fchown(directory, uid, gid)
    else:
        os.chown(name, uid, gid, dir_fd=directory, follow_symlinks=False)


class _Output:
    """A command's output: the start kept for the model; once it passes `limit`, all of
    it (up to 50 MB) also goes to a new file in the workspace."""

    def __init__(self, host: Root, limit: int) -> None:
        self.host, self.limit = host, limit
        self.head = bytearray()
        self.saved = 0
        self.file: BinaryIO | None = None
        self.virtual_path: str | None = None
        self.unsaved: str | None = None  # why the full output could not be saved

    @property
    def truncated(self) -> bool:
        return self.file is not None or self.unsaved is not None

    def add(self, chunk: bytes) -> None:
        if self.file is not None:
            self._save(chunk)
            return
        if self.unsaved is not None:
            return
        self.head += chunk
        if len(self.head) <= self.limit:  # bytes: never fewer than characters
            return
        path = f"{OUTPUT_DIR}/execute-{uuid.uuid4().hex[:12]}.txt"
        try:
            self.file = os.fdopen(self.host.create(path), "wb")
        except OSError as exc:  # a command put something in the way (a symlink, a file)
            self.unsaved = f"{OUTPUT_DIR} is not a plain directory ({exc.strerror})"
        else:
            self.virtual_path = path
            self._save(bytes(self.head))
        del self.head[self.limit * 4 :]  # enough bytes for `limit` characters

    def _save(self, data: bytes) -> None:
        room = _SAVED_OUTPUT_LIMIT - self.saved
        if room > 0 and self.file is not None:
            self.file.write(data[:room])
            self.saved += min(room, len(data))

    def text(self) -> str:
        text = self.head.decode("utf-8", errors="replace")
        if not self.truncated:
            return text
        if self.unsaved is not None:
            where = f"the rest could not be saved: {self.unsaved}"
        else:
            where = (
                f"the full output is in {self.virtual_path}: read it in parts with read_file "
                "or search it with grep"
            )
        return f"{text[: self.limit]}\n[output cut at {self.limit} characters; {where}]"

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


def _bwrap() -> str:
    found = shutil.which("bwrap")
    if found is None:
        raise ConfigurationError(
            f"LocalSandbox needs bubblewrap, which is not installed: {_INSTALL}. "
            "UnsafeLocalShell runs commands without isolation, if you accept that."
        )
    return found


@functools.cache
def _bwrap_can(option: str) -> bool:
    """Whether this bubblewrap knows `option` (--disable-userns came in 0.8)."""
    found = shutil.which("bwrap")
    if found is None:
        return False
    done = subprocess.run([found, "--help"], capture_output=True, text=True, check=False)
    return option in done.stdout + done.stderr


@functools.cache
def _probe(argv: Sequence[str]) -> None:
    """Fails with a clear error when this machine cannot make the sandbox."""
    seccomp = _seccomp_filter()
    try:
        done = subprocess.run(
            [*argv, "--seccomp", str(seccomp), "--", "/bin/true"],
            capture_output=True,
            text=True,
            check=False,
            pass_fds=(seccomp,),
        )
    finally:
        os.close(seccomp)
    if done.returncode == 0:
        return
    if not all(_bwrap_can(option) for option in _NEEDED_OPTIONS):
        raise ConfigurationError(
            f"LocalSandbox needs bubblewrap 0.8 or later (for {', '.join(_NEEDED_OPTIONS)}); "
            f"this one says: {done.stderr.strip()[:200]}. Debian 12, Ubuntu 24.04 and "
            "Fedora 38 have it."
        )
    raise ConfigurationError(
        f"bubblewrap cannot create a sandbox here ({done.stderr.strip()}). It needs "
        "user namespaces: on Debian and Ubuntu, sysctl kernel.unprivileged_userns_clone=1 "
        "(and on Ubuntu 24.04+, an AppArmor profile for bwrap); in a container, run it "
        "with user namespaces allowed."
    )


_NEEDED_OPTIONS = ("--bind-fd", "--size", "--seccomp")


def _seccomp_filter() -> int:
    """An fd holding the sandbox's seccomp filter (see `tether.backends.sandbox.seccomp`)."""
    from tether.backends.sandbox.seccomp import no_user_namespaces

    fd = os.memfd_create("tether-seccomp", os.MFD_CLOEXEC)
    os.write(fd, no_user_namespaces())
    os.lseek(fd, 0, os.SEEK_SET)
    return fd
