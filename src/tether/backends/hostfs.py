"""Host files beneath a root directory, opened so that no symlink is ever followed.

Everything tether does to files on this machine (the `FilesystemBackend`, the sandbox's
workspace and saved command output, ownership changes, the `tether` command's reads)
goes through a `Root`. It holds a file descriptor of the root directory and opens every
path beneath it without following a symlink in any component: one `openat2` call with
`RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS` where the kernel has it (Linux 5.6+), otherwise
one `openat(O_NOFOLLOW)` per component from the directory before. A process that swaps
a directory for a symlink at any moment can make an operation fail; it cannot lead one
outside the root, because the kernel never resolves a name we did not check.

Paths here are clean virtual paths ("/src/app.py", see `tether.backends.paths`);
"/" is the root itself.
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import fcntl
import os
import posixpath
import secrets
import stat
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

__all__ = ["TEMPORARY_PREFIX", "InGitDirectory", "LinkInPath", "Root", "state_home", "try_lock"]

_O_PATH = getattr(os, "O_PATH", 0)
_O_DIRECTORY = getattr(os, "O_DIRECTORY", 0)
_O_CLOEXEC = getattr(os, "O_CLOEXEC", 0)
_DIR_FLAGS = (_O_PATH or os.O_RDONLY) | _O_DIRECTORY | os.O_NOFOLLOW | _O_CLOEXEC
_LIST_FLAGS = os.O_RDONLY | _O_DIRECTORY | os.O_NOFOLLOW | os.O_NONBLOCK | _O_CLOEXEC

_SYS_OPENAT2 = 437  # the same number on every Linux architecture
_RESOLVE_NO_MAGICLINKS = 0x02
_RESOLVE_NO_SYMLINKS = 0x04
_RESOLVE_BENEATH = 0x08


class _OpenHow(ctypes.Structure):
    _fields_ = (
        ("flags", ctypes.c_uint64),
        ("mode", ctypes.c_uint64),
        ("resolve", ctypes.c_uint64),
    )


class _Openat2:
    """openat2(2) through libc's syscall(); `available` is False where the kernel, libc
    or a seccomp filter does not offer it."""

    def __init__(self) -> None:
        self.syscall: Any = None
        try:
            self.syscall = ctypes.CDLL(None, use_errno=True).syscall
        except (OSError, AttributeError):
            return
        self.syscall.restype = ctypes.c_long
        root = os.open("/", _DIR_FLAGS)
        try:
            probe = self._call(root, ".", _DIR_FLAGS, 0)
        finally:
            os.close(root)
        if probe < 0:
            self.syscall = None
        else:
            os.close(probe)

    def _call(self, dir_fd: int, path: str, flags: int, mode: int) -> int:
        how = _OpenHow(
            flags | _O_CLOEXEC,
            mode if flags & os.O_CREAT else 0,
            _RESOLVE_BENEATH | _RESOLVE_NO_SYMLINKS | _RESOLVE_NO_MAGICLINKS,
        )
        size = ctypes.sizeof(how)
        return int(self.syscall(_SYS_OPENAT2, dir_fd, os.fsencode(path), ctypes.byref(how), size))

    def open(self, dir_fd: int, path: str, flags: int, mode: int) -> int | None:
        """The fd (or an OSError), or None when openat2 is not available."""
        if self.syscall is None:
            return None
        for _ in range(8):
            fd = self._call(dir_fd, path, flags, mode)
            if fd >= 0:
                return fd
            code = ctypes.get_errno()
            if code != errno.EAGAIN:  # EAGAIN: a rename raced the lookup; look again
                break
        raise OSError(code, os.strerror(code), path)


_openat2: _Openat2 | None = None


def _kernel() -> _Openat2:
    global _openat2
    if _openat2 is None:
        _openat2 = _Openat2()
    return _openat2


@dataclass(frozen=True, slots=True)
class LinkInPath:
    """The first symlink met on the way to a path: where it is and what it points to.

    `target` is the virtual path the link names when that stays inside the root
    (worked out from the link's text alone), else None.
    """

    link: str
    target: str | None


def _parts(path: str) -> list[str]:
    """The components of a clean virtual path; '..' never gets this far, but if it did
    the walk must not climb with it."""
    parts = [p for p in path.split("/") if p and p != "."]
    if ".." in parts:
        raise OSError(errno.EXDEV, "'..' leads out of the root", path)
    return parts


def state_home() -> str:
    """The user's directory for tether's state kept between processes
    (`$XDG_STATE_HOME`, by default `~/.local/state`): outside every workspace."""
    return os.environ.get("XDG_STATE_HOME") or os.path.join(
        os.path.expanduser("~"), ".local", "state"
    )


class InGitDirectory(PermissionError):
    """A write refused because git could take what it makes or changes for its own files."""


class Root:
    """The directory `path` (resolved once, now), and every operation beneath it.

    With `guards_git`, nothing is made or changed where git would read it as its own:
    no entry named `.git` (in any case) at any depth, since a `.git` file can point git
    at any directory (`gitdir:`); nothing inside a directory git would take for a
    repository's (one holding `HEAD` beside `objects`, `refs` or `commondir`: a `.git`
    directory, a submodule's git directory wherever its `gitdir:` points, a bare
    repository); and no write that would make a directory look like one. Git runs what
    those files say (`core.fsmonitor`, hooks) the next time anyone uses the repository.
    """

    def __init__(self, path: str | os.PathLike[str], *, guards_git: bool = False) -> None:
        self.path = os.path.realpath(path)
        self.fd = os.open(self.path, _DIR_FLAGS & ~os.O_NOFOLLOW)
        self.guards_git = guards_git

    def __repr__(self) -> str:
        return f"Root({self.path!r})"

    def __del__(self) -> None:
        fd = getattr(self, "fd", -1)
        if fd >= 0:
            os.close(fd)
            self.fd = -1

    # -- opening -----------------------------------------------------------------

    def open(self, path: str, flags: int, mode: int = 0o644) -> int:
        """An fd for `path` beneath the root, opened with `flags`; OSError otherwise.

        A symlink in any component fails with ELOOP (or ENOTDIR on the walk).
        """
        relative = "/".join(_parts(path)) or "."
        fd = _kernel().open(self.fd, relative, flags | os.O_NOFOLLOW, mode)
        if fd is not None:
            return fd
        return self._walk_open(_parts(path), flags | os.O_NOFOLLOW | _O_CLOEXEC, mode)

    def _walk_open(self, parts: list[str], flags: int, mode: int) -> int:
        if not parts:
            return os.open(".", flags, dir_fd=self.fd)
        directory = self.fd
        try:
            for name in parts[:-1]:
                below = os.open(name, _DIR_FLAGS, dir_fd=directory)
                if directory != self.fd:
                    os.close(directory)
                directory = below
            return os.open(parts[-1], flags, mode, dir_fd=directory)
        finally:
            if directory != self.fd:
                os.close(directory)

    def open_dir(self, path: str) -> int:
        """A readable fd of directory `path` (for listing and as a `dir_fd`)."""
        return self.open(path, _LIST_FLAGS)

    def lstat(self, path: str) -> os.stat_result | None:
        """What is at `path` itself (a symlink is not followed), or None when nothing is.

        A symlink among the directories on the way raises OSError.
        """
        parts = _parts(path)
        if not parts:
            return os.fstat(self.fd)
        parent = self.open_dir("/".join(parts[:-1]))
        try:
            return _lstat_at(parent, parts[-1])
        finally:
            os.close(parent)

    def link_in(self, path: str) -> LinkInPath | None:
        """The first symlink on the way to `path` (`path` included), for messages; None
        when there is none (or the way changed while looking)."""
        parts = _parts(path)
        directory = os.dup(self.fd)
        try:
            for index, name in enumerate(parts):
                st = os.stat(name, dir_fd=directory, follow_symlinks=False)
                if stat.S_ISLNK(st.st_mode):
                    where = "/" + "/".join(parts[: index + 1])
                    text = os.readlink(name, dir_fd=directory)
                    return LinkInPath(where, self.target_of(where, text))
                if not stat.S_ISDIR(st.st_mode):
                    return None
                below = os.open(name, _DIR_FLAGS, dir_fd=directory)
                os.close(directory)
                directory = below
            return None
        except OSError:
            return None
        finally:
            os.close(directory)

    def target_of(self, link: str, text: str) -> str | None:
        """The virtual path a symlink at `link` whose text is `text` names, if inside."""
        if text.startswith("/"):
            if text == self.path or text.startswith(self.path.rstrip("/") + "/"):
                text = "/" + text[len(self.path) :].lstrip("/")
            else:
                return None
        else:
            text = posixpath.join(posixpath.dirname(link), text)
        parts: list[str] = []
        for part in text.split("/"):
            if part in ("", "."):
                continue
            if part == "..":
                if not parts:
                    return None
                parts.pop()
            else:
                parts.append(part)
        return "/" + "/".join(parts)

    # -- creating ----------------------------------------------------------------

    def make_dirs(self, path: str) -> int:
        """A readable fd of directory `path`, creating what is missing (mode 0o755).

        New directories belong to their parent's owner when this process is root.
        """
        self._no_git_name(path)
        directory = os.dup(self.fd)
        try:
            for name in _parts(path):
                with self._may_write(directory, name, path):
                    try:
                        below = os.open(name, _LIST_FLAGS, dir_fd=directory)
                    except FileNotFoundError:
                        try:
                            os.mkdir(name, 0o755, dir_fd=directory)
                        except FileExistsError:
                            pass  # made meanwhile; the open below decides what it is
                        else:
                            _inherit_owner(directory, name)
                        below = os.open(name, _LIST_FLAGS, dir_fd=directory)
                os.close(directory)
                directory = below
            return directory
        except BaseException:
            os.close(directory)
            raise

    def replace(self, path: str, data: bytes) -> None:
        """Make `path` a regular file holding `data`, atomically, by renaming a new file
        over the name: a crash leaves the old file or the new one, never a part of either.

        The name is replaced, never written through: a symlink or a hard link at `path`
        cannot carry the write elsewhere. The old file's mode and (as root) owner carry
        over; a new file gets mode 0o644 less the umask and its directory's owner.
        Raises IsADirectoryError, PermissionError (a read-only file) or other OSErrors.
        """
        parts = _parts(path)
        self._no_git_name(path)
        parent = self.make_dirs("/".join(parts[:-1]))
        name = parts[-1]
        try:
            old = _lstat_at(parent, name)
            if old is not None:
                if stat.S_ISDIR(old.st_mode):
                    raise IsADirectoryError(errno.EISDIR, "is a directory", path)
                if not stat.S_ISREG(old.st_mode):
                    raise OSError(errno.EINVAL, "not a regular file", path)
                if not os.access(
                    name, os.W_OK, dir_fd=parent, effective_ids=_EFFECTIVE, follow_symlinks=False
                ):
                    raise PermissionError(errno.EACCES, "the file is read-only", path)
            with self._may_write(parent, name, path), _Written(parent, data, old) as written:
                written.rename_to(name)
        finally:
            os.close(parent)

    def create_new(self, path: str, data: bytes) -> None:
        """Make the new file `path` holding `data`, with its directories, atomically:
        FileExistsError if anything is at `path`, however recently it appeared, and no
        one ever sees the file part-written."""
        parts = _parts(path)
        self._no_git_name(path)
        parent = self.make_dirs("/".join(parts[:-1]))
        try:
            with self._may_write(parent, parts[-1], path), _Written(parent, data, None) as written:
                written.link_as(parts[-1])
        finally:
            os.close(parent)

    def holds(self, path: str, st: os.stat_result) -> bool:
        """Whether the file `st` describes is still the one at `path` (not replaced)."""
        try:
            now = self.lstat(path)
        except OSError:
            return False
        return now is not None and (now.st_dev, now.st_ino) == (st.st_dev, st.st_ino)

    def create(self, path: str) -> int:
        """A new file at `path` opened for writing (it must not exist yet), with its
        directories; it belongs to its directory's owner when this process is root."""
        parts = _parts(path)
        self._no_git_name(path)
        parent = self.make_dirs("/".join(parts[:-1]))
        try:
            flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | _O_CLOEXEC
            with self._may_write(parent, parts[-1], path):
                fd = os.open(parts[-1], flags, 0o644, dir_fd=parent)
            _inherit_owner(parent, parts[-1])
            return fd
        finally:
            os.close(parent)

    def _no_git_name(self, path: str) -> None:
        """InGitDirectory before anything is made, when `path` goes through a `.git`."""
        if self.guards_git and any(part.casefold() == ".git" for part in _parts(path)):
            raise InGitDirectory(errno.EACCES, "a .git entry", path)

    @contextlib.contextmanager
    def _may_write(self, directory: int, name: str, path: str) -> Iterator[None]:
        """Make or change `name` in `directory` (on the way to `path`) inside this, unless
        it could change what git does (InGitDirectory), when `guards_git`. A name that
        could complete a git directory is checked and made under the directory's lock,
        so that two writes (of any process) cannot each miss the other's half."""
        if not self.guards_git:
            yield
            return
        mark = next((m for m in _GIT_MARKS if m.casefold() == name.casefold()), None)
        with _directory_lock(directory, path) if mark else contextlib.nullcontext():
            marks = {m for m in _GIT_MARKS if _lstat_at(directory, m) is not None}
            if mark is not None:
                marks.add(mark)
            if "HEAD" in marks and len(marks) > 1:
                raise InGitDirectory(errno.EACCES, "a git directory", path)
            yield

    # -- walking -----------------------------------------------------------------

    def walk(
        self, path: str, *, skip: frozenset[str] = frozenset()
    ) -> Iterator[tuple[str, int, list[os.DirEntry[str]]]]:
        """(virtual directory, its fd, its entries) for `path` and every directory below
        it, depth first, never through a symlink; directories in `skip` (by name, or by
        virtual path) are not entered. The fd is valid until the next item is asked for.

        The walk keeps its own stack, not Python's (a tree thousands of levels deep is
        walked like any other), and holds at most `_WALK_OPEN` directories open: it climbs
        back to one it closed through "..", checked to be that very directory."""
        top = "/" + "/".join(_parts(path))
        fd = self.open_dir(path)
        try:
            entries = _listing(fd)  # the top must be listed; a directory below may fail
        except BaseException:
            os.close(fd)
            raise
        levels = [_Level(top, fd)]
        try:
            yield top, fd, entries
            levels[0].below = _subdirectories(top, entries, skip)
            while levels:
                level = levels[-1]
                if not level.below:
                    self._climb(levels)
                    continue
                name = level.below.pop()
                assert level.fd is not None  # the deepest level is always open
                entered = _enter(level.fd, name)
                if entered is None:
                    continue  # gone, swapped or unreadable since the listing: left out
                virtual = level.virtual.rstrip("/") + "/" + name
                levels.append(_Level(virtual, entered[0]))
                if len(levels) > _WALK_OPEN:
                    levels[-_WALK_OPEN - 1].set_aside()
                yield virtual, entered[0], entered[1]
                levels[-1].below = _subdirectories(virtual, entered[1], skip)
        finally:
            for level in levels:
                level.close()

    def _climb(self, levels: list[_Level]) -> None:
        """Leave the deepest level, opening the one above again if it was closed: by
        ".." from the level left, else by its path, and only when it is the directory
        that was there (a directory moved meanwhile has its other entries left out)."""
        left = levels.pop()
        try:
            if not levels or levels[-1].fd is not None:
                return
            above = levels[-1]
            if left.fd is not None and above.regain(
                lambda: os.open("..", _LIST_FLAGS, dir_fd=left.fd)
            ):
                return
            if not above.regain(lambda: self.open_dir(above.virtual)):
                above.below = []
        finally:
            left.close()


_WALK_OPEN = 64
"""Directories a walk holds open at once, at most."""


class _Level:
    """A directory a walk is in: its fd (None while closed, to bound how many a walk
    holds), what it is (to know it again), and its subdirectories still to enter, the
    next last."""

    def __init__(self, virtual: str, fd: int) -> None:
        self.virtual = virtual
        self.fd: int | None = fd
        self.identity: tuple[int, int] | None = None
        self.below: list[str] = []

    def close(self) -> None:
        if self.fd is not None:
            os.close(self.fd)
            self.fd = None

    def set_aside(self) -> None:
        """Close the fd, remembering which directory it was."""
        if self.fd is None:
            return
        st = os.fstat(self.fd)
        self.identity = (st.st_dev, st.st_ino)
        self.close()

    def regain(self, opening: Callable[[], int]) -> bool:
        """Whether the fd `opening` gives is this directory's again (it is kept) or not
        (it is closed); False when it cannot be opened."""
        try:
            fd = opening()
        except OSError:
            return False
        st = os.fstat(fd)
        if (st.st_dev, st.st_ino) != self.identity:
            os.close(fd)
            return False
        self.fd = fd
        return True


def _listing(fd: int) -> list[os.DirEntry[str]]:
    with os.scandir(fd) as scan:
        return list(scan)


def _enter(directory: int, name: str) -> tuple[int, list[os.DirEntry[str]]] | None:
    """The fd and entries of subdirectory `name`, or None when it cannot be opened as a
    directory (no symlink followed) or listed."""
    try:
        fd = os.open(name, _LIST_FLAGS, dir_fd=directory)
    except OSError:
        return None
    try:
        return fd, _listing(fd)
    except OSError:
        os.close(fd)
        return None


def _subdirectories(
    virtual: str, entries: list[os.DirEntry[str]], skip: frozenset[str]
) -> list[str]:
    """The names of the directories among `entries` a walk enters, the first last."""
    prefix = virtual.rstrip("/") + "/"
    names = [
        entry.name
        for entry in entries
        if entry.name not in skip
        and prefix + entry.name not in skip
        and entry.is_dir(follow_symlinks=False)
    ]
    names.reverse()
    return names


_EFFECTIVE = os.access in os.supports_effective_ids
_GIT_MARKS = ("HEAD", "objects", "refs", "commondir")
"""What makes a directory a git directory to git: `HEAD` beside one of the others."""
_GIT_LOCKS = 64
"""Lock files the git guard spreads directories over (two sharing one just take turns)."""
_LOCK_SECONDS = 10.0
"""How long a write waits for a directory another writer has locked."""


@contextlib.contextmanager
def _directory_lock(directory: int, path: str) -> Iterator[None]:
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
        fd = os.open(os.path.join(folder, name), os.O_RDWR | os.O_CREAT | _O_CLOEXEC, 0o600)
    except OSError:
        fd = os.open(".", _LIST_FLAGS, dir_fd=directory)  # `directory` may be an O_PATH fd
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
    if _lstat_at(directory, new) is not None:
        raise FileExistsError(errno.EEXIST, "exists", new)
    os.rename(old, new, src_dir_fd=directory, dst_dir_fd=directory)


TEMPORARY_PREFIX = ".tether-"
"""Names of the files tether writes before it renames them: `.tether-<hex>.tmp`."""


def _temporary_name() -> str:
    return f"{TEMPORARY_PREFIX}{secrets.token_hex(8)}.tmp"  # short: any name fits beside it


class _Written:
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
            self.fd = os.open(".", os.O_WRONLY | _O_TMPFILE | _O_CLOEXEC, mode, dir_fd=directory)
        except OSError as exc:
            if exc.errno not in _NO_UNNAMED_FILES:
                raise
            self.name = _temporary_name()
            flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | _O_CLOEXEC
            self.fd = os.open(self.name, flags, mode, dir_fd=directory)
        try:
            with os.fdopen(self.fd, "wb", closefd=False) as file:
                file.write(data)
            if like is not None:
                os.fchmod(self.fd, stat.S_IMODE(like.st_mode))
            if os.geteuid() == 0:
                owner = like if like is not None else os.fstat(directory)
                os.fchown(self.fd, owner.st_uid, owner.st_gid)
            os.fsync(self.fd)
        except BaseException:
            self.__exit__()
            raise

    def __enter__(self) -> _Written:
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


_O_TMPFILE = getattr(os, "O_TMPFILE", 0)
_UNNAMED = bool(_O_TMPFILE) and os.path.isdir("/proc/self/fd")
_NO_UNNAMED_FILES = frozenset(
    {errno.EOPNOTSUPP, errno.ENOTSUP, errno.EISDIR, errno.EINVAL, errno.ENOENT}
)


def _lstat_at(directory: int, name: str) -> os.stat_result | None:
    try:
        return os.stat(name, dir_fd=directory, follow_symlinks=False)
    except FileNotFoundError:
        return None


def _inherit_owner(directory: int, name: str) -> None:
    """As root, what we create belongs to whoever owns the directory it is in."""
    if os.geteuid() != 0:
        return
    owner = os.fstat(directory)
    os.chown(name, owner.st_uid, owner.st_gid, dir_fd=directory, follow_symlinks=False)
