"""A limit the user set holds whatever the model asks: the smaller of the two wins."""

from __future__ import annotations

from pathlib import Path

from tests.conftest import by_server_id
from tether import create_agent
from tether.backends.sandbox import UnsafeLocalShell
from tether.messages import ToolCall
from tether.models import ScriptedModel


def test_the_model_cannot_lengthen_the_sandbox_timeout(tmp_path: Path) -> None:
    model = ScriptedModel(
        [
            [ToolCall("execute", {"command": "sleep 6", "timeout_seconds": 10**9}, id="long")],
            [ToolCall("execute", {"command": "sleep 6", "timeout_seconds": 1}, id="short")],
            "done",
        ]
    )
    agent = create_agent(model, backend=UnsafeLocalShell(tmp_path, timeout_seconds=2))
    result = agent.run("go")
    answers = by_server_id(result.messages)  # by the ids the script gave the calls
    assert "ran longer than 2 s" in answers["long"].text
    assert "ran longer than 1 s" in answers["short"].text  # shortening is allowed


async def test_a_backend_limit_holds_for_direct_calls_too(tmp_path: Path) -> None:
    shell = UnsafeLocalShell(tmp_path, timeout_seconds=1)
    result = await shell.execute("sleep 5", timeout_seconds=3600)
    assert result.timed_out
    assert "ran longer than 1 s" in result.output
