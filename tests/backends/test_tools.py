"""Every file tool on every backend."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from tests.sandboxes import DirectoryRemote
from tether.backends import (
    Backend,
    CompositeBackend,
    FilesystemBackend,
    StateBackend,
    StoreBackend,
)
from tether.messages import BinaryPart
from tether.stores import InMemoryStore

from .conftest import fails, ok

BACKENDS: dict[str, Callable[[Path], tuple[Backend, str]]] = {
    "state": lambda tmp: (StateBackend(), "/work"),
    "filesystem": lambda tmp: (FilesystemBackend(tmp), "/work"),
    "store": lambda tmp: (StoreBackend(InMemoryStore(), "assistant-1"), "/work"),
    # A remote sandbox's file operations, over commands on a machine (here: a directory).
    "remote": lambda tmp: (DirectoryRemote(tmp / "machine"), "/work"),
    # Everything under /work goes to the store through the route.
    "composite": lambda tmp: (
        CompositeBackend(StateBackend(), {"/work/": StoreBackend(InMemoryStore(), "a")}),
        "/work",
    ),
}


@pytest.fixture(params=list(BACKENDS))
def setup(request: pytest.FixtureRequest, tmp_path: Path) -> tuple[Backend, str]:
    return BACKENDS[request.param](tmp_path)


async def test_write_then_read_with_line_numbers(setup: tuple[Backend, str]) -> None:
    backend, d = setup
    result = await ok(backend, "write_file", file_path=f"{d}/notes.md", content="one\ntwo\nthree\n")
    assert result.text == f"Wrote 14 bytes to {d}/notes.md."
    read = await ok(backend, "read_file", file_path=f"{d}/notes.md")
    assert read.text == "1\tone\n2\ttwo\n3\tthree"
    part = await ok(backend, "read_file", file_path=f"{d}/notes.md", offset=1, limit=1)
    assert part.text == "2\ttwo\n(lines 2-2 of 3; read on with offset=2)"


async def test_write_refuses_an_existing_file_and_points_to_edit(
    setup: tuple[Backend, str],
) -> None:
    backend, d = setup
    await ok(backend, "write_file", file_path=f"{d}/a.txt", content="x")
    error = await fails(backend, "write_file", file_path=f"{d}/a.txt", content="y")
    assert "already exists" in error
    assert "edit_file" in error
    assert (await ok(backend, "read_file", file_path=f"{d}/a.txt")).text == "1\tx"


async def test_read_errors_are_readable(setup: tuple[Backend, str]) -> None:
    backend, d = setup
    assert "No such file" in await fails(backend, "read_file", file_path=f"{d}/missing.txt")
    await ok(backend, "write_file", file_path=f"{d}/sub/a.txt", content="a")
    assert "is a directory" in await fails(backend, "read_file", file_path=f"{d}/sub")
    await ok(backend, "write_file", file_path=f"{d}/blob.bin", content="a\x00b")
    assert "binary file" in await fails(backend, "read_file", file_path=f"{d}/blob.bin")
    assert "past the end" in await fails(backend, "read_file", file_path=f"{d}/sub/a.txt", offset=5)


async def test_long_lines_are_cut_with_a_marker(setup: tuple[Backend, str]) -> None:
    backend, d = setup
    await ok(backend, "write_file", file_path=f"{d}/wide.txt", content="x" * 2500)
    text = (await ok(backend, "read_file", file_path=f"{d}/wide.txt")).text
    assert text.endswith("x... [line cut: 500 more characters]")


async def test_media_files_come_back_as_content_parts(setup: tuple[Backend, str]) -> None:
    backend, d = setup
    png = b"\x89PNG\r\n\x1a\n\x00fake"
    await backend.write(f"{d}/shot.PNG", png)
    await backend.write(f"{d}/doc.pdf", b"%PDF-1.7")
    image = await ok(backend, "read_file", file_path=f"{d}/shot.PNG")
    assert image.content == (BinaryPart(png, "image/png"),)
    pdf = await ok(backend, "read_file", file_path=f"{d}/doc.pdf")
    assert pdf.content == (BinaryPart(b"%PDF-1.7", "application/pdf"),)


async def test_edit_file_replaces_exactly(setup: tuple[Backend, str]) -> None:
    backend, d = setup
    path = f"{d}/app.py"
    await ok(backend, "write_file", file_path=path, content="a = 1\nb = 1\nprint(a)\n")
    assert "occurs 2 times" in await fails(
        backend, "edit_file", file_path=path, old_string="= 1", new_string="= 2"
    )
    assert "not found" in await fails(
        backend, "edit_file", file_path=path, old_string="c = 1", new_string="c = 2"
    )
    assert "the same" in await fails(
        backend, "edit_file", file_path=path, old_string="a", new_string="a"
    )
    await ok(backend, "edit_file", file_path=path, old_string="a = 1", new_string="a = 3")
    done = await ok(
        backend, "edit_file", file_path=path, old_string="1", new_string="9", replace_all=True
    )
    assert done.text == f"Replaced 1 occurrence(s) in {path}."
    assert await backend.read(path) == b"a = 3\nb = 9\nprint(a)\n"
    assert "No such file" in await fails(
        backend, "edit_file", file_path=f"{d}/nope.py", old_string="a", new_string="b"
    )


async def test_ls_shows_sizes_times_and_directories(setup: tuple[Backend, str]) -> None:
    backend, d = setup
    await ok(backend, "write_file", file_path=f"{d}/b.txt", content="12345")
    await ok(backend, "write_file", file_path=f"{d}/a/inner.txt", content="x")
    lines = (await ok(backend, "ls", path=d)).text.split("\n")
    assert lines[0] == f"{d}/a/"
    assert lines[1].startswith(f"{d}/b.txt (5 bytes, modified 20")
    assert "No such directory" in await fails(backend, "ls", path=f"{d}/nothing")
    assert "not a directory" in await fails(backend, "ls", path=f"{d}/b.txt")


async def test_glob_finds_files_at_any_depth(setup: tuple[Backend, str]) -> None:
    backend, d = setup
    for name in ("app.py", "pkg/mod.py", "pkg/deep/x.py", "pkg/readme.md", ".hidden.py"):
        await backend.write(f"{d}/{name}", b"pass\n")
    found = (await ok(backend, "glob", pattern="**/*.py", path=d)).text.split("\n")
    assert found == [f"{d}/.hidden.py", f"{d}/app.py", f"{d}/pkg/deep/x.py", f"{d}/pkg/mod.py"]
    top = (await ok(backend, "glob", pattern="*.{py,md}", path=f"{d}/pkg")).text.split("\n")
    assert top == [f"{d}/pkg/mod.py", f"{d}/pkg/readme.md"]
    absolute = await ok(backend, "glob", pattern=f"{d}/pkg/**/x.py")
    assert absolute.text == f"{d}/pkg/deep/x.py"
    assert "No files match" in (await ok(backend, "glob", pattern="*.rs", path=d)).text


async def test_grep_output_modes(setup: tuple[Backend, str]) -> None:
    backend, d = setup
    await backend.write(f"{d}/a.py", b"import os\nx = 1\nprint(os.name)\n")
    await backend.write(f"{d}/b.txt", b"OS is fine\n")
    await backend.write(f"{d}/sub/c.py", b"y = 2\n")
    files = await ok(backend, "grep", pattern="os", path=d)
    assert files.text == f"{d}/a.py"
    content = await ok(
        backend, "grep", pattern="os", path=d, output_mode="content", ignore_case=True
    )
    assert content.text.split("\n") == [
        f"{d}/a.py",
        "1:import os",
        "3:print(os.name)",
        f"{d}/b.txt",
        "1:OS is fine",
    ]
    count = await ok(backend, "grep", pattern="o", path=d, output_mode="count", glob="*.py")
    assert count.text == f"{d}/a.py:2"  # lines with a match, as grep -c counts
    around = await ok(
        backend, "grep", pattern="x = 1", path=d, output_mode="content", context_lines=1
    )
    assert around.text.split("\n") == [
        f"{d}/a.py",
        "1-import os",
        "2:x = 1",
        "3-print(os.name)",
    ]
    literal = await ok(
        backend, "grep", pattern="os.name", literal=True, path=d, output_mode="content"
    )
    assert literal.text == f"{d}/a.py\n3:print(os.name)"
    assert "not a valid regular expression" in await fails(backend, "grep", pattern="(", path=d)
    assert "No matches" in (await ok(backend, "grep", pattern="zzz", path=d)).text


async def test_paths_are_cleaned_before_they_reach_the_backend(setup: tuple[Backend, str]) -> None:
    backend, d = setup
    await ok(backend, "write_file", file_path=f"{d[1:]}//x/./y.txt", content="ok")
    assert (await ok(backend, "read_file", file_path=f"{d}/x/y.txt")).text == "1\tok"
    assert "'..' is not allowed" in await fails(backend, "read_file", file_path=f"{d}/../etc")


async def test_size_limit_on_write_and_read(tmp_path: Path) -> None:
    backend = FilesystemBackend(tmp_path, max_file_bytes=10)
    assert "over the 10 byte limit" in await fails(
        backend, "write_file", file_path="/big.txt", content="x" * 11
    )
    (tmp_path / "big.txt").write_text("x" * 11)
    assert "over the 10 byte limit" in await fails(backend, "read_file", file_path="/big.txt")
    state = StateBackend(max_file_bytes=10)
    assert "over the 10 byte limit" in await fails(
        state, "write_file", file_path="/big.txt", content="x" * 11
    )


def test_the_tool_name_list_matches_the_tools() -> None:
    from tether.tools.files import FILE_TOOL_NAMES, file_tools

    assert tuple(t.name for t in file_tools()) == FILE_TOOL_NAMES
