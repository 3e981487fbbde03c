"""Writing files atomically beneath a root, and the locks that keep two writers from
missing each other: a new file is written whole, flushed, then given its name.
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import fcntl
import os
import secrets
import stat
import time
from collections.abc import Iterator, Mapping

from tether.backends.hostfs._opening import LIST_FLAGS, O_CLOEXEC, lstat_at

__all__ = [
    "TEMPORARY_PREFIX",
    "Written",
    "directory_lock",
    "inherit_owner",
    "state_home",
    "try_lock",
]

TEMPORARY_PREFIX = ".tether-"
"""Names of the files tether writes before it renames them: `.tether-<hex>.tmp`."""
_O_TMPFILE = getattr(os, "O_TMPFILE", 0)
_UNNAMED = bool(_O_TMPFILE) and os.path.isdir("/proc/self/fd")
_NO_UNNAMED_FILES = frozenset(
    {errno.EOPNOTSUPP, errno.ENOTSUP, errno.EISDIR, errno.EINVAL, errno.ENOENT}
)


class Written:
    """A new file in `directory` holding `data`, flushed to disk, with the mode and (as
    root) the owner of `like` (or those of a new file there), not yet under its name.

    Where the filesystem has them it is an unnamed file (`O_TMPFILE`), so that a crash
    before it gets its name leaves nothing behind; elsewhere a temporary name, removed
    unless the process is killed first.
    """

    def __init__(self, directory: int, data: bytes, like: os.stat_result | None) -> None:
        self.directory = directory
        self.name: str | None = None
        mode = 0o644 if like is None else 0o600
        try:
            if not _UNNAMED:
                raise OSError(errno.EOPNOTSUPP, "no unnamed files")
            self.fd = os.open(".", os.O_WRONLY | _O_TMPFILE | O_CLOEXEC, mode, dir_fd=directory)
        except OSError as exc:
            if exc.errno not in _NO_UNNAMED_FILES:
                raise
            self.name = _temporary_name()
            flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | O_CLOEXEC
            self.fd = os.open(self.name, flags, mode, dir_fd=directory)
        try:
            with os.fdopen(self.fd, "wb", closefd=False) as file:
                file.write(data)
            if like is not None:  # never a setuid or setgid bit: a command may have set it
                os.fchmod(self.fd, stat.S_IMODE(like.st_mode) & ~(stat.S_ISUID | stat.S_ISGID))
            if os.geteuid() == 0:
                owner = like if like is not None else os.fstat(directory)
                os.fchown(self.fd, owner.st_uid, owner.st_gid)
            os.fsync(self.fd)
        except BaseException:
            self.__exit__()
            raise

    def __enter__(self) -> Written:
        return self

    def __exit__(self, *exc: object) -> None:
        os.close(self.fd)
        if self.name is not None:
            with contextlib.suppress(OSError):
                os.unlink(self.name, dir_fd=self.directory)

    def link_as(self, name: str) -> None:
        """Give the file `name`, only where nothing is (FileExistsError otherwise): the one
        atomic "create, with content"."""
        if self.name is None:  # our own descriptor's link in /proc: no one else's path
            os.link(f"/proc/self/fd/{self.fd}", name, dst_dir_fd=self.directory)
            return
        at = {"src_dir_fd": self.directory, "dst_dir_fd": self.directory}
        try:  # a temporary swapped for a symlink meanwhile is linked as the link
            os.link(self.name, name, **at, follow_symlinks=False)
        except OSError as exc:
            if exc.errno not in _NO_HARD_LINKS:
                raise
            _rename_new(self.directory, self.name, name)  # a filesystem without links
            self.name = None

    def rename_to(self, name: str) -> None:
        """Give the file `name`, in place of what is there."""
        if self.name is None:  # a name of its own for the moment it takes to rename it
            temporary = _temporary_name()
            os.link(f"/proc/self/fd/{self.fd}", temporary, dst_dir_fd=self.directory)
            self.name = temporary
        os.rename(self.name, name, src_dir_fd=self.directory, dst_dir_fd=self.directory)
        self.name = None


def _temporary_name() -> str:
    return f"{TEMPORARY_PREFIX}{secrets.token_hex(8)}.tmp"  # short: any name fits beside it


_NO_HARD_LINKS = frozenset({errno.EPERM, errno.EMLINK, errno.EOPNOTSUPP, errno.ENOTSUP})


_RENAME_NOREPLACE = 1


def _rename_new(directory: int, old: str, new: str) -> None:
    """Rename `old` to `new` in `directory` only where nothing is at `new`
    (`renameat2(RENAME_NOREPLACE)`); FileExistsError otherwise. Where the kernel or the
    filesystem cannot, it looks first, and a file made in between is replaced."""
    libc = ctypes.CDLL(None, use_errno=True)
    renameat2 = getattr(libc, "renameat2", None)
    if renameat2 is not None:
        done = renameat2(
            directory, os.fsencode(old), directory, os.fsencode(new), _RENAME_NOREPLACE
        )
        if done == 0:
            return
        code = ctypes.get_errno()
        if code not in (errno.EINVAL, errno.ENOSYS):
            raise OSError(code, os.strerror(code), new)
    if lstat_at(directory, new) is not None:
        raise FileExistsError(errno.EEXIST, "exists", new)
    os.rename(old, new, src_dir_fd=directory, dst_dir_fd=directory)


def inherit_owner(directory: int, name: str) -> None:
    """As root, what we create belongs to whoever owns the directory it is in."""
    if os.geteuid() != 0:
        return
    owner = os.fstat(directory)
    os.chown(name, owner.st_uid, owner.st_gid, dir_fd=directory, follow_symlinks=False)


# -- locks ---------------------------------------------------------------------


def config_home(environ: Mapping[str, str] | None = None) -> str:
    """The user's directory for settings (`$XDG_CONFIG_HOME`, by default `~/.config`)."""
    environ = os.environ if environ is None else environ
    return environ.get("XDG_CONFIG_HOME") or os.path.join(os.path.expanduser("~"), ".config")


def state_home() -> str:
    """The user's directory for tether's state kept between processes
    (`$XDG_STATE_HOME`, by default `~/.local/state`): outside every workspace."""
    return os.environ.get("XDG_STATE_HOME") or os.path.join(
        os.path.expanduser("~"), ".local", "state"
    )


_GIT_LOCKS = 64
"""Lock files the git guard spreads directories over (two sharing one just take turns)."""
_LOCK_SECONDS = 10.0
"""How long a write waits for a directory another writer has locked."""


@contextlib.contextmanager
def directory_lock(directory: int, path: str) -> Iterator[None]:
    """An exclusive lock for shaping `directory`, shared by every process of this user:
    the `flock` of one of `_GIT_LOCKS` files in the user's state directory, picked by
    the directory's device and inode (polled, never held up longer than `_LOCK_SECONDS`).
    Not the directory's own flock: a sandboxed command holds its workspace's for as long
    as it runs. Where no state directory can be made, the directory's own."""
    st = os.fstat(directory)
    try:
        folder = os.path.join(state_home(), "tether", "locks")
        os.makedirs(folder, mode=0o700, exist_ok=True)
        name = f"git-{(st.st_dev * 1_000_003 + st.st_ino) % _GIT_LOCKS}.lock"
        fd = os.open(os.path.join(folder, name), os.O_RDWR | os.O_CREAT | O_CLOEXEC, 0o600)
    except OSError:
        fd = os.open(".", LIST_FLAGS, dir_fd=directory)  # `directory` may be an O_PATH fd
    try:
        deadline = time.monotonic() + _LOCK_SECONDS
        pause = 0.001
        while not try_lock(fd):
            if time.monotonic() > deadline:
                raise OSError(errno.EAGAIN, "its directory stayed locked", path)
            time.sleep(pause)  # in a worker thread: every write runs off the loop
            pause = min(pause * 2, 0.05)
        yield
    finally:
        os.close(fd)  # and with it the lock


def try_lock(fd: int) -> bool:
    """Take the exclusive flock of `fd` if no one holds it (at once, where the file
    system has no locks: then writers may overlap)."""
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return False
    except OSError as exc:
        if exc.errno in (errno.ENOLCK, errno.EOPNOTSUPP):
            return True
        raise
    return True
