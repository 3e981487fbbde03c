"""Gemini models through the official `google-genai` SDK (extra `tether[google]`).

    GoogleModel("gemini-2.5-flash")                    # Gemini API, GEMINI_API_KEY
    GoogleModel("gemini-2.5-flash", vertex=True)       # Vertex AI, your Google credentials

The request streams (`streamGenerateContent`); tool calls, structured answers (the
`final_result` tool, forced when needed), images and PDFs, thinking and its signatures
(sent back with the calls they came with, as Gemini asks), and usage with cached and
thinking tokens are read from it. tether retries as it does for every provider; the
SDK's own retries are off.

A reply a filter stopped (finish reason SAFETY, RECITATION, PROHIBITED_CONTENT, ...)
ends with finish reason "content_filter", keeping the text that came before, and a later
ordinary finish does not undo it; a prompt Gemini refuses outright
(`promptFeedback.blockReason`, no reply at all) is a `ContentFilterError` naming the
reason. A call Gemini dropped as broken (MALFORMED_FUNCTION_CALL, UNEXPECTED_TOOL_CALL,
TOO_MANY_TOOL_CALLS) ends with "malformed_call": the loop asks the model again.
"""

from __future__ import annotations

import base64
import os
from collections.abc import AsyncGenerator, Iterable
from dataclasses import dataclass, field
from typing import Any

from tether.errors import ContentFilterError, ModelError
from tether.messages import (
    AssistantMessage,
    AssistantPart,
    BinaryPart,
    ContentPart,
    Message,
    TextPart,
    ThinkingPart,
    ToolCall,
    ToolResultMessage,
    Usage,
    new_call_id,
)
from tether.models import _sdk
from tether.models.base import ModelRequest, ModelResponse, StreamDelta, StreamItem
from tether.models.profiles import ModelProfile

__all__ = ["GoogleModel"]

PROVIDER = "google"
_GEMINI_URL = "https://generativelanguage.googleapis.com"
_GEMINI_VERSION = "v1beta"  # where the Gemini API has tools, thinking and caching
# Gemini's finish reasons (`google.genai.types.FinishReason`) in tether's words. Every
# reason for which a filter stopped the reply (safety, recitation, blocklists, personal
# data, prohibited content, Model Armor, the account's use policy) is "content_filter";
# CONTINUATION (the per-request limit, when the SDK does not go on by itself) is a cut.
# A tool call Gemini could not parse, did not offer, or one too many is "malformed_call".
# Others pass as their own word, lowercased.
_FILTERED = (
    "SAFETY",
    "RECITATION",
    "LANGUAGE",
    "BLOCKLIST",
    "PROHIBITED_CONTENT",
    "SPII",
    "IMAGE_SAFETY",
    "IMAGE_PROHIBITED_CONTENT",
    "IMAGE_RECITATION",
    "ESCALATION",
    "PUP_LIMITED_DISABLED",
    "MODEL_ARMOR",
)
_FINISH = {
    "STOP": "stop",
    "MAX_TOKENS": "length",
    "CONTINUATION": "length",
    **dict.fromkeys(_FILTERED, "content_filter"),
    **dict.fromkeys(
        ("MALFORMED_FUNCTION_CALL", "UNEXPECTED_TOOL_CALL", "TOO_MANY_TOOL_CALLS"),
        "malformed_call",
    ),
}
# Finishes that say the reply is not whole: a later ordinary finish does not undo them.
_KEPT = frozenset({"content_filter", "length", "malformed_call"})


class _APIStatus(Exception):
    """The SDK's `APIError` in the shape tether's retry code reads (`status_code`,
    `body`, `response`)."""

    def __init__(self, error: Any) -> None:
        super().__init__(getattr(error, "message", None) or str(error))
        self.status_code = error.code
        self.body = {"error": {"message": getattr(error, "message", None) or str(error)}}
        self.response = getattr(error, "response", None)


class GoogleModel(_sdk.HTTPAdapter):
    """A Gemini model, on the Gemini API (`api_key`, default `GEMINI_API_KEY` or
    `GOOGLE_API_KEY`) or on Vertex AI (`vertex=True` with `project` and `location`, or
    the SDK's variables). `base_url` points it elsewhere (a proxy, a test server)."""

    key_hint = "GEMINI_API_KEY (or GOOGLE_API_KEY)"

    def __init__(
        self,
        name: str,
        *,
        api_key: str | None = None,
        vertex: bool = False,
        project: str | None = None,
        location: str | None = None,
        base_url: str | None = None,
        max_retries: int = _sdk.DEFAULT_MAX_RETRIES,
        timeout_seconds: float = _sdk.DEFAULT_TIMEOUT_SECONDS,
        profile: ModelProfile | None = None,
    ) -> None:
        super().__init__(name, PROVIDER, profile, max_retries)
        self._sdk = _sdk.require("google.genai", "google")
        self._timeout = timeout_seconds
        self._base_url = (base_url or _GEMINI_URL).rstrip("/")
        self._vertex = vertex
        options: dict[str, Any] = {"base_url": base_url, "timeout": timeout_seconds}
        if vertex:
            options.update(vertexai=True, project=project, location=location)
        else:
            key = api_key or os.environ.get("GEMINI_API_KEY") or os.environ.get("GOOGLE_API_KEY")
            options["api_key"] = _sdk.env_key(key, "GEMINI_API_KEY", provider=PROVIDER)
        self._clients = _sdk.LoopClients(self._client, None, **options)

    def _client(self, *, base_url: str | None, timeout: float, **options: Any) -> Any:
        genai = self._sdk()
        options.pop("max_retries", None)  # tether retries; the SDK tries once
        vertex = bool(options.get("vertexai"))
        http = genai.types.HttpOptions(
            base_url=base_url,
            api_version=None if vertex else _GEMINI_VERSION,
            timeout=int(timeout * 1000),
            retry_options=genai.types.HttpRetryOptions(attempts=1),
            # An httpx transport of its own keeps the SDK on httpx (whose errors tether's
            # retries tell apart) where aiohttp is installed too, which it would prefer:
            # aiohttp reads a connection reset as the end of the stream, and its
            # disconnects are no transport errors tether knows. Vertex AI keeps the
            # SDK's choice (its credentials and mutual TLS go through it).
            async_client_args=None if vertex else {"transport": _transport()},
        )
        return genai.Client(http_options=http, **options).aio

    def _where(self) -> str:
        if self._vertex:
            return f"Vertex AI, models/{self._name}:streamGenerateContent"
        model = f"models/{self._name}:streamGenerateContent?alt=sse"
        return f"{self._base_url}/{_GEMINI_VERSION}/{model}"

    @property
    def server_url(self) -> str:
        """The URL requests go to."""
        return self._where()

    @property
    def vertex(self) -> bool:
        """Whether requests go to Vertex AI (else to the Gemini API)."""
        return self._vertex

    async def _attempt(self, request: ModelRequest) -> AsyncGenerator[StreamItem, None]:
        errors = self._sdk().errors
        reader = _Reader()
        try:
            stream = await self._clients.get().models.generate_content_stream(
                model=self._name, contents=_contents(request.messages), config=self._config(request)
            )
            async for chunk in stream:
                for delta in reader.read(chunk):
                    yield delta
        except errors.APIError as exc:
            raise _APIStatus(exc) from exc
        yield reader.response(self._name)

    def _config(self, request: ModelRequest) -> dict[str, Any]:
        settings = request.settings
        config: dict[str, Any] = {
            "automatic_function_calling": {"disable": True},
            "max_output_tokens": settings.max_tokens or self.profile.max_output_tokens,
        }
        if request.system_prompt:
            config["system_instruction"] = request.system_prompt
        if request.tools:
            config["tools"] = [
                {
                    "function_declarations": [
                        {
                            "name": t.name,
                            "description": t.description,
                            "parameters_json_schema": dict(t.parameters),
                        }
                        for t in request.tools
                    ]
                }
            ]
        if request.force_output and request.output_tool is not None:
            config["tool_config"] = {
                "function_calling_config": {
                    "mode": "ANY",
                    "allowed_function_names": [request.output_tool],
                }
            }
        if settings.temperature is not None:
            config["temperature"] = settings.temperature
        config.update(settings.extra)
        return {k: v for k, v in config.items() if v is not None}


def _transport() -> Any:
    """The async HTTP transport of the SDK's own HTTP library (httpx2, a dependency of
    google-genai), as it would make one."""
    import httpx2

    return httpx2.AsyncHTTPTransport()


@dataclass
class _Reader:
    """Turns the streamed chunks into deltas, and what they built into a response.

    Answer text is gathered piece by piece and joined once, when another part follows
    or the reply ends."""

    parts: list[AssistantPart] = field(default_factory=list)
    text: list[str] = field(default_factory=list)
    """The answer text since the last other part, not yet joined."""
    usage: Any = None
    model: str | None = None
    response_id: str | None = None
    finish: str | None = None
    blocked: str | None = None
    """Why Gemini refused the prompt itself (`promptFeedback.blockReason`), said in words."""

    def read(self, chunk: Any) -> list[StreamDelta]:
        self.model = getattr(chunk, "model_version", None) or self.model
        self.response_id = getattr(chunk, "response_id", None) or self.response_id
        self.usage = getattr(chunk, "usage_metadata", None) or self.usage
        feedback = getattr(chunk, "prompt_feedback", None)
        if getattr(feedback, "block_reason", None) is not None:
            self.blocked = _block(feedback)
        deltas: list[StreamDelta] = []
        for candidate in (getattr(chunk, "candidates", None) or [])[:1]:
            reason = getattr(candidate, "finish_reason", None)
            if reason is not None and _FINISH.get(self.finish or "") not in _KEPT:
                self.finish = _word(reason)  # a filter's or a cut's word stands
            content = getattr(candidate, "content", None)
            for part in getattr(content, "parts", None) or []:
                deltas += self._part(part)
        return deltas

    def _part(self, part: Any) -> list[StreamDelta]:
        signature = getattr(part, "thought_signature", None)
        call = getattr(part, "function_call", None)
        text = getattr(part, "text", None)
        if signature or call is not None or (text and getattr(part, "thought", False)):
            self._end_text()
        if signature:  # Gemini wants it back with the part it came on
            encoded = base64.b64encode(signature).decode()
            self.parts.append(ThinkingPart("", encoded, PROVIDER))
        if call is not None:
            args = dict(call.args or {})
            self.parts.append(ToolCall(call.name or "", args, call.id or new_call_id()))
            return []
        if not text:
            return []
        if getattr(part, "thought", False):
            self.parts.append(ThinkingPart(text, None, PROVIDER))
            return [StreamDelta("thinking", text)]
        self.text.append(text)
        return [StreamDelta("text", text)]

    def _end_text(self) -> None:
        """The text gathered so far, as one part."""
        if self.text:
            self.parts.append(TextPart("".join(self.text)))
            self.text.clear()

    def response(self, name: str) -> ModelResponse:
        if self.finish is None and self.blocked is not None:  # no candidate at all
            raise ContentFilterError(
                f"Gemini's content filter blocked the prompt before the model answered "
                f"({self.blocked}); the same messages meet the same filter: change what "
                "is sent",
                request_id=self.response_id,
            )
        if self.finish is None:
            raise ModelError(f"the {PROVIDER} stream ended before the reply was complete")
        self._end_text()
        calls = any(isinstance(p, ToolCall) for p in self.parts)
        finish = _FINISH.get(self.finish, self.finish.lower())
        if finish == "stop" and calls:
            finish = "tool_calls"
        usage = self.usage
        output = _sdk.usage_int(getattr(usage, "candidates_token_count", None))
        thoughts = _sdk.usage_int(getattr(usage, "thoughts_token_count", None))
        message = AssistantMessage(
            tuple(self.parts),
            self.model or name,
            Usage(
                input_tokens=_sdk.usage_int(getattr(usage, "prompt_token_count", None)),
                output_tokens=output + thoughts,
                cache_read_tokens=_sdk.usage_int(
                    getattr(usage, "cached_content_token_count", None)
                ),
                requests=1,
            ),
        )
        return ModelResponse(message, finish, self.response_id)


def _block(feedback: Any) -> str:
    """`promptFeedback` in words: the block reason, Google's message, the ratings that
    blocked (or rated high)."""
    said = f"blockReason {_word(getattr(feedback, 'block_reason', None))}"
    message = getattr(feedback, "block_reason_message", None)
    if message:
        said += f": {str(message)[:300]}"
    flagged = [
        _word(getattr(rating, "category", None))
        for rating in getattr(feedback, "safety_ratings", None) or []
        if getattr(rating, "blocked", False)
        or _word(getattr(rating, "probability", None)) == "HIGH"
    ]
    if flagged:
        said += f"; flagged: {', '.join(flagged)}"
    return said


def _word(value: Any) -> str:
    """An enum of the SDK's (or a value it did not know) as the wire's word."""
    return str(getattr(value, "value", value))


def _contents(messages: Iterable[Message]) -> list[dict[str, Any]]:
    """Gemini contents: the model's turns are "model", tool results go in user turns."""
    out: list[dict[str, Any]] = []
    names: dict[str, str] = {}
    for message in messages:
        if isinstance(message, AssistantMessage):
            role, parts = "model", _model_parts(message, names)
        elif isinstance(message, ToolResultMessage):
            role = "user"
            parts = [
                {
                    "function_response": {
                        "id": r.call_id,
                        "name": names.get(r.call_id, r.name),
                        "response": {"error" if r.is_error else "result": r.text},
                    }
                }
                for r in message.results
            ]
        else:
            role, parts = "user", _content_parts(message.content)
        if out and out[-1]["role"] == role:
            out[-1]["parts"].extend(parts)
        else:
            out.append({"role": role, "parts": parts or [{"text": "(empty)"}]})
    return out


def _model_parts(message: AssistantMessage, names: dict[str, str]) -> list[dict[str, Any]]:
    parts: list[dict[str, Any]] = []
    signature: str | None = None
    for part in message.parts:
        if isinstance(part, ThinkingPart):
            if part.provider == PROVIDER and part.signature:
                signature = part.signature  # goes with the next part
            continue  # thinking text is not sent back; its signature is
        if isinstance(part, TextPart):
            entry: dict[str, Any] = {"text": part.text}
        else:
            names[part.id] = part.name
            args = part.args if isinstance(part.args, dict) else {}
            entry = {"function_call": {"id": part.id, "name": part.name, "args": args}}
        if signature is not None:
            entry["thought_signature"] = base64.b64decode(signature)
            signature = None
        parts.append(entry)
    if signature is not None:  # it came on the reply's last, empty part: it goes back so
        parts.append({"text": "", "thought_signature": base64.b64decode(signature)})
    return parts


def _content_parts(content: Iterable[ContentPart]) -> list[dict[str, Any]]:
    parts: list[dict[str, Any]] = []
    for part in content:
        if isinstance(part, BinaryPart):
            parts.append({"inline_data": {"mime_type": part.media_type, "data": part.data}})
        elif part.text:
            parts.append({"text": part.text})
    return parts
