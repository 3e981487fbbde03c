"""The key-value store behind long-term memory: namespaced keys to bytes."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

__all__ = ["Namespace", "Store", "StoreItem", "namespace_key"]

Namespace = tuple[str, ...]


def namespace_key(namespace: Namespace) -> str:
    """A namespace as one exact string, for stores keyed by text: its parts as JSON."""
    return json.dumps(list(namespace))


@dataclass(frozen=True, slots=True)
class StoreItem:
    """A stored value and when it was last written (epoch seconds)."""

    value: bytes
    updated: float


@runtime_checkable
class Store(Protocol):
    """Where data outlives a run. Implementations must be safe for concurrent runs."""

    async def get(self, namespace: Namespace, key: str) -> StoreItem | None:
        """The item at `key`, or None."""
        ...

    async def put(self, namespace: Namespace, key: str, value: bytes) -> None:
        """Create or replace the item at `key`."""
        ...

    async def swap(
        self, namespace: Namespace, key: str, expected: bytes | None, value: bytes
    ) -> bool:
        """Put `value` at `key` only if the item there still holds `expected` (None: only
        if there is no item), as one step for every process sharing the store; whether
        it was put. `StoreBackend` writes files this way, so none is lost."""
        ...

    async def delete(self, namespace: Namespace, key: str) -> None:
        """Remove `key`; nothing happens when it is absent."""
        ...

    async def items(self, namespace: Namespace) -> dict[str, StoreItem]:
        """Every item in `namespace`, by key."""
        ...
