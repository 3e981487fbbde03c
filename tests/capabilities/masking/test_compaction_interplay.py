"""Compaction is triggered by the MASKED view (what the model is sent), but inside
`_compact` the step after offloading is decided on the FULL history (`meter.tokens(
messages)` over `state.messages`, masked results counted whole). With masking on, the
full history is far larger than the view, so offloading that brings the request back
under the trigger is always followed by a summary: the lossy step runs when it is not
needed (and the summary call is paid for)."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from tether import Compaction, create_agent, tool
from tether.backends import FilesystemBackend
from tether.capabilities import compaction as compaction_module
from tether.events import Compacted
from tether.messages import ToolCall
from tether.models import FunctionModel, ModelProfile, ModelRequest

WINDOW = 40_000
TRIGGER = int(WINDOW * 0.85)
DRAFT = "".join(f"paragraph {n}: " + "lorem ipsum dolor sit amet " * 3 + "\n" for n in range(120))


MANUAL = "".join(f"{n} some words of the manual here\n" for n in range(6_000))


@tool
def experiment(n: int) -> str:
    """Run experiment n (its output is not re-runnable, so never masked)."""
    return f"Run {n}.\n" + "".join(f"{n}.{i} measured value {i * n}\n" for i in range(100))


def test_no_summary_when_offloading_alone_brings_the_request_under_the_trigger(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    (tmp_path / "manual.md").write_text(MANUAL)
    offloads: list[bool] = []
    real = compaction_module._offload_inputs

    def spy(*args: object) -> bool:
        done = real(*args)  # type: ignore[arg-type]
        offloads.append(done)
        return done

    monkeypatch.setattr(compaction_module, "_offload_inputs", spy)
    sent: list[ModelRequest] = []

    def reply(request: ModelRequest) -> list[ToolCall] | str:
        sent.append(request)
        step = len(sent)
        if step == 5:
            return [ToolCall("write_file", {"file_path": "/draft.md", "content": DRAFT})]
        if step < 45:
            part = {"file_path": "/manual.md", "offset": step * 120, "limit": 120}
            return [ToolCall("read_file", part), ToolCall("experiment", {"n": step})]
        return "done"

    agent = create_agent(
        FunctionModel(reply, profile=ModelProfile(max_input_tokens=WINDOW)),
        tools=[experiment],
        backend=FilesystemBackend(tmp_path),
        compaction=Compaction(model=FunctionModel(lambda r: "summary")),
        tool_token_limit_before_evict=2000,  # offload writes over 8,000 characters
    )
    events: list[Compacted] = []

    async def main() -> None:
        async for event in agent.stream("go"):
            if isinstance(event, Compacted):
                events.append(event)

    asyncio.run(main())
    assert events, "scenario: the history is compacted"
    assert offloads, "scenario: the history is compacted"
    assert offloads[0], "scenario: the first compaction offloads the draft"
    first = events[0]
    saved_tokens = (len(DRAFT) - 80) // 4  # the pointer is under 80 characters
    over = first.tokens_before - TRIGGER
    assert over > 0
    assert not (first.how == "summary" and over < saved_tokens), (
        f"the request was {over} tokens over the trigger and offloading the draft saved "
        f"~{saved_tokens}, yet the history was summarized ({first}): the decision after "
        "offloading counts the masked results whole"
    )
