"""Agent runs as DBOS workflows, spread over worker processes that share one Postgres
(extra `tether[dbos]`).

A run is a workflow on its agent's queue. The workflow works in steps: each one runs
the agent on the thread until it answers, stops on a limit, or stops for a decision,
while the thread's journal (in the same database) records every model reply and every
tool result as it arrives. When a worker dies, its pending workflows run again when it
comes back with the same executor id: finished steps return their recorded result, and
the step that was cut short resumes the thread from the journal, so a tool call that
finished is never run again and one that was running is reported as interrupted (or
run again, for an idempotent tool). A run that needs a decision waits inside the
workflow (`DBOS.recv`), across restarts, until `decide` sends one.

    durable = DurableAgent(agent, name="reviewer")            # in the module workers import
    handle = durable.enqueue("Review PR 42", thread_id="pr-42")  # from any process
    result = handle.result()                                     # from any process, later
"""

from __future__ import annotations

import asyncio
import hashlib
import os
import signal
import socket
import threading
import time
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any, Generic, Literal, TypeAlias

import pydantic
from pydantic_core import to_jsonable_python

from tether._sync import run_sync as _run_sync
from tether.agent import Agent, OutputT, RunResult, checked_run_thread_id
from tether.approval import ApprovalRequest, Decision, match_decisions
from tether.checkpoint.lease import LEASE_SECONDS
from tether.checkpoint.postgres import PostgresCheckpointer
from tether.errors import ConfigurationError, RunError, TetherError
from tether.messages import Usage

if TYPE_CHECKING:
    from dbos import DBOSClient

    from tether.checkpoint.journal import Thread

__all__ = [
    "DurableAgent",
    "RunHandle",
    "RunStatus",
    "decide",
    "enqueue",
    "serve",
    "status_of_thread",
]

DATABASE_VARIABLES = ("TETHER_DATABASE_URL", "DBOS_SYSTEM_DATABASE_URL")
"""Where the database URL is looked for when none is given, in order."""

State: TypeAlias = Literal["queued", "running", "waiting", "finished", "failed", "cancelled"]

_DECISIONS = "tether.decisions"  # topic of the messages that carry decisions
_THREAD = "tether.thread"  # workflow attribute: the thread the run belongs to
_RECV_SECONDS = 3600.0  # a wait is a loop of recvs, so it has no end
_DECIDE_WAIT = 10.0  # how long a decision waits for the thread's lease
_STEP_WAIT = 2 * LEASE_SECONDS  # a worker that died on another machine lets go by then
_STEP = {"name": "tether.advance", "retries_allowed": True, "max_attempts": 3}
_STATES: dict[str, State] = {
    "ENQUEUED": "queued",
    "DELAYED": "queued",
    "PENDING": "running",
    "SUCCESS": "finished",
    "ERROR": "failed",
    "MAX_RECOVERY_ATTEMPTS_EXCEEDED": "failed",
    "CANCELLED": "cancelled",
}
_REGISTRY: dict[str, DurableAgent[Any]] = {}


def _dbos() -> Any:
    try:
        import dbos
    except ImportError as exc:
        raise ConfigurationError("durable runs need DBOS: pip install 'tether[dbos]'") from exc
    return dbos


def database_url(database: str | None) -> str:
    """`database`, else the first of DATABASE_VARIABLES that is set; a Postgres URL."""
    url = database or next((os.environ[k] for k in DATABASE_VARIABLES if os.environ.get(k)), "")
    if not url:
        raise ConfigurationError(
            "durable runs need a Postgres database: pass database='postgresql://...' "
            "or set TETHER_DATABASE_URL"
        )
    if not url.startswith(("postgresql://", "postgres://")):
        raise ConfigurationError(
            "durable runs need a Postgres URL (postgresql://...) that every worker reaches"
        )
    return url


@dataclass(frozen=True, slots=True)
class RunStatus:
    """Where a durable run is. `stop_reason`, `output` (its JSON form) and `error` are
    set once it finished; `interrupts` while it waits for a decision."""

    thread_id: str
    workflow_id: str
    state: State
    stop_reason: str | None = None
    output: Any = None
    interrupts: tuple[ApprovalRequest, ...] = ()
    error: str | None = None
    executor_id: str | None = None


class _Client:
    """The queue side: enqueue, look up, wait for and decide runs, from any process and
    without starting DBOS (a `DBOSClient` on the system database)."""

    def __init__(self, database: str | None, schema: str) -> None:
        self.database = database_url(database)
        self.schema = schema
        self.checkpointer = PostgresCheckpointer(self.database)
        self._client: DBOSClient | None = None
        self._lock = threading.Lock()

    @property
    def client(self) -> DBOSClient:
        with self._lock:
            if self._client is None:
                dbos = _dbos()
                # Enqueueing may come before any worker ever started: make the tables.
                dbos.DBOS.migrate(self.database, schema=self.schema)
                self._client = dbos.DBOSClient(
                    system_database_url=self.database, dbos_system_schema=self.schema
                )
            return self._client

    def enqueue(self, name: str, task: str, thread_id: str | None, key: str | None) -> RunHandle:
        if not isinstance(task, str) or not task.strip():
            raise ConfigurationError("a durable run's task must be a non-empty string")
        if thread_id is not None:
            checked_run_thread_id(thread_id)
        thread_id = thread_id or f"thread_{uuid.uuid4().hex[:16]}"
        workflow_id = f"{thread_id}:{key or uuid.uuid4().hex[:12]}"
        run_id = _run_id(workflow_id)
        options = {
            "workflow_name": f"tether:{name}",
            "queue_name": name,
            "workflow_id": workflow_id,
            "deduplication_id": thread_id,  # one run of a thread at a time
            "attributes": {_THREAD: thread_id},
        }
        try:
            self.client.enqueue(options, thread_id, run_id, task)  # type: ignore[arg-type]
        except _dbos().error.DBOSQueueDeduplicatedError:
            raise ConfigurationError(
                f"thread {thread_id!r} has a run queued or running already; "
                "wait for it to finish before giving the thread another task"
            ) from None
        return RunHandle(self, workflow_id, thread_id)

    def latest(self, thread_id: str, name: str | None = None) -> RunHandle:
        rows = self.client.list_workflows(
            attributes={_THREAD: thread_id},
            name=f"tether:{name}" if name else None,
            sort_desc=True,
            limit=1,
            load_input=False,
            load_output=False,
        )
        if not rows:
            raise ConfigurationError(f"no durable run of thread {thread_id!r} was enqueued")
        return RunHandle(self, rows[0].workflow_id, thread_id)

    async def status(self, workflow_id: str, thread_id: str) -> RunStatus:
        row = await asyncio.to_thread(
            lambda: self.client.retrieve_workflow(workflow_id).get_status()
        )
        state = _STATES.get(row.status, "running")
        base = RunStatus(thread_id, workflow_id, state, executor_id=row.executor_id)
        if state == "running":  # the thread's journal tells whether it waits, and on what
            thread = await self.thread(thread_id)
            if thread.run_id == _run_id(workflow_id) and thread.interrupts:
                return replace(base, state="waiting", interrupts=thread.requests)
            return base
        if state == "finished":
            summary: dict[str, Any] = row.output or {}
            return replace(
                base,
                stop_reason=summary.get("stop_reason"),
                output=summary.get("output"),
                error=summary.get("error"),
            )
        if state == "failed":
            return replace(base, error=str(row.error))
        return base

    async def thread(self, thread_id: str) -> Thread:
        from tether.checkpoint.journal import read_thread

        return await read_thread(self.checkpointer, thread_id)

    async def decide(
        self, status: RunStatus, decisions: Sequence[Decision] | Mapping[str, Decision]
    ) -> None:
        """Record the decisions in the thread; once every waiting call is decided, wake
        the workflow: from then on the run no longer waits, in every process's view. A
        mapping by call id may decide some of the calls, the others keep waiting; sent
        again for a call already decided, decisions raise `AlreadyDecidedError`."""
        from tether.checkpoint.journal import Journal, read_thread
        from tether.checkpoint.lease import hold

        thread_id = status.thread_id
        if status.state != "waiting":
            if status.state in ("running", "finished"):  # perhaps decided a moment ago
                (await self.thread(thread_id)).refuse_decided_again(decisions)
            raise ConfigurationError(
                f"the run of thread {thread_id!r} is {status.state}, not waiting for a decision"
            )
        async with hold(self.checkpointer, thread_id, "decide", wait=_DECIDE_WAIT) as me:
            thread = await read_thread(self.checkpointer, thread_id)  # as it is now
            if not thread.interrupts:
                thread.refuse_decided_again(decisions)
                raise ConfigurationError(f"the run of thread {thread_id!r} no longer waits")
            chosen = match_decisions(thread.interrupts, decisions, decided=thread.decided)
            await Journal(self.checkpointer, thread_id, me.token).decided(chosen)
            rest = len(thread.interrupts) - len(chosen)
        if rest == 0:
            await asyncio.to_thread(self.client.send, status.workflow_id, chosen, _DECISIONS)


class RunHandle:
    """One durable run: its status, its result, and the decisions it waits for."""

    def __init__(
        self,
        client: _Client,
        workflow_id: str,
        thread_id: str,
        durable: DurableAgent[Any] | None = None,
    ) -> None:
        self._client = client
        self.workflow_id = workflow_id
        self.thread_id = thread_id
        self._durable = durable

    def __repr__(self) -> str:
        return f"RunHandle(thread_id={self.thread_id!r}, workflow_id={self.workflow_id!r})"

    def status(self) -> RunStatus:
        """Where the run is now."""
        return _run_sync(self.astatus)

    async def astatus(self) -> RunStatus:
        """`status` for async code."""
        return await self._client.status(self.workflow_id, self.thread_id)

    def wait(self, timeout: float | None = None, poll_seconds: float = 0.2) -> RunStatus:
        """Wait until the run finishes or waits for a decision; TimeoutError after
        `timeout` seconds."""
        return _run_sync(lambda: self._wait(timeout, poll_seconds))

    async def await_status(self, poll_seconds: float = 0.2) -> RunStatus:
        """`wait` for async code (bound it with `asyncio.timeout`)."""
        return await self._wait(None, poll_seconds)

    def result(self, timeout: float | None = None) -> RunResult[Any]:
        """The run's result once it finishes, or stops to wait for a decision
        (`stop_reason == "interrupted"`, with its `interrupts`). A run whose workflow
        failed raises RunError."""

        async def waited() -> RunResult[Any]:
            return await self._result(await self._wait(timeout, 0.2))

        return _run_sync(waited)

    async def aresult(self) -> RunResult[Any]:
        """`result` for async code (bound it with `asyncio.timeout`)."""
        return await self._result(await self._wait(None, 0.2))

    async def _wait(self, seconds: float | None, poll_seconds: float) -> RunStatus:
        """Poll on one event loop (and so one connection) until the run settles."""
        deadline = None if seconds is None else time.monotonic() + seconds
        while True:
            status = await self.astatus()
            if status.state in ("waiting", "finished", "failed", "cancelled"):
                return status
            if deadline is not None and time.monotonic() >= deadline:
                raise TimeoutError(f"the run of thread {self.thread_id!r} is still {status.state}")
            await asyncio.sleep(poll_seconds)

    async def _result(self, status: RunStatus) -> RunResult[Any]:
        if status.state == "failed":
            raise RunError(f"the durable run {self.workflow_id!r} failed: {status.error}")
        if self._durable is None:
            raise ConfigurationError("this handle has no agent to read the result with")
        return await self._durable._result(status)

    def decide(self, decisions: Sequence[Decision] | Mapping[str, Decision]) -> None:
        """Answer the calls the run waits on (a list in their order, or by call id, some
        of them); once every one is decided, a worker continues the run."""
        _run_sync(lambda: self.adecide(decisions))

    async def adecide(self, decisions: Sequence[Decision] | Mapping[str, Decision]) -> None:
        """`decide` for async code."""
        await self._client.decide(await self.astatus(), decisions)


class DurableAgent(Generic[OutputT]):
    """`agent`, run as DBOS workflows on the queue `name` by `tether worker` processes.

    Construct it at import time of a module every worker imports (`tether worker --app
    module`): that registers its workflow. Its threads are recorded in `database` too,
    whatever checkpointer the agent has: every worker and client reads them there.
    `concurrency` caps the runs in progress across all workers, `worker_concurrency`
    those in one worker, and `limiter=(n, seconds)` starts at most n runs a period.
    """

    def __init__(
        self,
        agent: Agent[OutputT],
        *,
        name: str,
        database: str | None = None,
        concurrency: int | None = None,
        worker_concurrency: int | None = None,
        limiter: tuple[int, float] | None = None,
        poll_seconds: float = 0.5,
        schema: str = "dbos",
    ) -> None:
        if not isinstance(agent, Agent):
            raise ConfigurationError(f"DurableAgent needs an Agent, got {type(agent).__name__}")
        if not isinstance(name, str) or not name.strip() or name.startswith("_") or " " in name:
            raise ConfigurationError(
                f"a durable agent's name must be a word not starting with '_', got {name!r}"
            )
        if name in _REGISTRY:
            raise ConfigurationError(f"a durable agent named {name!r} exists in this process")
        for label, value in (
            ("concurrency", concurrency),
            ("worker_concurrency", worker_concurrency),
        ):
            if value is not None and (not isinstance(value, int) or value < 1):
                raise ConfigurationError(f"{label} must be a positive integer, got {value!r}")
        if limiter is not None and not (len(limiter) == 2 and limiter[0] >= 1 and limiter[1] > 0):
            raise ConfigurationError(f"limiter must be (runs, seconds), got {limiter!r}")
        self._client = _Client(database, schema)
        self.database = self._client.database
        self.agent: Agent[OutputT] = replace(agent, checkpointer=self._client.checkpointer)
        self.name = name
        self.concurrency = concurrency
        self.worker_concurrency = worker_concurrency
        self.limiter = limiter
        self.poll_seconds = poll_seconds
        _register(self)

    def __repr__(self) -> str:
        return f"DurableAgent(name={self.name!r})"

    def enqueue(
        self, task: str, *, thread_id: str | None = None, key: str | None = None
    ) -> RunHandle:
        """Queue a run of `task` on the thread (a new one by default); a worker takes it.

        `key` makes the enqueue idempotent: the same thread and key give the same run.
        A thread holds one queued or running run at a time.
        """
        handle = self._client.enqueue(self.name, task, thread_id, key)
        handle._durable = self
        return handle

    async def aenqueue(
        self, task: str, *, thread_id: str | None = None, key: str | None = None
    ) -> RunHandle:
        """`enqueue` for async code."""
        return await asyncio.to_thread(lambda: self.enqueue(task, thread_id=thread_id, key=key))

    def handle(self, thread_id: str) -> RunHandle:
        """The thread's latest durable run."""
        handle = self._client.latest(thread_id, self.name)
        handle._durable = self
        return handle

    def run(self, task: str, *, thread_id: str | None = None) -> RunResult[OutputT]:
        """Enqueue `task` and wait for its result (a worker must be running)."""
        return self.enqueue(task, thread_id=thread_id).result()

    # -- the worker side ----------------------------------------------------------

    async def _workflow(self, thread_id: str, run_id: str, task: str) -> dict[str, Any]:
        DBOS = _dbos().DBOS
        summary: dict[str, Any]
        summary = await DBOS.run_step_async(_STEP, self._advance, thread_id, run_id, task)
        while summary["stop_reason"] == "interrupted":
            # `decide` records the decisions in the thread, then sends this wake-up.
            if await DBOS.recv_async(_DECISIONS, timeout_seconds=_RECV_SECONDS) is not None:
                summary = await DBOS.run_step_async(_STEP, self._advance, thread_id, run_id, None)
        return summary

    async def _advance(self, thread_id: str, run_id: str, task: str | None) -> dict[str, Any]:
        """Take the run on from where its thread's journal left it; a summary of where
        it stopped. Running this again after a crash continues, it never repeats."""
        agent = self.agent
        try:
            thread = await self._client.thread(thread_id)
            if thread.run_id != run_id:
                if task is None:
                    raise ConfigurationError(f"thread {thread_id!r} has no run {run_id!r}")
                result = await agent._execute(
                    task, None, None, thread_id, run_id=run_id, wait=_STEP_WAIT
                )
            elif thread.unfinished and not thread.interrupts:  # killed, or decided
                result = await agent._resume(thread_id, None, None, wait=_STEP_WAIT)
            else:  # still waiting, or finished before the step's end was recorded
                return _thread_summary(thread)
        except TetherError as exc:
            partial = exc.result
            return _summary(
                "error",
                output=None,
                usage=partial.usage if partial else Usage(),
                cost_usd=partial.cost_usd if partial else 0.0,
                steps=partial.steps if partial else 0,
                error=str(exc),
            )
        return _summary(
            result.stop_reason,
            output=to_jsonable_python(result.output),
            usage=result.usage,
            cost_usd=result.cost_usd,
            steps=result.steps,
        )

    async def _result(self, status: RunStatus) -> RunResult[OutputT]:
        thread = await self._client.thread(status.thread_id)
        if status.state == "waiting":
            stop_reason, interrupts = "interrupted", status.interrupts
        elif status.state == "cancelled":
            stop_reason, interrupts = "cancelled", ()
        else:
            stop_reason, interrupts = status.stop_reason or "error", ()
        output = status.output
        if stop_reason == "completed" and output is not None and self.agent.output_type is not str:
            output = pydantic.TypeAdapter(self.agent.output_type).validate_python(output)
        return RunResult.of_thread(
            thread,
            stop_reason,  # type: ignore[arg-type]
            output=output if stop_reason == "completed" else None,
            interrupts=interrupts,
            thread_id=status.thread_id,
        )


def status_of_thread(
    thread_id: str, *, database: str | None = None, schema: str = "dbos"
) -> RunStatus:
    """Where the thread's latest durable run is, read from the database alone."""
    client = _Client(database, schema)
    return client.latest(thread_id).status()


def enqueue(
    name: str,
    task: str,
    *,
    thread_id: str | None = None,
    key: str | None = None,
    database: str | None = None,
    schema: str = "dbos",
) -> RunHandle:
    """Queue a run for the durable agent `name` without having it in this process."""
    return _Client(database, schema).enqueue(name, task, thread_id, key)


def decide(
    thread_id: str,
    decisions: Sequence[Decision] | Mapping[str, Decision],
    *,
    database: str | None = None,
    schema: str = "dbos",
) -> None:
    """Answer the calls the thread's latest durable run waits on."""
    _Client(database, schema).latest(thread_id).decide(decisions)


def serve(
    agents: Sequence[DurableAgent[Any]] | None = None,
    *,
    database: str | None = None,
    executor_id: str | None = None,
    app_version: str | None = None,
    schema: str = "dbos",
    stop: threading.Event | None = None,
) -> None:
    """Work on the queues of `agents` (default: every DurableAgent made in this process)
    until SIGTERM, SIGINT or `stop`.

    `executor_id` names this worker (default: the host name). Give each worker its own,
    and the same one when it restarts: a worker recovers the runs that were in progress
    under its id. Workers recover runs of their own `app_version` only.
    """
    from tether import __version__

    chosen = list(_REGISTRY.values()) if agents is None else list(agents)
    if not chosen:
        raise ConfigurationError(
            "no durable agents to serve: construct DurableAgent(...) in a module the "
            "worker imports (tether worker --app module)"
        )
    url = database_url(database)
    dbos = _dbos()
    DBOS = dbos.DBOS
    config = {
        "name": "tether",
        "system_database_url": url,
        "executor_id": executor_id or socket.gethostname(),
        "application_version": app_version or f"tether-{__version__}",
        "dbos_system_schema": schema,
        "log_level": os.environ.get("TETHER_DBOS_LOG_LEVEL", "WARNING"),
    }
    stop = stop or threading.Event()
    if threading.current_thread() is threading.main_thread():
        for number in (signal.SIGTERM, signal.SIGINT):
            signal.signal(number, lambda *_: stop.set())
    DBOS(config=config)
    DBOS.listen_queues(sorted({a.name for a in chosen}))
    DBOS.launch()
    try:
        for durable in chosen:
            limiter = durable.limiter
            DBOS.register_queue(
                durable.name,
                global_concurrency=durable.concurrency,
                worker_concurrency=durable.worker_concurrency,
                limiter={"limit": limiter[0], "period": limiter[1]} if limiter else None,
                polling_interval_sec=durable.poll_seconds,
                on_conflict="always_update",
            )
        stop.wait()
    finally:
        DBOS.destroy(workflow_completion_timeout_sec=0)


def _register(durable: DurableAgent[Any]) -> None:
    dbos = _dbos()
    name = durable.name

    async def workflow(thread_id: str, run_id: str, task: str) -> dict[str, Any]:
        return await _REGISTRY[name]._workflow(thread_id, run_id, task)

    dbos.DBOS.workflow(name=f"tether:{name}")(workflow)
    _REGISTRY[name] = durable


def _summary(
    stop_reason: str,
    *,
    output: Any,
    usage: Usage,
    cost_usd: float | None,
    steps: int,
    error: str | None = None,
) -> dict[str, Any]:
    return {
        "stop_reason": stop_reason,
        "output": output,
        "usage": pydantic.TypeAdapter(Usage).dump_python(usage, mode="json"),
        "cost_usd": cost_usd,
        "steps": steps,
        "error": error,
    }


def _thread_summary(thread: Thread) -> dict[str, Any]:
    stop_reason = "interrupted" if thread.interrupts else thread.stop_reason or "error"
    return _summary(
        stop_reason,
        output=thread.output,
        usage=thread.usage,
        cost_usd=thread.cost_usd,
        steps=thread.steps,
    )


def _run_id(workflow_id: str) -> str:
    """The id of the run a workflow makes: the same in every process that computes it."""
    return "run_" + hashlib.sha256(workflow_id.encode()).hexdigest()[:16]
