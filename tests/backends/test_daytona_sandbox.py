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
    box = sandbox("daytona", config=_config(server), timeout_seconds=2)
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
    labels = server.created[0]["labels"]
    assert labels["code-toolbox-language"] == "python"
    assert len(labels["tether.thread"]) == 32  # whose it is, checked before a take-back
    box.close()  # outside an event loop
    assert not server.sandboxes


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
        box = DaytonaSandbox(config=_config(server))  # a process of its own, as it were
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


async def test_only_tethers_sandbox_of_the_thread_is_taken_back_or_deleted(
    server: DaytonaServer,
) -> None:
    """A record naming another thread's sandbox (forged, or copied) or one the user gave
    is never used nor deleted."""
    from tether.backends.sandbox.daytona import DaytonaSandbox

    box = DaytonaSandbox(config=_config(server))
    with session("u"):
        await box.execute("echo u > mark")
    [theirs] = server.sandboxes
    note = await box.resume("v", {"daytona": theirs})
    assert note is not None
    assert "is not tether's sandbox of this thread: it was left alone" in note
    with session("v"):
        done = await box.execute("cat mark 2>&1")
    assert "u\n" not in done.output  # v's own
    given = DaytonaSandbox(config=_config(server), sandbox=await box._box("u", None))
    assert given.held("any") is None  # never recorded
    await given.aclose()
    assert theirs in server.sandboxes  # the given one is not deleted
    await box.aclose()
    assert not server.sandboxes


async def test_a_passing_failure_keeps_the_threads_sandbox(server: DaytonaServer) -> None:
    from tether.backends.sandbox.daytona import DaytonaSandbox

    first = DaytonaSandbox(config=_config(server))
    with session("t"):
        await first.execute("echo kept > mark")
    kept = first.held("t")
    server.failures = [503]  # Daytona answers once with an error
    later = DaytonaSandbox(config=_config(server))
    with pytest.raises(BackendError, match="could not reach sandbox"):
        await later.resume("t", kept)
    assert (
        await later.resume("t", kept)
        == f"this thread's Daytona sandbox {kept['daytona']} was taken back"
    )
    with session("t"):
        assert (await later.execute("cat mark")).output.startswith("kept\n")
    await later.aclose()


async def test_a_sandbox_deleted_meanwhile_is_made_again_and_said(server: DaytonaServer) -> None:
    from tether.backends.sandbox.daytona import DaytonaSandbox

    box = DaytonaSandbox(config=_config(server))
    with session("t"):
        await box.execute("true")
        [gone] = server.sandboxes
        server.sandboxes.pop(gone)
        await box.write("/a.txt", b"x")  # a file tool finds out first
        done = await box.execute("cat a.txt")
    assert done.output.startswith("x")
    assert f"this thread's Daytona sandbox ({gone}) is gone: a fresh one was made" in done.output
    await box.aclose()


async def test_a_sandbox_that_never_starts_is_deleted(server: DaytonaServer) -> None:
    from tether.backends.sandbox.daytona import DaytonaSandbox

    server.state = "starting"
    box = DaytonaSandbox(config=_config(server), create_timeout_seconds=1)
    with session("t"), pytest.raises(BackendError, match="did not start in time"):
        await box.execute("true")
    assert not server.sandboxes
    await box.aclose()


def test_one_object_serves_runs_of_their_own_event_loops(server: DaytonaServer) -> None:
    """Each `agent.run()` has an event loop of its own: the SDK's client is made again."""
    from tether.backends.sandbox.daytona import DaytonaSandbox

    box = DaytonaSandbox(config=_config(server))
    for call in ("a", "b"):
        model = ScriptedModel([[ToolCall("execute", {"command": "echo ran"}, id=call)], "done"])
        result = create_agent(model, backend=box).run("go")
        assert by_server_id(result.messages)[call].text == "ran\n[exit code 0]"
    box.close()
    assert not server.sandboxes


def test_a_passing_failure_in_a_run_is_a_tool_error_and_the_next_command_takes_it_back(
    server: DaytonaServer, tmp_path: Path
) -> None:
    from tether.backends.sandbox.daytona import DaytonaSandbox

    database = f"sqlite:///{tmp_path}/runs.db"

    def run(*turns: object, close: bool = False) -> Any:
        box = DaytonaSandbox(config=_config(server))  # a process of its own, as it were
        agent = create_agent(ScriptedModel([*turns, "done"]), backend=box, checkpointer=database)
        result = agent.run("go", thread_id="t")
        if close:
            box.close()
        return result

    run([ToolCall("execute", {"command": "echo kept > mark"}, id="a")])  # then it ends
    [made] = server.sandboxes
    server.failures = [503]
    later = run(
        [ToolCall("execute", {"command": "cat mark"}, id="b")],
        [ToolCall("execute", {"command": "cat mark"}, id="c")],
        close=True,
    )
    answers = by_server_id(later.messages)
    assert answers["b"].is_error
    assert "could not reach sandbox" in answers["b"].text
    assert answers["c"].text.startswith("kept\n")  # the same sandbox, asked again
    assert f"sandbox {made} was taken back" in answers["c"].text
    assert list(server.sandboxes) == []  # close() deleted the one it took back
