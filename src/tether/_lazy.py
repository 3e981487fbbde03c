"""Names of a package loaded from their modules on first use (PEP 562), so that
`from tether import create_agent` loads only what it needs."""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping, MutableMapping
from typing import Any

__all__ = ["lazy_names"]


def lazy_names(
    package: str, namespace: MutableMapping[str, Any], homes: Mapping[str, str]
) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """The `__getattr__` and `__dir__` of `package`: its `namespace` gains each name of
    `homes` the first time it is asked for, from the module named there (a full name,
    "tether.x", or one of the package's own submodules)."""

    def getattr_(name: str) -> Any:
        home = homes.get(name)
        if home is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        module = home if home.startswith("tether.") else f"{package}.{home}"
        value = getattr(importlib.import_module(module), name)
        namespace[name] = value  # later lookups skip this function
        return value

    def dir_() -> list[str]:
        return sorted([*namespace, *namespace.get("__all__", ())])

    return getattr_, dir_
