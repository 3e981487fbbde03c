"""Nothing stalls the event loop: while each built-in tool runs its worst case, while
the server shows approval cards of edits to 1 MB files, and while MCP servers that never
answer (or flood, or answer too much) are asked, a heartbeat on the same loop is never
late by more than 200 ms, so other runs in the process go on and timeouts fire.

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


async def worst_stall(work: Callable[[], Awaitable[Any]]) -> float:
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


def _in_a_fresh_interpreter(test: str, passed: int) -> None:
    """Run `test` of this file (all its parameters) in a fresh interpreter."""
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", f"{__file__}::{test}"],
        env={**os.environ, "TETHER_WATCHDOG": "1"},
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-2000:]
    assert f"{passed} passed" in done.stdout


def test_no_tool_stalls_the_event_loop() -> None:
    _in_a_fresh_interpreter("test_measured_in_a_fresh_interpreter", 3)


def test_no_approval_card_stalls_the_event_loop() -> None:
    _in_a_fresh_interpreter("test_cards_measured_in_a_fresh_interpreter", len(CARDS))


def test_no_hostile_mcp_server_stalls_the_event_loop() -> None:
    _in_a_fresh_interpreter("test_mcp_measured_in_a_fresh_interpreter", 2)


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

        stalls[f"{name} {args}"] = await worst_stall(work)
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
    assert around.text.startswith("/a.txt\n1:x\n2:x")
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


MB = 1024 * 1024
CARDS: dict[str, tuple[bytes, dict[str, Any]]] = {
    "similar lines, a replace_all on every fifth": (
        b"".join(b"v\n" if n % 5 == 0 else b"%d\n" % n for n in range(MB // 6)),
        {"old_string": "v\n", "new_string": "w\n", "replace_all": True},
    ),
    "one line": (b"a" * MB + b"b", {"old_string": "b", "new_string": "c"}),
    "every line changes": (
        b"".join(b"line %d = value\n" % n for n in range(MB // 18)),
        {"old_string": " = ", "new_string": " := ", "replace_all": True},
    ),
    "not UTF-8": (
        bytes(range(256)) * (MB // 256),
        {"old_string": "\x00", "new_string": "\x01", "replace_all": True},
    ),
}
"""Files of 1 MB, each with an edit whose card is a worst case for a diff."""


@pytest.mark.skipif(not os.environ.get("TETHER_WATCHDOG"), reason="run by the test above")
@pytest.mark.parametrize("case", list(CARDS))
async def test_cards_measured_in_a_fresh_interpreter(tmp_path: Path, case: str) -> None:
    """The served page opens the card of an edit waiting for approval three times."""
    from tests.serve.helpers import client, run_input
    from tether import create_agent
    from tether.messages import ToolCall
    from tether.models import ScriptedModel
    from tether.serve import app

    data, edit = CARDS[case]
    (tmp_path / "ws").mkdir()
    (tmp_path / "ws" / "big.txt").write_bytes(data)
    call = ToolCall("edit_file", {"file_path": "/big.txt", **edit}, id="e1")
    agent = create_agent(
        ScriptedModel([[call], "done"]),
        backend=FilesystemBackend(tmp_path / "ws"),
        checkpointer=f"sqlite:///{tmp_path}/runs.db",
        interrupt_on={"edit_file": True},
    )
    cards: list[Any] = []
    async with client(app({"a": agent}, token="t" * 32)) as c:
        c.headers["Authorization"] = "Bearer " + "t" * 32
        await c.post("/api/agents/a", json=run_input("t", "Edit."))

        async def open_the_page() -> None:
            for _ in range(3):
                page = await c.get("/api/agents/a/threads/t")
                cards.extend(page.json()["interrupts"])

        stall = await worst_stall(open_the_page)
    assert stall <= STALL_LIMIT, f"the event loop stalled {stall:.3f} s on {case}"
    assert len(cards) == 3
    diff = cards[0]["metadata"]["diff"]
    assert diff.startswith("--- /big.txt\n+++ /big.txt\n@@ ")
    assert len(diff) < 200_000


HOSTILE_MODES = ["silent", "no-list", "partial", "trickle", "flood", "huge"]


@pytest.mark.skipif(not os.environ.get("TETHER_WATCHDOG"), reason="run by the test above")
@pytest.mark.parametrize("transport", ["stdio", "http"])
async def test_mcp_measured_in_a_fresh_interpreter(transport: str) -> None:
    """Every hostile server at once, asked for its tools, and a call one never answers."""
    from tests.security.test_hostile_mcp import HostileHTTP, stdio
    from tether import create_agent
    from tether.errors import MCPServerError
    from tether.messages import ToolCall
    from tether.models import ScriptedModel

    modes = HOSTILE_MODES + (["gzip"] if transport == "http" else [])
    started = [HostileHTTP(mode) for mode in [*modes, "no-call"]] if transport == "http" else []
    servers = [s.server() for s in started] or [stdio(mode) for mode in [*modes, "no-call"]]
    *hostile, answering = servers
    failures: list[str] = []

    async def refused(server: Any, order: int) -> None:
        # Started one by one: a process is started on the loop, and a dozen started at
        # once would hold it as long as a dozen starts take on a loaded machine.
        await asyncio.sleep(0.05 * order)
        try:
            await server.list_tools()
        except MCPServerError as exc:
            failures.append(str(exc))

    agent = await asyncio.to_thread(
        create_agent,
        ScriptedModel([[ToolCall("h_wait", {}, id="w")], "done"]),
        mcp_servers=[answering],
    )

    async def ask_them_all() -> None:
        await asyncio.gather(*(refused(s, n) for n, s in enumerate(hostile)), agent.arun("Wait."))

    try:
        stall = await worst_stall(ask_them_all)
    finally:
        for server in started:
            server.kill()
    assert stall <= STALL_LIMIT, f"the event loop stalled {stall:.3f} s with {transport} servers"
    assert len(failures) == len(hostile)
