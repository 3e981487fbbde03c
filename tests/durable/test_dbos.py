"""Durable runs on DBOS: worker processes on the test Postgres, killed and restarted."""

from __future__ import annotations

import concurrent.futures
import importlib
import os
import signal
import subprocess
import sys
import time
import uuid
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

import psycopg
import pytest

from tests.conftest import postgres_url
from tether import create_agent
from tether.approval import Approve
from tether.durable.dbos import DurableAgent, _Client, status_of_thread
from tether.errors import ConfigurationError
from tether.messages import ToolResultMessage
from tether.models.scripted import ScriptedModel

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def apps() -> Iterator[ModuleType]:
    """tests/durable/apps.py on a DBOS schema of its own, with an empty shared log."""
    url = postgres_url()
    schema = f"dbos_test_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(url, autocommit=True) as db:
        db.execute("DROP TABLE IF EXISTS durable_log, durable_runs")
        db.execute(
            "CREATE TABLE durable_log (key TEXT PRIMARY KEY, thread TEXT NOT NULL, step INT)"
        )
        db.execute("CREATE TABLE durable_runs (key TEXT NOT NULL, pid INT NOT NULL)")
    saved = {k: os.environ.get(k) for k in ("TETHER_DATABASE_URL", "TETHER_TEST_SCHEMA")}
    os.environ.update(TETHER_DATABASE_URL=url, TETHER_TEST_SCHEMA=schema)
    try:
        yield importlib.import_module("tests.durable.apps")
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
        with psycopg.connect(url, autocommit=True) as db:
            db.execute(f"DROP SCHEMA IF EXISTS {schema} CASCADE")


class Workers:
    """`tether worker` processes serving tests/durable/apps.py."""

    def __init__(self, apps: ModuleType) -> None:
        self.apps = apps
        self.running: dict[str, subprocess.Popen[bytes]] = {}

    def start(self, executor_id: str) -> subprocess.Popen[bytes]:
        env = dict(os.environ, PYTHONPATH=str(ROOT))
        command = [sys.executable, "-m", "tether.cli", "-C", str(ROOT), "worker"]
        command += ["--app", "tests.durable.apps", "--executor-id", executor_id]
        command += ["--schema", self.apps.SCHEMA]
        process = subprocess.Popen(command, env=env, stderr=subprocess.PIPE)
        self.running[executor_id] = process
        return process

    def kill(self, executor_id: str) -> int:
        process = self.running.pop(executor_id)
        process.send_signal(signal.SIGKILL)
        process.wait()
        return process.pid

    def stop_all(self) -> None:
        for process in self.running.values():
            process.terminate()
        for process in self.running.values():
            try:
                process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
            stderr = process.stderr.read().decode() if process.stderr else ""
            assert "Traceback" not in stderr, stderr
        self.running.clear()


@pytest.fixture
def workers(apps: ModuleType) -> Iterator[Workers]:
    started = Workers(apps)
    try:
        yield started
    finally:
        started.stop_all()


def query(apps: ModuleType, sql: str, *args: object) -> list[tuple[object, ...]]:
    with psycopg.connect(apps.DATABASE, autocommit=True) as db:
        return db.execute(sql, args).fetchall()


def wait_for(condition: object, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while not condition():  # type: ignore[operator]
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.05)


def test_a_hundred_runs_on_three_workers_survive_a_kill_9(
    apps: ModuleType, workers: Workers
) -> None:
    for executor_id in ("w1", "w2", "w3"):
        workers.start(executor_id)
    victim = workers.running["w2"].pid
    handles = [apps.jobs.enqueue(f"job {i}", thread_id=f"job-{i}") for i in range(100)]

    # Kill w2 once it has runs under way, then bring it back under the same name.
    wait_for(
        lambda: query(apps, "SELECT count(*) FROM durable_runs WHERE pid = %s", victim)[0][0] >= 6
    )
    workers.kill("w2")
    done_at_kill = query(apps, "SELECT count(*) FROM durable_log")[0][0]
    workers.start("w2")

    results = [apps.jobs.handle(f"job-{i}").result(timeout=120) for i in range(100)]

    assert done_at_kill < 300  # the kill came in the middle
    assert [r.stop_reason for r in results] == ["completed"] * 100
    assert [r.output for r in results] == [f"done: job {i}" for i in range(100)]
    assert [h.status().state for h in handles] == ["finished"] * 100
    for result in results:  # each thread's history holds three results, none interrupted
        texts = [
            r.text for m in result.messages if isinstance(m, ToolResultMessage) for r in m.results
        ]
        assert texts == ["logged step 0", "logged step 1", "logged step 2"]
    # Every side effect happened exactly once: one log row per thread and step.
    rows = query(apps, "SELECT thread, step FROM durable_log")
    assert Counter(rows) == Counter((f"job-{i}", step) for i in range(100) for step in range(3))
    # The tool body ran again only for calls w2 was running when it died (at most its
    # worker_concurrency of 4); a call that had finished never ran twice.
    runs = query(apps, "SELECT key, pid FROM durable_runs")
    repeated = [key for key, count in Counter(k for k, _ in runs).items() if count > 1]
    assert len(repeated) <= 4
    assert all(victim in {pid for k, pid in runs if k == key} for key in repeated)
    # Some runs w2 had begun were finished by another process.
    threads_by_pid: dict[object, set[str]] = {}
    for key, pid in runs:
        threads_by_pid.setdefault(pid, set()).add(str(key).split(":")[0])
    moved = threads_by_pid[victim] & set().union(
        *(threads for pid, threads in threads_by_pid.items() if pid != victim)
    )
    assert moved


def test_a_waiting_run_survives_its_worker_and_resumes_on_decisions(
    apps: ModuleType, workers: Workers
) -> None:
    workers.start("g1")
    handle = apps.gated.enqueue("gated task", thread_id="gate-1")

    first = handle.result(timeout=60)
    assert first.stop_reason == "interrupted"
    assert [r.tool for r in first.interrupts] == ["append"]
    assert first.interrupts[0].args == {"step": 0}
    assert query(apps, "SELECT count(*) FROM durable_runs WHERE key LIKE 'gate-1:%%'")[0][0] == 0

    workers.kill("g1")
    # Sent twice at once (a double click): one is recorded, the other is told so.
    with concurrent.futures.ThreadPoolExecutor(2) as pool:
        twice = [pool.submit(handle.decide, [Approve()]) for _ in range(2)]
        outcomes = sorted(type(f.exception()).__name__ for f in twice)
    assert outcomes == ["AlreadyDecidedError", "NoneType"]  # no worker runs: it waits
    workers.start("g1")
    second = handle.wait(timeout=60)
    assert second.state == "waiting"
    assert second.interrupts[0].args == {"step": 1}

    # Any process can decide: here the command line, which knows only the thread.
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    command = [sys.executable, "-m", "tether.cli", "decide", "gate-1", "--reject", "not this one"]
    decided = subprocess.run(
        [*command, "--schema", apps.SCHEMA], env=env, capture_output=True, text=True, check=False
    )
    assert decided.returncode == 0, decided.stderr
    waiting_on = lambda: [r.args for r in status_of_thread("gate-1", schema=apps.SCHEMA).interrupts]  # noqa: E731
    wait_for(lambda: waiting_on() == [{"step": 2}])
    apps.gated.handle("gate-1").decide([Approve()])  # a handle found by thread id

    final = handle.result(timeout=60)
    assert final.stop_reason == "completed"
    assert final.output == "done: gated task"
    results = [r for m in final.messages if isinstance(m, ToolResultMessage) for r in m.results]
    assert [r.is_error for r in results] == [False, True, False]
    assert results[0].text == "logged step 0"
    assert results[2].text == "logged step 2"
    assert "not this one" in results[1].text
    logged = query(apps, "SELECT step FROM durable_log WHERE thread = 'gate-1' ORDER BY step")
    assert logged == [(0,), (2,)]
    ran = query(apps, "SELECT count(*) FROM durable_runs WHERE key LIKE 'gate-1:%%'")
    assert ran == [(2,)]


def test_a_subagents_gated_call_waits_and_resumes_on_a_worker(
    apps: ModuleType, workers: Workers
) -> None:
    workers.start("s1")
    handle = apps.delegated.enqueue("go", thread_id="deleg-1")
    first = handle.result(timeout=60)
    assert first.stop_reason == "interrupted"
    (request,) = first.interrupts
    assert (request.tool, request.path) == ("append", ("main", "task:general-purpose#1"))
    workers.kill("s1")
    handle.decide([Approve()])
    workers.start("s1")
    final = handle.result(timeout=60)
    assert final.stop_reason == "completed", handle.status().error
    assert final.output == "delegated: sub: logged step 0"
    ran = query(apps, "SELECT count(*) FROM durable_runs WHERE key LIKE 'deleg-1:%%'")
    assert ran == [(1,)]


def test_a_durable_agent_is_served_watched_and_approved_over_http(
    apps: ModuleType, workers: Workers
) -> None:
    """`tether.serve.app` in front of the workers: the run is queued for them, its steps
    read back from the thread as they are recorded, and its approval sent to them."""
    import httpx

    from tests.serve.helpers import AUTH, TOKEN, approve, events, run_input, served
    from tether.serve import app

    workers.start("w-http")
    application = app({"delegated": apps.delegated, "gated": apps.gated}, token=TOKEN)
    with served(application) as url, httpx.Client(base_url=url, headers=AUTH, timeout=60) as c:
        first = events(c.post("/api/agents/delegated", json=run_input("web-1", "Go.")).text)
        kinds = [e["type"] for e in first]
        assert kinds[0] == "RUN_STARTED"
        assert "SUBAGENT_STARTED" in kinds
        task = next(e for e in first if e["type"] == "TOOL_CALL_START")
        assert task["toolCallName"] == "task"
        (interrupt,) = first[-1]["outcome"]["interrupts"]
        assert interrupt["subagentRunId"] == "task:general-purpose#1"
        assert interrupt["metadata"]["tool"] == "append"
        assert (
            c.get("/api/agents/delegated/threads/web-1").json()["interrupts"][0]["id"]
            == (interrupt["id"])
        )

        answer = run_input("web-1", resume=approve(interrupt["id"]))
        second = events(c.post("/api/agents/delegated", json=answer).text)
        assert second[-1]["type"] == "RUN_FINISHED"
        assert second[-1]["result"] == "delegated: sub: logged step 0"
        results = [e for e in second if e["type"] == "TOOL_CALL_RESULT"]
        assert [(r["content"], r.get("subagentRunId")) for r in results] == [
            ("logged step 0", "task:general-purpose#1"),  # the subagent's, then its task's
            ("sub: logged step 0", None),
        ]
        assert c.post("/api/agents/delegated", json=answer).status_code == 409
        detail = c.get("/api/agents/delegated/threads/web-1").json()
        assert detail["status"] == "completed"

        # a run waiting on a worker is stopped from the server: cancelled, nothing waits
        waiting = events(c.post("/api/agents/gated", json=run_input("web-2", "Stop me.")).text)
        assert waiting[-1]["outcome"]["type"] == "interrupt"
        assert c.post("/api/agents/gated/threads/web-2/stop").json() == {"stopped": "web-2"}
        stopped = c.get("/api/agents/gated/threads/web-2").json()
        assert (stopped["status"], stopped["interrupts"]) == ("cancelled", [])
        assert status_of_thread("web-2", schema=apps.SCHEMA).state == "cancelled"
    ran = query(apps, "SELECT count(*) FROM durable_runs WHERE key LIKE 'web-%%'")
    assert ran == [(1,)]


def test_misuse_is_a_clear_error(apps: ModuleType, monkeypatch: pytest.MonkeyPatch) -> None:
    agent = create_agent(ScriptedModel(["ok"]))
    with pytest.raises(ConfigurationError, match="Postgres URL"):
        DurableAgent(agent, name="lite", database="sqlite:///runs.db")
    with pytest.raises(ConfigurationError, match="exists in this process"):
        DurableAgent(agent, name="jobs", schema=apps.SCHEMA)
    with pytest.raises(ConfigurationError, match="worker_concurrency must be"):
        DurableAgent(agent, name="bad", worker_concurrency=0)
    with pytest.raises(ConfigurationError, match="non-empty string"):
        apps.jobs.enqueue("  ")
    with pytest.raises(ConfigurationError, match="no durable run of thread"):
        apps.jobs.handle("never-enqueued")
    # No worker serves the queue here, so the run stays queued.
    queued = apps.jobs.enqueue("wait", thread_id="busy")
    try:
        assert queued.status().state == "queued"
        with pytest.raises(ConfigurationError, match="has a run queued or running"):
            apps.jobs.enqueue("again", thread_id="busy")
        with pytest.raises(ConfigurationError, match="is queued, not waiting"):
            queued.decide([Approve()])
        with pytest.raises(TimeoutError, match="still queued"):
            queued.wait(timeout=0.3)
    finally:
        _Client(None, apps.SCHEMA).client.cancel_workflow(queued.workflow_id)
    assert queued.status().state == "cancelled"
    monkeypatch.delenv("TETHER_DATABASE_URL")
    monkeypatch.delenv("DBOS_SYSTEM_DATABASE_URL", raising=False)
    with pytest.raises(ConfigurationError, match="TETHER_DATABASE_URL"):
        DurableAgent(agent, name="nowhere")


def test_the_commands_explain_what_is_wrong(apps: ModuleType) -> None:
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    base = [sys.executable, "-m", "tether.cli", "-C", str(ROOT)]
    unknown = subprocess.run(
        [*base, "status", "no-such-thread", "--schema", apps.SCHEMA],
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    assert unknown.returncode == 2
    assert "no durable run of thread 'no-such-thread'" in unknown.stderr
    wrong_queue = subprocess.run(
        [*base, "worker", "--app", "tests.durable.apps", "--queue", "nope"],
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    assert wrong_queue.returncode == 2
    assert "no durable agent serves the queue(s) nope; the apps define: delegated, gated, jobs" in (
        wrong_queue.stderr
    )
