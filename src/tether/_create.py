"""`create_agent`, the one way to build an agent. It is kept apart from what it calls:
`from tether import create_agent` loads this module alone, and the option groups
(pydantic), the builder (`tether._build`) and the capabilities load when the first
agent is built, so a program (or the `tether` command) that imports tether and never
builds an agent does not pay for them."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, TypeVar, cast, overload

if TYPE_CHECKING:
    from tether.agent import Agent
    from tether.approval import GateConfig
    from tether.backends.base import Backend
    from tether.backends.permissions import Policy, Rule
    from tether.capabilities.base import Capability
    from tether.capabilities.compaction import Compaction
    from tether.capabilities.sandbox import CommandPolicy
    from tether.capabilities.subagents import Background, SubAgent
    from tether.checkpoint.base import Checkpointer
    from tether.limits import Limits
    from tether.mcp import MCPServer
    from tether.models.base import Model, ModelSettings
    from tether.models.prices import Price
    from tether.profiles import HarnessProfile
    from tether.tools.tool import Tool
    from tether.tracing import Tracing

__all__ = ["DEFAULT_CHECKPOINTER", "DEFAULT_COMPACTION", "create_agent"]

DEFAULT_CHECKPOINTER = "sqlite:///.tether/runs.db"


class _Default:
    """A keyword's default that is made with the agent (making it here would load what
    the agent is built from), shown in the signature as the value it stands for."""

    def __init__(self, shown: str) -> None:
        self.shown = shown

    def __repr__(self) -> str:
        return self.shown


DEFAULT_COMPACTION = cast("Compaction", _Default("Compaction()"))
"""Stands for `tether._options.DEFAULT_COMPACTION`, the `Compaction()` an agent gets."""

OutputT = TypeVar("OutputT")


@overload
def create_agent(
    model: Model | str,
    *,
    output_type: type[OutputT],
    tools: Sequence[Tool | Callable[..., Any]] = (),
    system_prompt: str | None = None,
    limits: Limits | None = None,
    capabilities: Sequence[Capability] = (),
    model_settings: ModelSettings | None = None,
    output_retries: int = 3,
    prices: Mapping[str, Price] | None = None,
    backend: Backend | None = None,
    permissions: Sequence[Rule] = (),
    backend_policy: Policy | None = None,
    tool_token_limit_before_evict: int | None = 20_000,
    filesystem: bool = True,
    todos: bool = True,
    subagents: Sequence[SubAgent] = (),
    general_purpose_subagent: bool = True,
    compaction: Compaction | None = DEFAULT_COMPACTION,
    checkpointer: Checkpointer | str | None = DEFAULT_CHECKPOINTER,
    interrupt_on: Mapping[str, GateConfig] | None = None,
    command_policy: CommandPolicy | Callable[[str], str | None] | None = None,
    skills: Sequence[str] = (),
    memory: Sequence[str] = (),
    profile: HarnessProfile | None = None,
    mcp_servers: Sequence[MCPServer] = (),
    tracing: Tracing | None = None,
    background: Background | None = None,
) -> Agent[OutputT]: ...


@overload
def create_agent(
    model: Model | str,
    *,
    tools: Sequence[Tool | Callable[..., Any]] = (),
    system_prompt: str | None = None,
    limits: Limits | None = None,
    capabilities: Sequence[Capability] = (),
    model_settings: ModelSettings | None = None,
    output_retries: int = 3,
    prices: Mapping[str, Price] | None = None,
    backend: Backend | None = None,
    permissions: Sequence[Rule] = (),
    backend_policy: Policy | None = None,
    tool_token_limit_before_evict: int | None = 20_000,
    filesystem: bool = True,
    todos: bool = True,
    subagents: Sequence[SubAgent] = (),
    general_purpose_subagent: bool = True,
    compaction: Compaction | None = DEFAULT_COMPACTION,
    checkpointer: Checkpointer | str | None = DEFAULT_CHECKPOINTER,
    interrupt_on: Mapping[str, GateConfig] | None = None,
    command_policy: CommandPolicy | Callable[[str], str | None] | None = None,
    skills: Sequence[str] = (),
    memory: Sequence[str] = (),
    profile: HarnessProfile | None = None,
    mcp_servers: Sequence[MCPServer] = (),
    tracing: Tracing | None = None,
    background: Background | None = None,
) -> Agent[str]: ...


def create_agent(
    model: Model | str,
    *,
    output_type: Any = str,
    tools: Sequence[Tool | Callable[..., Any]] = (),
    system_prompt: str | None = None,
    limits: Limits | None = None,
    capabilities: Sequence[Capability] = (),
    model_settings: ModelSettings | None = None,
    output_retries: int = 3,
    prices: Mapping[str, Price] | None = None,
    backend: Backend | None = None,
    permissions: Sequence[Rule] = (),
    backend_policy: Policy | None = None,
    tool_token_limit_before_evict: int | None = 20_000,
    filesystem: bool = True,
    todos: bool = True,
    subagents: Sequence[SubAgent] = (),
    general_purpose_subagent: bool = True,
    compaction: Compaction | None = DEFAULT_COMPACTION,
    checkpointer: Checkpointer | str | None = DEFAULT_CHECKPOINTER,
    interrupt_on: Mapping[str, GateConfig] | None = None,
    command_policy: CommandPolicy | Callable[[str], str | None] | None = None,
    skills: Sequence[str] = (),
    memory: Sequence[str] = (),
    profile: HarnessProfile | None = None,
    mcp_servers: Sequence[MCPServer] = (),
    tracing: Tracing | None = None,
    background: Background | None = None,
) -> Agent[Any]:
    """Build an agent.

    `tools` takes `Tool`s or plain typed functions. `output_type` other than `str` gives
    the agent a `final_result` tool whose arguments are the answer, validated by pydantic
    and retried up to `output_retries` times. `limits` bounds steps, tokens, cost and time
    (default: 200 steps). `prices` maps "provider:model" or "model" to a `Price` for
    models genai-prices does not know.

    The agent has the file tools over `backend` (default: a fresh `StateBackend` per
    run), behind `permissions` and `backend_policy`; tool results over
    `tool_token_limit_before_evict` tokens are saved to files (None turns that off).
    `filesystem=False` leaves the file tools out. A `SandboxBackend` (such as
    `LocalSandbox`) adds the `execute` tool, whose commands `command_policy` may refuse.

    When the history nears the model's input window it is compacted (offloaded,
    summarized, truncated) as `compaction` says; None turns that off.

    Runs given a `thread_id` are recorded by `checkpointer` (a `Checkpointer` or a URL,
    by default sqlite:///.tether/runs.db, opened on first use; None turns threads off).
    Calls of the tools in `interrupt_on` wait for a person's decision (see
    `tether.approval`); such an agent records every run, in a new thread if none is given.

    `skills` lists backend directories of skills (folders with a SKILL.md); `memory`
    lists files loaded into the prompt at the start of every run.

    `mcp_servers` adds the tools of MCP servers (see `tether.mcp`). `tracing` says how
    runs are traced with OpenTelemetry (see `tether.tracing.Tracing`); subagents share it.

    The harness profile registered for the model (see `tether.profiles`) applies, with
    `profile` merged on top of it.

    `write_todos` keeps a task list (`todos=False` leaves it out). The `task` tool
    starts `subagents`, plus a "general-purpose" one with the agent's own tools unless
    `general_purpose_subagent=False` or a subagent of that name replaces it. With
    `background` (a `Background`), `task` can also start them in the background.
    """
    given = dict(locals())  # every parameter, by name (copied before the imports below)
    if given["compaction"] is DEFAULT_COMPACTION:
        del given["compaction"]  # the option group's default: Compaction()
    # Loaded with the first agent built, not with `from tether import create_agent`
    # (see the module's docstring).
    from tether._build import assemble
    from tether._options import AgentOptions

    return assemble(AgentOptions.of(**given))
