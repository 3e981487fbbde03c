"""Checks of the arguments people pass to tether's public functions: each mistake is a
`ConfigurationError` that names the argument, says what it takes and what it got.

Groups of options are pydantic models (`validated`): each field's type does the checking
and one of `Must`, `ListOf` or `DictOf` in its `Annotated` metadata says how its error
reads. A validator may also raise a `ConfigurationError` of its own, which is raised as is.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Annotated, Any, TypeVar

import pydantic
from pydantic_core import CoreSchema, ErrorDetails, core_schema

from tether.errors import ConfigurationError

__all__ = ["DictOf", "Instance", "ListOf", "Must", "each", "got", "validated"]

T = TypeVar("T")
Options = TypeVar("Options", bound=pydantic.BaseModel)


def got(value: object) -> str:
    """`got <type> <repr>`, the repr cut to a line: the end of every argument error."""
    text = repr(value)
    shown = text if len(text) <= 60 else text[:57] + "..."
    return f"got {type(value).__name__} {shown}"


def each(name: str, values: object, kinds: type[T] | tuple[type, ...], what: str) -> tuple[T, ...]:
    """`values` as a tuple, when it is a list (or other iterable) of `kinds`."""
    if isinstance(values, str | bytes | Mapping) or not isinstance(values, Iterable):
        raise ConfigurationError(f"{name} takes a list of {what}, {got(values)}")
    items = tuple(values)
    for index, item in enumerate(items):
        if not isinstance(item, kinds):
            raise ConfigurationError(f"{name}[{index}] must be {what}, {got(item)}")
    return items


class _IsInstance:
    """pydantic metadata: the value must already be an instance of the annotated class.
    Without it pydantic would build a dataclass (`Limits`, say) from a dict."""

    def __get_pydantic_core_schema__(
        self, source: type[Any], handler: pydantic.GetCoreSchemaHandler
    ) -> CoreSchema:
        return core_schema.is_instance_schema(source)


Instance = Annotated[T, _IsInstance()]
"""An instance of `T`, taken as it is."""


@dataclass(frozen=True, slots=True)
class Must:
    """An option's error reads `<name> must <text>, got <value>`, then `hint(value)`."""

    text: str
    hint: Callable[[object], str] | None = None

    def message(self, name: str, value: object, where: Sequence[Any], item: object) -> str:
        more = self.hint(value) if self.hint is not None else ""
        return f"{name} must {self.text}, {got(value)}{more}"


@dataclass(frozen=True, slots=True)
class ListOf:
    """A list option's error reads `<name> takes a list of <each>, got ...`, or
    `<name>[<index>] must be <each>, got ...` for one item."""

    each: str

    def message(self, name: str, value: object, where: Sequence[Any], item: object) -> str:
        if where and isinstance(where[0], int):
            return f"{name}[{where[0]}] must be {self.each}, {got(item)}"
        return f"{name} takes a list of {self.each}, {got(value)}"


@dataclass(frozen=True, slots=True)
class DictOf:
    """A mapping option's error reads `<name> takes a dict of <what>, got ...`, or
    `<name>[<key>] must be <values>, got ...` for one value."""

    what: str
    values: str = "anything"

    def message(self, name: str, value: object, where: Sequence[Any], item: object) -> str:
        if where and where[-1] != "[key]":
            return f"{name}[{where[0]!r}] must be {self.values}, {got(item)}"
        return f"{name} takes a dict of {self.what}, {got(value)}"


def validated(group: type[Options], given: Mapping[str, object]) -> Options:
    """The `group` of options `given` by name; the first mistake in them is a
    `ConfigurationError` worded by the field's `Must`, `ListOf` or `DictOf`."""
    try:
        return group.model_validate(given)
    except pydantic.ValidationError as exc:
        error = _configuration_error(group, given, exc.errors()[0])
        # pydantic's own error adds nothing; a validator's error keeps the cause it had
        raise error from error.__cause__


def _configuration_error(
    group: type[pydantic.BaseModel], given: Mapping[str, object], error: ErrorDetails
) -> Exception:
    raised = error.get("ctx", {}).get("error")
    if isinstance(raised, Exception):  # a validator's own error, worded where it was raised
        return raised
    first, *where = error["loc"] or ("",)
    name = str(first)
    field = group.model_fields.get(name)
    says = [m for m in field.metadata if isinstance(m, Must | ListOf | DictOf)] if field else []
    if not says:
        return ConfigurationError(f"{name or group.__name__}: {error['msg']}")
    return ConfigurationError(says[0].message(name, given.get(name), where, error["input"]))
