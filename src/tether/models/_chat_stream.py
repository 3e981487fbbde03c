"""Reading a Chat Completions stream as the servers that speak it really send it.

OpenAI's own stream is the model: each tool call starts with its `index`, `id` and whole
`name`, then its `arguments` arrive in pieces; usage comes last, in a chunk with no
choices. Servers that copy the API differ; each difference below was recorded from a
server (tests/models/recorded/) or is documented or reported for one:

- llama.cpp's Python server repeats the name and id in every chunk of a call; some vLLM
  tool parsers repeat them in the last one. A name is sent whole, so one that comes
  again is the same name, never a longer one.
- Ollama (0.4, ollama/ollama#7881) sends calls with no `index`, each whole with an id of
  its own; some servers number every call 0. A call is found by its index, else by its
  id, else it is the call in progress; an id that differs from the one of the call at
  that index starts another call.
- Arguments may come whole in one chunk, as a JSON object instead of a string, or again
  whole at the end after they were streamed (vLLM's end-of-stream flush). When the pieces
  joined are not JSON but the last piece that is a whole object is, that object is the
  call's arguments.
- Usage may come in every chunk, only in the last one, or never (the loop estimates a
  reply without it, see `tether.models.usage`).
- `finish_reason` may be "stop" beside tool calls (Gemini's OpenAI endpoint, LiteLLM) or
  "tool_calls" with none (LM Studio). Azure's content filter says "content_filter",
  possibly after a "stop": once said, it stays. A chunk may have no `choices` (usage,
  Azure's prompt-filter results) or a choice with no `delta` (Azure's annotations).
- Reasoning comes in `reasoning_content` (vLLM, llama.cpp, DeepSeek) or `reasoning`
  (Ollama, OpenRouter, newer vLLM).
- An error inside the stream comes as `{"error": {...}}` (OpenAI, OpenRouter, llama.cpp;
  the SDK raises it) or, from vLLM, as a chunk `{"object": "error", "message": ...}`.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from tether.errors import ModelError
from tether.messages import (
    AssistantMessage,
    AssistantPart,
    TextPart,
    ThinkingPart,
    ToolCall,
    Usage,
    new_call_id,
)
from tether.models import _sdk
from tether.models.base import ModelResponse, StreamDelta

__all__ = ["ChatReader", "chat_usage", "decode_arguments"]


@dataclass
class _Call:
    """One tool call as its pieces arrive."""

    position: int
    id: str = ""
    name: str = ""
    pieces: list[str] = field(default_factory=list)

    def arguments(self) -> str:
        """The call's arguments as text: the pieces joined, unless they are not JSON
        and a piece that is a whole object on its own (a server sending the arguments
        again whole) is."""
        joined = "".join(self.pieces)
        if len(self.pieces) < 2 or _is_object(joined):
            return joined
        whole = next((p for p in reversed(self.pieces) if _is_object(p)), None)
        return joined if whole is None else whole


def _is_object(text: str) -> bool:
    stripped = text.strip()
    if not (stripped.startswith("{") and stripped.endswith("}")):
        return False
    try:
        return isinstance(json.loads(stripped), dict)
    except ValueError:
        return False


def _text(value: object) -> str:
    """`value` when it is a string, else ""; servers put null, numbers or objects where
    text belongs."""
    return value if isinstance(value, str) else ""


def _content_text(content: object) -> str:
    """The text of a delta's content: a string, or a list of text parts."""
    if isinstance(content, list):
        return "".join(_text(part.get("text")) for part in content if isinstance(part, dict))
    return _text(content)


@dataclass
class ChatReader:
    """Builds one response from streamed chat completion chunks (the SDK's objects,
    made without validation: any field may be missing, None, or of another type)."""

    model: str
    text: list[str] = field(default_factory=list)
    thinking: list[str] = field(default_factory=list)
    calls: list[_Call] = field(default_factory=list)
    finish: str | None = None
    usage: Usage | None = None
    model_name: str | None = None
    response_id: str | None = None
    _by_index: dict[int, _Call] = field(default_factory=dict)
    _by_id: dict[str, _Call] = field(default_factory=dict)

    def read(self, chunk: Any) -> list[StreamDelta]:
        """The deltas one chunk adds to the reply."""
        if _text(getattr(chunk, "object", None)) == "error":  # vLLM's error in a stream
            extra = getattr(chunk, "model_extra", None) or {}
            raise ModelError(
                f"the server reported an error in the middle of its reply: "
                f"{extra.get('message') or extra or 'no detail'}"
            )
        self.model_name = _text(getattr(chunk, "model", None)) or self.model_name
        self.response_id = _text(getattr(chunk, "id", None)) or self.response_id
        self._count(getattr(chunk, "usage", None))
        choices = getattr(chunk, "choices", None)
        if not isinstance(choices, list) or not choices:
            return []
        choice = choices[0]
        reason = _text(getattr(choice, "finish_reason", None))
        if reason and self.finish != "content_filter":  # a filter's word is final
            self.finish = reason
        delta = getattr(choice, "delta", None)
        return [] if delta is None else self._deltas(delta)  # Azure's annotations have none

    def _count(self, usage: Any) -> None:
        if usage is None:
            return
        counted = chat_usage(usage)
        if self.usage is None or counted.input_tokens or counted.output_tokens:
            self.usage = counted  # a later chunk of zeros does not undo a count

    def _deltas(self, delta: Any) -> list[StreamDelta]:
        deltas: list[StreamDelta] = []
        reasoning = _text(getattr(delta, "reasoning_content", None)) or _text(
            getattr(delta, "reasoning", None)
        )
        if reasoning:
            self.thinking.append(reasoning)
            deltas.append(StreamDelta("thinking", reasoning))
        content = _content_text(getattr(delta, "content", None))
        if content:
            self.text.append(content)
            deltas.append(StreamDelta("text", content))
        pieces = getattr(delta, "tool_calls", None)
        for piece in pieces if isinstance(pieces, list) else ():
            streamed = self._tool_piece(piece)
            if streamed is not None:
                deltas.append(streamed)
        return deltas

    def _tool_piece(self, piece: Any) -> StreamDelta | None:
        function = getattr(piece, "function", None)
        name = _text(getattr(function, "name", None))
        call_id = _text(getattr(piece, "id", None))
        arguments = getattr(function, "arguments", None)
        if isinstance(arguments, dict | list):  # an object where JSON text belongs
            arguments = json.dumps(arguments)
        arguments = _text(arguments)
        if not (name or call_id or arguments):
            return None  # says nothing (an index alone, empty strings)
        index = getattr(piece, "index", None)
        if not isinstance(index, int) or isinstance(index, bool):
            index = None
        call = self._call_for(call_id, index, name)
        call.id = call.id or call_id
        call.name = call.name or name  # sent whole: a name that comes again is the same
        if not arguments:
            return None
        call.pieces.append(arguments)
        tool = call.name or None
        return StreamDelta("tool_call", arguments, call.id or None, tool, call.position)

    def _call_for(self, call_id: str, index: int | None, name: str) -> _Call:
        """The call a piece belongs to, made when it starts one."""
        if index is not None:
            known = self._by_index.get(index)
            if known is not None and not (call_id and known.id and call_id != known.id):
                return known
        elif call_id:
            known = self._by_id.get(call_id)
            if known is not None and not (name and known.name and name != known.name):
                return known
        elif self.calls:  # neither index nor id: the call in progress, unless another begins
            last = self.calls[-1]
            another = name and last.name and (name != last.name or _is_object(last.arguments()))
            if not another:
                return last
        call = _Call(position=len(self.calls))
        self.calls.append(call)
        if index is not None:
            self._by_index[index] = call
        if call_id:
            self._by_id[call_id] = call
        return call

    def response(self) -> ModelResponse:
        """The whole reply, once the stream has ended."""
        if self.finish is None:
            raise ModelError("the stream ended before the reply was complete")
        if self.finish == "error":  # OpenRouter's word for a reply that failed part-way
            raise ModelError("the server ended its reply with an error, giving no detail")
        parts: list[AssistantPart] = []
        if self.thinking:
            parts.append(ThinkingPart("".join(self.thinking)))
        if self.text:
            parts.append(TextPart("".join(self.text)))
        calls = self.calls
        for n, call in enumerate(calls):
            if self.finish == "length" and n == len(calls) - 1:  # cut off: as it came
                args: dict[str, Any] | str = "".join(call.pieces)
            else:
                args = decode_arguments(call.arguments())
            parts.append(ToolCall(call.name, args, call.id or new_call_id()))
        finish = self.finish
        if finish == "function_call" or (finish == "stop" and calls):
            finish = "tool_calls"
        elif finish == "tool_calls" and not calls:
            finish = "stop"
        usage = self.usage if self.usage is not None else Usage(requests=1)
        message = AssistantMessage(tuple(parts), self.model_name or self.model, usage)
        return ModelResponse(message, finish, self.response_id)


def chat_usage(usage: Any) -> Usage:
    """A Chat Completions usage object's counts; any of them may be missing."""
    details = getattr(usage, "prompt_tokens_details", None)
    return Usage(
        input_tokens=_sdk.usage_int(getattr(usage, "prompt_tokens", None)),
        output_tokens=_sdk.usage_int(getattr(usage, "completion_tokens", None)),
        cache_read_tokens=_sdk.usage_int(getattr(details, "cached_tokens", None)),
        cache_write_tokens=_sdk.usage_int(getattr(details, "cache_write_tokens", None)),
        requests=1,
    )


def decode_arguments(arguments: str) -> dict[str, Any] | str:
    """Tool arguments as an object, or the raw text when they are not a JSON object."""
    if not arguments.strip():
        return {}
    try:
        value = json.loads(arguments)
    except json.JSONDecodeError:
        return arguments
    return value if isinstance(value, dict) else arguments
