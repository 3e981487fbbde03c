"""Capabilities: pieces of harness behaviour that plug into the loop through hooks."""

from __future__ import annotations

from typing import TYPE_CHECKING

from tether._lazy import lazy_names

if TYPE_CHECKING:
    from tether.capabilities.base import Capability, ToolHandler
    from tether.capabilities.dangling import DanglingToolCallRepair

__all__ = ["Capability", "DanglingToolCallRepair", "ToolHandler"]

# The names load on first use (PEP 562), so importing one capability's module does not
# import the others.
_HOMES = {"Capability": "base", "ToolHandler": "base", "DanglingToolCallRepair": "dangling"}


__getattr__, __dir__ = lazy_names(__name__, globals(), _HOMES)
