"""glob and grep give the same results on a real directory, in memory and in a store: one
search code and one regex dialect (RE2) for every backend."""

from __future__ import annotations

from pathlib import Path

import pytest

from tether.backends import Backend, FilesystemBackend, StateBackend, StoreBackend
from tether.stores import InMemoryStore

from .conftest import call_tool


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    files = {
        "README.md": "# Demo\nTODO: write docs\n",
        "src/app.py": "import os\n\ndef main():\n    return os.getcwd()  # TODO\n",
        "src/util/helpers.py": "def helper(x):\n    return x * 2\r\nTODO = 1\n",
        "src/util/__init__.py": "",
        "src/ünïcode.py": "naïve = 'café'\n",
        "docs/guide.txt": "line one\nline two\nno newline at the end",
        "docs/regex.txt": "aa{,3}\nabab\nfoobar\nx = y\n",
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
    # The dialect is RE2 on every backend, where Python's `re` differed before:
    {"pattern": "a{,3}", "output_mode": "content"},  # literal text, not a repetition
    {"pattern": r"bar\z", "output_mode": "content"},  # \z ends the line
    {"pattern": r"(?P<two>ab){2}", "output_mode": "content"},  # named groups work
    {"pattern": r"[[:alpha:]]+ = ", "output_mode": "content"},  # POSIX classes work
    {"pattern": r"(?<=foo)bar"},  # refused: no lookbehind
    {"pattern": r"(?!foo)bar"},  # refused: no lookahead
    {"pattern": r"(ab)\1"},  # refused: no backreferences
    {"pattern": r"bar\Z"},  # refused: \Z is Python's
    {"pattern": "(a+)+$", "output_mode": "count"},  # catastrophic for a backtracker
    {"pattern": "\ud800"},  # refused: not valid Unicode
    {"pattern": "caf.", "output_mode": "content"},  # "." is one character, é included
]


def _in_memory(tree: Path) -> StateBackend:
    """The files the FilesystemBackend searches (no .git, no symlinks), in memory."""
    files = {}
    for path in sorted(tree.rglob("*")):
        relative = path.relative_to(tree)
        if path.is_file() and not path.is_symlink() and ".git" not in relative.parts:
            files["/" + relative.as_posix()] = (path.read_bytes(), 0.0)
    return StateBackend(files)


@pytest.mark.parametrize(("pattern", "path"), GLOBS)
async def test_glob_is_the_same_on_disk_and_in_memory(tree: Path, pattern: str, path: str) -> None:
    on_disk = await call_tool(FilesystemBackend(tree), "glob", pattern=pattern, path=path)
    in_memory = await call_tool(_in_memory(tree), "glob", pattern=pattern, path=path)
    assert on_disk.text == in_memory.text
    assert ".git/" not in on_disk.text
    assert "/src/link.py" not in on_disk.text  # symlinks are not followed


async def _in_store(tree: Path) -> StoreBackend:
    backend = StoreBackend(InMemoryStore())
    for path, (data, _) in _in_memory(tree).data.items():
        await backend.store.put(backend.namespace, path, data)
    return backend


@pytest.mark.parametrize("args", GREPS, ids=[str(g) for g in GREPS])
async def test_grep_is_the_same_on_every_backend(tree: Path, args: dict[str, object]) -> None:
    backends: list[Backend] = [FilesystemBackend(tree), _in_memory(tree), await _in_store(tree)]
    results = [await call_tool(b, "grep", **args) for b in backends]
    assert len({(r.text, r.is_error) for r in results}) == 1, [r.text for r in results]
    assert "blob.bin" not in results[0].text  # binary files are skipped


async def test_the_dialect_is_re2(tree: Path) -> None:
    backend = _in_memory(tree)
    literal = await call_tool(backend, "grep", pattern="a{,3}", output_mode="content")
    assert literal.text == "/docs/regex.txt\n1:aa{,3}"
    refused = await call_tool(backend, "grep", pattern=r"(?<=foo)bar")
    assert refused.is_error
    assert "RE2 syntax, which has no lookbehind" in refused.text
    backreference = await call_tool(backend, "grep", pattern=r"(ab)\1")
    assert "no backreferences" in backreference.text


async def test_the_tree_is_searched_whole(tree: Path) -> None:
    found = await call_tool(FilesystemBackend(tree), "grep", pattern="TODO")
    assert found.text.split("\n") == [
        "/README.md",
        "/deep/a/b/c/d/e.py",
        "/node_modules/pkg/index.js",  # .gitignore does not hide files from the agent
        "/src/app.py",
        "/src/util/helpers.py",
    ]


async def test_patterns_anchored_to_the_whole_text_match_each_line(tree: Path) -> None:
    """The whole-file first pass must not hide matches that only the line pass sees."""
    for pattern in (r"\Adef", r"TODO\z", "^def", r"TODO$"):
        on_disk = await call_tool(FilesystemBackend(tree), "grep", pattern=pattern)
        in_memory = await call_tool(_in_memory(tree), "grep", pattern=pattern)
        assert on_disk.text == in_memory.text, pattern
