"""The embedded checkpointer: thread logs in one SQLite file in WAL mode.

One connection per checkpointer, used from worker threads under a lock, serves any
number of runs in a process; WAL mode and a busy timeout let several processes share
the file. Each `append`, and each step of a lease, is one `BEGIN IMMEDIATE` transaction,
so SQLite's write lock makes them atomic across processes.
"""

from __future__ import annotations

import asyncio
import functools
import json
import sqlite3
import time
from collections.abc import Sequence
from pathlib import Path

from tether._sqlite import SqliteDatabase, transaction
from tether.checkpoint.base import Record, ThreadInfo, decode
from tether.checkpoint.lease import Holder, Lease, busy, lost

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
    """
    CREATE TABLE tether_leases (
        thread_id TEXT PRIMARY KEY,
        holder TEXT NOT NULL,
        owner TEXT NOT NULL,
        expires REAL NOT NULL
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

    async def append(
        self, thread_id: str, records: Sequence[Record], *, holder: str | None = None
    ) -> None:
        bodies = [json.dumps(record, separators=(",", ":")) for record in records]

        def write(db: sqlite3.Connection) -> None:
            with transaction(db):
                token, last = db.execute(_HEAD, (thread_id,)).fetchone()
                if holder is not None and token != holder:
                    raise lost(thread_id, _lease(db, thread_id))
                now = time.time()
                rows = [(thread_id, last + i, now, body) for i, body in enumerate(bodies, 1)]
                for start in range(0, len(rows), _ROWS_A_STATEMENT):
                    chunk = rows[start : start + _ROWS_A_STATEMENT]
                    db.execute(_inserting(len(chunk)), [v for row in chunk for v in row])

        await self.db.run(write)

    async def acquire(self, thread_id: str, holder: Holder, seconds: float) -> Lease | None:
        def take(db: sqlite3.Connection) -> Lease | None:
            with transaction(db):
                now = time.time()
                current = _lease(db, thread_id)
                if current is not None and current.keeps_from(holder.token, now):
                    return current
                db.execute(
                    "INSERT INTO tether_leases (thread_id, holder, owner, expires) "
                    "VALUES (?, ?, ?, ?) ON CONFLICT (thread_id) DO UPDATE SET "
                    "holder = excluded.holder, owner = excluded.owner, expires = excluded.expires",
                    (thread_id, holder.token, holder.to_json(), now + seconds),
                )
                return None

        return await self.db.run(take)

    async def renew(self, thread_id: str, holder: str, seconds: float) -> bool:
        def extend(db: sqlite3.Connection) -> bool:
            with transaction(db):
                cursor = db.execute(
                    "UPDATE tether_leases SET expires = ? WHERE thread_id = ? AND holder = ?",
                    (time.time() + seconds, thread_id, holder),
                )
            return cursor.rowcount == 1

        return await self.db.run(extend)

    async def release(self, thread_id: str, holder: str) -> None:
        def end(db: sqlite3.Connection) -> None:
            with transaction(db):
                db.execute(
                    "DELETE FROM tether_leases WHERE thread_id = ? AND holder = ?",
                    (thread_id, holder),
                )

        await self.db.run(end)

    async def load(self, thread_id: str) -> list[Record]:
        def read(db: sqlite3.Connection) -> list[Record]:
            rows = db.execute(
                "SELECT seq, body FROM tether_records WHERE thread_id = ? ORDER BY seq",
                (thread_id,),
            ).fetchall()
            return [
                decode(body, database=self.db.path, thread_id=thread_id, seq=seq)
                for seq, body in rows
            ]

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
                current = _lease(db, thread_id)
                if current is not None and not current.stale(time.time()):
                    raise busy(current)
                db.execute("DELETE FROM tether_leases WHERE thread_id = ?", (thread_id,))
                cursor = db.execute("DELETE FROM tether_records WHERE thread_id = ?", (thread_id,))
            return cursor.rowcount > 0

        return await self.db.run(remove)

    async def close(self) -> None:
        await asyncio.to_thread(self.db.close)  # it waits for a write in flight


_HEAD = (  # the lease's holder and the last seq, in one statement
    "SELECT (SELECT holder FROM tether_leases WHERE thread_id = ?1), "
    "(SELECT COALESCE(MAX(seq), 0) FROM tether_records WHERE thread_id = ?1)"
)


_ROWS_A_STATEMENT = 200  # 800 values: under the 999 of SQLite before 3.32


@functools.lru_cache(maxsize=16)
def _inserting(rows: int) -> str:
    """One INSERT of `rows` records: a step's append is one statement, not one a record."""
    values = ", ".join(["(?, ?, ?, ?)"] * rows)
    return f"INSERT INTO tether_records (thread_id, seq, created, body) VALUES {values}"


def _lease(db: sqlite3.Connection, thread_id: str) -> Lease | None:
    row = db.execute(
        "SELECT owner, expires FROM tether_leases WHERE thread_id = ?", (thread_id,)
    ).fetchone()
    return Lease.stored(thread_id, *row) if row else None
