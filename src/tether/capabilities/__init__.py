"""Capabilities: pieces of harness behaviour that plug into the loop through hooks."""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from tether.capabilities.base import Capability, ToolHandler
    from tether.capabilities.dangling import DanglingToolCallRepair

__all__ = ["Capability", "DanglingToolCallRepair", "ToolHandler"]

# The names load on first use (PEP 562), so importing one capability's module does not
# import the others.
_HOMES = {"Capability": "base", "ToolHandler": "base", "DanglingToolCallRepair": "dangling"}


def __getattr__(name: str) -> Any:
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module 'tether.capabilities' has no attribute {name!r}")
    value = getattr(importlib.import_module(f"tether.capabilities.{home}"), name)
    globals()[name] = value  # later lookups skip this function
    return value


def __dir__() -> list[str]:
    return sorted([*globals(), *__all__])
