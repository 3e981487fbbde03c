"""The profiles tether ships for the model families it knows (see `tether.profiles`)."""

from __future__ import annotations

from tether.profiles import HarnessProfile, register_harness_profile

__all__ = ["register"]

_OPENAI = HarnessProfile(
    system_prompt_suffix=(
        "Act rather than ask: when the next step is clear, call the tool instead of "
        "describing it or asking for permission, and keep going until the task is done."
    )
)
_ANTHROPIC = HarnessProfile(
    system_prompt_suffix=(
        "Make independent tool calls in the same turn, and do not repeat what a tool "
        "result already shows."
    )
)


def register() -> None:
    """Register the built-in profiles (called once, before entry points are loaded)."""
    register_harness_profile("openai", _OPENAI)
    register_harness_profile("anthropic", _ANTHROPIC)
