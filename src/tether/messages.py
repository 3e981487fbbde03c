"""Conversation messages: plain frozen dataclasses with a lossless JSON form.

A conversation is a list of `Message`s:

- `UserMessage`: text and binary parts (images, audio, video, documents) from the user;
- `AssistantMessage`: what the model said: text, thinking and `ToolCall`s;
- `ToolResultMessage`: the results of one assistant turn's tool calls, in call order.

Every class carries a `kind` literal so code that matches on them can end with
`assert_never`. `to_json` / `from_json` round-trip any list of messages exactly.
"""

from __future__ import annotations

import collections
import functools
import json
import re
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Annotated, Any, ClassVar, Literal, TypeAlias

if TYPE_CHECKING:
    from pydantic import GetCoreSchemaHandler, TypeAdapter
    from pydantic_core import CoreSchema

__all__ = [
    "AssistantMessage",
    "AssistantPart",
    "BinaryPart",
    "ContentPart",
    "Message",
    "OnTheWire",
    "TextPart",
    "ThinkingPart",
    "ToolCall",
    "ToolResult",
    "ToolResultMessage",
    "Usage",
    "UserMessage",
    "from_json",
    "new_call_id",
    "own_calls",
    "shared_prefix",
    "to_json",
    "valid_unicode",
]


@dataclass(frozen=True, slots=True)
class TextPart:
    """Plain text."""

    text: str
    kind: Literal["text"] = "text"


@dataclass(frozen=True, slots=True)
class BinaryPart:
    """Binary content (image, audio, video or document) with its IANA media type."""

    data: bytes
    media_type: str
    kind: Literal["binary"] = "binary"

    # pydantic's ConfigDict is a plain dict: written as one, so importing this module
    # (every agent does) does not import pydantic, which serializing messages loads
    __pydantic_config__: ClassVar[dict[str, str]] = {
        "ser_json_bytes": "base64",
        "val_json_bytes": "base64",
    }

    @property
    def category(self) -> Literal["image", "audio", "video", "document"]:
        """What the media type says this is; anything not image/audio/video is a document."""
        major = self.media_type.partition("/")[0]
        if major == "image":
            return "image"
        if major == "audio":
            return "audio"
        if major == "video":
            return "video"
        return "document"


@dataclass(frozen=True, slots=True)
class ThinkingPart:
    """A model's reasoning, kept so it can be sent back to the provider that made it.

    `signature` is the provider's opaque proof or encrypted reasoning, `id` its item id,
    and `provider` says whose it is: other providers never receive it. A `redacted`
    part has no readable text; its `signature` holds the encrypted content.
    """

    text: str
    signature: str | None = None
    provider: str | None = None
    id: str | None = None
    redacted: bool = False
    kind: Literal["thinking"] = "thinking"


def new_call_id() -> str:
    """A fresh, unique tool call id."""
    return f"call_{uuid.uuid4().hex[:16]}"


@dataclass(frozen=True, slots=True)
class ToolCall:
    """The model asks for a tool to run.

    `args` is the decoded JSON object, or the raw text when the model sent something
    that is not valid JSON; the loop reports the latter back to the model as an error.

    `id` is tether's own: the loop gives every call the model makes a fresh one, unique
    in the thread, and keys results, decisions, records, events and background work by
    it. `provider_id` is the id the model's server gave the call, sent back to that
    server in place of `id` (see `on_the_wire`); None when it gave none, or the same one
    to two calls of one reply. Servers do not promise unique ids, so nothing else uses it.
    """

    name: str
    args: dict[str, Any] | str = field(default_factory=dict)
    id: str = field(default_factory=new_call_id)
    provider_id: str | None = None
    kind: Literal["tool_call"] = "tool_call"

    def __post_init__(self) -> None:
        if not isinstance(self.args, dict | str):  # a list or a number from a provider
            object.__setattr__(self, "args", json.dumps(self.args, default=repr))


class _ByKind:
    """pydantic metadata: the union is told apart by each member's `kind` (a tagged
    union), as `Field(discriminator="kind")` says; pydantic is imported only once a
    schema is built, when messages are first written or read as JSON."""

    def __get_pydantic_core_schema__(
        self, source: Any, handler: GetCoreSchemaHandler
    ) -> CoreSchema:
        from pydantic import Field

        return handler.generate_schema(Annotated[source, Field(discriminator="kind")])


_BY_KIND = _ByKind()

ContentPart: TypeAlias = Annotated[TextPart | BinaryPart, _BY_KIND]
AssistantPart: TypeAlias = Annotated[TextPart | ThinkingPart | ToolCall, _BY_KIND]


@dataclass(frozen=True, slots=True)
class Usage:
    """Tokens used by one or more model requests.

    `input_tokens` counts every input token, including those read from or written to
    the provider's prompt cache; the cache fields say how many of them were.
    """

    input_tokens: int = 0
    output_tokens: int = 0
    cache_read_tokens: int = 0
    cache_write_tokens: int = 0
    requests: int = 0

    @property
    def total_tokens(self) -> int:
        """Input plus output tokens."""
        return self.input_tokens + self.output_tokens

    def __add__(self, other: Usage) -> Usage:
        return Usage(
            input_tokens=self.input_tokens + other.input_tokens,
            output_tokens=self.output_tokens + other.output_tokens,
            cache_read_tokens=self.cache_read_tokens + other.cache_read_tokens,
            cache_write_tokens=self.cache_write_tokens + other.cache_write_tokens,
            requests=self.requests + other.requests,
        )


@dataclass(frozen=True, slots=True)
class UserMessage:
    """A message from the user (or from the harness speaking for the user)."""

    content: tuple[ContentPart, ...]
    kind: Literal["user"] = "user"

    @classmethod
    def of(cls, text: str) -> UserMessage:
        """A user message holding one piece of text."""
        return cls((TextPart(text),))

    @property
    def text(self) -> str:
        """The text parts joined by newlines."""
        return "\n".join(p.text for p in self.content if isinstance(p, TextPart))


@dataclass(frozen=True, slots=True)
class AssistantMessage:
    """One model response: text, thinking and tool calls, with the usage it cost."""

    parts: tuple[AssistantPart, ...]
    model_name: str | None = None
    usage: Usage = Usage()
    kind: Literal["assistant"] = "assistant"

    @property
    def text(self) -> str:
        """The text parts joined together (thinking excluded)."""
        return "".join(p.text for p in self.parts if isinstance(p, TextPart))

    @property
    def tool_calls(self) -> list[ToolCall]:
        """The tool calls, in the order the model made them."""
        return [p for p in self.parts if isinstance(p, ToolCall)]


@dataclass(frozen=True, slots=True)
class ToolResult:
    """What a tool call returned, or the error the model should see."""

    call_id: str
    name: str
    content: tuple[ContentPart, ...]
    is_error: bool = False
    kind: Literal["tool_result"] = "tool_result"

    @classmethod
    def of(cls, call: ToolCall, text: str, *, is_error: bool = False) -> ToolResult:
        """A text result answering `call`."""
        return cls(call.id, call.name, (TextPart(text),), is_error)

    @property
    def text(self) -> str:
        """The text parts joined by newlines."""
        return "\n".join(p.text for p in self.content if isinstance(p, TextPart))


@dataclass(frozen=True, slots=True)
class ToolResultMessage:
    """The results of one assistant turn's tool calls, in the order of the calls."""

    results: tuple[ToolResult, ...]
    kind: Literal["tool_results"] = "tool_results"


Message: TypeAlias = Annotated[UserMessage | AssistantMessage | ToolResultMessage, _BY_KIND]


def own_calls(message: AssistantMessage, ids: Sequence[str] = ()) -> AssistantMessage:
    """`message` with each tool call given tether's id: the one at its position in
    `ids`, else a new one. The server's id is kept as `provider_id` when it is usable on
    the wire: not empty, and not given to another call of the same reply."""
    calls = message.tool_calls
    if not calls:
        return message
    given = collections.Counter(c.id for c in calls)
    own = iter([*ids[: len(calls)], *(new_call_id() for _ in calls[len(ids) :])])

    def owned(part: AssistantPart) -> AssistantPart:
        if not isinstance(part, ToolCall):
            return part
        usable = part.id if part.id and given[part.id] == 1 else None
        return ToolCall(part.name, part.args, next(own), usable)

    return replace(message, parts=tuple(owned(p) for p in message.parts))


def shared_prefix(old: tuple[Message, ...], new: tuple[Message, ...]) -> int:
    """How many leading messages `new` has in common with `old`: the messages of a
    request that a step only grew or changed near its end are compared a block at a
    time, in C, and by identity first (they are the same objects)."""
    n = min(len(old), len(new))
    if old[:n] == new[:n]:
        return n
    block = 64
    start = 0
    while start + block <= n and old[start : start + block] == new[start : start + block]:
        start += block
    while start < n and (old[start] is new[start] or old[start] == new[start]):
        start += 1
    return start


class OnTheWire:
    """Messages as a model's server must see them: each tool call, and the result that
    answers it, under the id that server gave the call (`provider_id`) where it gave one.

    Call it with a conversation at each step: when the conversation only grew since the
    last call, only the new messages are looked at.
    """

    def __init__(self) -> None:
        self._ids: dict[str, str] = {}
        self._seen: tuple[Message, ...] = ()
        self._sent_so_far: tuple[Message, ...] = ()

    def __call__(self, messages: Sequence[Message]) -> tuple[Message, ...]:
        messages = tuple(messages)
        # Only what changed since the last call (what it added, or rewrote: a compaction,
        # or results sent as placeholders) is looked at again.
        known = shared_prefix(self._seen, messages)
        sent = self._sent_so_far[:known] + tuple(self._sent(m) for m in messages[known:])
        self._seen, self._sent_so_far = messages, sent
        return sent

    def _sent(self, message: Message) -> Message:
        ids = self._ids
        if isinstance(message, AssistantMessage):
            if all(c.provider_id is None for c in message.tool_calls):
                return message
            parts: list[AssistantPart] = []
            for part in message.parts:
                if isinstance(part, ToolCall) and part.provider_id is not None:
                    ids[part.id] = part.provider_id
                    part = ToolCall(part.name, part.args, part.provider_id)  # noqa: PLW2901
                parts.append(part)
            return AssistantMessage(tuple(parts), message.model_name, message.usage)
        if isinstance(message, ToolResultMessage) and not ids.keys().isdisjoint(
            r.call_id for r in message.results
        ):
            return ToolResultMessage(
                tuple(
                    ToolResult(ids[r.call_id], r.name, r.content, r.is_error)
                    if r.call_id in ids
                    else r
                    for r in message.results
                )
            )
        return message


_SURROGATE = re.compile("[\ud800-\udfff]")


def valid_unicode(text: str) -> str:
    """`text` with each lone surrogate (not valid Unicode, so not writable as UTF-8)
    replaced by U+FFFD."""
    return _SURROGATE.sub("\ufffd", text)


@functools.cache
def _adapter() -> TypeAdapter[list[Message]]:
    from pydantic import TypeAdapter  # with the first messages written or read as JSON

    return TypeAdapter(list[Message])


def to_json(messages: Sequence[Message]) -> str:
    """Serialize messages to a JSON array; `from_json` gives back equal messages.

    Text that is not valid Unicode (a lone surrogate, which a provider can send as a
    JSON escape) is written with U+FFFD in its place, so what is written always reads back.
    """
    from pydantic_core import PydanticSerializationError  # loaded by `_adapter` already

    try:
        return _adapter().dump_json(list(messages)).decode()
    except PydanticSerializationError:
        data = _adapter().dump_python(list(messages), mode="json")
        return valid_unicode(json.dumps(data, ensure_ascii=False))


def from_json(data: str | bytes) -> list[Message]:
    """Read messages written by `to_json`."""
    return _adapter().validate_json(data)
