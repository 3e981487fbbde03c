"""Where an agent's files live: pluggable backends, path safety and permissions.

- `StateBackend` (the default): in memory, one set of files per run.
- `FilesystemBackend(root, virtual_mode=True)`: a real directory, confined to root.
- `StoreBackend(store, namespace)`: a key-value store; files outlive runs and threads.
- `CompositeBackend(default, routes)`: different paths on different backends.
"""

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
