"""A decision answers the one call that asked, once: a later call with the same id (a
subagent's, a later turn's; ids come from the model or its server) must ask again."""

from __future__ import annotations

from pathlib import Path

from tether import Approve, create_agent
from tether.messages import AssistantMessage, ToolCall
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
