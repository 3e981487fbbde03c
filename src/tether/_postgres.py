"""One Postgres database shared by the checkpointer and the store (extra
`tether[postgres]`, psycopg 3): a connection per event loop, versioned migrations per
component, and transactions serialized per thread of records with advisory locks."""

from __future__ import annotations

import asyncio
import weakref
from collections.abc import Awaitable, Callable, Sequence
from typing import TYPE_CHECKING, Any, TypeVar

from tether.errors import ConfigurationError, StorageError, TetherError

if TYPE_CHECKING:
    import psycopg

__all__ = ["PostgresDatabase"]

T = TypeVar("T")
_MIGRATION_LOCK = 0x7E7E_0001  # pg_advisory_xact_lock key held while migrating


def _psycopg() -> Any:
    try:
        import psycopg
    except ImportError as exc:
        raise ConfigurationError(
            "the Postgres checkpointer and store need psycopg: pip install 'tether[postgres]'"
        ) from exc
    return psycopg


class PostgresDatabase:
    """The database at `url`; a connection is opened per event loop on first use."""

    def __init__(self, url: str, component: str, migrations: Sequence[str]) -> None:
        _psycopg()  # fail at construction, not at the first run, when psycopg is missing
        self.url = url
        self.where = describe(url)
        """The database without its password, for messages."""
        self.component = component
        self.migrations = tuple(migrations)
        self._connections: weakref.WeakKeyDictionary[
            asyncio.AbstractEventLoop, tuple[psycopg.AsyncConnection[Any], asyncio.Lock]
        ] = weakref.WeakKeyDictionary()
        self._opening: weakref.WeakKeyDictionary[
            asyncio.AbstractEventLoop,
            asyncio.Task[tuple[psycopg.AsyncConnection[Any], asyncio.Lock]],
        ] = weakref.WeakKeyDictionary()

    async def run(self, work: Callable[[psycopg.AsyncConnection[Any]], Awaitable[T]]) -> T:
        """`await work(connection)` inside one transaction, alone on the connection."""
        try:
            connection, lock = await self._connect()
            async with lock, connection.transaction():
                return await work(connection)
        except TetherError:
            raise
        except (_psycopg().Error, OSError) as error:
            raise self._failure(error) from error

    async def run_statement(
        self, work: Callable[[psycopg.AsyncConnection[Any]], Awaitable[T]]
    ) -> T:
        """Like `run`, for `work` that runs one statement: with no transaction block
        around it (BEGIN and COMMIT would be two more round trips), the statement is a
        transaction of its own."""
        try:
            connection, lock = await self._connect()
            async with lock:
                return await work(connection)
        except TetherError:
            raise
        except (_psycopg().Error, OSError) as error:
            raise self._failure(error) from error

    def _failure(self, error: Exception) -> StorageError:
        text = str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
        if isinstance(error, _psycopg().OperationalError):
            why = (
                "cannot be reached; check that the server runs and that the URL's host, port, "
                "database, user and password are right"
            )
        else:
            why = f"failed: {type(error).__name__}"
        return StorageError(
            f"the Postgres database {self.where} {why} (Postgres: {text})", database=self.where
        )

    async def close(self) -> None:
        for connection, _ in list(self._connections.values()):
            await connection.close()
        self._connections.clear()

    async def _connect(self) -> tuple[psycopg.AsyncConnection[Any], asyncio.Lock]:
        loop = asyncio.get_running_loop()
        found = self._connections.get(loop)
        if found is None:
            self._close_orphans()
        if found is None or found[0].closed:
            # Every run of this loop waits for the same connection to open.
            opening = self._opening.get(loop)
            if opening is None or opening.done():
                opening = self._opening[loop] = loop.create_task(self._open())
            found = await asyncio.shield(opening)
            self._connections[loop] = found
        return found

    def _close_orphans(self) -> None:
        """Close the connections of event loops that have closed (each `agent.run()`
        runs its own loop): nothing else would, and the server's slots run out."""
        for loop, (connection, _) in list(self._connections.items()):
            if loop.is_closed():
                del self._connections[loop]
                connection.pgconn.finish()  # what AsyncConnection.close() does, minus the await

    async def _open(self) -> tuple[psycopg.AsyncConnection[Any], asyncio.Lock]:
        connection = await _psycopg().AsyncConnection.connect(self.url, autocommit=True)
        async with connection.transaction():
            await self._migrate(connection)
        return connection, asyncio.Lock()

    async def _migrate(self, db: psycopg.AsyncConnection[Any]) -> None:
        await db.execute("SELECT pg_advisory_xact_lock(%s)", (_MIGRATION_LOCK,))
        await db.execute(
            "CREATE TABLE IF NOT EXISTS tether_schema "
            "(component TEXT PRIMARY KEY, version INTEGER NOT NULL)"
        )
        cursor = await db.execute(
            "SELECT version FROM tether_schema WHERE component = %s", (self.component,)
        )
        row = await cursor.fetchone()
        version = row[0] if row else 0
        if version > len(self.migrations):
            raise StorageError(
                f"the {self.component} tables in {self.where} were written by a newer tether "
                f"(schema version {version}; this one reads up to {len(self.migrations)}); "
                "tether changed nothing. Upgrade tether, or point it at another database",
                database=self.where,
            )
        for number in range(version, len(self.migrations)):
            await db.execute(self.migrations[number])
        if version < len(self.migrations):
            await db.execute(
                "INSERT INTO tether_schema (component, version) VALUES (%s, %s) "
                "ON CONFLICT (component) DO UPDATE SET version = excluded.version",
                (self.component, len(self.migrations)),
            )


def describe(url: str) -> str:
    """`url` as user@host:port/database, without its password."""
    try:
        parts = _psycopg().conninfo.conninfo_to_dict(url)
    except Exception:  # not parseable: say nothing that could hold a password
        return "postgresql://..."
    user = f"{parts['user']}@" if parts.get("user") else ""
    port = f":{parts['port']}" if parts.get("port") else ""
    return f"postgresql://{user}{parts.get('host') or 'localhost'}{port}/{parts.get('dbname', '')}"
