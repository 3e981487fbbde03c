"""Human approval: interrupt, decide (approve, edit, reject, respond), resume anywhere."""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path

import pytest

from tether import (
    AlreadyDecidedError,
    Approve,
    ConfigurationError,
    Edit,
    Reject,
    Respond,
    create_agent,
)
from tether.backends import Rule
from tether.events import ApprovalRequested, ToolCallFinished
from tether.messages import AssistantMessage, Message, ToolCall, ToolResultMessage
from tether.models import FunctionModel, ModelRequest, ScriptedModel
from tether.models.scripted import Turn
from tether.testing import tool_results

from .conftest import Crash, by_server_id, own_id

WRITES = [
    ToolCall("write_file", {"file_path": "/a.md", "content": "A"}, id="w1"),
    ToolCall("write_file", {"file_path": "/b.md", "content": "B"}, id="w2"),
    ToolCall("write_file", {"file_path": "/c.md", "content": "C"}, id="w3"),
    ToolCall("write_file", {"file_path": "/d.md", "content": "D"}, id="w4"),
    ToolCall("ls", {"path": "/"}, id="l1"),
]


def four_writes(request: ModelRequest) -> Turn:
    if not any(isinstance(m, ToolResultMessage) for m in request.messages):
        return list(WRITES)
    return "finished"


def results_of(messages: Sequence[Message]) -> dict[str, tuple[str, bool]]:
    """The results of the calls, by the id the script gave each call."""
    return {k: (r.text, r.is_error) for k, r in by_server_id(messages).items()}


def own_ids(messages: Sequence[Message], *server_ids: str) -> list[str]:
    """tether's ids of the calls the script named so, in that order."""
    return [own_id(messages, s) for s in server_ids]


def agent_for(url: str, **kwargs: object) -> object:
    return create_agent(
        FunctionModel(four_writes),
        checkpointer=url,
        interrupt_on={"write_file": True},
        **kwargs,  # type: ignore[arg-type]
    )


def test_parallel_calls_are_decided_together_and_each_decision_applies(store_url: str) -> None:
    url = store_url
    first = agent_for(url).run("Write the files.", thread_id="t")  # type: ignore[attr-defined]

    assert first.stop_reason == "interrupted"
    assert [r.call_id for r in first.interrupts] == own_ids(first.messages, "w1", "w2", "w3", "w4")
    assert first.interrupts[0].tool == "write_file"
    assert first.interrupts[0].args == {"file_path": "/a.md", "content": "A"}
    assert first.interrupts[0].allowed == ("approve", "edit", "reject", "respond")
    assert first.files == {}  # nothing ran, not even the ls beside them

    later = agent_for(url)  # another agent object: the state is in the thread alone
    result = later.resume(  # type: ignore[attr-defined]
        "t",
        decisions=[
            Approve(),
            Edit(args={"file_path": "/b2.md", "content": "B edited"}),
            Reject(message="not that one"),
            Respond(message="Pretend it was written."),
        ],
    )
    assert result.output == "finished"
    assert result.files == {"/a.md": b"A", "/b2.md": b"B edited"}
    answers = results_of(result.messages)
    assert answers["w1"] == ("Wrote 1 bytes to /a.md.", False)
    assert answers["w2"] == ("Wrote 8 bytes to /b2.md.", False)
    assert answers["w3"][1]
    assert answers["w3"][0].startswith("Rejected by the user: not that one.")
    assert answers["w4"] == ("Pretend it was written.", False)
    assert not answers["l1"][1]
    # The history shows the call that ran, not the one the model first made.
    calls = [c for m in result.messages if isinstance(m, AssistantMessage) for c in m.tool_calls]
    assert calls[1].args == {"file_path": "/b2.md", "content": "B edited"}


def test_an_edit_cannot_bypass_a_deny_rule_or_the_argument_schema(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path}/runs.db"
    agent = agent_for(url, permissions=[Rule({"write"}, ["/secrets/**"], "deny")])
    first = agent.run("go", thread_id="t")  # type: ignore[attr-defined]
    w1, w2, w3, w4 = own_ids(first.messages, "w1", "w2", "w3", "w4")
    result = agent.resume(  # type: ignore[attr-defined]
        "t",
        decisions={
            w1: Edit(args={"file_path": "/secrets/key", "content": "x"}),
            w2: Edit(args={"file_path": "/b.md"}),  # content missing
            w3: Approve(),
            w4: Approve(),
        },
    )
    answers = results_of(result.messages)
    assert answers["w1"][1]
    assert "Permission denied" in answers["w1"][0]
    assert answers["w2"][1]
    assert "content" in answers["w2"][0]
    assert "/secrets/key" not in result.files


def test_decisions_that_do_not_fit_are_clear_errors(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path}/runs.db"
    agent = create_agent(
        FunctionModel(four_writes),
        checkpointer=url,
        interrupt_on={"write_file": {"allow": ["approve", "reject"]}},
    )
    agent.run("go", thread_id="t")
    with pytest.raises(ConfigurationError, match="4 call\\(s\\) wait for a decision"):
        agent.resume("t", decisions=[Approve()])
    with pytest.raises(ConfigurationError, match="not waiting: \\['nope'\\]"):
        agent.resume("t", decisions={"nope": Approve()})
    with pytest.raises(ConfigurationError, match="'edit' is not allowed"):
        agent.resume("t", decisions=[Edit(args={}), Approve(), Approve(), Approve()])
    with pytest.raises(ConfigurationError, match="pass decisions"):
        agent.resume("t")
    with pytest.raises(ConfigurationError, match=r"decisions\[0\] must be Approve\(\)"):
        agent.resume("t", decisions=["yes", "yes", "yes", "yes"])  # type: ignore[list-item]
    with pytest.raises(ConfigurationError, match="unfinished run"):
        agent.run("start over", thread_id="t")
    # The thread still waits, untouched by the refused attempts.
    done = agent.resume("t", decisions=[Approve(), Approve(), Reject(), Approve()])
    assert done.output == "finished"
    with pytest.raises(ConfigurationError, match="nothing to resume"):
        agent.resume("t", decisions=[Approve()])


def test_bad_interrupt_on_configuration_is_refused(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path}/runs.db"
    with pytest.raises(ConfigurationError, match="not a tool of this agent"):
        create_agent(ScriptedModel(["x"]), checkpointer=url, interrupt_on={"rm": True})
    with pytest.raises(ConfigurationError, match="unknown decisions \\['maybe'\\]"):
        create_agent(
            ScriptedModel(["x"]),
            checkpointer=url,
            interrupt_on={"write_file": {"allow": ["maybe"]}},
        )
    with pytest.raises(ConfigurationError, match="needs a checkpointer"):
        create_agent(ScriptedModel(["x"]), checkpointer=None, interrupt_on={"write_file": True})
    with pytest.raises(ConfigurationError, match="must be a function of the call's arguments"):
        create_agent(
            ScriptedModel(["x"]), checkpointer=url, interrupt_on={"write_file": {"when": "yes"}}
        )
    with pytest.raises(ConfigurationError, match="must be True, False or"):
        create_agent(
            ScriptedModel(["x"]), checkpointer=url, interrupt_on={"write_file": {"alow": []}}
        )


def test_a_when_predicate_gates_only_the_calls_it_picks(tmp_path: Path) -> None:
    agent = create_agent(
        FunctionModel(four_writes),
        checkpointer=f"sqlite:///{tmp_path}/runs.db",
        interrupt_on={"write_file": {"when": lambda args: args["file_path"] != "/a.md"}},
    )
    first = agent.run("go", thread_id="t")
    assert [r.call_id for r in first.interrupts] == own_ids(first.messages, "w2", "w3", "w4")
    assert first.interrupts[0].allowed == ("approve", "edit", "reject", "respond")
    assert first.files == {}  # the turn waits as a whole, the ungated call too
    done = agent.resume("t", decisions=[Approve(), Reject(), Reject()])
    assert done.files == {"/a.md": b"A", "/b.md": b"B"}


async def test_a_subagents_gated_call_pauses_the_run_and_is_decided_inside_it(
    tmp_path: Path,
) -> None:
    def turn(request: ModelRequest) -> Turn:
        first = request.messages[0].text  # type: ignore[union-attr]
        answered = any(isinstance(m, ToolResultMessage) for m in request.messages)
        if first == "Write the notes.":  # the subagent
            if answered:
                return "Wrote /n.md."
            return [ToolCall("write_file", {"file_path": "/n.md", "content": "N"}, id="s1")]
        if answered:
            return "done"
        task = {"subagent_type": "general-purpose", "description": "Write the notes."}
        return [ToolCall("task", task, id="t1")]

    agent = create_agent(
        FunctionModel(turn),
        checkpointer=f"sqlite:///{tmp_path}/runs.db",
        interrupt_on={"write_file": True},
    )
    events = [e async for e in agent.stream("go", thread_id="t")]
    (asked,) = [e for e in events if isinstance(e, ApprovalRequested)]  # once, from the top
    assert asked.path == ("main",)
    result = events[-1].result  # type: ignore[union-attr]
    assert result.stop_reason == "interrupted"
    (request,) = result.interrupts
    from tether.checkpoint.journal import read_thread

    recorded = await read_thread(agent.checkpointer, "t")  # type: ignore[arg-type]
    subagent = recorded.subagents[own_id(result.messages, "t1")]  # the run the task started
    assert (request.call_id, request.tool) == (own_id(subagent.messages, "s1"), "write_file")
    assert request.path == ("main", "task:general-purpose#1")
    assert result.files == {}
    assert recorded.requests == (request,)
    done = await agent.aresume("t", decisions=[Approve()])
    assert done.output == "done"
    assert done.files == {"/n.md": b"N"}
    (report,) = [r for r in tool_results(done) if r.call_id == own_id(done.messages, "t1")]
    assert report.text == "Wrote /n.md."


async def test_the_request_streams_and_a_thread_is_made_when_none_is_given(
    tmp_path: Path,
) -> None:
    url = f"sqlite:///{tmp_path}/runs.db"
    agent = agent_for(url)
    events = [e async for e in agent.stream("go")]  # type: ignore[attr-defined]
    (asked,) = [e for e in events if isinstance(e, ApprovalRequested)]
    result = events[-1].result  # type: ignore[union-attr]
    w1, w2, w3, w4, l1 = own_ids(result.messages, "w1", "w2", "w3", "w4", "l1")
    assert [r.call_id for r in asked.requests] == [w1, w2, w3, w4]
    assert result.stop_reason == "interrupted"
    assert result.thread_id is not None
    assert "## Approval" in agent._plan.system_prompt  # type: ignore[attr-defined]

    decisions = [Approve(), Reject(), Reject(), Reject()]
    resumed = [e async for e in agent.stream_resume(result.thread_id, decisions=decisions)]  # type: ignore[attr-defined]
    finished = [e for e in resumed if isinstance(e, ToolCallFinished)]
    ran = [e.call.id for e in finished if e.decided is None]
    assert ran == [w1, l1]  # rejected calls are answered without running
    rejected = [e.call.id for e in finished if e.decided == "rejected"]
    assert rejected == [w2, w3, w4]  # and each is reported, with how it was decided
    assert resumed[-1].result.output == "finished"
    assert resumed[-1].result.files == {"/a.md": b"A"}


SCRIPT = """
import sys
from tether import Approve, Edit, Reject, create_agent
from tether.messages import ToolCall, ToolResultMessage
from tether.models import FunctionModel

def turn(request):
    if not any(isinstance(m, ToolResultMessage) for m in request.messages):
        return [ToolCall("write_file", {"file_path": "/x.md", "content": "1"}, id="w1"),
                ToolCall("write_file", {"file_path": "/y.md", "content": "2"}, id="w2")]
    return "done"

agent = create_agent(FunctionModel(turn), checkpointer=sys.argv[1],
                     interrupt_on={"write_file": True})
if sys.argv[2] == "start":
    result = agent.run("go", thread_id="shared")
    given = {c.id: c.provider_id for m in result.messages if m.kind == "assistant"
             for c in m.tool_calls}  # tether's id -> the id the script gave the call
    print(result.stop_reason, [given[r.call_id] for r in result.interrupts])
else:
    result = agent.resume("shared", decisions=[Approve(), Edit(args={"file_path": "/z.md",
                                                                     "content": "3"})])
    print(result.output, sorted(result.files))
"""


def test_a_decision_is_made_in_another_process(tmp_path: Path) -> None:
    script = tmp_path / "approve.py"
    script.write_text(SCRIPT)
    url = f"sqlite:///{tmp_path}/runs.db"

    def run(mode: str) -> str:
        done = subprocess.run(
            [sys.executable, str(script), url, mode], capture_output=True, text=True, check=False
        )
        assert done.returncode == 0, done.stderr
        return done.stdout.strip()

    assert run("start") == "interrupted ['w1', 'w2']"
    assert run("resume") == "done ['/x.md', '/z.md']"


def test_decisions_survive_a_crash_of_the_run_that_applies_them(tmp_path: Path) -> None:
    from tether import tool

    url = f"sqlite:///{tmp_path}/runs.db"
    ran: list[str] = []

    def make(crash: bool) -> object:
        @tool
        def deploy(target: str) -> str:
            """Deploy to a target."""
            ran.append(target)
            if crash and target == "prod":
                time.sleep(0.1)  # staging finishes, and is recorded, first
                raise Crash
            return f"deployed {target}"

        return deploy

    def turn(request: ModelRequest) -> Turn:
        if not any(isinstance(m, ToolResultMessage) for m in request.messages):
            return [
                ToolCall("deploy", {"target": "staging"}, id="d1"),
                ToolCall("deploy", {"target": "prod"}, id="d2"),
            ]
        return "deployed what was approved"

    def agent(crash: bool) -> object:
        return create_agent(
            FunctionModel(turn),
            tools=[make(crash)],
            checkpointer=url,
            interrupt_on={"deploy": True},
        )

    agent(False).run("ship", thread_id="t")  # type: ignore[attr-defined]
    with pytest.raises(Crash):
        agent(True).resume(  # type: ignore[attr-defined]
            "t", decisions=[Approve(), Edit(args={"target": "prod"})]
        )
    result = agent(False).resume("t")  # type: ignore[attr-defined]  # no decisions again
    assert result.output == "deployed what was approved"
    assert sorted(ran) == ["prod", "staging"]  # nothing ran twice
    answers = results_of(result.messages)
    assert answers["d1"] == ("deployed staging", False)
    assert answers["d2"][0].startswith("Interrupted")


def test_a_mapping_may_decide_some_calls_and_the_others_keep_waiting(tmp_path: Path) -> None:
    """One decision at a time, as a page sends them: each is recorded once, the rest
    keep waiting, and the turn's calls run (each once) when the last is decided."""
    url = f"sqlite:///{tmp_path}/runs.db"
    first = agent_for(url).run("Write the files.", thread_id="t")  # type: ignore[attr-defined]
    w1, w2, w3, w4 = own_ids(first.messages, "w1", "w2", "w3", "w4")

    one = agent_for(url).resume("t", decisions={w1: Approve()})  # type: ignore[attr-defined]
    assert one.stop_reason == "interrupted"
    assert [r.call_id for r in one.interrupts] == [w2, w3, w4]
    assert one.files == {}  # nothing ran: the turn waits as a whole
    assert one.messages == first.messages

    with pytest.raises(AlreadyDecidedError, match="decided before") as again:
        agent_for(url).resume("t", decisions={w1: Reject()})  # type: ignore[attr-defined]
    assert again.value.decisions == {w1: Approve()}  # the first decision stands
    with pytest.raises(AlreadyDecidedError):  # with a waiting call beside it: nothing taken
        agent_for(url).resume("t", decisions={w1: Approve(), w2: Reject()})  # type: ignore[attr-defined]
    with pytest.raises(ConfigurationError, match="3 call\\(s\\) wait for a decision"):
        agent_for(url).resume("t", decisions=[Approve()] * 4)  # type: ignore[attr-defined]
    with pytest.raises(ConfigurationError, match="decides nothing"):
        agent_for(url).resume("t", decisions={})  # type: ignore[attr-defined]

    two = agent_for(url).resume(  # type: ignore[attr-defined]
        "t",
        decisions={
            w3: Reject(message="not c"),
            w2: Edit(args={"file_path": "/b2.md", "content": "B2"}),
        },
    )
    assert [r.call_id for r in two.interrupts] == [w4]
    done = agent_for(url).resume("t", decisions=[Respond(message="done by hand")])  # type: ignore[attr-defined]
    assert done.output == "finished"
    assert done.files == {"/a.md": b"A", "/b2.md": b"B2"}
    answers = results_of(done.messages)
    assert answers["w3"][0].startswith("Rejected by the user: not c.")
    assert answers["w4"] == ("done by hand", False)
    assert not answers["l1"][1]
    with pytest.raises(AlreadyDecidedError):
        agent_for(url).resume("t", decisions={w4: Approve()})  # type: ignore[attr-defined]


async def test_a_partial_decision_streams_the_calls_still_waiting(tmp_path: Path) -> None:
    agent = agent_for(f"sqlite:///{tmp_path}/runs.db")
    first = await agent.arun("go", thread_id="t")  # type: ignore[attr-defined]
    w1, w2, w3, w4 = own_ids(first.messages, "w1", "w2", "w3", "w4")
    streamed = [e async for e in agent.stream_resume("t", decisions={w2: Approve()})]  # type: ignore[attr-defined]
    assert [e.kind for e in streamed] == ["run_started", "approval_requested", "run_finished"]
    assert [r.call_id for r in streamed[1].requests] == [w1, w3, w4]
    assert streamed[-1].result.stop_reason == "interrupted"
    assert streamed[-1].result.interrupts == streamed[1].requests


def test_calls_of_two_subagents_are_decided_one_at_a_time(tmp_path: Path) -> None:
    from tether import SubAgent, tool

    ran: list[str] = []

    @tool
    def deploy(target: str) -> str:
        """Deploy."""
        ran.append(target)
        return f"deployed {target}"

    def turn(request: ModelRequest) -> Turn:
        first = request.messages[0].text  # type: ignore[union-attr]
        answered = any(isinstance(m, ToolResultMessage) for m in request.messages)
        if first.startswith("Deploy "):  # a subagent
            return "deployed" if answered else [ToolCall("deploy", {"target": first[7:]})]
        if answered:
            return "all done"
        return [
            ToolCall("task", {"subagent_type": "shipper", "description": f"Deploy {t}"})
            for t in ("staging", "prod")
        ]

    agent = create_agent(
        FunctionModel(turn),
        subagents=[SubAgent("shipper", "Ships.", tools=[deploy], interrupt_on={"deploy": True})],
        checkpointer=f"sqlite:///{tmp_path}/runs.db",
    )
    first = agent.run("Ship both.", thread_id="t")
    staging, prod = first.interrupts
    assert [r.path[-1] for r in (staging, prod)] == ["task:shipper#1", "task:shipper#2"]
    one = agent.resume("t", decisions={prod.call_id: Reject("not prod")})
    assert one.interrupts == (staging,)
    assert ran == []
    with pytest.raises(AlreadyDecidedError):
        agent.resume("t", decisions={prod.call_id: Approve()})
    done = agent.resume("t", decisions={staging.call_id: Approve()})
    assert done.output == "all done"
    assert ran == ["staging"]
