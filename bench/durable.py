"""Durable runs: throughput (runs a second) with 1, 2 and 3 DBOS workers on one Postgres.

The baseline, measured in the same run, is the same agent run in one process with
`arun` on the same Postgres checkpointer, with as many runs at once as one worker
allows. Usage: python bench/durable.py [RUNS]; writes bench/durable.json.
"""

from __future__ import annotations

import asyncio
import json
import os
import platform
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import Any

import psycopg

HERE = Path(__file__).resolve().parent


def database() -> str:
    found = subprocess.run(
        [str(HERE.parent / "scripts" / "postgres-for-tests.sh")],
        capture_output=True,
        text=True,
        check=True,
    )
    return found.stdout.strip().splitlines()[-1]


def in_process(runs: int) -> float:
    """Runs a second of the same agent with arun in this process (the baseline)."""
    import durable_app

    agent = durable_app.bench.agent  # the same agent, with the Postgres checkpointer

    async def all_runs() -> float:
        gate = asyncio.Semaphore(durable_app.CONCURRENCY)
        batch = uuid.uuid4().hex[:8]

        async def one(i: int) -> None:
            async with gate:
                result = await agent.arun("go", thread_id=f"base-{batch}-{i}")
                assert result.output == "done"

        start = time.perf_counter()
        await asyncio.gather(*(one(i) for i in range(runs)))
        return runs / (time.perf_counter() - start)

    return asyncio.run(all_runs())


def with_workers(count: int, runs: int) -> float:
    """Runs a second with `count` worker processes, from the first enqueue to the last
    result; the workers are started and warmed up before the clock starts."""
    import durable_app

    env = dict(os.environ, PYTHONPATH=str(HERE))
    workers = [
        subprocess.Popen(
            [
                sys.executable,
                "-m",
                "tether.cli",
                "-C",
                str(HERE),
                "worker",
                "--app",
                "durable_app",
                "--executor-id",
                f"bench-{count}-{n}",
                "--schema",
                os.environ["TETHER_BENCH_SCHEMA"],
            ],
            env=env,
            stderr=subprocess.DEVNULL,
        )
        for n in range(count)
    ]
    try:
        warm = [durable_app.bench.enqueue("warm up") for _ in range(count * 2)]
        for handle in warm:
            handle.wait(timeout=120, poll_seconds=0.05)
        client = durable_app.bench._client.client
        before = finished(client)
        start = time.perf_counter()
        handles = [durable_app.bench.enqueue("go") for _ in range(runs)]
        while finished(client) < before + runs:  # one query a poll, not one per run
            time.sleep(0.02)
        elapsed = time.perf_counter() - start
        for handle in handles:
            assert handle.status().stop_reason == "completed"
        return runs / elapsed
    finally:
        for worker in workers:
            worker.terminate()
        for worker in workers:
            worker.wait()


def finished(client: Any) -> int:
    done = client.list_workflows(
        name="tether:bench", status="SUCCESS", load_input=False, load_output=False
    )
    return len(done)


def main() -> None:
    runs = int(sys.argv[1]) if len(sys.argv) > 1 else 200
    url = database()
    schema = f"dbos_bench_{uuid.uuid4().hex[:8]}"
    os.environ.update(TETHER_DATABASE_URL=url, TETHER_BENCH_SCHEMA=schema)
    sys.path.insert(0, str(HERE))
    try:
        results: dict[str, Any] = {"runs": runs, "in_process": in_process(runs)}
        for count in (1, 2, 3):
            results[f"workers_{count}"] = with_workers(count, runs)
    finally:
        with psycopg.connect(url, autocommit=True) as db:
            db.execute(f"DROP SCHEMA IF EXISTS {schema} CASCADE")
    results["machine"] = f"{platform.machine()}, {os.cpu_count()} cores"
    results["when"] = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    (HERE / "durable.json").write_text(json.dumps(results, indent=2) + "\n")
    base = results["in_process"]
    print(f"{runs} runs, 3 model steps and 2 tool calls each, on {results['machine']}")
    print(f"in one process (arun, 8 at once): {base:6.1f} runs/s")
    for count in (1, 2, 3):
        rate = results[f"workers_{count}"]
        print(f"{count} worker(s): {rate:6.1f} runs/s ({rate / base:.2f}x the in-process rate)")


if __name__ == "__main__":
    main()
