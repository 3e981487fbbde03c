"""LangChainModel and tools_from_langchain with a LangChain chat model written for the test."""

from __future__ import annotations

import base64
import json
from collections.abc import AsyncIterator, Sequence
from typing import Annotated, Any

import pytest
from langchain_core.callbacks import AsyncCallbackManagerForLLMRun
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, AIMessageChunk, BaseMessage, ToolMessage
from langchain_core.messages.tool import tool_call_chunk
from langchain_core.outputs import ChatGenerationChunk, ChatResult
from langchain_core.tools import InjectedToolCallId, ToolException
from langchain_core.tools import tool as lc_tool
from pydantic import BaseModel, Field

from tests.conftest import by_server_id, own_id
from tether import ConfigurationError, ModelError, create_agent, tool
from tether.events import ModelDelta, ToolCallStarted
from tether.messages import BinaryPart, TextPart, ThinkingPart, ToolCall, Usage, UserMessage
from tether.models.base import ModelRequest, ModelResponse
from tether.models.langchain import LangChainModel, tools_from_langchain


class ScriptedChat(BaseChatModel):
    """Streams each scripted reply as a few chunks; records what it was sent."""

    replies: list[list[AIMessageChunk]]
    seen: list[list[BaseMessage]] = Field(default_factory=list)
    bound: list[dict[str, Any]] = Field(default_factory=list)

    @property
    def _llm_type(self) -> str:
        return "scripted-chat"

    def _get_ls_params(self, stop: list[str] | None = None, **kwargs: Any) -> Any:
        return {"ls_provider": "anthropic", "ls_model_name": "claude-sonnet-5-5"}

    def bind_tools(
        self, tools: Sequence[Any], *, tool_choice: str | None = None, **kwargs: Any
    ) -> Any:
        self.bound.append({"tools": list(tools), "tool_choice": tool_choice})
        return self

    def _generate(
        self, messages: list[BaseMessage], stop: Any = None, run_manager: Any = None, **kwargs: Any
    ) -> ChatResult:
        raise AssertionError("tether streams")

    async def _astream(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: AsyncCallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> AsyncIterator[ChatGenerationChunk]:
        self.seen.append(messages)
        for chunk in self.replies.pop(0):
            yield ChatGenerationChunk(message=chunk)


def text_reply(text: str, *, finish: str = "end_turn") -> list[AIMessageChunk]:
    middle = len(text) // 2
    return [
        AIMessageChunk(content=text[:middle]),
        AIMessageChunk(
            content=text[middle:],
            usage_metadata={
                "input_tokens": 50,
                "output_tokens": 7,
                "total_tokens": 57,
                "input_token_details": {"cache_read": 20},
            },
            response_metadata={"stop_reason": finish, "model_name": "claude-sonnet-5-5"},
        ),
    ]


def call_reply(*calls: tuple[str, str, str], finish: str = "tool_use") -> list[AIMessageChunk]:
    chunks = []
    for index, (call_id, name, args) in enumerate(calls):
        middle = len(args) // 2
        chunks.append(
            AIMessageChunk(
                content="",
                tool_call_chunks=[
                    tool_call_chunk(name=name, args=args[:middle], id=call_id, index=index)
                ],
            )
        )
        chunks.append(
            AIMessageChunk(
                content="",
                tool_call_chunks=[
                    tool_call_chunk(name=None, args=args[middle:], id=None, index=index)
                ],
            )
        )
    chunks.append(AIMessageChunk(content="", response_metadata={"stop_reason": finish}))
    return chunks


@tool
def get_weather(city: str) -> str:
    """Current weather in a city."""
    return f"Sunny in {city}"


async def test_text_reply_with_usage_and_reported_name() -> None:
    chat = ScriptedChat(replies=[text_reply("Hello there")])
    model = LangChainModel(chat)
    assert (model.name, model.provider) == ("claude-sonnet-5-5", "anthropic")
    result = await create_agent(model, system_prompt="Be brief.").arun("Hi")

    assert result.output == "Hello there"
    assert result.usage == Usage(input_tokens=50, output_tokens=7, cache_read_tokens=20, requests=1)
    system, human = chat.seen[0]
    assert system.type == "system"
    assert str(system.content).startswith("Be brief.")
    assert (human.type, human.content) == ("human", "Hi")


async def test_tool_calls_round_trip() -> None:
    chat = ScriptedChat(
        replies=[
            call_reply(
                ("call_a", "get_weather", '{"city": "Oslo"}'),
                ("call_b", "get_weather", '{"city": "Rome"}'),
            ),
            text_reply("Both sunny."),
        ]
    )
    result = await create_agent(LangChainModel(chat), tools=[get_weather]).arun("Oslo, Rome?")

    assert result.output == "Both sunny."
    assert chat.bound[0]["tools"][0]["function"]["name"] == "get_weather"
    assert chat.bound[0]["tool_choice"] is None
    ai, tool_a, tool_b = chat.seen[1][2:5]
    assert isinstance(ai, AIMessage)
    assert [(c["id"], c["args"]) for c in ai.tool_calls] == [
        ("call_a", {"city": "Oslo"}),
        ("call_b", {"city": "Rome"}),
    ]
    assert (tool_a.type, tool_a.content, tool_a.tool_call_id) == ("tool", "Sunny in Oslo", "call_a")  # type: ignore[attr-defined]
    assert tool_b.content == "Sunny in Rome"


async def test_streamed_deltas_and_images() -> None:
    chat = ScriptedChat(replies=[text_reply("A cat.")])
    agent = create_agent(LangChainModel(chat))
    prompt = UserMessage((TextPart("What?"), BinaryPart(b"png", "image/png")))
    deltas = [e async for e in agent.stream(prompt) if isinstance(e, ModelDelta)]
    assert "".join(d.delta for d in deltas) == "A cat."
    assert chat.seen[0][1].content == [
        {"type": "text", "text": "What?"},
        {"type": "image", "base64": "cG5n", "mime_type": "image/png"},
    ]


async def test_a_streamed_call_names_its_tool_in_every_piece() -> None:
    chat = ScriptedChat(
        replies=[call_reply(("c1", "get_weather", '{"city": "Oslo"}')), text_reply("Sunny.")]
    )
    agent = create_agent(LangChainModel(chat), tools=[get_weather])
    events = [e async for e in agent.stream("Weather?")]
    pieces = [
        (e.call_id, e.tool) for e in events if isinstance(e, ModelDelta) and e.part == "tool_call"
    ]
    (call,) = [e.call for e in events if isinstance(e, ToolCallStarted)]  # tether's id for c1
    assert call.provider_id == "c1"
    assert pieces == [(call.id, "get_weather"), (call.id, "get_weather")]  # the name came once


async def test_reasoning_blocks_become_thinking() -> None:
    chunk = AIMessageChunk(
        content=[
            {"type": "reasoning", "reasoning": "Six times seven."},
            {"type": "text", "text": "42"},
        ],
        response_metadata={"stop_reason": "end_turn"},
    )
    chat = ScriptedChat(replies=[[chunk]])
    result = await create_agent(LangChainModel(chat)).arun("6*7?")
    assert result.output == "42"
    assert result.messages[-1].parts[0] == ThinkingPart("Six times seven.", provider="anthropic")  # type: ignore[union-attr]


async def test_forced_output_binds_the_final_result_tool() -> None:
    class Answer(BaseModel):
        city: str

    chat = ScriptedChat(
        replies=[text_reply("Oslo."), call_reply(("c1", "final_result", '{"city": "Oslo"}'))]
    )
    result = await create_agent(LangChainModel(chat), output_type=Answer).arun("City?")
    assert result.output == Answer(city="Oslo")
    assert [b["tool_choice"] for b in chat.bound] == [None, "final_result"]


async def test_a_call_cut_by_the_output_limit_is_not_run() -> None:
    chat = ScriptedChat(
        replies=[
            call_reply(("c1", "get_weather", '{"city": "Os'), finish="max_tokens"),
            text_reply("Sorry."),
        ]
    )
    result = await create_agent(LangChainModel(chat), tools=[get_weather]).arun("Weather?")
    call = result.messages[1].tool_calls[0]  # type: ignore[union-attr]
    assert call == ToolCall("get_weather", '{"city": "Os', call.id, provider_id="c1")
    assert result.messages[2].results[0].call_id == call.id  # type: ignore[union-attr]
    assert "cut off" in result.messages[2].results[0].text  # type: ignore[union-attr]


async def test_a_failing_chat_model_is_a_model_error() -> None:
    chat = ScriptedChat(replies=[])
    with pytest.raises(ModelError, match="IndexError"):
        await create_agent(LangChainModel(chat)).arun("Hi")


def test_only_chat_models_are_accepted() -> None:
    with pytest.raises(ConfigurationError, match="BaseChatModel"):
        LangChainModel(object())


async def test_langchain_tools_become_tether_tools() -> None:
    @lc_tool
    def multiply(a: int, b: int) -> int:
        """Multiply two integers."""
        return a * b

    (converted,) = tools_from_langchain([multiply])
    assert converted.name == "multiply"
    assert converted.description == "Multiply two integers."
    assert converted.parameters["required"] == ["a", "b"]

    chat = ScriptedChat(
        replies=[
            call_reply(("c1", "multiply", '{"a": 6, "b": 7}')),
            call_reply(("c2", "multiply", '{"a": "x"}')),
            text_reply("42"),
        ]
    )
    result = await create_agent(LangChainModel(chat), tools=[converted]).arun("6*7?")
    assert result.messages[2].results[0].text == "42"  # type: ignore[union-attr]
    bad = result.messages[4].results[0]  # type: ignore[union-attr]
    assert bad.is_error
    assert "multiply" in bad.text


def test_tools_from_langchain_rejects_other_objects() -> None:
    with pytest.raises(ConfigurationError, match="BaseTool"):
        tools_from_langchain([get_weather])


class WholeReplies(BaseChatModel):
    """A chat model that does not stream: LangChain hands back each reply whole."""

    replies: list[AIMessage]

    @property
    def _llm_type(self) -> str:
        return "whole-replies"

    def bind_tools(self, tools: Sequence[Any], **kwargs: Any) -> Any:
        return self

    def _generate(
        self, messages: list[BaseMessage], stop: Any = None, run_manager: Any = None, **kwargs: Any
    ) -> ChatResult:
        from langchain_core.outputs import ChatGeneration

        return ChatResult(generations=[ChatGeneration(message=self.replies.pop(0))])


async def test_a_chat_model_that_does_not_stream_calls_tools() -> None:
    chat = WholeReplies(
        replies=[
            AIMessage(
                content="",
                tool_calls=[{"name": "get_weather", "args": {"city": "Oslo"}, "id": "call_1"}],
                usage_metadata={"input_tokens": 9, "output_tokens": 4, "total_tokens": 13},
            ),
            AIMessage(content="Sunny.", response_metadata={"finish_reason": "stop"}),
        ]
    )
    result = await create_agent(LangChainModel(chat, name="whole"), tools=[get_weather]).arun(
        "Oslo?"
    )
    assert result.output == "Sunny."
    calls = [p for m in result.messages for p in getattr(m, "tool_calls", ())]
    assert [(c.name, c.args) for c in calls] == [("get_weather", {"city": "Oslo"})]


def test_a_providers_chat_model_is_blocked_in_tests_unless_it_is_local() -> None:
    from tether.errors import ProviderBlockedError
    from tether.testing import no_real_models

    class ChatProvider(WholeReplies):
        """Stands for a provider package's chat model (langchain_openai's ChatOpenAI)."""

        base_url: str | None = None

    ChatProvider.__module__ = "langchain_someprovider.chat_models"
    remote = ChatProvider(replies=[AIMessage(content="never")])
    local = ChatProvider(replies=[AIMessage(content="Local.")], base_url="http://127.0.0.1:8/v1")
    with no_real_models():
        with pytest.raises(ProviderBlockedError, match=r"LangChainModel\(ChatProvider"):
            create_agent(LangChainModel(remote, name="remote")).run("Hi")
        assert create_agent(LangChainModel(local, name="local")).run("Hi").output == "Local."
        mine = WholeReplies(replies=[AIMessage(content="Mine.")])  # written for the test
        assert create_agent(LangChainModel(mine, name="mine")).run("Hi").output == "Mine."


async def test_a_model_that_reports_no_usage_is_estimated_and_its_limits_hold() -> None:
    from tether import Limits
    from tether.errors import UsageEstimatedWarning

    looping = [
        AIMessage(
            content="",
            tool_calls=[{"name": "get_weather", "args": {"city": f"City {n}"}, "id": f"c{n}"}],
        )
        for n in range(50)
    ]
    model = LangChainModel(WholeReplies(replies=looping), name="quiet")
    agent = create_agent(
        model, tools=[get_weather], limits=Limits(max_total_tokens=20_000, loop_stop_after=None)
    )
    with pytest.warns(UsageEstimatedWarning, match="reports no token usage"):
        result = await agent.arun("Weather everywhere?")
    assert result.usage.input_tokens > 0
    assert result.usage.output_tokens > 0
    assert result.stop_reason == "budget"  # before the 50 replies ran out


async def test_langchain_tools_run_as_langchain_runs_a_tool_call() -> None:
    @lc_tool
    def whoami(context: str, tool_call_id: Annotated[str, InjectedToolCallId]) -> str:
        """Say which call this is."""
        return f"{context} in {tool_call_id}"

    @lc_tool(response_format="content_and_artifact")
    def fetch(url: str) -> tuple[str, dict[str, Any]]:
        """Fetch a page."""
        return f"fetched {url}", {"bytes": 1234}

    def explain(error: ToolException) -> str:
        return f"try again later ({error})"

    @lc_tool
    def flaky() -> str:
        """Fail the way tools report failure."""
        raise ToolException("the service is down")

    flaky.handle_tool_error = explain
    converted = tools_from_langchain([whoami, fetch, flaky])
    assert "tool_call_id" not in converted[0].parameters["properties"]  # injected, not asked
    chat = ScriptedChat(
        replies=[
            call_reply(
                ("c1", "whoami", '{"context": "hello"}'),
                ("c2", "fetch", '{"url": "https://example.com"}'),
                ("c3", "flaky", "{}"),
            ),
            text_reply("done"),
        ]
    )
    result = await create_agent(LangChainModel(chat), tools=converted).arun("Go.")
    answers = by_server_id(result.messages)
    assert answers["c1"].text == f"hello in {own_id(result.messages, 'c1')}"  # tether's id
    assert answers["c2"].text == "fetched https://example.com"
    assert answers["c3"].text == "try again later (the service is down)"


def _completion(message: dict[str, Any], finish: str) -> bytes:
    """A whole Chat Completions reply (no stream), as OpenAI's docs show it."""
    return json.dumps(
        {
            "id": "chatcmpl-123",
            "object": "chat.completion",
            "created": 1741569952,
            "model": "gpt-5.2",
            "choices": [{"index": 0, "message": message, "finish_reason": finish}],
            "usage": {"prompt_tokens": 40, "completion_tokens": 9, "total_tokens": 49},
        }
    ).encode()


WEATHER_CALL = {
    "id": "call_1",
    "type": "function",
    "function": {"name": "get_weather", "arguments": '{"city": "Oslo"}'},
}


@pytest.mark.parametrize("streaming", [True, False], ids=["streamed", "whole"])
def test_chat_openai_against_a_loopback_server(streaming: bool) -> None:
    """langchain-openai's ChatOpenAI, unchanged, speaking HTTP to a server on loopback
    (inside no_real_models, which lets a loopback base URL through)."""
    from langchain_openai import ChatOpenAI

    from tether.testing import no_real_models

    from .faults import Reply, serving
    from .test_openai import chat_stream

    if streaming:
        replies = [
            Reply(body=chat_stream(None, [("call_1", "get_weather", '{"city": "Oslo"}')]).content),
            Reply(body=chat_stream("Sunny, says the tool.").content),
        ]
    else:
        whole = {"content-type": "application/json"}
        replies = [
            Reply(
                body=_completion(
                    {"role": "assistant", "content": None, "tool_calls": [WEATHER_CALL]},
                    "tool_calls",
                ),
                headers=whole,
            ),
            Reply(
                body=_completion({"role": "assistant", "content": "Sunny, says the tool."}, "stop"),
                headers=whole,
            ),
        ]
    with serving(replies) as server, no_real_models():
        chat = ChatOpenAI(
            model="gpt-5.2",
            base_url=server.url + "/v1",
            api_key="sk-test",  # type: ignore[arg-type]
            max_retries=0,
            disable_streaming=not streaming,
        )
        result = create_agent(LangChainModel(chat), tools=[get_weather]).run("Oslo?")
    assert result.output == "Sunny, says the tool."
    first, second = server.requests
    assert first.get("stream", False) is streaming
    assert "get_weather" in [t["function"]["name"] for t in first["tools"]]
    (answer,) = [m for m in second["messages"] if m["role"] == "tool"]
    assert answer == {"role": "tool", "tool_call_id": "call_1", "content": "Sunny in Oslo"}
    assert result.usage.input_tokens == 80  # as the server reported it


def test_chat_openai_on_openais_url_is_blocked_in_tests() -> None:
    from langchain_openai import ChatOpenAI

    from tether.errors import ProviderBlockedError
    from tether.testing import no_real_models

    chat = ChatOpenAI(model="gpt-5.2", api_key="sk-test", max_retries=0)  # type: ignore[arg-type]
    with no_real_models(), pytest.raises(ProviderBlockedError, match=r"LangChainModel\(ChatOpenAI"):
        create_agent(LangChainModel(chat)).run("Hi")


async def test_a_broken_call_and_a_cut_one_keep_their_order_and_neither_runs() -> None:
    """LangChain reads a cut-off JSON leniently (as far as it got) and files a broken one
    apart: each keeps its raw text and its place, and the cut one is answered as cut."""
    ran: list[str] = []

    @tool
    def get_weather(city: str) -> str:
        """Current weather in a city."""
        ran.append(city)
        return f"Sunny in {city}"

    broken, cut = ("c1", "get_weather", '{"city": Oslo}'), ("c2", "get_weather", '{"city": "Ro')
    chat = ScriptedChat(
        replies=[call_reply(broken, cut, finish="max_tokens"), text_reply("Sorry.")]
    )
    result = await create_agent(LangChainModel(chat), tools=[get_weather]).arun("Weather?")
    assert ran == []
    calls = result.messages[1].tool_calls  # type: ignore[union-attr]
    assert [(c.provider_id, c.args) for c in calls] == [("c1", broken[2]), ("c2", cut[2])]
    assert all(r.is_error for r in result.messages[2].results)  # type: ignore[union-attr]
    assert "cut off" in by_server_id(result.messages)["c2"].text


async def test_a_reply_past_the_context_window_is_cut_off_too() -> None:
    chat = ScriptedChat(
        replies=[
            call_reply(
                ("c1", "get_weather", '{"city": "Oslo"}'), finish="model_context_window_exceeded"
            ),
            text_reply("Sorry."),
        ]
    )
    result = await create_agent(LangChainModel(chat), tools=[get_weather]).arun("Weather?")
    assert "cut off" in result.messages[2].results[0].text  # type: ignore[union-attr]


async def test_reasoning_content_streams_as_thinking_deltas() -> None:
    """Chat models that put reasoning in `additional_kwargs["reasoning_content"]` (as
    ChatDeepSeek, ChatGroq and community ones do) stream it as thinking."""
    chunks = [
        AIMessageChunk(content="", additional_kwargs={"reasoning_content": "Six "}),
        AIMessageChunk(content="", additional_kwargs={"reasoning_content": "times seven."}),
        *text_reply("42"),
    ]
    agent = create_agent(LangChainModel(ScriptedChat(replies=[chunks])))
    events = [e async for e in agent.stream("6*7?")]
    deltas = [(e.part, e.delta) for e in events if isinstance(e, ModelDelta)]
    assert deltas == [
        ("thinking", "Six "),
        ("thinking", "times seven."),
        ("text", "4"),
        ("text", "2"),
    ]


async def test_thinking_without_a_signature_or_id_is_not_sent_back() -> None:
    chunk = AIMessageChunk(
        content=[{"type": "reasoning", "reasoning": "Hmm."}, {"type": "text", "text": "Hi."}],
        response_metadata={"stop_reason": "end_turn"},
    )
    chat = ScriptedChat(replies=[[chunk], text_reply("Bye.")])
    agent = create_agent(LangChainModel(chat))
    first = await agent.arun("Hello")
    await agent.arun("Bye", message_history=first.messages)
    assert chat.seen[1][2].content == "Hi."  # as plain text: nothing the model needs back


PNG = b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR"
PNG64 = base64.b64encode(PNG).decode()


@pytest.mark.parametrize(
    "block",
    [
        {"type": "image", "base64": PNG64, "mime_type": "image/png"},
        {"type": "image", "source_type": "base64", "data": PNG64, "mime_type": "image/png"},
        {"type": "image_url", "image_url": {"url": f"data:image/png;base64,{PNG64}"}},
        {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": PNG64}},
        {"type": "image", "base64": PNG64},  # no media type: the bytes say it
    ],
    ids=["standard", "source_type", "image_url", "anthropic", "sniffed"],
)
async def test_an_image_a_langchain_tool_returns_reaches_the_model(block: dict[str, Any]) -> None:
    @lc_tool
    def snap() -> list[dict[str, Any]]:
        """Take a picture."""
        return [{"type": "text", "text": "Here:"}, block]

    chat = ScriptedChat(replies=[call_reply(("c1", "snap", "{}")), text_reply("A picture.")])
    result = await create_agent(LangChainModel(chat), tools=tools_from_langchain([snap])).arun("Go")
    answer = result.messages[2].results[0]  # type: ignore[union-attr]
    assert answer.content == (TextPart("Here:"), BinaryPart(PNG, "image/png"))
    sent = chat.seen[1][-1].content
    assert sent[1] == {"type": "image", "base64": PNG64, "mime_type": "image/png"}


async def test_images_in_a_tool_message_or_beside_an_artifact_are_kept() -> None:
    image = {"type": "image", "base64": PNG64, "mime_type": "image/png"}

    @lc_tool(response_format="content_and_artifact")
    def render(page: int) -> tuple[list[dict[str, Any]], dict[str, Any]]:
        """Render a page."""
        return [image], {"dpi": 300}

    @lc_tool
    def capture(tool_call_id: Annotated[str, InjectedToolCallId]) -> ToolMessage:
        """Capture the screen."""
        return ToolMessage(
            content=[{"type": "text", "text": "Screen:"}, image], tool_call_id=tool_call_id
        )

    chat = ScriptedChat(
        replies=[
            call_reply(("c1", "render", '{"page": 1}'), ("c2", "capture", "{}")),
            text_reply("ok"),
        ]
    )
    converted = tools_from_langchain([render, capture])
    result = await create_agent(LangChainModel(chat), tools=converted).arun("Go")
    answers = by_server_id(result.messages)
    assert answers["c1"].content == (BinaryPart(PNG, "image/png"),)  # the artifact stays out
    assert answers["c2"].content == (TextPart("Screen:"), BinaryPart(PNG, "image/png"))


@pytest.mark.parametrize(
    ("block", "shown"),
    [
        (
            {"type": "image", "url": "https://example.com/cat.png"},
            "[image: https://example.com/cat.png]",
        ),
        ({"type": "image", "base64": "not base64!", "mime_type": "image/png"}, "not valid"),
        ({"type": "file", "file_id": "file-abc"}, "[file: file-abc]"),
        ({"type": "image", "base64": base64.b64encode(b"\x00\x01").decode()}, "no media type"),
    ],
    ids=["url", "bad-base64", "file-id", "unknown-bytes"],
)
async def test_media_a_tool_gives_without_its_bytes_is_said_as_text(
    block: dict[str, Any], shown: str
) -> None:
    @lc_tool
    def snap() -> list[dict[str, Any]]:
        """Take a picture."""
        return [block]

    chat = ScriptedChat(replies=[call_reply(("c1", "snap", "{}")), text_reply("ok")])
    result = await create_agent(LangChainModel(chat), tools=tools_from_langchain([snap])).arun("Go")
    answer = result.messages[2].results[0]  # type: ignore[union-attr]
    assert not answer.is_error
    assert shown in answer.text


NAMES = [
    "hidden",
    "inject",
    "lc_tool",
    "arguments",
    "context",
    "call",
    "kwargs",
    "a-b",
    "__class__",
    "",
]


async def test_a_tool_argument_may_have_any_name() -> None:
    """No argument name collides with tether's own (before, `hidden` and `inject` raised
    "multiple values")."""
    from langchain_core.tools import StructuredTool

    def echo(**given: Any) -> str:
        return json.dumps(given, sort_keys=True)

    schema = {
        "type": "object",
        "properties": {name: {"type": "string"} for name in NAMES},
        "required": NAMES,
    }
    lc_echo = StructuredTool.from_function(
        echo, name="echo", description="Echo.", args_schema=schema
    )
    (converted,) = tools_from_langchain([lc_echo])
    args = {name: f"value of {name!r}" for name in NAMES}
    chat = ScriptedChat(replies=[call_reply(("c1", "echo", json.dumps(args))), text_reply("ok")])
    result = await create_agent(LangChainModel(chat), tools=[converted]).arun("Go")
    answer = result.messages[2].results[0]  # type: ignore[union-attr]
    assert not answer.is_error, answer.text
    assert json.loads(answer.text) == args


def test_the_one_argument_name_tether_keeps_is_refused_up_front() -> None:
    from langchain_core.tools import StructuredTool

    from tether.tools.tool import OPEN_CONTEXT

    schema = {"type": "object", "properties": {OPEN_CONTEXT: {"type": "string"}}}
    odd = StructuredTool.from_function(
        lambda **kw: "", name="odd", description="Odd.", args_schema=schema
    )
    with pytest.raises(ConfigurationError, match="reserves"):
        tools_from_langchain([odd])


class Failing(BaseChatModel):
    """A chat model whose request fails with `error`."""

    error: Any

    @property
    def _llm_type(self) -> str:
        return "failing"

    def bind_tools(self, tools: Sequence[Any], **kwargs: Any) -> Any:
        return self

    def _generate(
        self, messages: Any, stop: Any = None, run_manager: Any = None, **kwargs: Any
    ) -> ChatResult:
        raise self.error


class StatusError(Exception):
    """What provider SDKs raise for an HTTP error: a status code and the error body."""

    def __init__(self, status_code: int, body: Any = None) -> None:
        super().__init__(f"Error code: {status_code}")
        self.status_code = status_code
        self.body = body


@pytest.mark.parametrize(
    ("error", "transient"),
    [
        (StatusError(529, {"type": "error", "error": {"type": "overloaded_error"}}), True),
        (StatusError(503), True),
        (StatusError(429), True),
        (StatusError(400), False),
        (StatusError(401), False),
        (ConnectionRefusedError("refused"), True),
        (ValueError("the model's own bug"), False),
    ],
    ids=["529", "503", "429", "400", "401", "refused", "other"],
)
async def test_a_chat_models_failure_says_whether_it_may_pass(
    error: Exception, transient: bool
) -> None:
    model = LangChainModel(Failing(error=error), name="failing")
    with pytest.raises(ModelError) as caught:
        await create_agent(model).arun("Hi")
    assert caught.value.transient is transient


# Long replies and odd metadata ---------------------------------------------------------


async def test_a_long_streamed_call_is_added_up_once(monkeypatch: pytest.MonkeyPatch) -> None:
    """LangChain re-reads a call's arguments (its partial-JSON parse) on every sum of two
    chunks; the reply is added up once, as LangChain's own `astream` does, so the text
    parsed stays a few times the arguments' length rather than growing with its square."""
    from langchain_core.messages import ai

    pieces = ['{"content": "', *["abcdefghij"] * 500, '"}']
    chunks = [
        AIMessageChunk(
            content="",
            tool_call_chunks=[
                tool_call_chunk(
                    name=None if i else "save", args=piece, id=None if i else "c1", index=0
                )
            ],
        )
        for i, piece in enumerate(pieces)
    ]
    usage = {"input_tokens": 9, "output_tokens": 2000, "total_tokens": 2009}
    chunks.append(
        AIMessageChunk(
            content="", usage_metadata=usage, response_metadata={"stop_reason": "tool_use"}
        )
    )
    parsed: list[int] = []
    parse = ai.parse_partial_json

    def counted(s: str, *, strict: bool = False) -> Any:
        parsed.append(len(s))
        return parse(s, strict=strict)

    monkeypatch.setattr(ai, "parse_partial_json", counted)
    model = LangChainModel(ScriptedChat(replies=[chunks]))
    items = [item async for item in model.stream(ModelRequest("", (UserMessage.of("Save"),)))]
    response = items[-1]
    assert isinstance(response, ModelResponse)
    args = "".join(pieces)
    assert response.message.tool_calls[0].args == json.loads(args)
    assert "".join(d.delta for d in items[:-1]) == args  # every piece streamed as it came
    assert sum(parsed) <= 4 * len(args)  # a sum per chunk: some 250 times as much


@pytest.mark.parametrize(
    "odd",
    [7, {"x": 1}, ["gpt"], "", " ", "a\x00b\nc", "m" * 1000],
    ids=["int", "dict", "list", "empty", "blank", "control", "long"],
)
async def test_an_odd_model_name_or_id_from_the_server_is_ignored(odd: object) -> None:
    """A model name or reply id that is not a short printable string is dropped (it would
    reach prices and span attributes): the model's own name stands."""
    reply = text_reply("Hello")
    reply[-1] = AIMessageChunk(
        content=reply[-1].content,
        usage_metadata=reply[-1].usage_metadata,
        response_metadata={
            "stop_reason": "end_turn",
            "model_name": odd,
            "model": odd,
            "id": odd,
        },
    )
    model = LangChainModel(ScriptedChat(replies=[reply, text_reply("Again")]))
    result = await create_agent(model).arun("Hi")
    assert result.output == "Hello"
    assert result.messages[-1].model_name == "claude-sonnet-5-5"  # type: ignore[union-attr]
    response = await model.request(ModelRequest("", (UserMessage.of("Hi"),)))
    assert response.response_id is None
