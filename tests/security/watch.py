"""Seeing what an attacker would want: every touch of a directory outside the root, and
a directory swapped for a symlink over and over.

`Watch` counts, through inotify, every open, read, write, creation and change of owner
under a directory, by any process; a test that asserts none happened has shown that no
file there was read or written, not only that no secret came back.
"""

from __future__ import annotations

import ctypes
import errno
import os
import select
import struct
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

_libc = ctypes.CDLL(None, use_errno=True)

IN_ACCESS, IN_MODIFY, IN_ATTRIB, IN_CLOSE_WRITE = 0x1, 0x2, 0x4, 0x8
IN_OPEN, IN_MOVED_TO, IN_CREATE, IN_DELETE = 0x20, 0x80, 0x100, 0x200
_EVERYTHING = IN_ACCESS | IN_MODIFY | IN_ATTRIB | IN_CLOSE_WRITE | IN_OPEN | IN_MOVED_TO | IN_CREATE
RENAME_EXCHANGE = 2


class Watch:
    """inotify events under `directories` (each watched itself, not recursively)."""

    def __init__(self, *directories: Path) -> None:
        self.fd = _libc.inotify_init1(os.O_NONBLOCK | os.O_CLOEXEC)
        if self.fd < 0:
            raise OSError(ctypes.get_errno(), "inotify_init1")
        self.names: dict[int, Path] = {}
        for directory in directories:
            wd = _libc.inotify_add_watch(self.fd, os.fsencode(directory), _EVERYTHING)
            if wd < 0:
                raise OSError(ctypes.get_errno(), f"inotify_add_watch {directory}")
            self.names[wd] = directory

    def events(self) -> list[tuple[Path, str, int]]:
        """(directory, name or "", mask) of everything seen so far."""
        seen = []
        while select.select([self.fd], [], [], 0.05)[0]:
            try:
                data = os.read(self.fd, 65536)
            except BlockingIOError:
                break
            offset = 0
            while offset < len(data):
                wd, mask, _, length = struct.unpack_from("iIII", data, offset)
                name = data[offset + 16 : offset + 16 + length].rstrip(b"\0").decode()
                seen.append((self.names.get(wd, Path("?")), name, mask))
                offset += 16 + length
        return seen

    def close(self) -> None:
        os.close(self.fd)


def exchange(directory: Path, first: str, second: str) -> None:
    """Swap two names in `directory` atomically (renameat2 RENAME_EXCHANGE)."""
    fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY)
    try:
        done = _libc.renameat2(fd, first.encode(), fd, second.encode(), RENAME_EXCHANGE)
        if done != 0:
            code = ctypes.get_errno()
            if code != errno.ENOENT:
                raise OSError(code, os.strerror(code))
    finally:
        os.close(fd)


@contextmanager
def swapping(directory: Path, first: str, second: str) -> Iterator[list[int]]:
    """Swap `first` and `second` in `directory` as fast as possible until the block
    ends; yields a one-item list counting the swaps."""
    count = [0]
    stop = threading.Event()

    def loop() -> None:
        while not stop.is_set():
            exchange(directory, first, second)
            count[0] += 1

    thread = threading.Thread(target=loop, daemon=True)
    thread.start()
    try:
        yield count
    finally:
        stop.set()
        thread.join()


def for_seconds(seconds: float) -> Iterator[int]:
    """0, 1, 2, ... until `seconds` have passed."""
    end = time.monotonic() + seconds
    number = 0
    while time.monotonic() < end:
        yield number
        number += 1
