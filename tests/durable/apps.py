"""Durable agents that the worker tests run: `tether worker --app tests.durable.apps`.

Their tool `append` writes one row per call to a shared log in the test database, keyed
by thread and call id, and one row per execution to a second table: the first shows
each side effect happened once, the second how often the tool body ran.
"""

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
CALLS = 3  # append calls per run
PAUSE = float(os.environ.get("TETHER_TEST_PAUSE", "0.05"))  # seconds a model call takes


@tool(idempotent=True)
async def append(step: int, ctx: ToolContext) -> str:
    """Append a line to the shared log."""
    key = f"{ctx.state.thread_id}:{ctx.call.id}"
    async with await psycopg.AsyncConnection.connect(DATABASE, autocommit=True) as db:
        await db.execute("INSERT INTO durable_runs (key, pid) VALUES (%s, %s)", (key, os.getpid()))
        await db.execute(
            "INSERT INTO durable_log (key, thread, step) VALUES (%s, %s, %s) "
            "ON CONFLICT (key) DO NOTHING",
            (key, ctx.state.thread_id, step),
        )
    return f"logged step {step}"


async def three_appends(request: ModelRequest) -> Turn:
    await asyncio.sleep(PAUSE)
    done = sum(isinstance(m, ToolResultMessage) for m in request.messages)
    if done < CALLS:
        return [ToolCall("append", {"step": done})]
    task = request.messages[0].text  # type: ignore[union-attr]
    return f"done: {task}"


jobs = DurableAgent(
    create_agent(FunctionModel(three_appends), tools=[append]),
    name="jobs",
    worker_concurrency=4,
    poll_seconds=0.1,
    schema=SCHEMA,
)

gated = DurableAgent(
    create_agent(FunctionModel(three_appends), tools=[append], interrupt_on={"append": True}),
    name="gated",
    poll_seconds=0.1,
    schema=SCHEMA,
)


async def delegating(request: ModelRequest) -> Turn:
    """The main agent hands the work to a subagent, whose one `append` is gated."""
    await asyncio.sleep(PAUSE)
    first = request.messages[0].text  # type: ignore[union-attr]
    answers = [
        r.text for m in request.messages if isinstance(m, ToolResultMessage) for r in m.results
    ]
    if first == "Append once.":  # the subagent
        return f"sub: {answers[-1]}" if answers else [ToolCall("append", {"step": 0})]
    if answers:
        return f"delegated: {answers[-1]}"
    task = {"subagent_type": "general-purpose", "description": "Append once."}
    return [ToolCall("task", task)]


delegated = DurableAgent(
    create_agent(FunctionModel(delegating), tools=[append], interrupt_on={"append": True}),
    name="delegated",
    poll_seconds=0.1,
    schema=SCHEMA,
)
