"""The durable agent the throughput bench runs: `tether worker --app durable_app`.

A scripted model makes two calls to a no-op tool, then answers: three model steps and
two tool calls a run, each recorded in the thread's journal.
"""

from __future__ import annotations

import os

from tether import create_agent, tool
from tether.durable.dbos import DurableAgent
from tether.messages import ToolCall, ToolResultMessage
from tether.models.base import ModelRequest
from tether.models.scripted import FunctionModel, Turn

CONCURRENCY = 8  # runs in progress per worker


@tool
def noop(step: int) -> str:
    """Do nothing."""
    return f"step {step}"


def two_calls(request: ModelRequest) -> Turn:
    done = sum(isinstance(m, ToolResultMessage) for m in request.messages)
    return [ToolCall("noop", {"step": done})] if done < 2 else "done"


AGENT = create_agent(FunctionModel(two_calls), tools=[noop])

bench = DurableAgent(
    AGENT,
    name="bench",
    worker_concurrency=CONCURRENCY,
    poll_seconds=0.05,
    schema=os.environ.get("TETHER_BENCH_SCHEMA", "dbos"),
)
