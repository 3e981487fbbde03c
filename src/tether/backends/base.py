"""The backend protocol: where the agent's files live.

Every backend takes clean virtual paths (see `tether.backends.paths`) and raises
`BackendError` with a message the model can act on. `glob` and `grep` are written once,
in `tether.backends.search`, over `files` and `read`; a backend may answer them faster
itself as long as the results are the same.

A change that depends on what a file holds (an edit, a file made only if there is none)
goes through `update`, so that no other write comes between reading and writing: a
backend that can make that hold across processes has an `update` method of its own.
"""

from __future__ import annotations

import asyncio
import weakref
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any, Literal, Protocol, TypeAlias, TypeVar, runtime_checkable

from tether.backends.errors import BackendError

__all__ = [
    "DEFAULT_MAX_FILE_BYTES",
    "OFF_LOOP_BYTES",
    "Admits",
    "Backend",
    "Change",
    "FileInfo",
    "GrepHit",
    "Operation",
    "as_given",
    "changed",
    "create",
    "finished",
    "name_paths",
    "update",
]

DEFAULT_MAX_FILE_BYTES = 10 * 1024 * 1024

T = TypeVar("T")

Operation: TypeAlias = Literal["read", "write"]
Admits: TypeAlias = Callable[[Operation, str], bool]
"""`admits(operation, path)`: whether a guard allows the operation on that clean path."""


def as_given(path: str) -> str:
    """How a backend names a path in its messages when no one says otherwise."""
    return path


def name_paths(backend: Backend, shown: Callable[[str], str]) -> Backend | None:
    """`backend` naming each path in its messages `shown(path)` (a route's prefix added,
    say), when it can; None when it cannot."""
    named = getattr(backend, "named", None)
    return None if named is None else named(shown)


Change: TypeAlias = Callable[[bytes | None], bytes]
"""`change(current)`: a file's new content made from its current one (None when there
is no file yet). It may raise `BackendError` to leave the file as it is, and may run on
a worker thread."""


@dataclass(frozen=True, slots=True)
class FileInfo:
    """A file, directory or symbolic link: its virtual path, size in bytes and
    modification time; `link` is the path a symbolic link names (links are listed, not
    followed)."""

    path: str
    is_dir: bool = False
    size: int = 0
    modified: float | None = None
    link: str | None = None


@dataclass(frozen=True, slots=True)
class GrepHit:
    """One matching line: 1-based line number and the line's text."""

    path: str
    line: int
    text: str


@runtime_checkable
class Backend(Protocol):
    """File operations the file tools need. Paths are clean virtual paths."""

    async def ls(self, path: str) -> list[FileInfo]:
        """The entries directly inside directory `path`, sorted by path."""
        ...

    async def read(self, path: str) -> bytes:
        """The content of file `path`."""
        ...

    async def write(self, path: str, data: bytes) -> None:
        """Create or replace file `path`, with any missing parent directories."""
        ...

    async def stat(self, path: str) -> FileInfo | None:
        """What is at `path`, or None when nothing is."""
        ...

    async def files(self, path: str) -> list[FileInfo]:
        """Every file under directory `path`, at any depth, sorted by path."""
        ...

    async def grep(
        self, pattern: str, path: str, *, literal: bool = False, ignore_case: bool = False
    ) -> list[GrepHit]:
        """Lines matching `pattern` in the text files under `path`, in path and line order.

        Files holding a NUL byte are binary and skipped.
        """
        ...

    def bind(self, state: Any) -> Backend:
        """The backend one run uses: itself, or a view on that run's state."""
        ...


async def update(backend: Backend, path: str, change: Change) -> bytes:
    """Make file `path` `change(current)` as one step, and return what was written.

    No other update or write of `path` comes between reading the file and writing it:
    every backend of tether's own makes sure of that (across processes too, for files on
    disk and in a database store) through its `update` method. A backend without one,
    such as a user's own, is kept to that within this process only.
    """
    own = getattr(backend, "update", None)
    if own is not None:
        data: bytes = await own(path, change)
        return data
    async with one_at_a_time((id(backend), path)):
        current = None
        if await backend.stat(path) is not None:
            current = await backend.read(path)
        data = await changed(change, current)
        await backend.write(path, data)
        return data


OFF_LOOP_BYTES = 256 * 1024
"""Work on a file bigger than this (an edit, a hash) runs on a worker thread, so that it
does not hold up the event loop."""


async def changed(change: Change, current: bytes | None) -> bytes:
    """`change(current)`, on a worker thread for a big file (an edit searches and copies
    the whole of it)."""
    if current is not None and len(current) > OFF_LOOP_BYTES:
        return await asyncio.to_thread(change, current)
    return change(current)


async def finished(work: Awaitable[T], *, undo: Callable[[T], object] | None = None) -> T:
    """Await `work` (a write on a worker thread, say) to its end, however often the caller
    is cancelled meanwhile, and then pass the cancellation on (after `undo(result)`, which
    releases what the work gave): a call that is called off is never reported cancelled
    while its write goes on, to land later, or with what it opened left open."""
    task = asyncio.ensure_future(work)
    cancelled = False
    while not task.done():
        try:
            await asyncio.wait([task])
        except asyncio.CancelledError:
            cancelled = True
    if cancelled:
        if undo is not None and not task.cancelled() and task.exception() is None:
            undo(task.result())
        raise asyncio.CancelledError
    return task.result()


async def create(backend: Backend, path: str, data: bytes, *, taken: str | None = None) -> None:
    """Make the new file `path`, failing with `BackendError` (its message `taken`, when
    given) if anything is there already, also when it appeared a moment ago."""

    def fresh(current: bytes | None) -> bytes:
        if current is not None:
            raise BackendError(taken or f"{path} already exists.")
        return data

    await update(backend, path, fresh)


_WAITING: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, dict[Any, list[Any]]] = (
    weakref.WeakKeyDictionary()
)


@asynccontextmanager
async def one_at_a_time(key: Any) -> AsyncIterator[None]:
    """Hold the lock of `key` on this event loop, in the order the holders asked."""
    locks = _WAITING.setdefault(asyncio.get_running_loop(), {})
    entry = locks.setdefault(key, [asyncio.Lock(), 0])
    entry[1] += 1
    try:
        async with entry[0]:
            yield
    finally:
        entry[1] -= 1
        if entry[1] == 0:
            del locks[key]
