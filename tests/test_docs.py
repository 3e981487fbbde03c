"""Every code block of the documentation runs, each on its own.

A ```python block runs alone in a fresh working directory: imports included, nothing
taken from the block before it. Lines `#> ...` right after a `print(...)` are the
output it must print; `pytest tests/test_docs.py --update-examples` rewrites them.
A ```toml block parses, and one that starts with `# tether.toml` is a valid tether
configuration. Each line of a ```sh block that runs `tether` parses as a tether command.
"""

from __future__ import annotations

import json
import re
import shlex
import tomllib
from pathlib import Path

import pytest
from pytest_examples import CodeExample, EvalExample, find_examples

ROOT = Path(__file__).resolve().parent.parent
PAGES = sorted([ROOT / "README.md", *(ROOT / "docs").rglob("*.md")])


def _python_examples() -> list[CodeExample]:
    return [e for page in PAGES for e in find_examples(page) if e.prefix.startswith("python")]


def _blocks(kind: str) -> list[tuple[str, str]]:
    """(where, text) of every fenced block of `kind` on every page."""
    found = []
    for page in PAGES:
        text = page.read_text()
        for match in re.finditer(rf"^```{kind}\n(.*?)^```", text, flags=re.M | re.S):
            line = text[: match.start()].count("\n") + 1
            found.append((f"{page.relative_to(ROOT)}:{line}", match.group(1)))
    return found


@pytest.fixture
def fresh_directory(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A working directory of its own, and the settings the examples assume: provider
    models are built with a placeholder key (no example sends a request)."""
    workdir = tmp_path / "work"
    workdir.mkdir()
    monkeypatch.chdir(workdir)
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-docs")
    monkeypatch.setenv("OPENAI_API_KEY", "sk-docs")
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    monkeypatch.setenv("TETHER_SERVE_TOKEN", "docs-token-0123456789")
    return workdir


@pytest.mark.parametrize("example", _python_examples(), ids=str)
def test_each_python_block_runs_on_its_own(
    example: CodeExample, eval_example: EvalExample, fresh_directory: Path
) -> None:
    eval_example.set_config(line_length=100, target_version="py311")
    if eval_example.update_examples:
        eval_example.run_print_update(example)
    else:
        eval_example.run_print_check(example)


@pytest.mark.parametrize(("where", "text"), _blocks("toml"), ids=lambda v: v[:40])
def test_each_toml_block_parses(where: str, text: str, tmp_path: Path) -> None:
    parsed = tomllib.loads(text)
    if text.startswith("# tether.toml"):
        from tether.cli._config import load

        (tmp_path / "tether.toml").write_text(text)
        loaded = load(tmp_path, environ={"HOME": str(tmp_path)}, flags={})
        assert loaded.file is not None, where
    assert parsed is not None, where


@pytest.mark.parametrize(("where", "text"), _blocks("json"), ids=lambda v: v[:40])
def test_each_json_block_parses(where: str, text: str) -> None:
    json.loads(text)


def _tether_lines() -> list[tuple[str, str]]:
    lines = []
    for where, text in _blocks("sh"):
        for line in text.splitlines():
            command = line.split(" #")[0].removeprefix("$ ").strip()
            if command.startswith("tether ") or command == "tether":
                lines.append((where, command))
    return lines


@pytest.mark.parametrize(("where", "command"), _tether_lines(), ids=lambda v: v[:60])
def test_each_tether_command_shown_parses(where: str, command: str) -> None:
    from tether.cli import _parser, _with_command

    words = shlex.split(command)
    try:
        _parser().parse_args(_with_command(words[1:]))
    except SystemExit as exited:  # argparse exits on an unknown command or option
        pytest.fail(f"{where}: `{command}` does not parse (exit {exited.code})")


def test_the_api_reference_covers_every_public_name() -> None:
    import tether

    reference = "\n".join(p.read_text() for p in (ROOT / "docs/reference/api").glob("*.md"))
    shown = set(re.findall(r"[A-Za-z_][A-Za-z0-9_]*", reference))
    missing = [name for name in tether.__all__ if name not in shown]
    assert not missing, f"not in docs/reference/api: {missing}"
