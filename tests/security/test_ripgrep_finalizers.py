"""The Landlock restriction is taken by a Python thread of the process, and Python runs
code that is not rg's on any thread: the cyclic garbage collector runs whichever thread
allocates when a collection is due, and with it every `__del__` / `weakref.finalize` of
the process's unrelated objects (a TemporaryDirectory's cleanup, a log file opened
lazily, a SQLite connection removing its -wal). Run on the restricted thread, those
fail: no file may be opened for writing, made or removed there. (A finalizer that starts
a thread or a pool worker would leave that thread restricted for good.)

Also: the discovery probe runs the `rg` found on PATH unconfined (LD_TRACE_LOADED_OBJECTS
is honoured only by the dynamic loader; a script or static binary just runs)."""

from __future__ import annotations

import tempfile
import threading
import time
from pathlib import Path

import pytest

from tether.backends import FilesystemBackend
from tether.backends.hostfs import _ripgrep

needs_ripgrep = pytest.mark.skipif(_ripgrep._ripgrep() is None, reason="no rg/Landlock")


@needs_ripgrep
async def test_finalizers_of_other_objects_are_not_run_restricted(tmp_path: Path) -> None:
    import gc

    failures: list[str] = []
    runs = [0]
    out = Path(tempfile.mkdtemp())

    class Cycle:  # unrelated garbage, as any program makes
        def __init__(self, n: int) -> None:
            self.n, self.me = n, self

        def __del__(self) -> None:
            runs[0] += 1
            try:
                (out / f"f{self.n % 50}").write_text("x")
            except OSError as error:
                failures.append(f"{threading.current_thread().name}: {error!r}")

    (tmp_path / "a.txt").write_text("needle\n")
    backend = FilesystemBackend(tmp_path)
    await backend.grep("needle", "/", literal=True)
    stop = threading.Event()

    def churn() -> None:
        n = 0
        while not stop.is_set():
            Cycle(n)
            n += 1
            time.sleep(0.0005)

    thread = threading.Thread(target=churn)
    old = gc.get_threshold()
    gc.set_threshold(5, 1, 1)
    thread.start()
    try:
        deadline = time.monotonic() + 3
        while not failures and time.monotonic() < deadline:
            await backend.grep("needle", "/", literal=True)
    finally:
        stop.set()
        thread.join()
        gc.set_threshold(*old)
        gc.collect()
    assert runs[0] > 0
    assert failures == [], failures[:3]
