"""agent.stream(): typed events, in order, with the agent path."""

from __future__ import annotations

import asyncio

import pytest

from tether import ScriptExhaustedError, create_agent, tool
from tether.events import (
    ModelDelta,
    RunFinished,
    RunStarted,
    StepFinished,
    ToolCallFinished,
    ToolCallStarted,
)
from tether.messages import ToolCall
from tether.models import FunctionModel, ModelRequest, ScriptedModel


@tool
async def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


async def test_stream_yields_the_run_as_typed_events() -> None:
    call = ToolCall("add", {"a": 1, "b": 2}, id="c1")
    agent = create_agent(ScriptedModel([["Let me add.", call], "3"]), tools=[add])
    events = [event async for event in agent.stream("1+2?")]
    kinds = [type(e).__name__ for e in events]
    assert kinds == [
        "RunStarted",
        "ModelDelta",
        "ModelDelta",
        "StepFinished",
        "ToolCallStarted",
        "ToolCallFinished",
        "ModelDelta",
        "StepFinished",
        "RunFinished",
    ]
    assert all(e.path == ("main",) for e in events)
    assert events[1] == ModelDelta(("main",), "text", "Let me add.")
    started = events[4]
    assert isinstance(started, ToolCallStarted)
    assert started.call.provider_id == "c1"  # the delta names the call by tether's id
    own = started.call.id
    assert events[2] == ModelDelta(("main",), "tool_call", '{"a": 1, "b": 2}', own, "add")
    finished = events[5]
    assert isinstance(finished, ToolCallFinished)
    assert finished.result.text == "3"
    assert finished.call == started.call
    assert finished.result.call_id == started.call.id
    last = events[-1]
    assert isinstance(last, RunFinished)
    assert last.result.output == "3"
    step = events[3]
    assert isinstance(step, StepFinished)
    assert step.steps == 1
    assert step.usage == last.result.messages[1].usage  # type: ignore[union-attr]
    assert events[-2] == StepFinished(("main",), 2, last.result.usage, last.result.cost_usd)
    assert isinstance(events[0], RunStarted)
    assert events[0].run_id == last.result.run_id


async def test_a_failed_run_yields_run_finished_then_raises() -> None:
    agent = create_agent(ScriptedModel([[ToolCall("add", {"a": 1, "b": 2})]]), tools=[add])
    seen: list[object] = []

    async def consume() -> None:
        async for event in agent.stream("go"):
            seen.append(event)

    with pytest.raises(ScriptExhaustedError):
        await consume()
    assert isinstance(seen[-1], RunFinished)
    assert seen[-1].result.stop_reason == "error"


async def test_leaving_the_stream_early_cancels_the_run() -> None:
    cancelled = asyncio.Event()

    async def slow(request: ModelRequest) -> str:
        try:
            await asyncio.sleep(60)
        except asyncio.CancelledError:
            cancelled.set()
            raise
        return "never"

    agent = create_agent(FunctionModel(slow))
    async for event in agent.stream("go"):
        assert isinstance(event, RunStarted)
        break
    await asyncio.wait_for(cancelled.wait(), timeout=5)


async def test_parallel_tool_events_arrive_as_calls_finish() -> None:
    gate = asyncio.Event()

    @tool
    async def slow() -> str:
        """Slow."""
        await gate.wait()
        return "slow"

    @tool
    async def fast() -> str:
        """Fast."""
        gate.set()
        return "fast"

    agent = create_agent(
        ScriptedModel([[ToolCall("slow"), ToolCall("fast")], "done"]), tools=[slow, fast]
    )
    finished = [e.call.name async for e in agent.stream("go") if isinstance(e, ToolCallFinished)]
    assert finished == ["fast", "slow"]
