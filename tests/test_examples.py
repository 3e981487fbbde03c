"""Every example runs with no key and no network: the demo on the offline model, the
others on their scripted turns."""

from __future__ import annotations

import importlib
import sys
from pathlib import Path

import pytest

from tether.testing import tool_results

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"


@pytest.fixture(autouse=True)
def scripted(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.syspath_prepend(str(EXAMPLES))


def run(name: str) -> object:
    module = importlib.import_module(name)
    try:
        return module.main()
    finally:
        sys.modules.pop(name, None)


def test_code_review_gives_a_checked_review() -> None:
    review = run("code_review")
    assert review.verdict == "request_changes"  # type: ignore[attr-defined]
    assert review.findings[0].severity == "bug"  # type: ignore[attr-defined]


def test_research_runs_two_subagents() -> None:
    result = run("research")
    assert sorted(result.usage_by_agent) == [  # type: ignore[attr-defined]
        "main",
        "main/task:researcher#1",
        "main/task:researcher#2",
    ]


def test_the_sandboxed_coding_task_runs_its_test() -> None:
    result = run("sandboxed_coding")
    assert "ok\n[exit code 0]" in [r.text for r in tool_results(result)]  # type: ignore[arg-type]


def test_the_memory_assistant_remembers_across_threads() -> None:
    agent, result = run("memory_assistant")  # type: ignore[misc]
    assert result.output.startswith("- Tabs.")
    prompt = agent.model.requests[0].system_prompt
    assert "- Prefers answers in bullet points." in prompt


def test_the_quickstart_runs() -> None:
    run("quickstart")


@pytest.mark.slow
def test_the_demo_runs_the_command_on_the_offline_model(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    module = importlib.import_module("demo")
    try:
        code = module.demo(tmp_path)
    finally:
        sys.modules.pop("demo", None)
    assert code == 0
    assert (tmp_path / "NOTES.md").read_text() == "Hello from tether"
    assert (tmp_path / "src" / "tether" / "cli" / "__init__.py").exists()  # a repository copy
    shown = capsys.readouterr().out
    assert "✓ write_file /NOTES.md" in shown
    assert 'Wrote "Hello from tether" to /NOTES.md.' in shown  # said from what was done
    assert "● completed" in shown
