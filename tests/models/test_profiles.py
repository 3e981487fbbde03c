"""Model strings, profiles and the prices they carry."""

from __future__ import annotations

import pytest

from tether import ConfigurationError, Price, create_agent
from tether.messages import Usage
from tether.models import ModelProfile, ScriptedModel, infer_model, profile_for
from tether.models.anthropic import AnthropicModel
from tether.models.openai import OpenAIModel


@pytest.fixture(autouse=True)
def keys(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-test")
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)


def test_strings_name_a_provider_and_a_model() -> None:
    claude = infer_model("anthropic:claude-sonnet-5-5")
    assert isinstance(claude, AnthropicModel)
    assert (claude.provider, claude.name) == ("anthropic", "claude-sonnet-5-5")
    gpt = infer_model("openai:gpt-5.2")
    assert isinstance(gpt, OpenAIModel)
    assert (gpt.provider, gpt.name, gpt.api) == ("openai", "gpt-5.2", "responses")
    chat = infer_model("openai-chat:gpt-4.1")
    assert isinstance(chat, OpenAIModel)
    assert chat.api == "chat"


def test_create_agent_takes_a_model_string() -> None:
    agent = create_agent("anthropic:claude-haiku-4-5")
    assert isinstance(agent.model, AnthropicModel)


def test_openai_base_url_in_the_environment_switches_to_chat(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("OPENAI_BASE_URL", "http://localhost:8000/v1")
    model = infer_model("openai:qwen3")
    assert isinstance(model, OpenAIModel)
    assert (model.api, model.provider) == ("chat", None)


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ("claude-sonnet-5-5", "write it as 'provider:model'"),
        ("anthropic:", "write it as 'provider:model'"),
        ("mistral:large", "unknown model provider 'mistral'.*OpenAIModel"),
    ],
)
def test_bad_strings_say_what_to_write(spec: str, message: str) -> None:
    with pytest.raises(ConfigurationError, match=message):
        infer_model(spec)


def test_a_missing_key_names_the_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("ANTHROPIC_API_KEY")
    with pytest.raises(ConfigurationError, match="set the ANTHROPIC_API_KEY environment variable"):
        create_agent("anthropic:claude-sonnet-5-5")


def test_a_missing_sdk_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    import sys

    monkeypatch.setitem(sys.modules, "anthropic", None)  # import now fails
    with pytest.raises(ConfigurationError, match=r"pip install 'tether\[anthropic\]'"):
        infer_model("anthropic:claude-sonnet-5-5")


def test_profiles_know_current_models() -> None:
    sonnet = profile_for("anthropic", "claude-sonnet-4-5-20250929")
    assert sonnet.max_input_tokens == 200_000
    assert sonnet.max_output_tokens == 64_000
    assert sonnet.supports_caching
    assert sonnet.supports_images
    assert sonnet.supports_thinking
    assert profile_for("anthropic", "claude-opus-4-1").max_output_tokens == 32_000
    gpt = profile_for("openai", "gpt-5.2")
    assert (gpt.max_input_tokens, gpt.max_output_tokens) == (400_000, 128_000)
    assert gpt.supports_structured_output
    assert not profile_for("openai", "gpt-4o").supports_thinking


def test_unknown_models_get_an_empty_profile() -> None:
    assert profile_for(None, "qwen3") == ModelProfile()
    assert profile_for("openai", "my-fine-tune") == ModelProfile()


def test_a_user_profile_wins_and_its_price_is_used() -> None:
    profile = ModelProfile(max_input_tokens=32_768, price=Price(1.0, 2.0))
    model = OpenAIModel("qwen3", base_url="http://localhost:8000/v1", profile=profile)
    assert model.profile is profile
    assert model.profile.supports_structured_output is False
    agent = create_agent(model)
    assert agent._plan.prices.cost(Usage(1_000_000, 1_000_000), "qwen3", None) == 3.0


def test_explicit_prices_win_over_the_profile() -> None:
    model = OpenAIModel(
        "qwen3", base_url="http://localhost:8000/v1", profile=ModelProfile(price=Price(1, 2))
    )
    agent = create_agent(model, prices={"qwen3": Price(10, 10)})
    assert agent._plan.prices.cost(Usage(1_000_000, 0), "qwen3", None) == 10.0


def test_scripted_models_need_no_profile() -> None:
    agent = create_agent(ScriptedModel(["hi"]))
    assert agent.run("x").cost_usd == 0
