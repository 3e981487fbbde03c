"""The README's Python examples run, in order, as one session."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

README = Path(__file__).resolve().parent.parent / "README.md"


def test_the_readme_examples_run(monkeypatch: pytest.MonkeyPatch) -> None:
    # The model examples build real provider models; none of them sends a request.
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-readme")
    monkeypatch.setenv("OPENAI_API_KEY", "sk-readme")
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    monkeypatch.setenv("TETHER_SERVE_TOKEN", "readme-token-0123456789")
    blocks = re.findall(r"```python\n(.*?)```", README.read_text(), flags=re.DOTALL)
    assert len(blocks) >= 6
    namespace: dict[str, object] = {"__name__": "readme"}
    for number, block in enumerate(blocks, start=1):
        code = compile(block, f"README.md python block {number}", "exec")
        exec(code, namespace)


def _block(kind: str, first_line: str) -> str:
    blocks = re.findall(rf"```{kind}\n(.*?)```", README.read_text(), flags=re.DOTALL)
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


def test_the_commands_the_readme_lists_exist() -> None:
    import shlex

    from tether.cli import _parser, _with_command

    listed = _block("sh", "tether                           # a conversation")
    for line in listed.splitlines():
        words = shlex.split(line.split("#")[0])
        assert words[0] == "tether", line
        _parser().parse_args(_with_command(words[1:]))  # exits (a failure) on an unknown one
