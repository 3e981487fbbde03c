"""Code execution: the `execute` tool over a `SandboxBackend`, behind a command policy."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from tether import prompts
from tether.backends.errors import BackendError
from tether.backends.sandbox.base import SandboxBackend, session, session_of
from tether.capabilities.base import Capability
from tether.errors import ConfigurationError, ToolError
from tether.state import SANDBOX, RunState, ToolContext
from tether.tools.execute import COMMAND_RUNNER, execute_tool
from tether.tools.tool import Tool

if TYPE_CHECKING:
    from tether.backends.search import Pattern

__all__ = ["CommandPolicy", "Sandbox"]


@dataclass(frozen=True, slots=True)
class CommandPolicy:
    """Which commands `execute` may run: none matching a `deny` regex, and, when `allow`
    is given, only those matching an `allow` regex (both searched anywhere in the
    command). The patterns are RE2 syntax, like grep's: the model writes the commands,
    so no pattern may take more than linear time on them."""

    allow: Sequence[str] = ()
    deny: Sequence[str] = ()
    _compiled: tuple[tuple[tuple[str, Pattern], ...], ...] = field(
        init=False, repr=False, compare=False
    )

    def __post_init__(self) -> None:
        # RE2 and the search module load with the first policy: every agent imports this
        # module (its options name `CommandCheck`), few have a sandbox and a policy
        from tether.backends.search import compile_pattern

        try:
            compiled = tuple(
                tuple((p, compile_pattern(p, literal=False, ignore_case=False)) for p in patterns)
                for patterns in (self.allow, self.deny)
            )
        except BackendError as exc:
            raise ConfigurationError(f"CommandPolicy has a bad pattern: {exc}") from None
        object.__setattr__(self, "_compiled", compiled)

    def __call__(self, command: str) -> str | None:
        allow, deny = self._compiled
        for text, pattern in deny:
            if pattern.matches(command):
                return f"the command matches the denied pattern {text!r}"
        if allow and not any(p.matches(command) for _, p in allow):
            return "the command matches none of the allowed patterns"
        return None


CommandCheck = Callable[[str], str | None]


_RESUMED = "sandbox_resumed"
"""In the top run's RunState.data: the sandbox was asked to take back what it kept."""

_POLICIES = "command_policies"
"""In RunState.data: the command policies in force, the top agent's first."""


class Sandbox(Capability):
    """Gives the agent `execute` on `backend`. `policy(command)` returns None to allow a
    command, or the reason it is refused (the model sees the reason)."""

    prompt_slot = "filesystem"

    def __init__(self, backend: SandboxBackend, policy: CommandCheck | None = None) -> None:
        if policy is not None and not callable(policy):
            raise ConfigurationError(
                f"command_policy must be a CommandPolicy or a callable, got {policy!r}"
            )
        self.backend = backend
        self.policy = policy

    def prompt(self) -> str:
        network = getattr(self.backend, "network", None)
        where = " It has no network access." if network is False else ""
        return prompts.render("execute", network=where)

    def tools(self) -> Sequence[Tool]:
        return (execute_tool(),)

    async def on_run_start(self, state: RunState) -> None:
        state.data[COMMAND_RUNNER] = self.run
        # A subagent's commands answer to the policies of the agents above it too, even
        # one built elsewhere with a policy of its own (or none).
        above: tuple[CommandCheck, ...] = ()
        ancestor = state.parent
        while ancestor is not None and not above:
            above = ancestor.data.get(_POLICIES, ())
            ancestor = ancestor.parent
        mine = (self.policy,) if self.policy is not None else ()
        state.data[_POLICIES] = (*above, *(p for p in mine if p not in above))

    async def on_run_end(self, state: RunState) -> None:
        """A top run's end: a sandbox with what is tied to its event loop (an SDK's
        client) lets it go, since the next run may have a loop of its own."""
        released = getattr(self.backend, "run_ended", None)
        if state.parent is None and released is not None:
            await released()

    async def run(self, context: ToolContext, command: str, timeout_seconds: int | None) -> str:
        if not command.strip():
            raise ToolError("The command is empty.")
        policies = context.state.data.get(_POLICIES, ())
        for policy in policies or ((self.policy,) if self.policy is not None else ()):
            refusal = policy(command)
            if refusal:
                raise ToolError(f"Command refused: {refusal}.")
        key, kept = session_of(context.state), context.state.root.data
        note = None
        if not kept.get(_RESUMED):  # what an earlier run's sandbox kept: taken back, or said
            resume = getattr(self.backend, "resume", None)
            if kept.get(SANDBOX) is not None and resume is not None:
                note = await resume(key, kept[SANDBOX])  # a failure: asked again next time
            kept[_RESUMED] = True
        with session(key):
            result = await self.backend.execute(command, timeout_seconds=timeout_seconds)
        held = getattr(self.backend, "held", None)
        if held is not None:
            kept[SANDBOX] = held(key)
        text = result.output.rstrip("\n") + (f"\n[{note}]" if note else "")
        if result.exit_code is None:
            raise ToolError(f"{text}\n[the command did not finish]".lstrip("\n"))
        return f"{text}\n[exit code {result.exit_code}]".lstrip("\n")
