"""No tool stalls the event loop: while each built-in tool runs its worst case, a
heartbeat on the same loop is never late by more than 200 ms, so other runs in the
process go on and timeouts fire.

The measurement runs in a fresh interpreter, as an application would. In the test
process, hundreds of tests have left a heap on which one full garbage collection takes
about 0.35 s, and a search that finds 150,000 lines triggers one: that pause is
CPython's on the test process's heap, not work of tether's on the loop.
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest

from tests.backends.conftest import call_tool
from tether.backends import Backend, FilesystemBackend, StateBackend, StoreBackend
from tether.stores import InMemoryStore

STALL_LIMIT = 0.2
HUGE = 9 * 1024 * 1024  # just under the default 10 MiB file limit
CATASTROPHIC = "(a+)+$"  # exponential on a backtracking engine
TREE_FILES = 3_000


async def _worst_stall(work: Callable[[], Awaitable[Any]]) -> float:
    """The longest the loop went without running a 10 ms heartbeat while `work` ran."""
    worst = 0.0
    done = asyncio.Event()

    async def heartbeat() -> None:
        nonlocal worst
        last = time.perf_counter()
        while not done.is_set():
            await asyncio.sleep(0.01)
            now = time.perf_counter()
            worst = max(worst, now - last - 0.01)
            last = now

    beat = asyncio.create_task(heartbeat())
    await asyncio.sleep(0.02)  # the heartbeat is running before the work starts
    try:
        await work()
    finally:
        done.set()
        await beat
    return worst


async def _fill(backend: Backend) -> None:
    """The worst inputs: a huge file of one long line and of many lines, a deep tree."""
    await backend.write("/huge/one_line.txt", b"a" * HUGE + b"b")
    await backend.write("/huge/lines.txt", (b"a" * 60 + b"b\n") * (HUGE // 62))
    for n in range(TREE_FILES):
        deep = "/".join(f"d{(n >> shift) % 8}" for shift in range(0, 18, 3))
        await backend.write(f"/tree/{deep}/f{n}.py", b"print('x')\n")


def _backends(tmp_path: Path) -> dict[str, Callable[[], Backend]]:
    return {
        "state": StateBackend,
        "store": lambda: StoreBackend(InMemoryStore()),
        "filesystem": lambda: FilesystemBackend(tmp_path / "ws", virtual_mode=True),
    }


CALLS: list[tuple[str, dict[str, Any]]] = [
    ("grep", {"pattern": CATASTROPHIC, "path": "/huge", "output_mode": "count"}),
    ("grep", {"pattern": r"(\w+\s?)*$", "output_mode": "count"}),
    ("grep", {"pattern": "a", "path": "/huge", "output_mode": "count"}),
    ("grep", {"pattern": "b$", "output_mode": "content", "context_lines": 2}),
    ("glob", {"pattern": "**/*a*a*a*a*a*a*a*a*b"}),
    ("glob", {"pattern": "**/**/**/**/*.py"}),
    ("ls", {"path": "/tree/d0/d0/d0/d0/d0"}),
    ("read_file", {"file_path": "/huge/one_line.txt"}),
    ("read_file", {"file_path": "/huge/lines.txt", "offset": 100_000, "limit": 500}),
    ("edit_file", {"file_path": "/huge/lines.txt", "old_string": "zzz", "new_string": "y"}),
    ("write_file", {"file_path": "/huge/copy.txt", "content": "c" * HUGE}),
]


def test_no_tool_stalls_the_event_loop() -> None:
    """Runs the measurement below in a fresh interpreter."""
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-q",
            "-p",
            "no:cacheprovider",
            f"{__file__}::test_measured_in_a_fresh_interpreter",
        ],
        env={**os.environ, "TETHER_WATCHDOG": "1"},
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-2000:]
    assert "3 passed" in done.stdout


@pytest.mark.skipif(not os.environ.get("TETHER_WATCHDOG"), reason="run by the test above")
@pytest.mark.parametrize("kind", ["state", "store", "filesystem"])
async def test_measured_in_a_fresh_interpreter(tmp_path: Path, kind: str) -> None:
    (tmp_path / "ws").mkdir()
    backend = _backends(tmp_path)[kind]()
    await _fill(backend)
    stalls: dict[str, float] = {}
    results: list[Any] = []
    for name, args in CALLS:

        async def work(name: str = name, args: dict[str, Any] = args) -> None:
            results.append(await call_tool(backend, name, **args))

        stalls[f"{name} {args}"] = await _worst_stall(work)
    assert len(results) == len(CALLS)
    slow = {call: round(s, 3) for call, s in stalls.items() if s > STALL_LIMIT}
    assert not slow, f"the event loop stalled on {kind}: {slow}"


async def test_numbers_from_the_model_cannot_blow_up_a_tool() -> None:
    backend = StateBackend()
    await backend.write("/a.txt", b"x\n" * 1000)
    around = await call_tool(
        backend, "grep", pattern="x", output_mode="content", context_lines=10**12
    )
    assert not around.is_error
    assert around.text.startswith("/a.txt:1:x")
    grown = await call_tool(
        backend,
        "edit_file",
        file_path="/a.txt",
        old_string="x",
        new_string="y" * 100_000,
        replace_all=True,
    )
    assert grown.is_error
    assert "over the 10485760 byte limit" in grown.text
    assert await backend.read("/a.txt") == b"x\n" * 1000
