"""A `Store` in SQLite: long-term memory that survives the process, shareable by
several processes (WAL mode). It can share one file with the checkpointer."""

from __future__ import annotations

import asyncio
import sqlite3
import time
from pathlib import Path

from tether._sqlite import SqliteDatabase, transaction
from tether.stores.base import Namespace, StoreItem, namespace_key

__all__ = ["SqliteStore"]

_MIGRATIONS = (
    """
    CREATE TABLE tether_store (
        namespace TEXT NOT NULL,
        key TEXT NOT NULL,
        value BLOB NOT NULL,
        updated REAL NOT NULL,
        PRIMARY KEY (namespace, key)
    )
    """,
)


class SqliteStore:
    """Items in the SQLite database at `path` (e.g. ".tether/store.db")."""

    def __init__(self, path: str | Path) -> None:
        self.db = SqliteDatabase(path, "store", _MIGRATIONS)

    async def get(self, namespace: Namespace, key: str) -> StoreItem | None:
        def read(db: sqlite3.Connection) -> StoreItem | None:
            row = db.execute(
                "SELECT value, updated FROM tether_store WHERE namespace = ? AND key = ?",
                (namespace_key(namespace), key),
            ).fetchone()
            return None if row is None else StoreItem(bytes(row[0]), row[1])

        return await self.db.run(read)

    async def put(self, namespace: Namespace, key: str, value: bytes) -> None:
        def write(db: sqlite3.Connection) -> None:
            with transaction(db):
                db.execute(
                    "INSERT INTO tether_store (namespace, key, value, updated) VALUES (?, ?, ?, ?) "
                    "ON CONFLICT (namespace, key) DO UPDATE "
                    "SET value = excluded.value, updated = excluded.updated",
                    (namespace_key(namespace), key, bytes(value), time.time()),
                )

        await self.db.run(write)

    async def swap(
        self, namespace: Namespace, key: str, expected: bytes | None, value: bytes
    ) -> bool:
        def write(db: sqlite3.Connection) -> bool:
            where = (namespace_key(namespace), key)
            with transaction(db):  # a write transaction from the start: no one comes between
                row = db.execute(
                    "SELECT value FROM tether_store WHERE namespace = ? AND key = ?", where
                ).fetchone()
                if (None if row is None else bytes(row[0])) != expected:
                    return False
                db.execute(
                    "INSERT INTO tether_store (namespace, key, value, updated) VALUES (?, ?, ?, ?) "
                    "ON CONFLICT (namespace, key) DO UPDATE "
                    "SET value = excluded.value, updated = excluded.updated",
                    (*where, bytes(value), time.time()),
                )
                return True

        return await self.db.run(write)

    async def delete(self, namespace: Namespace, key: str) -> None:
        def remove(db: sqlite3.Connection) -> None:
            with transaction(db):
                db.execute(
                    "DELETE FROM tether_store WHERE namespace = ? AND key = ?",
                    (namespace_key(namespace), key),
                )

        await self.db.run(remove)

    async def items(self, namespace: Namespace) -> dict[str, StoreItem]:
        def read(db: sqlite3.Connection) -> dict[str, StoreItem]:
            rows = db.execute(
                "SELECT key, value, updated FROM tether_store WHERE namespace = ?",
                (namespace_key(namespace),),
            ).fetchall()
            return {key: StoreItem(bytes(value), updated) for key, value, updated in rows}

        return await self.db.run(read)

    async def close(self) -> None:
        await asyncio.to_thread(self.db.close)  # it waits for a write in flight
