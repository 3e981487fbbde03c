"""Token counts from outside, checked before they count against a budget.

A provider's server (or a custom model) reports what a reply used. What it reports can be
wrong: negative, missing, null, a float, a string, NaN, or absurdly large. Every count
goes through `token_count`, and every reply's usage through `counted`, once, in the loop:

- a negative, missing or unreadable count never lowers spending: an input or output
  count that is one (or zero) is replaced by tether's estimate from characters, so a
  provider that reports nothing does not make a run free;
- a count above `MOST_TOKENS` (infinity included) is counted as `MOST_TOKENS`, which
  is past any budget: the run stops at its limit instead of overflowing;
- cache counts are part of the input, so they are bounded by it (a cache count that is
  larger would price input below what was sent).
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Callable
from dataclasses import fields, replace
from decimal import Decimal
from numbers import Real

from tether.errors import UsageEstimatedWarning
from tether.messages import Usage
from tether.models.base import ModelRequest, ModelResponse
from tether.models.estimate import InputEstimate, output_tokens

__all__ = ["MOST_TOKENS", "checked", "counted", "token_count"]

MOST_TOKENS = 10**15
"""The most tokens one reply is counted for; more is a fault of the reporter."""

_LONGEST_TEXT = 400  # characters of a count sent as text read as a number


def token_count(value: object) -> int | None:
    """`value` as a token count, or None when it is none: missing, negative, NaN, a
    bool, or neither a number nor a number's text. Fractions round up."""
    if isinstance(value, str):
        return _parsed(value)
    if isinstance(value, bool) or not isinstance(value, Real | Decimal):
        return None
    if isinstance(value, int):  # made a plain int: a subclass's own arithmetic never counts
        plain = int.__index__(value)
        return min(plain, MOST_TOKENS) if plain >= 0 else None
    try:
        number = float(value)
    except (ArithmeticError, ValueError):  # a signalling NaN; an int-like type too large
        return None
    if math.isnan(number) or number < 0:
        return None
    return MOST_TOKENS if number >= MOST_TOKENS else math.ceil(number)


def _parsed(text: str) -> int | None:
    text = text.strip()
    if len(text) > _LONGEST_TEXT:  # only digits: a huge count; else none (never parsed)
        return MOST_TOKENS if text.isascii() and text.isdigit() else None
    try:
        return token_count(int(text))
    except ValueError:
        pass
    try:
        return token_count(float(text))
    except ValueError:
        return None


def checked(
    response: ModelResponse,
    request: ModelRequest,
    model: str,
    *,
    estimate: InputEstimate | None = None,
) -> ModelResponse:
    """`response` with its usage as it is charged (the same object when that is as it
    came); a count estimated for `model` (its name) is warned about. `estimate` is the
    run's own, which counts only the messages added since its last request (a new one
    counts them all: every step of a long run, quadratic in its length)."""
    parts = response.message.parts
    usage, estimated = counted(
        response.message.usage,
        input_estimate=lambda: (estimate or InputEstimate()).tokens(request),
        output_estimate=lambda: output_tokens(parts) if parts else 0,
    )
    if estimated:
        warnings.warn(
            UsageEstimatedWarning(
                f"model {model!r} reported no usable {' or '.join(estimated)}; they are "
                "estimated at four characters a token, for the budget and the cost"
            ),
            stacklevel=3,
        )
    if usage is response.message.usage:
        return response
    return replace(response, message=replace(response.message, usage=usage))


def counted(
    usage: object,
    *,
    input_estimate: Callable[[], int],
    output_estimate: Callable[[], int],
) -> tuple[Usage, list[str]]:
    """`usage` as it is charged, and the names of the counts that were estimated.

    The estimates are called only for a count that is missing, zero, negative or not a
    number. `usage` may be anything a model put in its response: a `Usage` whose fields
    hold whatever came over the wire, or something else entirely.
    """
    estimated: list[str] = []

    def field(name: str) -> int | None:
        return token_count(getattr(usage, name, None))

    def or_estimate(name: str, estimate: Callable[[], int]) -> int:
        reported = field(name)
        if reported:
            return reported
        guess = min(max(estimate(), 0), MOST_TOKENS)
        if guess:  # an empty reply that says it cost nothing is believed
            estimated.append(name)
        return guess

    input_tokens = or_estimate("input_tokens", input_estimate)
    output_tokens = or_estimate("output_tokens", output_estimate)
    cache_read = min(field("cache_read_tokens") or 0, input_tokens)
    cache_write = min(field("cache_write_tokens") or 0, input_tokens - cache_read)
    requests = max(field("requests") or 1, 1)
    checked = Usage(input_tokens, output_tokens, cache_read, cache_write, requests)
    if isinstance(usage, Usage) and _same(usage, checked):
        return usage, estimated  # the common case: kept as it came
    return checked, estimated


def _same(usage: Usage, checked: Usage) -> bool:
    """Whether `usage` is `checked` already: equal, and every field a true int."""
    ints = all(type(getattr(usage, f.name)) is int for f in fields(Usage))
    return ints and usage == checked  # ints first: a signalling NaN raises when compared
