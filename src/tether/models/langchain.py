"""Bring LangChain chat models and tools to tether (extra `tether[langchain]`).

```python
from langchain_anthropic import ChatAnthropic
from tether.models.langchain import LangChainModel, tools_from_langchain

agent = create_agent(LangChainModel(ChatAnthropic(model="claude-sonnet-5-5")),
                     tools=tools_from_langchain([search_tool]))
```

The chat model keeps its own client, retries and settings; tether drives it through
`bind_tools` and `astream` (a model that does not stream gives its reply whole). Its
thinking is shown and kept in the history, but is not sent back to it (LangChain has no
provider-neutral way to return signed reasoning).

Inside `tether.testing.no_real_models` (the pytest plugin's default), a chat model from
a provider's package (`langchain_openai`, `langchain_anthropic`, ...) is blocked unless
its base URL is on this machine; chat models written for a test are let through.
"""

from __future__ import annotations

import base64
import functools
import warnings
from collections.abc import AsyncIterator, Callable, Iterable, Mapping, Sequence
from typing import Any, TypeAlias

import pydantic

from tether.errors import (
    ConfigurationError,
    ModelError,
    ProviderBlockedError,
    ToolError,
    UsageEstimatedWarning,
    describe,
)
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
from tether.models.estimate import InputEstimate, output_tokens
from tether.models.profiles import ModelProfile
from tether.state import ToolContext
from tether.tools.tool import OPEN_CONTEXT, Tool

__all__ = ["LangChainModel", "tools_from_langchain"]

_FINISH = {
    "stop": "stop",
    "end_turn": "stop",
    "STOP": "stop",
    "tool_calls": "tool_calls",
    "tool_use": "tool_calls",
    "length": "length",
    "max_tokens": "length",
    "MAX_TOKENS": "length",
}


class LangChainModel(_sdk.Adapter):
    """A `langchain_core` `BaseChatModel` as a tether model.

    `name` and `provider` default to what the model reports for LangSmith (its model
    name and provider), which tether uses to find the price.
    """

    def __init__(
        self,
        chat_model: Any,
        *,
        name: str | None = None,
        provider: str | None = None,
        profile: ModelProfile | None = None,
    ) -> None:
        lc = _sdk.require("langchain_core.language_models", "langchain")()
        if not isinstance(chat_model, lc.BaseChatModel):
            raise ConfigurationError(
                f"LangChainModel takes a langchain_core BaseChatModel, "
                f"got {type(chat_model).__name__}"
            )
        self.chat_model = chat_model
        self._estimate = InputEstimate()  # for a model that reports no usage
        self._warned = False
        reported = _ls_params(chat_model)
        super().__init__(
            name or reported.get("ls_model_name") or type(chat_model).__name__,
            provider or reported.get("ls_provider"),
            profile,
        )

    def __repr__(self) -> str:
        return f"LangChainModel({type(self.chat_model).__name__}, name={self._name!r})"

    @property
    def server_url(self) -> str | None:
        """The base URL the chat model was given, when it has one."""
        return _base_url(self.chat_model)

    async def stream(self, request: ModelRequest) -> AsyncIterator[StreamItem]:
        if _sdk.blocked_reason is not None and _reaches_a_provider(self.chat_model):
            raise ProviderBlockedError(  # see tether.testing.no_real_models
                f"{_sdk.blocked_reason} (blocked: {self!r} would reach its provider; a "
                "chat model of your own, or one at a loopback base_url, is let through)"
            )
        runnable = self._bound(request)
        messages = to_langchain(request.system_prompt, request.messages)
        settings = request.settings
        kwargs: dict[str, Any] = dict(settings.extra)
        if settings.max_tokens is not None:
            kwargs["max_tokens"] = settings.max_tokens
        if settings.temperature is not None:
            kwargs["temperature"] = settings.temperature
        full: Any = None
        call_ids: dict[int, str] = {}
        call_names: dict[int, str] = {}
        positions: dict[int, int] = {}
        try:
            async for chunk in runnable.astream(messages, **kwargs):
                full = chunk if full is None else full + chunk
                for delta in _deltas(chunk, call_ids, call_names, positions):
                    yield delta
        except Exception as exc:
            if getattr(exc, "status_code", None) is None:
                raise ModelError(f"{self._name} failed: {describe(exc)}") from exc
            raise _sdk.model_error(
                exc, provider=self._provider or "the provider", model=self._name, key_hint="its key"
            ) from exc
        if full is None:
            raise ModelError(f"{self._name} streamed nothing")
        yield self._response(full, request)

    def _bound(self, request: ModelRequest) -> Any:
        if not request.tools:
            return self.chat_model
        tools = [
            {
                "type": "function",
                "function": {
                    "name": t.name,
                    "description": t.description,
                    "parameters": dict(t.parameters),
                },
            }
            for t in request.tools
        ]
        output = request.output_spec
        choice = output.name if request.force_output and output is not None else None
        try:
            return self.chat_model.bind_tools(tools, tool_choice=choice)
        except NotImplementedError as exc:
            raise ConfigurationError(
                f"{type(self.chat_model).__name__} does not support tools (no bind_tools)"
            ) from exc

    def _response(self, full: Any, request: ModelRequest) -> ModelResponse:
        parts: list[AssistantPart] = []
        for block in full.content_blocks:
            kind = block.get("type")
            if kind == "reasoning" and block.get("reasoning"):
                parts.append(ThinkingPart(block["reasoning"], provider=self._provider))
            elif kind == "text" and block.get("text"):
                parts.append(TextPart(block["text"]))
        for call in full.tool_calls:
            parts.append(ToolCall(call["name"], dict(call["args"]), call["id"] or _new_id()))
        for call in full.invalid_tool_calls:
            parts.append(ToolCall(call["name"] or "", call["args"] or "", call["id"] or _new_id()))
        metadata = full.response_metadata or {}
        reason = metadata.get("finish_reason") or metadata.get("stop_reason")
        finish = _FINISH.get(reason, reason) if isinstance(reason, str) else None
        if (
            finish == "length"
            and parts
            and isinstance(parts[-1], ToolCall)
            and getattr(full, "tool_call_chunks", None)
        ):
            # Cut off mid-call: LangChain's partial parse would make it look complete.
            last = parts[-1]
            parts[-1] = ToolCall(last.name, full.tool_call_chunks[-1].get("args") or "", last.id)
        model_name = metadata.get("model_name") or metadata.get("model") or self._name
        usage = (
            _usage(full.usage_metadata) if full.usage_metadata else self._estimated(request, parts)
        )
        message = AssistantMessage(tuple(parts), model_name, usage)
        return ModelResponse(message, finish, metadata.get("id"))  # LangChain's own id is a run's

    def _estimated(self, request: ModelRequest, parts: list[AssistantPart]) -> Usage:
        """Usage worked out from characters, said once: without it, token and cost limits
        would never fire."""
        if not self._warned:
            self._warned = True
            warnings.warn(
                UsageEstimatedWarning(
                    f"{self!r} reports no token usage; tokens (and so cost and the limits "
                    "on them) are estimated at four characters a token"
                ),
                stacklevel=2,
            )
        return Usage(
            input_tokens=self._estimate.tokens(request),
            output_tokens=output_tokens(parts),
            requests=1,
        )


Injected: TypeAlias = Mapping[str, Any] | Callable[[ToolContext], Mapping[str, Any]]
"""Values for the arguments LangChain tools hide from the model (`InjectedToolArg`): fixed,
or worked out for each call from its `ToolContext` (the run's `deps`, say)."""


def tools_from_langchain(tools: Iterable[Any], *, inject: Injected | None = None) -> list[Tool]:
    """LangChain `BaseTool`s (e.g. from `@langchain_core.tools.tool`) as tether tools.

    The model sees the same schema LangChain would send; LangChain validates the
    arguments and runs the tool as it runs a model's tool call (the call's id reaches an
    `InjectedToolCallId` argument, `handle_tool_error` applies, and a
    `content_and_artifact` tool's content goes to the model, its artifact stays with
    LangChain), and its errors go back to the model as tool errors.

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
    lc_tool: Any, hidden: frozenset[str], inject: Injected | None, **arguments: Any
) -> Any:
    """Run `lc_tool` as LangChain runs a model's tool call: with the call's id (for
    `InjectedToolCallId`), the application's values for its `InjectedToolArg` arguments
    (never the model's), its own error handling (`handle_tool_error`), and its content
    apart from its artifact (`response_format="content_and_artifact"`)."""
    context: ToolContext = arguments.pop(OPEN_CONTEXT)
    if hidden:
        given = inject(context) if callable(inject) else inject or {}
        arguments = {k: v for k, v in arguments.items() if k not in hidden}
        arguments.update({k: v for k, v in given.items() if k in hidden})
    call = {"type": "tool_call", "name": lc_tool.name, "args": arguments, "id": context.call.id}
    message = await lc_tool.ainvoke(call)
    content = getattr(message, "content", message)
    if not isinstance(content, str):
        content = _text_of(content)
    if getattr(message, "status", "success") == "error":
        raise ToolError(content or "failed")
    return content


def _text_of(content: Any) -> str:
    """A tool message's content blocks (or any value) as text."""
    if isinstance(content, list):
        return "\n".join(
            str(block.get("text", "")) if isinstance(block, dict) else str(block)
            for block in content
        )
    return str(content)


class _AnyArgs(pydantic.BaseModel):
    """LangChain validates its own tools' arguments; tether passes them through."""

    model_config = pydantic.ConfigDict(extra="allow")


def to_langchain(system_prompt: str, messages: Sequence[Message]) -> list[Any]:
    """tether messages as LangChain messages, the system prompt first."""
    from langchain_core import messages as lc

    out: list[Any] = [lc.SystemMessage(system_prompt)] if system_prompt else []
    for message in messages:
        if isinstance(message, AssistantMessage):
            calls = [
                {
                    "name": c.name,
                    "args": c.args if isinstance(c.args, dict) else {},
                    "id": c.id,
                    "type": "tool_call",
                }
                for c in message.tool_calls
            ]
            out.append(lc.AIMessage(content=message.text, tool_calls=calls))
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


def _deltas(
    chunk: Any, call_ids: dict[int, str], call_names: dict[int, str], positions: dict[int, int]
) -> list[StreamDelta]:
    """A chunk's deltas; the dicts, by LangChain's chunk index, carry what earlier chunks
    said of each call (its id, its tool, its place among the reply's calls)."""
    deltas = []
    text = chunk.text
    if text:
        deltas.append(StreamDelta("text", text))
    # A model that does not stream hands back one whole AIMessage, with no chunks.
    for piece in getattr(chunk, "tool_call_chunks", None) or ():
        index = piece.get("index") or 0
        position = positions.setdefault(index, len(positions))
        if piece.get("id"):
            call_ids[index] = piece["id"]
        if piece.get("name"):
            call_names[index] = piece["name"]
        if piece.get("args"):
            call_id, tool = call_ids.get(index), call_names.get(index)
            deltas.append(StreamDelta("tool_call", piece["args"], call_id, tool, position))
    return deltas


def _usage(metadata: Any) -> Usage:
    details = metadata.get("input_token_details") or {}
    return Usage(
        input_tokens=_sdk.usage_int(metadata.get("input_tokens")),
        output_tokens=_sdk.usage_int(metadata.get("output_tokens")),
        cache_read_tokens=_sdk.usage_int(details.get("cache_read")),
        cache_write_tokens=_sdk.usage_int(details.get("cache_creation")),
        requests=1,
    )


_URL_FIELDS = ("openai_api_base", "base_url", "anthropic_api_url", "api_base", "endpoint")


def _reaches_a_provider(chat_model: Any) -> bool:
    """Whether `chat_model` comes from a provider's LangChain package (langchain_openai,
    langchain_anthropic, ...) and talks to a server off this machine."""
    package = type(chat_model).__module__.split(".")[0]
    if not package.startswith("langchain_") or package == "langchain_core":
        return False
    url = _base_url(chat_model)
    return not _sdk.on_this_machine(url) if url is not None else True


def _base_url(chat_model: Any) -> str | None:
    url = next(
        (getattr(chat_model, f, None) for f in _URL_FIELDS if getattr(chat_model, f, None)), None
    )
    return None if url is None else str(url)


def _ls_params(chat_model: Any) -> dict[str, Any]:
    try:
        return dict(chat_model._get_ls_params())
    except Exception:  # a model that cannot describe itself just has no defaults
        return {}


def _new_id() -> str:
    from tether.messages import new_call_id

    return new_call_id()
