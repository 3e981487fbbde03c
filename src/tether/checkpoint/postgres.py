"""Thread logs in Postgres (extra `tether[postgres]`), for runs spread over processes
and machines. Appends to one thread are serialized by a transaction-scoped advisory
lock, so writers in several processes never collide on a sequence number."""

from __future__ import annotations

import json
import time
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from tether._postgres import PostgresDatabase
from tether.checkpoint.base import Record, ThreadInfo

if TYPE_CHECKING:
    import psycopg

__all__ = ["PostgresCheckpointer"]

_MIGRATIONS = (
    """
    CREATE TABLE tether_records (
        thread_id TEXT NOT NULL,
        seq BIGINT NOT NULL,
        created DOUBLE PRECISION NOT NULL,
        body TEXT NOT NULL,
        PRIMARY KEY (thread_id, seq)
    )
    """,
)


class PostgresCheckpointer:
    """Thread logs in the Postgres database at `url` ("postgresql://user:pw@host/db")."""

    def __init__(self, url: str) -> None:
        self.db = PostgresDatabase(url, "checkpoint", _MIGRATIONS)

    def __repr__(self) -> str:
        return "PostgresCheckpointer(...)"  # the URL may hold a password

    async def append(self, thread_id: str, records: Sequence[Record]) -> None:
        bodies = [json.dumps(record, separators=(",", ":")) for record in records]

        async def write(db: psycopg.AsyncConnection[Any]) -> None:
            await db.execute("SELECT pg_advisory_xact_lock(hashtextextended(%s, 0))", (thread_id,))
            cursor = await db.execute(
                "SELECT COALESCE(MAX(seq), 0) FROM tether_records WHERE thread_id = %s",
                (thread_id,),
            )
            row = await cursor.fetchone()
            last = row[0] if row else 0
            now = time.time()
            async with db.cursor() as insert:
                await insert.executemany(
                    "INSERT INTO tether_records (thread_id, seq, created, body) "
                    "VALUES (%s, %s, %s, %s)",
                    [(thread_id, last + i, now, body) for i, body in enumerate(bodies, 1)],
                )

        await self.db.run(write)

    async def load(self, thread_id: str) -> list[Record]:
        async def read(db: psycopg.AsyncConnection[Any]) -> list[Record]:
            cursor = await db.execute(
                "SELECT body FROM tether_records WHERE thread_id = %s ORDER BY seq", (thread_id,)
            )
            return [json.loads(body) for (body,) in await cursor.fetchall()]

        return await self.db.run(read)

    async def threads(self) -> list[ThreadInfo]:
        async def read(db: psycopg.AsyncConnection[Any]) -> list[ThreadInfo]:
            cursor = await db.execute(
                "SELECT thread_id, MIN(created), MAX(created), COUNT(*) FROM tether_records "
                "GROUP BY thread_id ORDER BY MAX(created) DESC, thread_id"
            )
            return [ThreadInfo(*row) for row in await cursor.fetchall()]

        return await self.db.run(read)

    async def delete(self, thread_id: str) -> bool:
        async def remove(db: psycopg.AsyncConnection[Any]) -> bool:
            cursor = await db.execute(
                "DELETE FROM tether_records WHERE thread_id = %s", (thread_id,)
            )
            return cursor.rowcount > 0

        return await self.db.run(remove)

    async def close(self) -> None:
        await self.db.close()
