from __future__ import annotations

import pytest

from tether import Limits
from tether.errors import ConfigurationError
from tether.limits import Budget, LoopDetector
from tether.messages import ToolCall, Usage


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"max_steps": -1}, "max_steps must not be negative"),
        ({"max_cost_usd": float("nan")}, "max_cost_usd must not be negative"),
        ({"max_total_tokens": "many"}, "must be a number or None"),
        ({"timeout_seconds": True}, "must be a number or None"),
        ({"wrap_up_at": 0}, "wrap_up_at"),
        ({"wrap_up_at": 1.5}, "wrap_up_at"),
        ({"loop_nudge_after": 5, "loop_stop_after": 5}, "must be below"),
        ({"loop_stop_after": 0}, "at least 1"),
        ({"tool_timeout_seconds": 0}, "tool_timeout_seconds"),
    ],
)
def test_bad_limits_are_rejected(kwargs: dict[str, object], message: str) -> None:
    with pytest.raises(ConfigurationError, match=message):
        Limits(**kwargs)  # type: ignore[arg-type]


def test_zero_limits_are_allowed() -> None:
    assert Limits(max_steps=0, max_cost_usd=0).max_steps == 0


def test_pressure_is_the_largest_share_of_any_limit() -> None:
    budget = Budget(Limits(max_steps=10, max_total_tokens=1000))
    budget.steps = 2
    budget.charge(Usage(input_tokens=400, output_tokens=100), 0.0)
    assert budget.pressure() == (0.5, "max_total_tokens")


def test_a_zero_limit_is_exhausted_at_once() -> None:
    share, name = Budget(Limits(max_steps=0)).pressure()
    assert share >= 1
    assert name == "max_steps"


def test_time_counts_against_the_timeout() -> None:
    now = [100.0]
    budget = Budget(Limits(max_steps=None, timeout_seconds=10), clock=lambda: now[0])
    now[0] = 109.5
    assert budget.pressure() == (0.95, "timeout_seconds")
    assert budget.deadline == 110.0


def test_unknown_cost_counts_as_zero() -> None:
    budget = Budget(Limits(max_cost_usd=1))
    budget.charge(Usage(), None)
    assert budget.cost_usd == 0
    assert budget.model_calls == 1


def test_loop_detector_counts_identical_calls_in_a_row() -> None:
    detector = LoopDetector()
    same = [ToolCall("ls", {"path": "/", "all": True}), ToolCall("ls", {"all": True, "path": "/"})]
    assert [detector.observe(c) for c in same] == [1, 2]
    assert detector.observe(ToolCall("ls", {"path": "/tmp"})) == 1
    assert detector.observe(ToolCall("ls", {"path": "/tmp"})) == 2
