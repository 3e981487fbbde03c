"""InMemoryStore: a Store in a dict, for tests and single-process use."""

from __future__ import annotations

import time

from tether.stores.base import Namespace, StoreItem

__all__ = ["InMemoryStore"]


class InMemoryStore:
    """Items live as long as the store object; share one store across agents to share data."""

    def __init__(self) -> None:
        self._data: dict[Namespace, dict[str, StoreItem]] = {}

    async def get(self, namespace: Namespace, key: str) -> StoreItem | None:
        return self._data.get(namespace, {}).get(key)

    async def put(self, namespace: Namespace, key: str, value: bytes) -> None:
        self._data.setdefault(namespace, {})[key] = StoreItem(bytes(value), time.time())

    async def swap(
        self, namespace: Namespace, key: str, expected: bytes | None, value: bytes
    ) -> bool:
        found = self._data.get(namespace, {}).get(key)
        if (found.value if found else None) != expected:
            return False
        await self.put(namespace, key, value)
        return True

    async def delete(self, namespace: Namespace, key: str) -> None:
        self._data.get(namespace, {}).pop(key, None)

    async def items(self, namespace: Namespace) -> dict[str, StoreItem]:
        return dict(self._data.get(namespace, {}))
