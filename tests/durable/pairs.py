"""A durable agent whose one turn makes two gated calls, for the partial-decision tests:
`tether worker --app tests.durable.pairs`. Its tool `mark` writes a row each time its
body runs, so a test sees how often each call ran."""

from __future__ import annotations

import asyncio
import os

import psycopg

from tether import ToolContext, create_agent, tool
from tether.durable.dbos import DurableAgent
from tether.messages import ToolCall, ToolResultMessage
from tether.models.base import ModelRequest
from tether.models.scripted import FunctionModel, Turn

DATABASE = os.environ["TETHER_DATABASE_URL"]
SCHEMA = os.environ.get("TETHER_TEST_SCHEMA", "dbos")


@tool
async def mark(name: str, ctx: ToolContext) -> str:
    """Mark a name in the shared table."""
    async with await psycopg.AsyncConnection.connect(DATABASE, autocommit=True) as db:
        await db.execute(
            "INSERT INTO durable_marks (thread, name) VALUES (%s, %s)", (ctx.state.thread_id, name)
        )
    return f"marked {name}"


async def two_marks(request: ModelRequest) -> Turn:
    await asyncio.sleep(0.05)
    if any(isinstance(m, ToolResultMessage) for m in request.messages):
        return "marked what was approved"
    return [ToolCall("mark", {"name": "a"}), ToolCall("mark", {"name": "b"})]


pairs = DurableAgent(
    create_agent(FunctionModel(two_marks), tools=[mark], interrupt_on={"mark": True}),
    name="pairs",
    poll_seconds=0.1,
    schema=SCHEMA,
)
