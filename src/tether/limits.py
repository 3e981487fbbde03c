"""Limits on a run, the budget that counts against them, and loop detection."""

from __future__ import annotations

import json
import math
import time
from collections.abc import Callable
from dataclasses import dataclass, fields, replace
from typing import Any

from tether.errors import ConfigurationError
from tether.messages import ToolCall, Usage

__all__ = ["Budget", "Limits", "LoopDetector"]


@dataclass(frozen=True, slots=True)
class Limits:
    """What one run (with its subagents) may spend. `None` means no limit.

    At `wrap_up_at` (90%) of any limit the model is told to finish with its best answer;
    at 100% the run stops with `stop_reason="budget"` (or `"timeout"`) and keeps all it did.
    The same tool call with the same arguments `loop_nudge_after` times in a row gets a
    nudge; `loop_stop_after` times stops the run with `stop_reason="loop"`. Subagents
    spend from their parent's budget and nest at most `max_subagent_depth` deep.
    """

    max_steps: int | None = 200
    max_model_calls: int | None = None
    max_input_tokens: int | None = None
    max_output_tokens: int | None = None
    max_total_tokens: int | None = None
    max_cost_usd: float | None = None
    timeout_seconds: float | None = None
    tool_timeout_seconds: float | None = None
    wrap_up_at: float = 0.9
    loop_nudge_after: int | None = 3
    loop_stop_after: int | None = 5
    max_subagent_depth: int = 3

    def __post_init__(self) -> None:
        for f in fields(self):
            value = getattr(self, f.name)
            if value is None:
                continue
            if isinstance(value, bool) or not isinstance(value, int | float):
                raise ConfigurationError(f"Limits.{f.name} must be a number or None, got {value!r}")
            if value < 0 or math.isnan(value):
                raise ConfigurationError(f"Limits.{f.name} must not be negative, got {value!r}")
        if self.tool_timeout_seconds == 0:
            raise ConfigurationError("Limits.tool_timeout_seconds must be positive or None")
        if not 0 < self.wrap_up_at <= 1:
            raise ConfigurationError(
                f"Limits.wrap_up_at is a share of the budget in (0, 1], got {self.wrap_up_at}"
            )
        for name in ("loop_nudge_after", "loop_stop_after"):
            if getattr(self, name) == 0:
                raise ConfigurationError(f"Limits.{name} must be at least 1, or None to disable")
        nudge, stop = self.loop_nudge_after, self.loop_stop_after
        if nudge is not None and stop is not None and nudge >= stop:
            raise ConfigurationError(
                f"Limits.loop_nudge_after ({nudge}) must be below loop_stop_after ({stop})"
            )


# What each limit is called when the model is told it is running out.
_LIMIT_NAMES = {
    "max_steps": "step budget",
    "max_model_calls": "model call budget",
    "max_input_tokens": "input token budget",
    "max_output_tokens": "output token budget",
    "max_total_tokens": "token budget",
    "max_cost_usd": "cost budget",
    "timeout_seconds": "time limit",
}


def without_spending_limits(limits: Limits) -> Limits:
    """`limits` with every spending limit off, its other settings kept: for a subagent
    that spends from its parent's budget alone."""
    off: dict[str, Any] = dict.fromkeys(_LIMIT_NAMES)
    return replace(limits, **off)


class Budget:
    """What a run has spent, measured against its `Limits`.

    A subagent's budget is a `child` of its parent's: what the child spends is charged
    to every ancestor too, and the child is out of budget when it or any ancestor is.
    """

    def __init__(
        self,
        limits: Limits,
        *,
        parent: Budget | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.limits = limits
        self.parent = parent
        self.usage = Usage()
        self.cost_usd = 0.0
        self.steps = 0
        self.model_calls = 0
        self._clock = clock
        self.started_at = clock()

    def child(self, limits: Limits | None = None) -> Budget:
        """A budget for a subagent: its own `limits` (none if None) inside this one."""
        own = limits if limits is not None else without_spending_limits(self.limits)
        return Budget(own, parent=self, clock=self._clock)

    @property
    def root(self) -> Budget:
        """The budget of the top run of the tree."""
        budget = self
        while budget.parent is not None:
            budget = budget.parent
        return budget

    @property
    def deadline(self) -> float | None:
        """The `clock()` reading at which this budget's or an ancestor's time runs out."""
        timeout = self.limits.timeout_seconds
        own = None if timeout is None else self.started_at + timeout
        inherited = self.parent.deadline if self.parent is not None else None
        if own is None or inherited is None:
            return own if inherited is None else inherited
        return min(own, inherited)

    def count_step(self) -> None:
        """Count one step (a model call and its tools) here and in every ancestor."""
        budget: Budget | None = self
        while budget is not None:
            budget.steps += 1
            budget = budget.parent

    def charge(self, usage: Usage, cost_usd: float | None) -> None:
        """Count one model response here and in every ancestor; unknown cost counts as 0,
        and so does a cost that is negative or not a number: nothing is a discount."""
        cost = cost_usd if cost_usd is not None and cost_usd > 0 else 0.0  # NaN > 0 is False
        budget: Budget | None = self
        while budget is not None:
            budget.usage += usage
            budget.cost_usd += cost
            budget.model_calls += 1
            budget = budget.parent

    def output_tokens_left(self) -> int | None:
        """How many more output tokens the token limits here and in every ancestor allow
        (None when none limits them)."""
        left: int | None = None
        budget: Budget | None = self
        while budget is not None:
            limits, used = budget.limits, budget.usage
            for limit, spent in (
                (limits.max_output_tokens, used.output_tokens),
                (limits.max_total_tokens, used.total_tokens),
            ):
                if limit is not None:
                    room = max(int(limit - spent), 0)
                    left = room if left is None else min(left, room)
            budget = budget.parent
        return left

    def pressure(self) -> tuple[float, str]:
        """The largest share of any limit used so far, here or in an ancestor, and that
        limit's field name."""
        worst, worst_name = self._own_pressure()
        if self.parent is not None:
            inherited, name = self.parent.pressure()
            if inherited > worst:
                worst, worst_name = inherited, name
        return worst, worst_name

    def _own_pressure(self) -> tuple[float, str]:
        limits = self.limits
        used = {
            "max_steps": self.steps,
            "max_model_calls": self.model_calls,
            "max_input_tokens": self.usage.input_tokens,
            "max_output_tokens": self.usage.output_tokens,
            "max_total_tokens": self.usage.total_tokens,
            "max_cost_usd": self.cost_usd,
            "timeout_seconds": self._clock() - self.started_at,
        }
        worst, worst_name = 0.0, ""
        for name, spent in used.items():
            limit = getattr(limits, name)
            if limit is None:
                continue
            share = spent / limit if limit else math.inf
            if share > worst:
                worst, worst_name = share, name
        return worst, worst_name

    @staticmethod
    def describe(limit_name: str) -> str:
        """How the model is told about a limit ("step budget", "time limit", ...)."""
        return _LIMIT_NAMES[limit_name]


class LoopDetector:
    """Counts how many times in a row the same tool call (name and arguments) was made."""

    def __init__(self) -> None:
        self._last: tuple[str, str] | None = None
        self.streak = 0

    def observe(self, call: ToolCall) -> int:
        """Record one call and return the current streak, 1 for a new call."""
        args = call.args if isinstance(call.args, str) else json.dumps(call.args, sort_keys=True)
        key = (call.name, args)
        self.streak = self.streak + 1 if key == self._last else 1
        self._last = key
        return self.streak
