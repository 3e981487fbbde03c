"""The quick start: an agent with one tool and a structured answer.

Until a provider is configured this runs on a ScriptedModel, which replays the turns a
real model would take, so it works with no API key and no network.
"""

import asyncio

from pydantic import BaseModel

from tether import Limits, create_agent, tool
from tether.events import ModelDelta, RunFinished, ToolCallFinished, ToolCallStarted
from tether.messages import ToolCall
from tether.models import ScriptedModel


@tool
async def add(a: int, b: int) -> int:
    """Add two integers.

    Args:
        a: The first number.
        b: The second number.
    """
    return a + b


class Answer(BaseModel):
    total: int


def main() -> None:
    model = ScriptedModel(
        [
            [ToolCall("add", {"a": 2, "b": 3})],
            [ToolCall("final_result", {"total": 5})],
        ]
    )
    agent = create_agent(
        model,
        tools=[add],
        output_type=Answer,
        limits=Limits(max_steps=20, max_total_tokens=200_000, max_cost_usd=1.0),
    )
    result = agent.run("What is 2 + 3?")
    print(f"output: {result.output!r}")
    print(f"stop reason: {result.stop_reason}, steps: {result.steps}")
    print(f"tokens: {result.usage.total_tokens}, cost: ${result.cost_usd:.4f}")
    assert result.output == Answer(total=5)
    assert result.stop_reason == "completed"

    async def watch() -> None:
        streaming = create_agent(
            ScriptedModel([[ToolCall("add", {"a": 40, "b": 2})], "The answer is 42."]),
            tools=[add],
        )
        async for event in streaming.stream("What is 40 + 2?"):
            if isinstance(event, ToolCallStarted):
                print(f"  -> {event.call.name}({event.call.args})")
            elif isinstance(event, ToolCallFinished):
                print(f"  <- {event.result.text}")
            elif isinstance(event, ModelDelta) and event.part == "text":
                print(f"  model: {event.delta}")
            elif isinstance(event, RunFinished):
                print(f"  finished: {event.result.stop_reason}")

    asyncio.run(watch())


if __name__ == "__main__":
    main()
