"""A directory swapped for a symlink to outside, over and over, while the file tools and
the sandbox work: nothing outside is opened, read, written or chowned.

The swap is what a sandboxed command (or any process with write access to the
workspace) can do at any moment with renameat2(RENAME_EXCHANGE); inotify on the outside
directory sees every touch by any process.
"""

from __future__ import annotations

import asyncio
import os
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.backends.conftest import call_tool
from tether.backends import FilesystemBackend
from tether.backends.hostfs import _opening
from tether.messages import ToolResult

from .watch import Watch, for_seconds, swapping

SECONDS = 2.5


@pytest.fixture(params=["openat2", "walk"])
def kernel(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Both ways of opening beneath the root: the openat2 call and the O_NOFOLLOW walk."""
    opener = _opening.kernel()
    if request.param == "walk":
        without = _opening.Openat2.__new__(_opening.Openat2)
        without.syscall = None
        monkeypatch.setattr(_opening, "_openat2", without)
    elif opener.syscall is None:
        pytest.skip("this kernel has no openat2")
    return str(request.param)


@pytest.fixture
def arena(tmp_path: Path) -> Iterator[tuple[Path, Path, Watch]]:
    """root/d (a directory) and root/l (a symlink to outside/, which holds a secret and
    is watched)."""
    root, outside = tmp_path / "root", tmp_path / "outside"
    (root / "d").mkdir(parents=True)
    (root / "d" / "f.txt").write_text("inside\n")
    outside.mkdir()
    (outside / "f.txt").write_text("TOPSECRET\n")
    (outside / "sub").mkdir()
    (root / "l").symlink_to(outside)
    watch = Watch(outside, outside / "sub")
    yield root, outside, watch
    watch.close()


def _untouched(outside: Path, watch: Watch, results: list[ToolResult]) -> None:
    assert watch.events() == []  # nothing opened, read, written or chowned, by anyone
    assert sorted(os.listdir(outside)) == ["f.txt", "sub"]
    assert (outside / "f.txt").read_text() == "TOPSECRET\n"
    assert os.stat(outside).st_uid == os.geteuid()
    assert not [r.text for r in results if "TOPSECRET" in r.text]


async def test_file_tools_racing_a_swap_never_leave_the_root(
    kernel: str, arena: tuple[Path, Path, Watch]
) -> None:
    root, outside, watch = arena
    backend = FilesystemBackend(root)
    results: list[ToolResult] = []
    with swapping(root, "d", "l") as swaps:
        for n in for_seconds(SECONDS):
            results += await asyncio.gather(
                call_tool(backend, "read_file", file_path="/d/f.txt"),
                call_tool(backend, "write_file", file_path=f"/d/new{n}.txt", content="x"),
                call_tool(backend, "write_file", file_path=f"/d/sub/new{n}.txt", content="x"),
                call_tool(
                    backend, "edit_file", file_path="/d/f.txt", old_string="in", new_string="in"
                ),
                call_tool(backend, "ls", path="/d"),
                call_tool(backend, "glob", pattern="**/*"),
                call_tool(backend, "grep", pattern="TOP.ECRET|inside", output_mode="content"),
            )
    assert swaps[0] > 50
    _untouched(outside, watch, results)
    read = [r.text for r in results if r.name == "read_file" and not r.is_error]
    refused = [r.text for r in results if r.name == "read_file" and r.is_error]
    assert read
    assert set(read) == {"1\tinside"}
    assert all(
        "symbolic link" in text or "No such" in text or "is a file" in text for text in refused
    ), set(refused)


@pytest.mark.skipif(shutil.which("bwrap") is None, reason="bubblewrap is not installed")
async def test_a_sandboxed_command_swapping_while_tools_run_cannot_lead_them_out(
    arena: tuple[Path, Path, Watch],
) -> None:
    from tether.backends.sandbox import LocalSandbox

    root, outside, watch = arena
    sandbox = LocalSandbox(root, timeout_seconds=30)
    swapper = (
        'python3 -c "import ctypes, time\n'
        "libc = ctypes.CDLL(None); end = time.time() + " + str(SECONDS) + "\n"
        "n = 0\n"
        "while time.time() < end:\n"
        "    n += libc.renameat2(-100, b'd', -100, b'l', 2) == 0\n"
        "print('swaps', n)\""
    )
    results: list[ToolResult] = []

    async def tools() -> None:
        await asyncio.sleep(0.3)  # the command has started swapping
        for n in for_seconds(SECONDS - 0.5):
            results.extend(
                await asyncio.gather(
                    call_tool(sandbox, "read_file", file_path="/d/f.txt"),
                    call_tool(sandbox, "write_file", file_path=f"/d/new{n}.txt", content="x"),
                    call_tool(sandbox, "grep", pattern="TOP.ECRET|inside"),
                )
            )

    done, _ = await asyncio.gather(sandbox.execute(swapper), tools())
    sandbox.close()
    assert done.exit_code == 0, done.output
    assert int(done.output.split()[-1]) > 50
    _untouched(outside, watch, results)
    assert any(r.name == "read_file" and not r.is_error for r in results)


@pytest.mark.skipif(shutil.which("bwrap") is None, reason="bubblewrap is not installed")
async def test_saved_output_does_not_follow_a_planted_symlink(
    arena: tuple[Path, Path, Watch],
) -> None:
    from tether.backends.sandbox import LocalSandbox

    root, outside, watch = arena
    sandbox = LocalSandbox(root, max_output_chars=1_000)
    planted = await sandbox.execute(f"ln -s {outside} large_tool_results && seq 1 100000")
    sandbox.close()
    assert planted.truncated
    assert planted.full_output is None
    assert "could not be saved: /large_tool_results is not a plain directory" in planted.output
    _untouched(outside, watch, [])
