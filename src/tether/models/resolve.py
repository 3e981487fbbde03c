"""Model strings: "provider:model" to a model instance."""

from __future__ import annotations

from collections.abc import Callable

from tether.errors import ConfigurationError
from tether.models.base import Model

__all__ = ["PROVIDERS", "infer_model"]


def _anthropic(name: str) -> Model:
    from tether.models.anthropic import AnthropicModel

    return AnthropicModel(name)


def _openai(name: str) -> Model:
    from tether.models.openai import OpenAIModel

    return OpenAIModel(name)


def _openai_chat(name: str) -> Model:
    from tether.models.openai import OpenAIModel

    return OpenAIModel(name, api="chat")


PROVIDERS: dict[str, Callable[[str], Model]] = {
    "anthropic": _anthropic,
    "openai": _openai,
    "openai-chat": _openai_chat,
}
"""Known prefixes. "openai" uses the Responses API, or Chat Completions when
`OPENAI_BASE_URL` points at another server; "openai-chat" always uses Chat Completions."""


def infer_model(spec: str) -> Model:
    """The model a "provider:model" string names, e.g. "anthropic:claude-sonnet-5-5".

    Keys come from the provider's environment variable (`ANTHROPIC_API_KEY`,
    `OPENAI_API_KEY`); a missing key or SDK is a `ConfigurationError` saying what to do.
    """
    provider, sep, name = spec.partition(":")
    known = ", ".join(f"'{p}:'" for p in PROVIDERS)
    if not sep or not name.strip():
        raise ConfigurationError(
            f"cannot tell the provider of model {spec!r}: write it as 'provider:model', "
            f"e.g. 'anthropic:claude-sonnet-5-5' (known prefixes: {known})"
        )
    make = PROVIDERS.get(provider.strip().lower())
    if make is None:
        raise ConfigurationError(
            f"unknown model provider {provider!r} in {spec!r}; known prefixes: {known}. "
            "For another OpenAI-compatible server use "
            "OpenAIModel(name, base_url=...) from tether.models.openai"
        )
    return make(name.strip())
