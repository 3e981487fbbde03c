"""Key-value stores for data that outlives a run (long-term memory, StoreBackend)."""

from tether.stores.base import Namespace, Store, StoreItem
from tether.stores.memory import InMemoryStore

__all__ = ["InMemoryStore", "Namespace", "Store", "StoreItem"]
