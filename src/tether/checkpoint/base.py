"""The `Checkpointer` protocol, and opening one from a URL."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol, TypeAlias, runtime_checkable

from tether.errors import ConfigurationError

__all__ = ["Checkpointer", "Record", "ThreadInfo", "open_checkpointer"]

Record: TypeAlias = dict[str, Any]
"""One JSON object of a thread's log; its "t" key says what it records."""


@dataclass(frozen=True, slots=True)
class ThreadInfo:
    """One thread: when it began and was last written, and how many records it holds."""

    thread_id: str
    created: float
    updated: float
    records: int


@runtime_checkable
class Checkpointer(Protocol):
    """An append-only log of JSON records per thread.

    `append` must be durable when it returns (a process killed right after loses
    nothing) and safe to call from many runs at once, in one process or several.
    """

    async def append(self, thread_id: str, records: Sequence[Record]) -> None:
        """Add `records` to the end of the thread's log, in order, atomically."""
        ...

    async def load(self, thread_id: str) -> list[Record]:
        """Every record of the thread, oldest first; [] for an unknown thread."""
        ...

    async def threads(self) -> list[ThreadInfo]:
        """Every thread, the most recently written first."""
        ...

    async def delete(self, thread_id: str) -> bool:
        """Remove a thread's log; whether there was one."""
        ...

    async def close(self) -> None:
        """Release connections; the checkpointer opens them again if used later."""
        ...


def open_checkpointer(url: str) -> Checkpointer:
    """A checkpointer for `url`: "sqlite:///relative/path.db", "sqlite:////absolute.db",
    "sqlite://:memory:", or "postgresql://user:password@host/db"."""
    if not isinstance(url, str):
        raise ConfigurationError(f"a checkpointer URL must be a string, got {type(url).__name__}")
    if url.startswith("sqlite://"):
        from tether.checkpoint.sqlite import SqliteCheckpointer

        path = url.removeprefix("sqlite://")
        path = path[1:] if path.startswith("/") else path
        if not path:
            raise ConfigurationError(f"no database path in {url!r}; try sqlite:///.tether/runs.db")
        return SqliteCheckpointer(path)
    if url.startswith(("postgresql://", "postgres://")):
        from tether.checkpoint.postgres import PostgresCheckpointer

        return PostgresCheckpointer(url)
    raise ConfigurationError(
        f"unknown checkpointer URL {url!r}: use sqlite:///path.db or postgresql://..."
    )
