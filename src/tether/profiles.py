"""Harness profiles: how the harness adapts to a model, registered by provider or model.

    register_harness_profile("openai", HarnessProfile(system_prompt_suffix="..."))
    register_harness_profile("openai:gpt-5.2", HarnessProfile(excluded_tools={"grep"}))

`create_agent` looks up the profile of its model: the provider's profile with the
model's own merged on top (keys "provider:model", or the model name alone when it has a
colon). Registrations add up: sets are unioned, description overrides and capabilities
(by type) merged, the general-purpose subagent profile merged field by field, and unset
fields leave what was there. Packages register profiles through the entry-point group
`tether.harness_profiles`: zero-argument callables, run once on the first lookup.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, fields, replace
from typing import TYPE_CHECKING, Any

from tether.errors import ConfigurationError

if TYPE_CHECKING:
    from tether.capabilities.base import Capability
    from tether.tools.tool import Tool

__all__ = [
    "ENTRY_POINT_GROUP",
    "GeneralPurposeProfile",
    "HarnessProfile",
    "profile_for",
    "register_harness_profile",
]

ENTRY_POINT_GROUP = "tether.harness_profiles"


@dataclass(frozen=True, slots=True)
class GeneralPurposeProfile:
    """Changes to the default "general-purpose" subagent; None leaves a field alone."""

    enabled: bool | None = None
    name: str | None = None
    description: str | None = None
    system_prompt: str | None = None
    tools: tuple[Tool | Callable[..., Any], ...] | None = None
    """Tools it has besides the parent's."""

    def merge(self, other: GeneralPurposeProfile) -> GeneralPurposeProfile:
        changes = {f.name: getattr(other, f.name) for f in fields(other)}
        return replace(self, **{k: v for k, v in changes.items() if v is not None})


@dataclass(frozen=True, slots=True)
class HarnessProfile:
    """How the harness should treat a model.

    - `base_system_prompt` replaces tether's base prompt; `system_prompt_suffix` goes
      after every other part of the system prompt.
    - `tool_description_overrides` rewrites tool descriptions by tool name;
      `excluded_tools` hides tools from the model.
    - `excluded_capabilities` removes built-in capabilities by class name (such as
      "ContextCompaction"); `extra_capabilities` adds capabilities.
    - `general_purpose_subagent` turns off, renames or re-prompts the default subagent.
    """

    base_system_prompt: str | None = None
    system_prompt_suffix: str | None = None
    tool_description_overrides: Mapping[str, str] = field(default_factory=dict)
    excluded_tools: frozenset[str] = frozenset()
    excluded_capabilities: frozenset[str] = frozenset()
    extra_capabilities: tuple[Capability, ...] = ()
    general_purpose_subagent: GeneralPurposeProfile | None = None

    def __post_init__(self) -> None:
        for name in ("excluded_tools", "excluded_capabilities"):
            value = getattr(self, name)
            if isinstance(value, str):
                raise ConfigurationError(
                    f"HarnessProfile.{name} takes a set of names, not a string"
                )
            object.__setattr__(self, name, frozenset(value))
        object.__setattr__(self, "extra_capabilities", tuple(self.extra_capabilities))
        object.__setattr__(
            self, "tool_description_overrides", dict(self.tool_description_overrides)
        )

    def merge(self, other: HarnessProfile) -> HarnessProfile:
        """This profile with `other` registered on top of it."""
        kept = {type(c): c for c in self.extra_capabilities}
        kept.update({type(c): c for c in other.extra_capabilities})
        subagent = self.general_purpose_subagent
        if other.general_purpose_subagent is not None:
            subagent = (subagent or GeneralPurposeProfile()).merge(other.general_purpose_subagent)
        return HarnessProfile(
            base_system_prompt=_later(self.base_system_prompt, other.base_system_prompt),
            system_prompt_suffix=_later(self.system_prompt_suffix, other.system_prompt_suffix),
            tool_description_overrides={
                **self.tool_description_overrides,
                **other.tool_description_overrides,
            },
            excluded_tools=self.excluded_tools | other.excluded_tools,
            excluded_capabilities=self.excluded_capabilities | other.excluded_capabilities,
            extra_capabilities=tuple(kept.values()),
            general_purpose_subagent=subagent,
        )


def _later(first: str | None, second: str | None) -> str | None:
    return first if second is None else second


_REGISTRY: dict[str, HarnessProfile] = {}


def register_harness_profile(key: str, profile: HarnessProfile) -> None:
    """Add `profile` for `key`: a provider ("anthropic") or "provider:model"."""
    if not isinstance(profile, HarnessProfile):
        raise ConfigurationError(f"register a HarnessProfile, got {type(profile).__name__}")
    provider, colon, model = key.partition(":") if isinstance(key, str) else ("", "", "")
    if not provider or (colon and not model):
        raise ConfigurationError(f"a profile key is 'provider' or 'provider:model', got {key!r}")
    known = _REGISTRY.get(key)
    _REGISTRY[key] = profile if known is None else known.merge(profile)


def profile_for(model: Any) -> HarnessProfile:
    """The profile for a model object (its `provider` and `name`): the provider's (or,
    for a provider with none, the model's maker's, its `family`: Claude on Bedrock gets
    Anthropic's), with the model's own merged on top."""
    _load_entry_points()
    provider, name = getattr(model, "provider", None), str(getattr(model, "name", ""))
    exact = _REGISTRY.get(f"{provider}:{name}") if provider else None
    if exact is None and ":" in name:
        exact = _REGISTRY.get(name)
        provider = provider or name.partition(":")[0]
    base = _REGISTRY.get(provider) if provider else None
    family = getattr(model, "family", None)  # who made a model a cloud serves
    if base is None and isinstance(family, str):
        base = _REGISTRY.get(family)
    if base is None:
        return exact or HarnessProfile()
    return base if exact is None else base.merge(exact)


@functools.cache
def _load_entry_points() -> None:
    """Run the registration functions that installed packages declare, once."""
    from importlib import metadata

    from tether import builtin_profiles

    builtin_profiles.register()
    for entry in metadata.entry_points(group=ENTRY_POINT_GROUP):
        try:
            register = entry.load()
            register()
        except Exception as exc:
            raise ConfigurationError(
                f"the harness profile entry point {entry.name!r} ({entry.value}) failed: {exc}"
            ) from exc
