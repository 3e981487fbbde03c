"""MCP servers kept for an agent's life: the published `mcp-server-time` (stdio) called
once per run, each run connecting on its own (the baseline) against the same runs in
one `async with agent:` block, measured in turns in the same process.

Usage: python bench/mcp_servers.py [RUNS]; writes bench/mcp_servers.json.
"""

from __future__ import annotations

import asyncio
import json
import statistics
import sys
import time
from pathlib import Path
from typing import Any

from tether import create_agent
from tether.mcp import MCPServer
from tether.messages import ToolCall
from tether.models import ScriptedModel

HERE = Path(__file__).resolve().parent
CLOCK = MCPServer("time", command=sys.executable, args=["-m", "mcp_server_time"])
CALL = ToolCall("time_get_current_time", {"timezone": "Asia/Tokyo"})


def agent(runs: int) -> Any:
    return create_agent(ScriptedModel([[CALL], "ok"] * runs), mcp_servers=[CLOCK])


async def each_alone(runs: int) -> float:
    """Seconds a run, each run connecting to the server itself."""
    alone = agent(runs)
    start = time.perf_counter()
    for _ in range(runs):
        assert (await alone.arun("Time in Tokyo?")).output == "ok"
    return (time.perf_counter() - start) / runs


async def in_one_block(runs: int) -> float:
    """Seconds a run, the runs sharing one connection in `async with agent:`."""
    kept = agent(runs)
    start = time.perf_counter()
    async with kept:
        for _ in range(runs):
            assert (await kept.arun("Time in Tokyo?")).output == "ok"
    return (time.perf_counter() - start) / runs


def main() -> None:
    runs = int(sys.argv[1]) if len(sys.argv) > 1 else 10
    alone: list[float] = []
    kept: list[float] = []
    for _ in range(3):  # in turns, so a noisy moment hits both
        alone.append(asyncio.run(each_alone(runs)))
        kept.append(asyncio.run(in_one_block(runs)))
    result = {
        "runs": runs,
        "rounds": 3,
        "seconds_a_run_each_connecting": statistics.median(alone),
        "seconds_a_run_in_async_with_agent": statistics.median(kept),
    }
    result["ratio"] = result["seconds_a_run_each_connecting"] / max(
        result["seconds_a_run_in_async_with_agent"], 1e-9
    )
    (HERE / "mcp_servers.json").write_text(json.dumps(result, indent=2) + "\n")
    print(
        f"mcp-server-time, {runs} runs of one call, median of 3 rounds: "
        f"{result['seconds_a_run_each_connecting'] * 1000:.0f} ms a run connecting each time, "
        f"{result['seconds_a_run_in_async_with_agent'] * 1000:.0f} ms in one "
        f"`async with agent:` block ({result['ratio']:.1f}x)"
    )


if __name__ == "__main__":
    main()
