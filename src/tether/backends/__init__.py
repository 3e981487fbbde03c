"""Where an agent's files live: pluggable backends, path safety and permissions.

- `StateBackend` (the default): in memory, one set of files per run.
- `FilesystemBackend(root, virtual_mode=True)`: a real directory, confined to root.
- `StoreBackend(store, namespace)`: a key-value store; files outlive runs and threads.
- `CompositeBackend(default, routes)`: different paths on different backends.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from tether._lazy import lazy_names

if TYPE_CHECKING:
    from tether.backends.base import Backend, FileInfo, GrepHit
    from tether.backends.composite import CompositeBackend
    from tether.backends.errors import BackendError
    from tether.backends.filesystem import FilesystemBackend
    from tether.backends.permissions import PermissionedBackend, Rule
    from tether.backends.state import StateBackend
    from tether.backends.store import StoreBackend

__all__ = [
    "Backend",
    "BackendError",
    "CompositeBackend",
    "FileInfo",
    "FilesystemBackend",
    "GrepHit",
    "PermissionedBackend",
    "Rule",
    "StateBackend",
    "StoreBackend",
]

# The names load on first use (PEP 562): an agent on the default in-memory files loads
# neither the host filesystem's modules nor the permission rules' glob matcher.
_HOMES = {
    "Backend": "base",
    "FileInfo": "base",
    "GrepHit": "base",
    "CompositeBackend": "composite",
    "BackendError": "errors",
    "FilesystemBackend": "filesystem",
    "PermissionedBackend": "permissions",
    "Rule": "permissions",
    "StateBackend": "state",
    "StoreBackend": "store",
}


__getattr__, __dir__ = lazy_names(__name__, globals(), _HOMES)
