"""Every edit is kept: parallel calls on one path take effect in the model's order,
writes from other agents, runs and processes wait their turn, a write is never torn,
and an edit made from a stale reading is refused.

Before this was built, three parallel `edit_file` calls on one file over
`FilesystemBackend` kept only the last edit in 20 of 20 runs, each reporting success.
"""

from __future__ import annotations

import asyncio
import random
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import postgres_url
from tether import create_agent, tool
from tether.backends import (
    CompositeBackend,
    FilesystemBackend,
    StateBackend,
    StoreBackend,
)
from tether.backends.base import create, update
from tether.backends.errors import BackendError
from tether.messages import ToolCall, ToolResultMessage
from tether.models import FunctionModel, ModelRequest, ScriptedModel
from tether.stores import InMemoryStore, SqliteStore
from tether.testing import tool_results

APP = "".join(f"line {n}\n" for n in range(1, 6))


def backend_of(kind: str, folder: Path) -> Any:
    if kind == "state":
        return StateBackend()
    if kind == "filesystem":
        return FilesystemBackend(folder)
    if kind == "store":
        return StoreBackend(SqliteStore(folder / "store.db"))
    return CompositeBackend(StateBackend(), {"/src/": FilesystemBackend(folder)})


BACKENDS = ["state", "filesystem", "store", "composite"]


def edits(path: str, lines: list[int], server_id: str = "e") -> list[ToolCall]:
    """One edit per line, all under the same server id (as some servers send them)."""
    return [
        ToolCall(
            "edit_file",
            {"file_path": path, "old_string": f"line {n}\n", "new_string": f"LINE {n}\n"},
            server_id,
        )
        for n in lines
    ]


@pytest.mark.parametrize("kind", BACKENDS)
def test_three_parallel_edits_of_one_file_keep_all_three(kind: str, tmp_path: Path) -> None:
    path = "/src/app.py"
    for attempt in range(20 if kind == "filesystem" else 3):
        folder = tmp_path / str(attempt)
        folder.mkdir()
        model = ScriptedModel(
            [
                [ToolCall("write_file", {"file_path": path, "content": APP})],
                edits(path, [1, 3, 5]),
                [ToolCall("read_file", {"file_path": path})],
                "done",
            ]
        )
        result = create_agent(model, backend=backend_of(kind, folder)).run("edit")
        results = tool_results(result)
        assert [r.is_error for r in results[1:4]] == [False, False, False]
        assert results[-1].text.split("\n")[:5] == [
            "1\tLINE 1",
            "2\tline 2",
            "3\tLINE 3",
            "4\tline 4",
            "5\tLINE 5",
        ], attempt


@pytest.mark.parametrize("kind", BACKENDS)
def test_one_turn_writes_then_edits_then_reads_in_the_order_given(
    kind: str, tmp_path: Path
) -> None:
    path = "/src/new.py"
    model = ScriptedModel(
        [
            [
                ToolCall("read_file", {"file_path": path}),  # nothing there yet
                ToolCall("write_file", {"file_path": path, "content": APP}),
                *edits(path, [2]),
                ToolCall("read_file", {"file_path": path, "limit": 2}),
                ToolCall("write_file", {"file_path": path, "content": "again"}),
                ToolCall("ls", {"path": "/src"}),
            ],
            "done",
        ]
    )
    result = create_agent(model, backend=backend_of(kind, tmp_path)).run("go")
    before, wrote, edited, after, again, listed = tool_results(result)
    assert before.is_error
    assert "No such file" in before.text
    assert wrote.text == f"Wrote {len(APP)} bytes to {path}."
    assert edited.text == f"Replaced 1 occurrence(s) in {path}."
    assert after.text.startswith("1\tline 1\n2\tLINE 2")
    assert again.is_error
    assert "already exists" in again.text
    assert "/src/new.py" in listed.text


def test_calls_on_other_paths_run_at_once_and_on_one_path_one_at_a_time() -> None:
    inside: dict[str, int] = {}
    most: dict[str, int] = {}
    order: list[str] = []
    rendezvous: dict[str, asyncio.Event] = {}

    async def enter(path: str, label: str) -> None:
        order.append(label)
        inside[path] = inside.get(path, 0) + 1
        most[path] = max(most.get(path, 0), inside[path])

    @tool(path_param="path")
    async def change(path: str, label: str) -> str:
        """Change a file."""
        await enter(path, label)
        for _ in range(5):  # room for another call on the same path to come in
            await asyncio.sleep(0)
        if path in ("/x", "/y"):  # each waits for the other: only possible at once
            rendezvous.setdefault(path, asyncio.Event()).set()
            other = "/y" if path == "/x" else "/x"
            await asyncio.wait_for(rendezvous.setdefault(other, asyncio.Event()).wait(), 30)
        inside[path] -= 1
        return label

    @tool(path_param="path", read_only=True)
    async def look(path: str, label: str) -> str:
        """Look at a file."""
        await enter(path, label)
        rendezvous.setdefault(label, asyncio.Event()).set()
        other = "r2" if label == "r1" else "r1"
        await asyncio.wait_for(rendezvous.setdefault(other, asyncio.Event()).wait(), 30)
        inside[path] -= 1
        return label

    model = ScriptedModel(
        [
            [
                ToolCall("change", {"path": "/a", "label": "a1"}),
                ToolCall("change", {"path": "/x", "label": "x"}),
                ToolCall("change", {"path": "/a", "label": "a2"}),
                ToolCall("change", {"path": "/y", "label": "y"}),
                ToolCall("change", {"path": "/a/b", "label": "a3"}),  # under /a: after a2
                ToolCall("look", {"path": "/r", "label": "r1"}),
                ToolCall("look", {"path": "/r", "label": "r2"}),  # two reads: together
                ToolCall("change", {"path": "/r", "label": "r3"}),  # a write: after both
            ],
            "done",
        ]
    )
    result = create_agent(model, tools=[change, look]).run("go")
    assert [r.text for r in tool_results(result)] == ["a1", "x", "a2", "y", "a3", "r1", "r2", "r3"]
    assert most["/a"] == 1
    assert [label for label in order if label.startswith("a")] == ["a1", "a2", "a3"]
    assert order.index("r3") > max(order.index("r1"), order.index("r2"))


def test_parallel_subagents_editing_one_file_lose_no_edit(tmp_path: Path) -> None:
    (tmp_path / "app.py").write_text(APP)

    def subagent(request: ModelRequest) -> Any:
        line = request.messages[0].text.split()[-1]  # type: ignore[union-attr]
        last = request.messages[-1]
        if not isinstance(last, ToolResultMessage):
            return [ToolCall("read_file", {"file_path": "/app.py"})]
        (result,) = last.results
        if result.name == "read_file":
            return edits("/app.py", [int(line)])
        if result.is_error:  # changed by the other one since it was read: read it again
            assert "changed since" in result.text, result.text
            return [ToolCall("read_file", {"file_path": "/app.py"})]
        return "edited"

    def main(request: ModelRequest) -> Any:
        if isinstance(request.messages[-1], ToolResultMessage):
            return "both done"
        kind = "general-purpose"
        return [
            ToolCall("task", {"description": f"edit line {n}", "subagent_type": kind}, "t")
            for n in (2, 4)
        ]

    def reply(request: ModelRequest) -> Any:
        first = request.messages[0].text  # type: ignore[union-attr]
        return subagent(request) if first.startswith("edit line") else main(request)

    agent = create_agent(FunctionModel(reply), backend=FilesystemBackend(tmp_path))
    result = agent.run("Change lines 2 and 4.")
    assert result.output == "both done"
    assert (tmp_path / "app.py").read_text() == APP.replace("line 2", "LINE 2").replace(
        "line 4", "LINE 4"
    )


@pytest.mark.parametrize("kind", ["filesystem", "store"])
def test_runs_of_two_threads_on_one_place_lose_no_edit(kind: str, tmp_path: Path) -> None:
    store = InMemoryStore()
    (tmp_path / "app.py").write_text(APP)
    if kind == "store":
        asyncio.run(StoreBackend(store).write("/app.py", APP.encode()))

    def backend() -> Any:  # each agent its own backend object on the same files
        return FilesystemBackend(tmp_path) if kind == "filesystem" else StoreBackend(store)

    def agent_for(lines: list[int]) -> Any:
        def reply(request: ModelRequest) -> Any:
            done = [r for r in tool_results(request.messages) if r.name == "edit_file"]
            last = request.messages[-1]
            if isinstance(last, ToolResultMessage) and last.results[0].is_error:
                # The other run changed the file since this one last saw it: look again.
                assert "changed since" in last.results[0].text, last.results[0].text
                return [ToolCall("read_file", {"file_path": "/app.py"})]
            left = lines[sum(not r.is_error for r in done) :]
            return edits("/app.py", left[:1]) if left else "done"

        url = f"sqlite:///{tmp_path}/runs.db"
        return create_agent(FunctionModel(reply), backend=backend(), checkpointer=url)

    async def both() -> list[Any]:
        return await asyncio.gather(
            agent_for([1, 3, 5]).arun("odd", thread_id="a"),
            agent_for([2, 4]).arun("even", thread_id="b"),
        )

    for result in asyncio.run(both()):
        assert result.output == "done"
    final = asyncio.run(backend().read("/app.py")).decode()
    assert final == APP.replace("line", "LINE")


EDITOR = r"""
import asyncio, sys
from pathlib import Path
from tether.backends import FilesystemBackend, StoreBackend
from tether.backends.base import update

kind, where, role, count = sys.argv[1:]
if kind == "filesystem":
    backend = FilesystemBackend(where)
elif kind == "sqlite":
    from tether.stores import SqliteStore
    backend = StoreBackend(SqliteStore(Path(where) / "store.db"))
else:
    from tether.stores import PostgresStore
    backend = StoreBackend(PostgresStore(where))

async def main():
    for n in range(int(count)):
        line = f"{role} {n}\n".encode()
        await update(backend, "/log.txt", lambda current: (current or b"") + line)

asyncio.run(main())
"""


@pytest.mark.parametrize("kind", ["filesystem", "sqlite", "postgres"])
def test_two_processes_updating_one_file_lose_no_update(kind: str, tmp_path: Path) -> None:
    where = postgres_url() if kind == "postgres" else str(tmp_path)
    script = tmp_path / "editor.py"
    script.write_text(EDITOR)
    count = 60
    workers = [
        subprocess.Popen(
            [sys.executable, str(script), kind, where, role, str(count)],
            stderr=subprocess.PIPE,
            text=True,
        )
        for role in ("a", "b")
    ]
    for worker in workers:
        _, err = worker.communicate(timeout=300)
        assert worker.returncode == 0, err
    if kind == "filesystem":
        backend: Any = FilesystemBackend(tmp_path)
    elif kind == "sqlite":
        backend = StoreBackend(SqliteStore(tmp_path / "store.db"))
    else:
        from tether.stores import PostgresStore

        backend = StoreBackend(PostgresStore(where))
    lines = asyncio.run(backend.read("/log.txt")).decode().splitlines()
    assert sorted(lines) == sorted(f"{role} {n}" for role in "ab" for n in range(count))
    for role in "ab":  # each process's own updates in its order
        assert [x for x in lines if x.startswith(role)] == [f"{role} {n}" for n in range(count)]


def test_an_edit_of_a_file_changed_since_it_was_read_is_refused(tmp_path: Path) -> None:
    (tmp_path / "app.py").write_text(APP)

    @tool
    def someone_else() -> str:
        """A person saves the file in their editor."""
        (tmp_path / "app.py").write_text(APP.replace("line 1", "mine 1"))
        return "saved"

    model = ScriptedModel(
        [
            [ToolCall("read_file", {"file_path": "/app.py"})],
            [ToolCall("someone_else", {})],
            edits("/app.py", [2]),  # made from the reading before the person's change
            [ToolCall("read_file", {"file_path": "/app.py"})],
            edits("/app.py", [2]),
            edits("/app.py", [3]),  # its own change since the reading does not count
            "done",
        ]
    )
    agent = create_agent(model, tools=[someone_else], backend=FilesystemBackend(tmp_path))
    results = tool_results(agent.run("edit"))
    refused, _, edited, then = results[2:]
    assert refused.is_error
    assert "/app.py changed since this agent last read or wrote it" in refused.text
    assert not edited.is_error
    assert not then.is_error
    assert (tmp_path / "app.py").read_text() == (
        APP.replace("line 1", "mine 1").replace("line 2", "LINE 2").replace("line 3", "LINE 3")
    )


WRITER = r"""
import asyncio, sys
from tether.backends import FilesystemBackend

backend = FilesystemBackend(sys.argv[1])
old, new = b"o" * 3_000_000 + b"\n", b"n" * 5_000_000 + b"\n"

async def main():
    await backend.write("/data.bin", old)
    print("ready", flush=True)
    while True:
        await backend.write("/data.bin", new)
        await backend.write("/data.bin", old)

asyncio.run(main())
"""


def test_a_write_killed_at_any_moment_leaves_the_old_file_or_the_new(tmp_path: Path) -> None:
    script = tmp_path / "writer.py"
    script.write_text(WRITER)
    workspace = tmp_path / "workspace"
    workspace.mkdir()
    old, new = b"o" * 3_000_000 + b"\n", b"n" * 5_000_000 + b"\n"
    rng = random.Random(37)
    for _ in range(12):
        writer = subprocess.Popen(
            [sys.executable, str(script), str(workspace)], stdout=subprocess.PIPE, text=True
        )
        assert writer.stdout is not None
        assert writer.stdout.readline() == "ready\n"
        time.sleep(rng.uniform(0, 0.2))  # anywhere in a write: the check holds at every point
        writer.send_signal(signal.SIGKILL)
        writer.wait(timeout=60)
        assert (workspace / "data.bin").read_bytes() in (old, new)
    leftovers = [p.name for p in workspace.iterdir() if p.name != "data.bin"]
    assert all(name.startswith(".tether-") and name.endswith(".tmp") for name in leftovers)


CREATOR = r"""
import asyncio, sys, time
from pathlib import Path
from tether.backends import FilesystemBackend
from tether.backends.base import create
from tether.backends.errors import BackendError

workspace, role, rounds, folder = sys.argv[1], sys.argv[2], int(sys.argv[3]), Path(sys.argv[4])
backend = FilesystemBackend(workspace)

async def main():
    for n in range(rounds):
        (folder / f"ready-{n}-{role}").touch()
        other = folder / f"ready-{n}-{'b' if role == 'a' else 'a'}"
        while not other.exists():
            time.sleep(0.0005)
        try:
            await create(backend, f"/new-{n}.txt", role.encode() * 1000)
            print(n, "made", flush=True)
        except BackendError:
            print(n, "exists", flush=True)

asyncio.run(main())
"""


def test_two_processes_creating_one_file_only_one_makes_it(tmp_path: Path) -> None:
    script = tmp_path / "creator.py"
    script.write_text(CREATOR)
    workspace = tmp_path / "workspace"
    workspace.mkdir()
    rounds = 30
    workers = [
        subprocess.Popen(
            [sys.executable, str(script), str(workspace), role, str(rounds), str(tmp_path)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for role in ("a", "b")
    ]
    outcomes: dict[int, list[tuple[str, str]]] = {n: [] for n in range(rounds)}
    for role, worker in zip("ab", workers, strict=True):
        out, err = worker.communicate(timeout=300)
        assert worker.returncode == 0, err
        for line in out.splitlines():
            n, what = line.split()
            outcomes[int(n)].append((role, what))
    for n, seen in outcomes.items():
        (maker,) = [role for role, what in seen if what == "made"]
        assert sorted(what for _, what in seen) == ["exists", "made"]
        assert (workspace / f"new-{n}.txt").read_bytes() == maker.encode() * 1000


@pytest.mark.parametrize("kind", BACKENDS)
def test_of_two_creates_at_once_one_makes_the_file(kind: str, tmp_path: Path) -> None:
    backend = backend_of(kind, tmp_path)

    async def both() -> list[Any]:
        return await asyncio.gather(
            create(backend, "/src/x.md", b"first"),
            create(backend, "/src/x.md", b"second"),
            return_exceptions=True,
        )

    first, second = asyncio.run(both())
    assert [first, second].count(None) == 1
    error = first or second
    assert isinstance(error, BackendError)
    assert "already exists" in str(error)
    kept = asyncio.run(backend.read("/src/x.md"))
    assert kept == (b"first" if first is None else b"second")


@pytest.mark.parametrize("kind", BACKENDS)
def test_updates_from_many_tasks_at_once_are_all_kept(kind: str, tmp_path: Path) -> None:
    backend = backend_of(kind, tmp_path)

    async def many() -> None:
        await backend.write("/src/count.txt", b"")
        await asyncio.gather(*(update(backend, "/src/count.txt", adding(n)) for n in range(40)))

    def adding(n: int) -> Any:
        return lambda current: (current or b"") + f"{n}\n".encode()

    asyncio.run(many())
    lines = asyncio.run(backend.read("/src/count.txt")).decode().split()
    assert sorted(int(n) for n in lines) == list(range(40))


def test_two_agents_saving_their_history_in_one_thread_keep_both(tmp_path: Path) -> None:
    from tether.capabilities.compaction import ContextCompaction
    from tether.messages import UserMessage
    from tether.state import RunState

    backend = FilesystemBackend(tmp_path)
    compaction = ContextCompaction.__new__(ContextCompaction)

    async def both() -> list[str | None]:
        states = [
            RunState(run_id=f"run_{n}", path=("main",), messages=[], thread_id="t", backend=backend)
            for n in range(2)
        ]
        saved = [
            compaction._save_history(state, [UserMessage.of(f"history {n}")])
            for n, state in enumerate(states)
        ]
        return await asyncio.gather(*saved)

    paths = asyncio.run(both())
    assert sorted(p for p in paths if p) == [
        "/conversation_history/t/1.md",
        "/conversation_history/t/2.md",
    ]
    texts = {(tmp_path / p.lstrip("/")).read_text() for p in paths if p}
    assert len(texts) == 2
