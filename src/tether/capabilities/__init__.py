"""Capabilities: pieces of harness behaviour that plug into the loop through hooks."""

from tether.capabilities.base import Capability, ToolHandler
from tether.capabilities.dangling import DanglingToolCallRepair

__all__ = ["Capability", "DanglingToolCallRepair", "ToolHandler"]
