"""Hangs, leaks and stalls of the rg path."""

from __future__ import annotations

import asyncio
import contextlib
import os
import threading
import time
from pathlib import Path

import pytest

from tether.backends import FilesystemBackend
from tether.backends.hostfs import _ripgrep

needs_ripgrep = pytest.mark.skipif(_ripgrep._ripgrep() is None, reason="no rg/Landlock")


def _fds() -> int:
    return len(os.listdir("/proc/self/fd"))


def _rg_children() -> list[int]:
    me = os.getpid()
    found = []
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            with open(f"/proc/{pid}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
            with open(f"/proc/{pid}/comm") as f:
                comm = f.read().strip()
        except OSError:
            continue
        if int(fields[1]) == me and comm == "rg":
            found.append(int(pid))
    return found


@needs_ripgrep
async def test_a_thousand_greps_leak_no_fd_thread_or_process(tmp_path: Path) -> None:
    (tmp_path / "a.txt").write_text("needle\n")
    backend = FilesystemBackend(tmp_path)
    await backend.grep("needle", "/", literal=True)
    fds = _fds()

    def threads_now() -> int:
        return sum(1 for t in threading.enumerate() if not t.name.startswith("asyncio_"))

    threads = threads_now()
    for _ in range(10):
        await asyncio.gather(*(backend.grep("needle", "/", literal=True) for _ in range(100)))
    for _ in range(200):  # the threads that reap rg end on their own: wait, no timing bet
        if _fds() <= fds + 2 and threads_now() <= threads + 2 and not _rg_children():
            break
        await asyncio.sleep(0.05)
    assert _fds() <= fds + 2
    assert threads_now() <= threads + 2, [t.name for t in threading.enumerate()]
    assert _rg_children() == []


@needs_ripgrep
async def test_static_fifo_in_tree_does_not_stall(tmp_path: Path) -> None:
    (tmp_path / "a.txt").write_text("needle\n")
    os.mkfifo(tmp_path / "pipe")
    backend = FilesystemBackend(tmp_path)
    start = time.monotonic()
    hits = await backend.grep("needle", "/", literal=True)
    assert [h.path for h in hits] == ["/a.txt"]
    assert time.monotonic() - start < 2


@needs_ripgrep
async def test_cancelled_grep_leaves_no_rg_behind(tmp_path: Path) -> None:
    # a FIFO as the searched file keeps rg blocked in open(); cancel the grep
    (tmp_path / "a.txt").write_text("needle\n")
    backend = FilesystemBackend(tmp_path)
    await backend.grep("needle", "/", literal=True)
    for i in range(200):
        (tmp_path / f"f{i}.txt").write_text("needle\n" * 1000)
    for _ in range(20):
        task = asyncio.ensure_future(backend.grep("needle", "/", literal=True))
        await asyncio.sleep(0.001)
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
    for _ in range(200):  # a killed rg is gone as soon as it is reaped: no timing bet
        if not _rg_children():
            break
        await asyncio.sleep(0.05)
    assert _rg_children() == []
