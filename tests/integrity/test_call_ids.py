"""Call ids from a model's server are neither unique nor safe: tether keys everything by
ids of its own, and sends the server's back only to that server.

Each case here is one a real server produced (an id reused in a later turn, the same id
twice in one reply, no id at all), and each failed before tether made its own ids.
"""

from __future__ import annotations

import asyncio
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

from tether import Approve, Background, create_agent, tool
from tether.events import ModelDelta, ToolCallFinished, ToolCallStarted
from tether.messages import AssistantMessage, TextPart, ToolCall, ToolResultMessage, UserMessage
from tether.models import FunctionModel, ModelRequest, ScriptedModel
from tether.models.base import ModelResponse, StreamDelta
from tether.testing import tool_calls, tool_results


def test_each_call_of_a_reply_gets_an_id_of_its_own_and_the_server_sees_its_own() -> None:
    @tool
    def echo(text: str) -> str:
        """Say it back."""
        return text

    model = ScriptedModel(
        [
            [
                ToolCall("echo", {"text": "one"}, "dup"),
                ToolCall("echo", {"text": "two"}, "dup"),  # the same id twice in one reply
                ToolCall("echo", {"text": "three"}, ""),  # no id at all
                ToolCall("echo", {"text": "four"}, "fine"),
            ],
            "done",
        ]
    )
    result = create_agent(model, tools=[echo]).run("go")
    calls = tool_calls(result)
    assert len({c.id for c in calls}) == 4
    assert not {c.id for c in calls} & {"dup", "", "fine"}
    assert [c.provider_id for c in calls] == [None, None, None, "fine"]
    assert [(r.call_id, r.text) for r in tool_results(result)] == [
        (c.id, c.args["text"])
        for c in calls  # type: ignore[index]
    ]
    # The server gets back what it sent where it can tell its calls apart, tether's ids
    # where it cannot: every call and result on the wire pairs up, once each.
    wire = model.requests[1].messages
    sent = [c.id for c in wire[1].tool_calls]  # type: ignore[union-attr]
    answered = [r.call_id for r in wire[2].results]  # type: ignore[union-attr]
    assert sent == answered
    assert len(set(sent)) == 4
    assert sent[3] == "fine"
    assert sent[:3] == [c.id for c in calls[:3]]


def test_an_id_reused_in_a_later_turn_runs_the_approved_call(tmp_path: Path) -> None:
    ran: list[str] = []

    @tool
    def deploy(target: str) -> str:
        """Deploy somewhere."""
        ran.append(target)
        return f"deployed {target}"

    def reply(request: ModelRequest) -> Any:
        done = [r for m in request.messages if isinstance(m, ToolResultMessage) for r in m.results]
        if len(done) < 2:  # the server gives both calls the id "call_1"
            target = "staging" if not done else "production"
            return [ToolCall("deploy", {"target": target}, "call_1")]
        return f"heard: {done[-1].text}"

    agent = create_agent(
        FunctionModel(reply),
        tools=[deploy],
        checkpointer=f"sqlite:///{tmp_path}/runs.db",
        interrupt_on={"deploy": True},
    )
    first = agent.run("ship it", thread_id="t")
    second = agent.resume("t", decisions={first.interrupts[0].call_id: Approve()})
    assert second.stop_reason == "interrupted"
    assert second.interrupts[0].call_id != first.interrupts[0].call_id
    final = agent.resume("t", decisions={second.interrupts[0].call_id: Approve()})
    assert ran == ["staging", "production"]
    assert final.output == "heard: deployed production"


CRASHING_WORKER = r"""
import os, signal, sys
from tether import create_agent, tool
from tether.messages import ToolCall, ToolResultMessage
from tether.models import FunctionModel

@tool
def bump(n: int) -> str:
    "Count one, or die on the second."
    if n == 2:
        os.kill(os.getpid(), signal.SIGKILL)
    return f"bumped {n}"

def reply(request):
    done = sum(len(m.results) for m in request.messages if isinstance(m, ToolResultMessage))
    return [ToolCall("bump", {"n": done + 1}, "same")] if done < 2 else "done"

agent = create_agent(FunctionModel(reply), tools=[bump], checkpointer=sys.argv[1])
agent.run("count", thread_id="k")
"""


def test_a_call_killed_under_a_reused_id_resumes_as_unknown(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path}/runs.db"
    script = tmp_path / "worker.py"
    script.write_text(CRASHING_WORKER)
    done = subprocess.run(
        [sys.executable, str(script), url], check=False, capture_output=True, timeout=120
    )
    assert done.returncode == -signal.SIGKILL, done.stderr

    def reply(request: ModelRequest) -> Any:
        return "done"

    result = create_agent(FunctionModel(reply), checkpointer=url).resume("k")
    first, second = tool_results(result)
    assert first.text == "bumped 1"
    assert second.is_error, second.text  # not "bumped 1", the first call's result
    assert "unknown" in second.text


def test_two_background_tasks_under_one_id_are_both_followed_and_ended() -> None:
    running: set[str] = set()
    release = asyncio.Event()

    async def sub(request: ModelRequest) -> Any:
        name = request.messages[0].text  # type: ignore[union-attr]
        running.add(name)
        await release.wait()
        running.discard(name)
        return f"{name} finished"

    def main(request: ModelRequest) -> Any:
        turn = sum(isinstance(m, AssistantMessage) for m in request.messages)
        if turn == 0:
            return [
                ToolCall("task", {"description": d, "subagent_type": "general-purpose",
                                  "background": True}, "bg")
                for d in ("first", "second")
            ]  # fmt: skip
        if turn == 1:
            return [ToolCall("list_tasks", {}, "ls")]
        return "done"

    async def reply(request: ModelRequest) -> Any:
        first = request.messages[0]
        if isinstance(first, UserMessage) and first.text in ("first", "second"):
            return await sub(request)
        if turn_of(request) == 1:
            release.set()  # both subagents run by now: let them finish
        return main(request)

    def turn_of(request: ModelRequest) -> int:
        return sum(isinstance(m, AssistantMessage) for m in request.messages)

    agent = create_agent(FunctionModel(reply), background=Background(at_end="wait"))

    async def go() -> Any:
        result = await agent.arun("two at once")
        leftover = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
        return result, leftover

    result, leftover = asyncio.run(go())
    started = [r for r in tool_results(result) if r.name == "task"]
    assert len({r.call_id for r in started}) == 2
    assert all(r.call_id in r.text for r in started)  # each handle names its own task
    listing = next(r for r in tool_results(result) if r.name == "list_tasks").text
    assert listing.count("general-purpose") == 2, listing
    heard = [m.text for m in result.messages if isinstance(m, UserMessage)][1:]
    assert sum("first finished" in h for h in heard) == 1
    assert sum("second finished" in h for h in heard) == 1
    assert not running  # no subagent left working
    assert not leftover


def test_streamed_arguments_carry_the_id_the_call_runs_under() -> None:
    @tool
    def note(text: str) -> str:
        """Take a note."""
        return "ok"

    model = ScriptedModel(
        [[ToolCall("note", {"text": "a"}, "same"), ToolCall("note", {"text": "b"}, "same")], "done"]
    )
    agent = create_agent(model, tools=[note])

    async def events() -> list[Any]:
        return [e async for e in agent.stream("go")]

    seen = asyncio.run(events())
    streamed = [
        (e.call_id, e.delta) for e in seen if isinstance(e, ModelDelta) and e.part == "tool_call"
    ]
    started = {e.call.id: e.call.args["text"] for e in seen if isinstance(e, ToolCallStarted)}
    finished = {e.call.id for e in seen if isinstance(e, ToolCallFinished)}
    assert len(started) == 2
    assert finished == set(started)
    assert {call_id: delta for call_id, delta in streamed} == {
        call_id: f'{{"text": "{text}"}}' for call_id, text in started.items()
    }


class _NoIndexModel:
    """A model of the user's own, whose stream says which call by the server's id only."""

    name, provider = "plain", "test"

    async def request(self, request: ModelRequest) -> ModelResponse:
        raise NotImplementedError

    async def stream(self, request: ModelRequest) -> Any:
        if any(isinstance(m, ToolResultMessage) for m in request.messages):
            yield ModelResponse(AssistantMessage((TextPart("done"),)))
            return
        for call_id, text in (("p1", "a"), ("p2", "b")):
            yield StreamDelta("tool_call", f'{{"text": "{text}"}}', call_id, "note")
        calls = (ToolCall("note", {"text": "a"}, "p1"), ToolCall("note", {"text": "b"}, "p2"))
        yield ModelResponse(AssistantMessage(calls), finish_reason="tool_calls")


def test_a_stream_without_positions_is_matched_by_the_servers_ids() -> None:
    @tool
    def note(text: str) -> str:
        """Take a note."""
        return "ok"

    agent = create_agent(_NoIndexModel(), tools=[note])  # type: ignore[arg-type]

    async def events() -> list[Any]:
        return [e async for e in agent.stream("go")]

    seen = asyncio.run(events())
    streamed = {
        e.call_id: e.delta for e in seen if isinstance(e, ModelDelta) and e.part == "tool_call"
    }
    started = {e.call.id: e.call.args["text"] for e in seen if isinstance(e, ToolCallStarted)}
    assert {k: v.split('"')[3] for k, v in streamed.items()} == started
    assert not set(started) & {"p1", "p2"}


def test_a_hostile_id_cannot_steer_where_a_large_result_is_saved() -> None:
    @tool
    def dump() -> str:
        """Return a lot."""
        return "x" * 200_000

    model = ScriptedModel([[ToolCall("dump", {}, "../../etc/passwd")], "done"])
    result = create_agent(model, tools=[dump]).run("go")
    (saved,) = result.files
    assert saved == f"/large_tool_results/{tool_calls(result)[0].id}"


def test_ids_stay_the_same_when_a_waiting_run_resumes(tmp_path: Path) -> None:
    model = ScriptedModel(
        [[ToolCall("write_file", {"file_path": "/a.md", "content": "A"}, "w")], "done"]
    )
    agent = create_agent(
        model, checkpointer=f"sqlite:///{tmp_path}/runs.db", interrupt_on={"write_file": True}
    )
    waiting = agent.run("write", thread_id="t")
    (asked,) = waiting.interrupts
    done = agent.resume("t", decisions={asked.call_id: Approve()})
    (call,) = tool_calls(done)
    assert call.id == asked.call_id
    assert call.provider_id == "w"
    assert [r.call_id for r in tool_results(done)] == [asked.call_id]
