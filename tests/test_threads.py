"""Threads and durable runs on the SQLite checkpointer."""

from __future__ import annotations

import asyncio
import sqlite3
from pathlib import Path

import pytest

from tether import ConfigurationError, Limits, ModelHTTPError, StorageError, create_agent, tool
from tether.checkpoint import open_checkpointer
from tether.checkpoint.journal import Thread, read_thread, replay
from tether.checkpoint.sqlite import SCHEMA_VERSION, SqliteCheckpointer
from tether.messages import ToolCall, ToolResultMessage, UserMessage
from tether.models import FunctionModel, ModelRequest, ScriptedModel
from tether.models.scripted import Turn

from .conftest import Crash, postgres_url


def db(tmp_path: Path) -> str:
    return f"sqlite:///{tmp_path}/runs.db"


def test_a_thread_continues_its_conversation_files_and_todos(store_url: str) -> None:
    model = ScriptedModel(
        [
            [ToolCall("write_file", {"file_path": "/notes.md", "content": "tabs"})],
            [ToolCall("write_todos", {"todos": [{"content": "Ask", "status": "pending"}]})],
            "Noted.",
            [ToolCall("read_file", {"file_path": "/notes.md"})],
            "You like tabs.",
        ]
    )
    agent = create_agent(model, checkpointer=store_url)
    first = agent.run("I like tabs.", thread_id="chat-1")
    assert first.thread_id == "chat-1"
    second = agent.run("What do I like?", thread_id="chat-1")

    assert second.output == "You like tabs."
    assert second.messages[: len(first.messages)] == first.messages
    assert second.files == {"/notes.md": b"tabs"}  # the StateBackend's files live on
    assert second.todos == first.todos
    assert len(second.new_messages()) == 4
    # A new agent object over the same file sees the same thread.
    again = create_agent(ScriptedModel(["x"]), checkpointer=store_url)
    assert again.history("chat-1") == list(second.messages)


def test_threads_can_be_listed_and_deleted(store_url: str) -> None:
    agent = create_agent(ScriptedModel(["a", "b", "c"]), checkpointer=store_url)
    for thread in ("t1", "t2", "t1"):
        agent.run("hi", thread_id=thread)
    listed = agent.threads()
    assert [t.thread_id for t in listed] == ["t1", "t2"]
    assert agent.delete_thread("t2") is True
    assert agent.delete_thread("t2") is False
    assert [t.thread_id for t in agent.threads()] == ["t1"]
    assert agent.history("t2") == []


def test_thread_misuse_is_a_clear_error(tmp_path: Path) -> None:
    agent = create_agent(ScriptedModel(["a"]), checkpointer=db(tmp_path))
    with pytest.raises(ConfigurationError, match="not both"):
        agent.run("hi", thread_id="t", message_history=[UserMessage.of("x")])
    with pytest.raises(ConfigurationError, match="no thread 'ghost'"):
        agent.resume("ghost")
    agent.run("hi", thread_id="done")
    with pytest.raises(ConfigurationError, match="nothing to resume"):
        agent.resume("done")
    with pytest.raises(ConfigurationError, match="non-empty string"):
        agent.run("hi", thread_id="")
    plain = create_agent(ScriptedModel(["a"]), checkpointer=None)
    with pytest.raises(ConfigurationError, match="need a checkpointer"):
        plain.run("hi", thread_id="t")
    with pytest.raises(ConfigurationError, match="unknown checkpointer URL"):
        create_agent(ScriptedModel(["a"]), checkpointer="redis://x")


def test_runs_without_a_thread_write_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    create_agent(ScriptedModel(["a"])).run("hi")
    assert not (tmp_path / ".tether").exists()


def counting_tool(log: list[str], crash_after: int | None) -> object:
    @tool
    def bump(n: int) -> str:
        """Count one."""
        log.append(f"bump {n}")
        if crash_after is not None and len(log) == crash_after:
            raise Crash
        return f"bumped {n}"

    return bump


def steps(request: ModelRequest) -> Turn:
    done = sum(1 for m in request.messages if isinstance(m, ToolResultMessage))
    if done < 5:
        return [ToolCall("bump", {"n": done}, id=f"call_{done}")]
    return "counted to 5"


def test_a_killed_run_resumes_without_running_a_finished_call_again(store_url: str) -> None:
    log: list[str] = []
    url = store_url
    crashing = create_agent(FunctionModel(steps), tools=[counting_tool(log, 3)], checkpointer=url)
    with pytest.raises(Crash):
        crashing.run("count", thread_id="job")
    assert log == ["bump 0", "bump 1", "bump 2"]  # the third call died before recording

    resumed = create_agent(FunctionModel(steps), tools=[counting_tool(log, None)], checkpointer=url)
    result = resumed.resume("job")
    assert result.output == "counted to 5"
    assert log == ["bump 0", "bump 1", "bump 2", "bump 3", "bump 4"]  # call 2 not run again
    texts = [r.text for m in result.messages if isinstance(m, ToolResultMessage) for r in m.results]
    assert texts[:2] == ["bumped 0", "bumped 1"]
    assert texts[2].startswith("Interrupted: the run stopped while this call was running")
    assert result.steps == 6
    assert result.usage.requests == 6


def test_an_idempotent_call_that_was_cut_short_runs_again(tmp_path: Path) -> None:
    log: list[str] = []
    url = db(tmp_path)

    def make(crash_after: int | None) -> object:
        @tool(idempotent=True)
        def bump(n: int) -> str:
            """Count one."""
            log.append(f"bump {n}")
            if crash_after is not None and len(log) == crash_after:
                raise Crash
            return f"bumped {n}"

        return bump

    with pytest.raises(Crash):
        create_agent(FunctionModel(steps), tools=[make(2)], checkpointer=url).run(
            "go", thread_id="j"
        )
    result = create_agent(FunctionModel(steps), tools=[make(None)], checkpointer=url).resume("j")
    assert log == ["bump 0", "bump 1", "bump 1", "bump 2", "bump 3", "bump 4"]
    assert result.output == "counted to 5"


def test_a_run_killed_during_the_model_call_resumes_from_the_last_step(tmp_path: Path) -> None:
    url = db(tmp_path)
    calls = 0

    def flaky(request: ModelRequest) -> Turn:
        nonlocal calls
        calls += 1
        if calls == 3:
            raise Crash
        return steps(request)

    log: list[str] = []
    with pytest.raises(Crash):
        create_agent(FunctionModel(flaky), tools=[counting_tool(log, None)], checkpointer=url).run(
            "go", thread_id="m"
        )
    result = create_agent(
        FunctionModel(steps), tools=[counting_tool(log, None)], checkpointer=url
    ).resume("m")
    assert log == [f"bump {n}" for n in range(5)]
    assert result.output == "counted to 5"


async def test_two_hundred_runs_share_one_database(store_url: str) -> None:
    url = store_url
    agent = create_agent(
        FunctionModel(steps),
        tools=[counting_tool([], None)],
        checkpointer=url,
        limits=Limits(max_steps=20),
    )
    results = await asyncio.gather(*(agent.arun("go", thread_id=f"t{i}") for i in range(200)))
    assert all(r.output == "counted to 5" for r in results)
    checkpointer = open_checkpointer(url)
    for i in (0, 99, 199):
        thread = replay(f"t{i}", await checkpointer.load(f"t{i}"))
        assert thread.stop_reason == "completed"
        assert thread.messages == list(results[i].messages)
    assert len(await checkpointer.threads()) == 200


def test_the_schema_is_versioned_and_a_newer_one_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "runs.db"
    asyncio.run(SqliteCheckpointer(path).append("t", [{"t": "x"}]))
    with sqlite3.connect(path) as raw:
        version = raw.execute("SELECT version FROM tether_schema WHERE component = 'checkpoint'")
        assert version.fetchone() == (SCHEMA_VERSION,)
        assert raw.execute("PRAGMA journal_mode").fetchone() == ("wal",)
        raw.execute("UPDATE tether_schema SET version = version + 1")
    with pytest.raises(StorageError, match="written by a newer tether") as caught:
        asyncio.run(SqliteCheckpointer(path).load("t"))
    assert caught.value.database == str(path)


def test_a_finished_call_beside_one_that_died_is_not_run_again(store_url: str) -> None:
    log: list[str] = []
    url = store_url

    def make(crash_on: str | None) -> object:
        @tool
        async def step(name: str, wait: float) -> str:
            """Do one named step."""
            await asyncio.sleep(wait)
            log.append(name)
            if name == crash_on:
                raise Crash
            return f"{name} done"

        return step

    def turn(request: ModelRequest) -> Turn:
        if not any(isinstance(m, ToolResultMessage) for m in request.messages):
            return [
                ToolCall("step", {"name": "fast", "wait": 0}, id="a"),
                ToolCall("step", {"name": "slow", "wait": 0.05}, id="b"),
            ]
        return "both handled"

    with pytest.raises(Crash):
        create_agent(FunctionModel(turn), tools=[make("slow")], checkpointer=url).run(
            "go", thread_id="p"
        )
    result = create_agent(FunctionModel(turn), tools=[make(None)], checkpointer=url).resume("p")
    assert log == ["fast", "slow"]
    (answers,) = [m for m in result.messages if isinstance(m, ToolResultMessage)]
    assert answers.results[0].text == "fast done"
    assert answers.results[1].text.startswith("Interrupted")
    assert result.output == "both handled"


MANY = """
import asyncio, sys
from tether import create_agent, tool
from tether.messages import ToolCall, ToolResultMessage
from tether.models import FunctionModel

@tool
async def bump(n: int) -> str:
    "Count one."
    return f"bumped {n}"

def step(request):
    done = sum(1 for m in request.messages if isinstance(m, ToolResultMessage))
    return [ToolCall("bump", {"n": done})] if done < 5 else "counted to 5"

async def main():
    agent = create_agent(FunctionModel(step), tools=[bump], checkpointer=sys.argv[1])
    runs = [agent.arun("go", thread_id=f"p{sys.argv[2]}-{i}") for i in range(25)]
    results = await asyncio.gather(*runs)
    assert all(r.output == "counted to 5" for r in results)

asyncio.run(main())
"""


def test_several_processes_write_one_sqlite_file_at_once(tmp_path: Path) -> None:
    import subprocess
    import sys

    script = tmp_path / "many.py"
    script.write_text(MANY)
    url = db(tmp_path)
    workers = [
        subprocess.Popen([sys.executable, str(script), url, str(n)], stderr=subprocess.PIPE)
        for n in range(4)
    ]
    for worker in workers:
        _, err = worker.communicate(timeout=120)
        assert worker.returncode == 0, err.decode()
    agent = create_agent(ScriptedModel(["x"]), checkpointer=url)
    threads = agent.threads()
    assert len(threads) == 100
    assert all(len(agent.history(t.thread_id)) == 12 for t in threads[:10])


def test_sync_runs_on_postgres_do_not_keep_a_connection_each() -> None:
    import psycopg

    url = postgres_url()
    agent = create_agent(FunctionModel(lambda request: "ok"), checkpointer=url)
    with psycopg.connect(url, autocommit=True) as db:
        before = db.execute("SELECT count(*) FROM pg_stat_activity").fetchone()
        # Each run() has an event loop of its own, and so a connection of its own.
        for i in range(30):
            agent.run("hi", thread_id=f"sync-{i}")
        after = db.execute("SELECT count(*) FROM pg_stat_activity").fetchone()
    assert before is not None
    assert after is not None
    assert after[0] - before[0] <= 1  # only the last run's connection stays open


def test_connections_opening_a_new_sqlite_file_at_once_all_succeed(tmp_path: Path) -> None:
    # SQLite refuses the switch to WAL at once, without waiting, while another connection
    # makes it; every opener must wait its turn instead of failing with "database is locked".
    import threading

    from tether._sqlite import SqliteDatabase

    errors: list[Exception] = []
    for round_ in range(80):
        path = tmp_path / f"{round_}.db"
        start = threading.Barrier(8)

        def open_one(path: Path, start: threading.Barrier) -> None:
            database = SqliteDatabase(path, "test", ["CREATE TABLE IF NOT EXISTS t (a)"])
            start.wait()
            try:
                asyncio.run(database.run(lambda db: db.execute("SELECT 1").fetchall()))
            except Exception as error:
                errors.append(error)
            finally:
                database.close()

        openers = [threading.Thread(target=open_one, args=(path, start)) for _ in range(8)]
        for opener in openers:
            opener.start()
        for opener in openers:
            opener.join()
    assert errors == []


def test_an_abandoned_run_keeps_its_results_and_lets_the_next_run_start(tmp_path: Path) -> None:
    log: list[str] = []
    url = db(tmp_path)
    with pytest.raises(Crash):
        create_agent(FunctionModel(steps), tools=[counting_tool(log, 3)], checkpointer=url).run(
            "count", thread_id="job", metadata={"model": "test", "limits": [1, 2]}
        )

    agent = create_agent(ScriptedModel(["Fresh start."]), checkpointer=url)
    with pytest.raises(ConfigurationError, match="abandon"):
        agent.run("something else", thread_id="job")
    assert agent.abandon("job") is True
    assert agent.abandon("job") is False  # nothing left to end
    result = agent.run("something else", thread_id="job")
    assert result.output == "Fresh start."
    assert log == ["bump 0", "bump 1", "bump 2"]  # nothing ran again
    answered = [
        r.text for m in result.messages if isinstance(m, ToolResultMessage) for r in m.results
    ]
    assert answered[:2] == ["bumped 0", "bumped 1"]
    assert answered[2].startswith("Abandoned: the run was stopped while this call was running")

    thread = asyncio.run(read(url, "job"))
    assert thread.metadata == {"model": "test", "limits": [1, 2]}  # the later run gave none
    assert thread.stop_reason == "completed"
    assert thread.total_usage.requests == 4  # three model calls before the crash, one after
    assert thread.usage.requests == 1


def test_an_abandoned_run_leaves_no_call_waiting(tmp_path: Path) -> None:
    url = db(tmp_path)
    gated = ToolCall("write_file", {"file_path": "/a.md", "content": "A"}, id="w1")
    agent = create_agent(
        ScriptedModel([[gated]]), checkpointer=url, interrupt_on={"write_file": True}
    )
    assert agent.run("Write.", thread_id="t").stop_reason == "interrupted"
    assert agent.abandon("t") is True
    thread = asyncio.run(read(url, "t"))
    assert thread.stop_reason == "cancelled"
    assert thread.requests == ()  # before, the abandoned calls still showed as waiting


def test_metadata_must_be_json_and_needs_a_thread(tmp_path: Path) -> None:
    agent = create_agent(ScriptedModel(["a"]), checkpointer=db(tmp_path))
    with pytest.raises(ConfigurationError, match="thread_id"):
        agent.run("hi", metadata={"a": 1})
    with pytest.raises(ConfigurationError, match="JSON"):
        agent.run("hi", thread_id="t", metadata={"a": object()})
    with pytest.raises(ConfigurationError, match="mapping"):
        agent.run("hi", thread_id="t", metadata=["a"])  # type: ignore[arg-type]


async def read(url: str, thread_id: str) -> Thread:
    checkpointer = open_checkpointer(url)
    try:
        return await read_thread(checkpointer, thread_id)
    finally:
        await checkpointer.close()


def test_a_run_that_ended_in_an_error_is_resumed_from_its_last_step(tmp_path: Path) -> None:
    log: list[str] = []
    url = db(tmp_path)
    outage = True

    def down_once(request: ModelRequest) -> Turn:
        nonlocal outage
        done = sum(1 for m in request.messages if isinstance(m, ToolResultMessage))
        if done == 2 and outage:
            outage = False
            raise ModelHTTPError("the provider is overloaded", status_code=529)
        return steps(request)

    agent = create_agent(
        FunctionModel(down_once), tools=[counting_tool(log, None)], checkpointer=url
    )
    with pytest.raises(ModelHTTPError):
        agent.run("count", thread_id="flaky")
    assert log == ["bump 0", "bump 1"]
    result = agent.resume("flaky")
    assert result.output == "counted to 5"
    assert log == [f"bump {n}" for n in range(5)]  # nothing ran twice
    thread = asyncio.run(read(url, "flaky"))
    assert thread.total_usage.requests == result.usage.requests == 6  # counted once
    with pytest.raises(ConfigurationError, match="nothing to resume"):
        agent.resume("flaky")
