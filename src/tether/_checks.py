"""Checks of the arguments people pass to tether's public functions: each mistake is a
`ConfigurationError` that names the argument, says what it takes and what it got."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any, TypeVar

from tether.errors import ConfigurationError

__all__ = ["each", "each_callable", "flag", "mapping", "optional_text"]

T = TypeVar("T")


def _got(value: object) -> str:
    text = repr(value)
    shown = text if len(text) <= 60 else text[:57] + "..."
    return f"got {type(value).__name__} {shown}"


def each(name: str, values: object, kinds: type[T] | tuple[type, ...], what: str) -> tuple[T, ...]:
    """`values` as a tuple, when it is a list (or other iterable) of `kinds`."""
    if isinstance(values, str | bytes | Mapping) or not isinstance(values, Iterable):
        raise ConfigurationError(f"{name} takes a list of {what}, {_got(values)}")
    items = tuple(values)
    for index, item in enumerate(items):
        if not isinstance(item, kinds):
            raise ConfigurationError(f"{name}[{index}] must be {what}, {_got(item)}")
    return items


def each_callable(
    name: str, values: object, what: str, *, also: tuple[type, ...] = ()
) -> tuple[Any, ...]:
    """`values` as a tuple, when it is a list of callables (or instances of `also`)."""
    items = each(name, values, object, what)
    for index, item in enumerate(items):
        if not callable(item) and not isinstance(item, also):
            raise ConfigurationError(f"{name}[{index}] must be {what}, {_got(item)}")
    return items


def optional_text(name: str, value: object) -> str | None:
    if value is not None and not isinstance(value, str):
        raise ConfigurationError(f"{name} must be a string or None, {_got(value)}")
    return value


def flag(name: str, value: object) -> bool:
    if not isinstance(value, bool):
        raise ConfigurationError(f"{name} must be True or False, {_got(value)}")
    return value


def mapping(
    name: str, value: object, what: str, *, values: type | None = None
) -> Mapping[str, Any] | None:
    """`value` when it is None or a mapping with string keys (and `values` as values)."""
    if value is None:
        return None
    if not isinstance(value, Mapping) or not all(isinstance(k, str) for k in value):
        raise ConfigurationError(f"{name} takes a dict of {what}, {_got(value)}")
    for key, item in value.items():
        if values is not None and not isinstance(item, values):
            raise ConfigurationError(f"{name}[{key!r}] must be a {values.__name__}, {_got(item)}")
    return value
