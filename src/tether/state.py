"""The mutable state of one run, shared by the loop, capabilities and tools."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from tether.events import AgentPath, Event
from tether.messages import Message, ToolCall, Usage

__all__ = ["RunState", "ToolContext"]


def _ignore(event: Event) -> None:
    """The event sink of a run nobody is streaming."""


@dataclass(slots=True, eq=False)
class RunState:
    """What a run owns while it goes on.

    `messages` is the whole conversation, history included; capabilities keep their own
    state in `data` under their name (e.g. the todo list).
    """

    run_id: str
    path: AgentPath
    messages: list[Message]
    deps: Any = None
    backend: Any = None
    usage: Usage = field(default_factory=Usage)
    cost_usd: float | None = 0.0
    steps: int = 0
    data: dict[str, Any] = field(default_factory=dict)
    files: dict[str, tuple[bytes, float]] = field(default_factory=dict)
    """The StateBackend's files: path -> (content, modification time)."""
    emit: Callable[[Event], None] = _ignore


@dataclass(frozen=True, slots=True)
class ToolContext:
    """Handed to a tool that declares a parameter of this type; the model never sees it."""

    state: RunState
    call: ToolCall

    @property
    def run_id(self) -> str:
        """Id of the run calling the tool."""
        return self.state.run_id

    @property
    def agent_path(self) -> AgentPath:
        """Which agent calls the tool, e.g. ("main",) or ("main", "task:researcher#2")."""
        return self.state.path

    @property
    def deps(self) -> Any:
        """Whatever the caller passed as `deps=` to run/arun/stream."""
        return self.state.deps

    @property
    def backend(self) -> Any:
        """The agent's file backend."""
        return self.state.backend

    def emit(self, event: Event) -> None:
        """Send an event to whoever streams the run (subagents forward theirs this way)."""
        self.state.emit(event)
