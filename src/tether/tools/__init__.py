"""Tools the model can call: `@tool`, `Tool`, and the `ToolContext` a tool may ask for."""

from tether.state import ToolContext
from tether.tools.tool import Tool, tool

__all__ = ["Tool", "ToolContext", "tool"]
