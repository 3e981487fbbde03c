"""tether's side of the benchmark. Runs in the project's .venv.

.venv/bin/python bench/tether_side.py SCENARIO key=value ...
"""

from __future__ import annotations

import asyncio
import json
import statistics
import tempfile
import time
from collections.abc import AsyncIterator
from typing import Any

import scenarios
from scenarios import Answer, ModelClock, Run


def _cold_import() -> dict[str, Any]:
    started = time.perf_counter()
    # What a user's program does; a bare `import tether` loads its names lazily.
    from tether import create_agent, tool  # noqa: F401

    return {"ms": (time.perf_counter() - started) * 1000}


class ScriptModel:
    """A tether model that follows `scenarios.next_action` and times itself."""

    name, provider = "bench-script", "test"

    def __init__(self, clock: ModelClock) -> None:
        self.clock = clock
        self.first: Any = None

    async def request(self, request: Any) -> Any:
        from tether.messages import (
            AssistantMessage,
            TextPart,
            ToolCall,
            ToolResultMessage,
            UserMessage,
        )
        from tether.models import ModelResponse

        started = self.clock.enter()
        if self.first is None:
            self.first = request
        messages = request.messages
        task = next(m.text for m in messages if isinstance(m, UserMessage))
        last = messages[-1]
        tool_text = last.results[-1].text if isinstance(last, ToolResultMessage) else None
        action = scenarios.next_action(task, tool_text)
        if isinstance(action, Answer):
            response = ModelResponse(AssistantMessage((TextPart(action.text),)), "stop")
        else:
            call = ToolCall(action.name, action.args, id=f"call_{len(self.clock.starts)}")
            response = ModelResponse(AssistantMessage((call,)), "tool_calls")
        self.clock.leave(started)
        return response

    async def stream(self, request: Any) -> AsyncIterator[Any]:
        yield await self.request(request)


def _agent(model: ScriptModel, backend: Any = None, checkpointer: str | None = None) -> Any:
    from tether import Limits, create_agent, tool

    return create_agent(
        model,
        tools=[tool(scenarios.add)],
        backend=backend,
        limits=Limits(max_steps=None),
        checkpointer=checkpointer,
    )


async def _run(agent: Any, clock: ModelClock, task: str, thread_id: str | None = None) -> Run:
    from tether.messages import ToolResultMessage

    started = time.perf_counter()
    result = await agent.arun(task, thread_id=thread_id)
    wall = time.perf_counter() - started
    tool_texts = [
        r.text for m in result.messages if isinstance(m, ToolResultMessage) for r in m.results
    ]
    result_file = result.files.get(scenarios.RESULT_FILE)
    return Run(
        wall,
        clock,
        steps=result.steps,
        file_text=result_file.decode() if result_file is not None else None,
        answer=result.output,
        tool_text=tool_texts[-1] if tool_texts else None,
    )


def _fresh_run(task: str, backend: Any = None) -> Run:
    """`task` run to its end by a new agent with a new clock."""
    clock = ModelClock()
    return asyncio.run(_run(_agent(ScriptModel(clock), backend), clock, task))


def _count(steps: int) -> Run:
    return _fresh_run(f"count {steps}")


def _checkpoint(steps: int, repeat: int, url: str) -> dict[str, Any]:
    """Harness time per step of runs recorded in a thread at `url` ("sqlite" for a new
    file), next to the same runs recorded without the thread's lease, and unrecorded."""
    with tempfile.TemporaryDirectory() as tmp:
        if url == "sqlite":
            url = f"sqlite:///{tmp}/bench.db"
        agent_number = iter(range(1_000_000))

        def recorder(leased: bool) -> Any:
            def recorded(steps: int) -> Run:
                clock = ModelClock()
                checkpointer = _unleased(url) if not leased else url
                agent = _agent(ScriptModel(clock), checkpointer=checkpointer)
                thread = f"bench-{time.time_ns()}-{next(agent_number)}"
                return asyncio.run(_run(agent, clock, f"count {steps}", thread))

            return recorded

        # Taken in turns, so that a slow spell of the machine falls on both alike.
        leased, unleased = [], []
        for _ in range(repeat):
            leased.append(scenarios.steps_scenario(recorder(True), steps, 1)["us_per_step"])
            unleased.append(scenarios.steps_scenario(recorder(False), steps, 1)["us_per_step"])
    without = scenarios.steps_scenario(_count, steps, repeat)
    return {
        "us_per_step": statistics.median(leased),
        "unleased_us_per_step": statistics.median(unleased),
        "plain_us_per_step": without["us_per_step"],
    }


def _unleased(url: str) -> Any:
    """The checkpointer of `url` with the thread lease taken out: every lease is granted
    and appends are not checked against it (the baseline of what the lease costs)."""
    from tether.checkpoint import open_checkpointer

    base: Any = type(open_checkpointer(url))

    class Unleased(base):  # type: ignore[misc, valid-type]
        async def acquire(self, *_: Any) -> None:
            return None

        async def renew(self, *_: Any) -> bool:
            return True

        async def release(self, *_: Any) -> None:
            return None

        async def append(self, thread_id: str, records: Any, *, holder: Any = None) -> None:
            await super().append(thread_id, records)

    path = url.removeprefix("sqlite:///")
    return Unleased(path if url.startswith("sqlite:") else url)


def _construction(repeat: int) -> dict[str, Any]:
    # Loaded before the clock starts, as on the deepagents side: the first construction
    # measures building, not importing.
    from tether import Limits, create_agent, tool  # noqa: F401

    model = ScriptModel(ModelClock())
    return scenarios.construction_scenario(lambda: _agent(model), repeat)


def _prompt() -> dict[str, Any]:
    clock = ModelClock()
    model = ScriptModel(clock)
    asyncio.run(_run(_agent(model), clock, "count 2"))
    request = model.first
    tools = {
        spec.name: len(
            json.dumps(
                {"name": spec.name, "description": spec.description, "parameters": spec.parameters}
            )
        )
        for spec in request.tools
    }
    return {
        "system_chars": len(request.system_prompt),
        "tool_chars": tools,
        "system_prompt": request.system_prompt,
    }


def _many(agents: int, steps: int) -> tuple[list[Run], ModelClock]:
    clock = ModelClock()
    agent = _agent(ScriptModel(clock))

    async def go() -> list[Run]:
        return list(
            await asyncio.gather(*(_run(agent, clock, f"count {steps}") for _ in range(agents)))
        )

    return asyncio.run(go()), clock


def _search(tree: str, expected: int, repeat: int, task: str) -> dict[str, Any]:
    from tether.backends import FilesystemBackend

    backend = FilesystemBackend(tree)
    return scenarios.search_scenario(lambda task: _fresh_run(task, backend), expected, repeat, task)


SIDE = {
    "import": _cold_import,
    "construction": _construction,
    "prompt": _prompt,
    "steps": lambda steps, repeat: scenarios.steps_scenario(_count, steps, repeat),
    "memory": lambda steps: scenarios.memory_scenario(_count, steps),
    "concurrency": lambda agents, steps: scenarios.concurrency_scenario(_many, agents, steps),
    "search": _search,
    "checkpoint": _checkpoint,
    "task": lambda repeat: scenarios.task_scenario(_fresh_run, repeat),
}

if __name__ == "__main__":
    scenarios.serve(SIDE)
