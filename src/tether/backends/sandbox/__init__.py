"""Backends that can also run commands: the `execute` tool appears when an agent has one.

- `SandboxBackend`: the protocol (every file operation, plus `execute`, `upload`,
  `download`); remote providers implement it (see the README).
- `LocalSandbox`: a workspace directory and commands isolated by bubblewrap.
- `ContainerSandbox`: the same directory, with commands in a container (podman, docker).
- `RemoteSandbox`: the base of a provider's adapter: three methods on its machine
  (`run`, `put`, `get`) make it a sandbox backend. `providers.sandbox(name)` makes
  any sandbox by name, including those packages register.
- `UnsafeLocalShell`: the same without isolation, for those who accept that.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from tether._lazy import lazy_names

if TYPE_CHECKING:
    from tether.backends.sandbox.base import ExecResult, SandboxBackend
    from tether.backends.sandbox.container import ContainerSandbox
    from tether.backends.sandbox.local import LocalSandbox, UnsafeLocalShell
    from tether.backends.sandbox.remote import RemoteSandbox

__all__ = [
    "ContainerSandbox",
    "ExecResult",
    "LocalSandbox",
    "RemoteSandbox",
    "SandboxBackend",
    "UnsafeLocalShell",
]

# The names load on first use (PEP 562): every agent checks its backend against the
# protocol in `base`, and only one given a local sandbox loads `local` (bubblewrap's
# command line, the host filesystem).
_HOMES = {
    "ContainerSandbox": "container",
    "ExecResult": "base",
    "SandboxBackend": "base",
    "LocalSandbox": "local",
    "RemoteSandbox": "remote",
    "UnsafeLocalShell": "local",
}


__getattr__, __dir__ = lazy_names(__name__, globals(), _HOMES)
