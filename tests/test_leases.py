"""The lease a run holds on its thread: refused or waited for, renewed while the run
works, given up by a process that is gone, and fencing a run that lost it."""

from __future__ import annotations

import asyncio
import dataclasses
import subprocess
import sys
from typing import Any

import pytest

from tether import ConfigurationError, ThreadBusyError, create_agent, tool
from tether.checkpoint import lease
from tether.checkpoint.base import Checkpointer
from tether.checkpoint.lease import Holder, here
from tether.messages import ToolCall, ToolResultMessage
from tether.models import FunctionModel


def _one_call(request: Any) -> Any:
    done = any(isinstance(m, ToolResultMessage) for m in request.messages)
    return "done" if done else [ToolCall("work", {})]


def _agent(url: str, seconds: float = 0.0, log: list[str] | None = None) -> Any:
    @tool
    async def work() -> str:
        """Work a while."""
        if log is not None:
            log.append("ran")
        await asyncio.sleep(seconds)
        return "worked"

    return create_agent(FunctionModel(_one_call), tools=[work], checkpointer=url)


def _elsewhere(pid: int = 4242) -> Holder:
    """A holder on another machine: only its lease's time says when it lets go."""
    return Holder("other-token", "far-host", pid, "far-host/boot/ns", "1", "run run_far")


def test_a_thread_held_on_another_machine_is_refused_or_waited_for(store_url: str) -> None:
    agent = _agent(store_url)
    checkpointer: Checkpointer = agent.checkpointer
    assert asyncio.run(checkpointer.acquire("t", _elsewhere(), 1.0)) is None
    with pytest.raises(ThreadBusyError, match="process 4242 on far-host \\(run run_far\\)") as e:
        agent.run("go", thread_id="t")
    assert e.value.thread_id == "t"
    assert e.value.holder == "process 4242 on far-host (run run_far)"
    assert agent.history("t") == []  # refused before anything was written
    result = agent.run("go", thread_id="t", wait=10)  # its lease ends within a second
    assert result.output == "done"
    # Given back at the end: the next run needs no wait.
    assert agent.run("again", thread_id="t").output == "done"


def test_a_holder_that_is_gone_from_this_machine_lets_go_at_once(store_url: str) -> None:
    agent = _agent(store_url)
    checkpointer: Checkpointer = agent.checkpointer
    dead = subprocess.Popen(["true"])
    dead.wait()
    me = here("run run_mine")
    for n, holder in enumerate(
        [
            dataclasses.replace(me, token="a", pid=dead.pid),  # its process ended
            dataclasses.replace(me, token="b", started="0"),  # its pid was reused since
        ]
    ):
        thread = f"t{n}"
        assert asyncio.run(checkpointer.acquire(thread, holder, 3600)) is None
        assert agent.run("go", thread_id=thread).output == "done"
    # A live holder of this machine keeps its thread for as long as its lease.
    alive = dataclasses.replace(me, token="c")
    assert asyncio.run(checkpointer.acquire("t9", alive, 3600)) is None
    with pytest.raises(ThreadBusyError, match=f"process {me.pid} on "):
        agent.run("go", thread_id="t9")


def test_a_run_renews_its_lease_while_a_call_takes_longer_than_it(
    store_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(lease, "LEASE_SECONDS", 0.3)
    agent = _agent(store_url, seconds=1.2)
    checkpointer: Checkpointer = agent.checkpointer

    async def race() -> tuple[Any, Any, Any]:
        running = asyncio.create_task(agent.arun("go", thread_id="t"))
        await asyncio.sleep(0.8)  # the lease has been renewed twice by now
        taken = await checkpointer.acquire("t", _elsewhere(), 10)
        with pytest.raises(ThreadBusyError):
            await agent.arun("go", thread_id="t")
        return await running, taken, None

    result, taken, _ = asyncio.run(race())
    assert taken is not None  # the other machine's holder was refused
    assert result.output == "done"


def test_a_run_that_lost_its_lease_writes_nothing_more(
    store_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    async def no_renewal(*_: object) -> None:
        return None

    monkeypatch.setattr(lease, "LEASE_SECONDS", 0.2)
    monkeypatch.setattr(lease, "_renew", no_renewal)  # as if the process had been paused
    agent = _agent(store_url, seconds=0.5)
    checkpointer: Checkpointer = agent.checkpointer
    counts: list[int] = []

    async def race() -> None:
        running = asyncio.create_task(agent.arun("go", thread_id="t"))
        await asyncio.sleep(0.35)  # the run's lease ran out while its call works
        assert await checkpointer.acquire("t", _elsewhere(), 60) is None
        counts.append(len(await checkpointer.load("t")))
        await running

    with pytest.raises(ThreadBusyError, match="no longer holds thread 't'") as caught:
        asyncio.run(race())
    assert "far-host" in str(caught.value)
    assert caught.value.result is not None  # what the run did is handed back
    assert caught.value.result.stop_reason == "error"
    assert len(asyncio.run(checkpointer.load("t"))) == counts[0]  # nothing written since


def test_a_thread_a_run_holds_cannot_be_deleted(store_url: str) -> None:
    agent = _agent(store_url)
    agent.run("go", thread_id="t")
    checkpointer: Checkpointer = agent.checkpointer
    assert asyncio.run(checkpointer.acquire("t", _elsewhere(), 60)) is None
    with pytest.raises(ThreadBusyError):
        agent.delete_thread("t")
    assert agent.history("t")
    asyncio.run(checkpointer.release("t", "other-token"))
    assert agent.delete_thread("t") is True
    assert agent.history("t") == []


def test_a_killed_run_gives_its_thread_back_to_the_next_process(store_url: str) -> None:
    # What `kill -9` leaves: a lease whose holder is gone. The resume needs no wait.
    agent = _agent(store_url)
    script = (
        "import asyncio, sys\n"
        "from tether.checkpoint import open_checkpointer\n"
        "from tether.checkpoint.lease import here\n"
        "c = open_checkpointer(sys.argv[1])\n"
        "assert asyncio.run(c.acquire('t', here('run run_killed'), 3600)) is None\n"
    )
    subprocess.run([sys.executable, "-c", script, store_url], check=True)
    assert agent.run("go", thread_id="t").output == "done"


@pytest.mark.parametrize("wait", [-1, float("nan"), "5", True])
def test_wait_must_be_seconds(wait: Any, tmp_path: Any) -> None:
    agent = _agent(f"sqlite:///{tmp_path}/runs.db")
    with pytest.raises(ConfigurationError, match="wait must be a number of seconds"):
        agent.run("go", thread_id="t", wait=wait)


def test_a_checkpointer_without_the_lease_methods_is_refused_by_name() -> None:
    class Unleased:  # written for an earlier tether: no lease, so no guard
        async def append(self, thread_id: str, records: object) -> None: ...
        async def load(self, thread_id: str) -> list[object]: ...
        async def threads(self) -> list[object]: ...
        async def delete(self, thread_id: str) -> bool: ...
        async def close(self) -> None: ...

    with pytest.raises(ConfigurationError, match="has no acquire, renew, release"):
        create_agent(FunctionModel(_one_call), checkpointer=Unleased())  # type: ignore[arg-type]
