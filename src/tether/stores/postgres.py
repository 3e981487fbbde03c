"""A `Store` in Postgres (extra `tether[postgres]`): long-term memory shared by every
process and machine that reaches the database."""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

from tether._postgres import PostgresDatabase
from tether.stores.base import Namespace, StoreItem, namespace_key

if TYPE_CHECKING:
    import psycopg

__all__ = ["PostgresStore"]

_MIGRATIONS = (
    """
    CREATE TABLE tether_store (
        namespace TEXT NOT NULL,
        key TEXT NOT NULL,
        value BYTEA NOT NULL,
        updated DOUBLE PRECISION NOT NULL,
        PRIMARY KEY (namespace, key)
    )
    """,
)


class PostgresStore:
    """Items in the Postgres database at `url` ("postgresql://user:pw@host/db")."""

    def __init__(self, url: str) -> None:
        self.db = PostgresDatabase(url, "store", _MIGRATIONS)

    def __repr__(self) -> str:
        return "PostgresStore(...)"  # the URL may hold a password

    async def get(self, namespace: Namespace, key: str) -> StoreItem | None:
        async def read(db: psycopg.AsyncConnection[Any]) -> StoreItem | None:
            cursor = await db.execute(
                "SELECT value, updated FROM tether_store WHERE namespace = %s AND key = %s",
                (namespace_key(namespace), key),
            )
            row = await cursor.fetchone()
            return None if row is None else StoreItem(bytes(row[0]), row[1])

        return await self.db.run(read)

    async def put(self, namespace: Namespace, key: str, value: bytes) -> None:
        async def write(db: psycopg.AsyncConnection[Any]) -> None:
            await db.execute(
                "INSERT INTO tether_store (namespace, key, value, updated) "
                "VALUES (%s, %s, %s, %s) ON CONFLICT (namespace, key) DO UPDATE "
                "SET value = excluded.value, updated = excluded.updated",
                (namespace_key(namespace), key, bytes(value), time.time()),
            )

        await self.db.run(write)

    async def swap(
        self, namespace: Namespace, key: str, expected: bytes | None, value: bytes
    ) -> bool:
        async def write(db: psycopg.AsyncConnection[Any]) -> bool:
            where = (namespace_key(namespace), key)
            if expected is None:
                cursor = await db.execute(
                    "INSERT INTO tether_store (namespace, key, value, updated) "
                    "VALUES (%s, %s, %s, %s) ON CONFLICT (namespace, key) DO NOTHING",
                    (*where, bytes(value), time.time()),
                )
            else:  # one statement: the row is locked from the comparison to the update
                cursor = await db.execute(
                    "UPDATE tether_store SET value = %s, updated = %s "
                    "WHERE namespace = %s AND key = %s AND value = %s",
                    (bytes(value), time.time(), *where, bytes(expected)),
                )
            return cursor.rowcount == 1

        return await self.db.run(write)

    async def delete(self, namespace: Namespace, key: str) -> None:
        async def remove(db: psycopg.AsyncConnection[Any]) -> None:
            await db.execute(
                "DELETE FROM tether_store WHERE namespace = %s AND key = %s",
                (namespace_key(namespace), key),
            )

        await self.db.run(remove)

    async def items(self, namespace: Namespace) -> dict[str, StoreItem]:
        async def read(db: psycopg.AsyncConnection[Any]) -> dict[str, StoreItem]:
            cursor = await db.execute(
                "SELECT key, value, updated FROM tether_store WHERE namespace = %s",
                (namespace_key(namespace),),
            )
            rows = await cursor.fetchall()
            return {key: StoreItem(bytes(value), updated) for key, value, updated in rows}

        return await self.db.run(read)

    async def close(self) -> None:
        await self.db.close()
