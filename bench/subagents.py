"""Subagents: what one `task` round trip costs the harness, in the foreground (the
baseline), in the background (started, then its result given at the next step), and
recorded in a thread (SQLite; the subagent's steps are recorded too, so a paused or
killed run can go on inside it), measured in turns in the same process on an instant
scripted model.

Usage: python bench/subagents.py [RUNS]; writes bench/subagents.json.
"""

from __future__ import annotations

import asyncio
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from tether import Background, create_agent
from tether.messages import AssistantMessage, ToolCall
from tether.models import FunctionModel, ModelRequest
from tether.models.scripted import Turn

HERE = Path(__file__).resolve().parent


def reply(background: bool) -> FunctionModel:
    def turn(request: ModelRequest) -> Turn:
        if request.messages[0].text == "Sub.":  # type: ignore[union-attr]
            return "sub done"
        done = sum(isinstance(m, AssistantMessage) for m in request.messages)
        if done == 0:
            args = {"description": "Sub.", "subagent_type": "general-purpose"}
            return [ToolCall("task", {**args, "background": True} if background else args)]
        return "done"

    return FunctionModel(turn)


def agent(variant: str, database: str) -> Any:
    background = variant == "background"
    return create_agent(
        reply(background),
        background=Background() if background else None,
        checkpointer=database if variant == "recorded" else None,
    )


async def seconds_a_run(variant: str, runs: int, database: str) -> float:
    subject = agent(variant, database)
    start = time.perf_counter()
    for n in range(runs):
        thread = f"t{n}-{time.monotonic_ns()}" if variant == "recorded" else None
        assert (await subject.arun("Go.", thread_id=thread)).output == "done"
    return (time.perf_counter() - start) / runs


def main() -> None:
    runs = int(sys.argv[1]) if len(sys.argv) > 1 else 200
    variants = ("foreground", "background", "recorded")
    times: dict[str, list[float]] = {v: [] for v in variants}
    with tempfile.TemporaryDirectory() as scratch:
        database = f"sqlite:///{scratch}/runs.db"
        for _ in range(5):  # in turns, so a noisy moment hits all
            for variant in variants:
                times[variant].append(asyncio.run(seconds_a_run(variant, runs, database)))
    median = {v: statistics.median(t) for v, t in times.items()}
    result = {
        "runs": runs,
        "rounds": 5,
        "ms_a_run": {v: m * 1000 for v, m in median.items()},
        "background_over_foreground": median["background"] / median["foreground"],
        "recorded_over_foreground": median["recorded"] / median["foreground"],
    }
    (HERE / "subagents.json").write_text(json.dumps(result, indent=2) + "\n")
    ms = result["ms_a_run"]
    print(
        f"one task round trip, median of 5 rounds of {runs} runs: foreground "
        f"{ms['foreground']:.2f} ms, background {ms['background']:.2f} ms "
        f"({result['background_over_foreground']:.2f}x), recorded in a SQLite thread "
        f"{ms['recorded']:.2f} ms ({result['recorded_over_foreground']:.2f}x)"
    )


if __name__ == "__main__":
    main()
