"""The filesystem capability: file tools, their prompt, and the run's guarded backend."""

from __future__ import annotations

import re
from collections.abc import Collection, Sequence

from tether import prompts
from tether.backends.base import Backend
from tether.backends.permissions import Policy, Rule, guard
from tether.capabilities.base import Capability
from tether.models.base import ModelRequest
from tether.state import RunState
from tether.tools.files import file_tools, seen_files
from tether.tools.tool import Tool

__all__ = ["Filesystem"]


class Filesystem(Capability):
    """Gives the agent `backend` through the six file tools, behind `rules` and `policy`.

    `hidden_tools` (a harness profile's exclusions) drops those tools' lines from the
    prompt, so it never describes a tool the model cannot call.
    """

    prompt_slot = "filesystem"

    def __init__(
        self,
        backend: Backend,
        rules: Sequence[Rule] = (),
        policy: Policy | None = None,
        *,
        hidden_tools: Collection[str] = (),
    ) -> None:
        self.backend = backend
        self.rules = tuple(rules)
        self.policy = policy
        self.hidden_tools = frozenset(hidden_tools)
        guard(backend, self.rules, policy)  # checks the rules now, not at the first run

    def prompt(self) -> str:
        lines = prompts.text("filesystem").splitlines()
        return "\n".join(line for line in lines if _tool_of(line) not in self.hidden_tools)

    def tools(self) -> Sequence[Tool]:
        return file_tools()

    async def on_run_start(self, state: RunState) -> None:
        # A subagent works on its parent's backend: behind the parent's rules and its own.
        base = state.backend if state.backend is not None else self.backend.bind(state)
        state.backend = guard(base, self.rules, self.policy)

    async def before_model(self, state: RunState, request: ModelRequest) -> ModelRequest:
        seen_files(state)  # the model sees the last turn's reads now
        return request


def _tool_of(line: str) -> str | None:
    """The tool a "- `name` ..." line of the prompt is about."""
    match = re.match(r"- `(\w+)`", line)
    return match.group(1) if match else None
