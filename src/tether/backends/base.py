"""The backend protocol: where the agent's files live.

Every backend takes clean virtual paths (see `tether.backends.paths`) and raises
`BackendError` with a message the model can act on. `glob` and `grep` are written once,
in `tether.backends.search`, over `files` and `read`; a backend may answer them faster
itself as long as the results are the same.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal, Protocol, TypeAlias, runtime_checkable

__all__ = ["DEFAULT_MAX_FILE_BYTES", "Admits", "Backend", "FileInfo", "GrepHit", "Operation"]

DEFAULT_MAX_FILE_BYTES = 10 * 1024 * 1024

Operation: TypeAlias = Literal["read", "write"]
Admits: TypeAlias = Callable[[Operation, str], bool]
"""`admits(operation, path)`: whether a guard allows the operation on that clean path."""


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
