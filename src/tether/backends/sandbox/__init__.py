"""Backends that can also run commands: the `execute` tool appears when an agent has one.

- `SandboxBackend`: the protocol (every file operation, plus `execute`, `upload`,
  `download`); remote providers implement it (see the README).
- `LocalSandbox`: a workspace directory and commands isolated by bubblewrap.
- `UnsafeLocalShell`: the same without isolation, for those who accept that.
"""

from tether.backends.sandbox.base import ExecResult, SandboxBackend
from tether.backends.sandbox.local import LocalSandbox, UnsafeLocalShell

__all__ = ["ExecResult", "LocalSandbox", "SandboxBackend", "UnsafeLocalShell"]
