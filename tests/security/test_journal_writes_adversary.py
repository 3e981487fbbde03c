"""The Journal's writes, tried as an adversary would: records made while an append is
under way go out together in the next one, written by the root journal's writer task
(a run that waits and is cancelled stops waiting, never the write); after a failed
write nothing more is written; Postgres appends are one call of `tether_append`.

The first cases come from a review of an earlier form of this change, where the run
that found no write under way wrote everyone's records itself and could be cancelled
mid-write: another run's records were lost while its append returned, and a call ran
twice after a resume.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import sqlite3
import threading
import uuid
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path
from typing import Any

import pytest

import tether.agent
from tether import StorageError, ThreadBusyError, create_agent, tool
from tether.checkpoint.base import Record
from tether.checkpoint.journal import Journal, read_thread
from tether.checkpoint.lease import here
from tether.checkpoint.sqlite import SqliteCheckpointer
from tether.messages import AssistantMessage, ToolCall, ToolResult, ToolResultMessage, UserMessage
from tether.models import FunctionModel, ModelRequest
from tether.models.scripted import Turn
from tether.state import RunState, ToolContext

Hook = Callable[[int, list[Record]], Awaitable[None]]


class Held:
    """An append held at its start: `arrived` is set when it gets there, and it goes on
    once `release` is set (raising `error`, if given, instead of writing)."""

    def __init__(self) -> None:
        self.arrived, self.release = asyncio.Event(), asyncio.Event()
        self.error: Exception | None = None

    async def wait(self) -> None:
        self.arrived.set()
        await self.release.wait()
        if self.error is not None:
            raise self.error


class Gated(SqliteCheckpointer):
    """SQLite, with appends held at their start (`hold(n)`, the nth from 1) or an
    awaitable hook before each (call number, records): an append waiting there stands
    for one waiting on the thread's lock in Postgres, or on the network; cancelled
    there, it writes nothing (as Postgres's does)."""

    def __init__(self, path: Path) -> None:
        super().__init__(path)
        self.calls: list[list[Record]] = []
        self.hook: Hook | None = None
        self.held: dict[int, Held] = {}

    def hold(self, *numbers: int) -> tuple[Held, ...]:
        return tuple(self.held.setdefault(n, Held()) for n in numbers)

    async def append(
        self, thread_id: str, records: Sequence[Record], *, holder: str | None = None
    ) -> None:
        self.calls.append(list(records))
        if len(self.calls) in self.held:
            await self.held[len(self.calls)].wait()
        if self.hook is not None:
            await self.hook(len(self.calls), list(records))
        await super().append(thread_id, records, holder=holder)


async def until(condition: Callable[[], object], turns: int = 100_000) -> None:
    """Let the loop run until `condition()` holds (no clock: a bounded count of turns)."""
    for _ in range(turns):
        if condition():
            return
        await asyncio.sleep(0)
    raise AssertionError("condition never held")


def on_disk(path: Path, thread_id: str = "t") -> list[dict[str, Any]]:
    with contextlib.closing(sqlite3.connect(path)) as db:
        rows = db.execute(
            "SELECT body FROM tether_records WHERE thread_id = ? ORDER BY seq", (thread_id,)
        ).fetchall()
    return [json.loads(body) for (body,) in rows]


# --- 1. A cancelled writer and the records of other runs it was writing ---------------


# A subagent's task (a background subagent that cancel_task stops) is cancelled while
# the append that holds another run's record waits: the other run's append returns only
# once its record is on record.
async def test_a_cancelled_writer_never_reports_another_runs_records_as_written(
    tmp_path: Path,
) -> None:
    cp = Gated(tmp_path / "runs.db")
    root = Journal(cp, "t", None)
    sub = root.under("call_bg")
    first, second = cp.hold(1, 2)  # the second stands for the thread's lock held elsewhere
    writer = asyncio.ensure_future(sub.decided({"sub": {"n": 1}}))  # the subagent's task
    await first.arrived.wait()
    parent = asyncio.ensure_future(root.decided({"parent": {"n": 2}}))  # the parent's
    await until(lambda: root._writes.queued)
    first.release.set()
    await second.arrived.wait()  # the parent's record is being written
    writer.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await writer
    await until(writer.done)
    assert not parent.done()  # its record is not on record yet: it still waits
    second.release.set()
    await parent
    written = [r for r in on_disk(tmp_path / "runs.db") if "parent" in r.get("decisions", {})]
    assert written, "the parent's append returned as written, and its record is not on record"
    await cp.close()


# The same on SQLite itself: a run's append returns only once its records are on disk,
# not while the job that writes them waits in the worker's queue (where a kill -9 would
# lose it), whoever else was cancelled meanwhile.
async def test_sqlite_a_waiter_returns_only_once_its_records_are_on_disk(tmp_path: Path) -> None:
    path = tmp_path / "runs.db"
    cp = Gated(path)
    root = Journal(cp, "t", None)
    sub = root.under("call_bg")
    blocker1, blocker2 = threading.Event(), threading.Event()
    second_in = asyncio.Event()

    async def hook(n: int, records: list[Record]) -> None:
        if n == 2:
            second_in.set()  # the job goes to the worker at once after this, behind blocker2

    cp.hook = hook
    await cp.append("t", [{"t": "decided", "decisions": {}}])  # the worker is up
    cp.calls.clear()
    busy1 = asyncio.ensure_future(cp.db.run(lambda db: blocker1.wait(30)))
    writer = asyncio.ensure_future(sub.decided({"sub": {"n": 1}}))
    await until(lambda: cp.calls)
    parent = asyncio.ensure_future(root.decided({"parent": {"n": 2}}))
    await until(lambda: root._writes.queued)
    busy2 = asyncio.ensure_future(cp.db.run(lambda db: blocker2.wait(30)))
    await asyncio.sleep(0)
    blocker1.set()
    await second_in.wait()
    await asyncio.sleep(0)
    writer.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await writer
    try:
        for _ in range(1000):  # the job that writes the parent's record waits in the worker
            await asyncio.sleep(0)
        assert not parent.done(), "the parent's append returned before its record was on disk"
    finally:
        blocker2.set()
        await busy1
        await busy2
    await parent
    assert any("parent" in r.get("decisions", {}) for r in on_disk(path))
    await cp.close()


# A run cancelled while its own append waits (true of the code before this change too:
# its append was cancelled, then lost, and the records after it were written all the
# same, with a sync counting its changes from the lost one, so the thread replayed with
# a message missing). The append goes on; everything lands, in order.
async def test_a_cancelled_append_leaves_no_gap_before_later_records(tmp_path: Path) -> None:
    cp = Gated(tmp_path / "runs.db")
    root = Journal(cp, "t", None)
    state = RunState(run_id="r1", path=("main",), messages=[UserMessage.of("go")])
    await root.begin(state, 0)
    (held,) = cp.hold(2)
    one, two = ToolCall("ping", {}, id="c1"), ToolCall("ping", {}, id="c2")
    state.messages.append(AssistantMessage((one,)))
    writer = asyncio.ensure_future(root.result(state, ToolResult.of(one, "one")))
    await held.arrived.wait()
    state.messages.append(ToolResultMessage((ToolResult.of(one, "one"),)))
    state.messages.append(AssistantMessage((two,)))
    other = asyncio.ensure_future(root.result(state, ToolResult.of(two, "two")))
    await until(lambda: root._writes.queued)
    writer.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await writer
    held.release.set()
    await other
    thread = await read_thread(cp, "t")
    assert [type(m).__name__ for m in thread.messages] == [
        type(m).__name__ for m in state.messages
    ], "the thread replays with a message missing"
    results = [r["result"]["call_id"] for r in on_disk(tmp_path / "runs.db") if r["t"] == "result"]
    assert results == ["c1", "c2"]
    await cp.close()


# The severe outcome of the earlier form: a background subagent's task wrote the
# parent's "started" record (the message that made the call, and the call as started)
# and was cancelled meanwhile; the parent was told it was on record and ran the call; a
# resume then asked the model again and the call ran a second time.
async def test_a_call_never_runs_twice_after_its_started_record_was_lost(tmp_path: Path) -> None:
    path = tmp_path / "runs.db"
    cp = Gated(path)
    root = Journal(cp, "t", None)
    state = RunState(run_id="r1", path=("main",), messages=[UserMessage.of("go")])
    await root.begin(state, 0)
    sub = root.under("call_bg")
    first, second = cp.hold(2, 3)
    runs = 0
    charge = ToolCall("charge", {}, id="pay")
    background = asyncio.ensure_future(sub.decided({"bg": {}}))  # the subagent writes
    await first.arrived.wait()
    state.messages.append(AssistantMessage((charge,)))
    started = asyncio.ensure_future(root.started(state, [charge.id]))
    await until(lambda: root._writes.queued)
    first.release.set()
    await second.arrived.wait()
    background.cancel()  # cancel_task, say
    with contextlib.suppress(asyncio.CancelledError):
        await background
    second.release.set()
    try:
        await started
    except BaseException:
        return  # the parent was told: it does not run the call (what should happen)
    runs += 1  # the parent runs the call
    await root.result(state, ToolResult.of(charge, "charged"))
    # kill -9 here; another process resumes the thread.

    @tool
    def charge_tool() -> str:
        """Charge the card."""
        nonlocal runs
        runs += 1
        return "charged"

    def reply(request: ModelRequest) -> Turn:
        if isinstance(request.messages[-1], ToolResultMessage):
            return "done"
        return [ToolCall("charge_tool", {}, "pay2")]

    agent = create_agent(FunctionModel(reply), tools=[charge_tool], checkpointer=cp)
    with contextlib.suppress(Exception):
        await agent.aresume("t")
    assert runs == 1, "the call ran twice"


# --- 2. Waiting forever ------------------------------------------------------------------


def _parallel_agent(cp: SqliteCheckpointer, seen: dict[str, Any], gate: asyncio.Event):
    @tool
    async def quick(n: int, context: ToolContext) -> str:
        """Answer at once."""
        seen["journal"] = context.state.data["journal"]
        if n == 2:
            await gate.wait()  # the second result comes while the first is written
        return f"quick {n}"

    def reply(request: ModelRequest) -> Turn:
        if isinstance(request.messages[-1], ToolResultMessage):
            return "done"
        return [ToolCall("quick", {"n": 1}, "a"), ToolCall("quick", {"n": 2}, "b")]

    return create_agent(FunctionModel(reply), tools=[quick], checkpointer=cp)


# A run is cancelled while one of its results is written to a store that does not
# answer (a Postgres whose network went away, a thread lock held elsewhere): it waits
# for its last records a bounded while (`_SETTLE_SECONDS`, here none), then ends.
async def test_cancelling_a_run_whose_store_hangs_ends_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(tether.agent, "_SETTLE_SECONDS", 0)
    cp = Gated(tmp_path / "runs.db")
    hung, release = asyncio.Event(), asyncio.Event()
    seen: dict[str, Any] = {}
    gate = asyncio.Event()

    async def hook(n: int, records: list[Record]) -> None:
        if any(r.get("t") == "result" for r in records):
            hung.set()
            gate.set()
            await release.wait()  # the store does not answer

    cp.hook = hook
    agent = _parallel_agent(cp, seen, gate)
    run = asyncio.ensure_future(agent.arun("go", thread_id="t"))
    try:
        await hung.wait()
        await until(lambda: seen["journal"].root._writes.queued)  # b's result waits its turn
        run.cancel()
        with contextlib.suppress(AssertionError):
            await until(run.done)
        assert run.done(), "a cancelled run still waits on the store"
    finally:
        release.set()
        with contextlib.suppress(BaseException):
            await run
        await cp.close()


# A write that fails while others wait on it fails every one of them (no hang, no
# silent success), and nothing is written after it.
async def test_a_failed_batch_fails_every_waiter_and_nothing_follows(tmp_path: Path) -> None:
    cp = Gated(tmp_path / "runs.db")
    root = Journal(cp, "t", None)
    subs = [root.under(f"c{i}") for i in range(3)]
    first, second = cp.hold(1, 2)
    second.error = StorageError("the disk is full", database="test")
    writer = asyncio.ensure_future(root.decided({"w": {}}))
    await first.arrived.wait()
    waiters = [asyncio.ensure_future(s.decided({s.at[0]: {}})) for s in subs]
    await until(lambda: len(root._writes.queued) == 3)
    first.release.set()
    await second.arrived.wait()
    late = asyncio.ensure_future(root.decided({"late": {}}))  # queued behind the failing one
    await until(lambda: len(root._writes.queued) == 1)
    second.release.set()
    outcomes = await asyncio.gather(writer, *waiters, late, return_exceptions=True)
    assert outcomes[0] is None  # its record went out in the first write
    assert all(isinstance(o, StorageError) for o in outcomes[1:]), outcomes
    with pytest.raises(StorageError):
        await root.settled()
    with pytest.raises(StorageError):
        await subs[0].decided({"after": {}})
    assert [list(r["decisions"]) for r in on_disk(tmp_path / "runs.db")] == [["w"]]
    await cp.close()


# The lease lost mid-batch (ThreadBusyError): none of the batch lands, every run
# of the tree sees ThreadBusyError, `lost` is set and end() writes nothing.
async def test_thread_busy_mid_batch_stops_every_run_of_the_tree(tmp_path: Path) -> None:
    cp = Gated(tmp_path / "runs.db")
    me, other = here("run me"), here("run other")
    assert await cp.acquire("t", me, 60) is None
    root = Journal(cp, "t", me.token)
    sub = root.under("c1")
    first, second = cp.hold(1, 2)
    writer = asyncio.ensure_future(root.decided({"w": {}}))
    await first.arrived.wait()
    waiter = asyncio.ensure_future(sub.decided({"s": {}}))
    await until(lambda: root._writes.queued)
    first.release.set()
    await second.arrived.wait()
    await cp.release("t", me.token)
    assert await cp.acquire("t", other, 60) is None  # another process takes the thread
    second.release.set()
    outcomes = await asyncio.gather(writer, waiter, return_exceptions=True)
    assert outcomes[0] is None  # its record went out in the first write
    assert isinstance(outcomes[1], ThreadBusyError), outcomes
    assert root.lost
    assert sub.root.lost
    with pytest.raises(ThreadBusyError):  # the run whose record did land stops next time
        await root.decided({"after": {}})
    state = RunState(run_id="r", path=("main",), messages=[])
    await root.end(state, "completed", None)  # writes nothing, raises nothing
    assert [list(r["decisions"]) for r in on_disk(tmp_path / "runs.db")] == [["w"]]
    await cp.close()


# Many runs of one tree appending at once land in the order they were made,
# each run's records in its own order, with no record lost (no cancellation).
async def test_records_of_a_tree_land_in_the_order_made(tmp_path: Path) -> None:
    cp = Gated(tmp_path / "runs.db")
    root = Journal(cp, "t", None)
    order: list[tuple[str, int]] = []

    async def hook(n: int, records: list[Record]) -> None:
        for _ in range(n % 3):
            await asyncio.sleep(0)

    cp.hook = hook

    async def run(j: Journal, name: str) -> None:
        for i in range(30):
            order.append((name, i))
            await j.decided({f"{name}:{i}": {}})
            for _ in range(i % 4):
                await asyncio.sleep(0)

    journals = [root, *(root.under(f"c{k}") for k in range(4))]
    await asyncio.gather(*(run(j, f"r{k}") for k, j in enumerate(journals)))
    landed = [tuple(next(iter(r["decisions"])).split(":")) for r in on_disk(tmp_path / "runs.db")]
    assert [(a, int(b)) for a, b in landed] == order
    await cp.close()


# --- 3. Postgres: the function, its migration, and a cancelled append ------------------


@pytest.fixture
def pg_schema() -> Any:
    """A schema of this test's own (others' tests empty the default one meanwhile), and
    a URL whose search_path is it alone."""
    import os

    base = os.environ.get("TETHER_TEST_POSTGRES")
    if not base:
        pytest.skip("TETHER_TEST_POSTGRES is not set")
    psycopg = pytest.importorskip("psycopg")
    name = f"adv_{uuid.uuid4().hex[:10]}"
    with psycopg.connect(base, autocommit=True) as db:
        db.execute(f"CREATE SCHEMA {name}")
    sep = "&" if "?" in base else "?"
    yield base, name, f"{base}{sep}options=-csearch_path%3D{name}"
    with psycopg.connect(base, autocommit=True) as db:
        db.execute(f"DROP SCHEMA {name} CASCADE")


def _pg(base: str) -> Any:
    import psycopg

    return psycopg.connect(base, autocommit=True)


# on a fresh database the checkpointer creates tether_append in its own schema
# (the first of search_path) and records schema version 3.
async def test_postgres_fresh_database_gets_version_3_and_the_function(pg_schema: Any) -> None:
    from tether.checkpoint.postgres import PostgresCheckpointer

    base, schema, url = pg_schema
    cp = PostgresCheckpointer(url)
    await cp.append("t", [{"t": "run"}, {"t": "end"}])
    assert await cp.load("t") == [{"t": "run"}, {"t": "end"}]
    await cp.close()
    with _pg(base) as db:
        version = db.execute(
            f"SELECT version FROM {schema}.tether_schema WHERE component = 'checkpoint'"
        ).fetchone()
        where = db.execute(
            "SELECT n.nspname FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace "
            "WHERE p.proname = 'tether_append' AND n.nspname = %s",
            (schema,),
        ).fetchall()
    assert version == (3,)
    assert where == [(schema,)]


# a database written by the previous version (schema version 2, records in it)
# is migrated to 3 and its threads go on numbering from their last record.
async def test_postgres_version_2_database_migrates_to_3_and_numbers_on(pg_schema: Any) -> None:
    from tether.checkpoint.postgres import _MIGRATIONS, PostgresCheckpointer

    _base, _schema, url = pg_schema
    with _pg(url) as db:
        db.execute(
            "CREATE TABLE tether_schema (component TEXT PRIMARY KEY, version INTEGER NOT NULL)"
        )
        for statement in _MIGRATIONS[:2]:
            db.execute(statement)
        db.execute("INSERT INTO tether_schema VALUES ('checkpoint', 2), ('store', 1)")
        db.execute(
            "INSERT INTO tether_records VALUES ('t', 1, 0, '{\"t\":\"run\"}'), "
            "('t', 2, 0, '{\"t\":\"sync\"}')"
        )
    cp = PostgresCheckpointer(url)
    await cp.append("t", [{"t": "end"}])
    assert await cp.load("t") == [{"t": "run"}, {"t": "sync"}, {"t": "end"}]
    await cp.close()
    with _pg(url) as db:
        assert db.execute("SELECT version FROM tether_schema ORDER BY component").fetchall() == [
            (3,),
            (1,),
        ]
        assert db.execute("SELECT max(seq) FROM tether_records").fetchone() == (3,)


# an older tether (two migrations) refuses a version-3 database, changing nothing.
async def test_postgres_an_older_tether_refuses_version_3(pg_schema: Any) -> None:
    from tether._postgres import PostgresDatabase
    from tether.checkpoint.postgres import _MIGRATIONS, PostgresCheckpointer

    _base, _schema, url = pg_schema
    cp = PostgresCheckpointer(url)
    await cp.append("t", [{"t": "run"}])
    await cp.close()
    old = PostgresDatabase(url, "checkpoint", _MIGRATIONS[:2])
    with pytest.raises(
        StorageError, match=r"newer tether \(schema version 3; this one reads up to 2\)"
    ):
        await old.run(lambda db: asyncio.sleep(0))
    await old.close()


# thread ids and record bodies that are SQL, plpgsql quoting ($$), array syntax
# ({ } , " \ NULL) or odd Unicode go through the function as data, exactly.
async def test_postgres_hostile_ids_and_bodies_are_data(pg_schema: Any) -> None:
    from tether.checkpoint.postgres import PostgresCheckpointer

    _base, _schema, url = pg_schema
    cp = PostgresCheckpointer(url)
    ids = [
        "t'); DROP TABLE tether_records; --",
        "$$; SELECT pg_sleep(10); $$",
        'a"b\\c{d},e',
        "NULL",
        "\u202eevil\u200d",
        "x" * 5000,
    ]
    bodies: list[Record] = [
        {"t": "sync", "s": "'); DELETE FROM tether_records; --"},
        {"t": "sync", "s": '$$ $body$ \\ " { } , NULL'},
        {"t": "sync", "s": "\u0000\ud7ff\U0001f600"},
        {"t": "sync", "s": "NULL"},
    ]
    for thread_id in ids:
        await cp.append(thread_id, bodies)
        await cp.append(thread_id, [{"t": "end"}])
    for thread_id in ids:
        assert await cp.load(thread_id) == [*bodies, {"t": "end"}]
    assert len(await cp.threads()) == len(ids)
    await cp.close()


# two deployments in two schemas of one database, each with search_path its own:
# each has its own function and tables; one thread id in both stays two threads.
async def test_postgres_two_schemas_stay_apart(pg_schema: Any) -> None:
    from tether.checkpoint.postgres import PostgresCheckpointer

    base, schema, url = pg_schema
    other = f"{schema}_b"
    with _pg(base) as db:
        db.execute(f"CREATE SCHEMA {other}")
    try:
        url_b = url.replace(f"%3D{schema}", f"%3D{other}")
        a, b = PostgresCheckpointer(url), PostgresCheckpointer(url_b)
        await a.append("t", [{"t": "run", "who": "a"}])
        await b.append("t", [{"t": "run", "who": "b"}])
        await a.append("t", [{"t": "end", "who": "a"}])
        assert await a.load("t") == [{"t": "run", "who": "a"}, {"t": "end", "who": "a"}]
        assert await b.load("t") == [{"t": "run", "who": "b"}]
        await a.close()
        await b.close()
    finally:
        with _pg(base) as db:
            db.execute(f"DROP SCHEMA {other} CASCADE")


# The first case on Postgres itself: a subagent's task is cancelled while the append
# that holds the parent's record waits for the thread's lock (held by another process);
# in the earlier form psycopg cancelled the statement in the server, nothing was
# inserted, and the parent's append returned as written.
async def test_postgres_a_cancelled_writer_loses_no_record_of_another_run(
    pg_schema: Any,
) -> None:
    import psycopg

    from tether.checkpoint.postgres import PostgresCheckpointer

    base, _schema, url = pg_schema

    class GatedPg(PostgresCheckpointer):
        def __init__(self, url: str) -> None:
            super().__init__(url)
            self.n = 0
            self.hook: Hook | None = None

        async def append(
            self, thread_id: str, records: Sequence[Record], *, holder: str | None = None
        ) -> None:
            self.n += 1
            if self.hook is not None:
                await self.hook(self.n, list(records))
            await super().append(thread_id, records, holder=holder)

    cp = GatedPg(url)
    await cp.append("t", [{"t": "run"}])  # connected and migrated
    cp.n = 0
    root = Journal(cp, "t", None)
    sub = root.under("call_bg")
    other = await psycopg.AsyncConnection.connect(base, autocommit=True)
    first_in, release_first, second_in = (asyncio.Event() for _ in range(3))

    async def hook(n: int, records: list[Record]) -> None:
        if n == 1:
            first_in.set()
            await release_first.wait()
        elif n == 2:  # another process holds the thread's lock for a moment
            await other.execute("SELECT pg_advisory_lock(hashtextextended('t', 0))")
            second_in.set()

    cp.hook = hook
    writer = asyncio.ensure_future(sub.decided({"sub": {}}))
    await first_in.wait()
    parent = asyncio.ensure_future(root.decided({"parent": {}}))
    await until(lambda: root._writes.queued)
    release_first.set()
    await second_in.wait()
    pid = cp.db._connections[asyncio.get_running_loop()][0].info.backend_pid
    while True:  # until tether's statement waits on the lock in the server
        row = await (
            await other.execute(
                "SELECT wait_event_type FROM pg_stat_activity WHERE pid = %s", (pid,)
            )
        ).fetchone()
        if row and row[0] == "Lock":
            break
        await asyncio.sleep(0.01)
    writer.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await writer
    await other.execute("SELECT pg_advisory_unlock(hashtextextended('t', 0))")
    await other.close()
    (outcome,) = await asyncio.gather(parent, return_exceptions=True)
    with contextlib.suppress(Exception):
        await root.decided({"later": {}})
    records = await cp.load("t")
    await cp.close()
    landed = [k for r in records if r["t"] == "decided" for k in r["decisions"]]
    assert "parent" in landed or isinstance(outcome, BaseException), (
        f"the parent's append returned as written; on record: {landed}"
    )
