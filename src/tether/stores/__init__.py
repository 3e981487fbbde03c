"""Key-value stores for data that outlives a run (long-term memory, StoreBackend)."""

from tether.stores.base import Namespace, Store, StoreItem
from tether.stores.memory import InMemoryStore
from tether.stores.sqlite import SqliteStore

__all__ = ["InMemoryStore", "Namespace", "PostgresStore", "SqliteStore", "Store", "StoreItem"]


def __getattr__(name: str) -> object:
    if name == "PostgresStore":  # imported on use: it needs the postgres extra
        from tether.stores.postgres import PostgresStore

        return PostgresStore
    raise AttributeError(name)
