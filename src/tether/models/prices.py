"""What a response cost in USD: the user's price table first, then genai-prices."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from numbers import Real
from typing import TYPE_CHECKING, Any

from tether.errors import ConfigurationError
from tether.messages import Usage
from tether.models.usage import checked

if TYPE_CHECKING:
    from tether.models.base import Model, ModelRequest, ModelResponse

__all__ = ["Price", "PriceBook"]


@dataclass(frozen=True, slots=True)
class Price:
    """USD per million tokens. Cache prices default to the input price when unset."""

    input_per_mtok: float
    output_per_mtok: float
    cache_read_per_mtok: float | None = None
    cache_write_per_mtok: float | None = None

    def __post_init__(self) -> None:
        for name in (
            "input_per_mtok",
            "output_per_mtok",
            "cache_read_per_mtok",
            "cache_write_per_mtok",
        ):
            value = getattr(self, name)
            if value is None and name.startswith("cache"):
                continue
            if isinstance(value, bool) or not isinstance(value, Real):
                raise ConfigurationError(f"Price.{name} must be a number, got {value!r}")
            if not math.isfinite(value) or value < 0:
                raise ConfigurationError(
                    f"Price.{name} must be a finite number, not negative, got {value!r}"
                )

    def cost(self, usage: Usage) -> float:
        """USD for `usage` at this price."""
        cache_read = self.cache_read_per_mtok
        cache_write = self.cache_write_per_mtok
        if cache_read is None:
            cache_read = self.input_per_mtok
        if cache_write is None:
            cache_write = self.input_per_mtok
        plain_input = usage.input_tokens - usage.cache_read_tokens - usage.cache_write_tokens
        return (
            max(plain_input, 0) * self.input_per_mtok
            + usage.cache_read_tokens * cache_read
            + usage.cache_write_tokens * cache_write
            + usage.output_tokens * self.output_per_mtok
        ) / 1_000_000


# The test models cost nothing; listing them here keeps the lookup free of special cases.
_BUILTIN: Mapping[str, Price] = {"test:scripted": Price(0, 0), "test:function": Price(0, 0)}
_UNKNOWN = object()


class PriceBook:
    """Looks up prices once per model and computes the cost of each response.

    `overrides` maps "provider:model" or "model" to a `Price`; it wins over the price in
    `model`'s profile (when it has one), which wins over genai-prices.
    """

    def __init__(self, overrides: Mapping[str, Price] | None = None, *, model: Any = None) -> None:
        self._tables = (dict(overrides or {}), _BUILTIN)
        self._model = model
        self._resolved: dict[tuple[str, str | None], Any] = {}

    def knows(self, model: str, provider: str | None) -> bool:
        """Whether a price is known for this model."""
        return self._lookup(model, provider) is not _UNKNOWN

    def cost(self, usage: Usage, model: str, provider: str | None) -> float | None:
        """USD for `usage` on `model`, or None when its price is unknown."""
        price = self._lookup(model, provider)
        if price is _UNKNOWN:
            return None
        if isinstance(price, Price):
            return price.cost(usage)
        return float(price.calc_price(_genai_usage(usage))["total_price"])

    def charge_of(
        self, response: ModelResponse, model: Model, request: ModelRequest
    ) -> tuple[Usage, float | None]:
        """What one response of `model` to `request` used and cost. The usage is checked
        first (see `tether.models.usage`); a cost that is not a number, or negative,
        is unknown (None), never a discount."""
        usage = checked(response, request, model.name).usage
        provider = response.provider or model.provider
        cost = self.cost(usage, response.model_name or model.name, provider)
        if cost is not None and not cost >= 0:  # NaN compares false
            return usage, None
        return usage, cost

    def _lookup(self, model: str, provider: str | None) -> Any:
        key = (model, provider)
        if key not in self._resolved:
            self._resolved[key] = self._find(model, provider)
        return self._resolved[key]

    def _find(self, model: str, provider: str | None) -> Any:
        names = [f"{provider}:{model}", model] if provider else [model]
        for table in self._tables:  # the caller's prices first, either spelling
            for name in names:
                if name in table:
                    return table[name]
        profile_price = getattr(getattr(self._model, "profile", None), "price", None)
        # The profile's price is the agent's model's: not for a fallback's other provider.
        if isinstance(profile_price, Price) and provider == getattr(self._model, "provider", None):
            return profile_price
        import genai_prices  # imported here: it costs ~0.2 s and pulls in httpx

        try:
            found = genai_prices.calc_price(
                genai_prices.Usage(input_tokens=0, output_tokens=0), model, provider_id=provider
            )
        except LookupError:
            return _UNKNOWN
        return found.model_price


def _genai_usage(usage: Usage) -> Any:
    import genai_prices

    return genai_prices.Usage(
        input_tokens=usage.input_tokens,
        output_tokens=usage.output_tokens,
        cache_read_tokens=usage.cache_read_tokens,
        cache_write_tokens=usage.cache_write_tokens,
    )
