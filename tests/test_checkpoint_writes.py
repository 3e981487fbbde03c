"""How a thread's records are written: SQLite's worker thread and its checkpoints off the
writer's path, appends of many records at once, Postgres's one-trip appends, and the
input estimate a run keeps for a model that reports no usage."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import sqlite3
import threading
from collections.abc import AsyncIterator, Sequence
from pathlib import Path
from typing import Any

import pytest

from tether import StorageError, ThreadBusyError, create_agent, tool
from tether._sqlite import SqliteDatabase, Worker
from tether.checkpoint.base import Checkpointer, Record
from tether.checkpoint.lease import here
from tether.checkpoint.postgres import PostgresCheckpointer
from tether.checkpoint.sqlite import SqliteCheckpointer
from tether.errors import UsageEstimatedWarning
from tether.messages import AssistantMessage, Message, TextPart, ToolCall, ToolResultMessage
from tether.models import FunctionModel, ModelRequest, ModelResponse, estimate
from tether.models.scripted import Turn

from .conftest import postgres_url


async def test_the_worker_does_its_work_in_order_and_hands_back_errors() -> None:
    worker = Worker("test-worker")
    done: list[int] = []

    def step(n: int) -> int:
        done.append(n)
        return n

    assert await asyncio.gather(*(worker.call(lambda n=n: step(n)) for n in range(50))) == list(
        range(50)
    )
    assert done == list(range(50))

    def fail() -> None:
        raise sqlite3.OperationalError("disk I/O error")

    with pytest.raises(sqlite3.OperationalError, match="disk I/O"):
        await worker.call(fail)
    assert await worker.call(lambda: "still working") == "still working"


async def test_work_whose_caller_was_cancelled_is_still_done_and_the_worker_goes_on() -> None:
    worker = Worker("test-worker")
    release, finished = threading.Event(), threading.Event()

    def slow() -> None:
        release.wait(5)
        finished.set()

    waiting = asyncio.ensure_future(worker.call(slow))
    await asyncio.sleep(0.05)
    waiting.cancel()
    release.set()
    with pytest.raises(asyncio.CancelledError):
        await waiting
    assert await worker.call(lambda: 7) == 7
    assert finished.is_set()


def test_an_idle_worker_ends_its_thread_and_starts_again_in_another_loop() -> None:
    worker = Worker("test-idle-worker", idle_seconds=0.05)
    assert asyncio.run(worker.call(threading.get_ident)) != threading.get_ident()
    deadline = 100
    while any(t.name == "test-idle-worker" for t in threading.enumerate()) and deadline:
        threading.Event().wait(0.02)
        deadline -= 1
    assert not any(t.name == "test-idle-worker" for t in threading.enumerate())
    assert asyncio.run(worker.call(lambda: "again")) == "again"  # a new loop, a new thread


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork")
def test_a_forked_child_gets_a_worker_of_its_own(tmp_path: Path) -> None:
    checkpointer = SqliteCheckpointer(tmp_path / "runs.db")
    asyncio.run(checkpointer.append("t", [{"t": "end"}]))  # the parent's thread runs
    checkpointer.db.close()
    pid = os.fork()
    if pid == 0:  # the child: its appends must not wait for the parent's thread
        try:
            asyncio.run(asyncio.wait_for(checkpointer.append("t", [{"t": "end"}]), 10))
            os._exit(0)
        except BaseException:
            os._exit(1)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    assert len(asyncio.run(checkpointer.load("t"))) == 2


async def test_the_wal_is_copied_into_the_database_off_the_writers_path(tmp_path: Path) -> None:
    path = tmp_path / "runs.db"
    checkpointer = SqliteCheckpointer(path)
    body = {"t": "sync", "text": "x" * 3000}
    await checkpointer.append("t", [body])
    db = checkpointer.db._connection
    assert db is not None
    assert db.execute("PRAGMA wal_autocheckpoint").fetchone() == (0,)  # not in a commit
    before = path.stat().st_size
    for _ in range(150):
        await checkpointer.append("t", [body, body])
    assert checkpointer.db._checkpointing is not None
    checkpointer.db.wait_for_checkpoints()  # each one goes on until the WAL is copied
    assert path.stat().st_size > before + 256 * 3000  # the records reached the file itself
    assert len(await checkpointer.load("t")) == 301
    await checkpointer.close()


@pytest.fixture(params=["sqlite", "postgres"])
def checkpointer(request: pytest.FixtureRequest, tmp_path: Path) -> Checkpointer:
    if request.param == "sqlite":
        return SqliteCheckpointer(tmp_path / "runs.db")
    return PostgresCheckpointer(postgres_url())


async def test_an_append_of_many_records_lands_whole_and_in_order(
    checkpointer: Checkpointer,
) -> None:
    records = [{"t": "sync", "n": n} for n in range(450)]
    await checkpointer.append("t", [{"t": "run", "n": -1}])
    await checkpointer.append("t", records)
    assert await checkpointer.load("t") == [{"t": "run", "n": -1}, *records]
    await checkpointer.close()


async def test_an_append_that_fails_midway_adds_nothing(checkpointer: Checkpointer) -> None:
    """A failure at the 402nd of 450 records (a trigger stands for a full disk) fails the
    whole append: none of its records stay, and the checkpointer goes on working."""
    await checkpointer.append("t", [{"t": "run"}])
    if isinstance(checkpointer, SqliteCheckpointer):
        with sqlite3.connect(checkpointer.db.path) as db:
            db.execute(
                "CREATE TRIGGER disk_full BEFORE INSERT ON tether_records WHEN NEW.seq = 402 "
                "BEGIN SELECT RAISE(ABORT, 'disk full'); END"
            )
        drop = "DROP TRIGGER disk_full"
    else:
        assert isinstance(checkpointer, PostgresCheckpointer)
        import psycopg

        with psycopg.connect(checkpointer.db.url, autocommit=True) as db:
            db.execute(
                "CREATE FUNCTION full_disk() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN "
                "IF NEW.seq = 402 THEN RAISE EXCEPTION 'disk full'; END IF; RETURN NEW; "
                "END $$; CREATE TRIGGER disk_full BEFORE INSERT ON tether_records "
                "FOR EACH ROW EXECUTE FUNCTION full_disk()"
            )
        drop = "DROP TRIGGER disk_full ON tether_records; DROP FUNCTION full_disk()"
    with pytest.raises(StorageError, match="disk full"):
        await checkpointer.append("t", [{"t": "sync", "n": n} for n in range(450)])
    assert await checkpointer.load("t") == [{"t": "run"}]
    if isinstance(checkpointer, SqliteCheckpointer):
        with sqlite3.connect(checkpointer.db.path) as db:
            db.execute(drop)
    else:
        with psycopg.connect(checkpointer.db.url, autocommit=True) as db:
            db.execute(drop)
    await checkpointer.append("t", [{"t": "end"}])
    assert await checkpointer.load("t") == [{"t": "run"}, {"t": "end"}]
    await checkpointer.close()


async def test_an_append_after_losing_the_lease_adds_nothing_and_says_who_holds_it(
    checkpointer: Checkpointer,
) -> None:
    me, other = here("run me"), here("run other")
    assert await checkpointer.acquire("t", me, 60) is None
    await checkpointer.append("t", [{"t": "run"}], holder=me.token)
    await checkpointer.release("t", me.token)
    assert await checkpointer.acquire("t", other, 60) is None
    with pytest.raises(ThreadBusyError) as raised:
        await checkpointer.append("t", [{"t": "sync"}, {"t": "started"}], holder=me.token)
    assert raised.value.holder == other.describe()
    with pytest.raises(ThreadBusyError):
        await checkpointer.append("t", [], holder=me.token)
    assert await checkpointer.load("t") == [{"t": "run"}]
    await checkpointer.close()


class _Unmetered:
    """A model that calls `step` 60 times, then answers, and never reports its usage."""

    name, provider = "unmetered", "test"

    async def request(self, request: ModelRequest) -> ModelResponse:
        calls = sum(isinstance(m, AssistantMessage) for m in request.messages)
        if calls < 60:
            call = ToolCall("step", {"n": calls})
            return ModelResponse(AssistantMessage((call,)), "tool_calls")
        return ModelResponse(AssistantMessage((TextPart("done"),)), "stop")

    async def stream(self, request: ModelRequest) -> AsyncIterator[ModelResponse]:
        yield await self.request(request)


def test_a_run_estimates_each_message_once_for_a_model_without_usage(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    @tool
    def step(n: int) -> str:
        """Take step `n`."""
        return f"step {n}"

    counted = 0
    real = estimate.message_chars

    def counting(message: Message) -> int:
        nonlocal counted
        counted += 1
        return real(message)

    monkeypatch.setattr(estimate, "message_chars", counting)
    with pytest.warns(UsageEstimatedWarning):
        result = create_agent(_Unmetered(), tools=[step], checkpointer=None).run("go")
    assert result.steps == 61
    assert result.usage.input_tokens > 61
    # Counted from scratch at each step, it was about 61**2 (3,700 calls).
    assert counted <= 2 * len(result.messages)


def test_sqlite_database_runs_work_on_its_own_worker_thread(tmp_path: Path) -> None:
    database = SqliteDatabase(tmp_path / "x.db", "test", ())
    ident = asyncio.run(database.run(lambda db: threading.get_ident()))
    assert ident != threading.get_ident()
    database.close()


class _Counting(SqliteCheckpointer):
    """Keeps the kinds of the records of each append."""

    def __init__(self, path: Path, fail_on: str | None = None) -> None:
        super().__init__(path)
        self.appends: list[list[str]] = []
        self.fail_on = fail_on

    async def append(
        self, thread_id: str, records: Sequence[Record], *, holder: str | None = None
    ) -> None:
        kinds = [str(r["t"]) for r in records]
        self.appends.append(kinds)
        if self.fail_on in kinds:
            self.fail_on = None
            raise StorageError("the disk is full", database="test")
        await super().append(thread_id, records, holder=holder)


def _records(path: Path, thread_id: str) -> list[str]:
    with contextlib.closing(sqlite3.connect(path)) as db:
        rows = db.execute(
            "SELECT body FROM tether_records WHERE thread_id = ? ORDER BY seq", (thread_id,)
        ).fetchall()
    return [json.loads(body)["t"] for (body,) in rows]


def test_results_that_finish_together_share_a_write(tmp_path: Path) -> None:
    """Five parallel calls finish in the same moment: their results share an append
    (one transaction, one disk flush on Postgres), not one each."""
    arrived = 0
    together = asyncio.Event()

    @tool
    async def meet(n: int) -> str:
        """Wait for the others."""
        nonlocal arrived
        arrived += 1
        if arrived == 5:
            together.set()
        await together.wait()
        return f"met {n}"

    def reply(request: ModelRequest) -> Turn:
        if isinstance(request.messages[-1], ToolResultMessage):
            return "done"
        return [ToolCall("meet", {"n": n}, f"c{n}") for n in range(5)]

    counting = _Counting(tmp_path / "runs.db")
    result = create_agent(FunctionModel(reply), tools=[meet], checkpointer=counting).run(
        "go", thread_id="t"
    )
    assert result.output == "done"
    with_results = [kinds for kinds in counting.appends if "result" in kinds]
    assert sum(kinds.count("result") for kinds in with_results) == 5
    assert len(with_results) <= 2, counting.appends


def test_a_turns_results_are_on_record_before_the_next_model_call(tmp_path: Path) -> None:
    seen: list[list[str]] = []

    @tool
    def ping(n: int) -> str:
        """Answer."""
        return f"pong {n}"

    def reply(request: ModelRequest) -> Turn:
        if isinstance(request.messages[-1], ToolResultMessage):
            seen.append(_records(tmp_path / "runs.db", "t"))
            return "done"
        return [ToolCall("ping", {"n": 1}, "a"), ToolCall("ping", {"n": 2}, "b")]

    create_agent(
        FunctionModel(reply), tools=[ping], checkpointer=f"sqlite:///{tmp_path}/runs.db"
    ).run("go", thread_id="t")
    assert seen[0].count("result") == 2


def _one_call_agent(checkpointer: Checkpointer | str) -> Any:
    """An agent whose model calls `ping` once, then answers "done"."""

    @tool
    def ping() -> str:
        """Answer."""
        return "pong"

    def reply(request: ModelRequest) -> Turn:
        if isinstance(request.messages[-1], ToolResultMessage):
            return "done"
        return [ToolCall("ping", {}, "a")]

    return create_agent(FunctionModel(reply), tools=[ping], checkpointer=checkpointer)


def test_after_a_failed_write_nothing_more_is_written(tmp_path: Path) -> None:
    """A sync counts its changes from the one before: had the run's last records gone out
    after the write of a result failed, the log would have a hole (a message missing,
    and every later one out of place). The run fails with the storage error, and the
    thread resumes from what is on record: the call as interrupted."""

    agent = _one_call_agent(_Counting(tmp_path / "runs.db", fail_on="result"))
    with pytest.raises(StorageError, match="disk is full"):
        agent.run("go", thread_id="t")
    assert _records(tmp_path / "runs.db", "t") == ["run", "sync", "sync", "started"]
    resumed = _one_call_agent(f"sqlite:///{tmp_path}/runs.db").resume("t")
    assert resumed.output == "done"
    answered = [r for m in resumed.messages if isinstance(m, ToolResultMessage) for r in m.results]
    assert [r.is_error for r in answered] == [True]  # interrupted: its outcome is unknown


async def test_postgres_appends_from_many_connections_at_once_number_on_without_a_gap() -> None:
    """Each append is one statement calling tether_append, which takes the thread's
    lock and then numbers the records from a snapshot taken after it. Numbered from the
    statement's own snapshot (taken before the lock was granted), two appends that
    waited for each other would take the same numbers and one would fail."""
    url = postgres_url()
    writers = [PostgresCheckpointer(url) for _ in range(4)]
    await writers[0].append("t", [{"t": "run"}])

    async def append_many(writer: PostgresCheckpointer, w: int) -> None:
        for n in range(25):
            await writer.append("t", [{"t": "sync", "w": w, "n": n}, {"t": "started"}])

    await asyncio.gather(*(append_many(writer, w) for w, writer in enumerate(writers)))
    records = await writers[0].load("t")
    assert len(records) == 1 + 4 * 25 * 2
    for w in range(4):  # each writer's records in its order, each sync with its started
        mine = [i for i, r in enumerate(records) if r.get("w") == w]
        assert [records[i]["n"] for i in mine] == list(range(25))
        assert all(records[i + 1] == {"t": "started"} for i in mine)
    for writer in writers:
        await writer.close()


def test_a_checkpointer_that_raises_its_own_error_fails_the_run_with_a_storage_error(
    tmp_path: Path,
) -> None:
    """A checkpointer of the user's may raise anything: the run reports it as a
    StorageError (its cause kept), not as a bare error escaping the run, and nothing is
    written after it."""

    class Broken(_Counting):
        async def append(
            self, thread_id: str, records: Sequence[Record], *, holder: str | None = None
        ) -> None:
            if any(r["t"] == "result" for r in records):
                raise ValueError("the bucket is gone")
            await super().append(thread_id, records, holder=holder)

    agent = _one_call_agent(Broken(tmp_path / "r.db"))
    with pytest.raises(StorageError, match="bucket is gone") as raised:
        agent.run("go", thread_id="t")
    assert isinstance(raised.value.__cause__, ValueError)
    assert _records(tmp_path / "r.db", "t") == ["run", "sync", "sync", "started"]
