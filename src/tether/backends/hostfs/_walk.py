"""The walk of a directory tree beneath a root: iterative, never through a symlink, and
holding at most `_WALK_OPEN` directories open."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator

from tether.backends.hostfs._opening import LIST_FLAGS, parts_of

__all__ = ["walk"]

_WALK_OPEN = 64
"""Directories a walk holds open at once, at most."""


def walk(
    open_dir: Callable[[str], int], path: str, skip: frozenset[str]
) -> Iterator[tuple[str, int, list[os.DirEntry[str]]]]:
    """What `Root.walk` yields, the directories opened with `open_dir` (the root's)."""
    top = "/" + "/".join(parts_of(path))
    fd = open_dir(path)
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
                _climb(levels, open_dir)
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


def _climb(levels: list[_Level], open_dir: Callable[[str], int]) -> None:
    """Leave the deepest level, opening the one above again if it was closed: by
    ".." from the level left, else by its path, and only when it is the directory
    that was there (a directory moved meanwhile has its other entries left out)."""
    left = levels.pop()
    try:
        if not levels or levels[-1].fd is not None:
            return
        above = levels[-1]
        if left.fd is not None and above.regain(lambda: os.open("..", LIST_FLAGS, dir_fd=left.fd)):
            return
        if not above.regain(lambda: open_dir(above.virtual)):
            above.below = []
    finally:
        left.close()


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
        fd = os.open(name, LIST_FLAGS, dir_fd=directory)
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
