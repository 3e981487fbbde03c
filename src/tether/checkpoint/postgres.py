"""Thread logs in Postgres (extra `tether[postgres]`), for runs spread over processes
and machines. Appends and lease changes on one thread are serialized by a
transaction-scoped advisory lock, so writers in several processes never collide on a
sequence number, and a lease is judged by the server's clock, not each machine's."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from tether._postgres import PostgresDatabase
from tether.checkpoint.base import Record, ThreadInfo, decode
from tether.checkpoint.lease import Holder, Lease, busy, lost

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
    """
    CREATE TABLE tether_leases (
        thread_id TEXT PRIMARY KEY,
        holder TEXT NOT NULL,
        owner TEXT NOT NULL,
        expires DOUBLE PRECISION NOT NULL
    )
    """,
    # An append as one statement, so one round trip and one commit: the thread's lock
    # first, then the insert, which (a statement of a volatile function) takes its own
    # snapshot after the lock and so sees every earlier append. The records are numbered
    # on from the thread's last, and inserted only while the holder (when given) holds
    # the thread's lease; it returns how many went in.
    """
    CREATE OR REPLACE FUNCTION tether_append(p_thread TEXT, p_holder TEXT, p_bodies TEXT[])
    RETURNS BIGINT VOLATILE LANGUAGE plpgsql AS $$
    DECLARE
        inserted BIGINT;
    BEGIN
        PERFORM pg_advisory_xact_lock(hashtextextended(p_thread, 0));
        INSERT INTO tether_records (thread_id, seq, created, body)
        SELECT p_thread, last.seq + item.n, extract(epoch FROM clock_timestamp())::float8,
            item.body
        FROM (SELECT COALESCE(MAX(seq), 0) AS seq FROM tether_records
              WHERE thread_id = p_thread) AS last,
            unnest(p_bodies) WITH ORDINALITY AS item(body, n)
        WHERE p_holder IS NULL OR EXISTS (
            SELECT FROM tether_leases WHERE thread_id = p_thread AND holder = p_holder);
        GET DIAGNOSTICS inserted = ROW_COUNT;
        RETURN inserted;
    END
    $$
    """,
)


class PostgresCheckpointer:
    """Thread logs in the Postgres database at `url` ("postgresql://user:pw@host/db")."""

    def __init__(self, url: str) -> None:
        self.db = PostgresDatabase(url, "checkpoint", _MIGRATIONS)

    def __repr__(self) -> str:
        return f"PostgresCheckpointer({self.db.where!r})"  # never the password

    async def append(
        self, thread_id: str, records: Sequence[Record], *, holder: str | None = None
    ) -> None:
        bodies = [json.dumps(record, separators=(",", ":")) for record in records]
        if not bodies:  # nothing to add: only the lease to check
            if holder is not None:
                current = await self._current(thread_id)
                if current is None or current.holder.token != holder:
                    raise lost(thread_id, current)
            return

        async def write(db: psycopg.AsyncConnection[Any]) -> int:
            cursor = await db.execute(_APPEND, (thread_id, holder, bodies))
            row = await cursor.fetchone()
            return int(row[0]) if row else 0

        inserted = await self.db.run_statement(write)
        if inserted != len(bodies):  # the lease was not the holder's: none were
            raise lost(thread_id, await self._current(thread_id))

    async def _current(self, thread_id: str) -> Lease | None:
        async def read(db: psycopg.AsyncConnection[Any]) -> Lease | None:
            return await _lease(db, thread_id)

        return await self.db.run(read)

    async def acquire(self, thread_id: str, holder: Holder, seconds: float) -> Lease | None:
        async def take(db: psycopg.AsyncConnection[Any]) -> Lease | None:
            now = await _lock(db, thread_id)
            current = await _lease(db, thread_id)
            if current is not None and current.keeps_from(holder.token, now):
                return current
            await db.execute(
                "INSERT INTO tether_leases (thread_id, holder, owner, expires) "
                "VALUES (%s, %s, %s, %s) ON CONFLICT (thread_id) DO UPDATE SET "
                "holder = excluded.holder, owner = excluded.owner, expires = excluded.expires",
                (thread_id, holder.token, holder.to_json(), now + seconds),
            )
            return None

        return await self.db.run(take)

    async def renew(self, thread_id: str, holder: str, seconds: float) -> bool:
        async def extend(db: psycopg.AsyncConnection[Any]) -> bool:
            now = await _lock(db, thread_id)
            cursor = await db.execute(
                "UPDATE tether_leases SET expires = %s WHERE thread_id = %s AND holder = %s",
                (now + seconds, thread_id, holder),
            )
            return cursor.rowcount == 1

        return await self.db.run(extend)

    async def release(self, thread_id: str, holder: str) -> None:
        async def end(db: psycopg.AsyncConnection[Any]) -> None:
            await _lock(db, thread_id)
            await db.execute(
                "DELETE FROM tether_leases WHERE thread_id = %s AND holder = %s",
                (thread_id, holder),
            )

        await self.db.run(end)

    async def load(self, thread_id: str) -> list[Record]:
        async def read(db: psycopg.AsyncConnection[Any]) -> list[Record]:
            cursor = await db.execute(
                "SELECT seq, body FROM tether_records WHERE thread_id = %s ORDER BY seq",
                (thread_id,),
            )
            return [
                decode(body, database=self.db.where, thread_id=thread_id, seq=seq)
                for seq, body in await cursor.fetchall()
            ]

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
            now = await _lock(db, thread_id)
            current = await _lease(db, thread_id)
            if current is not None and not current.stale(now):
                raise busy(current)
            await db.execute("DELETE FROM tether_leases WHERE thread_id = %s", (thread_id,))
            cursor = await db.execute(
                "DELETE FROM tether_records WHERE thread_id = %s", (thread_id,)
            )
            return cursor.rowcount > 0

        return await self.db.run(remove)

    async def close(self) -> None:
        await self.db.close()


_APPEND = "SELECT tether_append(%s::text, %s::text, %s::text[])"


async def _lock(db: psycopg.AsyncConnection[Any], thread_id: str) -> float:
    """Hold the thread's advisory lock to the end of the transaction; the server's time."""
    cursor = await db.execute(
        "SELECT pg_advisory_xact_lock(hashtextextended(%s, 0)), "
        "extract(epoch FROM clock_timestamp())::float8",
        (thread_id,),
    )
    row = await cursor.fetchone()
    assert row is not None
    return float(row[1])


async def _lease(db: psycopg.AsyncConnection[Any], thread_id: str) -> Lease | None:
    cursor = await db.execute(
        "SELECT owner, expires FROM tether_leases WHERE thread_id = %s", (thread_id,)
    )
    row = await cursor.fetchone()
    return Lease.stored(thread_id, *row) if row else None
