"""LangChain tools as tether tools (see `tether.models.langchain.tools_from_langchain`).

A LangChain tool defines its own arguments, so tether passes whatever the model sent
through to it, under whatever names the tool's schema uses: the function tether calls
takes its own values positionally and every argument by keyword, so no argument name
(`hidden`, `inject`, `self`, ...) can collide with one of tether's. What the tool
returns keeps its images, audio and files as binary parts the model can see.
"""

from __future__ import annotations

import base64
import binascii
import functools
import json
from collections.abc import Callable, Iterable, Mapping
from typing import Any, TypeAlias

import pydantic

from tether.errors import ConfigurationError, ToolError
from tether.messages import BinaryPart, TextPart
from tether.models import _sdk
from tether.state import ToolContext
from tether.tools.tool import OPEN_CONTEXT, Tool

__all__ = ["Injected", "tools_from_langchain"]

Injected: TypeAlias = Mapping[str, Any] | Callable[[ToolContext], Mapping[str, Any]]
"""Values for the arguments LangChain tools hide from the model (`InjectedToolArg`): fixed,
or worked out for each call from its `ToolContext` (the run's `deps`, say)."""


def tools_from_langchain(tools: Iterable[Any], *, inject: Injected | None = None) -> list[Tool]:
    """LangChain `BaseTool`s (e.g. from `@langchain_core.tools.tool`) as tether tools.

    The model sees the same schema LangChain would send; LangChain validates the
    arguments and runs the tool as it runs a model's tool call (the call's id reaches an
    `InjectedToolCallId` argument, `handle_tool_error` applies, and a
    `content_and_artifact` tool's content goes to the model, its artifact stays with
    LangChain), and its errors go back to the model as tool errors. Content blocks the
    tool returns (text, and images, audio, video or files as base64 or data URLs, in
    LangChain's standard or older block shapes) reach the model as text and binary parts.

    Arguments annotated `InjectedToolArg` take their values from `inject`, a mapping or
    a function of the call's `ToolContext`; the model never sets them, even if it sends
    them. A required one that `inject` (as a mapping) lacks is a ConfigurationError.
    """
    lc_tools = _sdk.require("langchain_core.tools", "langchain")()
    from langchain_core.utils.function_calling import convert_to_openai_tool

    converted = []
    for lc_tool in tools:
        if not isinstance(lc_tool, lc_tools.BaseTool):
            raise ConfigurationError(
                f"tools_from_langchain takes LangChain BaseTool objects, "
                f"got {type(lc_tool).__name__}"
            )
        hidden, required = _injected(lc_tool, lc_tools)
        if isinstance(inject, Mapping) and required - inject.keys():
            missing = ", ".join(sorted(required - inject.keys()))
            raise ConfigurationError(
                f"the LangChain tool {lc_tool.name!r} needs {missing} from the application "
                "(InjectedToolArg): give it in tools_from_langchain(inject={...})"
            )
        schema = convert_to_openai_tool(lc_tool)["function"]
        if OPEN_CONTEXT in (schema.get("parameters") or {}).get("properties", {}):
            raise ConfigurationError(  # the one name tether keeps for itself
                f"the LangChain tool {lc_tool.name!r} has an argument named {OPEN_CONTEXT!r}, "
                "which tether reserves: rename it"
            )
        converted.append(
            Tool(
                name=lc_tool.name,
                description=schema.get("description") or lc_tool.name,
                args_model=_AnyArgs,
                function=functools.partial(_run_langchain_tool, lc_tool, hidden, inject),
                context_param=OPEN_CONTEXT,
                parameters=schema.get("parameters") or {"type": "object", "properties": {}},
            )
        )
    return converted


def _injected(lc_tool: Any, lc_tools: Any) -> tuple[frozenset[str], frozenset[str]]:
    """The tool's `InjectedToolArg` arguments (the call id's aside: LangChain fills that
    in), and those of them without a default."""
    full = lc_tool.get_input_schema()
    fields = getattr(full, "model_fields", None)
    if not fields:
        return frozenset(), frozenset()

    def marked(name: str, kind: type) -> bool:
        return any(
            isinstance(m, kind) or (isinstance(m, type) and issubclass(m, kind))
            for m in fields[name].metadata
        )

    hidden = frozenset(
        name
        for name in fields
        if marked(name, lc_tools.InjectedToolArg) and not marked(name, lc_tools.InjectedToolCallId)
    )
    return hidden, frozenset(n for n in hidden if fields[n].is_required())


async def _run_langchain_tool(
    lc_tool: Any, hidden: frozenset[str], inject: Injected | None, /, **arguments: Any
) -> str | list[TextPart | BinaryPart]:
    """Run `lc_tool` as LangChain runs a model's tool call: with the call's id (for
    `InjectedToolCallId`), the application's values for its `InjectedToolArg` arguments
    (never the model's), its own error handling (`handle_tool_error`), and its content
    apart from its artifact (`response_format="content_and_artifact"`).

    tether's own values come positionally, so `arguments` holds the model's under any
    name at all."""
    context: ToolContext = arguments.pop(OPEN_CONTEXT)
    if hidden:
        given = inject(context) if callable(inject) else inject or {}
        arguments = {k: v for k, v in arguments.items() if k not in hidden}
        arguments.update({k: v for k, v in given.items() if k in hidden})
    call = {"type": "tool_call", "name": lc_tool.name, "args": arguments, "id": context.call.id}
    message = await lc_tool.ainvoke(call)
    content = getattr(message, "content", message)
    result: str | list[TextPart | BinaryPart] = (
        content if isinstance(content, str) else content_parts(message)
    )
    if getattr(message, "status", "success") == "error":
        text = result if isinstance(result, str) else "\n".join(_texts(result))
        raise ToolError(text or "failed")
    return result


def content_parts(message: Any) -> list[TextPart | BinaryPart]:
    """A LangChain message's content (or any other value a tool gave) as parts: its text
    blocks as text, its images, audio, video and files as binary parts."""
    from langchain_core.messages import BaseMessage, ToolMessage

    content = getattr(message, "content", message)
    if not isinstance(content, list):
        return [TextPart(content if isinstance(content, str) else str(content))]
    if not isinstance(message, BaseMessage):
        message = ToolMessage(content=content, tool_call_id="")
    # content_blocks puts every shape LangChain knows (its standard blocks, the older
    # `source_type` ones, OpenAI's image_url, Anthropic's image source) in one shape.
    return [_part(block) for block in message.content_blocks]


def _part(block: Mapping[str, Any]) -> TextPart | BinaryPart:
    """One standard LangChain content block as a tether part."""
    kind = block.get("type")
    if kind in ("text", "text-plain") and isinstance(block.get("text"), str):
        return TextPart(block["text"])
    if kind in ("image", "audio", "video", "file"):
        return _binary(block, kind)
    value = block.get("value", block) if kind == "non_standard" else block
    return TextPart(json.dumps(value, default=str))


def _binary(block: Mapping[str, Any], kind: str) -> TextPart | BinaryPart:
    """A media block as a binary part, or the text saying what it was when its bytes are
    not in it (a URL or a provider's file id: tether does not fetch them)."""
    data, media_type = block.get("base64"), block.get("mime_type")
    url = block.get("url")
    if data is None and isinstance(url, str) and url.startswith("data:"):
        head, _, data = url[5:].partition(",")
        media_type = media_type or head.split(";")[0] or None
        if not head.endswith(";base64"):  # percent-encoded text, not base64
            return TextPart(f"[{kind} given as a data URL that is not base64: not shown]")
    if not isinstance(data, str):
        where = url or block.get("file_id") or block.get("id") or "no data"
        return TextPart(f"[{kind}: {where}]")
    try:
        raw = base64.b64decode(data, validate=True)
    except (binascii.Error, ValueError):
        return TextPart(f"[{kind} whose base64 data is not valid: not shown]")
    media_type = media_type or _sniffed(raw)
    if not isinstance(media_type, str) or "/" not in media_type:
        return TextPart(f"[{kind} of {len(raw)} bytes with no media type: not shown]")
    return BinaryPart(raw, media_type)


_SIGNATURES = (
    (b"\x89PNG\r\n\x1a\n", "image/png"),
    (b"\xff\xd8\xff", "image/jpeg"),
    (b"GIF8", "image/gif"),
    (b"%PDF-", "application/pdf"),
)


def _sniffed(data: bytes) -> str | None:
    """The media type the first bytes of `data` say, for the common kinds."""
    if data[:4] == b"RIFF" and data[8:12] == b"WEBP":
        return "image/webp"
    return next((kind for magic, kind in _SIGNATURES if data.startswith(magic)), None)


def _texts(parts: Iterable[TextPart | BinaryPart]) -> list[str]:
    return [p.text for p in parts if isinstance(p, TextPart)]


class _AnyArgs(pydantic.BaseModel):
    """LangChain validates its own tools' arguments; tether passes them through."""

    model_config = pydantic.ConfigDict(extra="allow")
