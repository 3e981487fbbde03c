"""Sandbox backends by name: tether's own ("local", "container") and those that other
packages register in the `tether.sandboxes` entry point group.

A package that adapts a provider (see `RemoteSandbox`) declares, in its pyproject.toml:

    [project.entry-points."tether.sandboxes"]
    myprovider = "my_package.sandbox:MyProviderSandbox"

and `sandbox("myprovider", **options)` makes one: the entry point's object is called
with the options and must return a `SandboxBackend`.
"""

from __future__ import annotations

from collections.abc import Callable
from importlib import metadata
from typing import Any

from tether.backends.sandbox.base import SandboxBackend
from tether.errors import ConfigurationError

__all__ = ["ENTRY_POINT_GROUP", "available", "sandbox"]

ENTRY_POINT_GROUP = "tether.sandboxes"
_OWN = {
    "local": "tether.backends.sandbox.local:LocalSandbox",
    "container": "tether.backends.sandbox.container:ContainerSandbox",
}


def available() -> dict[str, str]:
    """Every sandbox there is a name for, and where it is (`module:object`). tether's
    own names cannot be taken by a package."""
    found = {entry.name: entry.value for entry in metadata.entry_points(group=ENTRY_POINT_GROUP)}
    return {**found, **_OWN}


def sandbox(name: str, /, *args: Any, **options: Any) -> SandboxBackend:
    """The sandbox backend `name` names, made with `args` and `options`."""
    known = available()
    if name not in known:
        raise ConfigurationError(
            f"no sandbox is named {name!r}; there are {', '.join(sorted(known))}. A provider's "
            f"package adds one in the {ENTRY_POINT_GROUP!r} entry point group"
        )
    maker = _load(name, known[name])
    made = maker(*args, **options)
    if not isinstance(made, SandboxBackend):
        raise ConfigurationError(
            f"the sandbox {name!r} ({known[name]}) made a {type(made).__name__}, which is not "
            "a SandboxBackend (it needs the file operations, execute, upload and download)"
        )
    return made


def _load(name: str, where: str) -> Callable[..., Any]:
    module, _, attribute = where.partition(":")
    try:
        loaded = metadata.EntryPoint(name, where, ENTRY_POINT_GROUP).load()
    except ImportError as exc:
        raise ConfigurationError(
            f"the sandbox {name!r} needs what {module} imports, which is not installed "
            f"({exc}); install the package that provides it (for tether's own providers, "
            f"pip install 'tether[{name}]')"
        ) from None
    except AttributeError:
        raise ConfigurationError(f"the sandbox {name!r}: {module} has no {attribute}") from None
    if not callable(loaded):
        raise ConfigurationError(f"the sandbox {name!r} ({where}) is not callable")
    return loaded  # type: ignore[no-any-return]
