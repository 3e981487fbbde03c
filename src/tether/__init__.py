"""tether: long-running LLM agents that respect a budget.

from tether import create_agent, tool, Limits

The names below load on first use (PEP 562), so `import tether` and the `tether`
command start fast; `from tether import create_agent` loads the agent then.

The package is built in layers, and a module imports only from its own layer or the
ones below it (also inside functions and for type checking; `make lint` checks this with
import-linter, the contract in pyproject.toml). Where a lower layer needs an upper one,
the upper one hands it down: the loop gives the subagents capability the function that
runs an agent (`tether.state.RUN_AGENT`), and the loop and the `task` tool see an agent
only as a `tether.plan.RunnableAgent`. From the top:

    durable, serve, cli, testing       what runs agents for people: workers, HTTP, a terminal
    agent (_create, _build, _options)  Agent and create_agent: options composed into a plan
    loop (_loop_gates, _loop_model,    one run: request -> model -> tools -> limits,
      _loop_tools)                     recorded step by step
    capabilities, mcp, tracing, plan,  what an agent is made of: prompt sections, tools
      prompt, profiles                 and hooks; MCP servers' tools; OpenTelemetry
    models, tools, output              model adapters; the @tool machinery and built-in tools
    backends, stores, checkpoint       files, long-term memory, the run log
    errors, messages, events, limits,  plain data and rules every layer shares, RunResult
      approval, state, result          included
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from tether._lazy import lazy_names
from tether._version import __version__ as __version__

if TYPE_CHECKING:
    from tether._create import create_agent
    from tether.agent import Agent, Prompt
    from tether.approval import Answer, ApprovalRequest, Approve, Edit, Reject, Respond
    from tether.capabilities import Capability
    from tether.capabilities.compaction import Compaction
    from tether.capabilities.masking import Masking
    from tether.capabilities.subagents import Background, SubAgent
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
    from tether.result import RunResult, StopReason
    from tether.state import RunState, Todo, ToolContext
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
    "Masking",
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

_HOMES = {
    "Agent": "tether.agent",
    "Prompt": "tether.agent",
    "RunResult": "tether.result",
    "StopReason": "tether.result",
    "create_agent": "tether._create",
    "Answer": "tether.approval",
    "ApprovalRequest": "tether.approval",
    "Approve": "tether.approval",
    "Edit": "tether.approval",
    "Reject": "tether.approval",
    "Respond": "tether.approval",
    "Capability": "tether.capabilities",
    "Compaction": "tether.capabilities.compaction",
    "Masking": "tether.capabilities.masking",
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
    "Background": "tether.capabilities.subagents",
    "SubAgent": "tether.capabilities.subagents",
}


__getattr__, __dir__ = lazy_names(__name__, globals(), _HOMES)
