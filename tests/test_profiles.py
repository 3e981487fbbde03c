"""Harness profiles: merge rules, lookup order, entry points, and what they change."""

from __future__ import annotations

from collections.abc import Iterator
from importlib import metadata

import pytest

from tether import Capability, ConfigurationError, create_agent
from tether import profiles as registry
from tether.capabilities.compaction import ContextCompaction
from tether.models import ScriptedModel
from tether.profiles import (
    GeneralPurposeProfile,
    HarnessProfile,
    profile_for,
    register_harness_profile,
)


@pytest.fixture(autouse=True)
def clean_registry() -> Iterator[None]:
    saved = dict(registry._REGISTRY)
    registry._REGISTRY.clear()
    registry._load_entry_points.cache_clear()
    yield
    registry._REGISTRY.clear()
    registry._REGISTRY.update(saved)
    registry._load_entry_points.cache_clear()


class Model(ScriptedModel):
    def __init__(self, provider: str | None, name: str) -> None:
        super().__init__(["ok"], name=name)
        self._provider = provider

    @property
    def provider(self) -> str:
        return self._provider  # type: ignore[return-value]


class Shout(Capability):
    def __init__(self, loud: bool = True) -> None:
        self.loud = loud

    def prompt(self) -> str:
        return "SHOUT" if self.loud else "shout"


def test_registrations_add_up() -> None:
    register_harness_profile(
        "acme",
        HarnessProfile(
            system_prompt_suffix="first",
            excluded_tools={"ls"},
            tool_description_overrides={"glob": "A", "grep": "B"},
            extra_capabilities=(Shout(loud=True),),
            general_purpose_subagent=GeneralPurposeProfile(name="helper", description="Helps."),
        ),
    )
    register_harness_profile(
        "acme",
        HarnessProfile(
            excluded_tools={"grep"},
            tool_description_overrides={"glob": "A2"},
            extra_capabilities=(Shout(loud=False),),
            general_purpose_subagent=GeneralPurposeProfile(system_prompt="Be a helper."),
        ),
    )
    merged = registry._REGISTRY["acme"]
    assert merged.system_prompt_suffix == "first"  # unset later: kept
    assert merged.excluded_tools == {"ls", "grep"}
    assert merged.tool_description_overrides == {"glob": "A2", "grep": "B"}
    (shout,) = merged.extra_capabilities  # merged by type: the later one
    assert isinstance(shout, Shout)
    assert shout.loud is False
    assert merged.general_purpose_subagent == GeneralPurposeProfile(
        name="helper", description="Helps.", system_prompt="Be a helper."
    )


def test_lookup_merges_the_model_profile_over_the_provider_profile() -> None:
    register_harness_profile(
        "acme", HarnessProfile(system_prompt_suffix="provider", excluded_tools={"ls"})
    )
    register_harness_profile("acme:big-1", HarnessProfile(system_prompt_suffix="model"))
    register_harness_profile("router:acme-small", HarnessProfile(base_system_prompt="routed"))

    exact = profile_for(Model("acme", "big-1"))
    assert exact.system_prompt_suffix == "model"
    assert exact.excluded_tools == {"ls"}  # inherited from the provider
    assert profile_for(Model("acme", "other")).system_prompt_suffix == "provider"
    # A model whose name carries its own provider prefix is found by its name.
    assert profile_for(Model(None, "router:acme-small")).base_system_prompt == "routed"
    assert profile_for(Model("nobody", "x")) == HarnessProfile()


def test_a_cloud_serving_another_makers_model_gets_the_makers_profile() -> None:
    from tether.models.openai import azure_model

    register_harness_profile("maker", HarnessProfile(system_prompt_suffix="maker's"))
    served = Model("cloud", "maker.big-1")
    served.family = "maker"  # type: ignore[attr-defined]
    assert profile_for(served).system_prompt_suffix == "maker's"
    register_harness_profile("cloud", HarnessProfile(system_prompt_suffix="cloud's"))
    assert profile_for(served).system_prompt_suffix == "cloud's"  # the provider's first
    azure = azure_model("gpt-52-prod", endpoint="https://x.openai.azure.com", api_key="k")
    assert "Act rather than ask" in (profile_for(azure).system_prompt_suffix or "")


def test_entry_points_run_once_on_the_first_lookup(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[str] = []

    def register() -> None:
        calls.append("called")
        register_harness_profile("plugin", HarnessProfile(system_prompt_suffix="from a plugin"))

    class FakeEntryPoint:
        name, value = "plugin", "plugin_pkg:register"

        def load(self) -> object:
            return register

    def entry_points(*, group: str) -> list[FakeEntryPoint]:
        assert group == "tether.harness_profiles"
        return [FakeEntryPoint()]

    monkeypatch.setattr(metadata, "entry_points", entry_points)
    assert profile_for(Model("plugin", "m")).system_prompt_suffix == "from a plugin"
    profile_for(Model("plugin", "m"))
    assert calls == ["called"]


def test_a_broken_entry_point_is_a_clear_error(monkeypatch: pytest.MonkeyPatch) -> None:
    class Broken:
        name, value = "broken", "broken_pkg:register"

        def load(self) -> object:
            raise ImportError("no module named broken_pkg")

    monkeypatch.setattr(metadata, "entry_points", lambda *, group: [Broken()])
    with pytest.raises(ConfigurationError, match="'broken' \\(broken_pkg:register\\) failed"):
        profile_for(Model("x", "y"))


def test_a_profile_shapes_the_agent() -> None:
    register_harness_profile(
        "acme",
        HarnessProfile(
            base_system_prompt="You are Acme's agent.",
            system_prompt_suffix="Answer in French.",
            tool_description_overrides={"read_file": "Read a file (Acme style)."},
            excluded_tools={"glob"},
            excluded_capabilities={"ContextCompaction"},
            extra_capabilities=(Shout(),),
            general_purpose_subagent=GeneralPurposeProfile(
                name="helper", description="Acme helper."
            ),
        ),
    )
    model = Model("acme", "big-1")
    agent = create_agent(model, system_prompt="Custom first.")
    prompt = agent._plan.system_prompt
    assert prompt.startswith("Custom first.\n\nYou are Acme's agent.")
    assert prompt.endswith("Answer in French.")
    assert "SHOUT" in prompt
    specs = {t.name: t for t in agent._plan.tool_specs}
    assert "glob" not in specs
    assert specs["read_file"].description == "Read a file (Acme style)."
    assert "- helper: Acme helper." in specs["task"].description
    assert not any(isinstance(c, ContextCompaction) for c in agent._plan.before_model)


def test_gp_can_be_turned_off_and_bad_profiles_are_refused() -> None:
    off = HarnessProfile(general_purpose_subagent=GeneralPurposeProfile(enabled=False))
    agent = create_agent(ScriptedModel(["x"]), profile=off)
    assert "task" not in {t.name for t in agent._plan.tool_specs}
    with pytest.raises(ConfigurationError, match="does not have: \\['nope'\\]"):
        create_agent(ScriptedModel(["x"]), profile=HarnessProfile(excluded_tools={"nope"}))
    with pytest.raises(ConfigurationError, match="excludes capabilities"):
        create_agent(ScriptedModel(["x"]), profile=HarnessProfile(excluded_capabilities={"Nope"}))
    with pytest.raises(ConfigurationError, match="'provider' or 'provider:model'"):
        register_harness_profile("acme:", HarnessProfile())
    with pytest.raises(ConfigurationError, match="not a string"):
        HarnessProfile(excluded_tools="ls")  # type: ignore[arg-type]


def test_builtin_profiles_for_anthropic_and_openai() -> None:
    assert profile_for(Model("anthropic", "claude-sonnet-4-5")).system_prompt_suffix
    assert profile_for(Model("openai", "gpt-5.2")).system_prompt_suffix
    assert profile_for(Model("test", "scripted")).system_prompt_suffix is None


def test_a_profile_given_to_create_agent_applies_on_top_of_the_registry() -> None:
    register_harness_profile("test", HarnessProfile(system_prompt_suffix="registered"))
    mine = HarnessProfile(excluded_capabilities={"ContextCompaction"}, excluded_tools={"ls"})
    agent = create_agent(ScriptedModel(["x"]), profile=mine)
    assert agent._plan.system_prompt.endswith("registered")
    assert "ls" not in {t.name for t in agent._plan.tool_specs}
    assert not any(isinstance(c, ContextCompaction) for c in agent._plan.before_model)
    # The general-purpose subagent (without a task tool of its own) still builds.
    assert "task" in {t.name for t in agent._plan.tool_specs}
