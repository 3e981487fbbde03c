"""One SQLite file shared by the checkpointer and the store: a connection used by one
worker thread per database (under a lock), WAL mode, and versioned migrations per
component."""

from __future__ import annotations

import asyncio
import collections
import contextlib
import os
import select
import sqlite3
import stat
import threading
import time
import weakref
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any, TypeVar

from tether.errors import StorageError

__all__ = ["SqliteDatabase", "Worker", "transaction"]

T = TypeVar("T")


class SqliteDatabase:
    """The database file at `path`, created with its directory on first use.

    `migrations` moves the schema of `component` from version i to i + 1 at index i;
    entries that have shipped are never edited. Several components can share a file.
    """

    def __init__(
        self,
        path: str | Path,
        component: str,
        migrations: Sequence[str],
        *,
        busy_timeout_seconds: float = 30.0,
    ) -> None:
        self.path = str(path)
        self.component = component
        self.migrations = tuple(migrations)
        self.busy_timeout_seconds = busy_timeout_seconds
        self._connection: sqlite3.Connection | None = None
        self._lock = threading.Lock()
        self._worker = Worker(f"tether-sqlite-{component}")
        self._checkpointed = 0  # the connection's total_changes at the last checkpoint
        self._checkpointing: threading.Thread | None = None
        self._checkpoint_due = threading.Event()  # more to copy than the running one saw
        self._absolute = ""  # the file, as it was named when it was opened
        _OPEN.add(self)

    def _forked(self) -> None:
        """In a forked child: the parent's lock may be held and its connection is not
        ours to use (SQLite forbids carrying one across fork); start afresh."""
        self._lock = threading.Lock()
        self._connection = None
        self._checkpointing = None
        self._checkpointed = 0

    async def run(self, work: Callable[[sqlite3.Connection], T]) -> T:
        """`work(connection)` on the database's worker thread, alone on the connection."""

        def locked() -> T:
            with self._lock:
                try:
                    db = self._connect()
                    try:
                        return work(db)
                    finally:
                        self._checkpoint_now_and_then(db)
                except (sqlite3.Error, OSError) as error:
                    raise self._failure(error) from error

        return await self._worker.call(locked)

    def _checkpoint_now_and_then(self, db: sqlite3.Connection) -> None:
        """Copy the WAL into the database file on a thread of its own, every so many
        changed rows. SQLite's own checkpoints run inside the commit that crosses 1,000
        pages, and their two fsyncs (tens of ms on a busy disk) fell on a run's step;
        a checkpoint changes nothing about what is durable, only where it is kept."""
        if self.path == ":memory:":
            return
        rows = db.total_changes - self._checkpointed
        wal = _wal_bytes(self._absolute)
        if wal >= _CHECKPOINT_BYTES * 4:  # writes outran the background: copy it here
            with contextlib.suppress(sqlite3.Error):
                db.execute("PRAGMA wal_checkpoint(PASSIVE)")
            self._checkpointed = db.total_changes
            return
        if rows < _CHECKPOINT_ROWS and wal < _CHECKPOINT_BYTES:
            return
        self._checkpointed = db.total_changes
        self._checkpoint_due.set()
        if self._checkpointing is not None and self._checkpointing.is_alive():
            return  # it goes round once more
        self._checkpointing = threading.Thread(
            target=_checkpoints,
            args=(self._absolute, self._checkpoint_due),
            name="tether-sqlite-checkpoint",
            daemon=True,
        )
        try:
            self._checkpointing.start()
        except RuntimeError:  # no thread to be had: the next write tries again
            self._checkpointing = None

    def wait_for_checkpoints(self) -> None:
        """Block until the WAL copies asked for so far are done (for tests and close)."""
        running = self._checkpointing
        if running is not None:
            running.join()

    def close(self) -> None:
        """Close the connection, after the checkpoint running now (it never waits for a
        lock, so this is bounded). Blocking: call it off the event loop."""
        with self._lock:
            if self._checkpointing is not None:
                self._checkpointing.join()
                self._checkpointing = None
            if self._connection is not None:
                self._connection.close()
                self._connection = None
            self._checkpointed = 0

    def _connect(self) -> sqlite3.Connection:
        if self._connection is not None:
            return self._connection
        if self.path != ":memory:":
            Path(self.path).parent.mkdir(parents=True, exist_ok=True)
            self._absolute = str(Path(self.path).absolute())  # a later chdir moves nothing
        db = sqlite3.connect(
            self.path,
            timeout=self.busy_timeout_seconds,
            isolation_level=None,  # transactions are explicit
            check_same_thread=False,  # used from worker threads, one at a time
        )
        try:
            self._check_foreign(db)
            _wal(db, self.busy_timeout_seconds)
            db.execute("PRAGMA synchronous=NORMAL")  # durable against a killed process
            db.execute("PRAGMA wal_autocheckpoint=0")  # see _checkpoint_now_and_then
            db.execute(f"PRAGMA journal_size_limit={_CHECKPOINT_BYTES * 2}")  # WAL cut back
            with transaction(db):
                self._migrate(db)
        except BaseException:
            db.close()
            raise
        self._connection = db
        return db

    def _check_foreign(self, db: sqlite3.Connection) -> None:
        """Refuse a database that holds another program's tables: tether writes only
        into its own files."""
        tables = [
            name
            for (name,) in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")
            if not name.startswith("sqlite_")
        ]
        if tables and "tether_schema" not in tables:
            shown = ", ".join(sorted(tables)[:5])
            raise StorageError(
                f"{self.path} holds another program's tables ({shown}), not tether's; "
                "tether changed nothing in it. Point tether at another file",
                database=self.path,
            )

    def _failure(self, error: sqlite3.Error | OSError) -> StorageError:
        """What broke, said for a person: the file, the cause, and what to do."""
        path = self.path
        text = str(error)
        try:
            directory = stat.S_ISDIR(os.stat(path).st_mode)
        except OSError:
            directory = False
        if directory:
            why = "is a directory, not a database file; remove it or point tether at a file"
        elif isinstance(error, OSError):
            why = "cannot be created; check its directory and its permissions"
        elif "file is not a database" in text or "malformed" in text:
            why = (
                "is damaged or is not a SQLite database; tether changed nothing in it. "
                "Restore it from a backup, or move it aside to start a new one"
            )
        elif "readonly" in text or "read-only" in text:
            why = "is read-only to this process; give it (and its directory) write permission"
        elif "unable to open" in text:
            why = (
                "cannot be opened: its directory is missing or not writable by this process; "
                "check the path and its permissions"
            )
        elif "locked" in text or "busy" in text:
            why = (
                f"stayed locked by another process for {self.busy_timeout_seconds:g} s; "
                "find the process that holds it (fuser) and let it finish"
            )
        elif "full" in text:
            why = "cannot grow: the disk is full; free some space"
        else:
            why = f"failed: {type(error).__name__}: {text}"
        source = "" if isinstance(error, OSError) else "SQLite: "
        return StorageError(f"the SQLite database {path} {why} ({source}{text})", database=path)

    def _migrate(self, db: sqlite3.Connection) -> None:
        db.execute(
            "CREATE TABLE IF NOT EXISTS tether_schema "
            "(component TEXT PRIMARY KEY, version INTEGER NOT NULL)"
        )
        row = db.execute(
            "SELECT version FROM tether_schema WHERE component = ?", (self.component,)
        ).fetchone()
        version = row[0] if row else 0
        if version > len(self.migrations):
            raise StorageError(
                f"the {self.component} tables in {self.path} were written by a newer tether "
                f"(schema version {version}; this one reads up to {len(self.migrations)}); "
                "tether changed nothing. Upgrade tether, or point it at another file",
                database=self.path,
            )
        for number in range(version, len(self.migrations)):
            # One statement at a time: executescript would commit the open transaction.
            for statement in self.migrations[number].split(";"):
                if statement.strip():
                    db.execute(statement)
        if version < len(self.migrations):
            db.execute(
                "INSERT INTO tether_schema (component, version) VALUES (?, ?) "
                "ON CONFLICT (component) DO UPDATE SET version = excluded.version",
                (self.component, len(self.migrations)),
            )


_CHECKPOINT_ROWS = 256
"""Rows changed between two checkpoints: about SQLite's default of 1,000 pages for the
records of a step (a few pages a commit)..."""
_CHECKPOINT_BYTES = 4 * 1024 * 1024
"""...or this much in the WAL, whichever comes first: SQLite's default, for big records."""
_CHECKPOINT_TRIES = 20  # a PASSIVE checkpoint that a busy writer kept from finishing

_OPEN: weakref.WeakSet[SqliteDatabase] = weakref.WeakSet()


def _after_fork() -> None:
    for database in list(_OPEN):
        database._forked()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork)


def _wal_bytes(path: str) -> int:
    try:
        return os.stat(path + "-wal").st_size
    except OSError:
        return 0


def _checkpoints(path: str, due: threading.Event) -> None:
    """Copy what the WAL holds into the database file, on a connection of its own, for
    as long as more is due. PASSIVE waits for no lock: a copy that a writer kept from
    finishing is tried again a little later."""
    while due.is_set():
        due.clear()
        for _ in range(_CHECKPOINT_TRIES):
            if _checkpoint(path):
                break
            time.sleep(0.01)


def _checkpoint(path: str) -> bool:
    """One PASSIVE checkpoint; whether it copied the whole WAL."""
    try:
        existing = Path(path).as_uri() + "?mode=rw"  # never makes a file
        with contextlib.closing(sqlite3.connect(existing, uri=True, isolation_level=None)) as db:
            _busy, frames, copied = db.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchone()
            return bool(copied >= frames)
    except (sqlite3.Error, ValueError):  # the writer reports what is broken
        return True


def _wal(db: sqlite3.Connection, patience: float) -> None:
    """Switch the file to WAL. SQLite answers "database is locked" at once, without its
    busy handler, while another connection makes the same switch; so wait and retry."""
    deadline = time.monotonic() + patience
    pause = 0.005
    while True:
        try:
            db.execute("PRAGMA journal_mode=WAL")
            return
        except sqlite3.OperationalError as error:
            if "locked" not in str(error) or time.monotonic() > deadline:
                raise
        time.sleep(pause)
        pause = min(pause * 2, 0.2)


@contextlib.contextmanager
def transaction(db: sqlite3.Connection) -> Iterator[sqlite3.Connection]:
    """`BEGIN IMMEDIATE` ... `COMMIT`, or `ROLLBACK` on any error."""
    db.execute("BEGIN IMMEDIATE")
    try:
        yield db
    except BaseException:
        db.execute("ROLLBACK")
        raise
    db.execute("COMMIT")


_Job = tuple[Callable[[], Any], asyncio.AbstractEventLoop, "asyncio.Future[Any]"]


class Worker:
    """One thread that does a database's work in the order it is given, for any event
    loop, and ends after `idle_seconds` without work (it starts again when given more).

    It is woken through a pipe and answers with `call_soon_threadsafe`: a round trip
    costs a quarter of `asyncio.to_thread`'s on a loaded 2-core machine (about 12 against
    50 µs), and a recorded step makes two of them.
    """

    def __init__(self, name: str, *, idle_seconds: float = 2.0) -> None:
        self.name = name
        self.idle_seconds = idle_seconds
        self._reset()

    def _reset(self) -> None:
        self._pid = os.getpid()
        self._jobs: collections.deque[_Job] = collections.deque()
        self._state = threading.Lock()
        self._wake: tuple[int, int] | None = None  # the pipe, while the thread runs

    async def call(self, work: Callable[[], T]) -> T:
        """`work()` on the thread, after the work given before it."""
        loop = asyncio.get_running_loop()
        future: asyncio.Future[T] = loop.create_future()
        self._submit((work, loop, future))
        return await future

    def _submit(self, job: _Job) -> None:
        if self._pid != os.getpid():  # a forked child: the thread stayed in its parent
            self._reset()
        with self._state:
            self._jobs.append(job)
            if self._wake is None:
                wake = os.pipe()
                os.set_blocking(wake[1], False)
                try:
                    threading.Thread(
                        target=self._serve, args=wake, name=self.name, daemon=True
                    ).start()
                except BaseException:  # no thread: this job fails now, the next tries again
                    self._jobs.remove(job)
                    os.close(wake[0])
                    os.close(wake[1])
                    raise
                self._wake = wake
                return
            with contextlib.suppress(BlockingIOError):  # full: it has wake-ups enough
                os.write(self._wake[1], b"\0")

    def _serve(self, wake: int, waker: int) -> None:
        try:
            self._serve_jobs(wake)
        except BaseException as error:  # never leave callers waiting on a dead thread
            with self._state:
                failed, self._jobs = self._jobs, collections.deque()
                if self._wake == (wake, waker):
                    self._wake = None
            for _, loop, future in failed:
                with contextlib.suppress(RuntimeError):
                    loop.call_soon_threadsafe(_settle, future, error, True)
            raise
        finally:
            if self._wake != (wake, waker):
                for fd in (wake, waker):
                    with contextlib.suppress(OSError):
                        os.close(fd)

    def _serve_jobs(self, wake: int) -> None:
        jobs = self._jobs
        waiting = select.poll()  # not select(): it fails on a descriptor past 1023
        waiting.register(wake, select.POLLIN)
        while True:
            while jobs:
                _do(*jobs.popleft())
            if waiting.poll(self.idle_seconds * 1000):
                os.read(wake, 4096)
                continue
            with self._state:  # idle: end, unless work came in just now
                if jobs:
                    continue
                self._wake = None
                return


def _do(
    work: Callable[[], Any], loop: asyncio.AbstractEventLoop, future: asyncio.Future[Any]
) -> None:
    try:
        outcome, failed = work(), False
    except BaseException as error:  # handed to the caller, whatever it is
        outcome, failed = error, True
    with contextlib.suppress(RuntimeError):  # the loop has closed: nobody waits any more
        loop.call_soon_threadsafe(_settle, future, outcome, failed)


def _settle(future: asyncio.Future[Any], outcome: Any, failed: bool) -> None:
    if future.done():  # the caller was cancelled; the work was done all the same
        return
    if failed:
        future.set_exception(outcome)
    else:
        future.set_result(outcome)
