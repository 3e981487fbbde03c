"""What a fresh-eyes attack on the integrity guarantees found, kept as tests: an edit made
from a reading older than a pause, a resume or a crash is refused; a call that times out
or is cancelled while it waits for a file never writes afterwards; waiting for a file
holds no worker thread; a path is never both a file and a directory; a killed write
leaves nothing the agent sees; a huge turn stays in order."""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from tether import Approve, Limits, create_agent
from tether.backends import FilesystemBackend, StoreBackend
from tether.backends.base import create
from tether.backends.errors import BackendError
from tether.messages import ToolCall
from tether.models import FunctionModel, ModelRequest, ScriptedModel
from tether.stores import SqliteStore
from tether.testing import tool_results

CONFIG = "mode = safe\nlimit = 10\n"
RAISE = ToolCall(
    "edit_file", {"file_path": "/cfg.txt", "old_string": "limit = 10", "new_string": "limit = 99"}
)
READ = ToolCall("read_file", {"file_path": "/cfg.txt"})
STALE = "/cfg.txt changed since this agent last read or wrote it"


def _someone_changes(root: Path) -> None:
    (root / "cfg.txt").write_text("mode = UNSAFE\nlimit = 10\n")


def test_a_change_made_while_an_edit_waits_for_approval_refuses_it(tmp_path: Path) -> None:
    (tmp_path / "cfg.txt").write_text(CONFIG)
    agent = create_agent(
        ScriptedModel([[READ], [RAISE], "done"]),
        backend=FilesystemBackend(tmp_path),
        checkpointer=f"sqlite:///{tmp_path}/runs.db",
        interrupt_on={"edit_file": True},
    )
    assert agent.run("raise the limit", thread_id="t").stop_reason == "interrupted"
    _someone_changes(tmp_path)  # the person edits the file while the call waits
    done = agent.resume("t", decisions=[Approve()])
    refused = tool_results(done)[-1]
    assert refused.is_error
    assert STALE in refused.text
    assert (tmp_path / "cfg.txt").read_text() == "mode = UNSAFE\nlimit = 10\n"


def test_the_next_run_of_a_thread_remembers_what_it_read(tmp_path: Path) -> None:
    (tmp_path / "cfg.txt").write_text(CONFIG)
    agent = create_agent(
        ScriptedModel([[READ], "read it", [RAISE], "done"]),
        backend=FilesystemBackend(tmp_path),
        checkpointer=f"sqlite:///{tmp_path}/runs.db",
    )
    agent.run("read the config", thread_id="t")
    _someone_changes(tmp_path)
    refused = tool_results(agent.run("now raise the limit", thread_id="t"))[-1]
    assert refused.is_error
    assert STALE in refused.text


READ_THEN_DIE = r"""
import os, signal, sys
from tether import create_agent, tool
from tether.backends import FilesystemBackend
from tether.messages import ToolCall, ToolResultMessage
from tether.models import FunctionModel

root, url = sys.argv[1:]

@tool
def die() -> str:
    "Die."
    os.kill(os.getpid(), signal.SIGKILL)
    return "never"

def reply(request):
    done = sum(isinstance(m, ToolResultMessage) for m in request.messages)
    return [[ToolCall("read_file", {"file_path": "/cfg.txt"})], [ToolCall("die", {})]][done]

create_agent(FunctionModel(reply), tools=[die], backend=FilesystemBackend(root),
             checkpointer=url).run("go", thread_id="t")
"""


def test_a_reading_before_a_kill_still_counts_after_the_resume(tmp_path: Path) -> None:
    root = tmp_path / "root"
    root.mkdir()
    (root / "cfg.txt").write_text(CONFIG)
    url = f"sqlite:///{tmp_path}/runs.db"
    script = tmp_path / "agent.py"
    script.write_text(READ_THEN_DIE)
    died = subprocess.run(
        [sys.executable, str(script), str(root), url], check=False, capture_output=True
    )
    assert died.returncode == -signal.SIGKILL, died.stderr.decode()[-2000:]
    _someone_changes(root)

    def reply(request: ModelRequest) -> Any:
        return [RAISE] if len(tool_results(request.messages)) == 2 else "done"

    resumed = create_agent(FunctionModel(reply), backend=FilesystemBackend(root), checkpointer=url)
    refused = tool_results(resumed.resume("t"))[-1]
    assert refused.is_error
    assert STALE in refused.text


@contextmanager
def held(path: Path) -> Iterator[None]:
    """`path` locked the way another writer holds it (its own open file, so its own lock)."""
    fd = os.open(path, os.O_RDONLY)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)


def test_an_edit_that_times_out_waiting_for_a_file_never_writes_it(tmp_path: Path) -> None:
    (tmp_path / "f.txt").write_text("a")
    edits = [
        ToolCall("edit_file", {"file_path": "/f.txt", "old_string": "a", "new_string": new})
        for new in ("ab", "ac")
    ]
    agent = create_agent(
        ScriptedModel([edits, "done"]),
        backend=FilesystemBackend(tmp_path),
        limits=Limits(tool_timeout_seconds=0.5),
    )

    async def go() -> Any:
        with held(tmp_path / "f.txt"):
            result = await agent.arun("edit")
        await asyncio.sleep(0.5)  # time enough for a write left running to land
        return result

    result = asyncio.run(go())
    timed_out = (
        "Tool 'edit_file' timed out after 0.5 s. "
        "It may have taken effect: check before calling it again."
    )
    assert [r.text for r in tool_results(result)] == [timed_out] * 2
    assert (tmp_path / "f.txt").read_text() == "a"


def test_waiting_for_a_file_holds_no_worker_thread(tmp_path: Path) -> None:
    paths = [tmp_path / f"f{n}.txt" for n in range(12)]  # more than the default pool has
    for path in paths:
        path.write_text("x")
    backend = FilesystemBackend(tmp_path)

    async def go() -> None:
        with all_held(paths):
            waiting = [asyncio.ensure_future(backend.write(f"/{p.name}", b"y")) for p in paths]
            await asyncio.sleep(0.2)  # every write has begun to wait for its file
            # Work of anyone else that needs a worker thread still gets one at once.
            assert await asyncio.wait_for(asyncio.to_thread(lambda: "free"), 30) == "free"
            assert not any(task.done() for task in waiting)
        await asyncio.gather(*waiting)

    asyncio.run(go())
    assert {p.read_text() for p in paths} == {"y"}


@contextmanager
def all_held(paths: list[Path]) -> Iterator[None]:
    with contextlib.ExitStack() as stack:
        for path in paths:
            stack.enter_context(held(path))
        yield


def test_a_path_is_never_made_a_file_and_a_directory_at_once(tmp_path: Path) -> None:
    store = SqliteStore(tmp_path / "store.db")

    async def trial(n: int) -> list[Any]:
        one, other = StoreBackend(store, f"ns{n}"), StoreBackend(store, f"ns{n}")
        return await asyncio.gather(
            create(one, "/x", b"file"), create(other, "/x/y", b"inner"), return_exceptions=True
        )

    for n in range(20):
        outcomes = asyncio.run(trial(n))
        assert sum(o is None for o in outcomes) == 1, outcomes
        assert all(o is None or isinstance(o, BackendError) for o in outcomes)


WRITER = r"""
import asyncio, sys
from tether.backends import FilesystemBackend

backend = FilesystemBackend(sys.argv[1])

async def main():
    await backend.write("/data/big.txt", b"o" * 4_000_000)
    print("ready", flush=True)
    while True:
        await backend.write("/data/big.txt", b"n" * 6_000_000)
        await backend.write("/data/big.txt", b"o" * 4_000_000)

asyncio.run(main())
"""


def test_writes_killed_mid_way_leave_nothing_the_agent_sees(tmp_path: Path) -> None:
    script = tmp_path / "writer.py"
    script.write_text(WRITER)
    root = tmp_path / "root"
    root.mkdir()
    for pause in (0.0, 0.03, 0.07, 0.11, 0.15, 0.19):  # at different points of the writes
        writer = subprocess.Popen([sys.executable, str(script), str(root)], stdout=subprocess.PIPE)
        assert writer.stdout is not None
        assert writer.stdout.readline() == b"ready\n"
        if pause:
            asyncio.run(asyncio.sleep(pause))
        writer.send_signal(signal.SIGKILL)
        writer.wait(timeout=60)
    listed = asyncio.run(FilesystemBackend(root).ls("/data"))
    assert [f.path for f in listed] == ["/data/big.txt"]
    found = asyncio.run(FilesystemBackend(root).files("/"))
    assert [f.path for f in found] == ["/data/big.txt"]


def test_a_huge_turn_on_one_file_runs_in_the_order_given(tmp_path: Path) -> None:
    (tmp_path / "log.txt").write_text("0\n")
    count = 300  # past the number of calls compared with each other
    edits = [
        ToolCall(
            "edit_file",
            {"file_path": "/log.txt", "old_string": f"{n}\n", "new_string": f"{n + 1}\n"},
        )
        for n in range(count)
    ]
    agent = create_agent(
        ScriptedModel([edits, "done"]),
        backend=FilesystemBackend(tmp_path),
        limits=Limits(loop_nudge_after=None, loop_stop_after=None),
    )
    results = tool_results(agent.run("count"))
    assert not any(r.is_error for r in results)
    assert (tmp_path / "log.txt").read_text() == f"{count}\n"
