"""CompositeBackend: different paths on different backends, by longest prefix."""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import re
from collections.abc import Iterator, Mapping
from typing import Any

from tether.backends.base import (
    Admits,
    Backend,
    Change,
    FileInfo,
    GrepHit,
    name_paths,
    update,
)
from tether.backends.errors import BackendError
from tether.backends.paths import clean, is_under, join
from tether.backends.permissions import push_down
from tether.errors import ConfigurationError

__all__ = ["CompositeBackend"]


class CompositeBackend:
    """`routes` maps a directory ("/memories/") to the backend holding it; everything
    else goes to `default`. A backend sees paths relative to its route ("/memories/a.md"
    is "/a.md" to it); results keep the full paths. `ls /` shows the routes.

    When `default` is a `SandboxBackend`, an agent on the composite gets `execute` there:
    commands see the default's files, not the routed ones.
    """

    def __init__(self, default: Backend, routes: Mapping[str, Backend]) -> None:
        cleaned: dict[str, Backend] = {}
        self._unnamed: set[str] = set()
        """Routes whose backend cannot name paths with the route's prefix itself."""
        for prefix, backend in routes.items():
            route = clean(prefix)
            if route == "/":
                raise ConfigurationError("a route cannot be '/'; pass that backend as default")
            named = name_paths(backend, functools.partial(_outer, route))
            if named is None:
                self._unnamed.add(route)
            cleaned[route] = named or backend
        self.default = default
        self.routes = dict(sorted(cleaned.items(), key=lambda item: -len(item[0])))

    def __repr__(self) -> str:
        return f"CompositeBackend(default={self.default!r}, routes={list(self.routes)})"

    def bind(self, state: Any) -> CompositeBackend:
        return CompositeBackend(
            self.default.bind(state), {p: b.bind(state) for p, b in self.routes.items()}
        )

    def guarded(self, admits: Admits) -> CompositeBackend:
        def within(prefix: str) -> Admits:
            return lambda operation, path: admits(operation, _outer(prefix, path))

        return CompositeBackend(
            push_down(self.default, admits),
            {p: push_down(b, within(p)) for p, b in self.routes.items()},
        )

    def _route(self, path: str) -> tuple[Backend, str, str]:
        """The backend for `path`, its route prefix ("" for the default) and its inner path."""
        path = clean(path)
        for prefix, backend in self.routes.items():
            if is_under(path, prefix):
                return backend, prefix, path[len(prefix) :] or "/"
        return self.default, "", path

    def _named(self, prefix: str, inner: str) -> contextlib.AbstractContextManager[None]:
        """Where the messages of `prefix`'s backend must be given the agent's paths."""
        if prefix in self._unnamed:
            return _renamed(inner, _outer(prefix, inner))
        return contextlib.nullcontext()

    def _inside(self, path: str) -> list[str]:
        """Route prefixes strictly inside directory `path`, outermost first."""
        return sorted((p for p in self.routes if p != path and is_under(p, path)), key=len)

    async def ls(self, path: str) -> list[FileInfo]:
        path = clean(path)
        backend, prefix, inner = self._route(path)
        entries: dict[str, FileInfo] = {}
        try:
            with self._named(prefix, inner):
                listed = await backend.ls(inner)
            for info in listed:
                entries[_outer(prefix, info.path)] = _moved(info, prefix)
        except BackendError:
            if not self._inside(path):
                raise
        for route in self._inside(path):
            child = join(path, route[len(path.rstrip("/")) + 1 :].split("/")[0])
            entries[child] = FileInfo(child, is_dir=True)
        return sorted(entries.values(), key=lambda f: f.path)

    async def read(self, path: str) -> bytes:
        backend, prefix, inner = self._route(path)
        with self._named(prefix, inner):
            return await backend.read(inner)

    async def write(self, path: str, data: bytes) -> None:
        backend, prefix, inner = self._route(path)
        with self._named(prefix, inner):
            await backend.write(inner, data)

    async def update(self, path: str, change: Change) -> bytes:
        backend, prefix, inner = self._route(path)
        with self._named(prefix, inner):
            return await update(backend, inner, change)

    async def stat(self, path: str) -> FileInfo | None:
        path = clean(path)
        backend, prefix, inner = self._route(path)
        with self._named(prefix, inner):
            info = await backend.stat(inner)
        if info is None and self._inside(path):
            return FileInfo(path, is_dir=True)
        return None if info is None else _moved(info, prefix)

    async def files(self, path: str) -> list[FileInfo]:
        path = clean(path)
        backend, prefix, inner = self._route(path)
        with self._named(prefix, inner):
            found = [_moved(f, prefix) for f in await backend.files(inner)]
        for route in self._inside(path):
            found = [f for f in found if not is_under(f.path, route)]  # shadowed by the route
            found += [_moved(f, route) for f in await self.routes[route].files("/")]
        return sorted(found, key=lambda f: f.path)

    async def grep(
        self, pattern: str, path: str, *, literal: bool = False, ignore_case: bool = False
    ) -> list[GrepHit]:
        path = clean(path)
        backend, prefix, inner = self._route(path)
        options = {"literal": literal, "ignore_case": ignore_case}
        with self._named(prefix, inner):
            found = await backend.grep(pattern, inner, **options)
        hits = [GrepHit(_outer(prefix, h.path), h.line, h.text) for h in found]
        for route in self._inside(path):
            hits = [h for h in hits if not is_under(h.path, route)]
            hits += [
                GrepHit(_outer(route, h.path), h.line, h.text)
                for h in await self.routes[route].grep(pattern, "/", **options)
            ]
        return sorted(hits, key=lambda h: (h.path, h.line))


@contextlib.contextmanager
def _renamed(inner: str, outer: str) -> Iterator[None]:
    """An error of a backend that cannot name paths as the agent knows them: the path it
    was given, wherever the message names it, is the agent's ("/mem/a.md", not "/a.md",
    which would be another file)."""
    try:
        yield
    except BackendError as exc:
        whole = re.compile(rf"(?<![^\s'\"(]){re.escape(inner)}(?=[\s'\".,:;)]|$)")
        raise BackendError(whole.sub(lambda _: outer, str(exc))) from None


def _outer(prefix: str, inner: str) -> str:
    if not prefix:
        return inner
    return prefix if inner == "/" else prefix + inner


def _moved(info: FileInfo, prefix: str) -> FileInfo:
    link = None if info.link is None else _outer(prefix, info.link)
    return dataclasses.replace(info, path=_outer(prefix, info.path), link=link)
