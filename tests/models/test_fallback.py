"""FallbackModel across two real loopback servers, and the named OpenAI-compatible presets."""

from __future__ import annotations

from typing import Any

import pytest

from tether import ConfigurationError, ModelError, ModelHTTPError, Price, create_agent, tool
from tether.messages import AssistantMessage
from tether.models import FallbackModel, _sdk, infer_model
from tether.models.anthropic import AnthropicModel
from tether.models.openai import OpenAIModel

from .faults import Reply, error, serving
from .test_anthropic import claude_stream, text_block, tool_block
from .test_openai import chat_stream


@pytest.fixture(autouse=True)
def quick_backoff(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_sdk, "FIRST_BACKOFF_SECONDS", 0.01)


@tool
def note(text: str) -> str:
    """Save a note."""
    return f"saved {text}"


def claude(url: str, max_retries: int = 0) -> AnthropicModel:
    return AnthropicModel("claude-sonnet-5-5", api_key="k", base_url=url, max_retries=max_retries)


def gpt(url: str) -> OpenAIModel:
    return OpenAIModel(
        "gpt-5.2", api="chat", base_url=url + "/v1", provider="openai", max_retries=0
    )


PRICES = {
    "anthropic:claude-sonnet-5-5": Price(input_per_mtok=1_000_000, output_per_mtok=0),
    "openai:gpt-5.2": Price(input_per_mtok=1_000, output_per_mtok=0),
}


def answers(result: Any) -> list[str | None]:
    return [m.model_name for m in result.messages if isinstance(m, AssistantMessage)]


def test_an_overloaded_model_hands_the_conversation_to_the_next() -> None:
    overloaded = [error(529, "Overloaded", "overloaded_error")] * 2
    second = [
        Reply(body=chat_stream(None, [("c1", "note", '{"text": "hi"}')]).content),
        Reply(body=chat_stream("Noted.").content),
    ]
    with serving(overloaded) as first_server, serving(second) as second_server:
        model = FallbackModel([claude(first_server.url), gpt(second_server.url)])
        result = create_agent(model, tools=[note], prices=PRICES).run("Note hi.")
    assert result.output == "Noted."
    assert answers(result) == ["gpt-5.2", "gpt-5.2"]  # each step says who answered
    assert len(first_server.requests) == 2  # the first model is tried at every step
    history = second_server.requests[1]["messages"]  # the conversation carried over
    assert history[0]["role"] == "system"
    assert [m["role"] for m in history[1:]] == ["user", "assistant", "tool"]
    assert result.cost_usd == pytest.approx(80 / 1_000)  # priced as gpt-5.2 (40 + 40 tokens)


def test_a_model_that_answers_is_kept_and_its_retries_come_first() -> None:
    first = [error(503, "try again"), Reply(body=claude_stream([text_block("From Claude.")]))]
    with serving(first) as first_server, serving([]) as second_server:
        model = FallbackModel([claude(first_server.url, max_retries=1), gpt(second_server.url)])
        result = create_agent(model).run("Hi")
    assert result.output == "From Claude."
    assert second_server.requests == []


def test_a_refused_request_does_not_fall_back() -> None:
    with (
        serving([error(401, "bad key", "authentication_error")]) as first_server,
        serving([]) as second_server,
    ):
        model = FallbackModel([claude(first_server.url), gpt(second_server.url)])
        with pytest.raises(ModelHTTPError) as caught:
            create_agent(model).run("Hi")
    assert caught.value.status_code == 401
    assert second_server.requests == []  # the next model would be sent it just as wrongly


def test_a_reply_cut_after_it_began_is_not_sent_again() -> None:
    body = claude_stream([tool_block("t1", "note", '{"text": "hello there"}')])
    with (
        serving([Reply(body=body, cut=len(body) - 40, then="reset")]) as first_server,
        serving([]) as second_server,
    ):
        model = FallbackModel([claude(first_server.url), gpt(second_server.url)])
        with pytest.raises(ModelError, match="connection"):
            create_agent(model, tools=[note]).run("Note it.")
    assert second_server.requests == []


def test_every_model_failing_says_what_each_did() -> None:
    with (
        serving([error(429, "slow down")]) as first_server,
        serving([error(500, "broken")]) as second_server,
    ):
        model = FallbackModel([claude(first_server.url), gpt(second_server.url)])
        with pytest.raises(ModelHTTPError) as caught:
            create_agent(model).run("Hi")
    said = str(caught.value)
    assert said.startswith("openai")  # the last model's own error
    assert "(after claude-sonnet-5-5 failed: " in said
    assert "HTTP 429" in said


def test_fallback_is_configurable_and_checked() -> None:
    with (
        serving([error(400, "bad request", "invalid_request_error")]) as first_server,
        serving([Reply(body=chat_stream("Fine.").content)]) as second_server,
    ):
        everything = FallbackModel(
            [claude(first_server.url), gpt(second_server.url)], fall_back_on=lambda e: True
        )
        assert create_agent(everything).run("Hi").output == "Fine."
    with pytest.raises(ConfigurationError, match="two models or more"):
        FallbackModel([gpt("http://127.0.0.1:1")])


def test_presets_name_compatible_servers(monkeypatch: pytest.MonkeyPatch) -> None:
    for variable in ("OLLAMA_BASE_URL", "OPENROUTER_API_KEY", "VLLM_BASE_URL"):
        monkeypatch.delenv(variable, raising=False)
    ollama = infer_model("ollama:qwen3")
    assert isinstance(ollama, OpenAIModel)
    assert (ollama.api, ollama.provider) == ("chat", "ollama")
    assert ollama.server_url == "http://localhost:11434/v1/chat/completions"
    assert infer_model("lmstudio:qwen3").server_url == "http://localhost:1234/v1/chat/completions"
    with pytest.raises(ConfigurationError, match="'openrouter:' models need a key: set OPENROUTER"):
        infer_model("openrouter:anthropic/claude-sonnet-4.5")
    monkeypatch.setenv("OPENROUTER_API_KEY", "sk-or")
    router = infer_model("openrouter:anthropic/claude-sonnet-4.5")
    assert router.server_url == "https://openrouter.ai/api/v1/chat/completions"  # type: ignore[attr-defined]
    with serving([Reply(body=chat_stream("From vLLM.").content)]) as server:
        monkeypatch.setenv("VLLM_BASE_URL", server.url + "/v1")
        result = create_agent("vllm:qwen3").run("Hi")
    assert result.output == "From vLLM."
    assert server.paths == ["/v1/chat/completions"]
    assert server.requests[0]["model"] == "qwen3"


def test_the_first_models_own_price_is_not_put_on_the_second() -> None:
    from tether.models import ModelProfile

    dear = ModelProfile(price=Price(input_per_mtok=1_000_000, output_per_mtok=1_000_000))
    with (
        serving([error(429, "slow down")]) as first_server,
        serving([Reply(body=chat_stream("Cheap.").content)]) as second_server,
    ):
        first = AnthropicModel(
            "claude-custom", api_key="k", base_url=first_server.url, max_retries=0, profile=dear
        )
        result = create_agent(FallbackModel([first, gpt(second_server.url)])).run("Hi")
    assert result.output == "Cheap."
    assert result.cost_usd is not None
    assert result.cost_usd < 0.01  # gpt-5.2's price from genai-prices, not the profile's
