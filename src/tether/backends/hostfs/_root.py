"""`Root`: a directory held by its fd, and every operation beneath it, with the git guard."""

from __future__ import annotations

import contextlib
import errno
import os
import posixpath
import stat
from collections.abc import Iterator
from dataclasses import dataclass

from tether.backends.hostfs._opening import (
    DIR_FLAGS,
    LIST_FLAGS,
    O_CLOEXEC,
    kernel,
    lstat_at,
    parts_of,
)
from tether.backends.hostfs._walk import walk
from tether.backends.hostfs._writing import Written, directory_lock, inherit_owner

__all__ = ["InGitDirectory", "LinkInPath", "Root"]


@dataclass(frozen=True, slots=True)
class LinkInPath:
    """The first symlink met on the way to a path: where it is and what it points to.

    `target` is the virtual path the link names when that stays inside the root
    (worked out from the link's text alone), else None.
    """

    link: str
    target: str | None


class InGitDirectory(PermissionError):
    """A write refused because git could take what it makes or changes for its own files."""


_EFFECTIVE = os.access in os.supports_effective_ids
_GIT_MARKS = ("HEAD", "objects", "refs", "commondir")
"""What makes a directory a git directory to git: `HEAD` beside one of the others."""


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
        self.fd = os.open(self.path, DIR_FLAGS & ~os.O_NOFOLLOW)
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
        relative = "/".join(parts_of(path)) or "."
        fd = kernel().open(self.fd, relative, flags | os.O_NOFOLLOW, mode)
        if fd is not None:
            return fd
        return self._walk_open(parts_of(path), flags | os.O_NOFOLLOW | O_CLOEXEC, mode)

    def _walk_open(self, parts: list[str], flags: int, mode: int) -> int:
        if not parts:
            return os.open(".", flags, dir_fd=self.fd)
        directory = self.fd
        try:
            for name in parts[:-1]:
                below = os.open(name, DIR_FLAGS, dir_fd=directory)
                if directory != self.fd:
                    os.close(directory)
                directory = below
            return os.open(parts[-1], flags, mode, dir_fd=directory)
        finally:
            if directory != self.fd:
                os.close(directory)

    def open_dir(self, path: str) -> int:
        """A readable fd of directory `path` (for listing and as a `dir_fd`)."""
        return self.open(path, LIST_FLAGS)

    def lstat(self, path: str) -> os.stat_result | None:
        """What is at `path` itself (a symlink is not followed), or None when nothing is.

        A symlink among the directories on the way raises OSError.
        """
        parts = parts_of(path)
        if not parts:
            return os.fstat(self.fd)
        parent = self.open_dir("/".join(parts[:-1]))
        try:
            return lstat_at(parent, parts[-1])
        finally:
            os.close(parent)

    def link_in(self, path: str) -> LinkInPath | None:
        """The first symlink on the way to `path` (`path` included), for messages; None
        when there is none (or the way changed while looking)."""
        parts = parts_of(path)
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
                below = os.open(name, DIR_FLAGS, dir_fd=directory)
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
            for name in parts_of(path):
                with self._may_write(directory, name, path):
                    try:
                        below = os.open(name, LIST_FLAGS, dir_fd=directory)
                    except FileNotFoundError:
                        try:
                            os.mkdir(name, 0o755, dir_fd=directory)
                        except FileExistsError:
                            pass  # made meanwhile; the open below decides what it is
                        else:
                            inherit_owner(directory, name)
                        below = os.open(name, LIST_FLAGS, dir_fd=directory)
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
        parts = parts_of(path)
        self._no_git_name(path)
        parent = self.make_dirs("/".join(parts[:-1]))
        name = parts[-1]
        try:
            old = lstat_at(parent, name)
            if old is not None:
                if stat.S_ISDIR(old.st_mode):
                    raise IsADirectoryError(errno.EISDIR, "is a directory", path)
                if not stat.S_ISREG(old.st_mode):
                    raise OSError(errno.EINVAL, "not a regular file", path)
                if not os.access(
                    name, os.W_OK, dir_fd=parent, effective_ids=_EFFECTIVE, follow_symlinks=False
                ):
                    raise PermissionError(errno.EACCES, "the file is read-only", path)
            with self._may_write(parent, name, path), Written(parent, data, old) as written:
                written.rename_to(name)
        finally:
            os.close(parent)

    def create_new(self, path: str, data: bytes) -> None:
        """Make the new file `path` holding `data`, with its directories, atomically:
        FileExistsError if anything is at `path`, however recently it appeared, and no
        one ever sees the file part-written."""
        parts = parts_of(path)
        self._no_git_name(path)
        parent = self.make_dirs("/".join(parts[:-1]))
        try:
            with self._may_write(parent, parts[-1], path), Written(parent, data, None) as written:
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
        parts = parts_of(path)
        self._no_git_name(path)
        parent = self.make_dirs("/".join(parts[:-1]))
        try:
            flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | O_CLOEXEC
            with self._may_write(parent, parts[-1], path):
                fd = os.open(parts[-1], flags, 0o644, dir_fd=parent)
            inherit_owner(parent, parts[-1])
            return fd
        finally:
            os.close(parent)

    def _no_git_name(self, path: str) -> None:
        """InGitDirectory before anything is made, when `path` goes through a `.git`."""
        if self.guards_git and any(part.casefold() == ".git" for part in parts_of(path)):
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
        with directory_lock(directory, path) if mark else contextlib.nullcontext():
            marks = {m for m in _GIT_MARKS if lstat_at(directory, m) is not None}
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
        return walk(self.open_dir, path, skip)
