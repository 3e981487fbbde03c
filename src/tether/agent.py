"""The `Agent` that `create_agent()` returns: run, arun and stream. (`create_agent`,
which builds it, is in `tether._create`; it can still be imported from here.)"""

from __future__ import annotations

import asyncio
import contextlib
import json
import re
import uuid
from collections.abc import AsyncIterator, Callable, Coroutine, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Generic, Self, TypeAlias, TypeVar

from tether import _checks
from tether._sync import run_sync as _run_sync
from tether.approval import (
    DECISION_KINDS,
    DECISION_TYPES,
    ApprovalRequest,
    Decision,
    match_decisions,
)
from tether.capabilities.base import Capability
from tether.checkpoint.base import Checkpointer, ThreadInfo
from tether.errors import ConfigurationError
from tether.events import ApprovalRequested, Compacted, Event, RunFinished, RunStarted
from tether.limits import Limits
from tether.loop import compact_thread, execute_run
from tether.messages import (
    AssistantMessage,
    BinaryPart,
    Message,
    TextPart,
    ToolResultMessage,
    UserMessage,
)
from tether.models.base import Model, ModelSettings, ToolSpec
from tether.output import FINAL_RESULT
from tether.plan import Plan
from tether.result import RunResult, StopReason
from tether.tools.tool import Tool

if TYPE_CHECKING:
    from tether._create import create_agent
    from tether.checkpoint.journal import Journal, Thread

__all__ = ["Agent", "Prompt", "RunResult", "StopReason", "create_agent"]

OutputT = TypeVar("OutputT")
T = TypeVar("T")

Prompt: TypeAlias = str | UserMessage | Sequence[TextPart | BinaryPart]


def __getattr__(name: str) -> Any:
    # create_agent is in tether._create, whose builder imports this module for `Agent`.
    if name == "create_agent":
        from tether._create import create_agent

        return create_agent
    raise AttributeError(f"module 'tether.agent' has no attribute {name!r}")


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
    _plan: Plan = field(repr=False)

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
            try:
                yield journal, thread
            except BaseException:  # a cancelled run's last results still go on record...
                settling = asyncio.ensure_future(journal.settled())
                await asyncio.wait([settling], timeout=_SETTLE_SECONDS)  # ...in a while
                if not settling.cancel():
                    settling.exception()  # seen: the run's own error goes on
                raise


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


_SETTLE_SECONDS = 5.0
"""How long a run that failed or was cancelled waits for its last records to be
written before it gives the thread back: a store that stopped answering does not
hold up its end for long."""
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
