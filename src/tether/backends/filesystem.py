"""FilesystemBackend: files on the real disk, confined to a root directory.

The agent's "/" is `root`, and nothing it names can reach outside: every path is opened
beneath a descriptor of the root with no symlink followed in any component (see
`tether.backends.hostfs`), so that even a process swapping directories for symlinks
while the agent works cannot lead an operation out. Symbolic links are listed but never
followed: an operation on one fails with a message naming the real path when the link
stays inside the root. Only regular files are read or written, never devices, FIFOs or
sockets. A write replaces the file (a new file renamed over the name), so a hard link
cannot carry it to another name. `.git` directories are not searched by glob and grep,
and nothing is written where git would take it for its own files (any `.git`, at any
depth, and any directory shaped like a repository's: see `Root`).
"""

from __future__ import annotations

import asyncio
import copy
import errno
import fcntl
import functools
import os
import stat
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from tether.backends.base import (
    DEFAULT_MAX_FILE_BYTES,
    Admits,
    Change,
    FileInfo,
    GrepHit,
    as_given,
    finished,
)
from tether.backends.errors import BackendError
from tether.backends.hostfs import TEMPORARY_PREFIX, InGitDirectory, Root
from tether.backends.hostfs import _ripgrep as ripgrep
from tether.backends.paths import clean, join
from tether.backends.search import Pattern, compile_pattern, grep_text
from tether.errors import ConfigurationError

__all__ = ["FilesystemBackend"]

_SKIPPED_DIRS = frozenset({".git"})
_NO_LOCKS = frozenset({errno.ENOLCK, errno.EOPNOTSUPP, errno.ENOTSUP, errno.EINVAL})
LOCK_WAIT_SECONDS = 30.0
"""How long a write waits for another writer of the same file before it fails."""
_READ_FLAGS = os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY


class FilesystemBackend:
    """The directory `root` as the agent's filesystem.

    `virtual_mode=False` drops the confinement: the backend's root is the machine's "/",
    so paths are host paths ("/etc/hosts" is that file). Use it only where the agent may
    touch the whole machine; symlinks are still not followed.
    """

    def __init__(
        self,
        root: str | os.PathLike[str] = ".",
        *,
        virtual_mode: bool = True,
        max_file_bytes: int = DEFAULT_MAX_FILE_BYTES,
    ) -> None:
        resolved = Path(root).expanduser().resolve() if virtual_mode else Path("/")
        if not resolved.is_dir():
            raise ConfigurationError(f"FilesystemBackend root {str(root)!r} is not a directory")
        self.root = resolved
        self.virtual_mode = virtual_mode
        self.max_file_bytes = max_file_bytes
        self.host = Root(resolved, guards_git=True)
        self.admits: Admits | None = None
        self.shown: Callable[[str], str] = as_given
        """How its messages name a path (with a route's prefix, under a composite)."""

    def __repr__(self) -> str:
        return f"FilesystemBackend({str(self.root)!r}, virtual_mode={self.virtual_mode})"

    def bind(self, state: Any) -> FilesystemBackend:
        return self

    def named(self, shown: Callable[[str], str]) -> FilesystemBackend:
        """This backend, naming paths in its messages with `shown`."""
        view = copy.copy(self)
        view.shown = shown
        return view

    def guarded(self, admits: Admits) -> FilesystemBackend:
        """This backend, refusing a hard-linked file unless `admits` allows every name
        it has in the root (a guard's rules hold under any name)."""
        view = copy.copy(self)
        earlier = self.admits
        view.admits = admits if earlier is None else lambda op, p: earlier(op, p) and admits(op, p)
        return view

    # -- operations ----------------------------------------------------------------

    async def ls(self, path: str) -> list[FileInfo]:
        return await asyncio.to_thread(self._ls, clean(path))

    def _ls(self, path: str) -> list[FileInfo]:
        try:
            fd = self.host.open_dir(path)
        except OSError as exc:
            if exc.errno == errno.ENOTDIR and not self._link_error(path):
                raise BackendError(
                    f"{self.shown(path)} is a file, not a directory. Read it with read_file."
                ) from None
            raise self._error(path, exc, "list") from None
        try:
            with os.scandir(fd) as scan:
                entries = [self._info(join(path, e.name), e, fd) for e in scan]
        finally:
            os.close(fd)
        return sorted((e for e in entries if e is not None), key=lambda f: f.path)

    def _info(self, path: str, entry: os.DirEntry[str], directory: int) -> FileInfo | None:
        """A listing entry; None for what the agent cannot use (devices, odd names,
        links leading out)."""
        try:
            st = entry.stat(follow_symlinks=False)
            if not _addressable(entry.name):
                return None
            if stat.S_ISREG(st.st_mode):
                return FileInfo(path, size=st.st_size, modified=st.st_mtime)
            if stat.S_ISDIR(st.st_mode):
                return FileInfo(path, is_dir=True, modified=st.st_mtime)
            if not stat.S_ISLNK(st.st_mode):
                return None
            target = self.host.target_of(path, os.readlink(entry.name, dir_fd=directory))
        except OSError:
            return None
        return None if target is None else FileInfo(path, link=target)

    async def read(self, path: str) -> bytes:
        return await asyncio.to_thread(self._read, clean(path))

    def _read(self, path: str) -> bytes:
        try:
            fd = self.host.open(path, _READ_FLAGS)
        except OSError as exc:
            raise self._error(path, exc, "read") from None
        try:
            return self._read_open(path, fd, _Aliases(self.host))
        finally:
            os.close(fd)

    def _read_open(self, path: str, fd: int, aliases: _Aliases) -> bytes:
        st = os.fstat(fd)
        if stat.S_ISDIR(st.st_mode):
            raise BackendError(f"{self.shown(path)} is a directory. List it with ls.")
        if not stat.S_ISREG(st.st_mode):
            raise BackendError(
                f"{self.shown(path)} is not a regular file (a device, FIFO or socket)."
            )
        if st.st_size > self.max_file_bytes:
            raise BackendError(
                f"{self.shown(path)} is {st.st_size} bytes, over the {self.max_file_bytes} "
                "byte limit."
            )
        if st.st_nlink > 1 and self.admits is not None:
            for name in aliases.names(st):
                if name != path and not self.admits("read", name):
                    raise BackendError(
                        f"Permission denied: {self.shown(path)} is a hard link to "
                        f"{self.shown(name)}, which may not be read."
                    )
        chunks = []
        size = 0
        while size <= self.max_file_bytes:  # read what fstat said, and what it grew by since
            wanted = max(st.st_size + 1 - size, 65_536)
            chunk = os.read(fd, wanted)
            chunks.append(chunk)
            size += len(chunk)
            if len(chunk) < wanted:  # the end of the file
                break
        if size > self.max_file_bytes:
            raise BackendError(f"{self.shown(path)} is over the {self.max_file_bytes} byte limit.")
        return b"".join(chunks)

    async def write(self, path: str, data: bytes) -> None:
        self._check_size(data)
        await self._update(clean(path), lambda current: data, reads=False)

    async def update(self, path: str, change: Change) -> bytes:
        """See `tether.backends.base.update`. Every write of this backend's holds an
        exclusive `flock` on the file from reading it to renaming the new one over it,
        so writes from other tasks and other processes wait their turn (on the event
        loop, `LOCK_WAIT_SECONDS` at most); a write from elsewhere (a command, an
        editor) can still come between. A call cancelled while it waits writes nothing."""
        return await self._update(clean(path), change, reads=True)

    async def _update(self, path: str, change: Change, *, reads: bool) -> bytes:
        """The new content of `path`, written; `reads=False` writes without reading the
        old one (`change` then gets None for an existing file too)."""
        if path == "/":
            raise BackendError(f"'{self.shown('/')}' is a directory; give a file path.")
        deadline = time.monotonic() + LOCK_WAIT_SECONDS
        while True:
            if time.monotonic() > deadline:
                raise BackendError(
                    f"{self.shown(path)} kept changing while it was written; try again."
                )
            opening = asyncio.to_thread(self._open_to_write, path, reads)
            fd, missing = await finished(opening, undo=_close)
            try:
                if fd is None:
                    write = functools.partial(self._replace, path, change, None, new=missing)
                else:
                    st = await self._lock(path, fd, deadline)
                    write = functools.partial(self._replace, path, change, (fd, st), reads=reads)
                written = await finished(asyncio.to_thread(write))
                if written is not None:
                    return written
                # replaced while we waited: update the file there now
            except FileExistsError:
                continue  # made meanwhile: update that one
            finally:
                if fd is not None:
                    os.close(fd)  # and with it the lock

    def _open_to_write(self, path: str, reads: bool) -> tuple[int | None, bool]:
        """An fd of the file at `path` to lock (and read), or None; and whether no file is
        there. A file this process may not read is replaced without a lock, when the
        write does not read it."""
        try:
            return self.host.open(path, _READ_FLAGS), False
        except FileNotFoundError:
            return None, True
        except PermissionError as exc:
            if not reads:
                return None, False
            raise self._write_error(path, exc) from None
        except OSError as exc:
            raise self._write_error(path, exc) from None

    def _replace(
        self,
        path: str,
        change: Change,
        locked: tuple[int, os.stat_result] | None,
        *,
        new: bool = False,
        reads: bool = False,
    ) -> bytes | None:
        """Write `change` of the file: the one `locked` (its fd and what it was; None
        when it is no longer at `path`), else a new file (`new`) or one not read."""
        current = None
        if locked is not None:
            fd, st = locked
            if not self.host.holds(path, st):
                return None
            if reads:
                current = self._read_open(path, fd, _Aliases(self.host))
        data = self._check_size(change(current))
        try:
            if new:
                self.host.create_new(path, data)
            else:
                self.host.replace(path, data)
        except FileExistsError:
            raise
        except OSError as exc:
            raise self._write_error(path, exc) from None
        return data

    async def _lock(self, path: str, fd: int, deadline: float) -> os.stat_result:
        """Take the file's lock, waiting for it on the event loop until `deadline`;
        what the file is."""
        st = os.fstat(fd)
        if stat.S_ISDIR(st.st_mode):
            raise BackendError(f"{self.shown(path)} is a directory; give a file path.")
        if not stat.S_ISREG(st.st_mode):
            raise BackendError(
                f"{self.shown(path)} is not a regular file (a device, FIFO or socket)."
            )
        pause = 0.001
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)  # never blocks
                return st
            except BlockingIOError:
                if time.monotonic() >= deadline:
                    raise BackendError(
                        f"{self.shown(path)} stayed locked by another writer for "
                        f"{LOCK_WAIT_SECONDS:g} s; try again later."
                    ) from None
                await asyncio.sleep(pause)
                pause = min(pause * 2, 0.05)
            except OSError as exc:
                if exc.errno in _NO_LOCKS:  # a filesystem without locks: write as before
                    return st
                raise

    def _check_size(self, data: bytes) -> bytes:
        if len(data) > self.max_file_bytes:
            raise BackendError(
                f"The content is {len(data)} bytes, over the {self.max_file_bytes} byte limit."
            )
        return data

    def _write_error(self, path: str, exc: OSError) -> BackendError:
        if isinstance(exc, InGitDirectory):
            return BackendError(
                f"Permission denied: writing {self.shown(path)} would change {exc.strerror}, "
                "which git reads as its own files and runs what they say (core.fsmonitor, "
                "hooks): the file tools never write there."
            )
        link = self._link_error(path)  # a symlink on the way, or at the name itself
        if link is not None:
            return link
        if isinstance(exc, IsADirectoryError):
            return BackendError(f"{self.shown(path)} is a directory; give a file path.")
        if exc.errno == errno.EINVAL:
            return BackendError(
                f"{self.shown(path)} is not a regular file (a device, FIFO or socket)."
            )
        if exc.errno in (errno.ENOTDIR, errno.EEXIST):
            return BackendError(f"A parent of {self.shown(path)} is a file.")
        return self._error(path, exc, "write")

    async def stat(self, path: str) -> FileInfo | None:
        return await asyncio.to_thread(self._stat, clean(path))

    def _stat(self, path: str) -> FileInfo | None:
        try:
            st = self.host.lstat(path)
        except OSError as exc:
            if exc.errno in (errno.ENOENT, errno.ENOTDIR) and not self._link_error(path):
                return None
            raise self._error(path, exc, "look at") from None
        if st is None:
            return None
        if stat.S_ISLNK(st.st_mode):
            raise self._error(path, OSError(errno.ELOOP, "symbolic link"), "use")
        if stat.S_ISDIR(st.st_mode):
            return FileInfo(path, is_dir=True, modified=st.st_mtime)
        return FileInfo(path, size=st.st_size, modified=st.st_mtime)

    async def files(self, path: str) -> list[FileInfo]:
        return await asyncio.to_thread(self._files, clean(path))

    def _files(self, path: str) -> list[FileInfo]:
        found = []
        for file_path, entry, _ in self._regular_files(path):
            try:
                st = entry.stat(follow_symlinks=False)
            except OSError:
                continue
            found.append(FileInfo(file_path, size=st.st_size, modified=st.st_mtime))
        return sorted(found, key=lambda f: f.path)

    def _regular_files(self, path: str) -> Iterator[tuple[str, os.DirEntry[str], int]]:
        """(path, entry, its directory's fd) of every regular file under `path` (no
        symlinks, no .git); nothing when `path` is not a directory."""
        try:
            walk = self.host.walk(path, skip=_SKIPPED_DIRS)
            for directory, fd, entries in walk:
                for entry in entries:
                    if entry.is_file(follow_symlinks=False) and _addressable(entry.name):
                        yield join(directory, entry.name), entry, fd
        except OSError as exc:
            if exc.errno in (errno.ENOENT, errno.ENOTDIR) and not self._link_error(path):
                return
            raise self._error(path, exc, "search") from None

    async def grep(
        self, pattern: str, path: str, *, literal: bool = False, ignore_case: bool = False
    ) -> list[GrepHit]:
        regex = compile_pattern(pattern, literal=literal, ignore_case=ignore_case)
        path = clean(path)
        text = ripgrep.literal_text(pattern, literal=literal, ignore_case=ignore_case)
        # ripgrep lists the files that hold it, in parallel, confined. Not under rules:
        # it would read the files they deny (how far it reads tells what they hold).
        if text is not None and self.admits is None:
            named = await ripgrep.search(
                functools.partial(self.host.open_dir, path),
                text,
                ignore_case=ignore_case,
                max_bytes=self.max_file_bytes,
            )
            if named is not None:
                return await asyncio.to_thread(self._grep_named, regex, path, named)
        return await asyncio.to_thread(self._grep, regex, path)

    def _grep_named(self, regex: Pattern, path: str, names: list[str]) -> list[GrepHit]:
        """The hits in the files `names` (relative to `path`) as they are now: each one
        opened again beneath the root, no symlink followed, and searched whole; what
        found them never decides what is read."""
        aliases = _Aliases(self.host)
        hits: list[GrepHit] = []
        for name in names:
            *directories, file_name = name.split("/")
            if not _addressable(file_name) or any(d in _SKIPPED_DIRS for d in directories):
                continue
            file_path = join(path, name)
            if self.admits is not None and not self.admits("read", file_path):
                continue
            try:
                fd = self.host.open(file_path, _READ_FLAGS)
            except OSError:
                continue  # gone, or a symlink on its way, since it was found
            try:
                data = self._read_open(file_path, fd, aliases)
            except BackendError:
                continue  # over the size limit, refused, or not a regular file
            finally:
                os.close(fd)
            hits += grep_text(file_path, data, regex)
        hits.sort(key=lambda h: (h.path, h.line))
        return hits

    def _grep(self, regex: Pattern, path: str) -> list[GrepHit]:
        aliases = _Aliases(self.host)
        hits: list[GrepHit] = []
        for file_path, entry, directory in self._regular_files(path):
            if self.admits is not None and not self.admits("read", file_path):
                continue
            try:
                flags = _READ_FLAGS | os.O_NOFOLLOW | os.O_CLOEXEC
                fd = os.open(entry.name, flags, dir_fd=directory)
            except OSError:
                continue  # gone, or swapped for a link, since the listing
            try:
                data = self._read_open(file_path, fd, aliases)
            except BackendError:
                continue  # over the size limit, refused, or no longer a regular file
            finally:
                os.close(fd)
            hits += grep_text(file_path, data, regex)
        hits.sort(key=lambda h: (h.path, h.line))
        return hits

    # -- errors --------------------------------------------------------------------

    def _link_error(self, path: str) -> BackendError | None:
        """The error for `path` when a symlink stands on its way, else None."""
        found = self.host.link_in(path)
        if found is None:
            return None
        if found.target is None:
            where = "outside the workspace" if self.virtual_mode else "elsewhere"
            return BackendError(
                f"{self.shown(found.link)} is a symbolic link leading {where}; links are not "
                "followed."
            )
        real = found.target + path[len(found.link) :]
        return BackendError(
            f"{self.shown(found.link)} is a symbolic link to {self.shown(found.target)}; links "
            f"are not followed, so use {self.shown(real)}."
        )

    def _error(self, path: str, exc: OSError, verb: str) -> BackendError:
        if exc.errno in (errno.ELOOP, errno.ENOTDIR, errno.EXDEV):
            link = self._link_error(path)
            if link is not None:
                return link
            if exc.errno == errno.ELOOP:  # the link went away since
                return BackendError(
                    f"{self.shown(path)} changed while it was opened (a symbolic link stood on "
                    "its way); links are not followed."
                )
        if exc.errno == errno.ENOENT:
            what = {"read": "file", "list": "directory"}.get(verb, "file or directory")
            return BackendError(f"No such {what}: {self.shown(path)}")
        if exc.errno == errno.EISDIR:
            return BackendError(f"{self.shown(path)} is a directory. List it with ls.")
        if exc.errno == errno.ENOTDIR:
            return BackendError(f"A parent of {self.shown(path)} is a file, not a directory.")
        return BackendError(f"Cannot {verb} {self.shown(path)}: {exc.strerror or exc}.")


class _Aliases:
    """Every name in the root of a hard-linked file: one walk of the root, made the
    first time it is needed and shared by the files one operation opens."""

    def __init__(self, host: Root) -> None:
        self.host = host
        self.by_inode: dict[tuple[int, int], list[str]] | None = None

    def names(self, st: os.stat_result) -> list[str]:
        if self.by_inode is None:
            self.by_inode = {}
            for directory, _, entries in self.host.walk("/"):
                for entry in entries:
                    if entry.is_file(follow_symlinks=False) and _addressable(entry.name):
                        try:
                            found = entry.stat(follow_symlinks=False)
                        except OSError:
                            continue
                        if found.st_nlink > 1:
                            key = (found.st_dev, found.st_ino)
                            self.by_inode.setdefault(key, []).append(join(directory, entry.name))
        return self.by_inode.get((st.st_dev, st.st_ino), [])


def _close(opened: tuple[int | None, bool]) -> None:
    if opened[0] is not None:
        os.close(opened[0])


def _addressable(name: str) -> bool:
    """Whether the agent can name this entry: valid UTF-8, and a name `clean` accepts;
    not a write of tether's that a killed process left half made."""
    if name.startswith(TEMPORARY_PREFIX) and name.endswith(".tmp"):
        return False
    if name.isascii() and name.isprintable() and name.strip() == name and "\\" not in name:
        return True  # most names, quickly (scandir never gives "." or "..")
    try:
        name.encode()
        return clean("/d/" + name) == "/d/" + name
    except (UnicodeEncodeError, BackendError):
        return False
