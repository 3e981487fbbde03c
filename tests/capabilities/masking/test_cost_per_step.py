"""The masker is incremental, but every batch it masks makes the rest of the step start
over: `ContextCompaction._sent` calls `meter.recount()` (every message measured again),
`OnTheWire` sees a changed prefix and rebuilds every message, and a model without usage
is estimated from scratch (`InputEstimate`). A batch comes every few steps (4,000 tokens
of stale results), so a long run does O(n) work every few steps: O(n^2) in all. Counted
here, not timed: with masking off a 1,200-step run measures each message about once."""

from __future__ import annotations

from typing import Any

import pytest

from tether import Compaction, Limits, create_agent, tool
from tether.capabilities import compaction as compaction_module
from tether.messages import OnTheWire, ToolCall
from tether.models import FunctionModel, ModelProfile, ModelRequest

STEPS = 1_200


@tool(read_only=True, idempotent=True)
def page(n: int) -> str:
    """Page n of the manual."""
    return f"Page {n}.\n" + "".join(f"{n}.{i} some words of the manual here\n" for i in range(120))


def _run(monkeypatch: pytest.MonkeyPatch, compaction: Compaction) -> tuple[int, int, int]:
    counts = {"measured": 0, "rewired": 0}
    measure = compaction_module.message_chars
    rewire = OnTheWire._sent

    def counted_measure(message: Any) -> int:
        counts["measured"] += 1
        return measure(message)

    def counted_rewire(self: OnTheWire, message: Any) -> Any:
        counts["rewired"] += 1
        return rewire(self, message)

    monkeypatch.setattr(compaction_module, "message_chars", counted_measure)
    monkeypatch.setattr(OnTheWire, "_sent", counted_rewire)
    steps = {"n": 0}

    def reply(request: ModelRequest) -> list[ToolCall] | str:
        steps["n"] += 1
        return [ToolCall("page", {"n": steps["n"]})] if steps["n"] < STEPS else "done"

    model = FunctionModel(reply, profile=ModelProfile(max_input_tokens=10**9))
    agent = create_agent(model, tools=[page], compaction=compaction, limits=Limits(max_steps=None))
    result = agent.run("Read the manual.")
    return len(result.messages), counts["measured"], counts["rewired"]


def test_masking_keeps_the_work_per_step_in_proportion_to_what_the_step_added(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    messages, measured_off, rewired_off = _run(monkeypatch, Compaction(masking=None))
    assert measured_off <= 2 * messages
    assert rewired_off <= 2 * messages
    messages, measured, rewired = _run(monkeypatch, Compaction())
    assert measured <= 4 * messages, (
        f"{messages} messages, but the context meter measured {measured} messages "
        f"(masking off: {measured_off})"
    )
    assert rewired <= 4 * messages, (
        f"{messages} messages, but the context meter measured {measured} messages and "
        f"OnTheWire rebuilt {rewired} (masking off: {measured_off} and {rewired_off})"
    )
