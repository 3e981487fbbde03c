"""One conversation through every adapter gives the same tether messages."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from typing import Any

import pytest

from tether import create_agent, tool
from tether.messages import (
    AssistantMessage,
    Message,
    TextPart,
    ToolCall,
    ToolResultMessage,
    Usage,
)
from tether.models import Model, ScriptedModel
from tether.models.anthropic import AnthropicModel
from tether.models.langchain import LangChainModel
from tether.models.openai import OpenAIModel

from . import test_anthropic as claude
from . import test_langchain as lc
from . import test_openai as oai
from .wire import MockServer


@tool
def get_weather(city: str) -> str:
    """Current weather in a city."""
    return f"Sunny in {city}"


ARGS = '{"city": "Oslo"}'


def scripted() -> Model:
    return ScriptedModel(
        [
            [TextPart("Checking."), ToolCall("get_weather", {"city": "Oslo"}, "call_1")],
            "Sunny in Oslo.",
        ]
    )


def anthropic() -> Model:
    server = MockServer(
        [
            claude.reply(
                [claude.text_block("Checking."), claude.tool_block("call_1", "get_weather", ARGS)],
                stop_reason="tool_use",
            ),
            claude.reply([claude.text_block("Sunny in Oslo.")]),
        ]
    )
    return AnthropicModel("claude-sonnet-5-5", api_key="k", http_client=server.client())


def openai_chat() -> Model:
    server = MockServer(
        [
            oai.chat_stream("Checking.", calls=[("call_1", "get_weather", ARGS)]),
            oai.chat_stream("Sunny in Oslo."),
        ]
    )
    return OpenAIModel("gpt-5.2", api="chat", api_key="k", http_client=server.client())


def openai_responses() -> Model:
    server = MockServer(
        [
            oai.responses_stream(
                [oai.message_item("Checking."), oai.call_item("call_1", "get_weather", ARGS)]
            ),
            oai.responses_stream([oai.message_item("Sunny in Oslo.")]),
        ]
    )
    return OpenAIModel("gpt-5.2", api_key="k", http_client=server.client())


def langchain() -> Model:
    from langchain_core.messages import AIMessageChunk

    first = [AIMessageChunk(content="Checking."), *lc.call_reply(("call_1", "get_weather", ARGS))]
    chat = lc.ScriptedChat(replies=[first, lc.text_reply("Sunny in Oslo.")])
    return LangChainModel(chat)


def normalized(messages: tuple[Message, ...]) -> list[Message]:
    """The messages without what differs by provider or by run: model names, token
    counts, and tether's call ids, each replaced by its call's place in the thread (a
    result by that of the call it answers). Each call must have an id of its own."""
    places: dict[str, str] = {}

    def placed(part: Any) -> Any:
        if not isinstance(part, ToolCall):
            return part
        assert part.id not in places, f"call id {part.id} twice"
        places[part.id] = f"call #{len(places)}"
        return replace(part, id=places[part.id])

    def one(m: Message) -> Message:
        if isinstance(m, AssistantMessage):
            parts = tuple(placed(p) for p in m.parts)
            return replace(m, parts=parts, model_name=None, usage=Usage())
        if isinstance(m, ToolResultMessage):
            answers = tuple(replace(r, call_id=places[r.call_id]) for r in m.results)
            return replace(m, results=answers)
        return m

    return [one(m) for m in messages]


@pytest.mark.parametrize("make", [anthropic, openai_chat, openai_responses, langchain])
async def test_every_adapter_gives_the_scripted_messages(make: Callable[[], Any]) -> None:
    expected = await create_agent(scripted(), tools=[get_weather]).arun("Weather in Oslo?")
    result = await create_agent(make(), tools=[get_weather]).arun("Weather in Oslo?")
    assert result.output == "Sunny in Oslo."
    assert normalized(result.messages) == normalized(expected.messages)
    # The server's id is kept for the wire, as the script's is.
    calls = [c for m in result.messages if isinstance(m, AssistantMessage) for c in m.tool_calls]
    assert [c.provider_id for c in calls] == ["call_1"]
