"""What every side of the benchmark shares: the script, the checks, the clocks.

The sides (`tether_side.py` in the project's .venv, `deepagents_side.py` in
bench/.venv-deepagents, and the bare loop at the end of this file) live in different
virtual environments, so this module uses the standard library only. A side is a
table of scenario functions; `serve(side)` runs the one named on the command line in
this fresh process and prints its result as one JSON object.

The scripted model is the same on every side: `next_action` decides each reply from the
task (the first user message) and the text of the latest tool result only, so both
harnesses must really run each tool for the script to reach its end:

- "count N": N model steps. Steps 1..N-2 call `add(a=previous result, b=1)`, step N-1
  writes `total=<N-2>` to /result.txt with the harness's own `write_file`, step N answers
  "done". A harness that skipped or mangled a tool call ends early or writes a wrong file.
- "delegate count N": one `task` call to the general-purpose subagent with "count N",
  then the subagent's report as the answer.
- "glob P" / "grep P": one call of that file tool, then "done".
"""

from __future__ import annotations

import asyncio
import gc
import json
import re
import resource
import statistics
import sys
import time
import tracemalloc
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

RESULT_FILE = "/result.txt"
GLOB_PATTERN = "**/*25.py"  # 200 of the 20,000 generated files
GREP_PATTERN = "needle_"  # 400 files; a literal, so regex and fixed-string grep agree
FILES_PER_DIR = 100


@dataclass(frozen=True)
class Call:
    name: str
    args: dict[str, Any]


@dataclass(frozen=True)
class Answer:
    text: str


def next_action(task: str, last_tool_text: str | None) -> Call | Answer:
    """The scripted model: the next reply, from the task and the latest tool result."""
    kind, _, rest = task.partition(" ")
    if kind == "delegate":
        return _delegate(rest, last_tool_text)
    if kind in ("glob", "grep"):
        return _search(kind, rest, last_tool_text)
    return _count(int(rest), last_tool_text)


def _count(steps: int, last_tool_text: str | None) -> Call | Answer:
    try:
        value = 0 if last_tool_text is None else int(last_tool_text.strip())
    except ValueError:  # the write_file confirmation: all done
        return Answer("done")
    if value < steps - 2:
        return Call("add", {"a": value, "b": 1})
    return Call("write_file", {"file_path": RESULT_FILE, "content": f"total={value}"})


def _delegate(description: str, last_tool_text: str | None) -> Call | Answer:
    if last_tool_text is not None:
        return Answer(last_tool_text)
    return Call("task", {"description": description, "subagent_type": "general-purpose"})


def _search(tool: str, pattern: str, last_tool_text: str | None) -> Call | Answer:
    if last_tool_text is not None:
        return Answer("done")
    args = {"pattern": pattern}
    if tool == "grep":
        args["output_mode"] = "files_with_matches"
    return Call(tool, args)


def expected_file(steps: int) -> str:
    return f"total={steps - 2}"


async def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


class ModelClock:
    """Time spent inside the scripted model, and when each step began."""

    def __init__(self) -> None:
        self.starts: list[float] = []
        self.durations: list[float] = []

    def enter(self) -> float:
        now = time.perf_counter()
        self.starts.append(now)
        return now

    def leave(self, started: float) -> None:
        self.durations.append(time.perf_counter() - started)

    @property
    def seconds(self) -> float:
        return sum(self.durations)


@dataclass
class Run:
    """One timed run: wall time, model time, step starts, and what the agent did."""

    wall: float
    clock: ModelClock
    steps: int
    file_text: str | None = None
    answer: str | None = None
    tool_text: str | None = None

    def harness_per_step(self) -> float:
        return (self.wall - self.clock.seconds) / self.steps


def check_count(run: Run, steps: int) -> None:
    """Refuse to report a time for a run that did not do the scripted work."""
    if run.steps != steps:
        raise SystemExit(f"expected {steps} model steps, the run made {run.steps}")
    if run.file_text != expected_file(steps):
        raise SystemExit(f"{RESULT_FILE} holds {run.file_text!r}, not {expected_file(steps)!r}")
    if run.answer != "done":
        raise SystemExit(f"the final answer was {run.answer!r}, not 'done'")


def step_durations(run: Run) -> list[float]:
    """Harness time of each step: from one model call to the next, minus the model."""
    starts = run.clock.starts
    ends = [*starts[1:], starts[0] + run.wall]
    model = run.clock.durations
    return [end - begin - m for begin, end, m in zip(starts, ends, model, strict=True)]


def peak_rss_mb() -> float:
    """The process's peak resident set size so far (Linux reports KiB)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def median_ms(samples: list[float]) -> float:
    return statistics.median(samples) * 1000


# --- scenarios every side implements the same way, given its `run_count` ---

RunCount = Callable[[int], Run]


def construction_scenario(build: Callable[[], object], repeat: int) -> dict[str, Any]:
    """The first agent built in a process (package already imported), then warm builds."""
    started = time.perf_counter()
    build()
    first = time.perf_counter() - started
    times = []
    for _ in range(repeat):
        started = time.perf_counter()
        build()
        times.append(time.perf_counter() - started)
    return {"first_ms": first * 1000, "ms": median_ms(times)}


def steps_scenario(run_count: RunCount, steps: int, repeat: int) -> dict[str, Any]:
    """Harness µs per step over `repeat` runs, after a short warm-up run; the long runs
    also report whether the last steps cost more than the first."""
    check_count(run_count(3), 3)
    per_step, last = [], None
    for _ in range(repeat):
        gc.collect()
        run = run_count(steps)
        check_count(run, steps)
        per_step.append(run.harness_per_step())
        last = run
    result: dict[str, Any] = {"us_per_step": statistics.median(per_step) * 1e6}
    if last is not None and steps >= 200:
        durations = step_durations(last)
        first = statistics.median(durations[:100])
        result["last_100_over_first_100"] = statistics.median(durations[-100:]) / first
    return result


def memory_scenario(run_count: RunCount, steps: int) -> dict[str, Any]:
    """Peak RSS of the process over one run, then the peak of the Python heap allocated
    during a second, traced run (RSS alone hides memory the imports freed and the run
    reused)."""
    check_count(run_count(3), 3)  # imports and first-build costs out of the way
    check_count(run_count(steps), steps)
    peak_rss = peak_rss_mb()
    tracemalloc.start()
    check_count(run_count(steps), steps)
    _, peak_heap = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    return {"peak_rss_mb": peak_rss, "peak_heap_mb": peak_heap / 2**20}


def task_scenario(run_task: Callable[[str], Run], repeat: int) -> dict[str, Any]:
    """One `task` round trip: the parent delegates "count 3" and reports the result."""
    times = []
    for _ in range(repeat + 1):  # the first run warms caches and lazy imports
        run = run_task("delegate count 3")
        # Two parent steps around the subagent's three; the subagent's file reaches the parent.
        done = run.answer == "done" and len(run.clock.starts) == 2 + 3
        if not done or run.file_text != expected_file(3):
            raise SystemExit(f"the task round trip did not complete: {run}")
        times.append(run.wall - run.clock.seconds)
    return {"ms": median_ms(times[1:])}


def build_tree(root: Path, count: int) -> dict[str, int]:
    """`count` small files in directories of 100; returns how many each search finds."""
    needles = 0
    for n in range(count):
        directory = root / f"pkg{n // FILES_PER_DIR:03d}"
        directory.mkdir(exist_ok=True)
        body = "".join(f"line {i} of file {n}: some ordinary text here\n" for i in range(20))
        if n % 50 == 0:
            body += f"needle_{n} = True\n"
            needles += 1
        suffix = ".py" if n % 2 else ".txt"
        (directory / f"module{n}{suffix}").write_text(body)
    return {"glob": sum(1 for n in range(count) if n % 100 == 25), "grep": needles}


def count_paths(text: str) -> int:
    """Generated files named in a tool result (one per line, or a list: formats differ)."""
    return len(re.findall(r"/module\d+\.(?:py|txt)\b", text))


def search_scenario(
    run_search: Callable[[str], Run], expected: int, repeat: int, task: str
) -> dict[str, Any]:
    times = []
    for _ in range(repeat + 1):  # the first run warms caches and lazy imports
        run = run_search(task)
        found = count_paths(run.tool_text or "")
        if found != expected or run.answer != "done":
            raise SystemExit(f"{task!r} found {found} files, expected {expected}")
        times.append(run.wall - run.clock.seconds)
    return {"ms": median_ms(times[1:])}


def serve(side: dict[str, Callable[..., dict[str, Any]]]) -> None:
    """Run `argv[1]` with `key=value` arguments and print its JSON result."""
    name, *pairs = sys.argv[1:]
    args = {}
    for pair in pairs:
        key, value = pair.split("=", 1)
        args[key] = int(value) if value.isdigit() else value
    print(json.dumps(side[name](**args)))


# --- the floor: the simplest loop that runs the same script ---


def _bare_model(messages: list[dict[str, Any]], clock: ModelClock) -> dict[str, Any]:
    started = clock.enter()
    last = messages[-1]
    action = next_action(
        messages[0]["content"], last["content"] if last["role"] == "tool" else None
    )
    if isinstance(action, Answer):
        reply: dict[str, Any] = {"role": "assistant", "content": action.text, "calls": []}
    else:
        reply = {"role": "assistant", "content": "", "calls": [action]}
    clock.leave(started)
    return reply


async def _bare_run(task: str, clock: ModelClock) -> Run:
    files: dict[str, str] = {}
    messages: list[dict[str, Any]] = [{"role": "user", "content": task}]
    started = time.perf_counter()
    while True:
        reply = _bare_model(messages, clock)
        messages.append(reply)
        if not reply["calls"]:
            break
        for call in reply["calls"]:
            if call.name == "add":
                text = str(await add(**call.args))
            else:
                files[call.args["file_path"]] = call.args["content"]
                text = f"wrote {call.args['file_path']}"
            messages.append({"role": "tool", "content": text})
    wall = time.perf_counter() - started
    steps = sum(1 for m in messages if m["role"] == "assistant")
    return Run(wall, clock, steps, files.get(RESULT_FILE), messages[-1]["content"])


def _bare_count(steps: int) -> Run:
    return asyncio.run(_bare_run(f"count {steps}", ModelClock()))


async def _bare_many(agents: int, steps: int, clock: ModelClock) -> list[Run]:
    return list(await asyncio.gather(*(_bare_run(f"count {steps}", clock) for _ in range(agents))))


def _bare_concurrent(agents: int, steps: int) -> tuple[list[Run], ModelClock]:
    clock = ModelClock()
    return asyncio.run(_bare_many(agents, steps, clock)), clock


def concurrency_scenario(
    run_many: Callable[[int, int], tuple[list[Run], ModelClock]], agents: int, steps: int
) -> dict[str, Any]:
    """`agents` runs of one agent at once, in one event loop; `run_many` shares a clock."""
    before = peak_rss_mb()
    started = time.perf_counter()
    runs, clock = run_many(agents, steps)
    wall = time.perf_counter() - started
    if len(runs) != agents:
        raise SystemExit(f"{len(runs)} of {agents} runs came back")
    for run in runs:
        check_count(run, steps)
    model = clock.seconds
    return {
        "wall_ms": wall * 1000,
        "harness_ms": (wall - model) * 1000,
        "peak_rss_mb": peak_rss_mb(),
        "growth_mb": peak_rss_mb() - before,
    }


BARE = {
    "steps": lambda steps, repeat: steps_scenario(_bare_count, steps, repeat),
    "memory": lambda steps: memory_scenario(_bare_count, steps),
    "concurrency": lambda agents, steps: concurrency_scenario(_bare_concurrent, agents, steps),
}

if __name__ == "__main__":
    serve(BARE)
