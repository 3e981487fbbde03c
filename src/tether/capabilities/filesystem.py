"""The filesystem capability: file tools, their prompt, and the run's guarded backend."""

from __future__ import annotations

from collections.abc import Sequence

from tether import prompts
from tether.backends.base import Backend
from tether.backends.permissions import Policy, Rule, guard
from tether.capabilities.base import Capability
from tether.state import RunState
from tether.tools.files import file_tools
from tether.tools.tool import Tool

__all__ = ["Filesystem"]


class Filesystem(Capability):
    """Gives the agent `backend` through the six file tools, behind `rules` and `policy`."""

    prompt_slot = "filesystem"

    def __init__(
        self, backend: Backend, rules: Sequence[Rule] = (), policy: Policy | None = None
    ) -> None:
        self.backend = backend
        self.rules = tuple(rules)
        self.policy = policy
        guard(backend, self.rules, policy)  # checks the rules now, not at the first run

    def prompt(self) -> str:
        return prompts.text("filesystem")

    def tools(self) -> Sequence[Tool]:
        return file_tools()

    async def on_run_start(self, state: RunState) -> None:
        # A subagent works on its parent's backend: behind the parent's rules and its own.
        base = state.backend if state.backend is not None else self.backend.bind(state)
        state.backend = guard(base, self.rules, self.policy)
