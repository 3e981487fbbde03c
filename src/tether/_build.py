"""What `create_agent` (`tether._create`) builds: the agent its options describe,
validated by group (`tether._options`), its capabilities composed once into the plan its
runs follow."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from tether import prompts
from tether._options import AgentOptions, FileOptions
from tether.agent import Agent
from tether.approval import GateConfig, approval_rules
from tether.backends.composite import CompositeBackend
from tether.backends.sandbox.base import SandboxBackend
from tether.backends.state import StateBackend
from tether.capabilities.base import Capability, overrides
from tether.capabilities.compaction import Compaction, ContextCompaction
from tether.capabilities.dangling import DanglingToolCallRepair
from tether.capabilities.eviction import LargeResultEviction
from tether.capabilities.filesystem import Filesystem
from tether.capabilities.memory import Memory
from tether.capabilities.sandbox import Sandbox
from tether.capabilities.skills import Skills
from tether.capabilities.subagents import GENERAL_PURPOSE_AGENT, SubAgent, Subagents
from tether.capabilities.todos import Todos
from tether.checkpoint.base import open_checkpointer
from tether.errors import ConfigurationError, describe
from tether.models.base import Model
from tether.models.prices import PriceBook
from tether.output import FINAL_RESULT, OutputSpec
from tether.plan import Plan
from tether.profiles import GeneralPurposeProfile, HarnessProfile, profile_for
from tether.prompt import Slot, assemble_system_prompt
from tether.tools.task import GENERAL_PURPOSE
from tether.tools.tool import Tool, tool
from tether.tracing import DEFAULT_TRACING, Tracing

if TYPE_CHECKING:
    from tether.mcp import MCPServer

__all__ = ["assemble"]


def assemble(options: AgentOptions) -> Agent[Any]:
    """The agent `options` describe: its capabilities, in the order their hooks run,
    composed once into the plan every run of it follows."""
    setup, files, context = options.model, options.files, options.context
    model, own = setup.model, options.tools.capabilities
    harness = profile_for(model)
    harness = harness if setup.profile is None else harness.merge(setup.profile)
    tools = tuple(t if isinstance(t, Tool) else tool(t) for t in options.tools.tools)
    file_tools = _file_capabilities(files, hidden_tools=harness.excluded_tools)
    remote = _mcp_capabilities(options.tools.mcp_servers, files)  # shared with subagents
    delegation = _subagent_capabilities(options, harness, tools, inherited=(*own, *remote))
    prices = PriceBook(setup.prices, model=model)
    built = (
        DanglingToolCallRepair(),
        *_context_capabilities(context.compaction, model, prices, files.evict_limit),
        *((Todos(),) if options.tools.todos else ()),
        *_knowledge_capabilities(context.skills, context.memory, files.filesystem),
        *file_tools,
        *_shell_capabilities(files),
        *delegation,
        *remote,
        *own,
    )
    if setup.profile is not None:  # the caller's own profile must fit this agent exactly
        _check_profile(setup.profile, tools, built)
    output_type = options.output.output_type
    plan = _make_plan(
        tools,
        _profiled_capabilities(built, harness),
        _output_spec(output_type),
        context.system_prompt,
        prices,
        interrupt_on=options.approvals.interrupt_on,
        profile=harness,
        tracing=setup.tracing or DEFAULT_TRACING,
    )
    for capability in plan.before_model:
        if isinstance(capability, ContextCompaction):  # it masks results by their tool
            capability.know_tools(plan.tools, gated=plan.approvals)
    checkpointer = options.approvals.checkpointer
    if plan.waits and checkpointer is None:
        raise ConfigurationError(
            "interrupt_on (the agent's or a subagent's) needs a checkpointer: a run waiting "
            "for a decision is resumed from its thread"
        )
    return Agent(
        model=model,
        tools=tools,
        output_type=output_type,
        system_prompt=context.system_prompt,
        limits=setup.limits,
        capabilities=own,
        model_settings=setup.model_settings,
        output_retries=options.output.output_retries,
        checkpointer=open_checkpointer(checkpointer)
        if isinstance(checkpointer, str)
        else checkpointer,
        _plan=plan,
    )


def _file_capabilities(
    files: FileOptions, *, hidden_tools: frozenset[str]
) -> tuple[Capability, ...]:
    """The file tools over the backend (by default a fresh `StateBackend` per run) and the
    eviction of large tool results to files; () without the file tools."""
    if not files.filesystem:
        return ()
    backend = StateBackend() if files.backend is None else files.backend
    found: tuple[Capability, ...] = (
        Filesystem(backend, files.permissions, files.backend_policy, hidden_tools=hidden_tools),
    )
    if files.tool_token_limit_before_evict is not None:
        found += (LargeResultEviction(files.tool_token_limit_before_evict),)
    return found


def _context_capabilities(
    compaction: Compaction | None, model: Model, prices: PriceBook, offload: int | None
) -> tuple[Capability, ...]:
    """The compaction of the history near the model's window, unless it is turned off."""
    return () if compaction is None else (ContextCompaction(compaction, model, prices, offload),)


def _knowledge_capabilities(
    skills: Sequence[str], memory: Sequence[str], filesystem: bool
) -> tuple[Capability, ...]:
    """The memory files and skills, which are read with the file tools."""
    if (skills or memory) and not filesystem:
        raise ConfigurationError("skills and memory are read with the file tools: filesystem=True")
    return (*((Memory(memory),) if memory else ()), *((Skills(skills),) if skills else ()))


def _shell_capabilities(files: FileOptions) -> tuple[Capability, ...]:
    """`execute`, when the files are in a sandbox; a command policy needs one."""
    backend = files.backend if files.filesystem else None
    if isinstance(backend, CompositeBackend):  # commands run where the default files are
        backend = backend.default
    if not isinstance(backend, SandboxBackend):
        if files.command_policy is not None:
            raise ConfigurationError("command_policy needs a SandboxBackend, such as LocalSandbox")
        return ()
    return (Sandbox(backend, files.command_policy),)


def _mcp_capabilities(servers: Sequence[MCPServer], files: FileOptions) -> tuple[Capability, ...]:
    """The MCP servers' tools; the servers are told the roots of the agent's files."""
    if not servers:
        return ()
    # Loaded only for an agent with servers, so `from tether import create_agent` stays fast.
    from tether._mcp_client import backend_roots
    from tether.mcp import MCPTools

    backend = files.backend if files.filesystem else None
    return (
        MCPTools(servers, roots=backend_roots(backend, files.permissions, files.backend_policy)),
    )


def _subagent_capabilities(
    options: AgentOptions,
    harness: HarnessProfile,
    tools: tuple[Tool, ...],
    *,
    inherited: tuple[Capability, ...],
) -> tuple[Capability, ...]:
    """The `task` capability over the subagents (and the general-purpose subagent, as the
    profile shapes it), or (). Each is built from `options.for_subagent`."""
    delegation = options.delegation
    general = harness.general_purpose_subagent or GeneralPurposeProfile()
    chosen: dict[str, SubAgent] = {}
    for spec in delegation.subagents:
        if spec.name in chosen:
            raise ConfigurationError(f"two subagents are named {spec.name!r}")
        chosen[spec.name] = spec
    default = replace(
        GENERAL_PURPOSE_AGENT,
        name=general.name or GENERAL_PURPOSE,
        description=general.description or GENERAL_PURPOSE_AGENT.description,
        system_prompt=general.system_prompt,
        capabilities=(_GivenTools(general.tools),) if general.tools else (),
    )
    wanted = delegation.general_purpose_subagent and general.enabled is not False
    if wanted and default.name not in chosen:
        chosen = {default.name: default, **chosen}
    if not chosen:
        return ()

    def built(spec: SubAgent) -> Agent[Any]:
        if spec.agent is not None:
            if not isinstance(spec.agent, Agent):
                raise ConfigurationError(
                    f"SubAgent {spec.name!r}: agent must be made by create_agent, "
                    f"got {type(spec.agent).__name__}"
                )
            return spec.agent
        try:
            return _only_named(
                spec,
                tools,
                lambda given, profile: assemble(
                    options.for_subagent(spec, given, profile, inherited)
                ),
            )
        except ConfigurationError as exc:  # say which subagent's settings are wrong
            raise ConfigurationError(f"subagent {spec.name!r}: {exc}") from exc

    agents = {name: (spec, built(spec)) for name, spec in chosen.items()}
    return (Subagents(agents, delegation.background),)


class _GivenTools(Capability):
    """Tools added to an agent that inherits its parent's (the general-purpose subagent's,
    from its profile)."""

    def __init__(self, given: Sequence[Tool | Callable[..., Any]]) -> None:
        self.given = tuple(t if isinstance(t, Tool) else tool(t) for t in given)

    def tools(self) -> Sequence[Tool]:
        return self.given


def _only_named(
    spec: SubAgent,
    parent_tools: tuple[Tool, ...],
    build: Callable[[Sequence[Any], HarnessProfile | None], Agent[Any]],
) -> Agent[Any]:
    """The subagent `spec` describes, built by `build(tools, profile)`: when its `tools`
    name tools, it has only those (and the tools it was given)."""
    if spec.tools is None:
        return build(parent_tools, None)
    names = {t for t in spec.tools if isinstance(t, str)}
    given = [t for t in spec.tools if not isinstance(t, str)]
    mine = [*given, *(t for t in parent_tools if t.name in names)]
    agent = build(mine, None)
    if not names:
        return agent
    have = set(agent._plan.tools)
    kept = names | {t.name for t in agent.tools}
    unknown = names - have
    if unknown:
        raise ConfigurationError(
            f"subagent {spec.name!r} names tools it cannot have: {sorted(unknown)}; "
            f"the tools it can have: {', '.join(sorted(have))}"
        )
    return build(mine, HarnessProfile(excluded_tools=frozenset(have - kept)))


def _profiled_tools(tools: tuple[Tool, ...], profile: HarnessProfile) -> tuple[Tool, ...]:
    """The tools without the profile's excluded ones, with its descriptions. (A profile
    serves many agents, so names of tools an agent lacks are passed over.)"""
    overrides = profile.tool_description_overrides
    return tuple(
        replace(t, description=overrides[t.name]) if t.name in overrides else t
        for t in tools
        if t.name not in profile.excluded_tools
    )


def _check_profile(
    profile: HarnessProfile, tools: tuple[Tool, ...], capabilities: tuple[Capability, ...]
) -> None:
    """A profile passed to create_agent may name only tools and capabilities it has."""
    tool_names = {t.name for t in tools} | {t.name for c in capabilities for t in c.tools()}
    unknown = (profile.excluded_tools | set(profile.tool_description_overrides)) - tool_names
    if unknown:
        raise ConfigurationError(
            f"the profile names tools this agent does not have: {sorted(unknown)}"
        )
    missing = profile.excluded_capabilities - {type(c).__name__ for c in capabilities}
    if missing:
        raise ConfigurationError(
            f"the profile excludes capabilities this agent does not have: {sorted(missing)}"
        )


def _profiled_capabilities(
    capabilities: tuple[Capability, ...], profile: HarnessProfile
) -> tuple[Capability, ...]:
    """The capabilities without the profile's excluded ones, with its extra ones."""
    kept = tuple(c for c in capabilities if type(c).__name__ not in profile.excluded_capabilities)
    return (*kept, *profile.extra_capabilities)


def _make_plan(
    tools: tuple[Tool, ...],
    capabilities: tuple[Capability, ...],
    output: OutputSpec,
    system_prompt: str | None,
    prices: PriceBook,
    *,
    interrupt_on: Mapping[str, GateConfig] | None,
    profile: HarnessProfile,
    tracing: Tracing,
) -> Plan:
    """The plan every run of the agent follows: its tools, its system prompt, and its
    capabilities by the hooks they have."""
    every_tool = _profiled_tools((*tools, *(t for c in capabilities for t in c.tools())), profile)
    by_name = _by_name(every_tool, output)
    specs = tuple(t.spec for t in every_tool)
    sections: list[tuple[Slot, str | None]] = [(c.prompt_slot, c.prompt()) for c in capabilities]
    if output.tool is not None:
        specs += (output.tool,)
        sections.append(("output", prompts.render("output", tool=FINAL_RESULT)))
    approvals = approval_rules(interrupt_on, list(by_name))
    if approvals:
        names = ", ".join(f"`{name}`" for name in approvals)
        sections.append(("approval", prompts.render("approval", tools=names)))
    sections.append(("suffix", profile.system_prompt_suffix))

    def hooked(hook: str) -> tuple[Capability, ...]:
        return tuple(c for c in capabilities if overrides(c, hook))

    return Plan(
        tools=by_name,
        tool_specs=specs,
        system_prompt=assemble_system_prompt(
            system_prompt, sections, base=profile.base_system_prompt
        ),
        output=output,
        prices=prices,
        on_run_start=hooked("on_run_start"),
        on_run_end=hooked("on_run_end"),
        before_model=hooked("before_model"),
        before_finish=hooked("before_finish"),
        after_model=hooked("after_model"),
        around_tool=hooked("around_tool"),
        approvals=approvals,
        run_prompt=hooked("run_prompt"),
        held=hooked("on_agent_open"),
        waits=bool(approvals)
        or any(
            agent._plan.waits
            for c in capabilities
            if isinstance(c, Subagents)
            for _, agent in c.agents.values()
        ),
        tracing=tracing,
        custom_prompt=system_prompt,
        base_prompt=profile.base_system_prompt,
        sections=tuple(sections),
    )


def _by_name(tools: Sequence[Tool], output: OutputSpec) -> dict[str, Tool]:
    """The tools by name, which must be unique (and not the answer tool's, if there is one)."""
    by_name: dict[str, Tool] = {}
    for item in tools:
        if output.structured and item.name == FINAL_RESULT:
            raise ConfigurationError(
                f"the tool name {FINAL_RESULT!r} is reserved for the answer of an agent "
                "with an output_type; rename the tool"
            )
        if item.name in by_name:
            raise ConfigurationError(
                f"two tools are named {item.name!r}; tool names must be unique"
            )
        by_name[item.name] = item
    return by_name


def _output_spec(output_type: Any) -> OutputSpec:
    """How the agent gives its answer; a type pydantic cannot take is a ConfigurationError."""
    try:
        return OutputSpec(output_type)
    except ConfigurationError:
        raise
    except Exception as exc:
        raise ConfigurationError(
            f"output_type must be a type pydantic can validate (str, a BaseModel, "
            f"list[int], ...), got {output_type!r}: {describe(exc)}"
        ) from None
