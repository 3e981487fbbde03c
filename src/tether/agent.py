"""`create_agent()` and the `Agent` it returns: run, arun and stream."""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import json
import re
import uuid
from collections.abc import AsyncIterator, Callable, Coroutine, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any, Generic, Literal, Self, TypeAlias, TypeVar, overload

from tether import _checks, prompts
from tether.approval import (
    DECISION_KINDS,
    DECISION_TYPES,
    ApprovalRequest,
    Decision,
    Gate,
    GateConfig,
    approval_rules,
    match_decisions,
)
from tether.backends.base import Backend
from tether.backends.composite import CompositeBackend
from tether.backends.permissions import Policy, Rule
from tether.backends.sandbox.base import SandboxBackend
from tether.backends.state import StateBackend
from tether.capabilities.base import Capability, overrides
from tether.capabilities.compaction import Compaction, ContextCompaction
from tether.capabilities.dangling import DanglingToolCallRepair
from tether.capabilities.eviction import LargeResultEviction
from tether.capabilities.filesystem import Filesystem
from tether.capabilities.memory import Memory
from tether.capabilities.sandbox import CommandPolicy, Sandbox
from tether.capabilities.skills import Skills
from tether.capabilities.subagents import GENERAL_PURPOSE_AGENT, Subagents
from tether.capabilities.todos import Todos
from tether.checkpoint.base import Checkpointer, ThreadInfo, open_checkpointer
from tether.errors import ConfigurationError, describe
from tether.events import ApprovalRequested, Compacted, Event, RunFinished, RunStarted
from tether.limits import Limits, without_spending_limits
from tether.messages import (
    AssistantMessage,
    BinaryPart,
    Message,
    TextPart,
    ToolResultMessage,
    Usage,
    UserMessage,
)
from tether.models.base import Model, ModelSettings, ToolSpec
from tether.models.prices import Price, PriceBook
from tether.models.resolve import infer_model
from tether.output import FINAL_RESULT, OutputSpec
from tether.profiles import GeneralPurposeProfile, HarnessProfile, profile_for
from tether.prompt import Slot, assemble_system_prompt
from tether.state import Todo
from tether.tools.task import GENERAL_PURPOSE, Background, SubAgent
from tether.tools.tool import Tool, tool
from tether.tracing import DEFAULT_TRACING, Tracing

if TYPE_CHECKING:
    from tether.checkpoint.journal import Journal, Thread
    from tether.mcp import MCPServer

__all__ = ["Agent", "Prompt", "RunResult", "StopReason", "create_agent"]

OutputT = TypeVar("OutputT")
T = TypeVar("T")

StopReason: TypeAlias = Literal[
    "completed",
    "budget",
    "loop",
    "timeout",
    "interrupted",
    "cancelled",
    "content_filter",
    "error",
]
Prompt: TypeAlias = str | UserMessage | Sequence[TextPart | BinaryPart]


_DEFAULT_COMPACTION = Compaction()
DEFAULT_CHECKPOINTER = "sqlite:///.tether/runs.db"


@dataclass(frozen=True, slots=True)
class RunResult(Generic[OutputT]):
    """How a run ended and everything it did.

    `output` is the final answer when `stop_reason == "completed"`, else None.
    `messages` is the whole conversation (history included); pass it as
    `message_history` to continue it. `usage` and `cost_usd` include what subagents
    spent, `usage_by_agent` breaks usage down by agent path, and `steps` counts this
    agent's own model calls.
    """

    output: OutputT | None
    stop_reason: StopReason
    messages: tuple[Message, ...]
    usage: Usage
    cost_usd: float | None
    steps: int
    run_id: str
    new_messages_start: int = 0
    files: Mapping[str, bytes] = field(default_factory=dict)
    """The files of the run's StateBackend, by path (empty for other backends)."""
    todos: tuple[Todo, ...] = ()
    """The task list as the agent last wrote it with `write_todos`."""
    usage_by_agent: Mapping[str, Usage] = field(default_factory=dict)
    """Usage by agent path: "main", and "main/task:<name>#<n>" for each subagent run."""
    thread_id: str | None = None
    """The thread the run was recorded in, if any."""
    interrupts: tuple[ApprovalRequest, ...] = ()
    """With `stop_reason == "interrupted"`: the calls waiting for a decision."""

    def new_messages(self) -> tuple[Message, ...]:
        """The messages this run added (its prompt included), without the history."""
        return self.messages[self.new_messages_start :]

    @classmethod
    def of_thread(
        cls,
        thread: Thread,
        stop_reason: StopReason,
        *,
        output: OutputT | None = None,
        interrupts: tuple[ApprovalRequest, ...] = (),
        thread_id: str | None = None,
    ) -> RunResult[OutputT]:
        """The result a recorded `thread` stands at."""
        return cls(
            output=output,
            stop_reason=stop_reason,
            messages=tuple(thread.messages),
            usage=thread.usage,
            cost_usd=thread.cost_usd,
            steps=thread.steps,
            run_id=thread.run_id or "",
            new_messages_start=thread.run_start,
            files={path: data for path, (data, _) in thread.files.items()},
            todos=thread.todos,
            thread_id=thread_id or thread.thread_id,
            interrupts=interrupts,
        )


@dataclass(frozen=True, slots=True)
class _Plan:
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


@dataclass(frozen=True, slots=True, eq=False)
class Agent(Generic[OutputT]):
    """An agent's configuration. Immutable: create it once, run it many times, concurrently."""

    model: Model
    tools: tuple[Tool, ...]
    output_type: Any
    system_prompt: str | None
    limits: Limits
    capabilities: tuple[Capability, ...]
    model_settings: ModelSettings
    output_retries: int
    checkpointer: Checkpointer | None
    _plan: _Plan = field(repr=False)

    async def __aenter__(self) -> Self:
        """Keep what runs can share (MCP server connections) until the block ends, instead
        of each run starting its own. Runs inside the block, on its event loop, use them."""
        opened: list[Capability] = []
        try:
            for capability in self._plan.held:
                await capability.on_agent_open()
                opened.append(capability)
        except BaseException:
            await _close_all(opened)
            raise
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await _close_all(self._plan.held)

    async def arun(
        self,
        prompt: Prompt | None = None,
        *,
        message_history: Sequence[Message] | None = None,
        deps: Any = None,
        thread_id: str | None = None,
        wait: float = 0.0,
        metadata: Mapping[str, Any] | None = None,
        client_tools: Sequence[ToolSpec] = (),
    ) -> RunResult[OutputT]:
        """Run until the agent answers or a limit stops it.

        With a `thread_id` the run continues that thread's conversation (its messages,
        files and todos) and every step is recorded by the checkpointer, so a run that
        is killed can be resumed with `resume`. A thread has one run at a time: while
        another holds it, this raises `ThreadBusyError`, or first waits up to `wait`
        seconds for it to end. `metadata` (JSON values) is recorded with the run in its
        thread, as the settings a later run on the thread can read back.

        `client_tools` are tools the caller runs itself (a web page's, say): the model
        sees them beside the agent's own, and a call of one stops the run, recorded in
        its thread, as a gated call does (`stop_reason="interrupted"`, an
        `ApprovalRequest` with `client_tool=True`). `resume` with `Respond(result)` (or
        `Reject`) for that call goes on. They never replace one of the agent's tools.
        """
        return await self._execute(
            prompt,
            message_history,
            deps,
            thread_id,
            wait=wait,
            metadata=metadata,
            client_tools=client_tools,
        )

    def run(
        self,
        prompt: Prompt | None = None,
        *,
        message_history: Sequence[Message] | None = None,
        deps: Any = None,
        thread_id: str | None = None,
        wait: float = 0.0,
        metadata: Mapping[str, Any] | None = None,
        client_tools: Sequence[ToolSpec] = (),
    ) -> RunResult[OutputT]:
        """`arun` for code without an event loop; inside one (Jupyter) it uses a worker thread."""
        return _run_sync(
            lambda: self.arun(
                prompt,
                message_history=message_history,
                deps=deps,
                thread_id=thread_id,
                wait=wait,
                metadata=metadata,
                client_tools=client_tools,
            )
        )

    async def aresume(
        self,
        thread_id: str,
        *,
        decisions: Sequence[Decision] | Mapping[str, Decision] | None = None,
        deps: Any = None,
        wait: float = 0.0,
        client_tools: Sequence[ToolSpec] = (),
    ) -> RunResult[OutputT]:
        """Continue the thread's unfinished run from its last recorded step: one that was
        killed, one that ended in an error (a provider that was down, say), or one waiting
        for `decisions` on its `interrupts` (a list in their order, or a mapping by call
        id). Tool calls that finished are not run again.

        Decisions are applied once: sent again for calls already decided, they raise
        `AlreadyDecidedError` with the earlier ones. `wait` and `client_tools` are as for
        `arun` (the client tools of the run going on, not those of the run that stopped).
        """
        return await self._resume(thread_id, decisions, deps, wait=wait, client_tools=client_tools)

    async def stream_resume(
        self,
        thread_id: str,
        *,
        decisions: Sequence[Decision] | Mapping[str, Decision] | None = None,
        deps: Any = None,
        wait: float = 0.0,
        client_tools: Sequence[ToolSpec] = (),
    ) -> AsyncIterator[Event]:
        """`aresume`, yielding events as they happen like `stream`."""
        async for event in _streamed(
            lambda emit: self._resume(
                thread_id, decisions, deps, emit, wait=wait, client_tools=client_tools
            )
        ):
            yield event

    async def _resume(
        self,
        thread_id: str,
        decisions: Sequence[Decision] | Mapping[str, Decision] | None,
        deps: Any,
        emit: Callable[[Event], None] | None = None,
        *,
        wait: float = 0.0,
        client_tools: Sequence[ToolSpec] = (),
    ) -> RunResult[OutputT]:
        from tether.loop import execute_run

        client_tools = self._checked_client_tools(client_tools)
        if decisions is not None and not isinstance(decisions, Mapping):
            decisions = _checks.each("decisions", decisions, DECISION_TYPES, DECISION_KINDS)
        async with self._hold(thread_id, "resume", wait) as (journal, thread):
            if not thread.exists:
                raise ConfigurationError(f"there is no thread {thread_id!r} to resume")
            if decisions is not None and not thread.interrupts:
                thread.refuse_decided_again(decisions)
            if not thread.resumable:
                raise ConfigurationError(
                    f"thread {thread_id!r} has nothing to resume: its last run ended with "
                    f"{thread.stop_reason!r}; start a new run with run(..., thread_id=...)"
                )
            if thread.interrupts or decisions is not None:
                if not thread.interrupts:
                    raise ConfigurationError(
                        f"thread {thread_id!r} has no call waiting for a decision"
                    )
                chosen = match_decisions(thread.interrupts, decisions, decided=thread.decided)
                await journal.decided(chosen)
                thread.decisions.update(chosen)
                rest = [r for r in thread.interrupts if r["call_id"] not in chosen]
                if rest:  # the turn's calls run once every one is decided
                    return _still_waiting(thread, tuple(map(ApprovalRequest.from_json, rest)), emit)
            return await execute_run(
                self,
                thread.messages,
                new_messages=len(thread.messages) - thread.run_start,
                deps=deps,
                emit=emit,
                journal=journal,
                thread=thread,
                resume=True,
                client_tools=client_tools,
            )

    def resume(
        self,
        thread_id: str,
        *,
        decisions: Sequence[Decision] | Mapping[str, Decision] | None = None,
        deps: Any = None,
        wait: float = 0.0,
        client_tools: Sequence[ToolSpec] = (),
    ) -> RunResult[OutputT]:
        """`aresume` for code without an event loop."""
        return _run_sync(
            lambda: self.aresume(
                thread_id, decisions=decisions, deps=deps, wait=wait, client_tools=client_tools
            )
        )

    async def aabandon(self, thread_id: str, *, wait: float = 0.0) -> bool:
        """End the thread's unfinished run where it stands, so that the next `run` on the
        thread starts from there: each call left without a result is answered with an
        error saying it was abandoned (one that had started may have taken effect), calls
        waiting for approval are not run, and the run is recorded as "cancelled". False
        when the thread had no unfinished run. `wait` is as for `arun`.
        """
        async with self._hold(thread_id, "abandon", wait) as (journal, thread):
            if not thread.unfinished:
                return False
            await journal.abandon(thread)
            return True

    def abandon(self, thread_id: str, *, wait: float = 0.0) -> bool:
        """`aabandon` for code without an event loop."""
        return _run_sync(lambda: self.aabandon(thread_id, wait=wait))

    async def acompact(self, thread_id: str, *, wait: float = 0.0) -> list[Compacted]:
        """Make the thread's history as small as it goes now, between runs: the older
        messages are saved and summarized as when a run nears the model's window, and
        the latest exchange is kept. The summary is recorded as a run of its own (its
        cost counts in the thread's). What was done, as `Compacted` events (none when
        there was nothing to compact). `wait` is as for `arun`.
        """
        from tether.loop import compact_thread

        done: list[Compacted] = []
        async with self._hold(thread_id, "compact", wait) as (journal, thread):
            if not thread.exists:
                raise ConfigurationError(f"there is no thread {thread_id!r} to compact")
            if thread.unfinished:
                raise ConfigurationError(
                    f"thread {thread_id!r} has an unfinished run; resume() or abandon() it first"
                )
            await compact_thread(
                self,
                journal,
                thread,
                lambda e: done.append(e) if isinstance(e, Compacted) else None,
            )
        return done

    def compact(self, thread_id: str, *, wait: float = 0.0) -> list[Compacted]:
        """`acompact` for code without an event loop."""
        return _run_sync(lambda: self.acompact(thread_id, wait=wait))

    async def athreads(self) -> list[ThreadInfo]:
        """The checkpointer's threads, the most recently written first."""
        return await self._checkpointer().threads()

    def threads(self) -> list[ThreadInfo]:
        """`athreads` for code without an event loop."""
        return _run_sync(self.athreads)

    async def ahistory(self, thread_id: str) -> list[Message]:
        """The thread's conversation as recorded, compactions applied."""
        from tether.checkpoint.journal import read_thread

        thread = await read_thread(self._checkpointer(), _checked_thread_id(thread_id))
        return thread.messages

    def history(self, thread_id: str) -> list[Message]:
        """`ahistory` for code without an event loop."""
        return _run_sync(lambda: self.ahistory(thread_id))

    async def adelete_thread(self, thread_id: str) -> bool:
        """Delete the thread's record; whether it existed. `ThreadBusyError` while a run
        holds the thread."""
        return await self._checkpointer().delete(_checked_thread_id(thread_id))

    def delete_thread(self, thread_id: str) -> bool:
        """`adelete_thread` for code without an event loop."""
        return _run_sync(lambda: self.adelete_thread(thread_id))

    async def stream(
        self,
        prompt: Prompt | None = None,
        *,
        message_history: Sequence[Message] | None = None,
        deps: Any = None,
        thread_id: str | None = None,
        wait: float = 0.0,
        metadata: Mapping[str, Any] | None = None,
        client_tools: Sequence[ToolSpec] = (),
    ) -> AsyncIterator[Event]:
        """Run and yield events as they happen, `RunFinished` last.

        If the run fails, its error is raised after `RunFinished` was yielded. Leaving the
        loop early cancels the run. `client_tools` are as for `arun`.
        """
        async for event in _streamed(
            lambda emit: self._execute(
                prompt,
                message_history,
                deps,
                thread_id,
                emit,
                wait=wait,
                metadata=metadata,
                client_tools=client_tools,
            )
        ):
            yield event

    async def _execute(
        self,
        prompt: Prompt | None,
        history: Sequence[Message] | None,
        deps: Any,
        thread_id: str | None,
        emit: Callable[[Event], None] | None = None,
        *,
        run_id: str | None = None,
        wait: float = 0.0,
        metadata: Mapping[str, Any] | None = None,
        client_tools: Sequence[ToolSpec] = (),
    ) -> RunResult[OutputT]:
        from tether.loop import execute_run

        client_tools = self._checked_client_tools(client_tools)
        if thread_id is None and (self._plan.waits or client_tools):
            thread_id = f"thread_{uuid.uuid4().hex[:16]}"  # a waiting run must be resumable
        recorded = _checked_metadata(metadata, thread_id)
        if thread_id is None:
            messages = _start_messages(prompt, history)
            new_messages = len(messages) - len(history or ())
            return await execute_run(
                self, messages, new_messages=new_messages, deps=deps, emit=emit, run_id=run_id
            )
        if history is not None:
            raise ConfigurationError(
                "give a thread_id or a message_history, not both: a thread keeps its own"
            )
        checked_run_thread_id(thread_id)
        run_id = run_id or f"run_{uuid.uuid4().hex[:16]}"
        async with self._hold(thread_id, f"run {run_id}", wait) as (journal, thread):
            if thread.unfinished:
                how = thread.stop_reason or "stopped without an end"
                raise ConfigurationError(
                    f"thread {thread_id!r} has an unfinished run ({how}); continue it with "
                    "resume() or abandon() it"
                )
            journal.metadata = recorded
            messages = _start_messages(prompt, thread.messages)
            return await execute_run(
                self,
                messages,
                new_messages=len(messages) - len(thread.messages),
                deps=deps,
                emit=emit,
                journal=journal,
                thread=thread,
                run_id=run_id,
                client_tools=client_tools,
            )

    def _checked_client_tools(self, tools: object) -> tuple[ToolSpec, ...]:
        """`client_tools` checked: ToolSpecs of distinct names, none of which is (in any
        case) the name of one of the agent's own tools or of `final_result`."""
        checked: tuple[ToolSpec, ...] = _checks.each("client_tools", tools, ToolSpec, "ToolSpecs")
        plan = self._plan
        own = {str(n).casefold() for n in (*plan.tools, *(s.name for s in plan.tool_specs))}
        own.add(FINAL_RESULT)
        seen: set[str] = set()
        for spec in checked:
            name = str(spec.name).casefold()
            if name in own:
                raise ConfigurationError(
                    f"client tool {spec.name!r} has the name of one of the agent's own tools; "
                    "a client tool never replaces one: rename it"
                )
            if name in seen:
                raise ConfigurationError(f"client tool {spec.name!r} is given twice")
            seen.add(name)
        return checked

    def _checkpointer(self) -> Checkpointer:
        if self.checkpointer is None:
            raise ConfigurationError(
                "threads need a checkpointer; create the agent with checkpointer=... "
                "(the default is sqlite:///.tether/runs.db)"
            )
        return self.checkpointer

    @contextlib.asynccontextmanager
    async def _hold(
        self, thread_id: str, work: str, wait: float
    ) -> AsyncIterator[tuple[Journal, Thread]]:
        """The thread's lease for the body, its journal, and its state as recorded."""
        from tether.checkpoint.journal import Journal, read_thread
        from tether.checkpoint.lease import hold

        checkpointer = self._checkpointer()
        async with hold(checkpointer, _checked_thread_id(thread_id), work, wait=wait) as me:
            thread = await read_thread(checkpointer, thread_id)
            journal = Journal(checkpointer, thread_id, me.token)
            journal.adopt(thread)
            yield journal, thread


def _still_waiting(
    thread: Thread, requests: tuple[ApprovalRequest, ...], emit: Callable[[Event], None] | None
) -> RunResult[Any]:
    """The result (and the events) of a resume that decided some of the waiting calls: the
    run stays where it stopped, for the `requests` still waiting."""
    result: RunResult[Any] = RunResult.of_thread(thread, "interrupted", interrupts=requests)
    if emit is not None:
        path = ("main",)
        for event in (
            RunStarted(path, result.run_id),
            ApprovalRequested(path, requests),
            RunFinished(path, result),
        ):
            emit(event)
    return result


async def _close_all(capabilities: Sequence[Capability]) -> None:
    """`on_agent_close` for each, last opened first; every one runs even if one fails."""
    errors: list[Exception] = []
    for capability in reversed(capabilities):
        try:
            await capability.on_agent_close()
        except Exception as exc:
            errors.append(exc)
    if errors:
        raise errors[0]


def _checked_metadata(metadata: object, thread_id: str | None) -> dict[str, Any] | None:
    """`metadata` as recorded: a mapping of JSON values, given with a thread."""
    if metadata is None:
        return None
    if thread_id is None:
        raise ConfigurationError("metadata is recorded in a thread: give a thread_id too")
    if not isinstance(metadata, Mapping):
        raise ConfigurationError(f"metadata must be a mapping, got {type(metadata).__name__}")
    try:
        return dict(json.loads(json.dumps(dict(metadata), allow_nan=False)))
    except (TypeError, ValueError) as exc:
        raise ConfigurationError(f"metadata must hold JSON values only: {exc}") from None


def _checked_thread_id(thread_id: object) -> str:
    if not isinstance(thread_id, str) or not thread_id.strip():
        raise ConfigurationError(f"thread_id must be a non-empty string, got {thread_id!r}")
    try:
        thread_id.encode()
    except UnicodeEncodeError:
        raise ConfigurationError(f"thread_id must be valid Unicode, got {thread_id!r}") from None
    return thread_id


_RUNNABLE_THREAD_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.:@-]{0,127}")


def checked_run_thread_id(thread_id: object) -> str:
    """`thread_id` for a run to start on: 1 to 128 ASCII letters, digits and `_ . : @ -`,
    the first a letter or digit. Such an id is one path segment of every URL and one
    argument of every command (no `/`, no `..`, no leading `-`, nothing invisible), so a
    thread started anywhere can be watched, stopped and deleted everywhere. Threads with
    other ids (made by an older tether) can still be resumed, read and deleted."""
    thread_id = _checked_thread_id(thread_id)
    if not _RUNNABLE_THREAD_ID.fullmatch(thread_id):
        shown = repr(thread_id if len(thread_id) <= 80 else thread_id[:80] + "...")
        raise ConfigurationError(
            "a thread id is 1 to 128 letters (a-z, A-Z), digits and '_', '.', ':', '@', '-', "
            f"starting with a letter or digit; got {shown} ({len(thread_id)} characters)"
        )
    return thread_id


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
    compaction: Compaction | None = _DEFAULT_COMPACTION,
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
    compaction: Compaction | None = _DEFAULT_COMPACTION,
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
    compaction: Compaction | None = _DEFAULT_COMPACTION,
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
    tools = _checks.each_callable("tools", tools, "a Tool or a typed function", also=(Tool,))
    capabilities = _checks.each("capabilities", capabilities, Capability, "Capability instances")
    permissions = _checks.each("permissions", permissions, Rule, "tether.backends.Rule")
    subagents = _checks.each("subagents", subagents, SubAgent, "tether.SubAgent")
    _check_settings(
        system_prompt=system_prompt,
        prices=prices,
        interrupt_on=interrupt_on,
        backend_policy=backend_policy,
        filesystem=filesystem,
        todos=todos,
        general_purpose_subagent=general_purpose_subagent,
    )
    resolved = _resolve_model(model)
    if tracing is not None and not isinstance(tracing, Tracing):
        raise ConfigurationError(
            f"tracing must be a tether.tracing.Tracing, got {type(tracing).__name__}"
        )
    if profile is not None and not isinstance(profile, HarnessProfile):
        raise ConfigurationError(f"profile must be a HarnessProfile, got {type(profile).__name__}")
    harness = profile_for(resolved)
    harness = harness if profile is None else harness.merge(profile)
    checked_profile = profile  # the caller's own profile must fit this agent exactly
    general = harness.general_purpose_subagent or GeneralPurposeProfile()
    tool_list = tuple(t if isinstance(t, Tool) else tool(t) for t in tools)
    limits = limits if limits is not None else Limits()
    if not isinstance(limits, Limits):
        raise ConfigurationError(f"limits must be a Limits, got {type(limits).__name__}")
    if (
        isinstance(output_retries, bool)
        or not isinstance(output_retries, int)
        or output_retries < 0
    ):
        raise ConfigurationError(f"output_retries must be an integer >= 0, got {output_retries!r}")
    if model_settings is not None and not isinstance(model_settings, ModelSettings):
        raise ConfigurationError(
            f"model_settings must be a tether.models.ModelSettings, "
            f"got {type(model_settings).__name__}"
        )
    files = _file_capabilities(
        filesystem,
        backend,
        permissions,
        backend_policy,
        tool_token_limit_before_evict,
        hidden_tools=harness.excluded_tools,
    )
    remote = _mcp_capabilities(  # listed once, shared with subagents
        mcp_servers, files=(backend if filesystem else None, permissions, backend_policy)
    )
    inherited = (*capabilities, *remote)
    if background is not None and not isinstance(background, Background):
        raise ConfigurationError(
            f"background must be a tether.Background, got {type(background).__name__}"
        )
    delegation = _subagent_capabilities(
        subagents,
        general_purpose_subagent and general.enabled is not False,
        general,
        background,
        lambda spec: _only_named(
            spec,
            tool_list,
            lambda tools, profile: create_agent(
                resolved if spec.model is None else spec.model,
                tools=tools,
                profile=profile,
                system_prompt="\n\n".join(
                    part for part in (spec.system_prompt, prompts.text("subagent_role")) if part
                ),
                output_type=spec.output_type,
                limits=spec.limits or without_spending_limits(limits),
                capabilities=(*spec.capabilities, *(inherited if _inherits(spec) else ())),
                model_settings=model_settings if spec.model is None else None,
                prices=prices,
                backend=backend,
                permissions=spec.permissions,
                tool_token_limit_before_evict=tool_token_limit_before_evict,
                filesystem=filesystem,
                todos=todos,
                subagents=spec.subagents,
                general_purpose_subagent=False,
                compaction=compaction,
                command_policy=command_policy,
                skills=skills if spec.skills is None else spec.skills,
                memory=memory if spec.memory is None else spec.memory,
                mcp_servers=spec.mcp_servers,
                interrupt_on=spec.interrupt_on,
                tracing=tracing,
            ),
        ),
    )
    price_book = PriceBook(prices, model=resolved)
    offload = tool_token_limit_before_evict if filesystem else None
    built = (
        DanglingToolCallRepair(),
        *_context_capabilities(compaction, resolved, price_book, offload),
        *((Todos(),) if todos else ()),
        *_knowledge_capabilities(skills, memory, filesystem),
        *files,
        *_shell_capabilities(backend if filesystem else None, command_policy),
        *delegation,
        *remote,
        *capabilities,
    )
    if checked_profile is not None:
        _check_profile(checked_profile, tool_list, built)
    all_capabilities = _profiled_capabilities(built, harness)
    output = _output_spec(output_type)
    plan = _make_plan(
        tool_list,
        all_capabilities,
        output,
        system_prompt,
        price_book,
        interrupt_on=interrupt_on,
        profile=harness,
        tracing=tracing or DEFAULT_TRACING,
    )
    if plan.waits and checkpointer is None:
        raise ConfigurationError(
            "interrupt_on (the agent's or a subagent's) needs a checkpointer: a run waiting "
            "for a decision is resumed "
            "from its thread"
        )
    return Agent(
        model=resolved,
        tools=tool_list,
        output_type=output_type,
        system_prompt=system_prompt,
        limits=limits,
        capabilities=tuple(capabilities),
        model_settings=model_settings or ModelSettings(),
        output_retries=output_retries,
        checkpointer=_resolve_checkpointer(checkpointer),
        _plan=plan,
    )


def _file_capabilities(
    enabled: bool,
    backend: Backend | None,
    permissions: Sequence[Rule],
    policy: Policy | None,
    evict_limit: int | None,
    *,
    hidden_tools: frozenset[str],
) -> tuple[Capability, ...]:
    if not enabled:
        if backend is not None or permissions or policy is not None:
            raise ConfigurationError("backend, permissions and backend_policy need filesystem=True")
        return ()
    backend = StateBackend() if backend is None else backend
    if not isinstance(backend, Backend):
        raise ConfigurationError(
            f"backend must implement tether.backends.Backend, got {type(backend).__name__}"
        )
    if evict_limit is not None and (
        isinstance(evict_limit, bool) or not isinstance(evict_limit, int) or evict_limit < 1
    ):
        raise ConfigurationError(
            f"tool_token_limit_before_evict must be a positive integer or None, got {evict_limit!r}"
        )
    found: tuple[Capability, ...] = (
        Filesystem(backend, permissions, policy, hidden_tools=hidden_tools),
    )
    if evict_limit is not None:
        found += (LargeResultEviction(evict_limit),)
    return found


def _output_spec(output_type: Any) -> OutputSpec:
    try:
        return OutputSpec(output_type)
    except ConfigurationError:
        raise
    except Exception as exc:
        raise ConfigurationError(
            f"output_type must be a type pydantic can validate (str, a BaseModel, "
            f"list[int], ...), got {output_type!r}: {describe(exc)}"
        ) from None


def _context_capabilities(
    compaction: Compaction | None, model: Model, prices: PriceBook, offload: int | None
) -> tuple[Capability, ...]:
    if compaction is None:
        return ()
    if not isinstance(compaction, Compaction):
        raise ConfigurationError(
            f"compaction must be a tether.Compaction or None, got {type(compaction).__name__}"
        )
    return (ContextCompaction(compaction, model, prices, offload),)


def _knowledge_capabilities(
    skills: Sequence[str], memory: Sequence[str], filesystem: bool
) -> tuple[Capability, ...]:
    if (skills or memory) and not filesystem:
        raise ConfigurationError("skills and memory are read with the file tools: filesystem=True")
    return (*((Memory(memory),) if memory else ()), *((Skills(skills),) if skills else ()))


def _shell_capabilities(
    backend: Backend | None, policy: CommandPolicy | Callable[[str], str | None] | None
) -> tuple[Capability, ...]:
    if isinstance(backend, CompositeBackend):  # commands run where the default files are
        backend = backend.default
    if not isinstance(backend, SandboxBackend):
        if policy is not None:
            raise ConfigurationError("command_policy needs a SandboxBackend, such as LocalSandbox")
        return ()
    return (Sandbox(backend, policy),)


def _mcp_capabilities(
    servers: Sequence[MCPServer],
    *,
    files: tuple[Backend | None, Sequence[Rule], Policy | None] = (None, (), None),
) -> tuple[Capability, ...]:
    """The MCP servers' tools; `files` (the backend, its rules and policy) gives the
    roots the servers are told of."""
    if not servers:
        return ()
    from tether._mcp_client import backend_roots
    from tether.mcp import MCPServer, MCPTools  # MCPTools needs the mcp extra

    checked = _checks.each("mcp_servers", servers, MCPServer, "tether.mcp.MCPServer")
    return (MCPTools(checked, roots=backend_roots(*files)),)


def _check_settings(
    *,
    system_prompt: object,
    prices: object,
    interrupt_on: object,
    backend_policy: object,
    **flags: object,
) -> None:
    """The arguments of `create_agent` that are a string, a mapping, a callable or a flag."""
    _checks.optional_text("system_prompt", system_prompt)
    _checks.mapping("prices", prices, "Price by model name", values=Price)
    _checks.mapping("interrupt_on", interrupt_on, "settings by tool name")
    if backend_policy is not None and not callable(backend_policy):
        raise ConfigurationError(f"backend_policy must be callable, got {backend_policy!r}")
    for name, value in flags.items():
        _checks.flag(name, value)


def _subagent_capabilities(
    specs: Sequence[SubAgent],
    general_purpose: bool,
    general: GeneralPurposeProfile,
    background: Background | None,
    build: Callable[[SubAgent], Agent[Any]],
) -> tuple[Capability, ...]:
    """The `task` capability over `specs` (and the general-purpose subagent, as the
    profile shapes it), or ()."""
    chosen: dict[str, SubAgent] = {}
    for spec in specs:
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
    if general_purpose and default.name not in chosen:
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
            return build(spec)
        except ConfigurationError as exc:  # say which subagent's settings are wrong
            raise ConfigurationError(f"subagent {spec.name!r}: {exc}") from exc

    agents = {name: (spec, built(spec)) for name, spec in chosen.items()}
    return (Subagents(agents, background),)


class _GivenTools(Capability):
    """Tools added to an agent that inherits its parent's (the general-purpose subagent's,
    from its profile)."""

    def __init__(self, given: Sequence[Tool | Callable[..., Any]]) -> None:
        self.given = tuple(t if isinstance(t, Tool) else tool(t) for t in given)

    def tools(self) -> Sequence[Tool]:
        return self.given


def _inherits(spec: SubAgent) -> bool:
    """Whether the subagent has its parent's tools: all of them (`tools=None`), or the
    ones it names. Then it also gets the parent's capabilities and MCP tools."""
    return spec.tools is None or any(isinstance(t, str) for t in spec.tools)


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
) -> _Plan:
    every_tool = _profiled_tools((*tools, *(t for c in capabilities for t in c.tools())), profile)
    by_name: dict[str, Tool] = {}
    for item in every_tool:
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

    return _Plan(
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


def _resolve_checkpointer(checkpointer: Checkpointer | str | None) -> Checkpointer | None:
    if checkpointer is None or isinstance(checkpointer, Checkpointer):
        return checkpointer
    if isinstance(checkpointer, str):
        return open_checkpointer(checkpointer)
    lacking = [
        name
        for name in ("append", "load", "threads", "delete", "close", "acquire", "renew", "release")
        if not callable(getattr(checkpointer, name, None))
    ]
    raise ConfigurationError(
        f"checkpointer must be a Checkpointer, a URL or None, got {type(checkpointer).__name__}"
        + (f" (it has no {', '.join(lacking)})" if len(lacking) < 8 else "")
    )


def _resolve_model(model: Model | str) -> Model:
    if isinstance(model, str):
        return infer_model(model)
    if not isinstance(model, Model):
        raise ConfigurationError(
            f"model must implement tether.models.Model (name, provider, request, stream), "
            f"got {type(model).__name__}"
        )
    return model


MESSAGE_TYPES = (UserMessage, AssistantMessage, ToolResultMessage)


def _start_messages(prompt: Prompt | None, history: Sequence[Message] | None) -> list[Message]:
    messages: list[Message] = list(
        _checks.each("message_history", history or (), MESSAGE_TYPES, "tether messages")
    )
    if prompt is None:
        if not messages:
            raise ConfigurationError("a run needs a prompt, a message_history, or both")
        return messages
    if isinstance(prompt, str):
        if not prompt.strip():
            raise ConfigurationError("the prompt is empty; give the agent a task")
        messages.append(UserMessage.of(prompt))
    elif isinstance(prompt, UserMessage):
        messages.append(prompt)
    elif isinstance(prompt, list | tuple) and all(
        isinstance(p, TextPart | BinaryPart) for p in prompt
    ):
        messages.append(UserMessage(tuple(prompt)))
    else:
        raise ConfigurationError(
            "prompt must be a string, a UserMessage, or a list of TextPart/BinaryPart, "
            f"got {type(prompt).__name__}"
        )
    return messages


async def _streamed(
    start: Callable[[Callable[[Event], None]], Coroutine[Any, Any, Any]],
) -> AsyncIterator[Event]:
    """The events of the run `start(emit)` begins, as they happen; its error is raised
    after the last one. Leaving early cancels the run."""
    queue: asyncio.Queue[Event | None] = asyncio.Queue()
    task = asyncio.create_task(start(queue.put_nowait))
    task.add_done_callback(lambda _: queue.put_nowait(None))
    try:
        while (event := await queue.get()) is not None:
            yield event
        task.result()
    finally:
        if not task.done():
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task


def _run_sync(make: Callable[[], Coroutine[Any, Any, T]]) -> T:
    """Run a coroutine to completion from sync code, with or without a running loop."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(make())
    # A loop already runs in this thread (Jupyter, an async framework): blocking it on
    # itself would deadlock, so the run gets a fresh loop in a worker thread.
    with concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="tether-run") as pool:
        return pool.submit(lambda: asyncio.run(make())).result()
