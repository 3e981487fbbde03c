"""The embedded checkpointer: thread logs in one SQLite file in WAL mode.

One connection per checkpointer, used from worker threads under a lock, serves any
number of runs in a process; WAL mode and a busy timeout let several processes share
the file. Each `append` is one `BEGIN IMMEDIATE` transaction.
"""

from __future__ import annotations

import json
import sqlite3
import time
from collections.abc import Sequence
from pathlib import Path

from tether._sqlite import SqliteDatabase, transaction
from tether.checkpoint.base import Record, ThreadInfo

__all__ = ["SCHEMA_VERSION", "SqliteCheckpointer"]

# Each entry moves the schema from version i to i + 1; never edit one that has shipped.
_MIGRATIONS = (
    """
    CREATE TABLE tether_records (
        thread_id TEXT NOT NULL,
        seq INTEGER NOT NULL,
        created REAL NOT NULL,
        body TEXT NOT NULL,
        PRIMARY KEY (thread_id, seq)
    )
    """,
)
SCHEMA_VERSION = len(_MIGRATIONS)


class SqliteCheckpointer:
    """Thread logs in the SQLite database at `path` (created with its directory)."""

    def __init__(self, path: str | Path, *, busy_timeout_seconds: float = 30.0) -> None:
        self.db = SqliteDatabase(
            path, "checkpoint", _MIGRATIONS, busy_timeout_seconds=busy_timeout_seconds
        )

    def __repr__(self) -> str:
        return f"SqliteCheckpointer({self.db.path!r})"

    async def append(self, thread_id: str, records: Sequence[Record]) -> None:
        bodies = [json.dumps(record, separators=(",", ":")) for record in records]

        def write(db: sqlite3.Connection) -> None:
            with transaction(db):
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

        await self.db.run(write)

    async def load(self, thread_id: str) -> list[Record]:
        def read(db: sqlite3.Connection) -> list[Record]:
            rows = db.execute(
                "SELECT body FROM tether_records WHERE thread_id = ? ORDER BY seq", (thread_id,)
            ).fetchall()
            return [json.loads(body) for (body,) in rows]

        return await self.db.run(read)

    async def threads(self) -> list[ThreadInfo]:
        def read(db: sqlite3.Connection) -> list[ThreadInfo]:
            rows = db.execute(
                "SELECT thread_id, MIN(created), MAX(created), COUNT(*) FROM tether_records "
                "GROUP BY thread_id ORDER BY MAX(created) DESC, thread_id"
            ).fetchall()
            return [ThreadInfo(*row) for row in rows]

        return await self.db.run(read)

    async def delete(self, thread_id: str) -> bool:
        def remove(db: sqlite3.Connection) -> bool:
            with transaction(db):
                cursor = db.execute("DELETE FROM tether_records WHERE thread_id = ?", (thread_id,))
            return cursor.rowcount > 0

        return await self.db.run(remove)

    async def close(self) -> None:
        self.db.close()
