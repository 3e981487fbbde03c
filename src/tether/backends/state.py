"""StateBackend: files kept in the run's state, so they live and die with the run."""

from __future__ import annotations

import asyncio
import copy
import itertools
import random
import time
from collections.abc import Callable
from typing import Any, Self

from tether.backends.base import (
    DEFAULT_MAX_FILE_BYTES,
    Change,
    FileInfo,
    GrepHit,
    as_given,
    changed,
    finished,
    one_at_a_time,
)
from tether.backends.errors import BackendError
from tether.backends.paths import clean, is_under, join
from tether.backends.search import compile_pattern, grep_files

__all__ = ["FileTable", "StateBackend", "TableBackend"]

CHANGING_FOR_SECONDS = 30.0
"""How long a write keeps trying while other writers keep changing the file first."""

FileTable = dict[str, tuple[bytes, float]]
"""Virtual path -> (content, modification time); directories are implied by the paths."""


class TableBackend:
    """A backend over a `FileTable`: what StateBackend and StoreBackend share."""

    def __init__(self, max_file_bytes: int = DEFAULT_MAX_FILE_BYTES) -> None:
        self.max_file_bytes = max_file_bytes
        self.shown: Callable[[str], str] = as_given
        """How its messages name a path (with a route's prefix, under a composite)."""

    def named(self, shown: Callable[[str], str]) -> Self:
        """This backend, naming paths in its messages with `shown`."""
        view = copy.copy(self)
        view.shown = shown
        return view

    async def table(self) -> FileTable:
        """Every file, by path."""
        raise NotImplementedError

    async def swap(self, path: str, expected: bytes | None, data: bytes, modified: float) -> bool:
        """Store one file if it still holds `expected` (None: if there is none); whether
        it was stored."""
        raise NotImplementedError

    async def ls(self, path: str) -> list[FileInfo]:
        path = clean(path)
        table = await self.table()
        if path in table:
            raise BackendError(
                f"{self.shown(path)} is a file, not a directory. Read it with read_file."
            )
        entries: dict[str, FileInfo] = {}
        for file_path, (data, modified) in table.items():
            if file_path == path or not is_under(file_path, path):
                continue
            rest = file_path[len(path.rstrip("/")) + 1 :]
            name, _, below = rest.partition("/")
            entry = join(path, name)
            if below:
                entries.setdefault(entry, FileInfo(entry, is_dir=True))
            else:
                entries[entry] = FileInfo(entry, size=len(data), modified=modified)
        if not entries and path != "/":
            raise BackendError(f"No such directory: {self.shown(path)}")
        return sorted(entries.values(), key=lambda f: f.path)

    async def read(self, path: str) -> bytes:
        path = clean(path)
        table = await self.table()
        if path not in table:
            if any(is_under(p, path) for p in table):
                raise BackendError(f"{self.shown(path)} is a directory. List it with ls.")
            raise BackendError(f"No such file: {self.shown(path)}")
        data = table[path][0]
        if len(data) > self.max_file_bytes:
            raise BackendError(
                f"{self.shown(path)} is {len(data)} bytes, over the {self.max_file_bytes} "
                "byte limit."
            )
        return data

    async def write(self, path: str, data: bytes) -> None:
        self._check_size(data)
        await self.update(path, lambda current: data)

    async def update(self, path: str, change: Change) -> bytes:
        """See `tether.backends.base.update`: the file is stored only if it still holds
        what `change` was given, else `change` is asked again with what it holds now."""
        path = clean(path)
        if path == "/":
            raise BackendError(f"'{self.shown('/')}' is a directory; give a file path.")
        # One write at a time in this process: a path is never made a file and a
        # directory at once (the swap below covers the file itself, not its neighbours).
        async with one_at_a_time(self.key()):
            return await self._update(path, change)

    def key(self) -> object:
        """What tells this table from others, for `one_at_a_time`."""
        raise NotImplementedError

    async def _update(self, path: str, change: Change) -> bytes:
        deadline = time.monotonic() + CHANGING_FOR_SECONDS
        for attempt in itertools.count():
            if attempt:  # another writer came between: let it finish, then try again
                if time.monotonic() > deadline:
                    break
                await asyncio.sleep(random.uniform(0, 0.0005 * 2 ** min(attempt, 6)))
            table = await self.table()
            if any(is_under(p, path) and p != path for p in table):
                raise BackendError(f"{self.shown(path)} is a directory; give a file path.")
            parent = path.rsplit("/", 1)[0]
            while parent:
                if parent in table:
                    raise BackendError(
                        f"{self.shown(parent)} is a file, so {self.shown(path)} cannot be "
                        "created under it."
                    )
                parent = parent.rsplit("/", 1)[0]
            current = table[path][0] if path in table else None
            data = await changed(change, current)
            self._check_size(data)
            if await finished(self.swap(path, current, data, time.time())):
                return data
        raise BackendError(f"{self.shown(path)} kept changing while it was written; try again.")

    def _check_size(self, data: bytes) -> None:
        if len(data) > self.max_file_bytes:
            raise BackendError(
                f"The content is {len(data)} bytes, over the {self.max_file_bytes} byte limit."
            )

    async def stat(self, path: str) -> FileInfo | None:
        path = clean(path)
        table = await self.table()
        if path in table:
            data, modified = table[path]
            return FileInfo(path, size=len(data), modified=modified)
        if path == "/" or any(is_under(p, path) for p in table):
            return FileInfo(path, is_dir=True)
        return None

    async def files(self, path: str) -> list[FileInfo]:
        path = clean(path)
        table = await self.table()
        return sorted(
            (
                FileInfo(p, size=len(data), modified=modified)
                for p, (data, modified) in table.items()
                if is_under(p, path)
            ),
            key=lambda f: f.path,
        )

    async def grep(
        self, pattern: str, path: str, *, literal: bool = False, ignore_case: bool = False
    ) -> list[GrepHit]:
        path = clean(path)
        regex = compile_pattern(pattern, literal=literal, ignore_case=ignore_case)
        table = await self.table()
        files = [(p, data) for p, (data, _) in table.items() if is_under(p, path)]
        return await asyncio.to_thread(grep_files, files, regex)


class StateBackend(TableBackend):
    """Files in memory, in the run's state: each run starts empty and sees only its own.

    The files come back in `RunResult.files`. Used on its own (outside an agent), a
    StateBackend keeps its files in `self.data`.
    """

    def __init__(
        self, files: FileTable | None = None, *, max_file_bytes: int = DEFAULT_MAX_FILE_BYTES
    ) -> None:
        super().__init__(max_file_bytes)
        self.data: FileTable = files if files is not None else {}

    def bind(self, state: Any) -> StateBackend:
        bound = StateBackend(state.files, max_file_bytes=self.max_file_bytes)
        bound.shown = self.shown
        return bound

    def key(self) -> object:
        return id(self.data)

    async def table(self) -> FileTable:
        return self.data

    async def swap(self, path: str, expected: bytes | None, data: bytes, modified: float) -> bool:
        found = self.data.get(path)
        if (found[0] if found else None) != expected:
            return False
        self.data[path] = (data, modified)
        return True
