"""tether messages as LangChain messages, and LangChain replies as tether's, for
`LangChainModel` (see its module).

An assistant turn that holds the chat model's own thinking goes out in LangChain's
standard content blocks (`output_version="v1"`), so the provider's package turns it
back into its wire format exactly: for `ChatAnthropic`, each thinking block with its
signature and each redacted_thinking block with its data, in their places before the
turn's tool calls, as Anthropic requires; for `ChatOpenAI`'s Responses API, each
reasoning item by its id and encrypted content. Thinking from another provider is
never sent.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Mapping, Sequence
from typing import Any

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
    new_call_id,
)
from tether.models.base import StreamDelta

__all__ = ["CallPieces", "cut_short", "deltas", "reply_calls", "reply_parts", "to_langchain"]

# Where each provider's package keeps a reasoning block's opaque part (Anthropic's and
# Bedrock's signature, OpenAI's encrypted reasoning) in a standard block's `extras`.
_OPAQUE_KEY = {"openai": "encrypted_content"}


def to_langchain(
    system_prompt: str,
    messages: Sequence[Message],
    *,
    provider: str | None = None,
    wire_provider: str | None = None,
) -> list[Any]:
    """tether messages as LangChain messages, the system prompt first.

    Thinking whose `provider` is `provider` goes back to the chat model (tagged as
    LangChain's `wire_provider`, the `model_provider` its package reports, when that
    differs); other thinking stays out."""
    from langchain_core import messages as lc

    out: list[Any] = [lc.SystemMessage(system_prompt)] if system_prompt else []
    for message in messages:
        if isinstance(message, AssistantMessage):
            out.append(_ai_message(message, provider, wire_provider or provider))
        elif isinstance(message, ToolResultMessage):
            out += [
                lc.ToolMessage(
                    content=_content(r.content),
                    tool_call_id=r.call_id,
                    name=r.name,
                    status="error" if r.is_error else "success",
                )
                for r in message.results
            ]
        else:
            out.append(lc.HumanMessage(content=_content(message.content)))
    return out


def _ai_message(message: AssistantMessage, provider: str | None, wire: str | None) -> Any:
    from langchain_core import messages as lc

    calls = [_call_block(c) for c in message.tool_calls]
    if not any(_sent_back(p, provider) for p in message.parts):
        return lc.AIMessage(content=message.text, tool_calls=calls)
    content: list[str | dict[Any, Any]] = []
    for part in message.parts:
        if isinstance(part, ThinkingPart):
            if _sent_back(part, provider):
                content.append(_reasoning_block(part, wire))
        elif isinstance(part, TextPart):
            content.append({"type": "text", "text": part.text})
        else:
            content.append(_call_block(part))
    metadata = {"output_version": "v1", "model_provider": wire}
    return lc.AIMessage(content=content, tool_calls=calls, response_metadata=metadata)


def _sent_back(part: object, provider: str | None) -> bool:
    """Whether `part` is thinking the chat model (of `provider`) wants back: its own, with
    something the provider checks or refers to (a signature, encrypted content, an id)."""
    return (
        isinstance(part, ThinkingPart)
        and provider is not None
        and part.provider == provider
        and bool(part.signature or part.id)
    )


def _reasoning_block(part: ThinkingPart, wire: str | None) -> dict[str, Any]:
    """A thinking part as LangChain's standard block (a redacted one as the provider's own
    block, which LangChain carries as `non_standard`)."""
    if part.redacted:
        return {
            "type": "non_standard",
            "value": {"type": "redacted_thinking", "data": part.signature},
        }
    block: dict[str, Any] = {"type": "reasoning", "reasoning": part.text}
    if part.id:
        block["id"] = part.id
    if part.signature:
        block["extras"] = {_OPAQUE_KEY.get(wire or "", "signature"): part.signature}
    return block


def _content(parts: Sequence[ContentPart]) -> Any:
    if all(isinstance(p, TextPart) for p in parts):
        return "\n".join(p.text for p in parts if isinstance(p, TextPart))
    return [_block(p) for p in parts]


def _block(part: ContentPart) -> dict[str, Any]:
    """A LangChain standard content block."""
    if isinstance(part, TextPart):
        return {"type": "text", "text": part.text}
    kind = "file" if isinstance(part, BinaryPart) and part.category == "document" else part.category
    return {
        "type": kind,
        "base64": base64.b64encode(part.data).decode(),
        "mime_type": part.media_type,
    }


def _call_block(call: ToolCall) -> dict[str, Any]:
    """A tool call as LangChain's standard block (the same shape as an AIMessage's
    `tool_calls` entry); arguments that are not an object (cut off) go as none."""
    args = call.args if isinstance(call.args, dict) else {}
    return {"type": "tool_call", "id": call.id, "name": call.name, "args": args}


# Replies -------------------------------------------------------------------------------


def reply_parts(full: Any, provider: str | None) -> list[AssistantPart]:
    """The reply's thinking and text, in the order the model gave them."""
    parts: list[AssistantPart] = []
    for block in full.content_blocks:
        kind = block.get("type")
        if kind == "reasoning":
            thinking = _thinking(block, provider)
            if thinking is not None:
                parts.append(thinking)
        elif kind == "non_standard":
            value = block.get("value")
            if isinstance(value, dict) and value.get("type") == "redacted_thinking":
                data = value.get("data")
                if isinstance(data, str) and data:
                    parts.append(ThinkingPart("", data, provider, redacted=True))
        elif kind == "text" and block.get("text"):
            parts.append(TextPart(block["text"]))
    return parts


def _thinking(block: Mapping[str, Any], provider: str | None) -> ThinkingPart | None:
    """A standard reasoning block as a thinking part, with what the provider needs back:
    its signature (Anthropic, Bedrock) or encrypted content (OpenAI), and its item id."""
    text = block.get("reasoning")
    extras = block.get("extras") or {}
    opaque = extras.get("signature") or extras.get("encrypted_content")
    item_id = block.get("id")
    if not isinstance(item_id, str) or item_id.startswith("lc_"):  # LangChain's own ids
        item_id = None
    if not text and not opaque and not item_id:
        return None
    signature = opaque if isinstance(opaque, str) else None
    return ThinkingPart(text if isinstance(text, str) else "", signature, provider, item_id)


def reply_calls(full: Any, *, cut: bool) -> list[ToolCall]:
    """The reply's tool calls, their arguments decoded strictly: a streamed call's JSON
    is read from its raw text (LangChain's lenient parse completes a cut-off object), and
    what is not a JSON object stays text. With `cut`, the last call was cut off by the
    output limit: it stays text whatever it says, so it never runs."""
    pieces = getattr(full, "tool_call_chunks", None)
    found: list[tuple[str, str | dict[str, Any], str | None]]
    if pieces:
        found = [(p.get("name") or "", p.get("args") or "", p.get("id")) for p in pieces]
    else:  # a reply given whole
        found = [(c["name"], dict(c["args"]), c.get("id")) for c in full.tool_calls]
        found += [
            (c.get("name") or "", c.get("args") or "", c.get("id")) for c in full.invalid_tool_calls
        ]
    calls = [
        ToolCall(name, _decoded(args), call_id or new_call_id()) for name, args, call_id in found
    ]
    if cut and calls:
        name, args, _ = found[-1]
        raw = args if isinstance(args, str) else json.dumps(args)
        calls[-1] = ToolCall(name, raw, calls[-1].id)
    return calls


def _decoded(args: str | dict[str, Any]) -> str | dict[str, Any]:
    """Arguments as an object, or their text when it is not a JSON object."""
    if isinstance(args, dict):
        return args
    if not args.strip():
        return {}
    try:
        value = json.loads(args)
    except ValueError:
        return args
    return value if isinstance(value, dict) else args


def cut_short(args: str | dict[str, Any]) -> bool:
    """Whether `args` is JSON text that stops before its end (a cut-off call)."""
    if not isinstance(args, str):
        return False
    try:
        json.loads(args)
    except json.JSONDecodeError as exc:
        return exc.msg.startswith("Unterminated string") or exc.pos >= len(args.rstrip())
    return False


class CallPieces:
    """What earlier chunks of a streamed reply said of each call, by LangChain's chunk
    index: its id, its tool, its place among the reply's calls."""

    def __init__(self) -> None:
        self.ids: dict[int, str] = {}
        self.names: dict[int, str] = {}
        self.positions: dict[int, int] = {}


def deltas(chunk: Any, calls: CallPieces) -> list[StreamDelta]:
    """A chunk's deltas: thinking (any reasoning LangChain finds in it: Anthropic's
    thinking, OpenAI's reasoning summaries, a `reasoning_content` field), text, and
    tool-call arguments."""
    out = [
        StreamDelta("thinking", block["reasoning"])
        for block in chunk.content_blocks
        if block.get("type") == "reasoning" and block.get("reasoning")
    ]
    text = chunk.text
    if text:
        out.append(StreamDelta("text", text))
    # A model that does not stream hands back one whole AIMessage, with no chunks.
    for piece in getattr(chunk, "tool_call_chunks", None) or ():
        index = piece.get("index") or 0
        position = calls.positions.setdefault(index, len(calls.positions))
        if piece.get("id"):
            calls.ids[index] = piece["id"]
        if piece.get("name"):
            calls.names[index] = piece["name"]
        if piece.get("args"):
            call_id, tool = calls.ids.get(index), calls.names.get(index)
            out.append(StreamDelta("tool_call", piece["args"], call_id, tool, position))
    return out
