"""What MCP servers send, as tether's message parts: a tool result's content for the
model, a resource or a prompt for the user's code. Text sent as bytes of a text type is
decoded; other bytes are shown to the model only when it can read them (images, PDF)."""

from __future__ import annotations

import asyncio
import re
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

from tether.messages import BinaryPart, TextPart

__all__ = ["content_part", "off_loop_if_big", "resource_part", "tool_result_parts"]

_T = TypeVar("_T")

_SHOWN_BINARY = ("image/", "application/pdf")
"""Binary content a model can be shown; other bytes are described in words."""
_TEXT_TYPES = re.compile(
    r"text/.+|application/(json|xml|javascript|ecmascript|x-javascript|yaml|x-yaml|toml|sql|"
    r"graphql|x-sh|x-python|csv|x-ndjson|[\w.-]+\+(json|xml|yaml))"
)
"""Media types of bytes that are text: a resource of one is decoded, not described."""


_CHARSETS = re.compile(r"utf-8(-sig)?|utf-(16|32)(-[lb]e)?|ascii|iso8859-\d+|cp125\d")
"""Charsets a server's text blob is decoded in (by `codecs.lookup`'s name): the common
ones, each linear in time. Any other (a server could name `punycode`, quadratic in the
blob's size, or `idna`, which refuses bytes it does not like) reads as UTF-8."""


def _charset(parameters: str) -> str:
    """The charset named in a media type's `parameters`, when one tether decodes."""
    import codecs

    named = re.search(r"charset\s*=\s*\"?([\w.:-]+)", parameters, re.IGNORECASE)
    if named is None:
        return "utf-8"
    try:
        name = codecs.lookup(named.group(1)).name
    except LookupError:
        return "utf-8"
    return name if _CHARSETS.fullmatch(name) else "utf-8"


def _text_of(data: bytes, mime: str) -> str | None:
    """`data` as text when `mime` says it is text: in its charset when it is a common
    one (`_CHARSETS`), else UTF-8; what does not decode is replaced, never refused."""
    media, _, parameters = mime.partition(";")
    if not _TEXT_TYPES.fullmatch(media.strip().lower()):
        return None
    return data.decode(_charset(parameters), "replace")


async def off_loop_if_big(contents: Sequence[Any], convert: Callable[[Any], _T]) -> list[_T]:
    """`convert` of each item, in a worker thread when they carry much base64 (decoding
    megabytes would hold the event loop)."""
    from tether._mcp_stdio import OFF_LOOP_BYTES

    def weight(item: Any) -> int:
        inner = getattr(item, "resource", item)
        return len(getattr(item, "data", None) or "") + len(getattr(inner, "blob", None) or "")

    if sum(map(weight, contents)) <= OFF_LOOP_BYTES:
        return [convert(c) for c in contents]
    return await asyncio.to_thread(lambda: [convert(c) for c in contents])


async def tool_result_parts(contents: Sequence[Any]) -> list[TextPart | BinaryPart]:
    """An MCP tool result's content as the model should see it."""
    return await off_loop_if_big(contents, content_part)


def content_part(content: Any) -> TextPart | BinaryPart:
    """One piece of an MCP tool result as the model should see it."""
    import base64

    kind = getattr(content, "type", "")
    if kind == "text":
        return TextPart(content.text)
    if kind in ("image", "audio"):
        return BinaryPart(base64.b64decode(content.data), content.mime_type)
    if kind == "resource":
        return _resource(content.resource)
    if kind == "resource_link":
        about = f": {content.description}" if content.description else ""
        mime = f" ({content.mime_type})" if content.mime_type else ""
        return TextPart(f"[resource link {content.name}{mime} {content.uri}{about}]")
    return TextPart(f"[MCP content of type {kind!r}, not shown]")


def _resource(resource: Any) -> TextPart | BinaryPart:
    """An embedded resource: its text (a blob of a text type decoded), or its bytes when
    a model can be shown them, else a line saying what they are."""
    import base64

    if hasattr(resource, "text"):
        return TextPart(f"[resource {resource.uri}]\n{resource.text}")
    mime = getattr(resource, "mime_type", None) or "application/octet-stream"
    data = base64.b64decode(resource.blob)
    text = _text_of(data, mime)
    if text is not None:
        return TextPart(f"[resource {resource.uri}]\n{text}")
    if mime.startswith(_SHOWN_BINARY):
        return BinaryPart(data, mime)
    return TextPart(f"[resource {resource.uri}: {len(data):,} bytes of {mime}, not shown]")


def resource_part(contents: Any) -> TextPart | BinaryPart:
    """One piece of a resource read for the user's code: text (a blob of a text type
    decoded), or the bytes of any other type."""
    import base64

    if hasattr(contents, "text"):
        return TextPart(contents.text)
    mime = contents.mime_type or "application/octet-stream"
    data = base64.b64decode(contents.blob)
    text = _text_of(data, mime)
    return BinaryPart(data, mime) if text is None else TextPart(text)
