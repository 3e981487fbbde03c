"""`FallbackModel`: another model answers when one is rate limited, overloaded or down.

    model = FallbackModel(["anthropic:claude-sonnet-4-5", "openai:gpt-5.2"])

Each model first retries as it always does (see `tether.models`); when its fault is
still there, the same request goes to the next model, so the conversation carries on.
A reply that broke off after part of it streamed is not sent again. Each step's
message names the model that answered, and its cost is priced as that model's.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Sequence
from dataclasses import replace

from tether.errors import ConfigurationError, ModelError
from tether.models.base import Model, ModelRequest, ModelResponse, StreamItem, response_of

__all__ = ["FallbackModel"]


def transient(error: ModelError) -> bool:
    """The default test: a fault that may pass (HTTP 408, 409, 429, 5xx, 529, a dropped
    connection, a timeout); not a refused key or a bad request, which the next model
    would be sent just as wrongly."""
    return error.transient


class FallbackModel:
    """Tries `models` in order for each request, moving on when `fall_back_on(error)`
    says so (by default: a fault that may pass, after the model's own retries)."""

    def __init__(
        self,
        models: Sequence[Model | str],
        *,
        fall_back_on: Callable[[ModelError], bool] = transient,
    ) -> None:
        from tether.models.resolve import infer_model

        if isinstance(models, str) or len(models) < 2:
            raise ConfigurationError("FallbackModel needs a list of two models or more")
        self.models: tuple[Model, ...] = tuple(
            infer_model(m) if isinstance(m, str) else m for m in models
        )
        self.fall_back_on = fall_back_on

    @property
    def name(self) -> str:
        return self.models[0].name

    @property
    def provider(self) -> str | None:
        return self.models[0].provider

    @property
    def profile(self) -> object:
        """The first model's profile (its window, its prices): the one usually answering."""
        return getattr(self.models[0], "profile", None)

    def __repr__(self) -> str:
        return f"FallbackModel({list(self.models)!r})"

    async def request(self, request: ModelRequest) -> ModelResponse:
        return await response_of(self.stream(request))

    async def stream(self, request: ModelRequest) -> AsyncIterator[StreamItem]:
        failures: list[str] = []
        for model in self.models:
            streamed = False
            stream = model.stream(request)
            try:
                async for item in stream:
                    streamed = True
                    if isinstance(item, ModelResponse):  # priced as the model that answered
                        yield replace(item, provider=item.provider or model.provider)
                    else:
                        yield item
                return
            except ModelError as exc:
                if streamed or model is self.models[-1] or not self.fall_back_on(exc):
                    if failures:
                        exc.args = (f"{exc} (after {'; '.join(failures)})", *exc.args[1:])
                    raise
                failures.append(f"{model.name} failed: {exc}")
            finally:  # a stream left early (the run stopped) is closed now, not when collected
                aclose = getattr(stream, "aclose", None)
                if aclose is not None:
                    await aclose()
