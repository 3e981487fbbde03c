"""Two processes on one thread: each side effect runs once, and the thread stays one
valid conversation, whatever the interleaving.

Each scenario runs two worker processes for ROUNDS rounds; in each round both meet at
a file barrier and then act on the same thread at once. The tool writes a ledger line
per execution (thread and call id), which is compared with the saved threads.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import Crash, own_id
from tether import Approve, ToolContext, create_agent, tool
from tether.messages import AssistantMessage, Message, ToolResultMessage, UserMessage
from tether.models import FunctionModel

ROUNDS = 50

WORKER = r"""
import json, random, sys, time
from pathlib import Path

from tether import (AlreadyDecidedError, Approve, ConfigurationError, Reject,
                    ThreadBusyError, ToolContext, create_agent, tool)
from tether.messages import ToolCall, ToolResultMessage, UserMessage
from tether.models import FunctionModel

scenario, role, url, folder, rounds = sys.argv[1:]
folder, rounds = Path(folder), int(rounds)
ledger = open(folder / f"ledger-{role}", "a", buffering=1)

@tool
def bump(n: int, context: ToolContext) -> str:
    "Count one."
    ledger.write(f"{context.state.thread_id} {context.call.id}\n")
    time.sleep(0.01)
    return f"bumped {n}"

def step(request):
    # This run's calls only: when the other worker's run finished first, its calls are
    # in the history too (counting them made this run answer at once, and the test flaky).
    last = max(i for i, m in enumerate(request.messages) if isinstance(m, UserMessage))
    done = sum(
        len(m.results) for m in request.messages[last:] if isinstance(m, ToolResultMessage)
    )
    return [ToolCall("bump", {"n": done})] if done < STEPS else "done"

gated = scenario.startswith("decide")
STEPS = 1 if gated else 3
agent = create_agent(FunctionModel(step), tools=[bump], checkpointer=url,
                     interrupt_on={"bump": True} if gated else None)
asked = json.loads((folder / "asked.json").read_text()) if gated else {}

def meet(n):
    (folder / f"ready-{n}-{role}").touch()
    other = folder / f"ready-{n}-{'b' if role == 'a' else 'a'}"
    while not other.exists():
        time.sleep(0.0005)

def act(thread):
    if scenario == "starts" or (scenario == "start-resume" and role == "a"):
        return agent.run("go", thread_id=thread)
    if scenario == "start-resume":
        time.sleep(random.uniform(0, 0.04))
        return agent.resume(thread)
    if scenario == "resumes":
        return agent.resume(thread)
    if scenario == "decide-same":
        return agent.resume(thread, decisions={asked[thread]: Approve()})
    decision = Approve() if role == "a" else Reject("no")
    return agent.resume(thread, decisions={asked[thread]: decision})

with open(folder / f"outcome-{role}", "w") as out:
    for n in range(rounds):
        meet(n)
        try:
            result = act(f"t{n}")
            outcome = result.stop_reason
        except ThreadBusyError:
            outcome = "busy"
        except AlreadyDecidedError:
            outcome = "decided"
        except ConfigurationError as exc:
            outcome = "refused: " + str(exc)
        out.write(json.dumps([n, outcome]) + "\n")
"""


def _steps(tool_name: str) -> FunctionModel:
    from tether.messages import ToolCall

    def step(request: Any) -> Any:
        done = sum(len(m.results) for m in request.messages if isinstance(m, ToolResultMessage))
        return [ToolCall(tool_name, {"n": done})] if done < 3 else "done"

    return FunctionModel(step)


def _prepare(scenario: str, url: str, folder: Path) -> None:
    """The threads the scenario starts from: none, killed runs, or runs that wait."""
    ledger = folder / "ledger-setup"

    @tool
    def crash(n: int, context: ToolContext) -> str:
        """Die on the second call."""
        if n == 1:
            raise Crash()
        with ledger.open("a") as out:
            out.write(f"{context.state.thread_id} {context.call.id}\n")
        return f"bumped {n}"

    @tool
    def bump(n: int) -> str:
        """Count one (never runs here: it waits for a decision)."""
        raise AssertionError("ran before a decision")

    if scenario == "resumes":
        agent = create_agent(_steps("crash"), tools=[crash], checkpointer=url)
        for n in range(ROUNDS):
            with pytest.raises(Crash):
                agent.run("go", thread_id=f"t{n}")
    if scenario.startswith("decide"):
        agent = create_agent(
            _steps("bump"), tools=[bump], checkpointer=url, interrupt_on={"bump": True}
        )
        asked = {}
        for n in range(ROUNDS):
            result = agent.run("go", thread_id=f"t{n}")
            assert result.stop_reason == "interrupted"
            asked[f"t{n}"] = result.interrupts[0].call_id
        (folder / "asked.json").write_text(json.dumps(asked))


def _race(scenario: str, url: str, folder: Path) -> dict[str, list[str]]:
    """Both workers' outcomes by thread, after ROUNDS rounds."""
    script = folder / "worker.py"
    script.write_text(WORKER)
    workers = [
        subprocess.Popen(
            [sys.executable, str(script), scenario, role, url, str(folder), str(ROUNDS)],
            stderr=subprocess.PIPE,
            text=True,
        )
        for role in ("a", "b")
    ]
    for worker in workers:
        _, err = worker.communicate(timeout=240)
        assert worker.returncode == 0, err
    outcomes: dict[str, list[str]] = {f"t{n}": [] for n in range(ROUNDS)}
    for role in ("a", "b"):
        for line in (folder / f"outcome-{role}").read_text().splitlines():
            n, outcome = json.loads(line)
            outcomes[f"t{n}"].append(outcome)
    return outcomes


def _ledger(folder: Path) -> Counter[tuple[str, str]]:
    lines = [
        tuple(line.split())
        for ledger in folder.glob("ledger-*")
        for line in ledger.read_text().splitlines()
    ]
    return Counter((thread, call) for thread, call in lines)


def _check_conversation(messages: list[Message], ran: set[str]) -> int:
    """Check the thread is runs one after another, each call answered once, right after
    the message that made it; a "bumped" result only for a call that ran. The runs."""
    runs = 0
    for i, message in enumerate(messages):
        if isinstance(message, UserMessage):
            runs += 1
            assert i == 0 or isinstance(messages[i - 1], AssistantMessage), "runs interleave"
            assert not messages[i - 1].tool_calls if i else True
        elif isinstance(message, AssistantMessage):
            assert not isinstance(messages[i - 1], AssistantMessage), "two replies in a row"
            if message.tool_calls:
                answer = messages[i + 1]
                assert isinstance(answer, ToolResultMessage)
                assert [r.call_id for r in answer.results] == [c.id for c in message.tool_calls]
        else:
            assert isinstance(messages[i - 1], AssistantMessage)
            for result in message.results:
                assert result.text.startswith("bumped") == (result.call_id in ran), result
    return runs


SCENARIOS = ["starts", "start-resume", "resumes", "decide-same", "decide-different"]


@pytest.mark.parametrize("scenario", SCENARIOS)
def test_two_processes_on_one_thread_never_repeat_an_effect(
    scenario: str, store_url: str, tmp_path: Path
) -> None:
    url = store_url
    _prepare(scenario, url, tmp_path)
    outcomes = _race(scenario, url, tmp_path)
    ledger = _ledger(tmp_path)
    assert ledger, "the workers ran nothing"
    assert max(ledger.values()) == 1, "a tool call ran twice"
    reader = create_agent(FunctionModel(lambda request: "x"), checkpointer=url)
    contended = 0
    for thread, seen in outcomes.items():
        assert len(seen) == 2
        ran = {call for (t, call) in ledger if t == thread}
        messages = reader.history(thread)
        runs = _check_conversation(messages, ran)
        finished = seen.count("completed")
        contended += any(o in ("busy", "decided") for o in seen)
        if scenario == "starts":
            assert runs == finished >= 1, seen
            assert len(ran) == 3 * runs
        elif scenario == "start-resume":
            # The run completes, or finds the resume holding the thread for a moment.
            assert seen[0] in ("completed", "busy"), seen
            assert runs == finished, seen
            assert seen[1] == "busy" or seen[1].startswith("refused"), seen
        elif scenario == "resumes":
            assert finished == 1, seen  # the other was busy or found it done
            assert runs == 1, seen
            (other,) = [o for o in seen if o != "completed"]
            assert other == "busy" or "nothing to resume" in other, seen
        else:
            assert finished == 1, seen
            assert len(ran) <= 1
            results = [r for m in messages if isinstance(m, ToolResultMessage) for r in m.results]
            assert len(results) == 1
            if scenario == "decide-same":
                assert len(ran) == 1
            approved = results[0].text.startswith("bumped")
            assert approved == (len(ran) == 1)
    assert contended >= 5, "the two processes hardly ever met: the test proves nothing"


def test_the_same_decision_twice_in_one_process_runs_the_call_once(tmp_path: Path) -> None:
    import asyncio

    from tether import AlreadyDecidedError, ThreadBusyError

    runs: list[int] = []

    @tool
    async def slow(n: int) -> str:
        """Take a while."""
        runs.append(n)
        await asyncio.sleep(0.05)
        return "ok"

    def model(request: Any) -> Any:
        from tether.messages import ToolCall

        done = any(isinstance(m, ToolResultMessage) for m in request.messages)
        return "done" if done else [ToolCall("slow", {"n": 1}, id="c1")]

    agent = create_agent(
        FunctionModel(model),
        tools=[slow],
        checkpointer=f"sqlite:///{tmp_path}/runs.db",
        interrupt_on={"slow": True},
    )
    paused = agent.run("go", thread_id="t")
    assert paused.stop_reason == "interrupted"
    c1 = own_id(paused.messages, "c1")  # tether's id of the call the model named c1

    async def both() -> list[Any]:
        twice = [agent.aresume("t", decisions={c1: Approve()}) for _ in range(2)]
        return await asyncio.gather(*twice, return_exceptions=True)

    first, second = asyncio.run(both())
    outcomes = sorted(type(o).__name__ for o in (first, second))
    assert outcomes in (["RunResult", "ThreadBusyError"], ["AlreadyDecidedError", "RunResult"])
    assert runs == [1]
    # Sent again later, the answer names the earlier decision.
    with pytest.raises(AlreadyDecidedError, match=rf"slow \({c1}\): approve") as caught:
        agent.resume("t", decisions={c1: Approve()})
    assert caught.value.decisions == {c1: Approve()}
    with pytest.raises(AlreadyDecidedError):
        agent.resume("t", decisions=[Approve()])
    assert runs == [1]
    assert not isinstance(first, ThreadBusyError) or not isinstance(second, ThreadBusyError)
