"""run() works with and without a running event loop, never deadlocking."""

from __future__ import annotations

import threading

from tether import create_agent, tool
from tether.messages import ToolCall
from tether.models import ScriptedModel


def test_run_without_a_loop() -> None:
    assert create_agent(ScriptedModel(["hi"])).run("go").output == "hi"


async def test_run_inside_a_running_loop_uses_a_worker_thread() -> None:
    threads: list[str] = []

    @tool
    async def where() -> str:
        """Where."""
        threads.append(threading.current_thread().name)
        return "here"

    agent = create_agent(ScriptedModel([[ToolCall("where")], "done"]), tools=[where])
    result = agent.run("go")  # called from inside this test's event loop, as in Jupyter
    assert result.output == "done"
    assert threads[0].startswith("tether-run")
