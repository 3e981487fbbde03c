"""DaytonaSandbox through Daytona's own SDK, against a loopback server that speaks its
API (tests/daytona_server.py): a sandbox per thread, commands, the file tools, clean-up,
and the SDK's requests compared with those recorded when the adapter was written."""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import by_server_id
from tests.daytona_server import DaytonaServer, daytona_server
from tether import ConfigurationError, create_agent
from tether.backends.errors import BackendError
from tether.backends.sandbox import SandboxBackend
from tether.backends.sandbox.base import session
from tether.backends.sandbox.providers import sandbox
from tether.messages import ToolCall
from tether.models import ScriptedModel

pytest.importorskip("daytona")
from daytona import DaytonaConfig

RECORDED = Path(__file__).parents[1] / "recorded" / "daytona-0.226.json"


@pytest.fixture
def server(tmp_path: Path) -> Iterator[DaytonaServer]:
    with daytona_server(tmp_path / "daytona") as running:
        yield running


def _config(server: DaytonaServer) -> DaytonaConfig:
    return DaytonaConfig(api_key="test-key", api_url=f"{server.url}/api", target="us")


async def test_each_thread_gets_a_sandbox_and_the_sdk_says_what_it_said(
    server: DaytonaServer,
) -> None:
    box = sandbox("daytona", config=_config(server), timeout_seconds=5)
    assert isinstance(box, SandboxBackend)
    with session("a"):
        await box.write("/src/app.sh", b"echo from a\n")
        first = await box.execute("sh src/app.sh; exit 3")
        listed = [entry.path for entry in await box.ls("/src")]
        hits = await box.grep("from", "/")
    with session("b"):
        other = await box.execute("ls src 2>&1; echo end")
        slow = await box.execute("sleep 30")
    assert (first.output, first.exit_code) == ("from a\n", 3)
    assert listed == ["/src/app.sh"]
    assert [(hit.path, hit.line) for hit in hits] == [("/src/app.sh", 1)]
    assert "app.sh" not in other.output  # another sandbox
    assert slow.timed_out
    assert len(server.sandboxes) == 2
    with pytest.raises(BackendError, match=r"No such file: /missing\.txt"):
        await box.read("/missing.txt")
    await box.aclose()  # type: ignore[attr-defined]
    assert not server.sandboxes  # both deleted
    recorded = [tuple(request) for request in json.loads(RECORDED.read_text())]
    assert server.requests == recorded, json.dumps(server.requests)


def test_an_agent_works_in_a_daytona_sandbox(server: DaytonaServer) -> None:
    from tether.backends.sandbox.daytona import DaytonaSandbox

    model = ScriptedModel(
        [
            [ToolCall("write_file", {"file_path": "/n.txt", "content": "6 * 7"}, id="w")],
            [
                ToolCall(
                    "edit_file",
                    {"file_path": "/n.txt", "old_string": "6", "new_string": "7"},
                    id="e",
                )
            ],
            [ToolCall("execute", {"command": "echo $(( $(cat n.txt) ))"}, id="x")],
            "49",
        ]
    )
    box = DaytonaSandbox(config=_config(server))
    result = create_agent(model, backend=box).run("go", thread_id=None)
    assert by_server_id(result.messages)["x"].text == "49\n[exit code 0]"
    assert server.created[0]["labels"] == {"code-toolbox-language": "python"}


def test_without_the_sdk_the_error_says_what_to_install(monkeypatch: pytest.MonkeyPatch) -> None:
    from tether.backends.sandbox.daytona import DaytonaSandbox

    monkeypatch.setitem(sys.modules, "daytona", None)
    with pytest.raises(ConfigurationError, match=r"pip install 'tether\[daytona\]'"):
        DaytonaSandbox()


def test_a_later_run_of_the_thread_takes_its_sandbox_back(
    server: DaytonaServer, tmp_path: Path
) -> None:
    """The sandbox's id is recorded in the thread: a run of it in another process (another
    DaytonaSandbox here) works on the same sandbox, and one whose sandbox is gone says so."""
    from tether.backends.sandbox.daytona import DaytonaSandbox

    database = f"sqlite:///{tmp_path}/runs.db"

    def run(thread: str, *turns: object) -> Any:
        box = DaytonaSandbox(config=_config(server))
        agent = create_agent(ScriptedModel([*turns, "done"]), backend=box, checkpointer=database)
        return agent.run("go", thread_id=thread)

    run("t", [ToolCall("execute", {"command": "echo kept > mark"}, id="a")])
    [made] = server.sandboxes
    again = run("t", [ToolCall("execute", {"command": "cat mark"}, id="b")])
    answer = by_server_id(again.messages)["b"].text
    assert answer.startswith("kept\n"), answer
    assert f"this thread's Daytona sandbox {made} was taken back" in answer
    assert list(server.sandboxes) == [made]  # no second one
    read = run("t", [ToolCall("read_file", {"file_path": "/mark"}, id="r")])
    assert "kept" in by_server_id(read.messages)["r"].text  # the file tools too
    server.sandboxes.pop(made)  # deleted on Daytona's side meanwhile
    fresh = run("t", [ToolCall("execute", {"command": "ls"}, id="c")])
    assert f"sandbox from before ({made}) is gone" in by_server_id(fresh.messages)["c"].text
