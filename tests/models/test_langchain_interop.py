"""LangChainModel and tools_from_langchain with the real provider packages
(`langchain-anthropic`, `langchain-openai`, `langchain-community`), unchanged, speaking
HTTP to a loopback server that answers in the provider's own wire format."""

from __future__ import annotations

import asyncio
import base64
import json
from pathlib import Path
from typing import Any

import pytest
from langchain_anthropic import ChatAnthropic
from langchain_core.tools import tool as lc_tool
from langchain_openai import ChatOpenAI

from tether import ModelHTTPError, create_agent, tool
from tether.errors import ProviderBlockedError, UsageEstimatedWarning
from tether.events import ModelDelta, RunFinished
from tether.messages import (
    AssistantMessage,
    BinaryPart,
    TextPart,
    ThinkingPart,
    ToolCall,
    ToolResult,
    ToolResultMessage,
    UserMessage,
)
from tether.models.base import ModelRequest
from tether.models.fallback import FallbackModel
from tether.models.langchain import LangChainModel, tools_from_langchain
from tether.testing import no_real_models

from .lc_wire import (
    CLAUDE,
    Answer,
    ClaudeWithThinking,
    Loopback,
    chat_stream,
    claude_error_event,
    claude_events,
    claude_stream,
    responses_stream,
    serving,
    sse,
)

THINKING = {"type": "enabled", "budget_tokens": 1024}
THOUGHT = {
    "type": "thinking",
    "thinking": "The user wants the weather in Oslo; get_weather has it.",
    "signature": "EqQBCkgIBxABGAIiQL0K9thinkingSignatureFromTheServer==",
}
REDACTED = {
    "type": "redacted_thinking",
    "data": "EmwKAhgBEgy3va3pzix/LafPsn4aDFIT2Xlxh0L5L8rLVyIwxtE3rAFBa8cr3qpP",
}
CALL = {"type": "tool_use", "id": "toolu_01A09q90qw90lq917835lq9", "name": "get_weather"}
PNG = b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR\x00\x00\x00\x01\x00\x00\x00\x01\x08\x06\x00\x00\x00"


@tool
def get_weather(city: str) -> str:
    """Current weather in a city."""
    return f"Sunny in {city}"


def claude(server: Loopback, **options: Any) -> ChatAnthropic:
    return ChatAnthropic(  # type: ignore[call-arg]
        model=CLAUDE,
        anthropic_api_url=server.url,
        anthropic_api_key="sk-ant-test",
        max_retries=0,
        **options,
    )


def gpt(server: Loopback, **options: Any) -> ChatOpenAI:
    return ChatOpenAI(
        model="gpt-5.2",
        base_url=server.url + "/v1",
        api_key="sk-test",  # type: ignore[arg-type]
        max_retries=0,
        **options,
    )


# Thinking ------------------------------------------------------------------------------


def test_chat_anthropic_gets_its_thinking_back_exactly_with_the_tool_result() -> None:
    first = [
        THOUGHT,
        REDACTED,
        {"type": "text", "text": "Let me check."},
        {**CALL, "json": '{"city": "Oslo"}'},
    ]
    api = ClaudeWithThinking([first, [{"type": "text", "text": "Sunny in Oslo."}]])
    with Loopback(api) as server:
        model = LangChainModel(claude(server, thinking=THINKING, max_tokens=4096))
        result = create_agent(model, tools=[get_weather]).run("Weather in Oslo?")

    assert result.output == "Sunny in Oslo."  # the server took step 2
    turn = result.messages[1]
    assert isinstance(turn, AssistantMessage)
    assert turn.parts[:2] == (
        ThinkingPart(THOUGHT["thinking"], THOUGHT["signature"], "anthropic"),
        ThinkingPart("", REDACTED["data"], "anthropic", redacted=True),
    )
    sent = server.requests[1]["messages"][1]
    assert sent == {
        "role": "assistant",
        "content": [
            THOUGHT,
            REDACTED,
            {"type": "text", "text": "Let me check."},
            {"type": "tool_use", **{k: CALL[k] for k in ("id", "name")}, "input": {"city": "Oslo"}},
        ],
    }


async def test_the_server_refuses_a_turn_whose_thinking_is_not_its_own() -> None:
    """The loopback server checks as Anthropic does: thinking from another provider is not
    sent (so the turn lacks its thinking), and a changed signature does not pass."""
    api = ClaudeWithThinking([])
    api.issued[CALL["id"]] = [THOUGHT]
    call = ToolCall("get_weather", {"city": "Oslo"}, CALL["id"])  # as the loop sends it
    answer = ToolResultMessage((ToolResult(CALL["id"], "get_weather", (TextPart("Sunny"),)),))

    def history(thinking: ThinkingPart) -> tuple[Any, ...]:
        return (UserMessage.of("Weather?"), AssistantMessage((thinking, call)), answer)

    other = ThinkingPart(THOUGHT["thinking"], THOUGHT["signature"], provider="bedrock")
    forged = ThinkingPart(THOUGHT["thinking"], "EqQBforged==", provider="anthropic")
    with Loopback(api) as server:
        model = LangChainModel(claude(server, thinking=THINKING, max_tokens=4096))
        for thinking, refusal in [
            (other, "must start with a thinking block"),
            (forged, "signature"),
        ]:
            with pytest.raises(ModelHTTPError, match=refusal) as caught:
                await model.request(ModelRequest("", history(thinking)))
            assert caught.value.status_code == 400
    assert [m["content"][0]["type"] for r in server.requests for m in r["messages"][1:2]] == [
        "tool_use",
        "thinking",
    ]


async def test_chat_anthropic_thinking_streams_as_thinking_deltas() -> None:
    first = [
        THOUGHT,
        {"type": "text", "text": "Let me check."},
        {**CALL, "json": '{"city": "Oslo"}'},
    ]
    api = ClaudeWithThinking([first, [{"type": "text", "text": "Sunny."}]])
    with Loopback(api) as server:
        agent = create_agent(LangChainModel(claude(server, thinking=THINKING)), tools=[get_weather])
        events = [e async for e in agent.stream("Weather?")]
    deltas = [(e.part, e.delta) for e in events if isinstance(e, ModelDelta)]
    thinking = [d for part, d in deltas if part == "thinking"]
    assert len(thinking) == 3  # as the three thinking_delta events arrived
    assert "".join(thinking) == THOUGHT["thinking"]
    assert [part for part, _ in deltas][:4] == ["thinking", "thinking", "thinking", "text"]


def test_chat_openai_reasoning_summaries_stream_as_thinking_and_go_back_by_id(
    tmp_path: Path,
) -> None:
    summaries = ["Looking at **the weather**.", "Oslo is in Norway."]
    replies = [responses_stream(summaries, "Sunny."), responses_stream([], "Still sunny.")]
    with serving(replies) as server:
        chat = gpt(server, use_responses_api=True, reasoning={"effort": "low", "summary": "auto"})
        agent = create_agent(
            LangChainModel(chat),
            system_prompt="Be brief.",
            checkpointer=f"sqlite:///{tmp_path}/runs.db",
        )

        async def first_turn() -> list[Any]:
            return [e async for e in agent.stream("Weather?", thread_id="t")]

        events = asyncio.run(first_turn())
        agent.run("And now?", thread_id="t")
    thinking = [e.delta for e in events if isinstance(e, ModelDelta) and e.part == "thinking"]
    assert len(thinking) == 6  # as the summary deltas arrived
    assert "".join(thinking) == "".join(summaries)
    (finished,) = [e for e in events if isinstance(e, RunFinished)]
    reply = finished.result.messages[-1]
    assert reply.parts[0] == ThinkingPart(summaries[0], None, "openai", "rs_1")
    sent_back = [i for i in server.requests[1]["input"] if i.get("type") == "reasoning"]
    summary = [{"type": "summary_text", "text": s} for s in summaries]
    assert sent_back == [{"id": "rs_1", "type": "reasoning", "summary": summary}]


# Errors inside a stream ----------------------------------------------------------------


def _claude_failing(kind: str, *, after_text: bool = False) -> Answer:
    """A stream that starts, maybe says something, then reports `kind` as an error event."""
    start = claude_events([{"type": "text", "text": "Partly"}] if after_text else [])
    cut = start[:-2] if after_text else start[:2]  # up to the text, or message_start and ping
    return Answer(sse([*cut, claude_error_event(kind, "Overloaded")]))


@pytest.mark.parametrize(
    ("kind", "status", "transient"),
    [
        ("overloaded_error", 529, True),
        ("rate_limit_error", 429, True),
        ("api_error", 500, True),
        ("invalid_request_error", 400, False),
    ],
)
def test_an_error_event_in_a_claude_stream_is_the_http_error_it_stands_for(
    kind: str, status: int, transient: bool
) -> None:
    with serving([_claude_failing(kind)]) as server, pytest.raises(ModelHTTPError) as caught:
        create_agent(LangChainModel(claude(server))).run("Hi")
    assert (caught.value.status_code, caught.value.transient) == (status, transient)
    assert kind in str(caught.value)


def test_an_error_in_a_chat_completions_stream_is_a_server_error() -> None:
    failing = sse(
        [
            (
                None,
                {
                    "error": {
                        "message": "The server had an error",
                        "type": "server_error",
                        "param": None,
                        "code": None,
                    }
                },
            ),
        ]
    )
    with serving([Answer(failing)]) as server, pytest.raises(ModelHTTPError) as caught:
        create_agent(LangChainModel(gpt(server))).run("Hi")
    assert (caught.value.status_code, caught.value.transient) == (500, True)


@pytest.mark.parametrize("where", ["in the stream", "as the HTTP status"])
def test_fallback_model_moves_on_when_claude_is_overloaded(where: str) -> None:
    from .lc_wire import error_answer

    overloaded = (
        _claude_failing("overloaded_error")
        if where == "in the stream"
        else error_answer(529, "overloaded_error", "Overloaded")
    )
    with (
        serving([overloaded]) as anthropic_server,
        serving([chat_stream("Sunny.")]) as openai_server,
    ):
        model = FallbackModel(
            [LangChainModel(claude(anthropic_server)), LangChainModel(gpt(openai_server))]
        )
        result = create_agent(model).run("Weather?")
    assert result.output == "Sunny."
    assert result.messages[-1].model_name == "gpt-5.2"  # type: ignore[union-attr]
    assert len(anthropic_server.requests) == len(openai_server.requests) == 1


def test_a_reply_that_broke_off_after_its_text_streamed_is_not_sent_elsewhere() -> None:
    failing = _claude_failing("overloaded_error", after_text=True)
    with serving([failing]) as anthropic_server, serving([chat_stream("Sunny.")]) as openai_server:
        model = FallbackModel(
            [LangChainModel(claude(anthropic_server)), LangChainModel(gpt(openai_server))]
        )
        with pytest.raises(ModelHTTPError) as caught:
            create_agent(model).run("Weather?")
    assert (caught.value.status_code, caught.value.transient) == (529, False)
    assert openai_server.requests == []


# Cut-off tool calls ------------------------------------------------------------------


def _count_runs() -> tuple[Any, list[str]]:
    ran: list[str] = []

    @tool
    def get_weather(city: str) -> str:
        """Current weather in a city."""
        ran.append(city)
        return f"Sunny in {city}"

    return get_weather, ran


@pytest.mark.parametrize("streaming", [True, False], ids=["streamed", "whole"])
def test_a_claude_call_cut_by_max_tokens_never_runs(streaming: bool) -> None:
    weather, ran = _count_runs()
    blocks = [{"type": "text", "text": "Checking."}, {**CALL, "json": '{"city": "Os'}]
    if streaming:
        cut = claude_stream(blocks, stop_reason="max_tokens")
    else:  # whatever input the cut block holds (here a valid-looking prefix), it is cut
        whole = {
            "id": "msg_01Cut",
            "type": "message",
            "role": "assistant",
            "model": CLAUDE,
            "content": [blocks[0], {**{k: CALL[k] for k in CALL}, "input": {"city": "Os"}}],
            "stop_reason": "max_tokens",
            "stop_sequence": None,
            "usage": {"input_tokens": 30, "output_tokens": 12},
        }
        cut = Answer(json.dumps(whole).encode(), content_type="application/json")
    final = claude_stream([{"type": "text", "text": "Sorry."}])
    if not streaming:
        final = Answer(
            json.dumps(
                {
                    **whole,
                    "content": [{"type": "text", "text": "Sorry."}],
                    "stop_reason": "end_turn",
                }
            ).encode(),
            content_type="application/json",
        )
    with serving([cut, final]) as server:
        chat = claude(server, disable_streaming=not streaming)
        result = create_agent(LangChainModel(chat), tools=[weather]).run("Weather?")
    assert ran == []
    (answer,) = result.messages[2].results  # type: ignore[union-attr]
    assert answer.is_error
    assert "cut off" in answer.text


def test_a_chat_completions_stream_that_ends_mid_call_is_cut_off() -> None:
    """The server closes the stream in the middle of a call's arguments, with no finish
    reason and no [DONE]: the call is cut off, not run as far as it got."""
    weather, ran = _count_runs()
    whole = chat_stream(None, [("call_1", "get_weather", '{"city": "Oslo"}')]).body
    events = whole.split(b"\n\n")
    broken = b"\n\n".join(events[:3]) + b"\n\n"  # role, name, the first piece of arguments
    with (
        serving([Answer(broken), chat_stream("Sorry.")]) as server,
        pytest.warns(UsageEstimatedWarning),  # the usage chunk never came
    ):
        result = create_agent(LangChainModel(gpt(server)), tools=[weather]).run("Weather?")
    assert ran == []
    call = result.messages[1].tool_calls[0]  # type: ignore[union-attr]
    assert isinstance(call.args, str)
    assert not call.args.endswith("}")
    assert "cut off" in result.messages[2].results[0].text  # type: ignore[union-attr]


# Tool results with images ------------------------------------------------------------


def test_an_image_from_a_langchain_tool_reaches_claude() -> None:
    @lc_tool
    def screenshot(url: str) -> list[dict[str, Any]]:
        """Take a screenshot of a page."""
        encoded = base64.b64encode(PNG).decode()
        return [
            {"type": "text", "text": f"{url}:"},
            {"type": "image", "base64": encoded, "mime_type": "image/png"},
        ]

    first = [{**CALL, "name": "screenshot", "json": '{"url": "https://example.com"}'}]
    with serving(
        [
            claude_stream(first, stop_reason="tool_use"),
            claude_stream([{"type": "text", "text": "A page."}]),
        ]
    ) as server:
        result = create_agent(
            LangChainModel(claude(server)), tools=tools_from_langchain([screenshot])
        ).run("Look.")
    (answer,) = result.messages[2].results  # type: ignore[union-attr]
    assert answer.content == (TextPart("https://example.com:"), BinaryPart(PNG, "image/png"))
    (tool_result,) = server.requests[1]["messages"][2]["content"]
    assert tool_result["type"] == "tool_result"
    assert {
        "type": "image",
        "source": {
            "type": "base64",
            "media_type": "image/png",
            "data": base64.b64encode(PNG).decode(),
        },
    } in tool_result["content"]


# Usage -----------------------------------------------------------------------------------


def test_a_chat_openai_stream_without_usage_is_estimated_and_said() -> None:
    with (
        serving([chat_stream("Hello.", usage=False)]) as server,
        pytest.warns(UsageEstimatedWarning, match="reports no token usage"),
    ):
        result = create_agent(LangChainModel(gpt(server))).run("Hi")
    assert result.usage.input_tokens > 0
    assert result.usage.output_tokens > 0


# langchain-community -------------------------------------------------------------------


@pytest.mark.filterwarnings("ignore:`langchain-community` is being sunset:DeprecationWarning")
def test_a_community_chat_model_calls_tools_with_its_usage_estimated() -> None:
    """langchain-community's ChatDeepInfra (an OpenAI-compatible API over aiohttp, replies
    given whole): let through at a loopback `url`, blocked at its provider's, and its
    usage (which it does not report to LangChain) estimated and said."""
    from langchain_community.chat_models import ChatDeepInfra

    def completion(message: dict[str, Any], finish: str) -> Answer:
        choice = {"index": 0, "message": {"role": "assistant", **message}, "finish_reason": finish}
        body = {"id": "c1", "object": "chat.completion", "model": "llama", "choices": [choice]}
        return Answer(json.dumps(body).encode(), content_type="application/json")

    call = {
        "id": "call_1",
        "type": "function",
        "function": {"name": "get_weather", "arguments": '{"city": "Oslo"}'},
    }
    replies = [
        completion({"content": "", "tool_calls": [call]}, "tool_calls"),
        completion({"content": "Sunny, says the tool."}, "stop"),
    ]
    with serving(replies) as server, no_real_models():
        chat = ChatDeepInfra(
            url=server.url + "/v1/openai/chat/completions",
            deepinfra_api_token="t",
            disable_streaming=True,
        )
        with pytest.warns(UsageEstimatedWarning, match="reports no token usage"):
            result = create_agent(LangChainModel(chat, name="llama"), tools=[get_weather]).run(
                "Oslo?"
            )
        remote = ChatDeepInfra(deepinfra_api_token="t", disable_streaming=True)
        with pytest.raises(ProviderBlockedError):
            create_agent(LangChainModel(remote, name="llama")).run("Hi")
    assert result.output == "Sunny, says the tool."
    assert result.usage.input_tokens > 0
    assert result.usage.output_tokens > 0
    (answer,) = [m for m in server.requests[1]["messages"] if m["role"] == "tool"]
    assert (answer["tool_call_id"], answer["content"]) == ("call_1", "Sunny in Oslo")


@pytest.mark.filterwarnings("ignore:`langchain-community` is being sunset:DeprecationWarning")
def test_a_community_tool_runs_through_tools_from_langchain(tmp_path: Path) -> None:
    from langchain_community.tools.file_management import ReadFileTool

    (tmp_path / "notes.txt").write_text("remember the milk")
    (read,) = tools_from_langchain([ReadFileTool(root_dir=str(tmp_path), name="read_notes")])
    call = ("call_1", read.name, json.dumps({"file_path": "notes.txt"}))
    with serving([chat_stream(None, [call]), chat_stream("Milk.")]) as server:
        result = create_agent(LangChainModel(gpt(server)), tools=[read]).run("Notes?")
    assert result.messages[2].results[0].text == "remember the milk"  # type: ignore[union-attr]
    (answer,) = [m for m in server.requests[1]["messages"] if m["role"] == "tool"]
    assert answer["content"] == "remember the milk"


# Long calls, odd metadata, cut-off text ---------------------------------------------------


def test_a_long_chat_openai_call_takes_work_in_proportion(monkeypatch: pytest.MonkeyPatch) -> None:
    """A write of a few KB arrives as hundreds of argument chunks: LangChain parses a
    call's arguments on every sum of chunks, so the reply is added up once; the text
    parsed stays a few times the arguments' length (one sum per chunk: its square)."""
    from langchain_core.messages import ai

    from .lc_wire import chat_chunk

    saved: list[int] = []

    @tool
    def save_blob(content: str) -> str:
        """Save a blob."""
        saved.append(len(content))
        return "saved"

    head = {"index": 0, "id": "call_1", "type": "function"}
    pieces = ['{"content": "', *["abcdefghij"] * 400, '"}']
    chunks = [chat_chunk({"role": "assistant", "content": None})]
    chunks.append(
        chat_chunk({"tool_calls": [{**head, "function": {"name": "save_blob", "arguments": ""}}]})
    )
    chunks += [
        chat_chunk({"tool_calls": [{"index": 0, "function": {"arguments": p}}]}) for p in pieces
    ]
    chunks.append(chat_chunk({}, "tool_calls"))
    counted = {"prompt_tokens": 40, "completion_tokens": 1200, "total_tokens": 1240}
    chunks.append({**chat_chunk({}), "choices": [], "usage": counted})
    long_call = Answer(sse([*((None, c) for c in chunks), (None, "[DONE]")]))
    parsed: list[int] = []
    parse = ai.parse_partial_json

    def counting(s: str, *, strict: bool = False) -> Any:
        parsed.append(len(s))
        return parse(s, strict=strict)

    monkeypatch.setattr(ai, "parse_partial_json", counting)
    with serving([long_call, chat_stream("Saved.")]) as server:
        result = create_agent(LangChainModel(gpt(server)), tools=[save_blob]).run("Save it")
    assert result.output == "Saved."
    assert saved == [4000]
    arguments = len("".join(pieces))
    assert sum(parsed) <= 4 * arguments  # a sum per chunk: some 200 times as much


@pytest.mark.filterwarnings("ignore:Pydantic serializer warnings:UserWarning")  # the SDK's
@pytest.mark.parametrize("odd", [7, {"x": 1}, "", "gpt\x00"], ids=["int", "dict", "empty", "nul"])
def test_an_odd_model_name_from_a_compatible_server_is_ignored(odd: object) -> None:
    """A server's chunks that name the model with a number or an object: the run goes on
    under the name the chat model was given (prices and spans get a real name)."""
    from .lc_wire import chat_chunk

    chunks = [
        {**chat_chunk({"role": "assistant", "content": "Hello."}), "model": odd},
        {**chat_chunk({}, "stop"), "model": odd},
    ]
    reply = Answer(sse([*((None, c) for c in chunks), (None, "[DONE]")]))
    with serving([reply]) as server, pytest.warns(UsageEstimatedWarning):
        result = create_agent(LangChainModel(gpt(server))).run("Hi")
    assert result.output == "Hello."
    assert result.messages[-1].model_name == "gpt-5.2"  # type: ignore[union-attr]


def _whole(body: dict[str, Any]) -> Answer:
    return Answer(json.dumps(body).encode(), content_type="application/json")


CUT_TEXT = "The steps are: 1. open the"
CUT_REPLIES = {
    "chat-completions-streamed": (chat_stream(CUT_TEXT, finish="length"), "gpt", {}),
    "chat-completions-whole": (
        _whole(
            {
                "id": "chatcmpl-1",
                "object": "chat.completion",
                "created": 1741569952,
                "model": "gpt-5.2",
                "choices": [
                    {
                        "index": 0,
                        "message": {"role": "assistant", "content": CUT_TEXT},
                        "finish_reason": "length",
                    }
                ],
                "usage": {"prompt_tokens": 40, "completion_tokens": 9, "total_tokens": 49},
            }
        ),
        "gpt",
        {"disable_streaming": True},
    ),
    "responses": (
        responses_stream(["Plan."], CUT_TEXT, incomplete="max_output_tokens"),
        "gpt",
        {"use_responses_api": True},
    ),
    "messages-streamed": (
        claude_stream([{"type": "text", "text": CUT_TEXT}], stop_reason="max_tokens"),
        "claude",
        {},
    ),
    "messages-whole": (
        _whole(
            {
                "id": "msg_01Cut",
                "type": "message",
                "role": "assistant",
                "model": CLAUDE,
                "content": [{"type": "text", "text": CUT_TEXT}],
                "stop_reason": "max_tokens",
                "stop_sequence": None,
                "usage": {"input_tokens": 30, "output_tokens": 12},
            }
        ),
        "claude",
        {"disable_streaming": True},
    ),
}


@pytest.mark.parametrize("wire", list(CUT_REPLIES))
async def test_a_text_reply_cut_by_the_output_limit_finishes_as_length(wire: str) -> None:
    """ChatOpenAI's `length` (and the Responses API's incomplete max_output_tokens) and
    ChatAnthropic's `max_tokens` on a plain text reply are "length", which the loop
    refuses as an answer."""
    answer, which, options = CUT_REPLIES[wire]
    with serving([answer]) as server:
        chat = gpt(server, **options) if which == "gpt" else claude(server, **options)
        response = await LangChainModel(chat).request(ModelRequest("", (UserMessage.of("How?"),)))
    assert response.finish_reason == "length"
    assert response.message.text == CUT_TEXT
    assert not response.message.tool_calls
