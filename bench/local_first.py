"""The offline model's first request in a fresh process, as the `tether` command meets it.

Run as a script, it is that process: it imports tether, builds an agent on
`local:smollm2` over a scratch folder, runs one plain request ("Open notes.txt": one
model call, then the answer written from the read), and prints one JSON line with the
seconds each part took. `measure()` runs it in fresh processes and takes the median.

    .venv/bin/python bench/local_first.py [repeats]
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
REQUEST = "Open notes.txt"
THREADS_GIVEN = os.environ.get("RAYON_NUM_THREADS")
"""As this process started: running the model here sets it to tether's choice of threads
(bench/local_model.py does), which a fresh process must make again for itself."""


def _loadavg() -> float:
    try:
        return float(Path("/proc/loadavg").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return -1.0


def once() -> dict[str, Any]:
    """One first request, in this process (which must not have run the model yet)."""
    import asyncio

    started = time.perf_counter()
    from tether import Limits, create_agent
    from tether.backends import FilesystemBackend

    imported = time.perf_counter()
    with tempfile.TemporaryDirectory() as scratch:
        Path(scratch, "notes.txt").write_text("buy milk and eggs\n")
        agent = create_agent(
            "local:smollm2",
            backend=FilesystemBackend(Path(scratch)),
            limits=Limits(max_steps=4),
            checkpointer=None,
        )
        built = time.perf_counter()
        result = asyncio.run(agent.arun(REQUEST))
        done = time.perf_counter()
    assert isinstance(result.output, str)
    assert "buy milk" in result.output, result.output
    return {
        "import_seconds": round(imported - started, 3),
        "agent_seconds": round(built - imported, 3),
        "request_seconds": round(done - built, 3),
        "steps": result.steps,
        "threads": os.environ.get("RAYON_NUM_THREADS", ""),  # as the engine started
    }


def measure(repeats: int = 3, env: dict[str, str] | None = None) -> dict[str, Any]:
    """The first request's seconds in `repeats` fresh processes: each run, the median,
    and the load average before each (the machine may be shared)."""
    runs: list[dict[str, Any]] = []
    started = {k: v for k, v in os.environ.items() if k != "RAYON_NUM_THREADS"}
    if THREADS_GIVEN is not None:
        started["RAYON_NUM_THREADS"] = THREADS_GIVEN
    for _ in range(repeats):
        load = _loadavg()
        done = subprocess.run(
            [sys.executable, str(Path(__file__).resolve()), "--once"],
            env={**started, **(env or {})},
            capture_output=True,
            text=True,
            check=True,
            timeout=900,
        )
        runs.append({**json.loads(done.stdout.strip().splitlines()[-1]), "loadavg": load})
    return {
        "first_request_seconds": statistics.median(r["request_seconds"] for r in runs),
        "runs": runs,
    }


def main() -> None:
    if sys.argv[1:] == ["--once"]:
        print(json.dumps(once()))
        return
    repeats = int(sys.argv[1]) if len(sys.argv) > 1 else 3
    measured = measure(repeats)
    for run in measured["runs"]:
        print(json.dumps(run))
    print(f"offline model, first request in a process: {measured['first_request_seconds']} s")


if __name__ == "__main__":
    main()
