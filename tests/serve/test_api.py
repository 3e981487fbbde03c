"""The HTTP API of `tether.serve.app`: runs as AG-UI event streams, threads, approvals,
stopping, and the guards in front of it all."""

from __future__ import annotations

import asyncio
import json
import re
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.serve.helpers import AUTH, TOKEN, approve, client, events, run_input, served, types
from tether import ConfigurationError, SubAgent, create_agent, tool
from tether.agent import Agent
from tether.messages import AssistantMessage, TextPart, ThinkingPart, ToolCall
from tether.models import FunctionModel, ModelRequest, ScriptedModel
from tether.models.scripted import Turn
from tether.serve import app, new_token


def waiting_on(found: list[dict[str, Any]]) -> str:
    """The id of the one interrupt a run's AG-UI events ended at."""
    [interrupt] = found[-1]["outcome"]["interrupts"]
    interrupt_id: str = interrupt["id"]
    return interrupt_id


def deploy_agent(tmp_path: Path, log: list[str], *, gate: bool = True) -> Agent[str]:
    """An agent that thinks, says something, calls `deploy` (gated) and answers."""

    @tool
    def deploy(target: str) -> str:
        """Deploy."""
        log.append(target)
        return f"deployed {target}"

    model = ScriptedModel(
        [
            [
                ThinkingPart("let me see"),
                TextPart("Deploying."),
                ToolCall("deploy", {"target": "prod"}, id="d1"),
            ],
            "Deployed.",
        ]
    )
    return create_agent(
        model,
        tools=[deploy],
        checkpointer=f"sqlite:///{tmp_path}/runs.db",
        interrupt_on={"deploy": True} if gate else None,
    )


async def test_a_run_streams_as_ag_ui_events_and_stops_at_an_approval(tmp_path: Path) -> None:
    log: list[str] = []
    application = app({"ops": deploy_agent(tmp_path, log)}, token=TOKEN)
    async with client(application) as c:
        response = await c.post("/api/agents/ops", json=run_input("t1", "Ship it."))
        assert response.status_code == 200
        assert response.headers["content-type"].startswith("text/event-stream")
        found = events(response.text)
    assert types(found) == [
        "RUN_STARTED",
        "REASONING_START",
        "REASONING_MESSAGE_START",
        "REASONING_MESSAGE_CONTENT",
        "REASONING_MESSAGE_END",
        "REASONING_END",
        "TEXT_MESSAGE_START",
        "TEXT_MESSAGE_CONTENT",
        "TEXT_MESSAGE_END",
        "TOOL_CALL_START",  # its arguments stream as the model writes them
        "TOOL_CALL_ARGS",
        "TOOL_CALL_END",
        "STATE_SNAPSHOT",
        "RUN_FINISHED",
    ]
    assert found[0]["threadId"] == "t1"
    assert found[7]["delta"] == "Deploying."
    assert found[9]["toolCallName"] == "deploy"
    assert json.loads(found[10]["delta"]) == {"target": "prod"}
    call_id = found[9]["toolCallId"]  # tether's own id, not the model's "d1"
    assert re.fullmatch(r"call_[0-9a-f]{16}", call_id)
    assert found[10]["toolCallId"] == found[11]["toolCallId"] == call_id
    finished = found[-1]
    assert finished["outcome"]["type"] == "interrupt"
    [interrupt] = finished["outcome"]["interrupts"]
    assert interrupt["id"] == f"main:{call_id}"
    assert interrupt["toolCallId"] == call_id
    assert interrupt["metadata"]["args"] == {"target": "prod"}
    assert finished["metadata"]["stop_reason"] == "interrupted"
    assert finished["usage"][0]["inputTokens"] > 0
    assert log == []


async def test_an_approval_runs_the_call_once_and_the_run_finishes(tmp_path: Path) -> None:
    log: list[str] = []
    application = app({"ops": deploy_agent(tmp_path, log)}, token=TOKEN)
    async with client(application) as c:
        await c.post("/api/agents/ops", json=run_input("t1", "Ship it."))
        waiting = (await c.get("/api/agents/ops/threads/t1")).json()
        assert waiting["status"] == "waiting for approval"
        [call] = waiting["messages"][-1]["toolCalls"]
        assert [i["id"] for i in waiting["interrupts"]] == [f"main:{call['id']}"]

        chosen = approve(f"main:{call['id']}")
        response = await c.post("/api/agents/ops", json=run_input("t1", resume=chosen))
        found = events(response.text)
        result = next(e for e in found if e["type"] == "TOOL_CALL_RESULT")
        assert result["content"] == "deployed prod"
        assert result["toolCallId"] == call["id"]
        assert found[-1]["outcome"]["type"] == "success"
        assert found[-1]["result"] == "Deployed."

        again = await c.post("/api/agents/ops", json=run_input("t1", resume=chosen))
        assert again.status_code == 409
        assert "answered before" in again.json()["error"]
        done = (await c.get("/api/agents/ops/threads/t1")).json()
    assert log == ["prod"]
    assert done["status"] == "completed"
    assert done["output"] == "Deployed."


@pytest.mark.parametrize(
    ("payload", "result", "decided"),
    [
        ({"kind": "reject", "message": "not today"}, "not today", "rejected"),
        ({"kind": "respond", "message": "done by hand"}, "done by hand", "answered"),
        ({"kind": "edit", "args": {"target": "staging"}}, "deployed staging", None),
    ],
)
async def test_each_decision_is_taken_from_the_page(
    tmp_path: Path, payload: dict[str, Any], result: str, decided: str | None
) -> None:
    log: list[str] = []
    application = app({"ops": deploy_agent(tmp_path, log)}, token=TOKEN)
    async with client(application) as c:
        first = events((await c.post("/api/agents/ops", json=run_input("t1", "Ship it."))).text)
        response = await c.post(
            "/api/agents/ops", json=run_input("t1", resume=approve(waiting_on(first), payload))
        )
    finished = next(e for e in events(response.text) if e["type"] == "TOOL_CALL_RESULT")
    assert result in finished["content"]
    assert finished["metadata"].get("decided") == decided
    assert log == (["staging"] if decided is None else [])


async def test_bad_decisions_are_refused_with_a_readable_error(tmp_path: Path) -> None:
    application = app({"ops": deploy_agent(tmp_path, [])}, token=TOKEN)
    async with client(application) as c:
        first = events((await c.post("/api/agents/ops", json=run_input("t1", "Ship it."))).text)
        unknown = await c.post("/api/agents/ops", json=run_input("t1", resume=approve("main:zz")))
        assert unknown.status_code == 400
        assert "'main:zz' is not waiting" in unknown.json()["error"]
        maybe = approve(waiting_on(first), {"kind": "maybe"})
        bad = await c.post("/api/agents/ops", json=run_input("t1", resume=maybe))
        assert bad.status_code == 400
        assert "a decision is" in bad.json()["error"]
        garbage = await c.post("/api/agents/ops", json={"threadId": "t1"})
        assert garbage.status_code == 400
        assert "RunAgentInput" in garbage.json()["error"]
        still = (await c.get("/api/agents/ops/threads/t1")).json()
    assert still["status"] == "waiting for approval"  # nothing was lost


async def test_a_subagent_streams_through_its_parent_and_its_approval_names_it(
    tmp_path: Path,
) -> None:
    log: list[str] = []

    @tool
    def deploy(target: str) -> str:
        """Deploy."""
        log.append(target)
        return f"deployed {target}"

    def turn(request: ModelRequest) -> Turn:
        done = sum(isinstance(m, AssistantMessage) for m in request.messages)
        if request.messages[0].text == "Deploy prod.":
            return [[TextPart("On it."), ToolCall("deploy", {"target": "prod"}, id="d1")], "ok"][
                done
            ]
        task = ToolCall(
            "task", {"subagent_type": "shipper", "description": "Deploy prod."}, id="t1"
        )
        return [[task], "Shipped."][done]

    agent = create_agent(
        FunctionModel(turn),
        subagents=[
            SubAgent("shipper", "Ships things.", tools=[deploy], interrupt_on={"deploy": True})
        ],
        checkpointer=f"sqlite:///{tmp_path}/runs.db",
    )
    application = app({"ops": agent}, token=TOKEN)
    async with client(application) as c:
        first = events((await c.post("/api/agents/ops", json=run_input("t", "Go."))).text)
        started = next(e for e in first if e["type"] == "SUBAGENT_STARTED")
        assert started["subagentRunId"] == "task:shipper#1"
        assert started["name"] == "shipper"
        text = next(e for e in first if e["type"] == "TEXT_MESSAGE_CONTENT")
        assert text["subagentRunId"] == "task:shipper#1"
        suspended = next(e for e in first if e["type"] == "SUBAGENT_FINISHED")
        assert suspended["outcome"]["type"] == "suspended"
        [deploying] = [
            e
            for e in first
            if e["type"] == "TOOL_CALL_START" and e.get("subagentRunId") == "task:shipper#1"
        ]
        assert deploying["toolCallName"] == "deploy"
        [interrupt] = first[-1]["outcome"]["interrupts"]
        assert interrupt["id"] == f"main/task:shipper#1:{deploying['toolCallId']}"
        assert interrupt["subagentRunId"] == "task:shipper#1"

        detail = (await c.get("/api/agents/ops/threads/t")).json()
        [sub] = detail["subagents"]
        [task] = [t for m in detail["messages"] for t in m.get("toolCalls") or []]
        assert task["function"]["name"] == "task"
        assert sub["call_id"] == task["id"]
        assert sub["status"] == "waiting for approval"

        second = await c.post(
            "/api/agents/ops", json=run_input("t", resume=approve(interrupt["id"]))
        )
        found = events(second.text)
    assert log == ["prod"]
    assert found[-1]["result"] == "Shipped."
    result = next(e for e in found if e["type"] == "TOOL_CALL_RESULT")
    assert result["subagentRunId"] == "task:shipper#1"


async def test_threads_are_listed_read_and_deleted(tmp_path: Path) -> None:
    agent = create_agent(
        ScriptedModel(["one", "two"]), checkpointer=f"sqlite:///{tmp_path}/runs.db"
    )
    application = app({"a": agent}, token=TOKEN)
    async with client(application) as c:
        await c.post("/api/agents/a", json=run_input("t1", "First."))
        second = await c.post("/api/agents/a", json=run_input("t1", "Second."))
        assert events(second.text)[-1]["result"] == "two"
        [row] = (await c.get("/api/agents/a/threads")).json()["threads"]
        assert row["thread_id"] == "t1"
        assert row["task"] == "First."
        assert row["status"] == "completed"
        detail = (await c.get("/api/agents/a/threads/t1")).json()
        assert [(m["role"], m.get("content")) for m in detail["messages"]] == [
            ("user", "First."),
            ("assistant", "one"),
            ("user", "Second."),
            ("assistant", "two"),
        ]
        assert (await c.delete("/api/agents/a/threads/t1")).json() == {"deleted": "t1"}
        assert (await c.get("/api/agents/a/threads/t1")).status_code == 404
        assert (await c.delete("/api/agents/a/threads/t1")).status_code == 404
        assert (await c.get("/api/agents/nobody/threads")).status_code == 404


async def test_several_agents_are_served_by_name(tmp_path: Path) -> None:
    one = create_agent(ScriptedModel(["from one"]), checkpointer=f"sqlite:///{tmp_path}/1.db")
    two = create_agent(ScriptedModel(["from two"]), checkpointer=f"sqlite:///{tmp_path}/2.db")
    application = app({"one": one, "two": two}, token=TOKEN)
    async with client(application) as c:
        listed = (await c.get("/api/agents")).json()["agents"]
        assert [a["name"] for a in listed] == ["one", "two"]
        answer = events((await c.post("/api/agents/two", json=run_input("t", "Hi."))).text)
        assert answer[-1]["result"] == "from two"
        assert (await c.get("/api/agents/one/threads")).json()["threads"] == []


async def test_a_thread_resumes_after_its_run_failed(tmp_path: Path) -> None:
    from tether.errors import ModelHTTPError

    failure = ModelHTTPError("overloaded", status_code=529)
    agent = create_agent(
        ScriptedModel([failure, "back"]), checkpointer=f"sqlite:///{tmp_path}/runs.db"
    )
    application = app({"a": agent}, token=TOKEN)
    async with client(application) as c:
        failed = events((await c.post("/api/agents/a", json=run_input("t", "Hi."))).text)
        assert failed[-1]["type"] == "RUN_ERROR"
        assert "overloaded" in failed[-1]["message"]
        # no new message: the thread's run goes on from its last step
        resumed = events((await c.post("/api/agents/a", json=run_input("t"))).text)
    assert resumed[-1]["result"] == "back"


def slow_agent(tmp_path: Path) -> Agent[str]:
    """An agent whose model takes a long time to answer."""

    async def turn(request: ModelRequest) -> Turn:
        await asyncio.sleep(30)
        return "finally"

    return create_agent(FunctionModel(turn), checkpointer=f"sqlite:///{tmp_path}/runs.db")


def test_a_run_goes_on_when_its_client_leaves_and_another_can_watch_it(tmp_path: Path) -> None:
    """A real server: the first client reads one event and leaves; a second follows the
    run from its beginning (the thread as it was, then every event) to its end."""
    loop_release: list[asyncio.Event] = []

    async def turn(request: ModelRequest) -> Turn:
        release = asyncio.Event()
        loop_release.append(release)
        await release.wait()
        return "finished without anyone"

    agent = create_agent(FunctionModel(turn), checkpointer=f"sqlite:///{tmp_path}/runs.db")
    application = app({"a": agent}, token=TOKEN)
    with served(application) as url, httpx.Client(base_url=url, headers=AUTH, timeout=30) as c:
        with c.stream("POST", "/api/agents/a", json=run_input("t", "Work.")) as response:
            first = next(response.iter_lines())
            assert "RUN_STARTED" in first
        assert c.get("/api/agents/a/threads/t").json()["status"] == "running"
        with c.stream("GET", "/api/agents/a/threads/t/events") as watching:
            lines = watching.iter_lines()
            started = next(line for line in lines if line.startswith("data: "))
            assert "RUN_STARTED" in started  # first, as an AG-UI client needs it
            snapshot = next(line for line in lines if line.startswith("data: "))
            assert "MESSAGES_SNAPSHOT" in snapshot
            assert '"content":"Work."' in snapshot  # the message the run answers
            _set_on_server(loop_release[0])
            rest = "\n\n".join(lines)
        assert "finished without anyone" in rest
        assert c.get("/api/agents/a/threads/t").json()["status"] == "completed"


def _set_on_server(event: asyncio.Event) -> None:
    """Set an asyncio event of the server's loop from this thread."""
    loop = event._loop  # type: ignore[attr-defined]
    loop.call_soon_threadsafe(event.set)


async def test_stop_ends_a_live_run_and_records_it_cancelled(tmp_path: Path) -> None:
    application = app({"a": slow_agent(tmp_path)}, token=TOKEN)
    async with client(application) as c:
        running = asyncio.create_task(c.post("/api/agents/a", json=run_input("t", "Work.")))
        for _ in range(200):
            if (await c.get("/api/agents")).json()["agents"][0]["running"]:
                break
            await asyncio.sleep(0.01)
        busy = await c.post("/api/agents/a", json=run_input("t", "More."))
        assert busy.status_code == 409
        assert (await c.delete("/api/agents/a/threads/t")).status_code == 409
        stopped = await c.post("/api/agents/a/threads/t/stop")
        assert stopped.json() == {"stopped": "t"}
        found = events((await running).text)
        assert found[-1]["type"] == "RUN_FINISHED"
        assert found[-1]["outcome"]["type"] == "cancelled"
        detail = (await c.get("/api/agents/a/threads/t")).json()
        assert detail.get("status") == "cancelled", detail
        assert (await c.post("/api/agents/a/threads/t/stop")).status_code == 409


async def test_stop_abandons_a_run_that_waits_for_approval(tmp_path: Path) -> None:
    log: list[str] = []
    application = app({"ops": deploy_agent(tmp_path, log)}, token=TOKEN)
    async with client(application) as c:
        await c.post("/api/agents/ops", json=run_input("t1", "Ship it."))
        assert (await c.post("/api/agents/ops/threads/t1/stop")).status_code == 200
        detail = (await c.get("/api/agents/ops/threads/t1")).json()
    assert detail["status"] == "cancelled"
    assert detail["interrupts"] == []
    assert log == []


async def test_the_page_is_served_with_a_strict_content_policy(tmp_path: Path) -> None:
    application = app({"a": slow_agent(tmp_path)}, token=TOKEN)
    async with client(application) as c:
        page = await c.get("/", headers={"Authorization": ""})
        script = await c.get("/static/app.js", headers={"Authorization": ""})
    assert page.status_code == 200
    assert "script-src 'self'" in page.headers["content-security-policy"]
    assert '<script type="module" src="/static/app.js">' in page.text
    assert script.status_code == 200
    assert "innerHTML" not in script.text  # the page writes text, never markup


def test_app_refuses_what_it_cannot_serve(tmp_path: Path) -> None:
    agent = create_agent(ScriptedModel(["x"]), checkpointer=f"sqlite:///{tmp_path}/runs.db")
    with pytest.raises(ConfigurationError, match="16 characters"):
        app({"a": agent}, token="short")
    with pytest.raises(ConfigurationError, match="no checkpointer"):
        app({"a": create_agent(ScriptedModel(["x"]), checkpointer=None)}, token=TOKEN)
    with pytest.raises(ConfigurationError, match="an agent's name"):
        app({"a/b": agent}, token=TOKEN)
    with pytest.raises(ConfigurationError, match="must be an Agent"):
        app({"a": "agent"}, token=TOKEN)  # type: ignore[dict-item]
    with pytest.raises(ConfigurationError, match="an Agent or a mapping"):
        app({}, token=TOKEN)
    assert len(new_token()) >= 32
    assert app(agent, token=TOKEN).state.agents == {"agent": agent}


def test_the_apps_shutdown_stops_its_live_runs_as_cancelled(tmp_path: Path) -> None:
    """The app's lifespan, as any ASGI server runs it: at shutdown, runs that outlived
    their requests are stopped and recorded as cancelled, not left hanging."""
    from starlette.testclient import TestClient

    agent = slow_agent(tmp_path)
    application = app({"a": agent}, token=TOKEN, hosts=None)
    with TestClient(application, headers=AUTH) as c:
        with c.stream("POST", "/api/agents/a", json=run_input("t", "Work.")) as response:
            assert "RUN_STARTED" in next(response.iter_lines())
        assert c.get("/api/agents").json()["agents"][0]["running"] == ["t"]
    [info] = agent.threads()
    assert asyncio.run(_stop_reason(agent, info.thread_id)) == "cancelled"


async def _stop_reason(agent: Agent[str], thread_id: str) -> str | None:
    from tether.checkpoint.journal import read_thread

    return (await read_thread(agent._checkpointer(), thread_id)).stop_reason


async def test_a_thread_that_cannot_be_read_is_a_readable_error(tmp_path: Path) -> None:
    import sqlite3

    agent = create_agent(ScriptedModel(["one"]), checkpointer=f"sqlite:///{tmp_path}/runs.db")
    application = app({"a": agent}, token=TOKEN)
    async with client(application) as c:
        await c.post("/api/agents/a", json=run_input("t", "Hi."))
        with sqlite3.connect(tmp_path / "runs.db") as db:  # a record no tether wrote
            db.execute('UPDATE tether_records SET body = \'{"t": "mystery"}\'')
        answer = await c.get("/api/agents/a/threads/t")
    assert answer.status_code == 500
    assert "cannot be read back" in answer.json()["error"]


async def test_a_durable_run_that_ended_in_an_error_ends_its_events_in_an_error() -> None:
    """Read from a worker's journal: a run whose step summed up to an error is told as
    one (the stream once ended with no end at all)."""
    from tether.checkpoint.journal import Thread
    from tether.durable.dbos import RunStatus
    from tether.errors import RunError
    from tether.serve._durable import Cursor, followed

    class Handle:
        workflow_id, thread_id = "t:1", "t"

        async def astatus(self) -> RunStatus:
            return RunStatus("t", "t:1", "finished", stop_reason="error", error="boom")

    class Client:
        async def thread(self, thread_id: str) -> Thread:
            return Thread(thread_id)

    class Durable:
        _client = Client()

    events = followed(Durable(), Handle(), Cursor())  # type: ignore[arg-type]
    assert (await anext(events)).kind == "run_started"
    with pytest.raises(RunError, match="boom"):
        await anext(events)


def test_a_calls_arguments_stream_and_end_before_the_next_thing() -> None:
    from tether.events import ModelDelta, StepFinished, ToolCallStarted
    from tether.messages import Usage
    from tether.serve._agui import Translator

    sub = ("main", "task:coder#1")
    translator = Translator("t", "r")
    said = [
        translator.translate(ModelDelta(sub, "text", "Writing.")),
        translator.translate(ModelDelta(sub, "tool_call", '{"file_path": ', "w1", "write_file")),
        translator.translate(ModelDelta(sub, "tool_call", '"/a"}', "w1", "write_file")),
        translator.translate(ModelDelta(sub, "tool_call", '{"q": 1}', "x1")),  # no name: later
        translator.translate(StepFinished(sub, 1, Usage(), 0.0)),
        translator.translate(
            ToolCallStarted(sub, ToolCall("write_file", {"file_path": "/a"}, id="w1"))
        ),
    ]
    kinds = [[e.type.value for e in batch] for batch in said]
    assert kinds == [
        ["TEXT_MESSAGE_START", "TEXT_MESSAGE_CONTENT"],
        ["TEXT_MESSAGE_END", "TOOL_CALL_START", "TOOL_CALL_ARGS"],
        ["TOOL_CALL_ARGS"],
        [],
        ["TOOL_CALL_END", "STATE_SNAPSHOT"],
        [],  # announced already: not again
    ]
    assert {
        e.subagent_run_id for batch in said for e in batch if e.type.value != "STATE_SNAPSHOT"
    } == {"task:coder#1"}


def test_every_tether_event_has_an_ag_ui_form() -> None:
    from typing import get_args

    from tether.events import Event
    from tether.serve._agui import Translator

    kinds = [cls.__dataclass_fields__["kind"].default for cls in get_args(Event)]
    assert [k for k in kinds if not hasattr(Translator, f"_on_{k}")] == []


def test_the_calls_of_a_reply_name_it_as_their_parent_streamed_or_told_whole() -> None:
    """As a durable run tells its replies: text and calls of one reply go on one message;
    the calls of the next reply (no text) on a message of their own."""
    from tether.events import ModelDelta, ToolCallFinished, ToolCallStarted
    from tether.messages import ToolResult
    from tether.serve._agui import Translator

    main = ("main",)
    one, two, three = (ToolCall("add", {"a": n}, id=f"c{n}") for n in (1, 2, 3))
    translator = Translator("t", "r")
    told = [
        ModelDelta(main, "text", "Adding."),
        ToolCallStarted(main, one),
        ToolCallStarted(main, two),
        ToolCallFinished(main, one, ToolResult.of(one, "1")),
        ToolCallFinished(main, two, ToolResult.of(two, "2")),
        ToolCallStarted(main, three),
        ToolCallFinished(main, three, ToolResult.of(three, "3")),
    ]
    found = [e for event in told for e in translator.translate(event)]
    text = next(e.message_id for e in found if e.type.value == "TEXT_MESSAGE_START")
    parents = {
        e.tool_call_id: e.parent_message_id for e in found if e.type.value == "TOOL_CALL_START"
    }
    assert parents["c1"] == parents["c2"] == text
    assert parents["c3"] not in (None, text)


async def test_a_new_message_while_calls_wait_says_what_they_wait_for(tmp_path: Path) -> None:
    turn: list[Any] = [ToolCall("deploy", {"target": "prod"}), ToolCall("pick", {})]
    log: list[str] = []
    agent = deploy_agent(tmp_path, log)
    agent = create_agent(
        ScriptedModel([turn]),
        tools=list(agent.tools),
        checkpointer=f"sqlite:///{tmp_path}/runs.db",
        interrupt_on={"deploy": True},
    )
    page = {"name": "pick", "description": "Pick.", "parameters": {"type": "object"}}
    async with client(app({"ops": agent}, token=TOKEN)) as c:
        first = events(
            (await c.post("/api/agents/ops", json=run_input("t1", "Go.", tools=[page]))).text
        )
        pending = first[-1]["metadata"]["pending_tool_call_ids"]
        refused = await c.post("/api/agents/ops", json=run_input("t1", "Something else."))
    assert refused.status_code == 400
    error = refused.json()["error"]
    assert f"results of frontend calls {pending}" in error
    assert f"resume entries deciding interrupts ['{waiting_on(first)}']" in error
