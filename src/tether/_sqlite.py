"""One SQLite file shared by the checkpointer and the store: a connection used from
worker threads under a lock, WAL mode, and versioned migrations per component."""

from __future__ import annotations

import asyncio
import contextlib
import os
import sqlite3
import stat
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import TypeVar

from tether.errors import StorageError

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
                try:
                    return work(self._connect())
                except (sqlite3.Error, OSError) as error:
                    raise self._failure(error) from error

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
        try:
            self._check_foreign(db)
            _wal(db, self.busy_timeout_seconds)
            db.execute("PRAGMA synchronous=NORMAL")  # durable against a killed process
            with transaction(db):
                self._migrate(db)
        except BaseException:
            db.close()
            raise
        self._connection = db
        return db

    def _check_foreign(self, db: sqlite3.Connection) -> None:
        """Refuse a database that holds another program's tables: tether writes only
        into its own files."""
        tables = [
            name
            for (name,) in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")
            if not name.startswith("sqlite_")
        ]
        if tables and "tether_schema" not in tables:
            shown = ", ".join(sorted(tables)[:5])
            raise StorageError(
                f"{self.path} holds another program's tables ({shown}), not tether's; "
                "tether changed nothing in it. Point tether at another file",
                database=self.path,
            )

    def _failure(self, error: sqlite3.Error | OSError) -> StorageError:
        """What broke, said for a person: the file, the cause, and what to do."""
        path = self.path
        text = str(error)
        try:
            directory = stat.S_ISDIR(os.stat(path).st_mode)
        except OSError:
            directory = False
        if directory:
            why = "is a directory, not a database file; remove it or point tether at a file"
        elif isinstance(error, OSError):
            why = "cannot be created; check its directory and its permissions"
        elif "file is not a database" in text or "malformed" in text:
            why = (
                "is damaged or is not a SQLite database; tether changed nothing in it. "
                "Restore it from a backup, or move it aside to start a new one"
            )
        elif "readonly" in text or "read-only" in text:
            why = "is read-only to this process; give it (and its directory) write permission"
        elif "unable to open" in text:
            why = (
                "cannot be opened: its directory is missing or not writable by this process; "
                "check the path and its permissions"
            )
        elif "locked" in text or "busy" in text:
            why = (
                f"stayed locked by another process for {self.busy_timeout_seconds:g} s; "
                "find the process that holds it (fuser) and let it finish"
            )
        elif "full" in text:
            why = "cannot grow: the disk is full; free some space"
        else:
            why = f"failed: {type(error).__name__}: {text}"
        source = "" if isinstance(error, OSError) else "SQLite: "
        return StorageError(f"the SQLite database {path} {why} ({source}{text})", database=path)

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
            raise StorageError(
                f"the {self.component} tables in {self.path} were written by a newer tether "
                f"(schema version {version}; this one reads up to {len(self.migrations)}); "
                "tether changed nothing. Upgrade tether, or point it at another file",
                database=self.path,
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
