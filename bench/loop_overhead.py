"""Harness time per step: does it grow with the conversation?

Runs scripted agents of 10, 100 and 1,000 steps (one cheap tool call a step) and reports
the time per step spent outside the model (wall time minus time inside the model), next
to a bare hand-written loop (model call, tool call, append) measured in the same run.
It also compares the first and the last 100 steps of the 1,000-step run: a ratio near 1
means the per-step cost does not grow with the history.

    .venv/bin/python bench/loop_overhead.py [--repeat 5]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import time
from collections.abc import AsyncIterator
from typing import Any

from tether import Capability, Limits, RunState, create_agent, tool
from tether.messages import Message, ToolCall, ToolResult, ToolResultMessage, UserMessage
from tether.models import ModelRequest, ModelResponse, ScriptedModel, StreamItem, response_of


@tool
async def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


class TimedModel:
    """A ScriptedModel that records how long each request spent inside the model."""

    def __init__(self, steps: int) -> None:
        turns: list[Any] = [[ToolCall("add", {"a": i, "b": 1})] for i in range(steps - 1)]
        self.inner = ScriptedModel([*turns, "done"])
        self.name, self.provider = self.inner.name, self.inner.provider
        self.model_seconds: list[float] = []

    async def request(self, request: ModelRequest) -> ModelResponse:
        return await response_of(self.stream(request))

    async def stream(self, request: ModelRequest) -> AsyncIterator[StreamItem]:
        started = time.perf_counter()
        items = [item async for item in self.inner.stream(request)]
        self.model_seconds.append(time.perf_counter() - started)
        for item in items:
            yield item


class StepClock(Capability):
    """Stamps the start of every step, so each step's duration can be computed."""

    def __init__(self) -> None:
        self.stamps: list[float] = []

    async def before_model(self, state: RunState, request: ModelRequest) -> ModelRequest:
        self.stamps.append(time.perf_counter())
        return request


async def tether_run(steps: int) -> tuple[float, list[float]]:
    """Harness seconds per step overall, and per step for each step."""
    model, clock = TimedModel(steps), StepClock()
    agent = create_agent(model, tools=[add], limits=Limits(max_steps=None), capabilities=[clock])
    started = time.perf_counter()
    result = await agent.arun("count")
    wall = time.perf_counter() - started
    assert result.stop_reason == "completed", result.stop_reason
    assert result.steps == steps, result.steps
    ends = [*clock.stamps[1:], started + wall]
    per_step = [
        end - begin - m
        for begin, end, m in zip(clock.stamps, ends, model.model_seconds, strict=True)
    ]
    return (wall - sum(model.model_seconds)) / steps, per_step


async def bare_run(steps: int) -> float:
    """The floor: the same model and tool in the simplest loop that can work."""
    model = TimedModel(steps)
    messages: list[Message] = [UserMessage.of("count")]
    specs = (add.spec,)
    started = time.perf_counter()
    while True:
        response = await model.request(ModelRequest("", tuple(messages), specs))
        messages.append(response.message)
        calls = response.message.tool_calls
        if not calls:
            break
        results = []
        for call in calls:
            assert isinstance(call.args, dict)
            value = await add.function(**call.args)
            results.append(ToolResult.of(call, str(value)))
        messages.append(ToolResultMessage(tuple(results)))
    wall = time.perf_counter() - started
    return (wall - sum(model.model_seconds)) / steps


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--repeat", type=int, default=5, help="runs per size (median kept)")
    args = parser.parse_args()

    print(f"{'steps':>6} {'tether µs/step':>15} {'bare µs/step':>13} {'ratio':>6}")
    last_per_step: list[float] = []
    for steps in (10, 100, 1000):
        ours, floor = [], []
        for _ in range(args.repeat):
            overall, per_step = asyncio.run(tether_run(steps))
            ours.append(overall)
            floor.append(asyncio.run(bare_run(steps)))
            last_per_step = per_step
        t, b = statistics.median(ours) * 1e6, statistics.median(floor) * 1e6
        print(f"{steps:>6} {t:>15.1f} {b:>13.1f} {t / b:>6.2f}")

    first = statistics.median(last_per_step[:100]) * 1e6
    last = statistics.median(last_per_step[-100:]) * 1e6
    print(
        f"1000-step run, median harness time per step: first 100 steps {first:.1f} µs, "
        f"last 100 steps {last:.1f} µs, last/first {last / first:.2f}"
    )


if __name__ == "__main__":
    main()
