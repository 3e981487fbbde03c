"""The offline model on a real file task: success rate and seconds per step.

Each attempt is a fresh agent on `local:smollm2` (SmolLM2-135M on the CPU) with a task
drawn from its seed: write a given text to a given file, then finish. An attempt
succeeds when the run completes with a text answer and the backend holds the file with
that text (case and surrounding blanks aside). Decoding is greedy, so a seed always
gives the same attempt; the seeds vary the task. tests/test_local_model.py runs five.
Writes bench/local_model.json.

    .venv/bin/python bench/local_model.py [attempts]
"""

from __future__ import annotations

import asyncio
import json
import random
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path

from tether import Limits, create_agent
from tether.backends import StateBackend

HERE = Path(__file__).resolve().parent
NAMES = ["notes", "todo", "hello", "plan", "greeting", "motto", "list", "reminder"]
SUFFIXES = [".txt", ".md"]
TEXTS = [
    "Hello, world!",
    "Buy milk",
    "Good morning",
    "Meeting at noon",
    "Roses are red",
    "eggs and bread",
    "Water the plants",
    "Ship it on Friday",
    "Call the bank",
    "Tea is ready",
]


@dataclass(frozen=True)
class Attempt:
    seed: int
    path: str
    text: str
    ok: bool
    stop_reason: str
    steps: int
    seconds: float
    written: str | None


def file_task(seed: int) -> tuple[str, str, str]:
    """(path, text, prompt) of the attempt with this seed."""
    rng = random.Random(seed)
    path = f"/{rng.choice(NAMES)}{rng.choice(SUFFIXES)}"
    text = rng.choice(TEXTS)
    prompt = f'Call write_file with file_path {path} and content "{text}", then finish.'
    return path, text, prompt


async def attempt(seed: int) -> Attempt:
    """One attempt on a fresh agent and backend."""
    path, text, prompt = file_task(seed)
    backend = StateBackend()
    agent = create_agent("local:smollm2", backend=backend, limits=Limits(max_steps=6))
    started = time.perf_counter()
    result = await agent.arun(prompt)
    seconds = time.perf_counter() - started
    data = result.files.get(path)
    written = data.decode(errors="replace") if data is not None else None
    ok = (
        result.stop_reason == "completed"
        and written is not None
        and written.strip().lower() == text.lower()
    )
    return Attempt(seed, path, text, ok, result.stop_reason, result.steps, seconds, written)


def main() -> None:
    attempts = int(sys.argv[1]) if len(sys.argv) > 1 else 20
    done = [asyncio.run(attempt(seed)) for seed in range(attempts)]
    for a in done:
        print(
            f"seed {a.seed:2}: {'ok  ' if a.ok else 'FAIL'} {a.stop_reason:9} "
            f"{a.steps} steps {a.seconds:5.1f}s {a.path} {a.written!r}",
            file=sys.stderr,
        )
    steps = sum(a.steps for a in done)
    summary = {
        "attempts": attempts,
        "succeeded": sum(a.ok for a in done),
        "seconds_per_step": round(sum(a.seconds for a in done) / max(steps, 1), 2),
        "runs": [asdict(a) for a in done],
    }
    (HERE / "local_model.json").write_text(json.dumps(summary, indent=2) + "\n")
    print(
        f"offline model (local:smollm2): {summary['succeeded']}/{attempts} file tasks "
        f"succeeded, {summary['seconds_per_step']} s per step"
    )


if __name__ == "__main__":
    main()
