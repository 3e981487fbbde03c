"""The `Checkpointer` protocol, and opening one from a URL."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol, TypeAlias, runtime_checkable

from tether.errors import ConfigurationError, StorageError

if TYPE_CHECKING:
    from tether.checkpoint.lease import Holder, Lease

__all__ = ["Checkpointer", "Record", "ThreadInfo", "decode", "open_checkpointer"]

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
    """An append-only log of JSON records per thread, and a lease per thread.

    `append` must be durable when it returns (a process killed right after loses
    nothing) and safe to call from many runs at once, in one process or several. The
    lease methods and the check in `append` must be atomic against each other across
    processes (see `tether.checkpoint.lease`). Errors are `StorageError`s.
    """

    async def append(
        self, thread_id: str, records: Sequence[Record], *, holder: str | None = None
    ) -> None:
        """Add `records` to the end of the thread's log, in order, atomically.

        With `holder` (a lease token), only while that holder has the thread's lease:
        otherwise nothing is added and `ThreadBusyError` is raised.
        """
        ...

    async def acquire(self, thread_id: str, holder: Holder, seconds: float) -> Lease | None:
        """Take the thread's lease for `seconds`: None when it is `holder`'s now, or the
        lease of the holder that keeps it (unexpired, and its process not known gone)."""
        ...

    async def renew(self, thread_id: str, holder: str, seconds: float) -> bool:
        """Extend the lease of `holder` (its token) by `seconds` from now; False when the
        thread's lease is no longer that holder's (it was taken over)."""
        ...

    async def release(self, thread_id: str, holder: str) -> None:
        """End the lease of `holder` (its token), if it still holds it."""
        ...

    async def load(self, thread_id: str) -> list[Record]:
        """Every record of the thread, oldest first; [] for an unknown thread."""
        ...

    async def threads(self) -> list[ThreadInfo]:
        """Every thread, the most recently written first."""
        ...

    async def delete(self, thread_id: str) -> bool:
        """Remove a thread's log; whether there was one. `ThreadBusyError` while a run
        holds the thread."""
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


def decode(body: str | bytes, *, database: str, thread_id: str, seq: int) -> Record:
    """One stored record, or a `StorageError` that says which one cannot be read."""
    try:
        record = json.loads(body)
    except ValueError as exc:
        record = exc
    if not isinstance(record, dict) or not isinstance(record.get("t"), str):
        raise StorageError(
            f"record {seq} of thread {thread_id!r} in {database} is damaged (not a tether "
            "record); tether changed nothing. Delete the thread, or restore the database "
            "from a backup",
            database=database,
        )
    return record
