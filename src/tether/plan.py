"""An agent as a run sees it: its `Plan` and the `RunnableAgent` protocol.

`create_agent` composes the capabilities into a `Plan` once; every run of the agent reads
it. The run loop and the `task` tool take an agent as a `RunnableAgent`, the few things
they read of it, so that they never import `tether.agent`, which sits above them.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol

from tether.approval import Gate
from tether.capabilities.base import Capability
from tether.limits import Limits
from tether.models.base import Model, ModelSettings, ToolSpec
from tether.models.prices import PriceBook
from tether.output import OutputSpec
from tether.prompt import Slot, assemble_system_prompt
from tether.tools.tool import Tool
from tether.tracing import DEFAULT_TRACING, Tracing

__all__ = ["Plan", "RunnableAgent"]


@dataclass(frozen=True, slots=True)
class Plan:
    """What every run of an agent shares, worked out once in create_agent."""

    tools: Mapping[str, Tool]
    tool_specs: tuple[ToolSpec, ...]
    system_prompt: str
    output: OutputSpec
    prices: PriceBook
    on_run_start: tuple[Capability, ...]
    on_run_end: tuple[Capability, ...]
    before_model: tuple[Capability, ...]
    after_model: tuple[Capability, ...]
    before_finish: tuple[Capability, ...]
    around_tool: tuple[Capability, ...]
    approvals: Mapping[str, Gate]
    run_prompt: tuple[Capability, ...] = ()
    """Capabilities whose prompt section is worked out per run."""
    held: tuple[Capability, ...] = ()
    """Capabilities that keep something for the life of an `async with agent:` block."""
    waits: bool = False
    """Whether a run may stop for decisions: this agent gates calls, or a subagent does."""
    tracing: Tracing = DEFAULT_TRACING
    custom_prompt: str | None = None
    base_prompt: str | None = None
    sections: tuple[tuple[Slot, str | None], ...] = ()
    """The sections known when the agent is built, to assemble with the per-run ones."""

    def run_system_prompt(self, extra: Sequence[tuple[Slot, str | None]]) -> str:
        """The system prompt with per-run sections in their slots."""
        if not extra:
            return self.system_prompt
        return assemble_system_prompt(
            self.custom_prompt, [*self.sections, *extra], base=self.base_prompt
        )


class RunnableAgent(Protocol):
    """What a run reads of its agent: the model and its settings, the limits, the number
    of retries of a final answer, and the plan. `tether.Agent` is one."""

    @property
    def model(self) -> Model: ...
    @property
    def limits(self) -> Limits: ...
    @property
    def model_settings(self) -> ModelSettings: ...
    @property
    def output_retries(self) -> int: ...
    @property
    def _plan(self) -> Plan: ...
