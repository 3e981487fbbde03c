from __future__ import annotations

import pytest

from tether.errors import ConfigurationError
from tether.messages import Usage
from tether.models.prices import Price, PriceBook


def test_price_counts_cache_tokens_at_their_own_rates() -> None:
    price = Price(
        input_per_mtok=3, output_per_mtok=15, cache_read_per_mtok=0.3, cache_write_per_mtok=3.75
    )
    usage = Usage(input_tokens=1_000_000, output_tokens=1_000_000, cache_read_tokens=500_000)
    assert price.cost(usage) == pytest.approx(1.5 + 0.15 + 15)


def test_user_prices_win_and_match_provider_qualified_names() -> None:
    book = PriceBook({"acme:small": Price(1, 2)})
    assert book.cost(Usage(1_000_000, 1_000_000), "small", "acme") == pytest.approx(3)


def test_a_user_price_under_the_bare_name_beats_a_built_in_qualified_one() -> None:
    book = PriceBook({"function": Price(1, 0)})  # the built-in table has "test:function"
    assert book.cost(Usage(1_000_000, 0), "function", "test") == pytest.approx(1)


def test_known_models_are_priced_by_genai_prices() -> None:
    cost = PriceBook().cost(Usage(1_000_000, 0), "claude-sonnet-4-5", "anthropic")
    assert cost is not None
    assert cost > 0


def test_unknown_models_have_no_price() -> None:
    book = PriceBook()
    assert book.cost(Usage(10, 10), "no-such-model-xyz", "nobody") is None
    assert not book.knows("no-such-model-xyz", "nobody")


def test_test_models_are_free() -> None:
    assert PriceBook().cost(Usage(10**6, 10**6), "scripted", "test") == 0


def test_negative_prices_are_rejected() -> None:
    with pytest.raises(ConfigurationError, match="input_per_mtok"):
        Price(-1, 1)
