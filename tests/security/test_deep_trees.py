"""Trees thousands of directories deep, such as a sandboxed command makes in a second:
ls, glob and grep work on them on every backend, with every file found, without
Python's recursion limit, without running out of file descriptors, and with glob
patterns that take time linear in each path whatever they say.

Before, the walk recursed (1,500 levels raised RecursionError), held one descriptor a
level (a 1,024-descriptor process lost the deep files, and every other open failed
meanwhile) and glob matched with backtracking (`**/d/**/d/**/*.x` took a second on one
path 400 levels deep).
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.backends.conftest import call_tool
from tether.backends import Backend, CompositeBackend, FilesystemBackend, StateBackend, StoreBackend
from tether.backends.paths import MAX_PATH_LENGTH
from tether.stores import InMemoryStore

DEEP = 5_000
TABLE_DEEP = (MAX_PATH_LENGTH - 20) // 2
"""As deep as a path the table backends store can go ("/d" a level)."""
CATASTROPHIC_GLOBS = ["**/d/**/d/**/*.zz", "**/d/**/d/**/d/**/d/**/*.zz", "**/*d*d*d*d*d*d*/*.zz"]


@pytest.fixture(autouse=True)
def _removed_after(tmp_path: Path) -> Iterator[None]:
    """The trees are too deep for pytest's own clean-up (shutil.rmtree recurses, and a
    RecursionError there fails a later test): GNU rm walks them iteratively."""
    yield
    for entry in tmp_path.iterdir():
        subprocess.run(["rm", "-rf", "--", str(entry)], check=True, timeout=300)


def deep_tree(root: Path, depth: int) -> None:
    """`depth` directories named d, one in the other, with a file at the top, one beside
    the middle one and one at the bottom. Made through descriptors: the paths are longer
    than the system takes."""
    (root / "top.txt").write_text("needle at the top\n")
    fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY)
    try:
        for level in range(depth):
            os.mkdir("d", dir_fd=fd)
            if level == depth // 2:
                os.mkdir("side", dir_fd=fd)
                _write(fd, "side/middle.txt", b"needle in the middle\n")
            below = os.open("d", os.O_RDONLY | os.O_DIRECTORY, dir_fd=fd)
            os.close(fd)
            fd = below
        _write(fd, "leaf.txt", b"needle at the bottom\n")
    finally:
        os.close(fd)


def _write(directory: int, name: str, data: bytes) -> None:
    fd = os.open(name, os.O_WRONLY | os.O_CREAT, 0o644, dir_fd=directory)
    try:
        os.write(fd, data)
    finally:
        os.close(fd)


async def deep_table(backend: Backend, depth: int, under: str = "") -> None:
    await backend.write(f"{under}/top.txt", b"needle at the top\n")
    middle = under + "/d" * (depth // 2) + "/side/middle.txt"
    await backend.write(middle, b"needle in the middle\n")
    await backend.write(under + "/d" * depth + "/leaf.txt", b"needle at the bottom\n")


def composite(tmp_path: Path) -> Callable[[], Backend]:
    def make() -> Backend:
        return CompositeBackend(
            FilesystemBackend(tmp_path / "ws", virtual_mode=True), {"/mem/": StateBackend()}
        )

    return make


async def found_everywhere(backend: Backend, names: list[str]) -> None:
    """grep and glob find every file of the tree; ls lists a directory in it."""
    for call, args in [
        ("grep", {"pattern": "needle", "output_mode": "files_with_matches"}),
        ("glob", {"pattern": "**/*.txt"}),
    ]:
        result = await call_tool(backend, call, **args)
        assert not result.is_error, result.text
        assert sorted(line.rsplit("/", 1)[-1] for line in result.text.splitlines()) == names
    listed = await call_tool(backend, "ls", path="/d/d/d")
    assert listed.text == "/d/d/d/d/"


async def test_a_tree_5000_deep_on_disk_is_searched_whole(tmp_path: Path) -> None:
    (tmp_path / "ws").mkdir()
    deep_tree(tmp_path / "ws", DEEP)
    backend = FilesystemBackend(tmp_path / "ws", virtual_mode=True)
    await found_everywhere(backend, ["leaf.txt", "middle.txt", "top.txt"])


@pytest.mark.parametrize("kind", ["state", "store"])
async def test_the_deepest_tree_a_table_backend_holds_is_searched_whole(kind: str) -> None:
    backend: Backend = StateBackend() if kind == "state" else StoreBackend(InMemoryStore())
    await deep_table(backend, TABLE_DEEP)
    await found_everywhere(backend, ["leaf.txt", "middle.txt", "top.txt"])


async def test_deep_trees_on_both_sides_of_a_composite_backend(tmp_path: Path) -> None:
    (tmp_path / "ws").mkdir()
    deep_tree(tmp_path / "ws", DEEP)
    backend = composite(tmp_path)()
    await deep_table(backend, TABLE_DEEP - 3, under="/mem")  # the route's prefix counts
    names = ["leaf.txt", "leaf.txt", "middle.txt", "middle.txt", "top.txt", "top.txt"]
    grep = await call_tool(backend, "grep", pattern="needle", path="/")
    assert not grep.is_error, grep.text
    assert sorted(line.rsplit("/", 1)[-1] for line in grep.text.splitlines()) == names
    assert sum(line.startswith("/mem/") for line in grep.text.splitlines()) == 3


def test_a_deep_walk_holds_few_descriptors(tmp_path: Path) -> None:
    """In a process allowed 128 descriptors, a tree 3,000 deep is searched whole: the
    walk does not hold one a level."""
    (tmp_path / "ws").mkdir()
    deep_tree(tmp_path / "ws", 3_000)
    script = f"""
import asyncio, resource, sys
sys.path.insert(0, {str(Path(__file__).parents[2])!r})
resource.setrlimit(resource.RLIMIT_NOFILE, (128, 128))
from tests.backends.conftest import call_tool
from tether.backends import FilesystemBackend
backend = FilesystemBackend({str(tmp_path / "ws")!r}, virtual_mode=True)
found = asyncio.run(call_tool(backend, "grep", pattern="needle"))
print(found.text)
"""
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=120, check=False
    )
    assert done.returncode == 0, done.stderr[-2000:]
    names = sorted(line.rsplit("/", 1)[-1] for line in done.stdout.splitlines())
    assert names == ["leaf.txt", "middle.txt", "top.txt"], done.stdout[-500:]


def test_a_glob_on_a_deep_tree_takes_time_linear_in_its_paths() -> None:
    """Patterns with several `**` (or `*`) against paths 2,000 levels deep, by glob and
    by grep's `glob` filter: backtracking takes minutes on each path, and holds the
    interpreter all along, so the calls run in a process of their own with a bound."""
    script = f"""
import asyncio, sys
sys.path.insert(0, {str(Path(__file__).parents[2])!r})
from tests.backends.conftest import call_tool
from tests.security.test_deep_trees import CATASTROPHIC_GLOBS, TABLE_DEEP, deep_table
from tether.backends import StateBackend

async def main():
    backend = StateBackend()
    await deep_table(backend, TABLE_DEEP)
    for pattern in CATASTROPHIC_GLOBS:
        print((await call_tool(backend, "glob", pattern=pattern)).text)
        grep = await call_tool(backend, "grep", pattern="needle", glob=pattern)
        print(grep.text)
asyncio.run(main())
"""
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=60, check=False
    )
    assert done.returncode == 0, done.stderr[-2000:]
    for pattern in CATASTROPHIC_GLOBS:
        assert f"No files match {pattern!r} under /." in done.stdout
        assert "No matches for 'needle' under /." in done.stdout
