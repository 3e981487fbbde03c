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
    blocks = re.findall(r"```python\n(.*?)```", README.read_text(), flags=re.DOTALL)
    assert len(blocks) >= 6
    namespace: dict[str, object] = {"__name__": "readme"}
    for number, block in enumerate(blocks, start=1):
        code = compile(block, f"README.md python block {number}", "exec")
        exec(code, namespace)
