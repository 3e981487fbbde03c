"""StoreBackend: files in a key-value Store, so they persist across runs and threads."""

from __future__ import annotations

from typing import Any

from tether.backends.base import DEFAULT_MAX_FILE_BYTES
from tether.backends.state import FileTable, TableBackend
from tether.errors import ConfigurationError
from tether.stores.base import Store

__all__ = ["StoreBackend"]


class StoreBackend(TableBackend):
    """Files kept in `store` under the namespace ("files", `namespace`).

    Give each assistant its own `namespace` so their files stay apart; runs of the same
    assistant, in any thread, see the same files.
    """

    def __init__(
        self,
        store: Store,
        namespace: str = "default",
        *,
        max_file_bytes: int = DEFAULT_MAX_FILE_BYTES,
    ) -> None:
        if not isinstance(store, Store):
            missing = [
                m for m in ("get", "put", "swap", "delete", "items") if not hasattr(store, m)
            ]
            raise ConfigurationError(
                f"StoreBackend needs a tether.stores.Store, got {type(store).__name__} "
                f"(it has no {', '.join(missing) or 'Store methods'})"
            )
        if not namespace:
            raise ConfigurationError("StoreBackend namespace must not be empty")
        super().__init__(max_file_bytes)
        self.store = store
        self.namespace = ("files", namespace)

    def __repr__(self) -> str:
        return f"StoreBackend(namespace={self.namespace[1]!r})"

    def bind(self, state: Any) -> StoreBackend:
        return self

    def key(self) -> object:
        return (id(self.store), self.namespace)

    async def table(self) -> FileTable:
        items = await self.store.items(self.namespace)
        return {key: (item.value, item.updated) for key, item in items.items()}

    async def swap(self, path: str, expected: bytes | None, data: bytes, modified: float) -> bool:
        return await self.store.swap(self.namespace, path, expected, data)
