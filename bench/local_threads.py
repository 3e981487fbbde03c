"""How many threads the offline model's engine should use, measured with and without
other work on the CPUs.

Each trial is a fresh process running the first request of `local_first` (load the
model, one model call, the answer): what a user of the `tether` command waits for. The
engine's threads are set by RAYON_NUM_THREADS; 0 is the engine's own default (rayon's:
one thread per logical CPU), which tether's default, if any, does not override. The
settings take turns within each round, with and without a CPU hog (`stress --cpu N`, N
the number of cores) running beside them, so a change in the machine's load falls on
every setting alike; the medians per setting and hog are printed, with the load
average before each trial.

    .venv/bin/python bench/local_threads.py [rounds]
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from local_first import measure

HERE = Path(__file__).resolve().parent
CORES = os.cpu_count() or 1
SETTINGS = ["0", "1"]


@contextmanager
def hog(on: bool) -> Any:
    """`stress --cpu <cores>` running while inside, when `on`."""
    if not on:
        yield
        return
    stress = shutil.which("stress")
    if stress is None:
        raise SystemExit("stress is not installed")
    started = subprocess.Popen(
        [stress, "--cpu", str(CORES)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,  # its workers are in its own group, stopped together
    )
    try:
        time.sleep(1)
        yield
    finally:
        os.killpg(started.pid, signal.SIGTERM)
        started.wait()


def main() -> None:
    rounds = int(sys.argv[1]) if len(sys.argv) > 1 else 3
    trials: list[dict[str, Any]] = []
    for round_ in range(rounds):
        for hogged in (False, True):
            with hog(hogged):
                for threads in SETTINGS:
                    run = measure(1, {"RAYON_NUM_THREADS": threads})["runs"][0]
                    trial = {"round": round_, "hog": hogged, "threads": threads, **run}
                    trials.append(trial)
                    print(json.dumps(trial), file=sys.stderr, flush=True)
    table: dict[str, dict[str, float]] = {}
    for name in SETTINGS:
        for hogged in (False, True):
            seconds = [
                t["request_seconds"] for t in trials if (t["threads"], t["hog"]) == (name, hogged)
            ]
            table.setdefault(name, {})["with hog" if hogged else "without"] = round(
                statistics.median(seconds), 2
            )
    result = {"cores": CORES, "rounds": rounds, "median_seconds": table, "trials": trials}
    (HERE / "local_threads.json").write_text(json.dumps(result, indent=2) + "\n")
    print(f"offline model, first request by engine threads ({CORES} cores), median seconds:")
    for name, row in table.items():
        print(f"  {name:>2} threads: {row['without']:6.2f} s, {row['with hog']:6.2f} s with a hog")


if __name__ == "__main__":
    main()
