"""BedrockModel against a loopback server speaking the Converse API's wire format: AWS
event-stream frames (length, headers, JSON payload, CRC32s), as boto3 reads them."""

from __future__ import annotations

import binascii
import json
import struct
from pathlib import Path
from typing import Any

import pytest

from tether import ModelHTTPError, create_agent, tool
from tether.errors import ModelError
from tether.messages import BinaryPart, TextPart, ThinkingPart, UserMessage
from tether.models import _sdk
from tether.models.bedrock import BedrockModel
from tether.profiles import profile_for as harness_profile_for
from tether.testing import no_real_models

from .faults import Reply, serving

CLAUDE = "us.anthropic.claude-sonnet-4-5-20250929-v1:0"
PATH = "/model/us.anthropic.claude-sonnet-4-5-20250929-v1%3A0/converse-stream"
STREAM = {"content-type": "application/vnd.amazon.eventstream", "x-amzn-requestid": "req-b1"}


def _header(name: str, value: str) -> bytes:
    raw = value.encode()
    return bytes([len(name)]) + name.encode() + b"\x07" + struct.pack(">H", len(raw)) + raw


def frame(event: str, payload: dict[str, Any], kind: str = "event") -> bytes:
    """One event-stream message: prelude and its CRC, headers, payload, message CRC."""
    if kind == "event":
        headers = _header(":event-type", event) + _header(":message-type", "event")
    else:
        headers = _header(":exception-type", event) + _header(":message-type", "exception")
    headers += _header(":content-type", "application/json")
    body = json.dumps(payload).encode()
    total = 12 + len(headers) + len(body) + 4
    prelude = struct.pack(">II", total, len(headers))
    message = prelude + struct.pack(">I", binascii.crc32(prelude)) + headers + body
    return message + struct.pack(">I", binascii.crc32(message))


def converse_stream(
    text: str | None = "Hello.",
    call: tuple[str, str, str] | None = None,
    *,
    thinking: tuple[str, str] | None = None,
    usage: dict[str, int] | None = None,
    stop: str | None = None,
) -> bytes:
    """A Converse stream: thinking, text (in two pieces) and a tool call, then the stop
    and the usage."""
    frames = [frame("messageStart", {"role": "assistant"})]
    index = 0
    if thinking is not None:
        reasoning, signature = thinking
        delta = {"reasoningContent": {"text": reasoning}}
        frames.append(frame("contentBlockDelta", {"contentBlockIndex": index, "delta": delta}))
        delta = {"reasoningContent": {"signature": signature}}
        frames.append(frame("contentBlockDelta", {"contentBlockIndex": index, "delta": delta}))
        frames.append(frame("contentBlockStop", {"contentBlockIndex": index}))
        index += 1
    if text is not None:
        half = len(text) // 2
        for piece in (text[:half], text[half:]):
            delta = {"text": piece}
            frames.append(frame("contentBlockDelta", {"contentBlockIndex": index, "delta": delta}))
        frames.append(frame("contentBlockStop", {"contentBlockIndex": index}))
        index += 1
    if call is not None:
        call_id, name, arguments = call
        start = {"toolUse": {"toolUseId": call_id, "name": name}}
        frames.append(frame("contentBlockStart", {"contentBlockIndex": index, "start": start}))
        half = len(arguments) // 2
        for piece in (arguments[:half], arguments[half:]):
            delta = {"toolUse": {"input": piece}}
            frames.append(frame("contentBlockDelta", {"contentBlockIndex": index, "delta": delta}))
        frames.append(frame("contentBlockStop", {"contentBlockIndex": index}))
    stop = stop or ("tool_use" if call else "end_turn")
    frames.append(frame("messageStop", {"stopReason": stop}))
    counts = usage or {"inputTokens": 25, "outputTokens": 7, "totalTokens": 32}
    frames.append(frame("metadata", {"usage": counts, "metrics": {"latencyMs": 120}}))
    return b"".join(frames)


def frame_end(body: bytes, offset: int) -> int:
    """Where the frame holding byte `offset` of `body` ends."""
    start = 0
    while True:
        (total,) = struct.unpack(">I", body[start : start + 4])
        if start + total > offset:
            return start + total
        start += total


def bedrock_error(status: int, message: str, kind: str = "api_error", **headers: str) -> Reply:
    """An error as Bedrock sends one: its type in a header, the message in the body."""
    codes = {
        "rate_limit_error": "ThrottlingException",
        "overloaded_error": "ServiceUnavailableException",
        "authentication_error": "UnrecognizedClientException",
        "api_error": "InternalServerException" if status >= 500 else "ValidationException",
    }
    return Reply(
        status,
        json.dumps({"message": message}).encode(),
        {
            "content-type": "application/json",
            "x-amzn-errortype": codes.get(kind, kind),
            "x-amzn-requestid": "req_fault",
            **headers,
        },
    )


def model(url: str, **options: Any) -> BedrockModel:
    keys = {"aws_access_key_id": "AKIDTEST", "aws_secret_access_key": "secret"}
    return BedrockModel(CLAUDE, region="us-east-1", base_url=url, **keys, **options)


@pytest.fixture(autouse=True)
def fast_backoff(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_sdk, "FIRST_BACKOFF_SECONDS", 0.01)


@tool
def note(text: str) -> str:
    """Save a note."""
    return f"saved {text}"


async def test_a_tool_round_trip_streams_and_is_priced(tmp_path: Path) -> None:
    call = ("tooluse_1", "note", '{"text": "hi"}')
    usage = {
        "inputTokens": 10,
        "outputTokens": 5,
        "cacheReadInputTokens": 100,
        "cacheWriteInputTokens": 20,
        "totalTokens": 135,
    }
    replies = [
        Reply(body=converse_stream("Noting.", call, usage=usage), headers=STREAM),
        Reply(body=converse_stream("Done."), headers=STREAM),
    ]
    with serving(replies, chunked=True) as server:
        agent = create_agent(model(server.url), tools=[note], system_prompt="Be brief.")
        events = [e async for e in agent.stream("Take a note")]
    result = events[-1].result  # type: ignore[union-attr]
    assert result.output == "Done."
    assert set(server.paths) == {PATH}
    first, second = server.requests
    assert first["system"] == [
        {"text": first["system"][0]["text"]},
        {"cachePoint": {"type": "default"}},
    ]
    assert "Be brief." in first["system"][0]["text"]
    [spec] = [
        t
        for t in first["toolConfig"]["tools"]
        if "toolSpec" in t and t["toolSpec"]["name"] == "note"
    ]
    assert spec["toolSpec"]["inputSchema"]["json"]["properties"]["text"]["type"] == "string"
    assert first["toolConfig"]["tools"][-1] == {"cachePoint": {"type": "default"}}
    assert first["messages"][-1]["content"][-1] == {"cachePoint": {"type": "default"}}
    assert first["inferenceConfig"]["maxTokens"] == 64_000
    answer = second["messages"][-1]["content"][0]["toolResult"]
    assert answer == {
        "toolUseId": "tooluse_1",
        "content": [{"text": "saved hi"}],
        "status": "success",
    }
    assert second["messages"][-2]["content"][-1]["toolUse"] == {
        "toolUseId": "tooluse_1",
        "name": "note",
        "input": {"text": "hi"},
    }
    deltas = [e.delta for e in events if e.kind == "model_delta" and e.part == "tool_call"]
    assert "".join(deltas) == '{"text": "hi"}'
    step = result.messages[1]
    assert step.usage.input_tokens == 130  # tether's count includes the cache's
    assert (step.usage.cache_read_tokens, step.usage.cache_write_tokens) == (100, 20)
    assert result.cost_usd  # genai-prices knows the model


async def test_thinking_is_kept_with_its_signature_and_sent_back(tmp_path: Path) -> None:
    replies = [
        Reply(
            body=converse_stream(None, ("t1", "note", "{}"), thinking=("hmm", "sig==")),
            headers=STREAM,
        ),
        Reply(body=converse_stream("ok"), headers=STREAM),
    ]
    with serving(replies, chunked=True) as server:
        result = await create_agent(model(server.url), tools=[note]).arun("Think.")
    [thought] = [p for p in result.messages[1].parts if isinstance(p, ThinkingPart)]
    assert (thought.text, thought.signature, thought.provider) == ("hmm", "sig==", "bedrock")
    sent = server.requests[1]["messages"][1]["content"][0]
    assert sent == {"reasoningContent": {"reasoningText": {"text": "hmm", "signature": "sig=="}}}


async def test_a_rate_limit_is_retried_and_a_refused_key_is_not(tmp_path: Path) -> None:
    limited = bedrock_error(429, "Too many requests, please wait", "rate_limit_error")
    replies = [limited, Reply(body=converse_stream("ok"), headers=STREAM)]
    with serving(replies, chunked=True) as server:
        assert (await create_agent(model(server.url)).arun("Hi")).output == "ok"
    assert len(server.requests) == 2

    replies = [limited, limited, Reply(body=converse_stream("ok"), headers=STREAM)]
    with serving(replies, chunked=True) as server, pytest.raises(ModelHTTPError, match="429"):
        await create_agent(model(server.url, max_retries=1)).arun("Hi")
    assert len(server.requests) == 2  # tether's one retry, and none of boto3's on top

    refused = bedrock_error(403, "The security token included in the request is invalid")
    with serving([refused], chunked=True) as server, pytest.raises(ModelHTTPError) as caught:
        await create_agent(model(server.url)).arun("Hi")
    assert caught.value.status_code == 403
    assert "refused the credentials (HTTP 403)" in str(caught.value)
    assert "AWS_PROFILE" in str(caught.value)
    assert "request id req_fault" in str(caught.value)
    assert len(server.requests) == 1


async def test_an_error_inside_the_stream_is_retried_only_before_the_reply(tmp_path: Path) -> None:
    throttled = frame("throttlingException", {"message": "slow down"}, kind="exception")
    replies = [
        Reply(body=frame("messageStart", {"role": "assistant"}) + throttled, headers=STREAM),
        Reply(body=converse_stream("ok"), headers=STREAM),
    ]
    with serving(replies, chunked=True) as server:
        assert (await create_agent(model(server.url)).arun("Hi")).output == "ok"
    assert len(server.requests) == 2

    late = converse_stream("an answer that breaks")
    late = late[: frame_end(late, late.index(b"an answer"))] + throttled
    with (
        serving([Reply(body=late, headers=STREAM)], chunked=True) as server,
        pytest.raises(ModelError, match="in the middle of its reply: slow down"),
    ):
        await create_agent(model(server.url)).arun("Hi")
    assert len(server.requests) == 1  # its first words were streamed: not sent again


async def test_a_stream_cut_inside_a_tool_call(tmp_path: Path) -> None:
    body = converse_stream(None, ("t1", "note", '{"text": "half a note"}'))
    cut = Reply(body=body, headers=STREAM, cut=body.index(b"alf a no") + 4)
    with (
        serving([cut], chunked=True) as server,
        pytest.raises(ModelError, match="the connection broke in the middle of the reply"),
    ):
        await create_agent(model(server.url), tools=[note]).arun("Hi")
    assert len(server.requests) == 1


async def test_images_and_documents_go_as_bytes_and_structured_output_is_forced() -> None:
    from pydantic import BaseModel

    class Verdict(BaseModel):
        ok: bool

    prompt = UserMessage(
        (
            TextPart("Look."),
            BinaryPart(b"\x89PNG....", "image/png"),
            BinaryPart(b"%PDF-1.7", "application/pdf"),
        )
    )
    replies = [
        Reply(body=converse_stream(None, ("o1", "final_result", '{"ok": true}')), headers=STREAM)
    ]
    with serving(replies, chunked=True) as server:
        agent = create_agent(model(server.url), output_type=Verdict, tools=[])
        result = await agent.arun(prompt)
    assert result.output == Verdict(ok=True)
    content = server.requests[0]["messages"][0]["content"]
    assert content[0] == {"text": "Look."}
    assert content[1]["image"]["format"] == "png"
    assert content[1]["image"]["source"]["bytes"] == "iVBORy4uLi4="  # base64 on the wire
    assert content[2]["document"]["format"] == "pdf"


def test_claude_on_bedrock_gets_claudes_limits_and_anthropics_harness() -> None:
    claude = BedrockModel(CLAUDE, region="us-east-1")
    assert claude.profile.supports_caching
    assert claude.profile.max_output_tokens == 64_000
    assert claude.family == "anthropic"
    assert "independent tool calls" in (harness_profile_for(claude).system_prompt_suffix or "")
    llama = BedrockModel("meta.llama3-3-70b-instruct-v1:0", region="us-east-1")
    assert llama.family == "meta"
    assert not llama.profile.supports_caching
    assert "cachePoint" not in json.dumps(
        llama.params(_request_of(llama)), default=str
    )  # no cache points where the model takes none


def _request_of(bedrock: BedrockModel) -> Any:
    from tether.models.base import ModelRequest

    return ModelRequest(messages=[UserMessage.of("Hi")], system_prompt="Be brief.")


async def test_no_real_models_blocks_aws_but_not_a_loopback_server() -> None:
    with no_real_models():
        with pytest.raises(Exception, match="real"):
            await create_agent(BedrockModel(CLAUDE, region="us-east-1")).arun("Hi")
        with serving([Reply(body=converse_stream("ok"), headers=STREAM)], chunked=True) as server:
            assert (await create_agent(model(server.url)).arun("Hi")).output == "ok"


# -- content filters: guardrails and the model's own ----------------------------------

GUARDRAIL_TRACE = {
    "guardrail": {
        "outputAssessments": {
            "gr-1": [
                {
                    "contentPolicy": {
                        "filters": [
                            {
                                "type": "VIOLENCE",
                                "confidence": "HIGH",
                                "action": "BLOCKED",
                                "detected": True,
                            }
                        ]
                    }
                }
            ]
        },
        "actionReason": "Guardrail blocked.",
    }
}


def filtered_stream(stop: str) -> bytes:
    """Text streamed, then the filter's stop; the metadata holds the guardrail's trace
    (as ConverseStream sends it with `guardrailConfig` tracing on)."""
    frames = [frame("messageStart", {"role": "assistant"})]
    for piece in ("First, sharpen", " the"):
        delta = {"contentBlockIndex": 0, "delta": {"text": piece}}
        frames.append(frame("contentBlockDelta", delta))
    frames.append(frame("contentBlockStop", {"contentBlockIndex": 0}))
    frames.append(frame("messageStop", {"stopReason": stop}))
    usage = {"inputTokens": 30, "outputTokens": 4, "totalTokens": 34}
    metadata = {"usage": usage, "metrics": {"latencyMs": 90}, "trace": GUARDRAIL_TRACE}
    frames.append(frame("metadata", metadata))
    return b"".join(frames)


async def test_a_guardrail_or_filter_stop_reaches_the_loop_as_content_filter() -> None:
    from tether.models import StreamDelta

    stops = ["guardrail_intervened", "content_filtered"]
    replies = [Reply(body=filtered_stream(stop), headers=STREAM) for stop in stops]
    with serving(replies, chunked=True) as server:
        bedrock = model(server.url, max_retries=0)
        for stop in stops:
            *deltas, response = [item async for item in bedrock.stream(_request_of(bedrock))]
            assert [d.delta for d in deltas if isinstance(d, StreamDelta)] == [
                "First, sharpen",
                " the",
            ]
            assert response.finish_reason == "content_filter", stop
            assert response.message.text == "First, sharpen the"  # the cut text stays
            assert response.usage.input_tokens == 30
            assert response.response_id == "req-b1"


async def test_a_guardrail_ends_the_run_with_content_filter_and_keeps_the_text() -> None:
    from tether import ContentFilterError

    reply = Reply(body=filtered_stream("guardrail_intervened"), headers=STREAM)
    with serving([reply], chunked=True) as server, pytest.raises(ContentFilterError) as caught:
        await create_agent(model(server.url)).arun("How?")
    result = caught.value.result
    assert result is not None
    assert result.stop_reason == "content_filter"
    assert result.output is None
    assert result.messages[-1].text == "First, sharpen the"
    assert len(server.requests) == 1


def test_documents_have_names_unique_in_the_whole_request() -> None:
    """Bedrock refuses a request whose messages hold two documents of one name ("Messages
    can't contain duplicate document names"), and every turn resends the history."""
    from tether.messages import AssistantMessage, ToolCall, ToolResult, ToolResultMessage
    from tether.models.base import ModelRequest

    pdf = BinaryPart(b"%PDF-1.7", "application/pdf")
    call = ToolCall("read_file", {"file_path": "/b.pdf"}, "c1")
    history = (
        UserMessage((TextPart("Compare a.pdf"), pdf)),
        AssistantMessage((call,)),
        ToolResultMessage((ToolResult("c1", "read_file", (TextPart("b.pdf:"), pdf)),)),
        UserMessage((TextPart("and c.pdf"), pdf, pdf)),
    )
    bedrock = BedrockModel(CLAUDE, region="us-east-1")
    sent = bedrock.params(ModelRequest("", history))["messages"]
    names = [document["name"] for document in _documents(sent)]
    assert len(names) == 4  # two in user turns, one in a tool's result, one more
    assert len(set(names)) == 4, names


def _documents(value: Any) -> list[dict[str, Any]]:
    """Every document block anywhere in `value`."""
    if isinstance(value, dict):
        found = [value["document"]] if "document" in value else []
        return found + [d for v in value.values() for d in _documents(v)]
    if isinstance(value, list):
        return [d for v in value for d in _documents(v)]
    return []


async def test_a_malformed_tool_use_or_output_is_a_malformed_call() -> None:
    from tether.models import response_of

    stops = ["malformed_tool_use", "malformed_model_output"]
    replies = [Reply(body=converse_stream("Saving.", stop=stop), headers=STREAM) for stop in stops]
    with serving(replies, chunked=True) as server:
        bedrock = model(server.url, max_retries=0)
        for stop in stops:
            response = await response_of(bedrock.stream(_request_of(bedrock)))
            assert response.finish_reason == "malformed_call", stop
            assert response.message.text == "Saving."
