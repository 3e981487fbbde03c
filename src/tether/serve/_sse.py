"""AG-UI events as server-sent events, written the way the AG-UI SDK's encoder writes them.

The SDK's encoder serializes each event through pydantic with a Python serializer
wrapped around it (it leaves out optional fields that hold None), which costs several
times what producing the event did. A streaming reply is thousands of small events of
a few string fields each (text, reasoning and argument pieces; the ends of each), and
every step sends a few more (its calls, their results, a state snapshot), so those are
written here from their fields directly, with the same JSON encoder pydantic uses: the
bytes are the same (tests/serve/test_sse.py holds the two side by side). Anything else
(a run's end, a messages snapshot, a value that is not plain JSON) goes to the SDK.
"""

from __future__ import annotations

import functools
import math
from typing import Any

from ag_ui.core import (
    BaseEvent,
    CustomEvent,
    EventType,
    ReasoningEndEvent,
    ReasoningMessageContentEvent,
    ReasoningMessageEndEvent,
    ReasoningMessageStartEvent,
    ReasoningStartEvent,
    StateSnapshotEvent,
    TextMessageContentEvent,
    TextMessageEndEvent,
    TextMessageStartEvent,
    ToolCallArgsEvent,
    ToolCallEndEvent,
    ToolCallResultEvent,
    ToolCallStartEvent,
)
from ag_ui.encoder import EventEncoder
from pydantic_core import to_json

__all__ = ["content", "encode"]

_ENCODER = EventEncoder()

_DIRECT = (
    CustomEvent,
    ReasoningEndEvent,
    ReasoningMessageContentEvent,
    ReasoningMessageEndEvent,
    ReasoningMessageStartEvent,
    ReasoningStartEvent,
    StateSnapshotEvent,
    TextMessageContentEvent,
    TextMessageEndEvent,
    TextMessageStartEvent,
    ToolCallArgsEvent,
    ToolCallEndEvent,
    ToolCallResultEvent,
    ToolCallStartEvent,
)
"""The events written here when their values are plain JSON: those a run sends by the
thousand, and those of every step (its state snapshot, a changed file)."""
_FIELDS: dict[type[BaseEvent], tuple[tuple[str, str, bool], ...]] = {
    kind: tuple(
        (name, info.alias or name, not info.is_required() and info.default is None)
        for name, info in kind.model_fields.items()
    )
    for kind in _DIRECT
}
"""By event class: each field's name, its name on the wire, and whether the SDK leaves
it out when it is None (an optional field whose default is None), in the SDK's order."""

_CONTENT_ID = {
    EventType.TEXT_MESSAGE_CONTENT: "messageId",
    EventType.REASONING_MESSAGE_CONTENT: "messageId",
    EventType.TOOL_CALL_ARGS: "toolCallId",
}
"""The content events a reply streams, by type: the name of the id they carry."""


def content(kind: EventType, of: str, delta: str, subagent: str | None) -> str:
    """A content event (a piece of text, thinking or a call's arguments, of the message
    or call `of`) encoded from these values, as `encode` writes the event holding them:
    the reply's thousands of pieces are never built as pydantic objects at all."""
    return f"{_head(kind, of, subagent)}{to_json(delta).decode()}}}\n\n"


@functools.lru_cache(maxsize=256)
def _head(kind: EventType, of: str, subagent: str | None) -> str:
    """What the content events of one message or call (`of`) start with: all but the
    delta. A reply's pieces share it, so it is written once per message."""
    head = f'data: {{"type":"{kind.value}",'
    if subagent is not None:
        head += f'"subagentRunId":{to_json(subagent).decode()},'
    return f'{head}"{_CONTENT_ID[kind]}":{to_json(of).decode()},"delta":'


def _plain(value: Any) -> bool:
    """Whether pydantic writes `value` as the JSON encoder does with no schema: plain
    JSON (strings, whole and finite numbers, booleans, None, lists, dicts with string
    keys). pydantic's own objects, and what it writes its own way (an infinite float),
    are left to it."""
    kind = type(value)
    if kind in (str, bool, int) or value is None:
        return True
    if kind is float:
        return math.isfinite(value)
    if kind is dict:
        return all(type(key) is str and _plain(item) for key, item in value.items())
    if kind is list:
        return all(_plain(item) for item in value)
    return isinstance(value, str)  # an enumeration's member: the event's `type`


def encode(event: BaseEvent) -> str:
    """One AG-UI event as a server-sent event."""
    fields = _FIELDS.get(type(event))
    if fields is not None and not event.__pydantic_extra__:
        values = event.__dict__
        out: dict[str, Any] = {}
        for name, wire, omitted in fields:
            value = values[name]
            if value is None and omitted:
                continue
            if type(value) is not str and not _plain(value):
                break
            out[wire] = value
        else:
            return f"data: {to_json(out).decode()}\n\n"
    return _ENCODER.encode(event)
