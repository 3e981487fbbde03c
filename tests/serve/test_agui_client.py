"""`tether serve` driven by the official AG-UI client (`@ag-ui/client` 1.0.0's HttpAgent,
under Node 22, see tests/node/agui_client.mjs) over a real loopback server: what the
client accepts (its own verification of the event stream throws on a misordered one),
and what it makes of each run, the messages it builds above all."""

from __future__ import annotations

import asyncio
import contextlib
import json
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.interop import NODE_DIR, node, package
from tests.serve.helpers import AUTH, TOKEN, run_input, served
from tether import SubAgent, create_agent, tool
from tether.agent import Agent
from tether.messages import (
    AssistantMessage,
    TextPart,
    ThinkingPart,
    ToolCall,
    ToolResultMessage,
)
from tether.models import FunctionModel, ModelRequest, ScriptedModel
from tether.models.scripted import Turn
from tether.serve import app

CLIENT = NODE_DIR / "agui_client.mjs"
BOOKING = {
    "name": "confirm_booking",
    "description": "Ask the person on the page to confirm a booking.",
    "parameters": {
        "type": "object",
        "properties": {"seat": {"type": "string"}},
        "required": ["seat"],
    },
}


@pytest.fixture(scope="module", autouse=True)
def _client_installed() -> None:
    node()
    package("@ag-ui/client")


def drive(url: str, thread_id: str, steps: list[dict[str, Any]], agent: str = "agent") -> Any:
    """Each step a run of the real client on the thread; what it made of each."""
    plan = {"url": f"{url}/api/agents/{agent}", "token": TOKEN, "threadId": thread_id}
    done = subprocess.run(
        [str(node()), str(CLIENT)],
        input=json.dumps({**plan, "steps": steps}),
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    runs: list[dict[str, Any]] = json.loads(done.stdout)["runs"]
    return runs


def clean(run: dict[str, Any]) -> dict[str, Any]:
    """`run`, checked to have gone through the client without an error or a warning."""
    assert run["error"] is None, run["error"]
    assert run["warnings"] == []
    return run


def types(run: dict[str, Any]) -> list[str]:
    return [e["type"] for e in run["events"]]


def said(run: dict[str, Any]) -> list[tuple[str, Any]]:
    """The client's messages, shortly: (role, content or the calls' names and arguments)."""
    out: list[tuple[str, Any]] = []
    for m in run["messages"]:
        calls = [
            (c["function"]["name"], json.loads(c["function"]["arguments"]))
            for c in m.get("toolCalls") or ()
        ]
        if m["role"] == "assistant":
            out.append(("assistant", (m.get("content"), calls)))
        else:
            out.append((m["role"], m.get("content")))
    return out


def agent_with(model: Any, tmp_path: Path, **more: Any) -> Agent[Any]:
    return create_agent(model, checkpointer=f"sqlite:///{tmp_path}/runs.db", **more)


@tool
def add(a: int, b: int) -> str:
    """Add two numbers."""
    return str(a + b)


def test_a_plain_answer(tmp_path: Path) -> None:
    model = ScriptedModel([[ThinkingPart("An easy one."), TextPart("Hello there.")]])
    with served(app(agent_with(model, tmp_path), token=TOKEN)) as url:
        (run,) = drive(url, "t", [{"user": "Hi."}])
    clean(run)
    assert run["outcome"] == "success"
    assert run["result"] == "Hello there."
    assert said(run) == [
        ("user", "Hi."),
        ("reasoning", "An easy one."),
        ("assistant", ("Hello there.", [])),
    ]


def test_a_call_is_filed_on_the_assistant_message_with_its_text(tmp_path: Path) -> None:
    model = ScriptedModel([[TextPart("Adding."), ToolCall("add", {"a": 1, "b": 2})], "It is 3."])
    with served(app(agent_with(model, tmp_path, tools=[add]), token=TOKEN)) as url:
        (run,) = drive(url, "t", [{"user": "1 + 2?"}])
    clean(run)
    assert said(run) == [
        ("user", "1 + 2?"),
        ("assistant", ("Adding.", [("add", {"a": 1, "b": 2})])),
        ("tool", "3"),
        ("assistant", ("It is 3.", [])),
    ]
    call = run["messages"][1]["toolCalls"][0]
    assert run["messages"][2]["toolCallId"] == call["id"]


def test_parallel_calls_of_one_reply_are_one_assistant_message(tmp_path: Path) -> None:
    turn: list[Any] = [
        TextPart("Both at once."),
        ToolCall("add", {"a": 1, "b": 1}),
        ToolCall("add", {"a": 2, "b": 2}),
    ]
    model = ScriptedModel([turn, "2 and 4."])
    with served(app(agent_with(model, tmp_path, tools=[add]), token=TOKEN)) as url:
        (run,) = drive(url, "t", [{"user": "1+1, 2+2?"}])
    clean(run)
    assert said(run) == [
        ("user", "1+1, 2+2?"),
        ("assistant", ("Both at once.", [("add", {"a": 1, "b": 1}), ("add", {"a": 2, "b": 2})])),
        ("tool", "2"),
        ("tool", "4"),
        ("assistant", ("2 and 4.", [])),
    ]


def deploy_agent(tmp_path: Path, log: list[str]) -> Agent[str]:
    @tool
    def deploy(target: str) -> str:
        """Deploy."""
        log.append(target)
        return f"deployed {target}"

    turn: list[Any] = [
        ThinkingPart("Prod it is."),
        TextPart("Deploying."),
        ToolCall("deploy", {"target": "prod"}),
    ]
    model = ScriptedModel([turn, "Done."])
    return agent_with(model, tmp_path, tools=[deploy], interrupt_on={"deploy": True})


@pytest.mark.parametrize(
    ("payload", "args", "result"),
    [
        ({"kind": "approve"}, {"target": "prod"}, "deployed prod"),
        (
            {"kind": "edit", "args": {"target": "staging"}},
            {"target": "staging"},
            "deployed staging",
        ),
        ({"kind": "reject", "message": "not today"}, {"target": "prod"}, "not today"),
    ],
    ids=["approve", "edit", "reject"],
)
def test_an_approval_round_trip_leaves_the_client_one_call_with_the_arguments_that_ran(
    tmp_path: Path, payload: dict[str, Any], args: dict[str, Any], result: str
) -> None:
    log: list[str] = []
    with served(app(deploy_agent(tmp_path, log), token=TOKEN)) as url:
        asked, answered = drive(url, "t", [{"user": "Ship it."}, {"resume": payload}])
    clean(asked)
    assert asked["outcome"] == "interrupt"
    [interrupt] = asked["pendingInterrupts"]
    assert interrupt["metadata"]["args"] == {"target": "prod"}
    clean(answered)
    assert answered["outcome"] == "success"
    assert answered["pendingInterrupts"] == []
    conversation = said(answered)
    assert conversation[:3] == [
        ("user", "Ship it."),
        ("reasoning", "Prod it is."),
        ("assistant", ("Deploying.", [("deploy", args)])),  # once, as it ran
    ]
    assert conversation[3][0] == "tool"
    assert result in conversation[3][1]
    assert conversation[4] == ("assistant", ("Done.", []))
    assert len(conversation) == 5
    starts = [e for e in answered["events"] if e["type"] == "TOOL_CALL_START"]
    assert starts == []  # the client has the call: it is not announced again
    assert ("MESSAGES_SNAPSHOT" in types(answered)) == (payload["kind"] == "edit")
    assert log == ([] if payload["kind"] == "reject" else [args["target"]])


def test_a_frontend_tool_is_called_by_the_model_run_by_the_client_and_its_result_goes_on(
    tmp_path: Path,
) -> None:
    def turn(request: ModelRequest) -> Turn:
        last = request.messages[-1]
        if isinstance(last, ToolResultMessage):
            return f"Done: {last.results[0].text}."
        return [TextPart("Asking the page."), ToolCall("confirm_booking", {"seat": "4A"})]

    model = FunctionModel(turn)
    with served(app(agent_with(model, tmp_path, tools=[add]), token=TOKEN)) as url:
        asked, answered = drive(
            url,
            "t",
            [
                {"user": "Book 4A.", "tools": [BOOKING]},
                {"answer": {"content": "booked seat 4A"}, "tools": [BOOKING]},
            ],
        )
    clean(asked)
    assert asked["outcome"] == "success"  # a run that stops at a frontend call completed
    assert asked["pendingInterrupts"] == []
    [call_id] = asked["pendingToolCallIds"]
    assert said(asked)[1] == (
        "assistant",
        ("Asking the page.", [("confirm_booking", {"seat": "4A"})]),
    )
    assert asked["messages"][1]["toolCalls"][0]["id"] == call_id
    assert "TOOL_CALL_RESULT" not in types(asked)  # tether ran nothing
    clean(answered)
    assert answered["outcome"] == "success"
    assert answered["result"] == "Done: booked seat 4A."
    assert answered["pendingToolCallIds"] == []
    assert said(answered)[2:] == [
        ("tool", "booked seat 4A"),
        ("assistant", ("Done: booked seat 4A.", [])),
    ]
    first, second = model.requests
    offered = {t.name: t for t in first.tools}
    assert {"add", "confirm_booking"} <= set(offered)  # beside the agent's own
    assert offered["confirm_booking"].parameters == BOOKING["parameters"]
    *_, asking, result = second.messages  # as the model's server sees them
    assert isinstance(asking, AssistantMessage)
    assert isinstance(result, ToolResultMessage)
    assert result.results[0].call_id == asking.tool_calls[0].id
    assert result.results[0].text == "booked seat 4A"


def test_a_frontend_tool_that_failed_on_the_page_is_an_error_result(tmp_path: Path) -> None:
    def turn(request: ModelRequest) -> Turn:
        last = request.messages[-1]
        if isinstance(last, ToolResultMessage):
            result = last.results[0]
            return f"error={result.is_error}: {result.text}"
        return [ToolCall("confirm_booking", {"seat": "4A"})]

    with served(app(agent_with(FunctionModel(turn), tmp_path), token=TOKEN)) as url:
        _, answered = drive(
            url,
            "t",
            [
                {"user": "Book 4A.", "tools": [BOOKING]},
                {"answer": {"content": "", "error": "the dialog was closed"}},
            ],
        )
    assert clean(answered)["result"] == "error=True: the dialog was closed"


def test_a_reply_with_a_gated_call_and_a_frontend_call_is_answered_in_two_runs(
    tmp_path: Path,
) -> None:
    log: list[str] = []

    @tool
    def deploy(target: str) -> str:
        """Deploy."""
        log.append(target)
        return f"deployed {target}"

    def turn(request: ModelRequest) -> Turn:
        last = request.messages[-1]
        if isinstance(last, ToolResultMessage):
            return " / ".join(r.text for r in last.results)
        return [
            TextPart("Both."),
            ToolCall("deploy", {"target": "prod"}),
            ToolCall("confirm_booking", {"seat": "4A"}),
        ]

    agent = agent_with(FunctionModel(turn), tmp_path, tools=[deploy], interrupt_on={"deploy": True})
    with served(app(agent, token=TOKEN)) as url:
        asked, approved, answered = drive(
            url,
            "t",
            [
                {"user": "Ship and book.", "tools": [BOOKING]},
                {"resume": {"kind": "approve"}, "tools": [BOOKING]},
                {"answer": {"content": "booked"}, "tools": [BOOKING]},
            ],
        )
    clean(asked)
    assert asked["outcome"] == "interrupt"  # the person first, for the gated call
    [interrupt] = asked["pendingInterrupts"]
    assert interrupt["metadata"]["tool"] == "deploy"
    page_call = asked["messages"][1]["toolCalls"][1]["id"]
    assert asked["events"][-1]["metadata"]["pending_tool_call_ids"] == [page_call]
    clean(approved)
    assert approved["outcome"] == "success"  # then the page, for its own
    assert approved["pendingToolCallIds"] == [page_call]
    assert "TOOL_CALL_RESULT" not in types(approved)  # the turn runs once all is answered
    clean(answered)
    assert answered["result"] == "deployed prod / booked"
    assert log == ["prod"]
    conversation = said(answered)
    assert conversation[:2] == [
        ("user", "Ship and book."),
        (
            "assistant",
            ("Both.", [("deploy", {"target": "prod"}), ("confirm_booking", {"seat": "4A"})]),
        ),
    ]
    # in the order the client filed them (its own first; tether's after its call's)
    assert sorted(conversation[2:4]) == [("tool", "booked"), ("tool", "deployed prod")]
    assert conversation[4:] == [("assistant", ("deployed prod / booked", []))]


def test_a_subagent_streams_through_the_client(tmp_path: Path) -> None:
    def turn(request: ModelRequest) -> Turn:
        replies = sum(isinstance(m, AssistantMessage) for m in request.messages)
        if request.messages[0].text == "Add 1 and 2.":
            return [[ToolCall("add", {"a": 1, "b": 2})], "3"][replies]
        task = ToolCall("task", {"subagent_type": "adder", "description": "Add 1 and 2."})
        return [[TextPart("Asking the adder."), task], "It is 3."][replies]

    agent = agent_with(
        FunctionModel(turn), tmp_path, subagents=[SubAgent("adder", "Adds.", tools=[add])]
    )
    with served(app(agent, token=TOKEN)) as url:
        (run,) = drive(url, "t", [{"user": "1 + 2?"}])
    clean(run)
    assert "SUBAGENT_STARTED" in types(run)
    assert "SUBAGENT_FINISHED" in types(run)
    mine = [m for m in run["messages"] if "subagentRunId" not in m]
    theirs = [m for m in run["messages"] if "subagentRunId" in m]
    assert [m["role"] for m in mine] == ["user", "assistant", "tool", "assistant"]
    assert [m["role"] for m in theirs] == ["assistant", "tool", "assistant"]
    assert theirs[0]["toolCalls"][0]["function"]["name"] == "add"


def test_a_subagents_approval_round_trip(tmp_path: Path) -> None:
    log: list[str] = []

    @tool
    def deploy(target: str) -> str:
        """Deploy."""
        log.append(target)
        return f"deployed {target}"

    def turn(request: ModelRequest) -> Turn:
        replies = sum(isinstance(m, AssistantMessage) for m in request.messages)
        if request.messages[0].text == "Deploy prod.":
            return [[TextPart("On it."), ToolCall("deploy", {"target": "prod"})], "ok"][replies]
        task = ToolCall("task", {"subagent_type": "shipper", "description": "Deploy prod."})
        return [[task], "Shipped."][replies]

    shipper = SubAgent("shipper", "Ships.", tools=[deploy], interrupt_on={"deploy": True})
    agent = agent_with(FunctionModel(turn), tmp_path, subagents=[shipper])
    edit = {"kind": "edit", "args": {"target": "staging"}}
    with served(app(agent, token=TOKEN)) as url:
        asked, answered = drive(url, "t", [{"user": "Ship."}, {"resume": edit}])
    clean(asked)
    [interrupt] = asked["pendingInterrupts"]
    assert interrupt["subagentRunId"] == "task:shipper#1"
    clean(answered)
    assert answered["result"] == "Shipped."
    assert log == ["staging"]
    theirs = [m for m in answered["messages"] if m.get("subagentRunId") == "task:shipper#1"]
    [asking] = [m for m in theirs if m.get("toolCalls")]
    assert asking["content"] == "On it."
    [call] = asking["toolCalls"]
    assert json.loads(call["function"]["arguments"]) == {"target": "staging"}


def test_a_run_error_reaches_the_client_as_its_error(tmp_path: Path) -> None:
    model = ScriptedModel([RuntimeError("the provider is down")])
    with served(app(agent_with(model, tmp_path), token=TOKEN)) as url:
        (run,) = drive(url, "t", [{"user": "Hi."}])
    clean(run)
    assert types(run) == ["RUN_STARTED", "RUN_ERROR"]
    assert "the provider is down" in run["events"][-1]["message"]


def test_a_run_that_fails_midway_closes_what_it_streamed(tmp_path: Path) -> None:
    def turn(request: ModelRequest) -> Turn:
        if any(isinstance(m, ToolResultMessage) for m in request.messages):
            raise RuntimeError("the provider is down")
        return [TextPart("Adding."), ToolCall("add", {"a": 1, "b": 2})]

    with served(app(agent_with(FunctionModel(turn), tmp_path, tools=[add]), token=TOKEN)) as url:
        (run,) = drive(url, "t", [{"user": "1 + 2?"}])
    clean(run)
    assert types(run)[-1] == "RUN_ERROR"
    assert said(run)[1:3] == [
        ("assistant", ("Adding.", [("add", {"a": 1, "b": 2})])),
        ("tool", "3"),
    ]


def test_a_second_client_follows_a_live_run_from_its_start(tmp_path: Path) -> None:
    waiting: list[asyncio.Event] = []

    async def turn(request: ModelRequest) -> Turn:
        waiting.append(asyncio.Event())
        await waiting[-1].wait()
        return "Done."

    with served(app(agent_with(FunctionModel(turn), tmp_path), token=TOKEN)) as url:
        runs = f"{url}/api/agents/agent"
        with httpx.stream("POST", runs, json=run_input("t", "Work."), headers=AUTH) as started:
            assert "RUN_STARTED" in next(started.iter_lines())  # then this client leaves
        plan = {"url": runs, "token": TOKEN, "threadId": "t"}
        steps = [{"watch": f"{runs}/threads/t/events", "signal": True}]
        with _node(json.dumps({**plan, "steps": steps})) as watcher:
            assert watcher.stderr is not None
            assert watcher.stderr.readline().strip() == "RUN_STARTED"
            loop = waiting[0]._loop  # type: ignore[attr-defined]
            loop.call_soon_threadsafe(waiting[0].set)
            out, err = watcher.stdout.read(), watcher.stderr.read()  # type: ignore[union-attr]
            watcher.wait(60)
    assert watcher.returncode == 0, err
    (run,) = json.loads(out)["runs"]
    clean(run)
    assert types(run)[:2] == ["RUN_STARTED", "MESSAGES_SNAPSHOT"]
    assert said(run) == [("user", "Work."), ("assistant", ("Done.", []))]


def test_a_run_stopped_from_outside_ends_cancelled(tmp_path: Path) -> None:
    async def turn(request: ModelRequest) -> Turn:
        await asyncio.Event().wait()  # until the run is stopped
        return "never"

    with served(app(agent_with(FunctionModel(turn), tmp_path), token=TOKEN)) as url:
        plan = {"url": f"{url}/api/agents/agent", "token": TOKEN, "threadId": "t"}
        steps = [{"user": "Work.", "signal": True}]
        with _node(json.dumps({**plan, "steps": steps})) as client:
            assert client.stderr is not None
            assert client.stderr.readline().strip() == "RUN_STARTED"
            stopped = httpx.post(f"{url}/api/agents/agent/threads/t/stop", headers=AUTH)
            assert stopped.status_code == 200
            out, err = client.stdout.read(), client.stderr.read()  # type: ignore[union-attr]
            client.wait(60)
    assert client.returncode == 0, err
    (run,) = json.loads(out)["runs"]
    clean(run)
    assert run["outcome"] == "cancelled"
    assert types(run) == ["RUN_STARTED", "RUN_FINISHED"]


@contextlib.contextmanager
def _node(plan: str) -> Iterator[subprocess.Popen[str]]:
    """The client running `plan`, in the background; killed if the test leaves early."""
    process = subprocess.Popen(
        [str(node()), str(CLIENT)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert process.stdin is not None
    process.stdin.write(plan)
    process.stdin.close()
    try:
        yield process
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
