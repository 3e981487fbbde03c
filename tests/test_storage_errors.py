"""Every way a database can be unusable gets its own clear `StorageError`, naming the
database and what to do, and tether changes nothing in it. The `tether` command says
it in one line, with exit code 2."""

from __future__ import annotations

import asyncio
import hashlib
import json
import os
import sqlite3
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from tests.cli.test_cli import environment, scripted, tether
from tether import StorageError, create_agent
from tether.checkpoint import open_checkpointer
from tether.checkpoint.lease import Holder
from tether.checkpoint.sqlite import SqliteCheckpointer
from tether.models import ScriptedModel
from tether.stores import SqliteStore


def _threads(path: Path) -> None:
    asyncio.run(SqliteCheckpointer(path).threads())


def _digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _real_database(path: Path) -> None:
    checkpointer = SqliteCheckpointer(path)
    for n in range(200):
        record = {"t": "end", "stop": "completed", "output": "x" * 400}
        asyncio.run(checkpointer.append(f"t{n}", [record]))
    asyncio.run(checkpointer.close())


def test_a_directory_in_place_of_the_database(tmp_path: Path) -> None:
    (tmp_path / "runs.db").mkdir()
    with pytest.raises(StorageError, match=r"runs\.db is a directory, not a database") as e:
        _threads(tmp_path / "runs.db")
    assert e.value.database == str(tmp_path / "runs.db")


@pytest.mark.parametrize("damage", ["junk", "half", "header"])
def test_a_damaged_database_is_named_and_left_as_it_was(tmp_path: Path, damage: str) -> None:
    path = tmp_path / "runs.db"
    if damage == "junk":
        path.write_bytes(os.urandom(8192))
    else:
        _real_database(path)
        data = path.read_bytes()
        path.write_bytes(data[: len(data) // 2] if damage == "half" else data[:50])
    before = _digest(path)
    checkpointer = SqliteCheckpointer(path)
    for attempt in (checkpointer.threads(), checkpointer.append("t", [{"t": "x"}])):
        with pytest.raises(StorageError, match="is damaged or is not a SQLite database"):
            asyncio.run(attempt)
    assert _digest(path) == before


def test_another_programs_database_is_not_written_into(tmp_path: Path) -> None:
    path = tmp_path / "app.db"
    with sqlite3.connect(path) as db:
        db.execute("CREATE TABLE users (name TEXT)")
    before = _digest(path)
    with pytest.raises(StorageError, match=r"holds another program's tables \(users\)"):
        asyncio.run(SqliteCheckpointer(path).append("t", [{"t": "x"}]))
    with pytest.raises(StorageError, match="another program's tables"):
        asyncio.run(SqliteStore(path).put(("a",), "k", b"v"))
    assert _digest(path) == before


def test_a_path_that_cannot_be_created(tmp_path: Path) -> None:
    (tmp_path / "file").write_text("not a directory")
    with pytest.raises(StorageError, match=r"file/runs\.db cannot be created"):
        _threads(tmp_path / "file" / "runs.db")


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to run a check as nobody")
def test_a_database_this_process_may_not_write() -> None:
    with tempfile.TemporaryDirectory(dir="/tmp") as where:
        folder = Path(where)
        folder.chmod(0o755)  # nobody may read here, not write
        _real_database(folder / "runs.db")
        _check_as_nobody(folder / "runs.db")
        _check_as_nobody(folder / "new" / "runs.db")


def _check_as_nobody(path: Path) -> None:
    script = (
        "import asyncio, sys\n"
        "from tether import StorageError\n"
        "from tether.checkpoint.sqlite import SqliteCheckpointer\n"
        "try:\n"
        "    asyncio.run(SqliteCheckpointer(sys.argv[1]).append('t', [{'t': 'x'}]))\n"
        "except StorageError as e:\n"
        "    print(e)\n"
    )
    nobody = ["--reuid=65534", "--regid=65534", "--clear-groups"]
    ran = subprocess.run(
        ["setpriv", *nobody, "--", sys.executable, "-c", script, str(path)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert ran.returncode == 0, ran.stderr
    assert str(path) in ran.stdout
    print(ran.stdout)
    assert "permission" in ran.stdout or "read-only" in ran.stdout


def test_a_record_that_is_not_json_names_the_thread_and_record(tmp_path: Path) -> None:
    path = tmp_path / "runs.db"
    _real_database(path)
    with sqlite3.connect(path) as db:
        db.execute("UPDATE tether_records SET body = '{broken' WHERE thread_id = 't7'")
    agent = create_agent(ScriptedModel(["x"]), checkpointer=f"sqlite:///{path}")
    with pytest.raises(StorageError, match=r"record 1 of thread 't7' in .*runs\.db is damaged"):
        agent.history("t7")
    with pytest.raises(StorageError, match="record 1 of thread 't7'"):
        agent.run("go", thread_id="t7")
    assert agent.history("t8") == []  # the other threads still read


def test_a_record_from_a_newer_tether_is_refused_not_skipped(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path}/runs.db"
    agent = create_agent(ScriptedModel(["x"]), checkpointer=url)
    agent.run("go", thread_id="t")
    asyncio.run(open_checkpointer(url).append("t", [{"t": "branch", "from": 3}]))
    with pytest.raises(StorageError, match="a newer tether wrote it; upgrade tether"):
        agent.run("again", thread_id="t")


def test_an_unreachable_postgres_is_named_without_its_password() -> None:
    url = "postgresql://alice:s3cret-pw@127.0.0.1:1/app"
    checkpointer = open_checkpointer(url)
    with pytest.raises(StorageError, match="cannot be reached") as caught:
        asyncio.run(checkpointer.threads())
    assert caught.value.database == "postgresql://alice@127.0.0.1:1/app"
    assert "s3cret" not in str(caught.value)
    assert "s3cret" not in repr(checkpointer)


# -- the command ------------------------------------------------------------------


@pytest.fixture
def project(tmp_path: Path) -> Path:
    root = tmp_path / "project"
    root.mkdir()
    return root


def _one_line(done: subprocess.CompletedProcess[str]) -> str:
    assert done.returncode == 2, done.stderr
    assert "Traceback" not in done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    return lines[0]


def test_the_command_says_a_damaged_database_in_one_line(project: Path) -> None:
    (project / ".tether").mkdir()
    (project / ".tether" / "runs.db").write_bytes(os.urandom(4096))
    model = scripted(project, "done.json", ["Done."])
    for args in (["threads"], ["show", "t"], ["run", "--model", model, "--no-sandbox", "hi"]):
        line = _one_line(tether(project, *args, env=environment(COLUMNS="1000")))
        assert "runs.db is damaged or is not a SQLite database" in line


def test_the_command_says_a_busy_thread_in_one_line(project: Path) -> None:
    url = f"sqlite:///{project}/.tether/runs.db"
    elsewhere = Holder("t0", "far-host", 77, "far/boot/ns", "1", "run run_far")
    assert asyncio.run(open_checkpointer(url).acquire("T", elsewhere, 600)) is None
    model = scripted(project, "done.json", ["Done."])
    args = ("run", "--thread", "T", "--model", model, "--no-sandbox", "hi")
    line = _one_line(tether(project, *args, env=environment(COLUMNS="1000")))
    assert "thread 'T' is busy: process 77 on far-host (run run_far)" in line


def test_the_command_says_decisions_given_twice_in_one_line(project: Path) -> None:
    turns = [
        [{"tool": "write_file", "args": {"file_path": "/a.md", "content": "A"}}],
        ["Wrote it."],
    ]
    model = scripted(project, "write.json", turns)
    first = tether(project, "run", "--thread", "T", "--model", model, "--no-sandbox", "go")
    assert first.returncode == 3, first.stderr
    approve = ("resume", "T", "--approve", "--model", model, "--no-sandbox")
    assert tether(project, *approve).returncode == 0
    line = _one_line(tether(project, *approve, env=environment(COLUMNS="1000")))
    assert "already decided (write_file" in line
    assert ": approve)" in line
    assert (project / "a.md").read_text() == "A"
    assert json.loads((project.parent / "write.json").read_text()) == turns


def test_postgres_tables_from_a_newer_tether_are_refused_untouched() -> None:
    import psycopg

    from tests.conftest import postgres_url

    url = postgres_url()
    asyncio.run(open_checkpointer(url).append("t", [{"t": "end", "stop": "x", "output": 1}]))
    with psycopg.connect(url, autocommit=True) as db:
        db.execute("UPDATE tether_schema SET version = 99 WHERE component = 'checkpoint'")
    with pytest.raises(StorageError, match="written by a newer tether") as caught:
        asyncio.run(open_checkpointer(url).load("t"))
    assert "tether:tether@" not in str(caught.value)  # named without the password
    with psycopg.connect(url, autocommit=True) as db:
        assert db.execute("SELECT count(*) FROM tether_records").fetchone() == (1,)
        db.execute("UPDATE tether_schema SET version = 2 WHERE component = 'checkpoint'")
