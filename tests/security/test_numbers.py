"""Numbers from outside: the token counts a model reports never lower what a run has
spent, never make it free, and never crash it; a count past any budget stops the run.

Found in tether: a provider reporting negative token counts cancelled real spending,
so 3.1M input tokens passed `max_total_tokens=500_000` and `max_cost_usd=1`.
"""

from __future__ import annotations

import math
import warnings
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tether import Limits, create_agent, tool
from tether.errors import ConfigurationError
from tether.limits import Budget
from tether.messages import AssistantMessage, TextPart, ToolCall, Usage
from tether.models import FunctionModel, ModelRequest, ModelResponse
from tether.models.prices import Price
from tether.models.usage import MOST_TOKENS, counted, token_count

PRICE = {"house": Price(input_per_mtok=1, output_per_mtok=1)}  # $1 a million tokens


@tool
def step(n: int) -> str:
    """Do one more step."""
    return f"step {n} done"


def reporting(*usages: Usage, text: str = "working") -> FunctionModel:
    """A model that never finishes, reporting `usages` in turn, one a step."""

    def reply(request: ModelRequest) -> ModelResponse:
        n = sum(isinstance(m, AssistantMessage) for m in request.messages)
        parts = (TextPart(text), ToolCall("step", {"n": n}))
        return ModelResponse(AssistantMessage(parts, usage=usages[n % len(usages)]))

    return FunctionModel(reply, name="house")


def run(model: FunctionModel, limits: Limits) -> Any:
    agent = create_agent(model, tools=[step], limits=limits, prices=PRICE, checkpointer=None)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the estimates are warned about; not the point here
        return agent.run("go")


def test_negative_counts_do_not_cancel_what_was_spent() -> None:
    cancel = Usage(input_tokens=-3_000_000, output_tokens=-1, requests=1)
    real = Usage(input_tokens=3_100_000, output_tokens=10, requests=1)
    limits = Limits(max_steps=50, max_total_tokens=500_000, max_cost_usd=1)
    result = run(reporting(cancel, real), limits)
    assert result.stop_reason == "budget"
    assert result.steps == 2  # stopped after the real 3.1M, not 50 steps later
    assert result.usage.input_tokens >= 3_100_000
    assert result.cost_usd >= 3.1


@pytest.mark.parametrize("limit", ["max_total_tokens", "max_cost_usd"])
def test_a_model_reporting_negative_usage_every_step_still_stops_at_the_budget(
    limit: str,
) -> None:
    negative = Usage(
        input_tokens=-(10**9), output_tokens=-(10**9), cache_read_tokens=-5, requests=-1
    )
    budget = {"max_total_tokens": 20_000, "max_cost_usd": 0.02}[limit]
    limits = Limits(max_steps=1_000, **{limit: budget})  # type: ignore[arg-type]
    result = run(reporting(negative, text="x" * 4_000), limits)  # about 1,000 tokens a reply
    assert result.stop_reason == "budget"
    assert result.steps < 40  # the estimates count: the step limit never came near
    spent = {"max_total_tokens": result.usage.total_tokens, "max_cost_usd": result.cost_usd}
    assert spent[limit] >= budget  # the limit named stopped it
    assert all(
        m.usage.input_tokens > 0 and m.usage.output_tokens > 0 and m.usage.requests == 1
        for m in result.messages
        if isinstance(m, AssistantMessage)
    )


def test_a_count_past_any_budget_stops_the_run_without_overflowing() -> None:
    for huge in (10**400, float("inf"), "9" * 5_000, 1e308):
        usage = Usage(input_tokens=huge, output_tokens=huge, requests=1)  # type: ignore[arg-type]
        result = run(reporting(usage), Limits(max_steps=10, max_total_tokens=10**12))
        assert result.stop_reason == "budget"
        assert result.steps == 1
        assert result.usage.input_tokens == MOST_TOKENS


def test_a_cost_that_is_not_a_number_or_negative_is_no_discount() -> None:
    budget = Budget(Limits(max_cost_usd=1))
    budget.charge(Usage(1, 1, requests=1), 0.75)
    for bad in (-5.0, float("nan"), float("-inf"), None):
        budget.charge(Usage(1, 1, requests=1), bad)
    assert budget.cost_usd == 0.75
    budget.charge(Usage(1, 1, requests=1), float("inf"))
    assert budget.pressure() == (math.inf, "max_cost_usd")


@pytest.mark.parametrize("value", [float("nan"), float("inf"), -1, "2", True])
def test_a_price_must_be_a_finite_number_not_negative(value: object) -> None:
    with pytest.raises(ConfigurationError, match=r"Price\.input_per_mtok must be"):
        Price(input_per_mtok=value, output_per_mtok=1)  # type: ignore[arg-type]


# -- every value a count can take -------------------------------------------------

HOSTILE = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(10**40), max_value=10**40),
    st.floats(allow_nan=True, allow_infinity=True),
    st.integers(min_value=-(10**20), max_value=10**20).map(str),
    st.floats(allow_nan=True, allow_infinity=True).map(str),
    st.decimals(allow_nan=True, allow_infinity=True),
    st.fractions(),
    st.text(max_size=20),
    st.sampled_from([[], {}, b"12", object()]),
)


@given(value=HOSTILE)
def test_a_count_is_a_bounded_int_or_none(value: object) -> None:
    count = token_count(value)
    assert count is None or (type(count) is int and 0 <= count <= MOST_TOKENS)


@given(
    fields=st.fixed_dictionaries(
        {
            name: HOSTILE
            for name in (
                "input_tokens",
                "output_tokens",
                "cache_read_tokens",
                "cache_write_tokens",
                "requests",
            )
        }
    )
)
def test_any_usage_is_charged_as_counts_that_never_lower_spending(fields: dict[str, Any]) -> None:
    usage, _ = counted(Usage(**fields), input_estimate=lambda: 7, output_estimate=lambda: 3)
    values = [getattr(usage, name) for name in fields]
    assert all(type(v) is int and 0 <= v <= MOST_TOKENS for v in values)
    assert usage.input_tokens >= 1  # never free
    assert usage.output_tokens >= 1
    assert usage.cache_read_tokens + usage.cache_write_tokens <= usage.input_tokens
    assert usage.requests >= 1
    reported = token_count(fields["input_tokens"])
    if reported:
        assert usage.input_tokens == reported  # a true count is taken as it is
    budget = Budget(Limits(max_total_tokens=10**6))
    budget.charge(Usage(100, 100, requests=1), 0.0)
    budget.charge(usage, 0.0)
    assert budget.usage.total_tokens >= 200  # nothing taken back


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(reports=st.lists(st.fixed_dictionaries({"in": HOSTILE, "out": HOSTILE}), min_size=1))
def test_a_run_given_any_counts_charges_each_and_stops_at_its_budget(
    reports: list[dict[str, Any]],
) -> None:
    usages = [Usage(r["in"], r["out"], requests=1) for r in reports]
    limits = Limits(max_steps=30, max_total_tokens=5_000)
    result = run(reporting(*usages, text="y" * 400), limits)  # 100 tokens a reply, estimated
    assert result.stop_reason == "budget"
    replies = [m for m in result.messages if isinstance(m, AssistantMessage)]
    assert sum((m.usage for m in replies), Usage()) == result.usage  # each counted, once
    spent = 0
    for n, reply in enumerate(replies):
        said = token_count(reports[n % len(reports)]["out"])
        assert reply.usage.output_tokens == said if said else reply.usage.output_tokens >= 100
        assert reply.usage.input_tokens >= 1
        assert spent < 5_000  # no step after the one that went past the budget
        spent += reply.usage.total_tokens
    assert spent >= 5_000 or len(replies) == 30


class _Lying(int):
    """An int whose sums cancel spending: its own arithmetic must never count."""

    def __add__(self, other: object) -> int:
        return -(10**12)

    __radd__ = __add__

    def __ge__(self, other: object) -> bool:
        return True


def test_a_count_of_an_int_subclass_counts_as_a_plain_int() -> None:
    from tether.models.usage import token_count

    counted = token_count(_Lying(400_000))
    assert type(counted) is int
    assert counted == 400_000
    assert token_count(_Lying(-5)) is None


def test_an_int_subclass_cannot_cancel_a_token_budget() -> None:
    from tether import Limits, create_agent, tool
    from tether.messages import AssistantMessage, TextPart, ToolCall, Usage
    from tether.models import FunctionModel, ModelResponse

    @tool
    def step(n: int) -> str:
        """Take a step."""
        return "ok"

    def reply(request: Any) -> ModelResponse:
        n = sum(isinstance(m, AssistantMessage) for m in request.messages)
        usage = Usage(input_tokens=_Lying(400_000), output_tokens=_Lying(10), requests=1)
        return ModelResponse(
            AssistantMessage((TextPart("w"), ToolCall("step", {"n": n})), usage=usage)
        )

    limits = Limits(max_steps=20, max_total_tokens=500_000)
    result = create_agent(FunctionModel(reply), tools=[step], limits=limits).run("go")
    assert result.stop_reason == "budget"
    assert result.steps <= 2
    assert result.usage.total_tokens >= 500_000
