"""Every sandbox backend, for the suites that each must pass: `LocalSandbox` (bubblewrap)
and `ContainerSandbox` on podman and on docker. A backend this machine cannot run is
skipped with the reason (`make test` prepares them: scripts/containers-for-tests.sh).
"""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from tether.backends.sandbox import SandboxBackend

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
