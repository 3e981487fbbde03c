"""grep of literal text on the FilesystemBackend asks ripgrep which files hold it, from a
thread Landlock restricts to the searched directory: rg cannot be led out of the root,
even told to follow symlinks, and what it names is opened again and checked, so every
answer is the one the walk without rg gives."""

from __future__ import annotations

import asyncio
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.backends.conftest import call_tool
from tether.backends import FilesystemBackend
from tether.backends.hostfs import _ripgrep
from tether.backends.permissions import PermissionedBackend, Rule
from tether.messages import ToolResult

from .watch import Watch, for_seconds, swapping

needs_ripgrep = pytest.mark.skipif(
    _ripgrep._ripgrep() is None, reason="no rg on PATH, or no Landlock in this kernel"
)


@pytest.fixture
def arena(tmp_path: Path) -> Iterator[tuple[Path, Path, Watch]]:
    """root/d (a directory) and root/l (a symlink to outside/, which holds a secret and
    is watched)."""
    root, outside = tmp_path / "root", tmp_path / "outside"
    (root / "d").mkdir(parents=True)
    (root / "d" / "f.txt").write_text("inside TOPSECRET-NOT\n")
    outside.mkdir()
    (outside / "f.txt").write_text("TOPSECRET\n")
    (outside / "sub").mkdir()
    (root / "l").symlink_to(outside)
    watch = Watch(outside, outside / "sub")
    yield root, outside, watch
    watch.close()


def _without_ripgrep(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_ripgrep, "_looked", True)
    monkeypatch.setattr(_ripgrep, "_found", None)


def _counting(monkeypatch: pytest.MonkeyPatch) -> list[list[str] | None]:
    """What every rg search returned (None: it did not help)."""
    seen: list[list[str] | None] = []
    search = _ripgrep.search

    async def counted(*args: Any, **kwargs: Any) -> list[str] | None:
        found = await search(*args, **kwargs)
        seen.append(found)
        return found

    monkeypatch.setattr(_ripgrep, "search", counted)
    return seen


@pytest.mark.parametrize(
    ("pattern", "literal", "ignore_case", "expected"),
    [
        ("needle_", False, False, "needle_"),
        ("x * 2", True, False, "x * 2"),
        ("x * 2", False, False, None),  # a regex: RE2 reads it, not rg
        ("TODO", False, True, "TODO"),
        ("café", False, True, None),  # case folded beyond ASCII: RE2's tables decide
        ("café", False, False, "café"),
        ("a\nb", True, False, None),
        ("", True, False, None),
    ],
)
def test_only_literal_text_is_asked_of_ripgrep(
    pattern: str, literal: bool, ignore_case: bool, expected: str | None
) -> None:
    assert _ripgrep.literal_text(pattern, literal=literal, ignore_case=ignore_case) == expected


@needs_ripgrep
def test_confined_ripgrep_reads_nothing_outside_even_told_to_follow_links(
    arena: tuple[Path, Path, Watch],
) -> None:
    root, outside, watch = arena
    rg = _ripgrep._ripgrep()
    assert rg is not None
    fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY)
    try:
        done = _ripgrep._confined(
            rg, fd, ["--follow", "--regexp", "TOPSECRET", "."], _ripgrep._Stop()
        )
    finally:
        os.close(fd)
    assert done is not None
    assert done[1].split(b"\0") == [b"./d/f.txt", b""]  # not ./l/f.txt
    assert watch.events() == []
    # the restriction was the thread's: the process itself still reads where it may
    assert (outside / "f.txt").read_text() == "TOPSECRET\n"


@needs_ripgrep
async def test_grep_for_literal_text_racing_a_swap_never_leaves_the_root(
    arena: tuple[Path, Path, Watch], monkeypatch: pytest.MonkeyPatch
) -> None:
    root, outside, watch = arena
    seen = _counting(monkeypatch)
    backend = FilesystemBackend(root)
    results: list[ToolResult] = []
    with swapping(root, "d", "l") as swaps:
        for _ in for_seconds(2.5):
            results += await asyncio.gather(
                call_tool(backend, "grep", pattern="TOPSECRET", output_mode="content"),
                call_tool(backend, "grep", pattern="TOPSECRET", path="/d"),
                call_tool(backend, "grep", pattern="topsecret", ignore_case=True, path="/l"),
            )
    assert swaps[0] > 50
    assert any(found for found in seen)  # rg did the finding, and found the inside file
    assert watch.events() == []
    assert sorted(os.listdir(outside)) == ["f.txt", "sub"]
    lines = [line for r in results for line in r.text.split("\n")]
    assert not [line for line in lines if line.endswith(":TOPSECRET")]  # the outside line


def _tree(root: Path) -> None:
    files: dict[str, bytes] = {
        "a.py": b"needle = 1\nno\n",
        ".hidden": b"needle hidden\n",
        "node_modules/x.js": b"needle vendored\n",
        ".gitignore": b"node_modules/\n*.log\n",
        "out.log": b"needle ignored by git, not by the agent\n",
        ".git/config": b"needle in git\n",
        "sub/.git": b"gitdir: needle\n",  # a .git file is searched, a .git directory not
        "blob.bin": b"needle\x00",
        "big.txt": b"needle\n" + b"x" * 3000,
        "deep/a/b/c.txt": b"NEEDLE upper\n",
        "secrets/key.txt": b"needle secret\n",
        "ünï.txt": b"needle \xff invalid utf-8\n",
        ".tether-0123.tmp": b"needle half written\n",
    }
    for name, data in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
    (root / "link.txt").symlink_to(root / "a.py")
    os.link(root / "secrets" / "key.txt", root / "alias.txt")


@needs_ripgrep
@pytest.mark.parametrize(
    "args",
    [
        {"pattern": "needle"},
        {"pattern": "needle", "output_mode": "content"},
        {"pattern": "NEEDLE", "ignore_case": True, "output_mode": "content"},
        {"pattern": "needle", "path": "/deep", "ignore_case": True},
        {"pattern": "needle", "path": "/a.py"},
        {"pattern": "needle", "path": "/missing"},
        {"pattern": "needle", "path": "/link.txt"},
        {"pattern": "half", "output_mode": "count"},
    ],
    ids=str,
)
async def test_grep_finds_the_same_with_ripgrep_as_without(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, args: dict[str, Any]
) -> None:
    _tree(tmp_path)
    deny = [Rule({"read"}, ["/secrets/**"], "deny")]
    backends = [
        FilesystemBackend(tmp_path, max_file_bytes=1_000),
        PermissionedBackend(FilesystemBackend(tmp_path), deny),
    ]
    seen = _counting(monkeypatch)
    with_rg = [await call_tool(b, "grep", **args) for b in backends]
    if args.get("path", "/") in ("/", "/deep"):  # a directory: rg did the finding
        assert seen
        assert all(found is not None for found in seen)
    _without_ripgrep(monkeypatch)
    without = [await call_tool(b, "grep", **args) for b in backends]
    assert [(r.text, r.is_error) for r in with_rg] == [(r.text, r.is_error) for r in without]
    for result in with_rg:
        assert "config" not in result.text  # .git directories are not searched
        assert "blob.bin" not in result.text  # nor binary files
        assert ".tether-0123.tmp" not in result.text
    assert "big.txt" not in with_rg[0].text  # over the size limit
    assert "secret" not in with_rg[1].text  # denied, under either name (alias.txt)


@needs_ripgrep
async def test_ripgrep_past_its_time_is_stopped_and_the_tree_searched_without_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _tree(tmp_path)
    backend = FilesystemBackend(tmp_path)
    expected = await call_tool(backend, "grep", pattern="needle", output_mode="content")
    monkeypatch.setattr(_ripgrep, "SEARCH_SECONDS", 0)
    seen = _counting(monkeypatch)
    late = await call_tool(backend, "grep", pattern="needle", output_mode="content")
    assert seen == [None]
    assert (late.text, late.is_error) == (expected.text, expected.is_error)
