"""Limits on a run, the budget that counts against them, and loop detection."""

from __future__ import annotations

import json
import math
import time
from collections.abc import Callable
from dataclasses import dataclass, fields

from tether.errors import ConfigurationError
from tether.messages import ToolCall, Usage

__all__ = ["Budget", "Limits", "LoopDetector"]


@dataclass(frozen=True, slots=True)
class Limits:
    """What one run (with its subagents) may spend. `None` means no limit.

    At `wrap_up_at` (90%) of any limit the model is told to finish with its best answer;
    at 100% the run stops with `stop_reason="budget"` (or `"timeout"`) and keeps all it did.
    The same tool call with the same arguments `loop_nudge_after` times in a row gets a
    nudge; `loop_stop_after` times stops the run with `stop_reason="loop"`.
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


class Budget:
    """What a run and its subagents have spent, measured against one `Limits`."""

    def __init__(self, limits: Limits, *, clock: Callable[[], float] = time.monotonic) -> None:
        self.limits = limits
        self.usage = Usage()
        self.cost_usd = 0.0
        self.steps = 0
        self.model_calls = 0
        self._clock = clock
        self.started_at = clock()

    @property
    def deadline(self) -> float | None:
        """The `clock()` reading at which the time limit runs out."""
        timeout = self.limits.timeout_seconds
        return None if timeout is None else self.started_at + timeout

    def charge(self, usage: Usage, cost_usd: float | None) -> None:
        """Count one model response; an unknown cost counts as zero."""
        self.usage += usage
        self.cost_usd += cost_usd or 0.0
        self.model_calls += 1

    def pressure(self) -> tuple[float, str]:
        """The largest share of any limit used so far, and that limit's field name."""
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
