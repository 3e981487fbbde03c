"""What a fresh-eyes attack on the integrity guarantees found, kept as tests: an edit made
from a reading older than a pause, a resume or a crash is refused; a call that times out
or is cancelled while it waits for a file never writes afterwards; waiting for a file
holds no worker thread; a path is never both a file and a directory; a killed write
leaves nothing the agent sees; a huge turn stays in order."""

from __future__ import annotations

import asyncio
import contextlib
import errno
import fcntl
import os
import signal
import subprocess
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from tether import Approve, Limits, create_agent, tool
from tether.backends import (
    CompositeBackend,
    FilesystemBackend,
    PermissionedBackend,
    StateBackend,
    StoreBackend,
)
from tether.backends.base import create
from tether.backends.errors import BackendError
from tether.backends.hostfs import _writing
from tether.messages import ToolCall
from tether.models import FunctionModel, ModelRequest, ScriptedModel
from tether.stores import InMemoryStore, SqliteStore
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


def test_a_write_cancelled_twice_ends_before_its_call_does(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    entered, release = threading.Event(), threading.Event()
    real_fsync = os.fsync

    def slow_disk(fd: int) -> None:  # the write is in its fsync until the test says so
        entered.set()
        release.wait(30)
        real_fsync(fd)

    monkeypatch.setattr(os, "fsync", slow_disk)
    backend = FilesystemBackend(tmp_path)
    before = _open_files(tmp_path)

    async def go() -> tuple[bool, bool]:
        task = asyncio.ensure_future(backend.write("/new.txt", b"late\n"))
        await asyncio.to_thread(entered.wait, 30)
        task.cancel()  # Esc, and Esc again: two stops of one run
        await asyncio.sleep(0)
        task.cancel()
        asyncio.get_running_loop().call_later(0.2, release.set)
        with pytest.raises(asyncio.CancelledError):
            await task
        there_when_cancelled = (tmp_path / "new.txt").exists()
        await asyncio.sleep(0.5)  # a write left running would land by now
        return there_when_cancelled, (tmp_path / "new.txt").exists()

    when_cancelled, later = asyncio.run(go())
    assert when_cancelled == later  # never reported cancelled while it goes on
    assert _open_files(tmp_path) == before  # nothing it opened is left open


def _open_files(folder: Path) -> int:
    """How many of this process's descriptors are open on files in `folder`."""
    found = 0
    for fd in os.listdir("/proc/self/fd"):
        with contextlib.suppress(OSError):
            found += os.readlink(f"/proc/self/fd/{fd}").startswith(str(folder))
    return found


def test_a_write_cancelled_while_it_opens_the_file_leaves_nothing_open(tmp_path: Path) -> None:
    (tmp_path / "a.txt").write_text("x")
    backend = FilesystemBackend(tmp_path)
    before = _open_files(tmp_path)  # the backend's own descriptor of its root

    async def go() -> None:
        for _ in range(20):
            task = asyncio.ensure_future(backend.write("/a.txt", b"y"))
            await asyncio.sleep(0)  # its open is on a worker thread now
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task

    asyncio.run(go())
    assert _open_files(tmp_path) == before


SUBAGENT_WRITES_THEN_DIES = r"""
import os, signal, sys
from tether import create_agent
from tether.messages import ToolCall, ToolResultMessage, UserMessage
from tether.models import FunctionModel

def reply(request):
    last = request.messages[-1]
    if request.messages[0].text == "SUBTASK":
        if not isinstance(last, ToolResultMessage):
            return [ToolCall("write_file", {"file_path": "/x.txt", "content": "hello"})]
        os.kill(os.getpid(), signal.SIGKILL)  # its write's result is on record by now
    if not isinstance(last, ToolResultMessage):
        return [ToolCall("task", {"subagent_type": "general-purpose", "description": "SUBTASK"})]
    return "main done"

create_agent(FunctionModel(reply), checkpointer=sys.argv[1]).run("go", thread_id="t")
"""


def test_a_subagents_recorded_write_to_the_state_backend_survives_a_kill(tmp_path: Path) -> None:
    script = tmp_path / "agent.py"
    script.write_text(SUBAGENT_WRITES_THEN_DIES)
    url = f"sqlite:///{tmp_path}/runs.db"
    died = subprocess.run([sys.executable, str(script), url], check=False, capture_output=True)
    assert died.returncode == -signal.SIGKILL, died.stderr.decode()[-2000:]

    def reply(request: ModelRequest) -> Any:
        return "sub done" if request.messages[0].text == "SUBTASK" else "main done"  # type: ignore[union-attr]

    result = create_agent(FunctionModel(reply), checkpointer=url).resume("t")
    assert result.output == "main done"
    assert result.files == {"/x.txt": b"hello"}  # the write its result says it made


def test_a_read_sent_with_an_edit_does_not_vouch_for_it(tmp_path: Path) -> None:
    (tmp_path / "cfg.txt").write_text(CONFIG)

    @tool
    def someone_else() -> str:
        """A person saves the file in their editor."""
        _someone_changes(tmp_path)
        return "saved"

    model = ScriptedModel(
        [
            [READ],
            [ToolCall("someone_else", {})],
            [READ, RAISE],  # the edit was written before the model saw this reading
            [RAISE],  # now it has seen it: the edit goes through
            "done",
        ]
    )
    agent = create_agent(model, tools=[someone_else], backend=FilesystemBackend(tmp_path))
    results = tool_results(agent.run("raise the limit"))
    refused, edited = results[3], results[4]
    assert refused.is_error
    assert STALE in refused.text
    assert not edited.is_error
    assert (tmp_path / "cfg.txt").read_text() == "mode = UNSAFE\nlimit = 99\n"


@pytest.mark.parametrize(
    ("path", "message"),
    [
        ("/mem/users'/n.md", "No such file: /mem/users'/n.md"),
        ("/mem/a(/b.md", "No such file: /mem/a(/b.md"),
        ("/disk/lnk/f.txt", "/disk/lnk is a symbolic link to /disk/real; links are not "
         "followed, so use /disk/real/f.txt."),
    ],
)  # fmt: skip
def test_a_routed_backend_names_paths_as_the_agent_knows_them(
    path: str, message: str, tmp_path: Path
) -> None:
    (tmp_path / "real").mkdir()
    (tmp_path / "real" / "f.txt").write_text("x")
    (tmp_path / "lnk").symlink_to("real")
    backend = CompositeBackend(
        StateBackend(),
        {"/mem/": StoreBackend(InMemoryStore()), "/disk/": FilesystemBackend(tmp_path)},
    )
    with pytest.raises(BackendError) as caught:
        asyncio.run(backend.read(path))
    assert str(caught.value) == message


def test_text_of_a_routed_backends_messages_that_is_no_path_of_its_own_is_kept() -> None:
    def policy(operation: str, path: str) -> str | None:
        return "writes under /etc or /usr are blocked by IT" if operation == "write" else None

    routed = PermissionedBackend(StateBackend(), policy=policy)  # type: ignore[arg-type]
    backend = CompositeBackend(StateBackend(), {"/mem/": routed})
    with pytest.raises(BackendError, match=r"^Refused by policy: writes under /etc or /usr"):
        asyncio.run(backend.write("/mem/a.md", b"x"))
    with pytest.raises(BackendError, match=r"^The pattern '/etc/\[' is not a valid"):
        asyncio.run(backend.grep("/etc/[", "/mem"))


def test_without_hard_links_only_one_of_two_creates_makes_the_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def no_links(*args: Any, **kwargs: Any) -> None:  # vfat, exFAT, some network mounts
        raise OSError(errno.EPERM, "Operation not permitted")

    monkeypatch.setattr(_writing, "_UNNAMED", False)
    monkeypatch.setattr(os, "link", no_links)
    backend = FilesystemBackend(tmp_path)

    async def pairs() -> list[list[Any]]:
        return [
            await asyncio.gather(
                create(backend, f"/n{i}.txt", b"A"),
                create(backend, f"/n{i}.txt", b"B"),
                return_exceptions=True,
            )
            for i in range(200)
        ]

    for outcome in asyncio.run(pairs()):
        assert sum(o is None for o in outcome) == 1, outcome
