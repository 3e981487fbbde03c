"""The embedded checkpointer: one SQLite file in WAL mode.

One connection per checkpointer, used from worker threads under a lock, serves any
number of runs in a process; WAL mode and a busy timeout let several processes share
the file. Each `append` is one `BEGIN IMMEDIATE` transaction.
"""

from __future__ import annotations

import asyncio
import json
import sqlite3
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TypeVar

from tether.checkpoint.base import Record, ThreadInfo
from tether.errors import ConfigurationError

__all__ = ["SCHEMA_VERSION", "SqliteCheckpointer"]

T = TypeVar("T")

# Each entry moves the schema from version i to i + 1; never edit one that has shipped.
_MIGRATIONS = (
    """
    CREATE TABLE tether_records (
        thread_id TEXT NOT NULL,
        seq INTEGER NOT NULL,
        created REAL NOT NULL,
        body TEXT NOT NULL,
        PRIMARY KEY (thread_id, seq)
    );
    """,
)
SCHEMA_VERSION = len(_MIGRATIONS)


class SqliteCheckpointer:
    """Thread logs in the SQLite database at `path` (created with its directory)."""

    def __init__(self, path: str | Path, *, busy_timeout_seconds: float = 30.0) -> None:
        self.path = str(path)
        self.busy_timeout_seconds = busy_timeout_seconds
        self._connection: sqlite3.Connection | None = None
        self._lock = threading.Lock()

    def __repr__(self) -> str:
        return f"SqliteCheckpointer({self.path!r})"

    async def append(self, thread_id: str, records: Sequence[Record]) -> None:
        bodies = [json.dumps(record, separators=(",", ":")) for record in records]

        def write(db: sqlite3.Connection) -> None:
            db.execute("BEGIN IMMEDIATE")
            try:
                (last,) = db.execute(
                    "SELECT COALESCE(MAX(seq), 0) FROM tether_records WHERE thread_id = ?",
                    (thread_id,),
                ).fetchone()
                now = time.time()
                db.executemany(
                    "INSERT INTO tether_records (thread_id, seq, created, body) "
                    "VALUES (?, ?, ?, ?)",
                    [(thread_id, last + i, now, body) for i, body in enumerate(bodies, 1)],
                )
            except BaseException:
                db.execute("ROLLBACK")
                raise
            db.execute("COMMIT")

        await self._run(write)

    async def load(self, thread_id: str) -> list[Record]:
        def read(db: sqlite3.Connection) -> list[Record]:
            rows = db.execute(
                "SELECT body FROM tether_records WHERE thread_id = ? ORDER BY seq", (thread_id,)
            ).fetchall()
            return [json.loads(body) for (body,) in rows]

        return await self._run(read)

    async def threads(self) -> list[ThreadInfo]:
        def read(db: sqlite3.Connection) -> list[ThreadInfo]:
            rows = db.execute(
                "SELECT thread_id, MIN(created), MAX(created), COUNT(*) FROM tether_records "
                "GROUP BY thread_id ORDER BY MAX(created) DESC, thread_id"
            ).fetchall()
            return [ThreadInfo(*row) for row in rows]

        return await self._run(read)

    async def delete(self, thread_id: str) -> bool:
        def remove(db: sqlite3.Connection) -> bool:
            with db:
                cursor = db.execute("DELETE FROM tether_records WHERE thread_id = ?", (thread_id,))
            return cursor.rowcount > 0

        return await self._run(remove)

    async def close(self) -> None:
        with self._lock:
            if self._connection is not None:
                self._connection.close()
                self._connection = None

    async def _run(self, work: Callable[[sqlite3.Connection], T]) -> T:
        def locked() -> T:
            with self._lock:
                return work(self._connect())

        return await asyncio.to_thread(locked)

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
        db.execute("PRAGMA journal_mode=WAL")
        db.execute("PRAGMA synchronous=NORMAL")  # durable against a killed process
        _migrate(db)
        self._connection = db
        return db


def _migrate(db: sqlite3.Connection) -> None:
    """Bring the schema to `SCHEMA_VERSION`, one migration per transaction."""
    db.execute("BEGIN IMMEDIATE")
    try:
        (version,) = db.execute("PRAGMA user_version").fetchone()
        if version > SCHEMA_VERSION:
            raise ConfigurationError(
                f"the checkpoint database has schema version {version}, newer than this "
                f"tether understands ({SCHEMA_VERSION}); upgrade tether"
            )
        for number in range(version, SCHEMA_VERSION):
            for statement in _MIGRATIONS[number].split(";"):
                if statement.strip():
                    db.execute(statement)
            db.execute(f"PRAGMA user_version = {number + 1}")
    except BaseException:
        db.execute("ROLLBACK")
        raise
    db.execute("COMMIT")
