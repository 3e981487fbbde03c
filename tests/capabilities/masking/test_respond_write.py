"""A person answers a `write_file` call with `Respond(...)` (not an error): the write never
ran, yet once it is old the call's content is sent as `[N characters, saved to /plan.md;
read the file to see them]`. /plan.md does not exist: the content is lost to the model.
(Compaction's offloading has the same test: "not is_error" is taken as "the file holds it".)"""

from __future__ import annotations

from pathlib import Path

import pytest

from tether import Respond, create_agent
from tether.messages import AssistantMessage, ToolCall
from tether.models import FunctionModel, ModelRequest

PLAN = "".join(f"- step {n}: do the thing number {n} carefully\n" for n in range(40))


def test_a_write_answered_by_a_person_is_not_said_to_be_saved(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    sent: list[ModelRequest] = []
    big = "".join(f"row {n} of the data table, with some padding text\n" for n in range(3000))

    def reply(request: ModelRequest) -> list[ToolCall] | str:
        sent.append(request)
        step = len(sent)
        if step == 1:
            return [ToolCall("write_file", {"file_path": "/data.txt", "content": big})]
        if step == 2:
            return [ToolCall("write_file", {"file_path": "/plan.md", "content": PLAN})]
        if step <= 14:
            part = {"file_path": "/data.txt", "offset": step * 250, "limit": 250}
            return [ToolCall("read_file", part)]
        return "done"

    agent = create_agent(FunctionModel(reply), interrupt_on={"write_file": True})
    waiting = agent.run("Plan it.", thread_id="t")
    from tether import Approve

    waiting = agent.resume("t", decisions=[Approve()])  # the data file is written
    assert waiting.stop_reason == "interrupted"
    done = agent.resume("t", decisions=[Respond("Not now; keep the plan in the chat.")])
    assert "/plan.md" not in (done.files or {})  # it was never written
    calls = [c for m in sent[-1].messages if isinstance(m, AssistantMessage) for c in m.tool_calls]
    plan_call = next(c for c in calls if c.args.get("file_path") == "/plan.md")
    assert plan_call.args["content"] == PLAN, (
        f"the plan's text was replaced by {plan_call.args['content']!r}, but /plan.md was "
        "never written (the person answered instead): the model lost the plan"
    )


def test_a_persons_answer_to_a_read_is_not_masked_as_re_runnable(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`Respond` answers a gated `read_file` in the person's words; masking then tells the
    model "call read_file again to see it", which runs the gate (or the read) again and
    never gives the person's answer back."""
    monkeypatch.chdir(tmp_path)
    answer = "You may not read /secrets.env. The values you need: " + "KEY_n=... " * 60
    sent: list[ModelRequest] = []
    big = "".join(f"row {n} of the data table, with some padding text\n" for n in range(3000))

    def reply(request: ModelRequest) -> list[ToolCall] | str:
        sent.append(request)
        step = len(sent)
        if step == 1:
            return [ToolCall("write_file", {"file_path": "/data.txt", "content": big})]
        if step == 2:
            return [ToolCall("read_file", {"file_path": "/secrets.env"})]
        if step <= 14:
            return [
                ToolCall(
                    "grep",
                    {
                        "pattern": f"row {step}",
                        "path": "/",
                        "output_mode": "content",
                        "context_lines": 8,
                    },
                )
            ]
        return "done"

    agent = create_agent(FunctionModel(reply), interrupt_on={"read_file": True})
    agent.run("Configure it.", thread_id="t")
    agent.resume("t", decisions=[Respond(answer)])
    from tether.messages import ToolResultMessage

    shown = [r for m in sent[-1].messages if isinstance(m, ToolResultMessage) for r in m.results]
    read = next(r for r in shown if r.name == "read_file")
    assert read.text == answer, f"the person's answer was sent as {read.text!r}"
