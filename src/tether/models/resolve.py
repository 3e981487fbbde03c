"""Model strings: "provider:model" to a model instance."""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from tether.errors import ConfigurationError
from tether.models.base import Model

__all__ = [
    "OFFLINE_NOTICE",
    "PRESETS",
    "PROVIDERS",
    "Preset",
    "default_model",
    "infer_model",
    "parse_model",
]

OFFLINE_NOTICE = (
    "using the offline demo model; set ANTHROPIC_API_KEY or OPENAI_API_KEY for a capable one"
)


def _anthropic(name: str) -> Model:
    from tether.models.anthropic import AnthropicModel

    return AnthropicModel(name)


def _openai(name: str) -> Model:
    from tether.models.openai import OpenAIModel

    return OpenAIModel(name)


def _openai_chat(name: str) -> Model:
    from tether.models.openai import OpenAIModel

    return OpenAIModel(name, api="chat")


def _google(name: str) -> Model:
    from tether.models.google import GoogleModel

    return GoogleModel(name)


def _bedrock(name: str) -> Model:
    from tether.models.bedrock import BedrockModel

    return BedrockModel(name)


def _azure(name: str) -> Model:
    from tether.models.openai import azure_model

    return azure_model(name)


def _local(name: str) -> Model:
    from tether.models.local import LocalModel

    return LocalModel(name)


def _script(path: str) -> Model:
    from tether.models.scripted import script_file_model

    return script_file_model(path)


@dataclass(frozen=True)
class Preset:
    """An OpenAI-compatible server by name: where it listens unless `url_variable` says
    otherwise, and the variable holding its key (needed only when `key_required`)."""

    base_url: str
    url_variable: str
    key_variable: str
    key_required: bool = False


PRESETS: dict[str, Preset] = {
    "ollama": Preset("http://localhost:11434/v1", "OLLAMA_BASE_URL", "OLLAMA_API_KEY"),
    "vllm": Preset("http://localhost:8000/v1", "VLLM_BASE_URL", "VLLM_API_KEY"),
    "lmstudio": Preset("http://localhost:1234/v1", "LMSTUDIO_BASE_URL", "LMSTUDIO_API_KEY"),
    "openrouter": Preset(
        "https://openrouter.ai/api/v1", "OPENROUTER_BASE_URL", "OPENROUTER_API_KEY", True
    ),
}
"""OpenAI-compatible servers known by name: "ollama:qwen3" is Chat Completions at
Ollama's address (or `OLLAMA_BASE_URL`), priced as the "ollama" provider."""


def _preset(prefix: str) -> Callable[[str], Model]:
    def make(name: str) -> Model:
        from tether.models.openai import OpenAIModel

        preset = PRESETS[prefix]
        key = os.environ.get(preset.key_variable) or None
        if preset.key_required and key is None:
            raise ConfigurationError(f"'{prefix}:' models need a key: set {preset.key_variable}")
        url = os.environ.get(preset.url_variable) or preset.base_url
        return OpenAIModel(name, api="chat", base_url=url, api_key=key, provider=prefix)

    return make


PROVIDERS: dict[str, Callable[[str], Model]] = {
    "anthropic": _anthropic,
    "openai": _openai,
    "openai-chat": _openai_chat,
    "azure": _azure,
    "bedrock": _bedrock,
    "google": _google,
    "local": _local,
    "test": _script,
    **{prefix: _preset(prefix) for prefix in PRESETS},
}
"""Known prefixes. "openai" uses the Responses API, or Chat Completions when
`OPENAI_BASE_URL` points at another server; "openai-chat" always uses Chat Completions;
"ollama", "vllm", "lmstudio" and "openrouter" are OpenAI-compatible servers (`PRESETS`);
"google" is Gemini (`tether.models.google`); "azure" is a deployment on Azure OpenAI
(`tether.models.openai.azure_model`); "bedrock" is a model on Amazon Bedrock by its id
(`tether.models.bedrock`);
"local" runs a model shipped in a package on this machine (`tether.models.local`);
"test:<file>" plays a JSON script (`tether.models.scripted.script_file_model`), to drive
the CLI in tests."""


def infer_model(spec: str) -> Model:
    """The model a "provider:model" string names, e.g. "anthropic:claude-sonnet-5-5".

    Keys come from the provider's environment variable (`ANTHROPIC_API_KEY`,
    `OPENAI_API_KEY`); a missing key or SDK is a `ConfigurationError` saying what to do.
    """
    provider, name = parse_model(spec)
    return PROVIDERS[provider](name)


def parse_model(spec: str) -> tuple[str, str]:
    """The provider and name of a "provider:model" string, or a `ConfigurationError`
    saying how to write it. Nothing is loaded or checked beyond the spelling."""
    provider, sep, name = spec.partition(":")
    known = ", ".join(f"'{p}:'" for p in PROVIDERS)
    if not sep or not name.strip():
        raise ConfigurationError(
            f"cannot tell the provider of model {spec!r}: write it as 'provider:model', "
            f"e.g. 'anthropic:claude-sonnet-5-5' (known prefixes: {known})"
        )
    provider = provider.strip().lower()
    if provider not in PROVIDERS:
        raise ConfigurationError(
            f"unknown model provider {provider!r} in {spec!r}; known prefixes: {known}. "
            "For another OpenAI-compatible server use 'openai-chat:NAME' with "
            "OPENAI_BASE_URL set to its URL (in Python: OpenAIModel(NAME, base_url=...))"
        )
    return provider, name.strip()


def default_model(environ: Mapping[str, str] | None = None) -> str:
    """The model string to use when the user named none: Claude when ANTHROPIC_API_KEY is
    set, else GPT when OPENAI_API_KEY is set, else the offline "local:smollm2" (say
    `OFFLINE_NOTICE` to the user then)."""
    env = os.environ if environ is None else environ
    if env.get("ANTHROPIC_API_KEY"):
        return "anthropic:claude-sonnet-4-5"
    if env.get("OPENAI_API_KEY"):
        return "openai:gpt-5.2"
    return "local:smollm2"
