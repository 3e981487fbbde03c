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
  joined are not JSON, the last piece is taken instead only when it is a whole object
  and what came before it is the same object, or that object's beginning in a text that
  no more text could complete; otherwise the arguments stay the broken text, which the
  loop never runs. Whether a call's object has closed is followed piece by piece, so a
  long call costs time in proportion to its length.
- Usage may come in every chunk, only in the last one, or never (the loop estimates a
  reply without it, see `tether.models.usage`).
- `finish_reason` may be "stop" beside tool calls (Gemini's OpenAI endpoint, LiteLLM) or
  "tool_calls" with none (LM Studio). Azure's content filter says "content_filter",
  possibly after a "stop": once said, it stays; so does "length" (or "error") before a
  later ordinary finish. A chunk may have no `choices` (usage,
  Azure's prompt-filter results) or a choice with no `delta` (Azure's annotations).
- Reasoning comes in `reasoning_content` (vLLM, llama.cpp, DeepSeek) or `reasoning`
  (Ollama, OpenRouter, newer vLLM).
- An error inside the stream comes as `{"error": {...}}` (OpenAI, OpenRouter, llama.cpp;
  the SDK raises it) or, from vLLM, as a chunk `{"object": "error", "message": ...}`
  (`stream_error`; the adapter raises it as the SDK does the other, so both are retried
  alike when nothing of the reply came yet and their code or type may pass).
"""

from __future__ import annotations

import json
import re
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

__all__ = ["ChatReader", "chat_usage", "decode_arguments", "stream_error"]


_IN_STRING = re.compile(r'["\\]')  # what ends or escapes within a string
_BRACKETS = re.compile(r'[{}\[\]"]')  # what changes the shape between strings
_ANYTHING = re.compile(r"\S")


@dataclass
class _Shape:
    """Where a JSON text stands as its pieces come, each character looked at once: how
    deep in brackets, whether inside a string, whether the top-level value has closed.
    Only a text that begins with `{` can be whole."""

    depth: int = 0
    in_string: bool = False
    escaped: bool = False
    began: bool = False
    closed: bool = False
    broken: bool = False
    valid: bool | None = None  # once closed: whether the text parses as an object

    def feed(self, piece: str) -> None:
        at, end = 0, len(piece)
        while at < end and not self.broken:
            at = self._string(piece, at) if self.in_string else self._between(piece, at)

    def _string(self, piece: str, at: int) -> int:
        """Reads inside a string from `at`; returns where reading goes on."""
        if self.escaped:  # the character after a backslash, maybe in the next piece
            self.escaped = False
            return at + 1
        found = _IN_STRING.search(piece, at)
        if found is None:
            return len(piece)
        self.escaped = found.group() == "\\"
        self.in_string = self.escaped  # a quote ends the string
        return found.end()

    def _between(self, piece: str, at: int) -> int:
        """Reads outside strings from `at`; returns where reading goes on."""
        inside = self.began and not self.closed
        found = (_BRACKETS if inside else _ANYTHING).search(piece, at)
        if found is None:
            return len(piece)
        char = found.group()
        if not inside:  # before the object, or after it: only its `{` may come
            self.broken = self.closed or char != "{"
            self.began = True
        if char == '"':
            self.in_string = True
        elif char in "{[":
            self.depth += 1
        elif char in "}]":
            self.depth -= 1
            self.closed = self.depth == 0
        return found.end()


@dataclass
class _Call:
    """One tool call as its pieces arrive."""

    position: int
    id: str = ""
    name: str = ""
    pieces: list[str] = field(default_factory=list)
    _shape: _Shape = field(default_factory=_Shape, repr=False)

    def add(self, piece: str) -> None:
        self.pieces.append(piece)
        self._shape.feed(piece)

    def whole(self) -> bool:
        """Whether the pieces so far make one JSON object and nothing after it. Cheap:
        the object's end is tracked as pieces come, and it is parsed once, when it has
        closed (only whitespace may follow without breaking it, which changes nothing)."""
        shape = self._shape
        if not shape.closed or shape.broken:
            return False
        if shape.valid is None:
            shape.valid = _is_object("".join(self.pieces))
        return shape.valid

    def arguments(self) -> str:
        """The call's arguments as text: the pieces joined, unless those are not JSON
        because the server sent them again whole at the end (vLLM's flush; some of its
        parsers send the whole even after streaming a beginning of it). The last piece
        is taken instead only when that is unambiguous: it is a whole object and what
        came before it is the same object, or that object's beginning in a text broken
        before its end (so no longer object cut short could read so). Anything else
        stays the text as it came, which the loop answers as broken and never runs."""
        joined = "".join(self.pieces)
        if len(self.pieces) < 2 or _is_object(joined):
            return joined
        last = self.pieces[-1]
        before = joined[: len(joined) - len(last)].strip()
        if not _is_object(last):
            return joined
        if _is_object(before) and json.loads(before) == json.loads(last):
            return last  # sent twice
        if last.lstrip().startswith(before) and _broken_before_its_end(joined):
            return last  # a beginning, then the whole
        return joined


def _is_object(text: str) -> bool:
    stripped = text.strip()
    if not (stripped.startswith("{") and stripped.endswith("}")):
        return False
    try:
        return isinstance(json.loads(stripped), dict)
    except (ValueError, RecursionError):
        return False


def _broken_before_its_end(text: str) -> bool:
    """Whether JSON text has an error before its end, so that no more text could
    complete it (as opposed to an object cut short)."""
    stripped = text.rstrip()
    try:
        json.loads(stripped)
    except json.JSONDecodeError as error:
        cut = error.pos >= len(stripped) or error.msg.startswith("Unterminated string")
        return not cut
    except RecursionError:
        return False
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


# Finishes a later ordinary one does not undo: a filter's word is final, and a reply the
# output limit cut stays cut (a "stop" after "length" must not run the cut call).
_STICKS = {"length": 1, "error": 1, "content_filter": 2}


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
        error = stream_error(chunk)
        if error is not None:
            raise ModelError(
                f"the server reported an error in the middle of its reply: "
                f"{error.get('message') or error or 'no detail'}"
            )
        self.model_name = _text(getattr(chunk, "model", None)) or self.model_name
        self.response_id = _text(getattr(chunk, "id", None)) or self.response_id
        self._count(getattr(chunk, "usage", None))
        choices = getattr(chunk, "choices", None)
        if not isinstance(choices, list) or not choices:
            return []
        choice = choices[0]
        reason = _text(getattr(choice, "finish_reason", None))
        if reason and _STICKS.get(reason, 0) >= _STICKS.get(self.finish or "", 0):
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
        call.add(arguments)
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
            another = name and last.name and (name != last.name or last.whole())
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


def stream_error(chunk: Any) -> dict[str, Any] | None:
    """The body of vLLM's error inside a stream (a chunk `{"object": "error", "message":
    ..., "type": ..., "code": ...}`), or None for any other chunk."""
    if _text(getattr(chunk, "object", None)) != "error":
        return None
    extra = getattr(chunk, "model_extra", None)
    return dict(extra) if isinstance(extra, dict) else {}


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
    except (json.JSONDecodeError, RecursionError):  # broken, or nested past reading
        return arguments
    return value if isinstance(value, dict) else arguments
