"""Claude through the official `anthropic` SDK (extra `tether[anthropic]`).

```python
from tether.models.anthropic import AnthropicModel
model = AnthropicModel("claude-sonnet-5-5")      # key from ANTHROPIC_API_KEY
```

Every request streams (the SDK refuses long non-streamed requests). Prompt caching is
on by default: breakpoints go on the system prompt, the last tool, the latest turn and
the end of the part of the history no later request will change (`stable_messages`),
so each step re-reads the conversation so far from the cache, even a step that sends
old tool results as placeholders.
"""

from __future__ import annotations

import base64
import json
from collections.abc import AsyncGenerator, Iterable
from dataclasses import dataclass, field
from typing import Any

from tether.errors import ModelError
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
)
from tether.models import _sdk
from tether.models.base import ModelRequest, ModelResponse, StreamDelta, StreamItem
from tether.models.profiles import ModelProfile

__all__ = ["AnthropicModel"]

PROVIDER = "anthropic"
_CACHE = {"type": "ephemeral"}
_FINISH = {
    "end_turn": "stop",
    "stop_sequence": "stop",
    "tool_use": "tool_calls",
    "max_tokens": "length",
    "model_context_window_exceeded": "length",
    "refusal": "content_filter",
}


class AnthropicModel(_sdk.HTTPAdapter):
    """A Claude model.

    `client` takes a ready `anthropic.AsyncAnthropic` (for Bedrock, Vertex, a proxy or a
    profile); otherwise one is made per event loop from `api_key` (default: the
    `ANTHROPIC_API_KEY` variable), `base_url` and `http_client` (an `httpx2.AsyncClient`,
    which belongs to one event loop). tether retries rate limits, server errors and
    dropped connections `max_retries` times (see `tether.models`).
    `cache=False` turns off the prompt-cache breakpoints.
    """

    key_hint = "ANTHROPIC_API_KEY"

    def __init__(
        self,
        name: str,
        *,
        api_key: str | None = None,
        base_url: str | None = None,
        client: Any = None,
        http_client: Any = None,
        max_retries: int = _sdk.DEFAULT_MAX_RETRIES,
        timeout_seconds: float = _sdk.DEFAULT_TIMEOUT_SECONDS,
        cache: bool = True,
        profile: ModelProfile | None = None,
    ) -> None:
        super().__init__(name, PROVIDER, profile, max_retries)
        self._sdk = _sdk.require("anthropic", "anthropic")
        self._cache = cache
        self._timeout = timeout_seconds
        if client is None:
            api_key = _sdk.env_key(api_key, "ANTHROPIC_API_KEY", provider=PROVIDER)
        self._clients = _sdk.LoopClients(
            lambda **options: self._sdk().AsyncAnthropic(**options),
            client,
            api_key=api_key,
            base_url=base_url,
            timeout=timeout_seconds,
            http_client=http_client,
        )

    def _where(self) -> str:
        return _sdk.endpoint(self._clients, "v1/messages")

    @property
    def server_url(self) -> str:
        """The URL requests go to."""
        return self._where()

    async def _attempt(self, request: ModelRequest) -> AsyncGenerator[StreamItem, None]:
        stream = await self._clients.get().messages.create(**self.params(request), stream=True)
        reader = _StreamReader()
        async with stream:
            await _sdk.check_event_stream(stream.response, PROVIDER)
            async for event in stream:
                delta = reader.read(event)
                if delta is not None:
                    yield delta
        yield reader.response()

    def params(self, request: ModelRequest) -> dict[str, Any]:
        """The keyword arguments of `messages.stream` for `request`."""
        settings = request.settings
        cache = self._cache and self.profile.supports_caching
        params: dict[str, Any] = {
            "model": self._name,
            "max_tokens": settings.max_tokens or self.profile.max_output_tokens or 8_192,
            "messages": _messages(request.messages, cache=cache, stable=request.stable_messages),
            "timeout": settings.timeout_seconds or self._timeout,
        }
        if request.system_prompt:
            system: dict[str, Any] = {"type": "text", "text": request.system_prompt}
            if cache:
                system["cache_control"] = _CACHE
            params["system"] = [system]
        if request.tools:
            tools = [
                {"name": t.name, "description": t.description, "input_schema": dict(t.parameters)}
                for t in request.tools
            ]
            if cache:
                tools[-1]["cache_control"] = _CACHE
            params["tools"] = tools
        if settings.temperature is not None:
            params["temperature"] = settings.temperature
        thinking = settings.extra.get("thinking")
        thinking_on = isinstance(thinking, dict) and thinking.get("type") != "disabled"
        if request.force_output and request.output_spec is not None and not thinking_on:
            # Claude cannot be forced to a tool while thinking; the loop's retries remain.
            params["tool_choice"] = {"type": "tool", "name": request.output_spec.name}
        if settings.extra:
            params["extra_body"] = dict(settings.extra)
        return params


_CALL_BLOCKS = ("tool_use", "server_tool_use")


@dataclass
class _Block:
    """One content block as it streams in."""

    kind: str
    text: list[str] = field(default_factory=list)
    signature: str = ""
    call_id: str = ""
    name: str = ""
    start_input: Any = None
    position: int = 0
    """A call's place among the reply's tool calls."""


@dataclass
class _StreamReader:
    """Turns the raw stream events into deltas, and the blocks they build into a
    `ModelResponse`. Tool arguments are parsed here, strictly: a call whose JSON is broken
    goes back to the model as an error, never as a guess."""

    blocks: dict[int, _Block] = field(default_factory=dict)
    calls: int = 0
    model: str | None = None
    response_id: str | None = None
    stop_reason: str | None = None
    usage: dict[str, Any] = field(default_factory=dict)

    def read(self, event: Any) -> StreamDelta | None:
        kind = getattr(event, "type", None)
        if kind == "message_start":
            self.model = event.message.model
            self.response_id = getattr(event.message, "id", None)
            self.usage.update(_usage_fields(event.message.usage))
        elif kind == "content_block_start":
            block = event.content_block
            self.blocks[event.index] = _Block(
                block.type,
                [getattr(block, "text", None) or getattr(block, "thinking", None) or ""],
                getattr(block, "signature", None) or getattr(block, "data", None) or "",
                getattr(block, "id", None) or "",
                getattr(block, "name", None) or "",
                getattr(block, "input", None),
                self.calls,
            )
            self.calls += block.type in _CALL_BLOCKS
        elif kind == "content_block_delta":
            return self._delta(event.index, event.delta)
        elif kind == "message_delta":
            self.stop_reason = event.delta.stop_reason or self.stop_reason
            self.usage.update(_usage_fields(event.usage))
        return None

    def _delta(self, index: int, delta: Any) -> StreamDelta | None:
        block = self.blocks.setdefault(index, _Block("text"))
        kind = delta.type
        if kind == "text_delta":
            block.text.append(delta.text)
            return StreamDelta("text", delta.text)
        if kind == "thinking_delta":
            block.text.append(delta.thinking)
            return StreamDelta("thinking", delta.thinking)
        if kind == "signature_delta":
            block.signature += delta.signature
        elif kind == "input_json_delta":
            block.text.append(delta.partial_json)
            return StreamDelta(
                "tool_call",
                delta.partial_json,
                block.call_id or None,
                block.name or None,
                block.position,
            )
        return None

    def response(self) -> ModelResponse:
        if self.stop_reason is None:
            raise ModelError(f"the {PROVIDER} stream ended before the reply was complete")
        parts: list[AssistantPart] = []
        for block in (self.blocks[i] for i in sorted(self.blocks)):
            text = "".join(block.text)
            if block.kind == "text":
                parts.append(TextPart(text))
            elif block.kind == "thinking":
                parts.append(ThinkingPart(text, block.signature, PROVIDER))
            elif block.kind == "redacted_thinking":
                parts.append(ThinkingPart("", block.signature, PROVIDER, redacted=True))
            elif block.kind in _CALL_BLOCKS:
                parts.append(ToolCall(block.name, self._arguments(block, text), block.call_id))
        cache_read = _sdk.usage_int(self.usage.get("cache_read_input_tokens"))
        cache_write = _sdk.usage_int(self.usage.get("cache_creation_input_tokens"))
        return ModelResponse(
            AssistantMessage(
                tuple(parts),
                model_name=self.model,
                usage=Usage(
                    input_tokens=_sdk.usage_int(self.usage.get("input_tokens"))
                    + cache_read
                    + cache_write,
                    output_tokens=_sdk.usage_int(self.usage.get("output_tokens")),
                    cache_read_tokens=cache_read,
                    cache_write_tokens=cache_write,
                    requests=1,
                ),
            ),
            finish_reason=_FINISH.get(self.stop_reason, self.stop_reason),
            response_id=self.response_id,
        )

    def _arguments(self, block: _Block, streamed: str) -> dict[str, Any] | str:
        """The call's arguments: an object, or the raw text when it is not one (cut off
        by max_tokens, or broken), which the loop turns into an error for the model."""
        if not streamed.strip():
            return block.start_input if isinstance(block.start_input, dict) else {}
        try:
            value = json.loads(streamed)
        except ValueError:
            return streamed
        return value if isinstance(value, dict) else streamed


def _usage_fields(usage: Any) -> dict[str, Any]:
    """The token counts a usage object carries (the ones it leaves out stay as they were)."""
    if usage is None:
        return {}
    fields = (
        "input_tokens",
        "output_tokens",
        "cache_read_input_tokens",
        "cache_creation_input_tokens",
    )
    return {f: getattr(usage, f) for f in fields if getattr(usage, f, None) is not None}


def _messages(messages: Iterable[Message], *, cache: bool, stable: int = 0) -> list[dict[str, Any]]:
    """Anthropic messages: tool results go in user turns; turns of one role are merged.
    With `cache`, breakpoints go on the last block and on the last block of the first
    `stable` messages (the part later requests repeat even when they change what
    follows)."""
    out: list[dict[str, Any]] = []
    stable_block: dict[str, Any] | None = None
    for index, message in enumerate(messages):
        role, blocks = _role_blocks(message)
        if out and out[-1]["role"] == role:
            out[-1]["content"].extend(blocks)
        else:
            out.append({"role": role, "content": blocks})
        if index == stable - 1 and out[-1]["content"]:
            stable_block = out[-1]["content"][-1]
    for entry in out:
        if not entry["content"]:
            entry["content"] = [{"type": "text", "text": "(empty)"}]
    if cache and out:
        for block in (stable_block, out[-1]["content"][-1]):
            if block is not None and block["type"] not in ("thinking", "redacted_thinking"):
                block["cache_control"] = _CACHE
    return out


def _role_blocks(message: Message) -> tuple[str, list[dict[str, Any]]]:
    if isinstance(message, AssistantMessage):
        return "assistant", _assistant_blocks(message)
    if isinstance(message, ToolResultMessage):
        return "user", [
            {
                "type": "tool_result",
                "tool_use_id": r.call_id,
                "content": _content_blocks(r.content) or [{"type": "text", "text": "(empty)"}],
                "is_error": r.is_error,
            }
            for r in message.results
        ]
    return "user", _content_blocks(message.content)


def _assistant_blocks(message: AssistantMessage) -> list[dict[str, Any]]:
    blocks: list[dict[str, Any]] = []
    for part in message.parts:
        if isinstance(part, TextPart):
            if part.text:
                blocks.append({"type": "text", "text": part.text})
        elif isinstance(part, ThinkingPart):
            if part.provider != PROVIDER or part.signature is None:
                continue  # Claude verifies thinking by its signature; others' cannot pass
            if part.redacted:
                blocks.append({"type": "redacted_thinking", "data": part.signature})
            else:
                blocks.append(
                    {"type": "thinking", "thinking": part.text, "signature": part.signature}
                )
        else:
            args = part.args if isinstance(part.args, dict) else {}
            blocks.append({"type": "tool_use", "id": part.id, "name": part.name, "input": args})
    return blocks


def _content_blocks(parts: Iterable[ContentPart]) -> list[dict[str, Any]]:
    blocks: list[dict[str, Any]] = []
    for part in parts:
        if isinstance(part, TextPart):
            if part.text:
                blocks.append({"type": "text", "text": part.text})
        else:
            blocks.append(_binary_block(part))
    return blocks


def _binary_block(part: BinaryPart) -> dict[str, Any]:
    data = base64.b64encode(part.data).decode()
    if part.category == "image":
        source = {"type": "base64", "media_type": part.media_type, "data": data}
        return {"type": "image", "source": source}
    if part.media_type == "application/pdf":
        source = {"type": "base64", "media_type": part.media_type, "data": data}
        return {"type": "document", "source": source}
    if part.media_type.startswith("text/"):
        text = part.data.decode("utf-8", errors="replace")
        return {
            "type": "document",
            "source": {"type": "text", "media_type": "text/plain", "data": text},
        }
    return {"type": "text", "text": _sdk.omitted(part, "Claude")}
