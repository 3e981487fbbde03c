"""GoogleModel (Gemini through google-genai) against a real loopback server that speaks
the Gemini API's event stream; its faults are played in test_faults.py."""

from __future__ import annotations

import base64
import json
from typing import Any

import pytest

from tether import ConfigurationError, create_agent, tool
from tether.messages import BinaryPart, ThinkingPart, UserMessage
from tether.models.google import GoogleModel

from .faults import Reply, serving
from .wire import sse

USAGE = {
    "promptTokenCount": 40,
    "candidatesTokenCount": 9,
    "thoughtsTokenCount": 3,
    "cachedContentTokenCount": 10,
    "totalTokenCount": 52,
}


def chunk(parts: list[dict[str, Any]], finish: str | None = None) -> tuple[None, dict[str, Any]]:
    body: dict[str, Any] = {
        "candidates": [{"content": {"role": "model", "parts": parts}, "index": 0}],
        "modelVersion": "gemini-2.5-flash",
        "responseId": "resp-gemini-1",
    }
    if finish:
        body["candidates"][0]["finishReason"] = finish
        body["usageMetadata"] = USAGE
    return None, body


def gemini_stream(
    text: str | None, call: tuple[str, str, str] | None = None, *, signature: bytes = b""
) -> bytes:
    """What streamGenerateContent sends: text in pieces, or one whole function call."""
    if call is not None:
        call_id, name, args = call
        try:
            arguments = json.loads(args)
        except ValueError:  # a broken argument string: the JSON itself is sent broken
            head = json.dumps({"id": call_id, "name": name})[:-1]  # the object left open
            raw = f'{{"functionCall": {head}, "args": {args}}}}}'
            return f'data: {{"candidates": [{{"content": {{"parts": [{raw}]}}}}]}}\n\n'.encode()
        part: dict[str, Any] = {"functionCall": {"id": call_id, "name": name, "args": arguments}}
        if signature:
            part["thoughtSignature"] = base64.b64encode(signature).decode()
        return sse([chunk([part], "STOP")])
    assert text is not None
    middle = len(text) // 2
    return sse([chunk([{"text": text[:middle]}]), chunk([{"text": text[middle:]}], "STOP")])


@tool
def note(text: str) -> str:
    """Save a note."""
    return f"saved {text}"


def test_a_tool_round_trip_with_thinking_signatures_sent_back() -> None:
    thinking = sse([chunk([{"text": "Let me note it.", "thought": True}])])
    call = gemini_stream(None, ("g1", "note", '{"text": "hi"}'), signature=b"sig-1")
    replies = [
        Reply(body=thinking[:-0] + call if False else thinking + call),
        Reply(body=gemini_stream("Noted.")),
    ]
    with serving(replies) as server:
        model = GoogleModel("gemini-2.5-flash", api_key="k", base_url=server.url, max_retries=0)
        result = create_agent(model, tools=[note]).run("Note hi.")
    assert result.output == "Noted."
    assert result.usage.input_tokens == 80
    assert result.usage.output_tokens == 24  # thinking tokens count as output
    assert result.usage.cache_read_tokens == 20
    assert result.cost_usd is not None  # genai-prices knows Gemini
    first = result.messages[1]
    assert [type(p).__name__ for p in first.parts] == ["ThinkingPart", "ThinkingPart", "ToolCall"]  # type: ignore[union-attr]
    assert first.parts[0] == ThinkingPart("Let me note it.", None, "google")  # type: ignore[union-attr]
    sent = server.requests[1]["contents"]
    assert sent[1]["role"] == "model"
    (echoed,) = sent[1]["parts"]  # the call with its signature; the thinking text stays
    assert echoed["thoughtSignature"] == base64.b64encode(b"sig-1").decode()
    assert echoed["functionCall"] == {"id": "g1", "name": "note", "args": {"text": "hi"}}
    assert sent[2]["parts"][0]["functionResponse"]["response"] == {"result": "saved hi"}
    tools = server.requests[0]["tools"][0]["functionDeclarations"]
    assert "note" in [t["name"] for t in tools]
    assert "automaticFunctionCalling" not in json.dumps(server.requests[0])


def test_images_and_a_forced_answer() -> None:
    from pydantic import BaseModel

    class City(BaseModel):
        name: str

    answer = gemini_stream(None, ("a1", "final_result", '{"name": "Oslo"}'))
    with serving([Reply(body=gemini_stream("Oslo, I think.")), Reply(body=answer)]) as server:
        model = GoogleModel("gemini-2.5-flash", api_key="k", base_url=server.url, max_retries=0)
        image = BinaryPart(b"\x89PNG", "image/png")
        prompt = UserMessage((image,))
        result = create_agent(model, output_type=City).run(prompt)
    assert result.output == City(name="Oslo")
    first, second = server.requests
    inline = first["contents"][0]["parts"][0]["inlineData"]
    assert inline == {"data": base64.b64encode(b"\x89PNG").decode(), "mime_type": "image/png"}
    assert "toolConfig" not in first  # asked once plainly, then made to answer
    assert second["toolConfig"]["functionCallingConfig"] == {
        "mode": "ANY",
        "allowedFunctionNames": ["final_result"],
    }


def test_a_missing_key_says_which_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("GEMINI_API_KEY", raising=False)
    monkeypatch.delenv("GOOGLE_API_KEY", raising=False)
    with pytest.raises(ConfigurationError, match="GEMINI_API_KEY"):
        GoogleModel("gemini-2.5-flash")


# -- content filters, and other shapes the Gemini API really sends ---------------------

RATINGS = [
    {"category": "HARM_CATEGORY_HARASSMENT", "probability": "NEGLIGIBLE"},
    {"category": "HARM_CATEGORY_DANGEROUS_CONTENT", "probability": "HIGH", "blocked": True},
]


def filtered_stream(reason: str) -> bytes:
    """Text streamed, then the filter's stop: a candidate with no content, only the
    finish reason and the ratings (as streamGenerateContent sends it)."""
    head = chunk([{"text": "Step one: take the"}])
    stop: dict[str, Any] = {
        "candidates": [{"finishReason": reason, "index": 0, "safetyRatings": RATINGS}],
        "usageMetadata": {"promptTokenCount": 12, "candidatesTokenCount": 5},
        "modelVersion": "gemini-2.5-flash",
        "responseId": "resp-cut",
    }
    return sse([head, (None, stop)])


FILTER_REASONS = [
    "SAFETY",
    "PROHIBITED_CONTENT",
    "BLOCKLIST",
    "SPII",
    "RECITATION",
    "IMAGE_SAFETY",
    "MODEL_ARMOR",
]


async def test_every_filter_stop_reaches_the_loop_as_content_filter_with_its_text() -> None:
    from tether.models import ModelRequest, StreamDelta

    replies = [Reply(body=filtered_stream(reason)) for reason in FILTER_REASONS]
    with serving(replies) as server:
        model = GoogleModel("gemini-2.5-flash", api_key="k", base_url=server.url, max_retries=0)
        request = ModelRequest("", (UserMessage.of("How?"),))
        for reason in FILTER_REASONS:
            items = [item async for item in model.stream(request)]
            *deltas, response = items
            assert [d.delta for d in deltas if isinstance(d, StreamDelta)] == [
                "Step one: take the"
            ], reason
            assert response.finish_reason == "content_filter", reason
            assert response.message.text == "Step one: take the"  # the cut text stays
            assert response.usage.input_tokens == 12
            assert response.response_id == "resp-cut"


def test_a_filtered_answer_ends_the_run_with_content_filter_and_keeps_the_text() -> None:
    from tether import ContentFilterError

    with serving([Reply(body=filtered_stream("SAFETY"))]) as server:
        model = GoogleModel("gemini-2.5-flash", api_key="k", base_url=server.url, max_retries=2)
        with pytest.raises(ContentFilterError) as caught:
            create_agent(model).run("How?")
    result = caught.value.result
    assert result is not None
    assert result.stop_reason == "content_filter"
    assert result.output is None
    assert result.messages[-1].text == "Step one: take the"
    assert len(server.requests) == 1  # the same filter would stop a second try


PROMPT_BLOCKED = {
    "promptFeedback": {
        "blockReason": "PROHIBITED_CONTENT",
        "safetyRatings": RATINGS,
    },
    "usageMetadata": {"promptTokenCount": 9, "totalTokenCount": 9},
    "modelVersion": "gemini-2.5-flash",
    "responseId": "resp-blocked",
}


def test_a_blocked_prompt_is_a_content_filter_stop_naming_the_reason() -> None:
    from tether import ContentFilterError

    with serving([Reply(body=sse([(None, PROMPT_BLOCKED)]))]) as server:
        model = GoogleModel("gemini-2.5-flash", api_key="k", base_url=server.url, max_retries=2)
        with pytest.raises(ContentFilterError) as caught:
            create_agent(model).run("Something it refuses.")
    error = caught.value
    assert "blocked the prompt" in str(error)
    assert "PROHIBITED_CONTENT" in str(error)
    assert "HARM_CATEGORY_DANGEROUS_CONTENT" in str(error)  # the rating that blocked it
    assert "ended before" not in str(error)
    assert not error.transient
    assert error.request_id == "resp-blocked"
    assert error.result is not None
    assert error.result.stop_reason == "content_filter"
    assert len(server.requests) == 1  # not retried


def test_a_signature_on_the_last_empty_part_is_sent_back() -> None:
    """Gemini 2.5 streams a reply's signature on a last part with empty text."""
    from google.genai import types

    from tether.models.google import _contents, _Reader

    reader = _Reader()
    for body in (
        {"candidates": [{"content": {"role": "model", "parts": [{"text": "All done."}]}}]},
        {
            "candidates": [
                {
                    "content": {
                        "role": "model",
                        "parts": [{"text": "", "thoughtSignature": "c2ln"}],
                    },
                    "finishReason": "STOP",
                    "safetyRatings": RATINGS[:1],
                }
            ]
        },
    ):
        reader.read(types.GenerateContentResponse.model_validate(body))
    message = reader.response("gemini-2.5-flash").message
    assert message.text == "All done."
    (turn,) = _contents([message])
    assert turn["parts"] == [{"text": "All done."}, {"text": "", "thought_signature": b"sig"}]


def test_a_reply_without_usage_metadata_is_estimated_not_free() -> None:
    from tether.errors import UsageEstimatedWarning

    body = sse(
        [
            (None, {"candidates": [{"content": {"parts": [{"text": "Fine"}]}}]}),
            (
                None,
                {"candidates": [{"content": {"parts": [{"text": "."}]}, "finishReason": "STOP"}]},
            ),
        ]
    )
    with serving([Reply(body=body)]) as server:
        model = GoogleModel("gemini-2.5-flash", api_key="k", base_url=server.url, max_retries=0)
        with pytest.warns(UsageEstimatedWarning):
            result = create_agent(model).run("How are you?")
    assert result.output == "Fine."
    assert result.usage.input_tokens > 0
    assert result.usage.output_tokens > 0


MALFORMED = ["MALFORMED_FUNCTION_CALL", "UNEXPECTED_TOOL_CALL", "TOO_MANY_TOOL_CALLS"]


async def test_a_call_gemini_dropped_as_broken_is_a_malformed_call() -> None:
    """Gemini dropped the call the model tried (it could not parse it, it was not offered,
    one too many): the text before it is no answer. OTHER and a missing thought
    signature stay Gemini's own words."""
    from tether.models import ModelRequest, response_of

    reasons = [*MALFORMED, "OTHER", "MISSING_THOUGHT_SIGNATURE"]
    said = "I'll save the note now."
    replies = [Reply(body=sse([chunk([{"text": said}], reason)])) for reason in reasons]
    with serving(replies) as server:
        model = GoogleModel("gemini-2.5-flash", api_key="k", base_url=server.url, max_retries=0)
        for reason in reasons:
            response = await response_of(model.stream(ModelRequest("", (UserMessage.of("Hi"),))))
            expected = "malformed_call" if reason in MALFORMED else reason.lower()
            assert response.finish_reason == expected, reason
            assert response.message.text == said
