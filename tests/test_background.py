"""Subagents in the background: started by `task(background=true)`, followed by the
check, wait, cancel and list tools, delivered unasked at the next step, waited for or
cancelled when the run ends, and carried on after a `kill -9`."""

from __future__ import annotations

import asyncio
import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path

import pytest

from tether import Background, ConfigurationError, create_agent, tool
from tether.messages import AssistantMessage, Message, ToolCall, UserMessage
from tether.models import FunctionModel, ModelRequest
from tether.models.scripted import Turn
from tether.testing import tool_results

from .conftest import by_server_id, own_id

ROOT = Path(__file__).resolve().parent.parent


def start(task: str, call_id: str, subagent: str = "general-purpose") -> ToolCall:
    args = {"description": task, "subagent_type": subagent, "background": True}
    return ToolCall("task", args, id=call_id)


def task_id(started: str) -> str:
    """The id a background task got, read from the result of the `task` call that
    started it (as a model would read it)."""
    found = re.search(r"as task (call_[0-9a-f]+)\.", started)
    assert found is not None, started
    return found.group(1)


def told(messages: Sequence[Message]) -> list[str]:
    """What reached the agent unasked: the user messages after its first."""
    return [m.text for m in messages[1:] if isinstance(m, UserMessage)]


def model(main: Callable[[int, ModelRequest], Turn], subagents: dict[str, object]) -> FunctionModel:
    """The main agent's turns from `main(turn, request)`; a subagent's from its task's
    entry: a coroutine function of the request, or a fixed reply."""

    async def reply(request: ModelRequest) -> Turn:
        first = request.messages[0].text  # type: ignore[union-attr]
        if first in subagents:
            answer = subagents[first]
            return await answer(request) if callable(answer) else answer  # type: ignore[no-any-return]
        return main(sum(isinstance(m, AssistantMessage) for m in request.messages), request)

    return FunctionModel(reply)


def test_a_background_result_reaches_the_agent_while_it_works() -> None:
    finished = asyncio.Event()

    async def dig(request: ModelRequest) -> Turn:
        finished.set()
        return "Dug 3 holes."

    @tool
    async def chores() -> str:
        """Do the chores."""
        await asyncio.wait_for(finished.wait(), 10)
        await asyncio.sleep(0.2)  # the subagent's run ends meanwhile
        return "chores done"

    seen: list[list[str]] = []

    def main(turn: int, request: ModelRequest) -> Turn:
        seen.append(told(request.messages))
        return [[start("Dig.", "t1")], [ToolCall("chores", {}, id="c")], "All done."][turn]

    agent = create_agent(
        model(main, {"Dig.": dig}), tools=[chores], background=Background(), checkpointer=None
    )
    result = agent.run("Dig and do the chores.")
    assert result.output == "All done."
    first, chores_done = tool_results(result)
    t1 = own_id(result.messages, "t1")  # the task is named by tether's id of its call
    assert first.text.startswith(
        f"Started the general-purpose subagent in the background as task {t1}."
    )
    assert chores_done.text == "chores done"
    assert seen[2] == [  # not asked for: it came with the next step
        f"[background task {t1}] The general-purpose subagent finished (completed). Its report:"
        "\n\nDug 3 holes."
    ]
    assert set(result.usage_by_agent) == {"main", "main/task:general-purpose#1"}  # one budget


def test_check_wait_cancel_and_list() -> None:
    never = asyncio.Event()

    async def slow(request: ModelRequest) -> Turn:
        await never.wait()
        return "never"

    def main(turn: int, request: ModelRequest) -> Turn:
        if turn == 0:
            return [start("Quick.", "q"), start("Slow.", "s")]
        # The tasks by the ids their start gave them (the model sees its own call ids).
        started = {r.call_id: task_id(r.text) for r in tool_results(request.messages)[:2]}
        q, s = started["q"], started["s"]
        return [
            [ToolCall("check_task", {"task_id": s}, id="c1")],
            [ToolCall("wait_task", {"task_id": q}, id="w")],
            [ToolCall("wait_task", {"task_id": s, "timeout_seconds": 0.1}, id="w2")],
            [ToolCall("cancel_task", {"task_id": s}, id="x")],
            [
                ToolCall("list_tasks", {}, id="l"),
                ToolCall("check_task", {"task_id": "nope"}, id="n"),
            ],
            "done",
        ][turn - 1]

    agent = create_agent(
        model(main, {"Quick.": "quick result", "Slow.": slow}),
        background=Background(),
        checkpointer=None,
    )
    result = agent.run("Go.")
    answers = by_server_id(result.messages)
    q, s = own_id(result.messages, "q"), own_id(result.messages, "s")
    assert (task_id(answers["q"].text), task_id(answers["s"].text)) == (q, s)
    assert answers["c1"].text == f"Task {s} (general-purpose) is still running."
    assert answers["w"].text.endswith("finished (completed). Its report:\n\nquick result")
    assert answers["w2"].text == f"Task {s} (general-purpose) is still running after 0.1s."
    assert answers["x"].text == f"Task {s} (general-purpose) is cancelled."
    listing = answers["l"].text.splitlines()
    assert listing == [
        f"- {q} (general-purpose): completed — Quick.",
        f"- {s} (general-purpose): cancelled — Slow.",
    ]
    assert answers["n"].is_error
    assert f"There is no background task 'nope'. Tasks: {q}, {s}." in answers["n"].text
    (heard,) = told(result.messages)  # q finished first: told once, unasked; s never
    assert heard.startswith(f"[background task {q}]")


@pytest.mark.parametrize("at_end", ["wait", "cancel"])
def test_at_the_end_background_work_is_waited_for_or_cancelled(at_end: str) -> None:
    async def late(request: ModelRequest) -> Turn:
        await asyncio.sleep(0.3)
        return "late result"

    def main(turn: int, request: ModelRequest) -> Turn:
        if turn == 0:
            return [start("Late.", "t")]
        heard = told(request.messages)
        return f"final, having heard {len(heard)}" if heard else "done early"

    agent = create_agent(
        model(main, {"Late.": late}),
        background=Background(at_end=at_end),  # type: ignore[arg-type]
        checkpointer=None,
    )
    started = time.monotonic()
    result = agent.run("Go.")
    if at_end == "wait":
        assert result.output == "final, having heard 1"  # it was given the result first
    else:
        assert result.output == "done early"
        assert time.monotonic() - started < 0.3  # not waited for


def test_bad_background_settings_are_refused() -> None:
    with pytest.raises(ConfigurationError, match='at_end must be "wait" or "cancel"'):
        Background(at_end="later")  # type: ignore[arg-type]
    with pytest.raises(ConfigurationError, match="max_running must be at least 1"):
        Background(max_running=0)
    with pytest.raises(ConfigurationError, match=r"background must be a tether\.Background"):
        create_agent(FunctionModel(lambda r: "x"), background=True)  # type: ignore[arg-type]


def test_too_many_at_once_is_a_tool_error() -> None:
    never = asyncio.Event()

    async def stuck(request: ModelRequest) -> Turn:
        await never.wait()
        return "never"

    turns: list[Turn] = [[start("Stuck.", "a"), start("Stuck.", "b")], "done"]
    agent = create_agent(
        model(lambda turn, _: turns[turn], {"Stuck.": stuck}),
        background=Background(at_end="cancel", max_running=1),
        checkpointer=None,
    )
    answers = tool_results(agent.run("Go."))
    assert not answers[0].is_error
    assert answers[1].is_error
    assert "1 subagents already work in the background, the most allowed" in answers[1].text


def test_a_background_subagents_gated_call_is_refused(tmp_path: Path) -> None:
    def main(turn: int, request: ModelRequest) -> Turn:
        return [start("Write.", "t")] if turn == 0 else "done"

    write = [ToolCall("write_file", {"file_path": "/x.md", "content": "x"}, id="w")]

    async def writer(request: ModelRequest) -> Turn:
        if len(request.messages) == 1:
            return write
        return "gave up: " + tool_results(request.messages)[-1].text

    agent = create_agent(
        model(main, {"Write.": writer}),
        background=Background(),
        checkpointer=f"sqlite:///{tmp_path}/runs.db",
        interrupt_on={"write_file": True},
    )
    result = agent.run("Go.", thread_id="t")
    assert result.stop_reason == "completed"
    assert result.files == {}
    (heard,) = told(result.messages)
    assert "gave up: Not run: `write_file` needs a person's approval here" in heard


KILLED = """
import asyncio, sys
from pathlib import Path
from tether import Background, create_agent, tool
from tether.messages import AssistantMessage, ToolCall, UserMessage
from tether.models import FunctionModel

log = Path(sys.argv[2])

@tool
def bump(n: int) -> str:
    "Count one."
    with log.open("a") as file:
        file.write(f"bump {n}\\n")
    return f"bumped {n}"

async def reply(request):
    first = request.messages[0].text
    done = sum(isinstance(m, AssistantMessage) for m in request.messages)
    if first == "Count.":  # the background subagent: two bumps, a long think between
        if done == 1 and sys.argv[3] == "start":
            await asyncio.sleep(60)  # killed here
        return [[ToolCall("bump", {"n": 0}, id="b0")], [ToolCall("bump", {"n": 1}, id="b1")],
                "counted to 2"][done]
    heard = [m.text for m in request.messages[1:] if isinstance(m, UserMessage)]
    if heard:
        return "main heard: " + heard[-1].splitlines()[-1]
    if done == 0:
        args = {"description": "Count.", "subagent_type": "general-purpose", "background": True}
        return [ToolCall("task", args, id="bg")]
    return "waiting for the count"

agent = create_agent(FunctionModel(reply), tools=[bump], checkpointer=sys.argv[1],
                     background=Background())
if sys.argv[3] == "start":
    agent.run("Count in the background.", thread_id="bg-job")
else:
    result = agent.resume("bg-job")
    print(result.stop_reason, "|", result.output)
"""


def test_background_work_survives_kill_9_and_runs_no_call_twice(tmp_path: Path) -> None:
    script, log = tmp_path / "killed.py", tmp_path / "log"
    script.write_text(KILLED)
    database = f"sqlite:///{tmp_path}/runs.db"
    command = [sys.executable, str(script), database, str(log)]
    process = subprocess.Popen([*command, "start"], cwd=ROOT)
    deadline = time.monotonic() + 60
    while not (log.exists() and log.read_text()):  # the first bump is recorded
        assert time.monotonic() < deadline
        assert process.poll() is None
        time.sleep(0.05)
    time.sleep(0.5)  # its result is written before the next model call
    os.kill(process.pid, signal.SIGKILL)
    process.wait()
    assert log.read_text() == "bump 0\n"
    done = subprocess.run(
        [*command, "resume"], cwd=ROOT, capture_output=True, text=True, timeout=120, check=False
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "completed | main heard: counted to 2"
    assert log.read_text() == "bump 0\nbump 1\n"  # bump 0 was not run again
