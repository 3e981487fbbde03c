"""Claude through the official `anthropic` SDK (extra `tether[anthropic]`).

```python
from tether.models.anthropic import AnthropicModel
model = AnthropicModel("claude-sonnet-5-5")      # key from ANTHROPIC_API_KEY
```

Every request streams (the SDK refuses long non-streamed requests). Prompt caching is
on by default: breakpoints go on the system prompt, the last tool and the latest turn,
so each step re-reads the conversation so far from the cache.
"""

from __future__ import annotations

import base64
from collections.abc import AsyncIterator, Iterable
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


class AnthropicModel(_sdk.Adapter):
    """A Claude model.

    `client` takes a ready `anthropic.AsyncAnthropic` (for Bedrock, Vertex, a proxy or a
    profile); otherwise one is made per event loop from `api_key` (default: the
    `ANTHROPIC_API_KEY` variable), `base_url` and `http_client` (an `httpx2.AsyncClient`,
    which belongs to one event loop). The SDK retries rate limits, server
    errors and dropped connections `max_retries` times with backoff, honouring
    `retry-after`. `cache=False` turns off the prompt-cache breakpoints.
    """

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
        super().__init__(name, PROVIDER, profile)
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
            max_retries=max_retries,
            timeout=timeout_seconds,
            http_client=http_client,
        )

    async def stream(self, request: ModelRequest) -> AsyncIterator[StreamItem]:
        sdk = self._sdk()
        reader = _StreamReader()
        try:
            async with self._clients.get().messages.stream(**self.params(request)) as stream:
                async for event in stream:
                    delta = reader.read(event)
                    if delta is not None:
                        yield delta
                message = await stream.get_final_message()
        except sdk.APIError as exc:
            raise _sdk.model_error(
                exc, provider=PROVIDER, model=self._name, key_hint="ANTHROPIC_API_KEY"
            ) from exc
        except ValueError as exc:  # the SDK could not parse streamed tool arguments
            raise ModelError(f"{PROVIDER} sent a reply tether could not read: {exc}") from exc
        yield reader.response(message)

    def params(self, request: ModelRequest) -> dict[str, Any]:
        """The keyword arguments of `messages.stream` for `request`."""
        settings = request.settings
        cache = self._cache and self.profile.supports_caching
        params: dict[str, Any] = {
            "model": self._name,
            "max_tokens": settings.max_tokens or self.profile.max_output_tokens or 8_192,
            "messages": _messages(request.messages, cache=cache),
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


class _StreamReader:
    """Turns stream events into deltas, and the final message into a `ModelResponse`."""

    def __init__(self) -> None:
        self.call_ids: dict[int, str] = {}
        self.arguments: dict[int, str] = {}
        self.last_index = -1

    def read(self, event: Any) -> StreamDelta | None:
        kind = event.type
        if kind == "text":
            return StreamDelta("text", event.text)
        if kind == "thinking":
            return StreamDelta("thinking", event.thinking)
        if kind == "content_block_start":
            self.last_index = event.index
            if event.content_block.type == "tool_use":
                self.call_ids[event.index] = event.content_block.id
        elif kind == "content_block_delta" and event.delta.type == "input_json_delta":
            partial = event.delta.partial_json
            self.arguments[event.index] = self.arguments.get(event.index, "") + partial
            return StreamDelta("tool_call", partial, self.call_ids.get(event.index))
        return None

    def response(self, message: Any) -> ModelResponse:
        if message.stop_reason is None:
            raise ModelError(f"the {PROVIDER} stream ended before the reply was complete")
        parts: list[AssistantPart] = []
        for index, block in enumerate(message.content):
            if block.type == "text":
                parts.append(TextPart(block.text))
            elif block.type == "thinking":
                parts.append(ThinkingPart(block.thinking, block.signature, PROVIDER))
            elif block.type == "redacted_thinking":
                parts.append(ThinkingPart("", block.data, PROVIDER, redacted=True))
            elif block.type == "tool_use":
                args: dict[str, Any] | str = block.input
                if message.stop_reason == "max_tokens" and index == self.last_index:
                    # Cut off mid-call: the SDK's partial parse would look complete.
                    args = self.arguments.get(index, "")
                parts.append(ToolCall(block.name, args, block.id))
        usage = message.usage
        cache_read = _sdk.usage_int(usage.cache_read_input_tokens)
        cache_write = _sdk.usage_int(usage.cache_creation_input_tokens)
        return ModelResponse(
            AssistantMessage(
                tuple(parts),
                model_name=message.model,
                usage=Usage(
                    input_tokens=usage.input_tokens + cache_read + cache_write,
                    output_tokens=usage.output_tokens,
                    cache_read_tokens=cache_read,
                    cache_write_tokens=cache_write,
                    requests=1,
                ),
            ),
            finish_reason=_FINISH.get(message.stop_reason, message.stop_reason),
        )


def _messages(messages: Iterable[Message], *, cache: bool) -> list[dict[str, Any]]:
    """Anthropic messages: tool results go in user turns; turns of one role are merged."""
    out: list[dict[str, Any]] = []
    for message in messages:
        if isinstance(message, AssistantMessage):
            role, blocks = "assistant", _assistant_blocks(message)
        elif isinstance(message, ToolResultMessage):
            role = "user"
            blocks = [
                {
                    "type": "tool_result",
                    "tool_use_id": r.call_id,
                    "content": _content_blocks(r.content) or [{"type": "text", "text": "(empty)"}],
                    "is_error": r.is_error,
                }
                for r in message.results
            ]
        else:
            role, blocks = "user", _content_blocks(message.content)
        if out and out[-1]["role"] == role:
            out[-1]["content"].extend(blocks)
        else:
            out.append({"role": role, "content": blocks})
    for entry in out:
        if not entry["content"]:
            entry["content"] = [{"type": "text", "text": "(empty)"}]
    if cache and out:
        last = out[-1]["content"][-1]
        if last["type"] not in ("thinking", "redacted_thinking"):
            last["cache_control"] = _CACHE
    return out


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
