"""What a model can take and do: its window, output limit, price and features.

`profile_for("anthropic", "claude-sonnet-4-5")` answers from a small table of model
families kept here (output limits and feature flags) and from genai-prices (input
window and price). Adapters take a `profile=` argument to override any of it, for a
model the table does not know or a server with its own limits:

```python
OpenAIModel("qwen3", base_url="http://localhost:8000/v1",
            profile=ModelProfile(max_input_tokens=32_768, supports_structured_output=True))
```
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass, replace

from tether.models.prices import Price

__all__ = ["ModelProfile", "profile_for"]


@dataclass(frozen=True, slots=True)
class ModelProfile:
    """Limits and features of one model. `None` means unknown.

    - `max_input_tokens`: the context window, prompt and history included.
    - `max_output_tokens`: the most the model may write in one reply; adapters that must
      send a limit (Anthropic) send this one unless `ModelSettings.max_tokens` is set.
    - `supports_caching`: the provider caches prompts; for Anthropic this turns on the
      cache breakpoints tether places.
    - `supports_structured_output`: the provider can hold a reply to a JSON schema.
    - `price`: USD per million tokens; when unset, genai-prices is asked.
    """

    max_input_tokens: int | None = None
    max_output_tokens: int | None = None
    supports_tools: bool = True
    supports_images: bool = False
    supports_documents: bool = False
    supports_caching: bool = False
    supports_structured_output: bool = False
    supports_thinking: bool = False
    price: Price | None = None


_CLAUDE = ModelProfile(
    max_output_tokens=64_000,
    supports_images=True,
    supports_documents=True,
    supports_caching=True,
    supports_structured_output=True,
    supports_thinking=True,
)
_GPT5 = ModelProfile(
    max_output_tokens=128_000,
    supports_images=True,
    supports_documents=True,
    supports_caching=True,
    supports_structured_output=True,
    supports_thinking=True,
)
_GPT4 = replace(_GPT5, max_output_tokens=16_384, supports_thinking=False)
_GEMINI = ModelProfile(
    supports_images=True,
    supports_documents=True,
    supports_structured_output=True,
    supports_thinking=True,
)

# (provider, model name prefix) -> profile; the longest matching prefix wins.
_FAMILIES: dict[tuple[str, str], ModelProfile] = {
    ("anthropic", "claude-"): _CLAUDE,
    ("anthropic", "claude-3-"): replace(
        _CLAUDE, max_output_tokens=8_192, supports_thinking=False, supports_structured_output=False
    ),
    ("anthropic", "claude-3-haiku"): replace(
        _CLAUDE, max_output_tokens=4_096, supports_thinking=False, supports_structured_output=False
    ),
    ("anthropic", "claude-3-7-sonnet"): replace(_CLAUDE, supports_structured_output=False),
    ("anthropic", "claude-opus-4-0"): replace(_CLAUDE, max_output_tokens=32_000),
    ("anthropic", "claude-opus-4-1"): replace(_CLAUDE, max_output_tokens=32_000),
    ("anthropic", "claude-opus-4-2025"): replace(_CLAUDE, max_output_tokens=32_000),
    ("openai", "gpt-5"): _GPT5,
    ("openai", "gpt-6"): _GPT5,
    ("openai", "o1"): replace(_GPT5, max_output_tokens=100_000),
    ("openai", "o3"): replace(_GPT5, max_output_tokens=100_000),
    ("openai", "o4"): replace(_GPT5, max_output_tokens=100_000),
    ("openai", "gpt-4.1"): replace(_GPT4, max_output_tokens=32_768),
    ("openai", "gpt-4o"): _GPT4,
    # Bedrock model ids, without their region prefix ("us.", "eu.", "global.", ...)
    ("bedrock", "anthropic.claude-"): _CLAUDE,
    ("bedrock", "anthropic.claude-3-"): replace(
        _CLAUDE, max_output_tokens=8_192, supports_thinking=False, supports_structured_output=False
    ),
    ("bedrock", "amazon.nova-"): ModelProfile(
        max_output_tokens=10_000,
        supports_images=True,
        supports_documents=True,
        supports_caching=True,
    ),
    ("google", "gemini-"): _GEMINI,  # no output limit sent: older ones allow 8,192
    ("google", "gemini-2.5-"): replace(_GEMINI, max_output_tokens=65_536),
    ("google", "gemini-3"): replace(_GEMINI, max_output_tokens=65_536),
}
_BEDROCK_REGION = re.compile(r"^(?:us|eu|apac|global|us-gov|jp|au|ca)\.(?=[a-z0-9-]+\.)")


def profile_for(provider: str | None, model: str) -> ModelProfile:
    """The profile of `model` at `provider`; a plain `ModelProfile()` when nothing is known."""
    return _profile(provider, model.lower())


@functools.cache
def _profile(provider: str | None, model: str) -> ModelProfile:
    if provider == "bedrock":  # an inference profile is its model, in some regions
        model = _BEDROCK_REGION.sub("", model)
    matches = [
        prefix
        for (family_provider, prefix) in _FAMILIES
        if family_provider == provider and model.startswith(prefix)
    ]
    profile = _FAMILIES[(provider, max(matches, key=len))] if matches and provider else None
    window = _context_window(provider, model)
    if profile is None:
        return ModelProfile(max_input_tokens=window)
    return replace(profile, max_input_tokens=window)


def _context_window(provider: str | None, model: str) -> int | None:
    """The input window genai-prices records for the model, if it knows the model."""
    if provider is None:
        return None
    from genai_prices.data_snapshot import get_snapshot  # ~0.2 s; only when asked

    try:
        _, info = get_snapshot().find_provider_model(model, None, provider, None)
    except LookupError:
        return None
    return info.context_window
