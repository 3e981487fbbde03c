"""The error every backend raises for a request it cannot serve."""

from __future__ import annotations

from tether.errors import ToolError

__all__ = ["BackendError"]


class BackendError(ToolError):
    """A file operation failed; the message is written for the model to act on."""
