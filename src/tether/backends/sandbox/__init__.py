"""Backends that can also run commands: the `execute` tool appears when an agent has one.

- `SandboxBackend`: the protocol (every file operation, plus `execute`, `upload`,
  `download`); remote providers implement it (see the README).
- `LocalSandbox`: a workspace directory and commands isolated by bubblewrap.
- `UnsafeLocalShell`: the same without isolation, for those who accept that.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from tether.backends.sandbox.base import ExecResult, SandboxBackend
    from tether.backends.sandbox.local import LocalSandbox, UnsafeLocalShell

__all__ = ["ExecResult", "LocalSandbox", "SandboxBackend", "UnsafeLocalShell"]

# The names load on first use (PEP 562): every agent checks its backend against the
# protocol in `base`, and only one given a local sandbox loads `local` (bubblewrap's
# command line, the host filesystem).
_HOMES = {
    "ExecResult": "base",
    "SandboxBackend": "base",
    "LocalSandbox": "local",
    "UnsafeLocalShell": "local",
}


def __getattr__(name: str) -> Any:
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module 'tether.backends.sandbox' has no attribute {name!r}")
    value = getattr(importlib.import_module(f"tether.backends.sandbox.{home}"), name)
    globals()[name] = value  # later lookups skip this function
    return value


def __dir__() -> list[str]:
    return sorted([*globals(), *__all__])
