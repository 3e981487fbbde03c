"""A decision answers the one call that asked, once: a later call with the same id (a
subagent's, a later turn's; ids come from the model or its server) must ask again; a
decision sent again (a double click, a second client, in any order and grouping) never
runs a call twice."""

from __future__ import annotations

import asyncio
import itertools
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tether import AlreadyDecidedError, Approve, Reject, create_agent, tool
from tether.agent import Agent
from tether.messages import AssistantMessage, ToolCall, ToolResultMessage
from tether.models import FunctionModel, ModelRequest
from tether.models.scripted import Turn


def test_an_approval_is_not_reused_by_a_later_call_with_the_same_id(tmp_path: Path) -> None:
    def turn(request: ModelRequest) -> Turn:
        done = sum(isinstance(m, AssistantMessage) for m in request.messages)
        if request.messages[0].text == "Write b.":  # the subagent reuses the id
            write_b = ToolCall("write_file", {"file_path": "/b.md", "content": "B"}, id="w1")
            return [[write_b], "wrote b"][done]
        write_a = ToolCall("write_file", {"file_path": "/a.md", "content": "A"}, id="w1")
        task = {"subagent_type": "general-purpose", "description": "Write b."}
        again = ToolCall("write_file", {"file_path": "/c.md", "content": "C"}, id="w1")
        return [[write_a], [ToolCall("task", task, id="t1")], [again], "done"][done]

    agent = create_agent(
        FunctionModel(turn),
        checkpointer=f"sqlite:///{tmp_path}/runs.db",
        interrupt_on={"write_file": True},
    )
    first = agent.run("Write.", thread_id="t")
    assert [r.path for r in first.interrupts] == [("main",)]
    second = agent.resume("t", decisions=[Approve()])
    assert second.stop_reason == "interrupted"  # the subagent's w1 asks for itself
    assert [r.path for r in second.interrupts] == [("main", "task:general-purpose#1")]
    assert second.files == {"/a.md": b"A"}
    third = agent.resume("t", decisions=[Approve()])
    assert third.stop_reason == "interrupted"  # and the main agent's next w1 too
    assert third.files == {"/a.md": b"A", "/b.md": b"B"}
    done = agent.resume("t", decisions=[Approve()])
    assert done.output == "done"
    assert done.files == {"/a.md": b"A", "/b.md": b"B", "/c.md": b"C"}


# -- decisions given one at a time: each call runs once, whatever is sent twice --------

CALLS = 3


def gated(url: str, ran: list[str]) -> Agent[str]:
    @tool
    def deploy(target: str) -> str:
        """Deploy to a target."""
        ran.append(target)
        return f"deployed {target}"

    def turn(request: ModelRequest) -> Turn:
        if any(isinstance(m, ToolResultMessage) for m in request.messages):
            return "done"
        return [ToolCall("deploy", {"target": f"t{n}"}, id=f"d{n}") for n in range(CALLS)]

    return create_agent(
        FunctionModel(turn), tools=[deploy], checkpointer=url, interrupt_on={"deploy": True}
    )


@settings(
    max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    order=st.permutations(range(CALLS)),
    cuts=st.lists(st.integers(1, CALLS - 1), max_size=CALLS - 1, unique=True),
    kinds=st.lists(st.sampled_from(["approve", "reject"]), min_size=CALLS, max_size=CALLS),
    repeats=st.lists(st.integers(0, CALLS - 1), max_size=4),
)
def test_decisions_in_any_order_and_groups_run_each_approved_call_once(
    tmp_path_factory: pytest.TempPathFactory,
    order: list[int],
    cuts: list[int],
    kinds: list[str],
    repeats: list[int],
) -> None:
    ran: list[str] = []
    url = f"sqlite:///{tmp_path_factory.mktemp('d')}/runs.db"
    first = gated(url, ran).run("Ship.", thread_id="t")
    ids = [r.call_id for r in first.interrupts]
    made = {"approve": Approve(), "reject": Reject("no")}
    bounds = [0, *sorted(cuts), CALLS]
    groups = [order[a:b] for a, b in itertools.pairwise(bounds)]
    sent: list[int] = []
    result = first
    for group in groups:
        for n in repeats:  # decisions sent again (a double click, a retry) change nothing
            if n in sent:
                with pytest.raises(AlreadyDecidedError):
                    gated(url, ran).resume("t", decisions={ids[n]: Approve()})
        result = gated(url, ran).resume("t", decisions={ids[n]: made[kinds[n]] for n in group})
        sent += group
        left = [i for i in ids if ids.index(i) not in sent]
        assert [r.call_id for r in result.interrupts] == left
        assert ran == [] or not left  # nothing runs before the last decision
    assert result.output == "done"
    assert sorted(ran) == sorted(f"t{n}" for n in range(CALLS) if kinds[n] == "approve")
    with pytest.raises(AlreadyDecidedError):
        gated(url, ran).resume("t", decisions={ids[order[0]]: Approve()})
    assert len(ran) == kinds.count("approve")


async def test_two_clients_deciding_at_the_same_moment_each_decide_once(tmp_path: Path) -> None:
    """Different calls at once: both are taken (in turn, through the thread's lease);
    the same call at once: one is taken, the other told it was decided."""
    ran: list[str] = []
    url = f"sqlite:///{tmp_path}/runs.db"
    ids = [r.call_id for r in (await gated(url, ran).arun("Ship.", thread_id="t")).interrupts]
    same = await asyncio.gather(
        *(gated(url, ran).aresume("t", decisions={ids[0]: Approve()}, wait=30) for _ in range(2)),
        return_exceptions=True,
    )
    assert sorted(type(r).__name__ for r in same) == ["AlreadyDecidedError", "RunResult"]
    apart = await asyncio.gather(
        gated(url, ran).aresume("t", decisions={ids[1]: Approve()}, wait=30),
        gated(url, ran).aresume("t", decisions={ids[2]: Reject()}, wait=30),
    )
    assert sorted(r.stop_reason for r in apart) == ["completed", "interrupted"]
    assert sorted(ran) == ["t0", "t1"]
