"""The SQLite worker thread, its background checkpoints and close()."""

from __future__ import annotations

import asyncio
import multiprocessing
import sqlite3
import threading
import time
from pathlib import Path

import pytest

from tether._sqlite import Worker
from tether.checkpoint.sqlite import SqliteCheckpointer


async def test_a_thread_that_failed_to_start_does_not_hang_every_later_call(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """`_submit` sets `_wake` before `Thread.start()`; when start fails (RuntimeError:
    can't start new thread, under a thread limit) the job stays queued and `_wake` stays
    set, so no later submit ever starts a thread: every call after waits forever (and the
    failed call's work is left in the queue)."""
    worker = Worker("test-start-fails")
    real_start = threading.Thread.start
    failed = [False]

    def start_once_failing(self: threading.Thread) -> None:
        if self.name == "test-start-fails" and not failed[0]:
            failed[0] = True
            raise RuntimeError("can't start new thread")
        real_start(self)

    monkeypatch.setattr(threading.Thread, "start", start_once_failing)
    with pytest.raises(RuntimeError):
        await worker.call(lambda: 1)
    # the limit is gone: the next call must work
    assert await asyncio.wait_for(worker.call(lambda: 2), 5) == 2


def _child_load(path: str, queue: multiprocessing.Queue) -> None:  # type: ignore[type-arg]
    checkpointer = _shared[0]
    try:
        records = asyncio.run(asyncio.wait_for(checkpointer.load("t"), 5))
        queue.put(("ok", len(records)))
    except BaseException as error:
        queue.put(("failed", repr(error)))


_shared: list[SqliteCheckpointer] = []


async def test_close_does_not_block_the_event_loop(tmp_path: Path) -> None:
    """`SqliteCheckpointer.close()` is `async` but calls `SqliteDatabase.close()` on the
    event loop, which takes the database's lock: while the worker holds it (a write
    waiting up to busy_timeout for another process), the whole loop stops."""
    checkpointer = SqliteCheckpointer(tmp_path / "runs.db", busy_timeout_seconds=3)
    await checkpointer.append("t", [{"t": "run"}])
    other = sqlite3.connect(tmp_path / "runs.db", isolation_level=None)
    other.execute("BEGIN IMMEDIATE")
    pending = asyncio.ensure_future(checkpointer.append("t", [{"t": "sync"}]))
    await asyncio.sleep(0.2)
    lags: list[float] = []

    async def ticker() -> None:
        while True:
            t = time.monotonic()
            await asyncio.sleep(0.01)
            lags.append(time.monotonic() - t)

    tick = asyncio.ensure_future(ticker())
    await asyncio.sleep(0.05)
    closing = asyncio.ensure_future(checkpointer.close())
    await asyncio.sleep(0.1)
    other.execute("ROLLBACK")
    await asyncio.gather(pending, closing, return_exceptions=True)
    tick.cancel()
    assert max(lags) < 0.5, f"the event loop stalled {max(lags):.2f} s in close()"


async def test_background_checkpoints_follow_the_database_after_a_chdir(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """wal_autocheckpoint is 0, so only `_checkpoint` moves the WAL into the file; it
    reopens the database by `Path(path).absolute()`, resolved against the cwd of *now*.
    With the default relative URL (sqlite:///.tether/runs.db) and a chdir (a tool, a
    server handling several projects), every checkpoint misses (or hits another
    project's runs.db) and the WAL grows without bound."""
    a, b = tmp_path / "a", tmp_path / "b"
    (a / ".tether").mkdir(parents=True)
    (b / ".tether").mkdir(parents=True)
    monkeypatch.chdir(a)
    checkpointer = SqliteCheckpointer(".tether/runs.db")
    await checkpointer.append("t", [{"t": "run"}])
    monkeypatch.chdir(b)
    body = {"t": "sync", "text": "x" * 4000}
    for _ in range(2000):
        await checkpointer.append("t", [body])
        thread = checkpointer.db._checkpointing
        if thread is not None:
            thread.join(10)
    wal = a / ".tether" / "runs.db-wal"
    # about SQLite's default bound of 1,000 pages, plus a step: 8 MB is generous
    assert wal.stat().st_size < 8_000_000, f"WAL at {wal.stat().st_size:,} bytes"
    await checkpointer.close()


async def test_the_wal_stays_bounded_with_big_records(tmp_path: Path) -> None:
    """Checkpoints come every 256 changed rows whatever their size: before, SQLite
    checkpointed after 1,000 pages (4 MB). A step's records carry the files it changed
    (base64, up to the file size limit), so 255 steps of 1 MB each leave a WAL of
    ~340 MB that is never truncated afterwards (no journal_size_limit)."""
    checkpointer = SqliteCheckpointer(tmp_path / "runs.db")
    body = {"t": "sync", "put": {"/big.bin": ["A" * 1_000_000, 0.0]}}
    for _ in range(120):
        await checkpointer.append("t", [body])
    # How far the WAL grows meanwhile depends on how far the background copy lags on a
    # busy machine; once it is done, the next write starts the WAL over, cut back.
    checkpointer.db.wait_for_checkpoints()
    await checkpointer.append("t", [{"t": "sync"}])
    wal = tmp_path / "runs.db-wal"
    assert wal.stat().st_size < 32_000_000, f"WAL at {wal.stat().st_size:,} bytes after 120 MB"
    await checkpointer.close()
