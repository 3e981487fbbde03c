"""The server: how many events a second reach a client through `tether serve` (AG-UI
over server-sent events, on loopback, read with httpx; the server in a process of its
own) against `agent.stream()` in the reading process, and the time it adds to each step
of a run. Both drive the same instant scripted model and record their threads in SQLite;
the rounds are taken in turns.

Usage: python bench/serve.py [ROUNDS [OUTPUT]]; writes bench/serve.json (or OUTPUT).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import httpx

from tether import Limits, create_agent, tool
from tether.agent import Agent
from tether.messages import AssistantMessage, TextPart, ToolCall
from tether.models import FunctionModel, ModelRequest
from tether.models.scripted import Turn
from tether.serve import app

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

from tests.serve.helpers import TOKEN, free_port  # noqa: E402

DELTAS = 2_000  # text pieces in the one reply of the streaming run
STEPS = 50  # tool steps in the stepping run


@tool
def noop(n: int) -> str:
    """Do nothing."""
    return str(n)


def streaming(database: str) -> Agent[str]:
    pieces = [TextPart(f"w{n} ") for n in range(DELTAS)]
    return create_agent(FunctionModel(lambda _: pieces), checkpointer=database)


def stepping(database: str) -> Agent[str]:
    def turn(request: ModelRequest) -> Turn:
        done = sum(isinstance(m, AssistantMessage) for m in request.messages)
        return [ToolCall("noop", {"n": done})] if done < STEPS else "done"

    limits = Limits(max_steps=STEPS + 5)
    return create_agent(FunctionModel(turn), tools=[noop], checkpointer=database, limits=limits)


async def in_process(agent: Agent[str]) -> tuple[float, int]:
    """Seconds for one run read through `stream`, and the events read."""
    start, count = time.perf_counter(), 0
    async for _ in agent.stream("Go.", thread_id=f"t{uuid.uuid4().hex}"):
        count += 1
    return time.perf_counter() - start, count


def over_http(client: httpx.Client, name: str) -> tuple[float, int]:
    """Seconds for one run read through the server, and the events read."""
    body = {"threadId": f"t{uuid.uuid4().hex}", "runId": "r", "messages": []}
    body["messages"] = [{"id": "u", "role": "user", "content": "Go."}]
    start, count = time.perf_counter(), 0
    with client.stream("POST", f"/api/agents/{name}", json=body) as response:
        for line in response.iter_lines():
            if line.startswith("data: "):
                count += 1
    return time.perf_counter() - start, count


def agents(scratch: str) -> dict[str, Agent[str]]:
    return {
        "streaming": streaming(f"sqlite:///{scratch}/a.db"),
        "stepping": stepping(f"sqlite:///{scratch}/b.db"),
    }


def serve(port: int, scratch: str) -> None:
    """The server, in a process of its own (as it would be), on its own thread database."""
    import uvicorn

    uvicorn.run(app(agents(scratch), token=TOKEN), port=port, log_level="warning")


@contextlib.contextmanager
def server(scratch: str) -> Iterator[str]:
    port = free_port()
    command = [sys.executable, __file__, "--serve", str(port), f"{scratch}/served"]
    Path(f"{scratch}/served").mkdir()
    process = subprocess.Popen(command)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                httpx.get(f"{url}/", timeout=1)
                break
            except httpx.TransportError:
                if time.monotonic() > deadline or process.poll() is not None:
                    raise RuntimeError("the server did not start") from None
                time.sleep(0.05)
        yield url
    finally:
        process.terminate()
        process.wait(30)


def main() -> None:
    if sys.argv[1:2] == ["--serve"]:
        serve(int(sys.argv[2]), sys.argv[3])
        return
    rounds = int(sys.argv[1]) if len(sys.argv) > 1 else 10
    times: dict[str, list[float]] = {k: [] for k in ("stream", "sse", "steps", "steps_sse")}
    counts: dict[str, int] = {}
    auth = {"Authorization": f"Bearer {TOKEN}"}
    with tempfile.TemporaryDirectory() as scratch:
        local = agents(scratch)
        with server(scratch) as url, httpx.Client(base_url=url, headers=auth, timeout=60) as client:
            over_http(client, "streaming")  # warm both paths once
            asyncio.run(in_process(local["streaming"]))
            for _ in range(rounds):  # in turns, so a noisy moment hits all
                seconds, counts["stream"] = asyncio.run(in_process(local["streaming"]))
                times["stream"].append(seconds)
                seconds, counts["sse"] = over_http(client, "streaming")
                times["sse"].append(seconds)
                seconds, _ = asyncio.run(in_process(local["stepping"]))
                times["steps"].append(seconds)
                seconds, _ = over_http(client, "stepping")
                times["steps_sse"].append(seconds)
    median = {k: statistics.median(v) for k, v in times.items()}
    result = {
        "rounds": rounds,
        "events_a_run": counts,
        "events_a_second": {
            "in_process": counts["stream"] / median["stream"],
            "served": counts["sse"] / median["sse"],
        },
        "ms_a_step": {
            "in_process": median["steps"] / STEPS * 1000,
            "served": median["steps_sse"] / STEPS * 1000,
        },
    }
    rate, step = result["events_a_second"], result["ms_a_step"]
    result["served_over_in_process_rate"] = rate["served"] / rate["in_process"]
    result["ms_added_a_step"] = step["served"] - step["in_process"]
    output = Path(sys.argv[2]) if len(sys.argv) > 2 else HERE / "serve.json"
    output.write_text(json.dumps(result, indent=2) + "\n")
    print(
        f"events a second, median of {rounds} rounds: in process {rate['in_process']:,.0f} "
        f"({counts['stream']} tether events a run), served {rate['served']:,.0f} "
        f"({counts['sse']} AG-UI events a run; {result['served_over_in_process_rate']:.2f}x); "
        f"a step of a {STEPS}-step run: in process {step['in_process']:.2f} ms, served "
        f"{step['served']:.2f} ms (+{result['ms_added_a_step']:.2f} ms)"
    )


if __name__ == "__main__":
    main()
