"""Runs killed with SIGKILL at random moments resume with nothing lost or repeated, and
a second process that tries to resume a run that is still alive is turned away."""

from __future__ import annotations

import random
import signal
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path

from tether import create_agent
from tether.messages import AssistantMessage, ToolResultMessage
from tether.models import ScriptedModel

STEPS = 100

WORKER = """
import sys, time
from tether import Limits, create_agent, tool
from tether.messages import ToolCall, ToolResultMessage
from tether.models import FunctionModel

url, ledger, mode = sys.argv[1:]

@tool
def bump(n: int) -> str:
    \"\"\"Count one.\"\"\"
    with open(ledger, "a") as out:
        out.write(f"{n}\\n")
    time.sleep(0.01)
    return f"bumped {n}"

def step(request):
    done = sum(1 for m in request.messages if isinstance(m, ToolResultMessage))
    if done < STEPS:
        return [ToolCall("bump", {"n": done}, id=f"call_{done}")]
    return "done"

agent = create_agent(FunctionModel(step), tools=[bump], checkpointer=url,
                     limits=Limits(max_steps=None))
if mode == "intrude":  # a second terminal resuming while the run may be alive
    from tether import ConfigurationError, ThreadBusyError
    try:
        agent.resume("k")
        print("resumed")
    except ThreadBusyError:
        print("busy")
    except ConfigurationError as exc:
        print("refused", exc)
    raise SystemExit(0)
result = agent.run("count", thread_id="k") if mode == "start" else agent.resume("k")
print(result.output)
""".replace("STEPS", str(STEPS))


def test_sigkill_at_random_points_then_resume(tmp_path: Path) -> None:
    script = tmp_path / "worker.py"
    script.write_text(WORKER)
    url, ledger = f"sqlite:///{tmp_path}/runs.db", tmp_path / "ledger.txt"
    rng = random.Random(7)
    kills = 0
    turned_away = 0
    finished = False
    for attempt in range(40):
        mode = "resume" if attempt and _thread_exists(url) else "start"
        before = _lines(ledger)
        process = subprocess.Popen(
            [sys.executable, str(script), url, str(ledger), mode],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        if attempt % 2:
            # A second process resumes the thread while the first one works on it
            # (stopped meanwhile, so that it cannot finish first): it is turned away.
            _wait_for(lambda p=process, n=before: _lines(ledger) > n or p.poll() is not None)
            if process.poll() is None:
                process.send_signal(signal.SIGSTOP)
                intruder = subprocess.run(
                    [sys.executable, str(script), url, str(ledger), "intrude"],
                    capture_output=True,
                    text=True,
                    timeout=60,
                    check=True,
                )
                process.send_signal(signal.SIGCONT)
                assert intruder.stdout.strip() == "busy", intruder.stdout
                turned_away += 1
        if kills < 8:
            # Kill after a random number of further tool calls, at a random moment of
            # one: before, inside or after it, or while its result is being recorded.
            target = _lines(ledger) + rng.randint(1, 15)
            deadline = time.monotonic() + 30
            while process.poll() is None and _lines(ledger) < target:
                if time.monotonic() > deadline:
                    break
                time.sleep(0.002)
            time.sleep(rng.uniform(0, 0.012))
            if process.poll() is None:
                process.kill()
                kills += 1
        out, err = process.communicate(timeout=60)
        if process.returncode == 0 and out.strip() == "done":
            finished = True
            break
        if process.returncode not in (0, -9):
            assert "nothing to resume" in err, err
            finished = True
            break
    assert finished
    assert kills >= 3  # the test really interrupted the run
    assert turned_away >= 3  # and really had a second process try to resume it

    ran = Counter(int(line) for line in ledger.read_text().split())
    assert max(ran.values()) == 1  # no tool call ran twice
    agent = create_agent(ScriptedModel(["unused"]), checkpointer=url)
    messages = agent.history("k")
    results = [r for m in messages if isinstance(m, ToolResultMessage) for r in m.results]
    given = {  # tether's id of each call -> the id the script gave it
        c.id: c.provider_id
        for m in messages
        if isinstance(m, AssistantMessage)
        for c in m.tool_calls
    }
    assert [given[r.call_id] for r in results] == [f"call_{n}" for n in range(STEPS)]
    for r in results:
        n = int(given[r.call_id].removeprefix("call_"))  # type: ignore[union-attr]
        assert r.text == f"bumped {n}" or r.text.startswith("Interrupted")
        if r.text == f"bumped {n}":
            assert ran[n] == 1  # a recorded result comes from exactly one run of the tool
    assistants = [m for m in messages if isinstance(m, AssistantMessage)]
    assert len(assistants) == STEPS + 1
    assert assistants[-1].text == "done"


def _wait_for(condition: Callable[[], bool]) -> None:
    deadline = time.monotonic() + 30
    while not condition() and time.monotonic() < deadline:
        time.sleep(0.002)


def _lines(path: Path) -> int:
    return len(path.read_text().split()) if path.exists() else 0


def _thread_exists(url: str) -> bool:
    agent = create_agent(ScriptedModel(["unused"]), checkpointer=url)
    return bool(agent.history("k"))
