"""Every `.git` at any depth, and every directory git would take for a repository's,
is out of the file tools' reach: a submodule's `.git` file cannot be pointed elsewhere,
no `.git` can be planted, no git directory changed or made, whatever the approval
mode. Through the real command and a real `git status`, and as a property of the
backend over any sequence of writes."""

from __future__ import annotations

import asyncio
import contextlib
import json
import multiprocessing
import subprocess
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.cli.test_cli import environment, scripted, tether
from tether.backends.errors import BackendError
from tether.backends.filesystem import FilesystemBackend


def _git(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["git", "-c", "safe.directory=*", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        env={**environment(), "GIT_CONFIG_NOSYSTEM": "1", "HOME": str(cwd.parent)},
    )


@pytest.fixture
def repository(tmp_path: Path) -> Path:
    """A git repository with two submodules' git directories: one under .git/modules,
    one (as `git worktree` or an old git would leave it) outside any `.git`."""
    root = tmp_path / "repo"
    root.mkdir()
    assert _git("init", "-q", cwd=root).returncode == 0
    (root / "README.md").write_text("# Repo\n")
    for name, gitdir in (("sub", ".git/modules/sub"), ("vendor", "store/vendor-git")):
        assert _git("init", "-q", "--bare", gitdir, cwd=root).returncode == 0
        (root / name).mkdir()
        (root / name / ".git").write_text(f"gitdir: {root / gitdir}\n")
        (root / name / "x.txt").write_text("x\n")
    return root


def _fsmonitor(marker: Path) -> str:
    return f"[core]\n\tfsmonitor = touch {marker}\n"


def _attacks(marker: Path) -> list[dict[str, Any]]:
    config = _fsmonitor(marker)
    write = "write_file"
    return [
        {
            "tool": "edit_file",
            "args": {
                "file_path": "/sub/.git",
                "old_string": "gitdir: ",
                "new_string": "gitdir: /evil #",
            },
        },
        {"tool": write, "args": {"file_path": "/sub/.git", "content": "gitdir: ../evil\n"}},
        {"tool": write, "args": {"file_path": "/docs/.git", "content": "gitdir: ../evil\n"}},
        {"tool": write, "args": {"file_path": "/store/vendor-git/config", "content": config}},
        {"tool": write, "args": {"file_path": "/.git/modules/sub/config", "content": config}},
        {"tool": write, "args": {"file_path": "/.GIT/config", "content": config}},
        {"tool": write, "args": {"file_path": "/a/b/c/.git/config", "content": config}},
        {"tool": write, "args": {"file_path": "/evil/refs/heads/main", "content": "0" * 40}},
        {"tool": write, "args": {"file_path": "/evil/config", "content": config}},
        {"tool": write, "args": {"file_path": "/evil/HEAD", "content": "ref: refs/heads/main\n"}},
        {"tool": write, "args": {"file_path": "/evil2/HEAD", "content": "ref: refs/heads/x\n"}},
        {"tool": write, "args": {"file_path": "/evil2/objects/info/x", "content": ""}},
    ]


def test_no_file_tool_reaches_any_git_directory_in_accept_edits(
    repository: Path, tmp_path: Path
) -> None:
    marker = tmp_path / "pwned"
    attacks = _attacks(marker)
    before = {p: p.read_bytes() for p in repository.rglob("*") if p.is_file()}
    model = scripted(repository, "attack.json", [attacks, "done"])
    env = environment(XDG_CONFIG_HOME=str(tmp_path / "config"))
    done = tether(
        repository,
        "run",
        "--json",
        "--mode",
        "accept-edits",
        "--no-sandbox",
        "--model",
        model,
        "Go.",
        env=env,
    )
    assert done.returncode == 0, done.stderr
    events = [json.loads(line) for line in done.stdout.splitlines()]
    results = {
        e["call"]["provider_id"]: e["result"] for e in events if e["kind"] == "tool_call_finished"
    }
    assert len(results) == len(attacks)
    refused = [r for r in results.values() if r["is_error"]]
    written = [r["content"] for r in results.values() if not r["is_error"]]
    # Calls on different paths run at once, in any order: of each would-be repository,
    # the pieces before the one that completes it are written (they are harmless alone).
    assert len(written) == 3, written
    assert all("git" in str(r["content"]) for r in refused)
    for path, content in before.items():
        assert path.read_bytes() == content, path
    assert not (repository / "docs" / ".git").exists()
    assert not (repository / ".GIT").exists()
    assert not (repository / "a").exists()
    assert _git_shaped(repository / "evil") == []
    assert _git_shaped(repository / "evil2") == []
    for where in (repository, repository / "sub", repository / "vendor", repository / "evil"):
        _git("status", cwd=where)
    assert not marker.exists()


def test_reading_git_files_still_works(repository: Path) -> None:
    backend = FilesystemBackend(repository)
    assert asyncio.run(backend.read("/sub/.git")).startswith(b"gitdir: ")
    assert b"[core]" in asyncio.run(backend.read("/.git/config"))


def test_a_repository_can_be_worked_on_next_to_its_git_files(repository: Path) -> None:
    backend = FilesystemBackend(repository)
    for path in ("/sub/x.txt", "/.gitignore", "/sub/.gitmodules", "/src/HEAD", "/objects/a"):
        asyncio.run(backend.write(path, b"fine\n"))
    with pytest.raises(BackendError, match="git reads as its own files"):
        asyncio.run(backend.write("/src/refs", b"x"))  # /src now holds HEAD


# -- the property: no sequence of writes makes or changes a git directory ------------

_NAMES = st.sampled_from(["a", "b", ".git", ".Git", "HEAD", "objects", "refs", "commondir"])
_PATHS = st.lists(_NAMES, min_size=1, max_size=4).map(lambda parts: "/" + "/".join(parts))


def _git_shaped(root: Path) -> list[Path]:
    found = []
    for directory in [root, *(p for p in root.rglob("*") if p.is_dir())]:
        names = {p.name for p in directory.iterdir()}
        if "HEAD" in names and names & {"objects", "refs", "commondir"}:
            found.append(directory)
        found += [directory / n for n in names if n.casefold() == ".git"]
    return found


@settings(max_examples=200, deadline=None)
@given(st.lists(_PATHS, max_size=12))
def test_no_sequence_of_writes_makes_anything_git_would_read(
    tmp_path_factory: pytest.TempPathFactory, paths: list[str]
) -> None:
    root = tmp_path_factory.mktemp("tree")
    backend = FilesystemBackend(root)

    async def write_all() -> None:
        for path in paths:
            with contextlib.suppress(BackendError):
                await backend.write(path, b"x")

    asyncio.run(write_all())
    assert _git_shaped(root) == []


def test_a_mark_in_another_case_completes_nothing(tmp_path: Path) -> None:
    backend = FilesystemBackend(tmp_path)
    asyncio.run(backend.write("/x/objects/a", b""))
    for name in ("head", "Head", "HEAD"):  # one name on a case-insensitive filesystem
        with pytest.raises(BackendError, match="git reads as its own files"):
            asyncio.run(backend.write(f"/x/{name}", b"ref: refs/heads/main\n"))


def _write_pieces(root: str, piece: str, start: Any) -> None:
    backend = FilesystemBackend(root)
    start.wait()

    async def write_all() -> None:
        for i in range(200):
            with contextlib.suppress(BackendError):
                await backend.write(f"/d{i}/{piece}", b"x")

    asyncio.run(write_all())


def test_processes_writing_at_once_complete_no_git_directory(tmp_path: Path) -> None:
    context = multiprocessing.get_context("spawn")
    start = context.Barrier(3)
    pieces = ("HEAD", "objects/a", "refs/a")
    workers = [
        context.Process(target=_write_pieces, args=(str(tmp_path), piece, start))
        for piece in pieces
    ]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join(timeout=300)
        assert worker.exitcode == 0
    assert _git_shaped(tmp_path) == []


def test_a_write_shaping_a_directory_does_not_wait_for_a_running_command(tmp_path: Path) -> None:
    """A sandboxed command holds its workspace's flock while it runs; the guard's own
    lock is elsewhere, so a file call beside it goes on."""
    import fcntl
    import os

    held = os.open(tmp_path, os.O_RDONLY | os.O_DIRECTORY)
    fcntl.flock(held, fcntl.LOCK_EX)  # as `LocalSandbox` does for a command's length
    try:
        backend = FilesystemBackend(tmp_path)
        asyncio.run(backend.write("/objects/a", b"x"))
        asyncio.run(backend.write("/refs/b", b"y"))
    finally:
        os.close(held)
    assert (tmp_path / "objects" / "a").read_bytes() == b"x"
