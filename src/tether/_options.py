"""The options of `create_agent`, in typed groups that pydantic validates.

Each keyword of `create_agent` is a field of one group. `AgentOptions.of(**keywords)`
validates every group, so a wrong value is a `ConfigurationError` that names the keyword,
says what it takes and what it got (the wording is in each field's metadata, see
`tether._checks`). Validation also turns what a user may give into what the builder
uses: a "provider:model" string into a `Model`, no limits into the default ones.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Annotated, Any, Self, TypeVar

import pydantic
from annotated_types import Ge, Gt
from pydantic_core import PydanticCustomError

from tether import prompts
from tether._checks import DictOf, Instance, ListOf, Must, validated
from tether._create import DEFAULT_CHECKPOINTER
from tether.backends.base import Backend
from tether.backends.permissions import Policy, Rule
from tether.capabilities.base import Capability
from tether.capabilities.compaction import Compaction
from tether.capabilities.sandbox import CommandCheck
from tether.capabilities.subagents import Background, SubAgent
from tether.checkpoint.base import Checkpointer
from tether.errors import ConfigurationError
from tether.limits import Limits, without_spending_limits
from tether.models.base import Model, ModelSettings
from tether.models.prices import Price
from tether.models.resolve import infer_model
from tether.profiles import HarnessProfile
from tether.tools.tool import Tool
from tether.tracing import Tracing

__all__ = [
    "DEFAULT_CHECKPOINTER",
    "DEFAULT_COMPACTION",
    "AgentOptions",
    "ApprovalOptions",
    "ContextOptions",
    "DelegationOptions",
    "FileOptions",
    "ModelOptions",
    "OutputOptions",
    "ToolOptions",
]

DEFAULT_COMPACTION = Compaction()

Group = TypeVar("Group", bound="_Group")

Flag = Annotated[bool, pydantic.Strict(), Must("be True or False")]
Text = Annotated[str, pydantic.Strict()]


def _none_is(default: Callable[[], object]) -> pydantic.BeforeValidator:
    """None given for an option stands for its default."""
    return pydantic.BeforeValidator(lambda value: default() if value is None else value)


def _model_named(value: object) -> object:
    """The model a "provider:model" string names; anything else is checked as it is."""
    return infer_model(value) if isinstance(value, str) else value


def _lacking(checkpointer: object) -> str:
    """The lease methods an older checkpointer lacks, when it looks like one at all."""
    methods = ("append", "load", "threads", "delete", "close", "acquire", "renew", "release")
    lacking = [name for name in methods if not callable(getattr(checkpointer, name, None))]
    return f" (it has no {', '.join(lacking)})" if len(lacking) < len(methods) else ""


class _Group(pydantic.BaseModel):
    # built on first use: importing tether (the CLI, a worker) does not pay for them
    model_config = pydantic.ConfigDict(
        frozen=True, arbitrary_types_allowed=True, extra="forbid", defer_build=True
    )


class ModelOptions(_Group):
    """The model, and how it is called, priced, bounded, traced and profiled."""

    model: Annotated[
        Instance[Model],
        pydantic.BeforeValidator(_model_named),
        Must("implement tether.models.Model (name, provider, request, stream)"),
    ]
    model_settings: Annotated[
        Instance[ModelSettings], _none_is(ModelSettings), Must("be a tether.models.ModelSettings")
    ] = ModelSettings()
    prices: Annotated[
        Mapping[Text, Instance[Price]] | None, DictOf("Price by model name", values="a Price")
    ] = None
    limits: Annotated[Instance[Limits], _none_is(Limits), Must("be a Limits")] = Limits()
    tracing: Annotated[Instance[Tracing] | None, Must("be a tether.tracing.Tracing")] = None
    profile: Annotated[Instance[HarnessProfile] | None, Must("be a HarnessProfile")] = None


def _mcp_server(value: object) -> object:
    """`value` when it is an `MCPServer`; the MCP parts load only for an agent given one,
    so `from tether import create_agent` stays fast."""
    from tether._mcp_server import MCPServer

    if not isinstance(value, MCPServer):
        raise PydanticCustomError("is_instance_of", "not an MCPServer")
    return value


class ToolOptions(_Group):
    """The agent's own tools, and what brings more: capabilities, MCP servers, todos."""

    tools: Annotated[
        tuple[Instance[Tool] | Callable[..., Any], ...], ListOf("a Tool or a typed function")
    ] = ()
    capabilities: Annotated[tuple[Instance[Capability], ...], ListOf("Capability instances")] = ()
    mcp_servers: Annotated[
        tuple[Annotated[Any, pydantic.PlainValidator(_mcp_server)], ...],
        _none_is(tuple),
        ListOf("tether.mcp.MCPServer"),
    ] = ()
    todos: Flag = True


class ContextOptions(_Group):
    """What the model reads besides the conversation, and how the conversation is kept
    inside its window."""

    system_prompt: Annotated[Text | None, Must("be a string or None")] = None
    compaction: Annotated[Instance[Compaction] | None, Must("be a tether.Compaction or None")] = (
        DEFAULT_COMPACTION
    )
    skills: Annotated[
        tuple[Text, ...], _none_is(tuple), ListOf("directories, like ['/skills/']")
    ] = ()
    memory: Annotated[
        tuple[Text, ...], _none_is(tuple), ListOf("file paths, like ['/AGENTS.md']")
    ] = ()


class FileOptions(_Group):
    """The file tools: where the files are, what may be done to them, which commands may
    run there, and from what size a tool result is saved to a file instead."""

    filesystem: Flag = True
    backend: Annotated[Instance[Backend] | None, Must("implement tether.backends.Backend")] = None
    permissions: Annotated[tuple[Instance[Rule], ...], ListOf("tether.backends.Rule")] = ()
    backend_policy: Annotated[Policy | None, Must("be callable")] = None
    command_policy: Annotated[CommandCheck | None, Must("be a CommandPolicy or a callable")] = None
    tool_token_limit_before_evict: Annotated[
        Annotated[int, pydantic.Strict(), Gt(0)] | None, Must("be a positive integer or None")
    ] = 20_000

    @pydantic.model_validator(mode="after")
    def _needs_the_file_tools(self) -> Self:
        given = self.backend is not None or self.permissions or self.backend_policy is not None
        if given and not self.filesystem:
            raise ConfigurationError("backend, permissions and backend_policy need filesystem=True")
        return self

    @property
    def evict_limit(self) -> int | None:
        """From how many tokens a tool result is saved to a file: never without the files."""
        return self.tool_token_limit_before_evict if self.filesystem else None


class DelegationOptions(_Group):
    """The subagents the `task` tool starts, and whether they may work in the background."""

    subagents: Annotated[tuple[Instance[SubAgent], ...], ListOf("tether.SubAgent")] = ()
    general_purpose_subagent: Flag = True
    background: Annotated[Instance[Background] | None, Must("be a tether.Background")] = None


class ApprovalOptions(_Group):
    """The calls that wait for a person's decision, and the checkpointer that records runs
    (so a run can wait, and be resumed)."""

    interrupt_on: Annotated[Mapping[Text, Any] | None, DictOf("settings by tool name")] = None
    checkpointer: Annotated[
        Instance[Checkpointer] | Text | None,
        Must("be a Checkpointer, a URL or None", hint=_lacking),
    ] = DEFAULT_CHECKPOINTER


class OutputOptions(_Group):
    """The type of the final answer (checked when the agent is built, by `OutputSpec`),
    and how often a wrong one is sent back."""

    output_type: Any = str
    output_retries: Annotated[int, pydantic.Strict(), Ge(0), Must("be an integer >= 0")] = 3


_GROUPS: tuple[type[_Group], ...] = (
    ModelOptions,
    ToolOptions,
    ContextOptions,
    FileOptions,
    DelegationOptions,
    ApprovalOptions,
    OutputOptions,
)


@dataclass(frozen=True, slots=True)
class AgentOptions:
    """Every option of `create_agent`, validated, by group."""

    model: ModelOptions
    tools: ToolOptions
    context: ContextOptions
    files: FileOptions
    delegation: DelegationOptions
    approvals: ApprovalOptions
    output: OutputOptions

    @classmethod
    def of(cls, **keywords: object) -> AgentOptions:
        """The options `keywords` (those of `create_agent`, by name) give."""
        unknown = set(keywords).difference(*(group.model_fields for group in _GROUPS))
        if unknown:
            raise ConfigurationError(f"create_agent has no option {', '.join(sorted(unknown))}")

        def group(kind: type[Group]) -> Group:
            return validated(kind, {k: v for k, v in keywords.items() if k in kind.model_fields})

        return cls(
            model=group(ModelOptions),
            tools=group(ToolOptions),
            context=group(ContextOptions),
            files=group(FileOptions),
            delegation=group(DelegationOptions),
            approvals=group(ApprovalOptions),
            output=group(OutputOptions),
        )

    def for_subagent(
        self,
        spec: SubAgent,
        tools: Sequence[Tool | Callable[..., Any]],
        profile: HarnessProfile | None,
        inherited: Sequence[Capability],
    ) -> AgentOptions:
        """The options of the subagent `spec` describes, with `tools`: what it sets itself,
        over what it takes from this agent. It has this agent's backend, context settings
        and tracing; its model settings only with its model; `inherited` (this agent's own
        capabilities and MCP tools) only with its tools; its own gates, permissions and
        subagents; no general-purpose subagent; limits inside this agent's budget."""
        model, files, context = self.model, self.files, self.context
        role = (spec.system_prompt, prompts.text("subagent_role"))
        return AgentOptions.of(
            model=model.model if spec.model is None else spec.model,
            model_settings=model.model_settings if spec.model is None else None,
            prices=model.prices,
            limits=spec.limits or without_spending_limits(model.limits),
            tracing=model.tracing,
            profile=profile,
            tools=tools,
            capabilities=(*spec.capabilities, *(inherited if _inherits(spec) else ())),
            mcp_servers=spec.mcp_servers,
            todos=self.tools.todos,
            system_prompt="\n\n".join(part for part in role if part),
            compaction=context.compaction,
            skills=context.skills if spec.skills is None else spec.skills,
            memory=context.memory if spec.memory is None else spec.memory,
            filesystem=files.filesystem,
            backend=files.backend,
            permissions=spec.permissions,
            command_policy=files.command_policy,
            tool_token_limit_before_evict=files.tool_token_limit_before_evict,
            subagents=spec.subagents,
            general_purpose_subagent=False,
            interrupt_on=spec.interrupt_on,
            output_type=spec.output_type,
        )


def _inherits(spec: SubAgent) -> bool:
    """Whether the subagent has its parent's tools: all of them (`tools=None`), or the
    ones it names. Then it also gets the parent's capabilities and MCP tools."""
    return spec.tools is None or any(isinstance(t, str) for t in spec.tools)
