"""tether: long-running LLM agents that respect a budget.

from tether import create_agent, tool, Limits

The names below load on first use (PEP 562), so `import tether` and the `tether`
command start fast; `from tether import create_agent` loads the agent then.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from tether.agent import Agent, Prompt, RunResult, StopReason, create_agent
    from tether.approval import Answer, ApprovalRequest, Approve, Edit, Reject, Respond
    from tether.capabilities import Capability
    from tether.capabilities.compaction import Compaction
    from tether.errors import (
        AlreadyDecidedError,
        ConfigurationError,
        ContentFilterError,
        CostUnknownWarning,
        MCPServerError,
        ModelError,
        ModelHTTPError,
        OutputError,
        RunError,
        ScriptExhaustedError,
        StorageError,
        TetherError,
        TetherWarning,
        ThreadBusyError,
        ToolError,
        ToolFatalError,
    )
    from tether.limits import Limits
    from tether.models.prices import Price
    from tether.state import RunState, Todo, ToolContext
    from tether.tools.task import Background, SubAgent
    from tether.tools.tool import Tool, tool

__all__ = [
    "Agent",
    "AlreadyDecidedError",
    "Answer",
    "ApprovalRequest",
    "Approve",
    "Background",
    "Capability",
    "Compaction",
    "ConfigurationError",
    "ContentFilterError",
    "CostUnknownWarning",
    "Edit",
    "Limits",
    "MCPServerError",
    "ModelError",
    "ModelHTTPError",
    "OutputError",
    "Price",
    "Prompt",
    "Reject",
    "Respond",
    "RunError",
    "RunResult",
    "RunState",
    "ScriptExhaustedError",
    "StopReason",
    "StorageError",
    "SubAgent",
    "TetherError",
    "TetherWarning",
    "ThreadBusyError",
    "Todo",
    "Tool",
    "ToolContext",
    "ToolError",
    "ToolFatalError",
    "create_agent",
    "tool",
]

__version__ = "0.1.0"

_HOMES = {
    "Agent": "tether.agent",
    "Prompt": "tether.agent",
    "RunResult": "tether.agent",
    "StopReason": "tether.agent",
    "create_agent": "tether.agent",
    "Answer": "tether.approval",
    "ApprovalRequest": "tether.approval",
    "Approve": "tether.approval",
    "Edit": "tether.approval",
    "Reject": "tether.approval",
    "Respond": "tether.approval",
    "Capability": "tether.capabilities",
    "Compaction": "tether.capabilities.compaction",
    "AlreadyDecidedError": "tether.errors",
    "ConfigurationError": "tether.errors",
    "ContentFilterError": "tether.errors",
    "CostUnknownWarning": "tether.errors",
    "ModelError": "tether.errors",
    "MCPServerError": "tether.errors",
    "ModelHTTPError": "tether.errors",
    "OutputError": "tether.errors",
    "RunError": "tether.errors",
    "ScriptExhaustedError": "tether.errors",
    "TetherError": "tether.errors",
    "TetherWarning": "tether.errors",
    "StorageError": "tether.errors",
    "ThreadBusyError": "tether.errors",
    "ToolError": "tether.errors",
    "ToolFatalError": "tether.errors",
    "Limits": "tether.limits",
    "Price": "tether.models.prices",
    "RunState": "tether.state",
    "Todo": "tether.state",
    "ToolContext": "tether.state",
    "Tool": "tether.tools.tool",
    "tool": "tether.tools.tool",
    "Background": "tether.tools.task",
    "SubAgent": "tether.tools.task",
}


def __getattr__(name: str) -> Any:
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module 'tether' has no attribute {name!r}")
    value = getattr(importlib.import_module(home), name)
    globals()[name] = value  # later lookups skip this function
    return value


def __dir__() -> list[str]:
    return sorted([*globals(), *__all__])
