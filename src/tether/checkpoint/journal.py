"""What a run writes to its thread's log, and how a thread is rebuilt from it.

Records, in the order a run writes them:

- "run": a run began; `start` is where its messages begin in the thread, and `meta` the
  metadata it was given (if any).
- "sync": the messages added since the last sync ("append") or all of them after a
  rewrite such as a compaction ("messages"), the state backend files that changed,
  the todo list if it changed, what the agent last saw of each file it read or wrote
  ("seen", when it changed), what its sandbox keeps for the thread ("sandbox", when it
  changed), and the run's usage, cost and steps so far.
- "started": the ids of the tool calls about to run, written with a sync in one append,
  so the assistant message that made the calls is on record before any of them runs.
  (A run killed before that point resumes by asking the model again.)
- "result": one finished tool call's result, with a sync of what changed meanwhile (the
  state backend's files the call wrote), written as soon as the call finishes, before
  the next model call. Results that finish while a write is under way go out together
  in the next one.
- "interrupt": calls waiting for a human decision; "end": the run's stop reason.
  An abandoned run gets a last sync answering the calls it left, and the end "cancelled".

A run killed anywhere is rebuilt from the last records: calls with a result are never
run again; a call that started but has no result was interrupted in an unknown state.
"""

from __future__ import annotations

import asyncio
import base64
import functools
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import pydantic

from tether.approval import ApprovalRequest, decision_from_json
from tether.checkpoint.base import Checkpointer, Record
from tether.errors import AlreadyDecidedError, StorageError, TetherError, ThreadBusyError
from tether.messages import (
    AssistantMessage,
    Message,
    ToolResult,
    ToolResultMessage,
    Usage,
    from_json,
    to_json,
)
from tether.state import FILES_SEEN, SANDBOX, RunState, Todo

__all__ = ["Journal", "Thread", "read_thread", "replay"]

_ABANDONED = "Not run: the run was stopped and abandoned before this call ran."
_ABANDONED_STARTED = (
    "Abandoned: the run was stopped while this call was running, so whether it took "
    "effect is unknown. Check before calling it again."
)


@functools.cache
def _results() -> pydantic.TypeAdapter[ToolResult]:
    return pydantic.TypeAdapter(ToolResult)


@functools.cache
def _usage() -> pydantic.TypeAdapter[Usage]:
    return pydantic.TypeAdapter(Usage)


class Journal:
    """Writes one run's records to its thread, as the holder of the thread's lease
    (`holder`, a token): once another run has taken the thread over, nothing more is
    written, and `lost` says so."""

    def __init__(
        self,
        checkpointer: Checkpointer,
        thread_id: str,
        holder: str | None,
        at: tuple[str, ...] = (),
        root: Journal | None = None,
    ) -> None:
        self.checkpointer = checkpointer
        self.thread_id = thread_id
        self.holder = holder
        self.at = at
        """The `task` call ids leading to the subagent whose run this records; () for the
        thread's own run."""
        self._recorded = 0
        self._last: Message | None = None
        self._files: dict[str, tuple[bytes, float]] = {}
        self._todos: tuple[Todo, ...] = ()
        self._seen: dict[str, str] = {}
        self._sandbox: Any = None
        self.root: Journal = root or self
        """The journal of the thread's own run; a subagent's journal writes the files
        they share in its records."""
        self._writes: _Writes = (  # one for the run tree, as its records are one log
            root._writes if root is not None else _Writes(checkpointer, thread_id, holder)
        )
        self.metadata: dict[str, Any] | None = None
        """Recorded with the run's start, when given."""

    def under(self, call_id: str) -> Journal:
        """A journal for the run of the subagent that the `task` call `call_id` of this
        journal's run started, in the same thread."""
        at = (*self.at, call_id)
        return Journal(self.checkpointer, self.thread_id, self.holder, at, self.root)

    def adopt(self, thread: Thread) -> None:
        """Start from what `thread` already holds, so only changes are written."""
        self._recorded = len(thread.messages)
        self._last = thread.messages[-1] if thread.messages else None
        self._files = dict(thread.files)
        self._todos = thread.todos
        self._seen = dict(thread.seen)
        self._sandbox = thread.sandbox

    async def begin(self, state: RunState, start: int) -> None:
        record: Record = {"t": "run", "run": state.run_id, "start": start}
        if self.at:
            record["path"] = list(state.path)
        if self.metadata is not None:
            record["meta"] = self.metadata
        await self._append(lambda: [record, self._sync(state)], state)

    async def started(self, state: RunState, call_ids: Sequence[str]) -> None:
        """Record the calls about to run, with everything since the last record (the
        assistant message that made them, first of all) in the same write."""
        await self._append(
            lambda: [self._sync(state), {"t": "started", "ids": list(call_ids)}], state
        )

    async def result(self, state: RunState, result: ToolResult) -> None:
        """Record a finished call's result, with the files it changed in the same write:
        a run killed after it resumes with the result and its effect, or with neither."""
        body = _results().dump_python(result, mode="json")
        await self._append(lambda: [self._sync(state), {"t": "result", "result": body}], state)

    async def interrupt(self, state: RunState, requests: list[dict[str, Any]]) -> None:
        await self._append(
            lambda: [self._sync(state), {"t": "interrupt", "requests": requests}], state
        )

    async def decided(self, decisions: dict[str, dict[str, Any]]) -> None:
        await self._append(lambda: [{"t": "decided", "decisions": decisions}])

    async def end(self, state: RunState, stop_reason: str, output_json: Any) -> None:
        """Record how the run ended, unless it lost the thread: the new holder writes now."""
        if not self.lost:
            await self._append(
                lambda: [
                    self._sync(state),
                    {"t": "end", "stop": stop_reason, "output": output_json},
                ],
                state,
            )

    async def abandon(self, thread: Thread) -> None:
        """End `thread`'s unfinished run as "cancelled", answering the calls it left."""
        record = _spending(thread.usage, thread.cost_usd, thread.steps)
        pending = thread.pending_calls
        if pending is not None:
            answers = tuple(
                thread.results.get(call.id)
                or ToolResult.of(
                    call,
                    _ABANDONED_STARTED if call.id in thread.started else _ABANDONED,
                    is_error=True,
                )
                for call in pending.tool_calls
            )
            record["append"] = to_json([ToolResultMessage(answers)])
        await self._append(lambda: [record, {"t": "end", "stop": "cancelled", "output": None}])

    async def _append(
        self, make: Callable[[], list[Record]], state: RunState | None = None
    ) -> None:
        """Append the records `make()` gives, in the order they are made (for the whole
        run tree): a sync's changes are counted from the one before it, so they must land
        in order. A subagent's records come with a sync of its thread's own run, which
        holds the files they share, so that a result is never on record without the file
        it wrote. Returns once they are written, by the tree's writer task: at once, or
        (while another append is under way) in the next, with whatever came meanwhile."""
        writes = self._writes
        writes.check()
        records = make()
        if self.at:
            records = [{**r, "at": list(self.at)} for r in records]
            if state is not None:
                records.insert(0, self.root._sync(state.root))
        writes.add(records)
        await writes.settled()

    @property
    def lost(self) -> bool:
        """Another run took the thread over: nothing more is written (for the whole tree)."""
        return self._writes.lost

    async def settled(self) -> None:
        """Return once every record made so far is written; raise if a write failed."""
        await self._writes.settled()

    def _sync(self, state: RunState) -> Record:
        messages = state.messages
        record = _spending(state.usage, state.cost_usd, state.steps)
        known = self._recorded
        if known <= len(messages) and (known == 0 or messages[known - 1] is self._last):
            if known < len(messages):
                record["append"] = to_json(messages[known:])
        else:  # rewritten (a compaction): record the whole list
            record["messages"] = to_json(messages)
        self._recorded, self._last = len(messages), (messages[-1] if messages else None)
        if not self.at:  # a subagent's files are its thread's: the root's sync has them
            self._sync_files(state, record)
        if state.todos != self._todos:
            record["todos"] = [[t.content, t.status] for t in state.todos]
            self._todos = state.todos
        seen: dict[str, str] = state.data.get(FILES_SEEN, {})
        news = {p: d for p, d in seen.items() if self._seen.get(p) != d}
        if news:
            record["seen"] = news
            self._seen.update(news)
        sandbox = state.data.get(SANDBOX)
        if not self.at and sandbox != self._sandbox:
            record["sandbox"] = self._sandbox = sandbox
        return record

    def _sync_files(self, state: RunState, record: Record) -> None:
        changed = {p: v for p, v in state.files.items() if self._files.get(p) is not v}
        gone = [p for p in self._files if p not in state.files]
        if changed:
            record["put"] = {
                p: [base64.b64encode(data).decode(), mtime] for p, (data, mtime) in changed.items()
            }
        if gone:
            record["delete"] = gone
        self._files = dict(state.files)


class _Writes:
    """The writes of one run tree to its thread: the records made and not yet written,
    in the order made, and the futures of the runs waiting for them; the task writing
    them (one append at a time, each with every record queued when it begins), and the
    futures of the runs waiting for the append under way. A run waits on a future of
    its own: its cancellation stops its wait, never the write."""

    def __init__(self, checkpointer: Checkpointer, thread_id: str, holder: str | None) -> None:
        self.checkpointer = checkpointer
        self.thread_id = thread_id
        self.holder = holder
        self.queued: list[Record] = []
        self._queued_waiters: list[asyncio.Future[None]] = []
        self._writer: asyncio.Task[None] | None = None
        self._writing_waiters: list[asyncio.Future[None]] = []
        self._failure: BaseException | None = None
        self.lost = False

    def check(self) -> None:
        """Raise the failure of an earlier write, if one failed."""
        if self._failure is not None:
            raise self._failure

    def add(self, records: list[Record]) -> None:
        """Queue `records`, and start the writer if none is at work."""
        self.queued += records
        if self._writer is None:
            self._writer = asyncio.ensure_future(self._write_queued())

    async def settled(self) -> None:
        if self.queued:
            waiters: list[asyncio.Future[None]] | None = self._queued_waiters
        elif self._writer is not None:
            waiters = self._writing_waiters
        else:
            waiters = None
        if waiters is not None:
            written = asyncio.get_running_loop().create_future()
            waiters.append(written)
            await written
        self.check()

    async def _write_queued(self) -> None:
        """The writer, a task of its own: append what is queued, again and again until
        nothing is. After a failed write nothing more is written (a later sync would
        leave a gap in the log); every later append and `settled()` raise the failure.
        The task is cancelled only with its event loop."""
        try:
            while self.queued and self._failure is None:
                records, self.queued = self.queued, []
                self._writing_waiters, self._queued_waiters = self._queued_waiters, []
                try:
                    await self.checkpointer.append(self.thread_id, records, holder=self.holder)
                except TetherError as error:  # kept for every run that waits on it
                    self.lost = self.lost or isinstance(error, ThreadBusyError)
                    self._failure = error
                except Exception as error:  # a checkpointer of the user's: said as tether's
                    self._failure = StorageError(
                        f"the checkpointer failed to write to thread {self.thread_id!r}: "
                        f"{type(error).__name__}: {error}",
                        database=repr(self.checkpointer),
                    )
                    self._failure.__cause__ = error
                except BaseException:
                    self._failure = StorageError(
                        f"the write to thread {self.thread_id!r} was cancelled with its "
                        "event loop; whether it was made is unknown",
                        database=repr(self.checkpointer),
                    )
                    raise
                finally:
                    _wake(self._writing_waiters)
                    self._writing_waiters = []
        finally:
            self._writer = None
            self.queued = []  # empty, or never to be written after a failure
            _wake(self._queued_waiters)
            self._queued_waiters = []


def _wake(waiters: list[asyncio.Future[None]]) -> None:
    for waiter in waiters:
        if not waiter.done():  # its run was cancelled while it waited
            waiter.set_result(None)


def _spending(usage: Usage, cost: float | None, steps: int) -> Record:
    """A sync record of a run's spending so far, to add its changes to."""
    return {
        "t": "sync",
        "usage": _usage().dump_python(usage, mode="json"),
        "cost": cost,
        "steps": steps,
    }


@dataclass
class Thread:
    """A thread rebuilt from its log: the conversation, files and todos, and the state
    of its last run."""

    thread_id: str
    messages: list[Message] = field(default_factory=list)
    files: dict[str, tuple[bytes, float]] = field(default_factory=dict)
    todos: tuple[Todo, ...] = ()
    run_id: str | None = None
    run_start: int = 0
    stop_reason: str | None = None
    """How the last run ended; None while it has not (running, or killed)."""
    output: Any = None
    usage: Usage = field(default_factory=Usage)
    cost_usd: float | None = 0.0
    steps: int = 0
    results: dict[str, ToolResult] = field(default_factory=dict)
    """Results recorded for the calls of the last assistant message."""
    started: set[str] = field(default_factory=set)
    interrupts: list[dict[str, Any]] = field(default_factory=list)
    """Calls waiting for a decision, as recorded."""
    decisions: dict[str, dict[str, Any]] = field(default_factory=dict)
    """Decisions given for the waiting calls of the last run, by call id."""
    decided: dict[str, dict[str, Any]] = field(default_factory=dict)
    """Every decision the thread holds, by call id, with the last calls that asked."""
    asked: list[dict[str, Any]] = field(default_factory=list)
    """The calls of the last interrupt, also once decided."""
    metadata: dict[str, Any] = field(default_factory=dict)
    """The metadata of the latest run given some (`Agent.run(metadata=...)`)."""
    total_usage: Usage = field(default_factory=Usage)
    """What every run of the thread used, subagents included; `usage` is the last run's."""
    total_cost_usd: float | None = 0.0
    """What every run of the thread cost; None when a price was unknown."""
    subagents: dict[str, Thread] = field(default_factory=dict)
    """The runs of the subagents the last run started, by the id of their `task` call."""
    seen: dict[str, str] = field(default_factory=dict)
    """A digest of each file as the agent last read or wrote it (see `FILES_SEEN`)."""
    sandbox: Any = None
    """What the sandbox kept for the thread when last recorded (see `SANDBOX`)."""
    path: tuple[str, ...] = ()
    """A subagent's run: its agent path, as recorded."""

    @property
    def requests(self) -> tuple[ApprovalRequest, ...]:
        """The calls waiting for a decision."""
        return _requests(self.interrupts)

    @property
    def asked_requests(self) -> tuple[ApprovalRequest, ...]:
        """The calls of the last interrupt, also once decided."""
        return _requests(self.asked)

    def refuse_decided_again(self, decisions: Sequence[Any] | Mapping[str, Any]) -> None:
        """Raise `AlreadyDecidedError` when `decisions` answer calls already decided: by
        call id, or as a list for the last calls that asked, in their order."""
        if isinstance(decisions, Mapping):
            ids = [str(k) for k in decisions]
        else:
            ids = [r["call_id"] for r in self.asked]
            if isinstance(decisions, str | bytes) or len(decisions) != len(ids):
                return
        if not ids or any(i not in self.decided for i in ids):
            return
        tools = {r["call_id"]: r["tool"] for r in self.asked}
        earlier = {i: decision_from_json(self.decided[i]) for i in ids}
        listing = ", ".join(f"{tools.get(i, 'a call')} ({i}): {d.kind}" for i, d in earlier.items())
        raise AlreadyDecidedError(
            f"the calls of thread {self.thread_id!r} were already decided ({listing}); "
            "nothing ran again",
            decisions=earlier,
        )

    @property
    def exists(self) -> bool:
        return self.run_id is not None

    @property
    def unfinished(self) -> bool:
        """Whether the last run stopped without an end: it was killed or interrupted."""
        return self.exists and self.stop_reason in (None, "interrupted")

    @property
    def resumable(self) -> bool:
        """Whether `resume` can go on with the last run: it is unfinished, or it ended in
        an error (a provider that was down, say) and is tried again from its last step."""
        return self.unfinished or self.stop_reason == "error"

    @property
    def pending_calls(self) -> AssistantMessage | None:
        """The last assistant message, when its tool calls are not all answered."""
        if self.messages and isinstance(self.messages[-1], AssistantMessage):
            last = self.messages[-1]
            return last if last.tool_calls else None
        return None


def _requests(records: Sequence[dict[str, Any]]) -> tuple[ApprovalRequest, ...]:
    return tuple(ApprovalRequest.from_json(r) for r in records)


async def read_thread(checkpointer: Checkpointer, thread_id: str) -> Thread:
    """The thread as the checkpointer holds it (an empty one if it has no records)."""
    records = await checkpointer.load(thread_id)
    try:
        return replay(thread_id, records)
    except (KeyError, TypeError, ValueError) as exc:  # pydantic's errors are ValueErrors
        raise StorageError(
            f"thread {thread_id!r} in {checkpointer!r} cannot be read back "
            f"({type(exc).__name__}: {str(exc).splitlines()[0]}); tether changed nothing. "
            "Read its records with the checkpointer's load(), or delete the thread",
            database=repr(checkpointer),
        ) from exc


def replay(thread_id: str, records: Sequence[Record]) -> Thread:
    """The thread as its records leave it."""
    thread = Thread(thread_id)
    own, below = _split(records)
    for number, record in own:
        kind = record["t"]
        if kind == "run":
            _begin_run(thread, record)
        elif kind == "sync":
            _apply_sync(thread, record)
        elif kind == "started":
            thread.started.update(record["ids"])
        elif kind == "result":
            result = _results().validate_python(record["result"])
            thread.results[result.call_id] = result
        elif kind == "interrupt":
            thread.interrupts = thread.asked = record["requests"]
            thread.stop_reason = "interrupted"
        elif kind == "decided":  # some of the calls, or all: the others still wait
            thread.decisions.update(record["decisions"])
            thread.decided.update(record["decisions"])
            decided = record["decisions"]
            thread.interrupts = [r for r in thread.interrupts if r["call_id"] not in decided]
            thread.stop_reason = "interrupted" if thread.interrupts else None
        elif kind == "end":
            thread.stop_reason, thread.output = record["stop"], record["output"]
            if thread.stop_reason != "interrupted":  # abandoned: nothing waits any more
                thread.interrupts = []
        else:
            raise ValueError(
                f"record {number} is of a kind this tether does not know ({kind!r}): "
                "a newer tether wrote it; upgrade tether"
            )
    _add_up(thread)
    thread.subagents = {call_id: replay(thread_id, kept) for call_id, kept in below.items()}
    return thread


def _split(
    records: Sequence[Record],
) -> tuple[list[tuple[int, Record]], dict[str, list[Record]]]:
    """The thread's own records (numbered from 1 among all), and those of the subagents
    its last run started, by the id of their `task` call (one level of `at` taken off)."""
    own: list[tuple[int, Record]] = []
    below: dict[str, list[Record]] = {}
    run = None
    for number, record in enumerate(records, 1):
        at = record.get("at")
        if at:
            below.setdefault(at[0], []).append({**record, "at": at[1:]})
            continue
        if record["t"] == "run" and record["run"] != run:  # a new run: new subagents
            run, below = record["run"], {}
        own.append((number, record))
    return own, below


def _begin_run(thread: Thread, record: Record) -> None:
    """A run's first record (or a resumed run's, with the same id)."""
    if record["run"] != thread.run_id:  # not a resumed run starting over
        _add_up(thread)
        thread.usage, thread.cost_usd, thread.steps = Usage(), 0.0, 0
    thread.path = tuple(record.get("path", ()))
    thread.metadata = record.get("meta", thread.metadata)
    thread.run_id, thread.run_start = record["run"], record["start"]
    thread.stop_reason, thread.output, thread.interrupts = None, None, []
    thread.results, thread.started, thread.decisions = {}, set(), {}


def _add_up(thread: Thread) -> None:
    """Count the spending of the run replayed so far into the thread's totals."""
    thread.total_usage = thread.total_usage + thread.usage
    if thread.total_cost_usd is not None:
        cost = thread.cost_usd
        thread.total_cost_usd = None if cost is None else thread.total_cost_usd + cost


def _apply_sync(thread: Thread, record: Record) -> None:
    if "messages" in record:
        thread.messages = from_json(record["messages"])
    if "append" in record:
        thread.messages += from_json(record["append"])
    for path, (data, mtime) in record.get("put", {}).items():
        thread.files[path] = (base64.b64decode(data), mtime)
    for path in record.get("delete", ()):
        thread.files.pop(path, None)
    if "todos" in record:
        thread.todos = tuple(Todo(c, s) for c, s in record["todos"])
    thread.seen.update(record.get("seen", {}))
    if "sandbox" in record:
        thread.sandbox = record["sandbox"]
    thread.usage = _usage().validate_python(record["usage"])
    thread.cost_usd, thread.steps = record["cost"], record["steps"]
    # Results matter only for the calls still unanswered.
    pending = thread.pending_calls
    ids = {c.id for c in pending.tool_calls} if pending is not None else set()
    thread.results = {k: v for k, v in thread.results.items() if k in ids}
    thread.started &= ids
