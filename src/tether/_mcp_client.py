"""What tether's side of an MCP session offers a server besides calls: the agent's roots,
and a call's progress as events.

Roots tell a server which directories the agent works in: the host directories behind
the agent's file backend (a `FilesystemBackend`'s root, a sandbox's workspace, each such
route of a `CompositeBackend`), as `file://` URIs. A directory the agent may not list,
by its permissions or its policy, is left out, and so is everything of a backend with no
directory on the host (`StateBackend`, `StoreBackend`): a server learns no path the agent
cannot see itself. The list is fixed when the agent is built (tether never sends
`roots/list_changed`).

Progress: a server's `notifications/progress` for a running call become `ToolProgress`
events carrying the call's id, at most one per `PROGRESS_EVERY` seconds: a server sending
thousands a second costs one held event, not a queue of them.
"""

from __future__ import annotations

import asyncio
import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

from tether.backends.base import Backend
from tether.backends.composite import CompositeBackend
from tether.backends.filesystem import FilesystemBackend
from tether.backends.permissions import PermissionedBackend, Policy, Rule, allowed
from tether.events import ToolProgress
from tether.state import ToolContext

__all__ = ["PROGRESS_EVERY", "Progress", "Root", "backend_roots", "list_roots"]

PROGRESS_EVERY = 0.1
"""The shortest time between two progress events of one call, in seconds."""
PROGRESS_MESSAGE_CHARS = 500
"""The longest progress message passed on; the rest is cut."""
_R = TypeVar("_R")
_PROBE = "/any-file"
"""A path inside a directory: one denied to the agent (as by a rule on `/dir/**`) leaves
the directory out of the roots, as listing it would show nothing."""


@dataclass(frozen=True, slots=True)
class Root:
    """A directory the agent works in: `uri` (file://) on the host, `name` the agent's
    own path for it ("/", "/memories")."""

    uri: str
    name: str


def backend_roots(
    backend: Backend | None, rules: Sequence[Rule] = (), policy: Policy | None = None
) -> tuple[Root, ...]:
    """The host directories behind `backend` that the agent may list under `rules` and
    `policy` (and any guards inside `backend`)."""
    found: list[Root] = []

    def admitted(path: str) -> bool:
        if not allowed(rules, "read", path):
            return False
        try:
            return policy is None or not policy("read", path)
        except Exception:  # a policy that fails refuses
            return False

    _walk(backend, lambda inner: inner, admitted, found)
    return tuple(found)


def _walk(
    backend: object,
    outer: Callable[[str], str],
    admitted: Callable[[str], bool],
    found: list[Root],
) -> None:
    """Collect the roots of `backend`, whose paths are the agent's by `outer` and may be
    listed when `admitted` (both in `backend`'s own paths)."""
    if isinstance(backend, FilesystemBackend):
        if admitted("/") and admitted(_PROBE):  # a rule on what it holds hides it too
            found.append(Root(backend.root.as_uri(), outer("/")))
    elif isinstance(backend, PermissionedBackend):
        guard = backend

        def both(path: str) -> bool:
            return admitted(path) and guard.allows("read", path)

        _walk(backend.backend, outer, both, found)
    elif isinstance(backend, CompositeBackend):
        _walk(backend.default, outer, admitted, found)
        for prefix, routed in backend.routes.items():
            inside = _inside(prefix)
            _walk(routed, _then(inside, outer), _then(inside, admitted), found)
    # any other backend keeps its files off the host, or does not say where: no root


def _inside(prefix: str) -> Callable[[str], str]:
    """A routed backend's path as its composite names it."""
    return lambda inner: prefix if inner == "/" else prefix + inner


def _then(first: Callable[[str], str], second: Callable[[str], _R]) -> Callable[[str], _R]:
    return lambda path: second(first(path))


def list_roots(roots: Sequence[Root]) -> Callable[[Any], Any]:
    """The session's answer to a server's `roots/list`."""

    async def answer(context: Any) -> Any:
        from mcp import types

        listed = [{"uri": r.uri, "name": r.name} for r in roots]
        return types.ListRootsResult.model_validate({"roots": listed})

    return answer


class Progress:
    """One call's progress notifications as `ToolProgress` events, at most one per
    `PROGRESS_EVERY` seconds. One arriving sooner is held, the newest replacing it, and
    sent when its time comes or the call ends: a flood holds one event, and the last
    word is never lost. Values that are not numbers a count can be are dropped."""

    def __init__(self, context: ToolContext) -> None:
        self._context = context
        self._sent_at = -math.inf
        self._held: ToolProgress | None = None
        self._timer: asyncio.TimerHandle | None = None
        self._open = True

    async def __call__(self, progress: float, total: float | None, message: str | None) -> None:
        """The SDK's progress callback."""
        event = self._event(progress, total, message)
        if event is None or not self._open:
            return
        self._held = event
        wait = self._sent_at + PROGRESS_EVERY - time.monotonic()
        if wait <= 0:
            self._send()
        elif self._timer is None:
            self._timer = asyncio.get_running_loop().call_later(wait, self._send)

    def _event(
        self, progress: float, total: float | None, message: str | None
    ) -> ToolProgress | None:
        if not (isinstance(progress, int | float) and math.isfinite(progress) and progress >= 0):
            return None
        if not (isinstance(total, int | float) and math.isfinite(total) and total > 0):
            total = None
        if not isinstance(message, str):
            message = None
        context = self._context
        return ToolProgress(
            context.agent_path,
            context.call.id,
            float(progress),
            None if total is None else float(total),
            None if message is None else message[:PROGRESS_MESSAGE_CHARS],
        )

    def _send(self) -> None:
        self._timer = None
        if self._held is not None:
            event, self._held = self._held, None
            self._sent_at = time.monotonic()
            self._context.emit(event)

    def close(self) -> None:
        """The call ended: send what is held, and nothing after."""
        if self._timer is not None:
            self._timer.cancel()
        if self._open:
            self._open = False
            self._send()
