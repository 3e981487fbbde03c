"""One SQLite file shared by the checkpointer and the store: a connection used from
worker threads under a lock, WAL mode, and versioned migrations per component."""

from __future__ import annotations

import asyncio
import contextlib
import sqlite3
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import TypeVar

from tether.errors import ConfigurationError

__all__ = ["SqliteDatabase", "transaction"]

T = TypeVar("T")


class SqliteDatabase:
    """The database file at `path`, created with its directory on first use.

    `migrations` moves the schema of `component` from version i to i + 1 at index i;
    entries that have shipped are never edited. Several components can share a file.
    """

    def __init__(
        self,
        path: str | Path,
        component: str,
        migrations: Sequence[str],
        *,
        busy_timeout_seconds: float = 30.0,
    ) -> None:
        self.path = str(path)
        self.component = component
        self.migrations = tuple(migrations)
        self.busy_timeout_seconds = busy_timeout_seconds
        self._connection: sqlite3.Connection | None = None
        self._lock = threading.Lock()

    async def run(self, work: Callable[[sqlite3.Connection], T]) -> T:
        """`work(connection)` on a worker thread, alone on the connection."""

        def locked() -> T:
            with self._lock:
                return work(self._connect())

        return await asyncio.to_thread(locked)

    def close(self) -> None:
        with self._lock:
            if self._connection is not None:
                self._connection.close()
                self._connection = None

    def _connect(self) -> sqlite3.Connection:
        if self._connection is not None:
            return self._connection
        if self.path != ":memory:":
            Path(self.path).parent.mkdir(parents=True, exist_ok=True)
        db = sqlite3.connect(
            self.path,
            timeout=self.busy_timeout_seconds,
            isolation_level=None,  # transactions are explicit
            check_same_thread=False,  # used from worker threads, one at a time
        )
        _wal(db, self.busy_timeout_seconds)
        db.execute("PRAGMA synchronous=NORMAL")  # durable against a killed process
        with transaction(db):
            self._migrate(db)
        self._connection = db
        return db

    def _migrate(self, db: sqlite3.Connection) -> None:
        db.execute(
            "CREATE TABLE IF NOT EXISTS tether_schema "
            "(component TEXT PRIMARY KEY, version INTEGER NOT NULL)"
        )
        row = db.execute(
            "SELECT version FROM tether_schema WHERE component = ?", (self.component,)
        ).fetchone()
        version = row[0] if row else 0
        if version > len(self.migrations):
            raise ConfigurationError(
                f"the {self.component} tables in {self.path} have schema version {version}, "
                f"newer than this tether understands ({len(self.migrations)}); upgrade tether"
            )
        for number in range(version, len(self.migrations)):
            # One statement at a time: executescript would commit the open transaction.
            for statement in self.migrations[number].split(";"):
                if statement.strip():
                    db.execute(statement)
        if version < len(self.migrations):
            db.execute(
                "INSERT INTO tether_schema (component, version) VALUES (?, ?) "
                "ON CONFLICT (component) DO UPDATE SET version = excluded.version",
                (self.component, len(self.migrations)),
            )


def _wal(db: sqlite3.Connection, patience: float) -> None:
    """Switch the file to WAL. SQLite answers "database is locked" at once, without its
    busy handler, while another connection makes the same switch; so wait and retry."""
    deadline = time.monotonic() + patience
    pause = 0.005
    while True:
        try:
            db.execute("PRAGMA journal_mode=WAL")
            return
        except sqlite3.OperationalError as error:
            if "locked" not in str(error) or time.monotonic() > deadline:
                raise
        time.sleep(pause)
        pause = min(pause * 2, 0.2)


@contextlib.contextmanager
def transaction(db: sqlite3.Connection) -> Iterator[sqlite3.Connection]:
    """`BEGIN IMMEDIATE` ... `COMMIT`, or `ROLLBACK` on any error."""
    db.execute("BEGIN IMMEDIATE")
    try:
        yield db
    except BaseException:
        db.execute("ROLLBACK")
        raise
    db.execute("COMMIT")
