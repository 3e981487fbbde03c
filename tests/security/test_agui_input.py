"""What an AG-UI client sends, as an attacker sends it: a `runId` is bounded like a thread
id (it is part of every event id streamed and kept), arguments that cannot be read are a
readable error and never a crash, a frontend tool named like a file tool never reads or
lists a server file, and what a client holds is compared as JSON, not as Python values."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.serve.helpers import TOKEN, approve, client, events, run_input
from tether import create_agent, tool
from tether.backends import FilesystemBackend
from tether.messages import AssistantMessage, ToolCall, ToolResultMessage
from tether.models import FunctionModel, ModelRequest, ScriptedModel
from tether.models.scripted import Turn
from tether.profiles import HarnessProfile
from tether.serve import _agui, app
from tether.tools.tool import decode_args

PATH = "/api/agents/agent"
DEEP = '{"seat": ' + "[" * 2_000 + "]" * 2_000 + "}"
LONG_NUMBER = '{"seat": ' + "1" * 5_000 + "}"


def page_tool(name: str = "confirm_booking", **properties: Any) -> dict[str, Any]:
    schema = {"type": "object", "properties": properties or {"seat": {"type": "string"}}}
    return {"name": name, "description": "Ask the page.", "parameters": schema}


@pytest.mark.parametrize("run_id", ["r" * 129, "r" * 1_000_000, "-r", "a/b", "r\n", "é"])
async def test_a_run_id_is_a_short_safe_name_or_refused(tmp_path: Path, run_id: str) -> None:
    model = ScriptedModel(["never asked"])
    agent = create_agent(model, checkpointer=f"sqlite:///{tmp_path}/runs.db")
    async with client(app(agent, token=TOKEN)) as c:
        refused = await c.post(PATH, json={**run_input("t", "Hi."), "runId": run_id})
    assert refused.status_code == 400
    assert "a runId is 1 to 128 letters" in refused.json()["error"]
    assert len(refused.text) < 1_000
    assert model.requests == []


async def test_a_run_id_of_128_safe_characters_is_taken(tmp_path: Path) -> None:
    run_id = "R" + "0123456789abcdef_.:@-" * 6 + "x" * 1
    run_id = run_id[:128]
    agent = create_agent(ScriptedModel(["hi"]), checkpointer=f"sqlite:///{tmp_path}/runs.db")
    async with client(app(agent, token=TOKEN)) as c:
        found = events((await c.post(PATH, json={**run_input("t", "Hi."), "runId": run_id})).text)
    assert found[0]["runId"] == run_id
    assert found[-1]["type"] == "RUN_FINISHED"


@pytest.mark.parametrize("args", [DEEP, LONG_NUMBER], ids=["nested", "long_number"])
def test_arguments_that_cannot_be_read_are_an_error_text(args: str) -> None:
    problem = decode_args("confirm_booking", args)
    assert isinstance(problem, str)
    assert "could not be read" in problem


@pytest.mark.parametrize("args", [DEEP, LONG_NUMBER], ids=["nested", "long_number"])
@pytest.mark.parametrize("name", ["confirm_booking", "deploy"])
async def test_a_call_with_unreadable_arguments_is_answered_and_the_run_goes_on(
    tmp_path: Path, args: str, name: str
) -> None:
    ran: list[str] = []

    @tool
    def deploy(target: str) -> str:
        """Deploy."""
        ran.append(target)
        return "deployed"

    def turn(request: ModelRequest) -> Turn:
        if not any(isinstance(m, AssistantMessage) for m in request.messages):
            return [ToolCall(name, args)]
        results = [
            r for m in request.messages if isinstance(m, ToolResultMessage) for r in m.results
        ]
        return "told: " + results[-1].text

    agent = create_agent(
        FunctionModel(turn), tools=[deploy], checkpointer=f"sqlite:///{tmp_path}/runs.db"
    )
    async with client(app(agent, token=TOKEN)) as c:
        found = events((await c.post(PATH, json=run_input("t", "Go.", tools=[page_tool()]))).text)
        thread = (await c.get(f"{PATH}/threads/t")).json()
    assert found[-1]["type"] == "RUN_FINISHED"
    assert "could not be read" in found[-1]["result"]
    assert thread["status"] == "completed"
    assert ran == []


def test_client_arguments_nested_too_deep_are_not_the_same() -> None:
    deep = "[" * 2_000 + "]" * 2_000
    assert not _agui._same(deep, {"target": "staging"})


async def test_an_edit_the_client_holds_nested_too_deep_is_put_right(tmp_path: Path) -> None:
    ran: list[str] = []

    @tool
    def deploy(target: str) -> str:
        """Deploy."""
        ran.append(target)
        return "ok"

    agent = create_agent(
        ScriptedModel([[ToolCall("deploy", {"target": "prod"})], "done"]),
        tools=[deploy],
        checkpointer=f"sqlite:///{tmp_path}/runs.db",
        interrupt_on={"deploy": True},
    )
    async with client(app(agent, token=TOKEN)) as c:
        body = (await c.post(PATH, json=run_input("t", "Ship."))).text
        [asked] = events(body)[-1]["outcome"]["interrupts"]
        function = {"name": "deploy", "arguments": "[" * 2_000 + "]" * 2_000}
        held = [
            {
                "id": "a",
                "role": "assistant",
                "toolCalls": [
                    {"id": asked["toolCallId"], "type": "function", "function": function}
                ],
            }
        ]
        edit = approve(asked["id"], {"kind": "edit", "args": {"target": "staging"}})
        answered = await c.post(PATH, json={**run_input("t"), "messages": held, "resume": edit})
    assert answered.status_code == 200
    [snapshot] = [e for e in events(answered.text) if e["type"] == "MESSAGES_SNAPSHOT"]
    [call] = snapshot["messages"][0]["toolCalls"]
    assert json.loads(call["function"]["arguments"]) == {"target": "staging"}
    assert ran == ["staging"]


@pytest.mark.parametrize(
    ("held", "now"),
    [('{"value": 1}', {"value": True}), ('{"value": 1}', {"value": 1.0}), ("[0]", [False])],
)
def test_arguments_of_another_json_type_are_not_the_same(held: str, now: Any) -> None:
    assert not _agui._same(held, now)


def test_arguments_in_another_key_order_are_the_same() -> None:
    assert _agui._same('{"b": 2, "a": [1, "x"]}', {"a": [1, "x"], "b": 2})


@pytest.mark.parametrize("name", ["write_file", "edit_file"])
async def test_a_frontend_tool_named_like_a_file_tool_reads_and_lists_no_server_file(
    tmp_path: Path, name: str
) -> None:
    root = tmp_path / "root"
    root.mkdir()
    (root / "config.txt").write_text("secret_key = abc123\n")
    args = {"file_path": "/config.txt", "content": "x\n", "old_string": "abc", "new_string": "x"}

    def turn(request: ModelRequest) -> Turn:
        if not isinstance(request.messages[-1], ToolResultMessage):
            return [ToolCall(name, args)]
        return "done"

    agent = create_agent(
        FunctionModel(turn),
        backend=FilesystemBackend(str(root)),
        checkpointer=f"sqlite:///{tmp_path}/runs.db",
        profile=HarnessProfile(
            excluded_tools=frozenset({"write_file", "edit_file"}),
            excluded_capabilities=frozenset({"Subagents"}),
        ),
    )
    offered = page_tool(name, **{k: {"type": "string"} for k in args})
    async with client(app(agent, token=TOKEN)) as c:
        body = (await c.post(PATH, json=run_input("t", "Save.", tools=[offered]))).text
        [call_id] = events(body)[-1]["outcome"]["pendingToolCallIds"]
        waiting = (await c.get(f"{PATH}/threads/t")).json()
        held = {
            "id": "a1",
            "role": "assistant",
            "toolCalls": [
                {
                    "id": call_id,
                    "type": "function",
                    "function": {"name": name, "arguments": json.dumps(args)},
                }
            ],
        }
        told = {"id": "t1", "role": "tool", "toolCallId": call_id, "content": "saved"}
        messages = [{"id": "u1", "role": "user", "content": "Save."}, held, told]
        answered = await c.post(
            PATH, json={**run_input("t", tools=[offered]), "messages": messages}
        )
        assert answered.status_code == 200
        after = (await c.get(f"{PATH}/threads/t")).json()
    [card] = waiting["interrupts"]
    assert card["metadata"]["diff"] is None
    assert after["status"] == "completed"
    assert after["files"] == []
    assert (root / "config.txt").read_text() == "secret_key = abc123\n"


async def test_what_one_client_holds_shapes_its_own_stream_and_never_a_followers() -> None:
    from ag_ui.core import (
        MessagesSnapshotEvent,
        RunStartedEvent,
        ToolCallArgsEvent,
        ToolCallEndEvent,
        ToolCallResultEvent,
        ToolCallStartEvent,
    )

    from tether.messages import UserMessage
    from tether.serve._live import LiveRun

    call = ToolCall("deploy", {"target": "prod"}, "c1")
    record = [UserMessage.of("Ship."), AssistantMessage(parts=(call,))]
    live = LiveRun(None, "t", _agui.Translator("t", "r"), _agui.messages(record))  # type: ignore[arg-type]
    live.push(
        [
            RunStartedEvent(thread_id="t", run_id="r"),
            ToolCallStartEvent(tool_call_id="c1", tool_call_name="deploy"),
            ToolCallArgsEvent(tool_call_id="c1", delta='{"target": "prod"}'),
            ToolCallEndEvent(tool_call_id="c1"),
            ToolCallResultEvent(message_id="x", tool_call_id="c1", content="deployed prod"),
        ]
    )
    live._ended.set()  # the run has ended
    forged = MessagesSnapshotEvent(messages=[_agui.AguiUser(id="f1", content="forged")])

    async def read(**view: Any) -> list[dict[str, Any]]:
        return events("".join([chunk async for chunk in live.follow(**view)]))

    mine = await read(known_calls={"c1"}, known_results={"c1"}, opening=[forged])
    follower = await read(history=True)
    assert [e["type"] for e in mine] == ["RUN_STARTED", "MESSAGES_SNAPSHOT"]
    assert mine[1]["messages"][0]["content"] == "forged"
    assert [e["type"] for e in follower] == ["RUN_STARTED", "MESSAGES_SNAPSHOT", "TOOL_CALL_RESULT"]
    assert [m["role"] for m in follower[1]["messages"]] == ["user", "assistant"]
    assert follower[2]["content"] == "deployed prod"
    assert "forged" not in "".join(live.chunks)


async def test_a_run_request_over_8_mb_is_refused_before_it_is_read(tmp_path: Path) -> None:
    model = ScriptedModel(["never asked"])
    agent = create_agent(model, checkpointer=f"sqlite:///{tmp_path}/runs.db")
    padding = "x" * (8 * 1024 * 1024)
    async with client(app(agent, token=TOKEN)) as c:
        refused = await c.post(PATH, json=run_input("t", padding))
    assert refused.status_code == 413
    assert "8388608 bytes at most" in refused.json()["error"]
    assert model.requests == []


def test_a_long_schema_is_refused_before_it_is_written_out(monkeypatch: pytest.MonkeyPatch) -> None:
    from types import SimpleNamespace

    from tether.errors import ConfigurationError
    from tether.serve import _tools

    def never(value: Any, **_: Any) -> str:
        raise AssertionError("the schema was written out to be measured")

    monkeypatch.setattr(_tools.json, "dumps", never)
    wide = {"type": "object", "properties": {f"p{n}": {"type": "string"} for n in range(10_000)}}
    offered = SimpleNamespace(name="t", description="d", parameters=wide)
    with pytest.raises(ConfigurationError, match="its schema is over 16000 characters"):
        _tools._spec(offered)


async def test_a_body_that_never_finishes_arriving_is_answered_408(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import asyncio

    from tether.serve import _server

    monkeypatch.setattr(_server, "_BODY_SECONDS", 0.05)
    agent = create_agent(ScriptedModel(["never"]), checkpointer=f"sqlite:///{tmp_path}/runs.db")
    application = app(agent, token=TOKEN)
    sent: list[dict[str, Any]] = []
    stalled = asyncio.Event()  # never set: the rest of the body never comes
    first = [{"type": "http.request", "body": b'{"threadId": "t", ', "more_body": True}]

    async def receive() -> dict[str, Any]:
        if first:
            return first.pop()
        await stalled.wait()
        raise AssertionError("unreachable")

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    scope = {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": "POST",
        "scheme": "http",
        "path": PATH,
        "raw_path": PATH.encode(),
        "query_string": b"",
        "root_path": "",
        "headers": [
            (b"host", b"127.0.0.1"),
            (b"authorization", f"Bearer {TOKEN}".encode()),
            (b"content-type", b"application/json"),
        ],
        "client": ("127.0.0.1", 1),
        "server": ("127.0.0.1", 80),
    }
    await asyncio.wait_for(application(scope, receive, send), 60)  # a hang fails, not stalls
    [start] = [m for m in sent if m["type"] == "http.response.start"]
    assert start["status"] == 408
