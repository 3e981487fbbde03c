"""Who may read and write what: ordered rules and a policy hook, in one guard.

```python
permissions=[Rule(operations={"write"}, paths=["/**/.env", "/secrets/**"], mode="deny"),
             Rule(operations={"read", "write"}, paths=["/workspace/**"], mode="allow")]
```

Rules are checked in order and the first that matches decides; no match allows. The
guard wraps the backend itself, so ls, glob and grep never show a path the agent may
not read. Guards nest: a subagent's guard around its parent's can only narrow access.

Rules hold on what is really opened. Backends do not follow symlinks, so the path a
rule is checked on is the path opened; and a backend that can hold hard links (the
`FilesystemBackend`) is handed the guard's verdict (`guarded`), so that it refuses a
hard-linked file when any of its names in the root is denied.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol, runtime_checkable

from tether.backends.base import (
    Admits,
    Backend,
    Change,
    FileInfo,
    GrepHit,
    Operation,
    as_given,
    name_paths,
    update,
)
from tether.backends.errors import BackendError
from tether.backends.paths import clean
from tether.errors import ConfigurationError

__all__ = ["Operation", "PermissionedBackend", "Policy", "Rule"]

Policy = Callable[[Operation, str], str | None]
"""Called before every operation with its kind and path; a returned string refuses it
(and is shown to the model), as does raising `BackendError`."""


@runtime_checkable
class Guardable(Protocol):
    """A backend that applies a guard's verdict itself, where a file can have several
    names (see `FilesystemBackend.guarded`)."""

    def guarded(self, admits: Admits) -> Backend:
        """This backend, asking `admits` about every name of a file before opening it."""
        ...


def push_down(backend: Backend, admits: Admits) -> Backend:
    """`backend` told about `admits`, when it can use it."""
    return backend.guarded(admits) if isinstance(backend, Guardable) else backend


@dataclass(frozen=True, slots=True, init=False)
class Rule:
    """Allow or deny `operations` on the paths matching any glob in `paths`."""

    operations: frozenset[Operation]
    paths: tuple[str, ...]
    mode: Literal["allow", "deny"]
    _matcher: Any = field(repr=False, compare=False)

    def __init__(
        self,
        operations: Iterable[Operation],
        paths: Sequence[str],
        mode: Literal["allow", "deny"],
    ) -> None:
        ops = frozenset(operations)
        if not ops or not ops <= {"read", "write"}:
            raise ConfigurationError(
                f"Rule operations must be a non-empty set of 'read' and 'write', got {set(ops)}"
            )
        if isinstance(paths, str) or not paths:
            raise ConfigurationError("Rule paths must be a non-empty list of glob patterns")
        if any(not isinstance(p, str) or not p.startswith("/") for p in paths):
            raise ConfigurationError(
                f"Rule paths must be absolute globs like '/src/**', got {paths}"
            )
        if mode not in ("allow", "deny"):
            raise ConfigurationError(f"Rule mode must be 'allow' or 'deny', got {mode!r}")
        object.__setattr__(self, "operations", ops)
        object.__setattr__(self, "paths", tuple(paths))
        object.__setattr__(self, "mode", mode)
        # wcmatch loads with the first rule: an agent without rules never needs it
        from wcmatch import glob as wc

        flags = wc.GLOBSTAR | wc.BRACE | wc.DOTGLOB
        object.__setattr__(self, "_matcher", wc.compile(list(paths), flags=flags))

    def matches(self, operation: Operation, path: str) -> bool:
        """Whether this rule speaks for `operation` on `path`."""
        return operation in self.operations and bool(self._matcher.match(path))


def allowed(rules: Sequence[Rule], operation: Operation, path: str) -> bool:
    """The first matching rule decides; no match allows."""
    for rule in rules:
        if rule.matches(operation, path):
            return rule.mode == "allow"
    return True


class PermissionedBackend:
    """`backend` seen through `rules` and `policy`."""

    def __init__(
        self, backend: Backend, rules: Sequence[Rule] = (), policy: Policy | None = None
    ) -> None:
        for rule in rules:
            if not isinstance(rule, Rule):
                raise ConfigurationError(
                    f"permissions take tether.backends.permissions.Rule, got {type(rule).__name__}"
                )
        self.rules = tuple(rules)
        self.policy = policy
        self.backend = push_down(backend, self.allows)
        self.shown: Callable[[str], str] = as_given

    def __repr__(self) -> str:
        return f"PermissionedBackend({self.backend!r}, rules={len(self.rules)})"

    def bind(self, state: Any) -> PermissionedBackend:
        return self._like(self.backend.bind(state))

    def named(self, shown: Callable[[str], str]) -> PermissionedBackend:
        """This backend (and the one it guards), naming paths in messages with `shown`."""
        view = self._like(name_paths(self.backend, shown) or self.backend)
        view.shown = shown
        return view

    def _like(self, backend: Backend) -> PermissionedBackend:
        view = PermissionedBackend(backend, self.rules, self.policy)
        view.shown = self.shown
        return view

    def guarded(self, admits: Admits) -> PermissionedBackend:
        return self._like(push_down(self.backend, admits))

    def refusal(self, operation: Operation, path: str) -> str | None:
        """Why `operation` on clean `path` may not go on, or None when it may (a policy
        that raises `BackendError` refuses with its own message)."""
        if not allowed(self.rules, operation, path):
            return f"Permission denied: {operation} access to {self.shown(path)} is not allowed."
        if self.policy is not None:
            reason = self.policy(operation, path)
            if reason:
                return f"Refused by policy: {reason}"
        return None

    def allows(self, operation: Operation, path: str) -> bool:
        """Whether the rules and the policy let `operation` on clean `path` go on."""
        try:
            return self.refusal(operation, path) is None
        except BackendError:
            return False

    def check(self, operation: Operation, path: str) -> str:
        """`path` cleaned, or a `BackendError` when `operation` on it is not allowed.

        Rules match clean paths only, so "//secrets/x" cannot slip past "/secrets/**".
        """
        path = clean(path)
        reason = self.refusal(operation, path)
        if reason is not None:
            raise BackendError(reason)
        return path

    def visible(self, path: str) -> bool:
        """Whether a listing or search may show `path`: the rules and the policy both
        let it be read (a listing is a read of every name in it)."""
        return self.allows("read", path)

    async def ls(self, path: str) -> list[FileInfo]:
        path = self.check("read", path)
        return [f for f in await self.backend.ls(path) if self.visible(f.path)]

    async def read(self, path: str) -> bytes:
        path = self.check("read", path)
        return await self.backend.read(path)

    async def write(self, path: str, data: bytes) -> None:
        path = self.check("write", path)
        await self.backend.write(path, data)

    async def update(self, path: str, change: Change) -> bytes:
        path = self.check("write", self.check("read", path))  # `change` sees the file
        return await update(self.backend, path, change)

    async def stat(self, path: str) -> FileInfo | None:
        path = self.check("read", path)
        return await self.backend.stat(path)

    async def files(self, path: str) -> list[FileInfo]:
        path = self.check("read", path)
        return [f for f in await self.backend.files(path) if self.visible(f.path)]

    async def grep(
        self, pattern: str, path: str, *, literal: bool = False, ignore_case: bool = False
    ) -> list[GrepHit]:
        path = self.check("read", path)
        hits = await self.backend.grep(pattern, path, literal=literal, ignore_case=ignore_case)
        return [h for h in hits if self.visible(h.path)]


def guard(backend: Backend, rules: Sequence[Rule], policy: Policy | None) -> Backend:
    """`backend` behind the rules and policy, or as it is when there are none."""
    if not rules and policy is None:
        return backend
    return PermissionedBackend(backend, rules, policy)
