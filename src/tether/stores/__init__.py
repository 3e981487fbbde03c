"""Key-value stores for data that outlives a run (long-term memory, StoreBackend)."""

from tether.stores.base import Namespace, Store, StoreItem
from tether.stores.memory import InMemoryStore

__all__ = ["InMemoryStore", "Namespace", "PostgresStore", "SqliteStore", "Store", "StoreItem"]


def __getattr__(name: str) -> object:
    # Imported on use: sqlite3 costs a few ms, and Postgres needs the postgres extra.
    if name == "SqliteStore":
        from tether.stores.sqlite import SqliteStore

        return SqliteStore
    if name == "PostgresStore":
        from tether.stores.postgres import PostgresStore

        return PostgresStore
    raise AttributeError(name)
