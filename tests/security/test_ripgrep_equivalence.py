"""The rg path and the pure-Python walk must give the same grep answer for the same tree
(property test over contents, names and patterns)."""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tether.backends import FilesystemBackend
from tether.backends.hostfs import _ripgrep

needs_ripgrep = pytest.mark.skipif(_ripgrep._ripgrep() is None, reason="no rg/Landlock")

_real_search = _ripgrep.search


async def _both(root: Path, pattern: str, path: str = "/", **kw):
    backend = FilesystemBackend(root, max_file_bytes=kw.pop("max_file_bytes", 10_000))
    seen = []

    async def counted(*a, **k):
        r = await _real_search(*a, **k)
        seen.append(r)
        return r

    async def off(*a, **k):
        return None

    _ripgrep.search = counted
    try:
        with_rg = await backend.grep(pattern, path, **kw)
    finally:
        _ripgrep.search = off
    try:
        without = await backend.grep(pattern, path, **kw)
    finally:
        _ripgrep.search = _real_search
    return with_rg, without, seen


_chunks = st.sampled_from(
    [
        b"needle",
        b"NEEDLE",
        b"Needle",
        b"\x00",
        b"\r\n",
        b"\n",
        b"\xff",
        b"x",
        b" ",
        "\u212a".encode(),
        "\u017f".encode(),
        b"k",
        b"s",
        "é".encode(),
        b"\t",
        b"\x0c",
    ]
)
_contents = st.lists(_chunks, max_size=12).map(b"".join)
_names = st.sampled_from(
    [
        "a.txt",
        "-n",
        "--files",
        ".hidden",
        "sp ace",
        "new\nline",
        "tab\tname",
        "x.tether-1.tmp",
        ".tether-1.tmp",
        "ü.txt",
        "back\\slash",
        " lead",
        "trail ",
        ".git",
        "...",
        "-",
        "#x",
    ]
)
_dirs = st.sampled_from(["", "d/", ".git/", "sub/.git/", "-d/", "nl\ndir/", "deep/er/", " s/"])
_patterns = st.sampled_from(["needle", "NEEDLE", "k", "s", "ks", "x", "-n", "e\r", "\t", "le\x0c"])


@needs_ripgrep
@settings(max_examples=150, deadline=None, suppress_health_check=list(HealthCheck))
@given(
    files=st.dictionaries(st.tuples(_dirs, _names), _contents, min_size=1, max_size=8),
    pattern=_patterns,
    ignore_case=st.booleans(),
    literal=st.booleans(),
)
def test_rg_and_walk_agree(files, pattern, ignore_case, literal):
    import asyncio

    root = Path(tempfile.mkdtemp())
    try:
        for (d, name), data in files.items():
            p = root / d / name
            try:
                p.parent.mkdir(parents=True, exist_ok=True)
                if p.is_dir():
                    continue
                p.write_bytes(data)
            except OSError:
                continue
        a, b, _ = asyncio.run(_both(root, pattern, literal=literal, ignore_case=ignore_case))
        assert a == b
    finally:
        shutil.rmtree(root)


@needs_ripgrep
async def test_names_that_are_odd_on_disk(tmp_path: Path) -> None:
    names = [
        b"-e",
        b"--pre=sh",
        b"new\nline",
        b"\xff\xfe.txt",
        b"a" * 255,
        b"d/" + b"b" * 200,
        b"tr\rail",
        b".git/config",
        b"x/.git/y",
    ]
    for raw in names:
        p = os.path.join(os.fsencode(tmp_path), raw)
        os.makedirs(os.path.dirname(p), exist_ok=True)
        Path(os.fsdecode(p)).write_bytes(b"needle\n")  # noqa: ASYNC240
    a, b, seen = await _both(tmp_path, "needle", literal=True)
    assert seen
    assert seen[0] is not None
    assert a == b


@needs_ripgrep
async def test_names_that_come_in_many_pieces(tmp_path: Path) -> None:
    # rg's output (~150 KB of names) reaches the check in reads that end mid-name
    for d in range(6):
        directory = tmp_path / (f"d{d}-" + "x" * 100)
        directory.mkdir()
        for i in range(100):
            (directory / (f"{i:03d}-" + "y" * 140 + ".txt")).write_bytes(b"a\nneedle\r\n")
    a, b, seen = await _both(tmp_path, "needle", literal=True)
    assert seen
    assert seen[0] is not None
    assert len(a) == 600
    assert a == b
