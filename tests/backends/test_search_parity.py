"""glob and grep give the same results with ripgrep and with the pure-Python walk."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from tether.backends import FilesystemBackend

from .conftest import call_tool

if shutil.which("rg") is None:
    # CI installs ripgrep (make test); elsewhere the parity cannot be checked.
    pytestmark = pytest.mark.skipif(not os.environ.get("CI"), reason="rg is not installed")


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    files = {
        "README.md": "# Demo\nTODO: write docs\n",
        "src/app.py": "import os\n\ndef main():\n    return os.getcwd()  # TODO\n",
        "src/util/helpers.py": "def helper(x):\n    return x * 2\r\nTODO = 1\n",
        "src/util/__init__.py": "",
        "src/ünïcode.py": "naïve = 'café'\n",
        "docs/guide.txt": "line one\nline two\nno newline at the end",
        ".env": "SECRET=todo\n",
        ".config/settings.toml": "[tool]\nname = 'todo'\n",
        "data/blob.bin": "TODO\x00binary",
        "deep/a/b/c/d/e.py": "TODO deep\n",
        ".git/config": "[core]\nTODO = git internals\n",
        "node_modules/pkg/index.js": "// TODO vendored\n",
    }
    for name, text in files.items():
        path = tmp_path / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(text.encode())
    (tmp_path / "src" / "link.py").symlink_to(tmp_path / "src" / "app.py")
    (tmp_path / ".gitignore").write_text("node_modules/\n")  # ignored by neither
    return tmp_path


GLOBS = [
    ("**/*.py", "/"),
    ("*.md", "/"),
    ("**/*", "/src"),
    ("**/.*", "/"),
    ("src/**/*.{py,txt}", "/"),
    ("/deep/**/e.py", "/"),
    ("**/*.js", "/"),
    ("*", "/docs"),
]

GREPS = [
    {"pattern": "TODO"},
    {"pattern": "todo", "ignore_case": True, "output_mode": "content"},
    {"pattern": r"def \w+\(", "output_mode": "content"},
    {"pattern": "x * 2", "literal": True, "output_mode": "content"},
    {"pattern": "TODO", "glob": "*.py", "output_mode": "count"},
    {"pattern": "TODO", "path": "/src", "output_mode": "content", "context_lines": 1},
    {"pattern": "end$", "output_mode": "content"},
    {"pattern": "café", "output_mode": "content"},
    {"pattern": r"\r$", "output_mode": "content"},
    {"pattern": "nothing-matches-this"},
]


@pytest.mark.parametrize(("pattern", "path"), GLOBS)
async def test_glob_is_the_same_with_and_without_rg(tree: Path, pattern: str, path: str) -> None:
    with_rg = await call_tool(
        FilesystemBackend(tree, use_ripgrep=True), "glob", pattern=pattern, path=path
    )
    without = await call_tool(
        FilesystemBackend(tree, use_ripgrep=False), "glob", pattern=pattern, path=path
    )
    assert with_rg.text == without.text
    assert ".git/" not in with_rg.text
    assert "/src/link.py" not in with_rg.text  # symlinks are not followed by either


@pytest.mark.parametrize("args", GREPS, ids=[str(g) for g in GREPS])
async def test_grep_is_the_same_with_and_without_rg(tree: Path, args: dict[str, object]) -> None:
    with_rg = await call_tool(FilesystemBackend(tree, use_ripgrep=True), "grep", **args)
    without = await call_tool(FilesystemBackend(tree, use_ripgrep=False), "grep", **args)
    assert with_rg.text == without.text
    assert "blob.bin" not in with_rg.text  # binary files are skipped


async def test_the_tree_is_searched_whole(tree: Path) -> None:
    for rg in (True, False):
        found = await call_tool(FilesystemBackend(tree, use_ripgrep=rg), "grep", pattern="TODO")
        assert found.text.split("\n") == [
            "/README.md",
            "/deep/a/b/c/d/e.py",
            "/node_modules/pkg/index.js",  # .gitignore does not hide files from the agent
            "/src/app.py",
            "/src/util/helpers.py",
        ]
