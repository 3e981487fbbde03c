"""`@tool` turns a typed function into a `Tool` the model can call."""

from __future__ import annotations

import asyncio
import inspect
import json
import logging
import types
import typing
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, overload

from tether.errors import ConfigurationError, ToolError, ToolFatalError, describe
from tether.messages import (
    BinaryPart,
    ContentPart,
    TextPart,
    ToolCall,
    ToolResult,
    valid_unicode,
)
from tether.models.base import ToolSpec
from tether.state import ToolContext

if TYPE_CHECKING:
    import pydantic

# pydantic is imported where a tool is first built or run, not here: `from tether import
# tool` (every program defining a tool) stays fast, and pydantic loads with the first tool.

__all__ = ["OPEN_CONTEXT", "Tool", "tool"]

OPEN_CONTEXT = "\0tether_context"
"""The `context_param` of a tool whose arguments are whatever another system defines (an
MCP server's tool, a LangChain tool): no argument is named so, so every argument reaches
that system unchanged, one named `context` too."""

logger = logging.getLogger("tether.tools")

ToolFunction = Callable[..., Any]


@dataclass(frozen=True, slots=True)
class Tool:
    """A tool: what the model sees (name, description, argument schema) and what runs.

    Build one with `@tool`. `read_only` marks tools without side effects; `idempotent`
    marks tools that are safe to run twice; `timeout_seconds` bounds one call.
    `path_param` names the argument that holds the file or directory a call works on:
    the calls of one turn whose paths overlap then run one after another, in the order
    the model gave them (read-only calls among themselves still run together).
    """

    name: str
    description: str
    args_model: type[pydantic.BaseModel]
    function: ToolFunction
    context_param: str | None = None
    read_only: bool = False
    idempotent: bool = False
    timeout_seconds: float | None = None
    parameters: Mapping[str, Any] = field(default_factory=dict)
    path_param: str | None = None
    _is_async: bool = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "_is_async", inspect.iscoroutinefunction(self.function))

    @property
    def spec(self) -> ToolSpec:
        """The tool as sent to the model."""
        return ToolSpec(self.name, self.description, self.parameters)

    def path_of(self, call: ToolCall) -> str | None:
        """The path the call names in `path_param` (or that argument's default), as
        given; None when the tool has no `path_param` or the call names no text there."""
        if self.path_param is None or not isinstance(call.args, dict):
            return None
        value = call.args.get(self.path_param)
        if value is None:
            field_info = self.args_model.model_fields.get(self.path_param)
            value = None if field_info is None else field_info.default
        return value if isinstance(value, str) else None

    async def run(
        self, call: ToolCall, context: ToolContext, *, timeout_seconds: float | None = None
    ) -> ToolResult:
        """Validate the call's arguments, run the function and wrap what it returns.

        Every failure the model can act on becomes an error result. `ToolFatalError` and
        cancellation propagate: they end the run, not just the call.
        """
        args = self._validate(call)
        if isinstance(args, str):
            return ToolResult.of(call, args, is_error=True)
        timeout = _smaller(self.timeout_seconds, timeout_seconds)
        try:
            async with asyncio.timeout(timeout) as scope:
                value = await self._call(args, context)
            content = content_of(value)
        except ToolFatalError:
            raise
        except ToolError as exc:
            return ToolResult.of(call, str(exc), is_error=True)
        except Exception as exc:
            if isinstance(exc, TimeoutError) and scope.expired():
                text = f"Tool '{self.name}' timed out after {timeout:g} s."
                if not self.read_only:  # it may have written just as it ran out of time
                    text += " It may have taken effect: check before calling it again."
            else:
                logger.debug("tool %s raised", self.name, exc_info=True)
                text = f"Tool '{self.name}' failed: {describe(exc)}"
            return ToolResult.of(call, text, is_error=True)
        return ToolResult(call.id, call.name, content)

    def _validate(self, call: ToolCall) -> pydantic.BaseModel | str:
        """The validated arguments, or the error text for the model."""
        args = decode_args(self.name, call.args)
        if isinstance(args, str):
            return args
        import pydantic  # loaded already: the tool's model was built with it

        try:
            return self.args_model.model_validate(args)
        except pydantic.ValidationError as exc:
            return validation_message(self.name, exc)

    async def _call(self, args: pydantic.BaseModel, context: ToolContext) -> Any:
        kwargs = dict(vars(args))  # the validated fields, nested models kept as models
        kwargs.update(args.__pydantic_extra__ or {})  # models that allow extra fields
        if self.context_param is not None:
            kwargs[self.context_param] = context
        if self._is_async:
            return await self.function(**kwargs)
        # Sync tools run in a worker thread so parallel calls and timeouts keep working.
        value = await asyncio.to_thread(self.function, **kwargs)
        if inspect.isawaitable(value):
            value = await value
        return value


def decode_args(tool_name: str, args: dict[str, Any] | str) -> dict[str, Any] | str:
    """A call's arguments as a JSON object, or the error text when they are not one."""
    decoded: object = args
    if isinstance(args, str):
        try:
            decoded = json.loads(args) if args.strip() else {}
        except json.JSONDecodeError as exc:
            return (
                f"The arguments for '{tool_name}' are not valid JSON ({exc}). "
                "Send them again as one JSON object."
            )
        except (RecursionError, ValueError):  # nested too deep, a number too long to read
            return (
                f"The arguments for '{tool_name}' could not be read: they nest too deep or "
                "hold a number too long. Send them again as one plain JSON object."
            )
    if not isinstance(decoded, dict):
        return (
            f"The arguments for '{tool_name}' must be a JSON object, "
            f"got {type(decoded).__name__}. Send them again as one JSON object."
        )
    return decoded


def validation_message(tool_name: str, exc: pydantic.ValidationError) -> str:
    """A pydantic error as a short list the model can act on, one line per field."""
    lines = [f"Invalid arguments for '{tool_name}':"]
    for error in exc.errors(include_url=False):
        where = ".".join(str(part) for part in error["loc"]) or "(arguments)"
        line = f"- {where}: {error['msg']}"
        if error["type"] != "missing":
            line += f" (got {_short_repr(error['input'])})"
        lines.append(line)
    lines.append(f"Fix these and call '{tool_name}' again.")
    return "\n".join(lines)


def _smaller(a: float | None, b: float | None) -> float | None:
    """The tighter of two optional limits."""
    if a is None or b is None:
        return b if a is None else a
    return min(a, b)


def _short_repr(value: Any, limit: int = 80) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def content_of(value: Any) -> tuple[ContentPart, ...]:
    """Turn what a tool returned into content parts: text, binary, or JSON for the rest.

    Whatever the value, the parts are valid to send and to save: bytes that are not
    UTF-8 and lone surrogates become U+FFFD, bytes inside structures become base64.
    Raises `ToolError` for a value that cannot be shown at all (its `str()` raised).
    """
    if isinstance(value, str):
        return (TextPart(valid_unicode(value)),)
    if isinstance(value, bytes | bytearray | memoryview):
        return (TextPart(bytes(value).decode("utf-8", errors="replace")),)
    if isinstance(value, TextPart):
        return content_of(value.text)
    if isinstance(value, BinaryPart):
        return (value,)
    if isinstance(value, list | tuple) and any(isinstance(v, TextPart | BinaryPart) for v in value):
        parts: list[ContentPart] = []
        for item in value:
            parts.extend(content_of(item))
        return tuple(parts)
    import pydantic_core  # loaded with the first tool built

    try:
        text = pydantic_core.to_json(value, fallback=str, bytes_mode="base64").decode()
    except Exception as exc:
        raise ToolError(
            f"The tool returned a {type(value).__name__} that cannot be shown as text "
            f"({describe(exc)})"
        ) from None
    return content_of(text)


@overload
def tool(function: ToolFunction, /) -> Tool: ...


@overload
def tool(
    *,
    name: str | None = None,
    description: str | None = None,
    read_only: bool = False,
    idempotent: bool = False,
    timeout_seconds: float | None = None,
    path_param: str | None = None,
) -> Callable[[ToolFunction], Tool]: ...


def tool(
    function: ToolFunction | None = None,
    /,
    *,
    name: str | None = None,
    description: str | None = None,
    read_only: bool = False,
    idempotent: bool = False,
    timeout_seconds: float | None = None,
    path_param: str | None = None,
) -> Tool | Callable[[ToolFunction], Tool]:
    """Make a tool from a sync or async function with typed parameters.

    The docstring's first paragraph becomes the description and its argument section
    (Google, NumPy or Sphinx style) describes each parameter. A parameter typed
    `ToolContext` receives the run's context and is hidden from the model. See `Tool`
    for the flags.

        @tool
        async def add(a: int, b: int) -> int:
            \"\"\"Add two integers.\"\"\"
            return a + b
    """

    def build(fn: ToolFunction) -> Tool:
        return _build_tool(
            fn,
            name=name,
            description=description,
            read_only=read_only,
            idempotent=idempotent,
            timeout_seconds=timeout_seconds,
            path_param=path_param,
        )

    if function is not None:
        return build(function)
    return build


def _build_tool(
    fn: ToolFunction,
    *,
    name: str | None,
    description: str | None,
    read_only: bool,
    idempotent: bool,
    timeout_seconds: float | None,
    path_param: str | None = None,
) -> Tool:
    if not callable(fn):
        raise ConfigurationError(f"@tool needs a function, got {type(fn).__name__}")
    tool_name = name or str(getattr(fn, "__name__", ""))
    if not _is_valid_tool_name(tool_name):
        raise ConfigurationError(
            f"tool name {tool_name!r} must be letters, digits, '_' or '-' (at most 64)"
        )
    if timeout_seconds is not None and timeout_seconds <= 0:
        raise ConfigurationError(f"timeout_seconds must be positive, got {timeout_seconds}")
    summary, arg_docs = _parse_docstring(inspect.getdoc(fn) or "")
    args_model, schema, context_param = _args_model(fn, tool_name, arg_docs)
    if path_param is not None and path_param not in args_model.model_fields:
        raise ConfigurationError(
            f"tool {tool_name!r}: path_param {path_param!r} is not one of its parameters "
            f"({', '.join(args_model.model_fields) or 'none'})"
        )
    return Tool(
        name=tool_name,
        description=description or summary or tool_name,
        args_model=args_model,
        function=fn,
        context_param=context_param,
        read_only=read_only,
        idempotent=idempotent,
        timeout_seconds=timeout_seconds,
        parameters=_clean_schema(schema),
        path_param=path_param,
    )


def _is_valid_tool_name(name: str) -> bool:
    return 0 < len(name) <= 64 and all(c.isalnum() or c in "_-" for c in name)


def _args_model(
    fn: ToolFunction, tool_name: str, arg_docs: Mapping[str, str]
) -> tuple[type[pydantic.BaseModel], dict[str, Any], str | None]:
    """The pydantic model of the arguments, its JSON schema, and the context parameter."""
    try:
        hints = _parameter_hints(fn)
    except (NameError, TypeError) as exc:
        raise ConfigurationError(
            f"cannot read the type hints of tool {tool_name!r}: {exc}"
        ) from exc
    import pydantic  # the first tool built loads it (see the module's top)

    fields: dict[str, Any] = {}
    context_param: str | None = None
    for param in inspect.signature(fn).parameters.values():
        annotation = hints.get(param.name, Any)
        if _is_context(annotation):
            context_param = param.name
            continue
        if param.kind in (param.VAR_POSITIONAL, param.VAR_KEYWORD, param.POSITIONAL_ONLY):
            raise ConfigurationError(
                f"tool {tool_name!r}: parameter {param.name!r} must be a normal or keyword "
                "parameter; *args, **kwargs and positional-only parameters cannot be described "
                "to a model"
            )
        default = ... if param.default is param.empty else param.default
        fields[param.name] = (
            annotation,
            pydantic.Field(default, description=arg_docs.get(param.name)),
        )
    try:
        model = pydantic.create_model(
            f"{tool_name}_args",
            __config__=pydantic.ConfigDict(extra="forbid", arbitrary_types_allowed=False),
            **fields,
        )
        schema = model.model_json_schema()
    except (
        pydantic.PydanticSchemaGenerationError,
        pydantic.PydanticInvalidForJsonSchema,
        NameError,
        TypeError,
        ValueError,
    ) as exc:
        raise ConfigurationError(
            f"tool {tool_name!r} has a parameter pydantic cannot describe: {exc}"
        ) from exc
    return model, schema, context_param


def _parameter_hints(fn: ToolFunction) -> dict[str, Any]:
    """Resolved parameter annotations; the return annotation is never sent, so never read."""
    annotations = {
        key: value for key, value in getattr(fn, "__annotations__", {}).items() if key != "return"
    }
    namespace = getattr(inspect.unwrap(fn), "__globals__", {})
    holder = types.SimpleNamespace(__annotations__=annotations)
    return typing.get_type_hints(holder, globalns=namespace, include_extras=True)


def _is_context(annotation: Any) -> bool:
    return annotation is ToolContext or typing.get_origin(annotation) is ToolContext


def _parse_docstring(doc: str) -> tuple[str, dict[str, str]]:
    if not doc:
        return "", {}
    import docstring_parser  # imported on first use: few agents define tools at import time

    parsed = docstring_parser.parse(doc)
    # The parser cuts the first line off as the summary: a first sentence that wraps onto
    # the next line goes on with a line break, not the paragraph break after a summary.
    between = "\n\n" if parsed.blank_after_short_description else "\n"
    summary = between.join(
        part for part in (parsed.short_description, parsed.long_description) if part
    )
    # A description wrapped over several docstring lines is one sentence to the model.
    params = {p.arg_name: " ".join(p.description.split()) for p in parsed.params if p.description}
    return summary, params


def _clean_schema(schema: dict[str, Any]) -> dict[str, Any]:
    """Drop the titles pydantic adds: they repeat the names and cost prompt tokens."""

    def clean(node: Any, in_properties: bool = False) -> Any:
        if isinstance(node, dict):
            return {
                key: clean(value, in_properties=key in ("properties", "$defs"))
                for key, value in node.items()
                if in_properties or not (key == "title" and isinstance(value, str))
            }
        if isinstance(node, list):
            return [clean(item) for item in node]
        return node

    cleaned: dict[str, Any] = clean(schema)
    return cleaned
