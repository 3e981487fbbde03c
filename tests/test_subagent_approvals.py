"""Approvals inside subagents: a gated call at any depth pauses the whole run, durably;
resume goes on inside the subagent, and what finished never runs again.

The agent is built here for the tests and for `python -m tests.test_subagent_approvals`,
which resumes a thread in a process of its own.
"""

from __future__ import annotations

import asyncio
import subprocess
import sys
from pathlib import Path

import pytest

from tether import (
    AlreadyDecidedError,
    Approve,
    ConfigurationError,
    Reject,
    SubAgent,
    create_agent,
    tool,
)
from tether.agent import Agent
from tether.checkpoint.journal import read_thread
from tether.messages import AssistantMessage, ToolCall, ToolResultMessage
from tether.models import FunctionModel, ModelRequest
from tether.models.scripted import Turn

from .conftest import by_server_id, own_id

ROOT = Path(__file__).resolve().parent.parent


def build(database: str, log: Path) -> Agent[str]:
    """An agent whose `deploy` needs approval and is called two subagents deep (main ->
    outer -> inner), while a sibling subagent `counter` calls `tally` (no approval).
    Both tools append to `log`, so a call that ran twice shows."""

    @tool
    def deploy(target: str) -> str:
        """Deploy to a target."""
        with log.open("a") as file:
            file.write(f"deploy {target}\n")
        return f"deployed to {target}"

    @tool
    def tally() -> str:
        """Count something."""
        with log.open("a") as file:
            file.write("tally\n")
        return "counted 3"

    def turn(request: ModelRequest) -> Turn:
        first = request.messages[0].text  # type: ignore[union-attr]
        done = sum(isinstance(m, AssistantMessage) for m in request.messages)
        results = [
            r.text for m in request.messages if isinstance(m, ToolResultMessage) for r in m.results
        ]
        step = SCRIPTS.get(first, MAIN)[done]
        return (
            step.format(" | ".join(results), results[-1] if results else "")
            if isinstance(step, str)
            else step
        )

    inner = SubAgent("inner", "Deploys.", tools=[tally, deploy])
    outer = SubAgent("outer", "Delegates deploys.", tools=[], subagents=[inner])
    counter = SubAgent("counter", "Counts.", tools=[tally])
    return create_agent(
        FunctionModel(turn),
        tools=[deploy, tally],
        subagents=[outer, counter],
        checkpointer=database,
        interrupt_on={"deploy": True},
    )


def task(name: str, description: str, call_id: str) -> ToolCall:
    return ToolCall("task", {"subagent_type": name, "description": description}, id=call_id)


MAIN: list[Turn] = [
    [task("outer", "Deploy through inner.", "t-outer"), task("counter", "Count.", "t-c")],
    "{0}",  # every result
]
SCRIPTS: dict[str, list[Turn]] = {  # by the subagent's task; "{1}" is the last result
    "Deploy through inner.": [[task("inner", "Run deploy.", "t-inner")], "outer: {1}"],
    "Run deploy.": [  # inner counts first, then deploys
        [ToolCall("tally", {}, id="c0")],
        [ToolCall("deploy", {"target": "prod"}, id="d1")],
        "inner: {1}",
    ],
    "Count.": [[ToolCall("tally", {}, id="c1")], "counter: {1}"],
}


def test_a_gated_call_two_levels_down_pauses_and_resumes_in_another_process(
    tmp_path: Path,
) -> None:
    database, log = f"sqlite:///{tmp_path}/runs.db", tmp_path / "log"
    agent = build(database, log)
    paused = agent.run("Ship it.", thread_id="ship")
    assert paused.stop_reason == "interrupted"
    (request,) = paused.interrupts
    d1 = deep_id(agent, "ship", "t-outer", "t-inner", "d1")
    assert (request.call_id, request.tool, request.args) == (d1, "deploy", {"target": "prod"})
    assert request.path == ("main", "task:outer#1", "task:inner#1")
    assert ran(log) == ["tally", "tally"]  # the sibling's and inner's first call; deploy waits

    done = subprocess.run(
        [sys.executable, "-m", "tests.test_subagent_approvals", database, str(log)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "completed: outer: inner: deployed to prod | counter: counted 3"
    assert ran(log) == ["deploy prod", "tally", "tally"]  # each call ran once


def test_a_rejected_call_deep_down_is_reported_up_the_tree(tmp_path: Path) -> None:
    database, log = f"sqlite:///{tmp_path}/runs.db", tmp_path / "log"
    agent = build(database, log)
    agent.run("Ship it.", thread_id="ship")
    done = agent.resume("ship", decisions=[Reject("not on a Friday")])
    assert done.stop_reason == "completed"
    assert "not on a Friday" in done.output
    assert ran(log) == ["tally", "tally"]
    reports = {k: r.text for k, r in by_server_id(done.messages).items()}
    assert reports["t-c"] == "counter: counted 3"  # the sibling's, recorded before the pause


def test_resuming_again_runs_nothing_twice(tmp_path: Path) -> None:
    database, log = f"sqlite:///{tmp_path}/runs.db", tmp_path / "log"
    agent = build(database, log)
    agent.run("Ship it.", thread_id="ship")
    d1 = deep_id(agent, "ship", "t-outer", "t-inner", "d1")
    agent.resume("ship", decisions=[Approve()])
    rerun = build(database, log)  # a fresh agent on the same thread: nothing waits
    with pytest.raises(AlreadyDecidedError, match=f"deploy \\({d1}\\): approve"):
        rerun.resume("ship", decisions=[Approve()])
    assert ran(log) == ["deploy prod", "tally", "tally"]


def deep_id(agent: Agent[str], thread_id: str, *server_ids: str) -> str:
    """tether's id of the call the script named `server_ids[-1]`, made in the subagent
    run that the `task` calls named `server_ids[:-1]` started, each inside the last."""
    thread = asyncio.run(read_thread(agent.checkpointer, thread_id))  # type: ignore[arg-type]
    for task_id in server_ids[:-1]:
        thread = thread.subagents[own_id(thread.messages, task_id)]
    return own_id(thread.messages, server_ids[-1])


def ran(log: Path) -> list[str]:
    """The calls that ran, sorted (parallel subagents run in any order)."""
    return sorted(log.read_text().splitlines())


if __name__ == "__main__":
    result = build(sys.argv[1], Path(sys.argv[2])).resume("ship", decisions=[Approve()])
    print(f"{result.stop_reason}: {result.output}")


def test_a_run_killed_inside_a_subagent_goes_on_inside_it(tmp_path: Path) -> None:
    """Not an approval, but the same record: the subagent's finished calls stand, the one
    cut short is reported as such, and its run goes on from its last step."""
    from .conftest import Crash

    database, calls = f"sqlite:///{tmp_path}/runs.db", []

    def agent(crash_at: int | None) -> Agent[str]:
        @tool
        def bump(n: int) -> str:
            """Count one."""
            calls.append(n)
            if n == crash_at:
                raise Crash
            return f"bumped {n}"

        def turn(request: ModelRequest) -> Turn:
            done = sum(isinstance(m, ToolResultMessage) for m in request.messages)
            if request.messages[0].text == "Count to 3.":  # type: ignore[union-attr]
                if done < 3:
                    return [ToolCall("bump", {"n": done}, id=f"b{done}")]
                return "counted"
            return [task("general-purpose", "Count to 3.", "t")] if not done else "the sub counted"

        return create_agent(FunctionModel(turn), tools=[bump], checkpointer=database)

    with pytest.raises(Crash):
        agent(crash_at=1).run("Count.", thread_id="job")
    result = agent(crash_at=None).resume("job")
    assert result.output == "the sub counted"
    assert calls == [0, 1, 2]  # 0 is not run again; 1 was cut short, and is not either


def test_a_subagents_own_gates_pause_it_and_never_its_parent(tmp_path: Path) -> None:
    log = tmp_path / "log"

    @tool
    def deploy(target: str) -> str:
        """Deploy to a target."""
        with log.open("a") as file:
            file.write(f"deploy {target}\n")
        return f"deployed to {target}"

    def turn(request: ModelRequest) -> Turn:
        done = sum(isinstance(m, AssistantMessage) for m in request.messages)
        if request.messages[0].text == "Deploy prod.":  # type: ignore[union-attr]
            return [[ToolCall("deploy", {"target": "prod"}, id="d-sub")], "sub deployed"][done]
        staging = ToolCall("deploy", {"target": "staging"}, id="d-main")
        return [[staging], [task("careful", "Deploy prod.", "t")], "all deployed"][done]

    careful = SubAgent("careful", "Deploys with approval.", interrupt_on={"deploy": True})
    agent = create_agent(
        FunctionModel(turn),
        tools=[deploy],
        subagents=[careful],
        checkpointer=f"sqlite:///{tmp_path}/runs.db",
    )
    paused = agent.run("Deploy everywhere.")  # a thread is made: a subagent may wait
    assert paused.stop_reason == "interrupted"
    assert paused.thread_id is not None
    d_sub = deep_id(agent, paused.thread_id, "t", "d-sub")
    assert [(r.call_id, r.path) for r in paused.interrupts] == [(d_sub, ("main", "task:careful#1"))]
    assert ran(log) == ["deploy staging"]  # the parent's own call was not gated
    done = agent.resume(paused.thread_id, decisions=[Approve()])
    assert done.output == "all deployed"
    assert ran(log) == ["deploy prod", "deploy staging"]
    with pytest.raises(ConfigurationError, match="a subagent's\\) needs a checkpointer"):
        create_agent(FunctionModel(turn), tools=[deploy], subagents=[careful], checkpointer=None)
