"""The Converse format of Amazon Bedrock, both ways: tether's messages as a request's
Converse messages, and a Converse stream's events as deltas and, at its end, a response.
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Iterable, Iterator
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
from tether.models.base import ModelResponse, StreamDelta

__all__ = ["CACHE_POINT", "PROVIDER", "Reader", "converse_messages"]

PROVIDER = "bedrock"
CACHE_POINT = {"cachePoint": {"type": "default"}}
_FINISH = {
    "end_turn": "stop",
    "stop_sequence": "stop",
    "tool_use": "tool_calls",
    "max_tokens": "length",
    "model_context_window_exceeded": "length",
    "guardrail_intervened": "content_filter",
    "content_filtered": "content_filter",
    # The model's tool call was broken: the loop tells it so and asks again.
    "malformed_tool_use": "malformed_call",
    "malformed_model_output": "malformed_call",
}
# Stops that say the reply is not whole: a later ordinary stop does not undo them.
_KEPT = frozenset({"content_filter", "length", "malformed_call"})
_IMAGES = {"image/png": "png", "image/jpeg": "jpeg", "image/gif": "gif", "image/webp": "webp"}
_DOCUMENTS = {
    "application/pdf": "pdf",
    "text/csv": "csv",
    "text/html": "html",
    "text/plain": "txt",
    "text/markdown": "md",
}


def converse_messages(
    messages: Iterable[Message], *, cache: bool, stable: int = 0
) -> list[dict[str, Any]]:
    """Converse messages: tool results go in user turns; turns of one role are merged.
    Documents are numbered across the whole request: Bedrock refuses two of one name.
    With `cache`, cache points go at the end and after the first `stable` messages."""
    out: list[dict[str, Any]] = []
    documents = itertools.count(1)
    stable_at: tuple[int, int] | None = None  # (entry, blocks before the point)
    for index, message in enumerate(messages):
        if isinstance(message, AssistantMessage):
            role, blocks = "assistant", _assistant_blocks(message)
        elif isinstance(message, ToolResultMessage):
            role = "user"
            blocks = [
                {
                    "toolResult": {
                        "toolUseId": r.call_id,
                        "content": _content(r.content, documents) or [{"text": "(empty)"}],
                        "status": "error" if r.is_error else "success",
                    }
                }
                for r in message.results
            ]
        else:
            role, blocks = "user", _content(message.content, documents)
        if out and out[-1]["role"] == role:
            out[-1]["content"].extend(blocks)
        else:
            out.append({"role": role, "content": blocks})
        if index == stable - 1 and out[-1]["content"]:
            stable_at = (len(out) - 1, len(out[-1]["content"]))
    for entry in out:
        if not entry["content"]:
            entry["content"] = [{"text": "(empty)"}]
    if cache and out:
        if stable_at is not None and stable_at != (len(out) - 1, len(out[-1]["content"])):
            out[stable_at[0]]["content"].insert(stable_at[1], CACHE_POINT)
        out[-1]["content"].append(CACHE_POINT)
    return out


def _assistant_blocks(message: AssistantMessage) -> list[dict[str, Any]]:
    blocks: list[dict[str, Any]] = []
    for part in message.parts:
        if isinstance(part, TextPart):
            if part.text:
                blocks.append({"text": part.text})
        elif isinstance(part, ThinkingPart):
            if part.provider != PROVIDER or part.signature is None:
                continue  # verified by its signature: another provider's cannot pass
            if part.redacted:
                blocks.append(
                    {"reasoningContent": {"redactedContent": bytes.fromhex(part.signature)}}
                )
            else:
                text = {"text": part.text, "signature": part.signature}
                blocks.append({"reasoningContent": {"reasoningText": text}})
        else:
            args = part.args if isinstance(part.args, dict) else {}
            blocks.append({"toolUse": {"toolUseId": part.id, "name": part.name, "input": args}})
    return blocks


def _content(parts: Iterable[ContentPart], documents: Iterator[int]) -> list[dict[str, Any]]:
    blocks: list[dict[str, Any]] = []
    for part in parts:
        if isinstance(part, TextPart):
            if part.text:
                blocks.append({"text": part.text})
        else:
            blocks.append(_binary(part, documents))
    return blocks


def _binary(part: BinaryPart, documents: Iterator[int]) -> dict[str, Any]:
    if part.media_type in _IMAGES:
        return {"image": {"format": _IMAGES[part.media_type], "source": {"bytes": part.data}}}
    kind = _DOCUMENTS.get(part.media_type)
    if kind is not None:  # a document needs a name of letters, digits and spaces
        name = f"document {next(documents)}"
        document = {"format": kind, "name": name, "source": {"bytes": part.data}}
        return {"document": document}
    return {"text": _sdk.omitted(part, "this Bedrock model")}


@dataclass
class _Block:
    kind: str = "text"
    text: list[str] = field(default_factory=list)
    signature: list[str] = field(default_factory=list)
    redacted: list[bytes] = field(default_factory=list)
    call_id: str = ""
    name: str = ""
    position: int = 0
    """A call's place among the reply's tool calls."""


@dataclass
class Reader:
    """Turns the Converse stream's events into deltas, and its blocks into a response.

    Blocks are kept in the order they arrived, which is the order the streamed calls
    were numbered in: each call keeps its own id and arguments, whatever the indexes."""

    blocks: dict[int, _Block] = field(default_factory=dict)
    calls: int = 0
    stop_reason: str | None = None
    usage: dict[str, Any] = field(default_factory=dict)
    request_id: str | None = None

    def read(self, event: dict[str, Any]) -> StreamDelta | None:
        if "contentBlockStart" in event:
            start = event["contentBlockStart"]
            call = (start.get("start") or {}).get("toolUse")
            if call is not None:
                index = start.get("contentBlockIndex", 0)
                block = _Block("tool_use", call_id=call.get("toolUseId", ""))
                block.name, block.position = call.get("name", ""), self.calls
                self.blocks[index] = block
                self.calls += 1
        elif "contentBlockDelta" in event:
            found = event["contentBlockDelta"]
            return self._delta(found.get("contentBlockIndex", 0), found.get("delta") or {})
        elif "messageStop" in event:
            said = _FINISH.get(self.stop_reason or "")
            if said not in _KEPT:  # a filter's or a cut's word stands
                self.stop_reason = event["messageStop"].get("stopReason") or "end_turn"
        elif "metadata" in event:
            self.usage.update(event["metadata"].get("usage") or {})
        return None

    def _new_call(self, index: int) -> _Block:
        """A call whose start was not seen."""
        block = self.blocks[index] = _Block("tool_use", position=self.calls)
        self.calls += 1
        return block

    def _delta(self, index: int, delta: dict[str, Any]) -> StreamDelta | None:
        if "toolUse" in delta:
            block = self.blocks.get(index) or self._new_call(index)
            piece = str(delta["toolUse"].get("input", ""))
            block.text.append(piece)
            name = block.name or None
            return StreamDelta("tool_call", piece, block.call_id or None, name, block.position)
        if "reasoningContent" in delta:
            block = self.blocks.setdefault(index, _Block("thinking"))
            reasoning = delta["reasoningContent"]
            if reasoning.get("signature"):
                block.signature.append(reasoning["signature"])
            if reasoning.get("redactedContent"):
                block.redacted.append(reasoning["redactedContent"])
            if reasoning.get("text"):
                block.text.append(reasoning["text"])
                return StreamDelta("thinking", reasoning["text"])
            return None
        if "text" in delta:
            block = self.blocks.setdefault(index, _Block("text"))
            block.text.append(delta["text"])
            return StreamDelta("text", delta["text"])
        return None

    def response(self, name: str) -> ModelResponse:
        if self.stop_reason is None:
            raise ModelError(f"the {PROVIDER} stream ended before the reply was complete")
        parts: list[AssistantPart] = []
        for block in self.blocks.values():
            text = "".join(block.text)
            if block.kind == "tool_use":
                parts.append(ToolCall(block.name, _arguments(text), block.call_id))
            elif block.kind == "thinking" and block.redacted:
                signature = b"".join(block.redacted).hex()
                parts.append(ThinkingPart("", signature, PROVIDER, redacted=True))
            elif block.kind == "thinking":
                parts.append(ThinkingPart(text, "".join(block.signature) or None, PROVIDER))
            elif text:
                parts.append(TextPart(text))
        cache_read = _sdk.usage_int(self.usage.get("cacheReadInputTokens"))
        cache_write = _sdk.usage_int(self.usage.get("cacheWriteInputTokens"))
        usage = Usage(
            input_tokens=_sdk.usage_int(self.usage.get("inputTokens")) + cache_read + cache_write,
            output_tokens=_sdk.usage_int(self.usage.get("outputTokens")),
            cache_read_tokens=cache_read,
            cache_write_tokens=cache_write,
            requests=1,
        )
        message = AssistantMessage(tuple(parts), name, usage)
        finish = _FINISH.get(self.stop_reason, self.stop_reason)
        return ModelResponse(message, finish, self.request_id)


def _arguments(streamed: str) -> dict[str, Any] | str:
    """A call's arguments: an object, or the raw text when it is not one (the loop turns
    that into an error the model reads, never a guess)."""
    if not streamed.strip():
        return {}
    try:
        value = json.loads(streamed)
    except ValueError:
        return streamed
    return value if isinstance(value, dict) else streamed
