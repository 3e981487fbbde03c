"""A durable run waiting on two calls is decided one call at a time, from any process:
the first decision leaves it waiting on the other (no worker goes on, nothing runs),
the same decision sent again is refused, and the last one sends the run on, once."""

from __future__ import annotations

import importlib
import json
import os
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

import psycopg
import pytest

from tests.conftest import postgres_url
from tether import AlreadyDecidedError, Approve, Reject
from tether.durable.dbos import status_of_thread

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def pairs() -> Iterator[ModuleType]:
    url = postgres_url()
    schema = f"dbos_pairs_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(url, autocommit=True) as db:
        db.execute("DROP TABLE IF EXISTS durable_marks")
        db.execute("CREATE TABLE durable_marks (thread TEXT NOT NULL, name TEXT NOT NULL)")
    saved = {k: os.environ.get(k) for k in ("TETHER_DATABASE_URL", "TETHER_TEST_SCHEMA")}
    os.environ.update(TETHER_DATABASE_URL=url, TETHER_TEST_SCHEMA=schema)
    try:
        yield importlib.import_module("tests.durable.pairs")
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
        with psycopg.connect(url, autocommit=True) as db:
            db.execute(f"DROP SCHEMA IF EXISTS {schema} CASCADE")
            db.execute("DROP TABLE IF EXISTS durable_marks")


@pytest.fixture
def worker(pairs: ModuleType) -> Iterator[subprocess.Popen[bytes]]:
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    command = [sys.executable, "-m", "tether.cli", "-C", str(ROOT), "worker"]
    command += ["--app", "tests.durable.pairs", "--schema", pairs.SCHEMA]
    process = subprocess.Popen(command, env=env, stderr=subprocess.PIPE)
    try:
        yield process
    finally:
        process.terminate()
        try:
            process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
        stderr = process.stderr.read().decode() if process.stderr else ""
        assert "Traceback" not in stderr, stderr


def marks(pairs: ModuleType, thread: str) -> list[str]:
    with psycopg.connect(pairs.DATABASE, autocommit=True) as db:
        rows = db.execute("SELECT name FROM durable_marks WHERE thread = %s", (thread,))
        return sorted(str(name) for (name,) in rows.fetchall())


def test_two_waiting_calls_are_decided_one_at_a_time(
    pairs: ModuleType, worker: subprocess.Popen[bytes]
) -> None:
    handle = pairs.pairs.enqueue("Mark both.", thread_id="pair-1")
    first = handle.result(timeout=60)
    assert first.stop_reason == "interrupted"
    a, b = (r.call_id for r in first.interrupts)

    # The command line decides one of them; the run still waits, on the other.
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    command = [sys.executable, "-m", "tether.cli", "decide", "pair-1", "--decisions", "-"]
    decided = subprocess.run(
        [*command, "--schema", pairs.SCHEMA],
        env=env,
        input=json.dumps({a: {"kind": "approve"}}),
        capture_output=True,
        text=True,
        check=False,
    )
    assert decided.returncode == 3, decided.stderr  # as for a run that waits
    assert "decided 1 of 2 calls" in decided.stdout
    status = status_of_thread("pair-1", schema=pairs.SCHEMA)
    assert status.state == "waiting"
    assert [r.call_id for r in status.interrupts] == [b]
    with pytest.raises(AlreadyDecidedError):
        handle.decide({a: Approve()})
    assert marks(pairs, "pair-1") == []  # the turn runs once every call is decided

    handle.decide({b: Reject("not b")})
    final = handle.result(timeout=60)
    assert final.stop_reason == "completed"
    assert final.output == "marked what was approved"
    assert marks(pairs, "pair-1") == ["a"]
    with pytest.raises(AlreadyDecidedError):
        handle.decide({b: Approve()})
