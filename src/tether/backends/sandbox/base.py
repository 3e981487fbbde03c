"""The `SandboxBackend` protocol and what a command returns."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Literal, Protocol, runtime_checkable

from tether.backends.base import Backend
from tether.state import RunState

__all__ = ["ExecResult", "SandboxBackend", "current_session", "session", "session_of"]

_SESSION: ContextVar[str] = ContextVar("tether_sandbox_session", default="default")


@dataclass(frozen=True, slots=True)
class ExecResult:
    """A finished command: its stdout and stderr interleaved, and how it ended.

    `exit_code` is None when the command was killed: it ran out of time (`timed_out`),
    its processes together went over a limit (`over_limit`: "memory" or "cpu"), or one
    of them hit a limit of its own. `truncated` says `output` is only the start;
    `full_output` then names the file in the sandbox that holds all of it.
    """

    output: str
    exit_code: int | None
    truncated: bool = False
    timed_out: bool = False
    full_output: str | None = None
    over_limit: Literal["memory", "cpu"] | None = None


@runtime_checkable
class SandboxBackend(Backend, Protocol):
    """A backend whose files commands can work on. Paths are the backend's virtual paths;
    commands start in the directory that is the backend's `/`."""

    async def execute(self, command: str, *, timeout_seconds: float | None = None) -> ExecResult:
        """Run `command` with a shell and wait for it, at most `timeout_seconds`.

        A backend with a limit of its own keeps it: the smaller of the two holds, so a
        caller can shorten the limit a user set but never lengthen it.
        """
        ...

    async def upload(self, path: str, data: bytes) -> None:
        """Put a file into the sandbox."""
        ...

    async def download(self, path: str) -> bytes:
        """Take a file out of the sandbox."""
        ...


def session_of(state: RunState) -> str:
    """The session of a run: its thread (the top run's, which its subagents share), or
    the top run itself when it keeps no thread."""
    root = state.root
    return root.thread_id or f"#{root.run_id}"  # no thread id holds a '#'


def current_session() -> str:
    """The thread whose command a sandbox runs now ("default" outside a run): a backend
    that keeps something per thread (a container, a remote machine) keys it by this."""
    return _SESSION.get()


@contextlib.contextmanager
def session(key: str) -> Iterator[None]:
    """Commands run inside this block are thread `key`'s (see `current_session`)."""
    token = _SESSION.set(key)
    try:
        yield
    finally:
        _SESSION.reset(token)
