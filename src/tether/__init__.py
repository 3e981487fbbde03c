"""tether: long-running LLM agents that respect a budget.

from tether import create_agent, tool, Limits
"""

from tether.agent import Agent, Prompt, RunResult, StopReason, create_agent
from tether.approval import ApprovalRequest, Approve, Edit, Reject, Respond
from tether.capabilities import Capability
from tether.capabilities.compaction import Compaction
from tether.errors import (
    ConfigurationError,
    CostUnknownWarning,
    ModelError,
    ModelHTTPError,
    OutputError,
    RunError,
    ScriptExhaustedError,
    TetherError,
    TetherWarning,
    ToolError,
    ToolFatalError,
)
from tether.limits import Limits
from tether.models.prices import Price
from tether.state import RunState, Todo, ToolContext
from tether.tools import Tool, tool
from tether.tools.task import SubAgent

__all__ = [
    "Agent",
    "ApprovalRequest",
    "Approve",
    "Capability",
    "Compaction",
    "ConfigurationError",
    "CostUnknownWarning",
    "Edit",
    "Limits",
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
    "SubAgent",
    "TetherError",
    "TetherWarning",
    "Todo",
    "Tool",
    "ToolContext",
    "ToolError",
    "ToolFatalError",
    "create_agent",
    "tool",
]

__version__ = "0.1.0"
