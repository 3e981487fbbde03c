"""The rg path opens and reads files the rules say the file tools may not read (deny
rules, tether's own `.tether/`), and files over `max_file_bytes`; the pure-Python walk
opens none of them. What rg reads of a denied file depends on its content (it stops at
the first match: `--files-with-matches`), so the number of reads (inotify IN_ACCESS,
watchable by anyone who can watch the directory) and the time a grep takes tell the
model whether, and roughly where, its pattern occurs in a file it may not read."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from tests.security.watch import IN_ACCESS, IN_OPEN, Watch
from tether.backends import FilesystemBackend
from tether.backends.hostfs import _ripgrep
from tether.backends.permissions import PermissionedBackend, Rule

needs_ripgrep = pytest.mark.skipif(_ripgrep._ripgrep() is None, reason="no rg/Landlock")


def _tree(root: Path) -> None:
    (root / "a.txt").write_text("needle\n")
    (root / "secrets").mkdir()
    # a big denied file: the secret first, then 32 MiB of text
    (root / "secrets" / "dump.sql").write_bytes(
        b"API_KEY=sk-live-7f3a\n" + b"x" * 80 + (b"\n" + b"y" * 1023) * 32768
    )
    (root / ".tether").mkdir()
    (root / ".tether" / "runs.db").write_bytes(b"other conversation: API_KEY=sk-live-7f3a\n")


def _touched(watch: Watch) -> dict[str, int]:
    counts: dict[str, int] = {}
    for _, name, mask in watch.events():
        if mask & (IN_OPEN | IN_ACCESS) and name:  # a file, not a listing of the directory
            counts[name] = counts.get(name, 0) + 1
    return counts


@needs_ripgrep
async def test_grep_never_opens_a_denied_file(tmp_path: Path) -> None:
    _tree(tmp_path)
    deny = [Rule({"read"}, ["/secrets", "/secrets/**", "/.tether", "/.tether/**"], "deny")]
    backend = PermissionedBackend(FilesystemBackend(tmp_path), deny)
    watch = Watch(tmp_path / "secrets", tmp_path / ".tether")
    try:
        hits = await backend.grep("API_KEY=sk-live-7f3a", "/", literal=True)
        assert hits == []  # the answer is right ...
        touched = _touched(watch)
    finally:
        watch.close()
    assert touched == {}, f"denied files opened/read by the grep: {touched}"


@needs_ripgrep
async def test_reads_of_a_denied_file_depend_on_its_content(tmp_path: Path) -> None:
    _tree(tmp_path)
    deny = [Rule({"read"}, ["/secrets", "/secrets/**", "/.tether/**"], "deny")]
    backend = PermissionedBackend(FilesystemBackend(tmp_path), deny)

    async def reads(guess: str) -> int:
        # drain the inotify queue while the grep runs (inotify merges repeated events)
        watch = Watch(tmp_path / "secrets")
        seen: list = []
        done = threading.Event()

        def drain() -> None:
            while not done.is_set():
                seen.extend(watch.events())

        thread = threading.Thread(target=drain)
        thread.start()
        try:
            assert await backend.grep(guess, "/", literal=True) == []
        finally:
            done.set()
            thread.join()
            seen.extend(watch.events())
            watch.close()
        return sum(1 for _, name, mask in seen if name == "dump.sql" and mask & IN_ACCESS)

    right, wrong = await reads("API_KEY=sk-live-7"), await reads("API_KEY=sk-live-8")
    # an oracle on the denied content: a right guess reads the file once, a wrong one all of it
    assert right == wrong, f"reads of the denied file: right guess {right}, wrong guess {wrong}"


@needs_ripgrep
async def test_grep_does_not_read_files_over_the_size_limit(tmp_path: Path) -> None:
    (tmp_path / "a.txt").write_text("needle\n")
    (tmp_path / "big").mkdir()
    (tmp_path / "big" / "huge.log").write_bytes((b"z" * 1023 + b"\n") * 65536)  # 64 MiB
    backend = FilesystemBackend(tmp_path, max_file_bytes=1_000_000)
    watch = Watch(tmp_path / "big")
    try:
        assert [h.path for h in await backend.grep("needle", "/", literal=True)] == ["/a.txt"]
        touched = _touched(watch)
    finally:
        watch.close()
    # the walk skips it by its size; rg reads all 64 MiB (rg has --max-filesize)
    assert touched == {}, touched
