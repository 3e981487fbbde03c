"""Every sandbox backend, for the suites that each must pass: `LocalSandbox` (bubblewrap)
and `ContainerSandbox` on podman and on docker. A backend this machine cannot run is
skipped with the reason (`make test` prepares them: scripts/containers-for-tests.sh).
"""

from __future__ import annotations

import asyncio
import os
import shutil
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from tether.backends.sandbox import SandboxBackend
from tether.backends.sandbox.remote import RemoteSandbox

KINDS = ("local", "podman", "docker")
DOCKER_IMAGE = "tether-sandbox-test"
MakeSandbox = Callable[..., SandboxBackend]


def unavailable(kind: str) -> str | None:
    """Why `kind` cannot run here, or None."""
    if kind == "local":
        return None if shutil.which("bwrap") else "needs bubblewrap"
    rootfs = os.environ.get("TETHER_TEST_ROOTFS")
    missing = [
        (os.geteuid() != 0, "the container engines enforce limits here only as root"),
        (
            not rootfs or not Path(rootfs, "bin", "sh").exists(),
            "needs TETHER_TEST_ROOTFS (scripts/containers-for-tests.sh builds one)",
        ),
        (shutil.which(kind) is None, f"needs {kind}"),
        (
            kind == "docker" and not os.environ.get("DOCKER_HOST"),
            "needs DOCKER_HOST (scripts/containers-for-tests.sh starts a daemon)",
        ),
    ]
    for true, why in missing:
        if true:
            return why
    if kind == "docker":
        found = subprocess.run(
            ["docker", "image", "inspect", DOCKER_IMAGE], capture_output=True, check=False
        )
        if found.returncode != 0:
            return f"needs the image {DOCKER_IMAGE} (scripts/containers-for-tests.sh)"
    return None


def make(kind: str, workspace: Path, **options: Any) -> SandboxBackend:
    """A sandbox of `kind` on `workspace`; options shared by all are passed on, and
    `cpu_seconds` only to the one that has it."""
    from tether.backends.sandbox import LocalSandbox
    from tether.backends.sandbox.container import ContainerSandbox

    if kind == "local":
        return LocalSandbox(workspace, **options)
    options.pop("cpu_seconds", None)
    if kind == "podman":
        return ContainerSandbox(
            workspace, engine="podman", rootfs=os.environ["TETHER_TEST_ROOTFS"], **options
        )
    return ContainerSandbox(workspace, engine="docker", image=DOCKER_IMAGE, **options)


@pytest.fixture
def project(tmp_path: Path) -> Path:
    """A workspace with a git directory and run records, as the `tether` command has."""
    root = tmp_path / "project"
    (root / ".git" / "hooks").mkdir(parents=True)
    (root / ".git" / "config").write_text("[core]\n")
    (root / ".tether").mkdir()
    (root / ".tether" / "runs.db").write_text("records")
    (root / "src").mkdir()
    (root / "src" / "app.py").write_text("print('hi')\n")
    return root


@pytest.fixture(params=KINDS)
def make_sandbox(request: pytest.FixtureRequest) -> Iterator[MakeSandbox]:
    """Makes sandboxes of one kind (the test runs once per kind); closed afterwards."""
    kind: str = request.param
    why = unavailable(kind)
    if why is not None:
        pytest.skip(f"{kind}: {why}")
    made: list[SandboxBackend] = []

    def factory(workspace: Path, **options: Any) -> SandboxBackend:
        made.append(make(kind, workspace, **options))
        return made[-1]

    factory.kind = kind  # type: ignore[attr-defined]
    yield factory
    for sandbox in made:
        close = getattr(sandbox, "close", None)
        if close is not None:
            close()


class DirectoryRemote(RemoteSandbox):
    """A "remote" machine that is a directory here: commands run with /bin/sh, files are
    read and written directly. What `RemoteSandbox` builds on its three methods is
    tested through it, against a real shell, find and stat."""

    def __init__(self, machine: Path, **options: Any) -> None:
        machine.mkdir(parents=True, exist_ok=True)
        self.machine = machine
        super().__init__(workdir=str(machine / "workspace"), **options)

    async def run(self, command: str, timeout_seconds: float) -> tuple[str, int | None]:
        process = await asyncio.create_subprocess_exec(
            "/bin/sh", "-c", command,
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
            start_new_session=True,
        )  # fmt: skip
        try:
            async with asyncio.timeout(timeout_seconds):
                output, _ = await process.communicate()
        except TimeoutError:
            os.killpg(process.pid, 9)
            await process.wait()
            return "", None
        return output.decode("utf-8", errors="replace"), process.returncode

    async def put(self, path: str, data: bytes) -> None:
        target = Path(path)
        await asyncio.to_thread(target.parent.mkdir, parents=True, exist_ok=True)
        await asyncio.to_thread(target.write_bytes, data)

    async def get(self, path: str) -> bytes | None:
        target = Path(path)
        if not await asyncio.to_thread(target.is_file):
            return None
        return await asyncio.to_thread(target.read_bytes)
