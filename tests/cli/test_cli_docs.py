"""The CLI's documentation tells the truth: the recorded session in the guide is what
`tether` prints, the commands the guide lists exist, and the reference names every
command, option, exit code, setting and environment variable the command has."""

from __future__ import annotations

import argparse
import re
from collections.abc import Iterator
from pathlib import Path

import pytest

DOCS = Path(__file__).resolve().parent.parent.parent / "docs"
GUIDE = DOCS / "guides" / "cli.md"
REFERENCE = DOCS / "reference" / "cli.md"


def _block(kind: str, first_line: str) -> str:
    blocks = re.findall(rf"```{kind}\n(.*?)```", GUIDE.read_text(), flags=re.DOTALL)
    (found,) = [b for b in blocks if b.startswith(first_line)]
    return str(found)


def _words(lines: list[str]) -> list[str]:
    """The words a screen shows, with what differs from run to run masked: thread ids,
    numbers (tokens, times), line wrapping and rule widths, and a live footer the
    terminal had not erased yet when the screen was read."""
    text = "\n".join(lines)
    text = re.sub(r"[\u2800-\u28ff] step [^\n]*?(?=  [✓✗↩]|\n|$)", "", text)
    text = re.sub(r"thread_[0-9a-f]{16}", "thread_ID", text.replace("─", " "))
    return re.sub(r"\d[\d,]*(\.\d+)?", "N", text).split()


def test_the_recorded_session_is_what_tether_prints(tmp_path: Path) -> None:
    import json
    import shlex

    import pexpect
    import pyte

    from tests.cli.test_chat import PROMPT, session, terminal

    transcript = _block("text", "$ tether --model test:").rstrip("\n").splitlines()
    script = json.loads(_block("json", "["))
    project = tmp_path / "project"
    project.mkdir()
    (project / "hello.py").write_text('print("hi")\n')
    (project / "demo.json").write_text(json.dumps(script))
    args = shlex.split(transcript[0].removeprefix("$ tether"))
    steps: list[tuple[str | None, str]] = []
    for line in transcript[1:]:
        if line.startswith("> "):
            steps.append((None, line[2:]))
        elif "re[s]pond? " in line:
            steps.append(("re[s]pond? ", line.split("re[s]pond? ")[1]))
    rows, columns = 200, 200
    env = terminal(tmp_path, COLUMNS=str(columns))
    child = session(project, env, *args, size=(rows, columns))
    seen = []
    for wait, typed in steps:
        if wait is None:
            child.expect(PROMPT)
        else:
            child.expect_exact(wait)
        seen.append(child.before + child.after)
        child.sendline(typed)
    child.expect(pexpect.EOF)
    seen.append(child.before)
    screen = pyte.Screen(columns, rows)
    pyte.Stream(screen).feed("".join(seen))
    shown = [line.rstrip() for line in screen.display]
    while shown and not shown[-1]:
        shown.pop()
    assert _words(shown) == _words(transcript[1:])


def test_the_commands_the_cli_guide_lists_exist() -> None:
    import shlex

    from tether.cli import _parser, _with_command

    listed = _block("sh", "tether                           # a conversation")
    for line in listed.splitlines():
        words = shlex.split(line.split("#")[0])
        assert words[0] == "tether", line
        _parser().parse_args(_with_command(words[1:]))  # exits (a failure) on an unknown one


# -- the reference is complete ------------------------------------------------------------


def _commands() -> Iterator[tuple[str, argparse.ArgumentParser]]:
    """The parser itself, as "tether", and each subcommand's parser, by name."""
    from tether.cli import _parser

    parser = _parser()
    yield "tether", parser
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            yield from action.choices.items()


def _options() -> set[str]:
    return {
        option
        for _, parser in _commands()
        for action in parser._actions
        for option in action.option_strings
        if option not in ("-h", "--help")
    }


def _mentioned(option: str, text: str) -> bool:
    """Whether the page names `option` as an option (not as part of a longer one)."""
    return re.search(rf"`{re.escape(option)}(?![\w-])", text) is not None


def test_the_reference_names_every_command() -> None:
    text = REFERENCE.read_text()
    missing = [name for name, _ in _commands() if f"### `tether {name}`" not in text]
    assert not missing[1:], f"commands without a section in {REFERENCE.name}: {missing[1:]}"


@pytest.mark.parametrize("option", sorted(_options()))
def test_the_reference_names_every_option(option: str) -> None:
    assert _mentioned(option, REFERENCE.read_text()), f"{option} is not in {REFERENCE.name}"


def test_the_reference_names_every_exit_code() -> None:
    from tether.cli import _EPILOG, EXIT_CODES, _parser

    assert _parser().epilog == _EPILOG
    said = _EPILOG.split("exit codes:")[1].split("Settings come from")[0]
    codes = set(EXIT_CODES.values()) | {int(code) for code in re.findall(r"\b\d+\b", said)}
    text = REFERENCE.read_text()
    missing = sorted(code for code in codes if f"| `{code}` |" not in text)
    assert not missing, f"exit codes without a row in {REFERENCE.name}: {missing}"


def test_the_reference_names_every_setting_and_variable() -> None:
    from pydantic import BaseModel

    from tether.cli._config import ENVIRONMENT, Settings

    def keys(model: type[BaseModel]) -> Iterator[str]:
        for name, field in model.model_fields.items():
            yield name
            inner = getattr(field.annotation, "__args__", None) or (field.annotation,)
            for kind in inner:
                if isinstance(kind, type) and issubclass(kind, BaseModel):
                    yield from keys(kind)
                for nested in getattr(kind, "__args__", ()):  # list[...], dict[str, ...]
                    if isinstance(nested, type) and issubclass(nested, BaseModel):
                        yield from keys(nested)

    text = REFERENCE.read_text()
    missing = [key for key in [*keys(Settings), *ENVIRONMENT] if f"`{key}`" not in text]
    assert not missing, f"settings or variables not in {REFERENCE.name}: {missing}"
