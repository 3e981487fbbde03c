"""Runs the server started, kept apart from the requests that watch them.

A run goes on when the client that started it goes away: its AG-UI events are kept,
and any number of clients follow it from its first event (`LiveRun.follow`). A thread
has at most one live run here; the checkpointer's lease keeps other processes out.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Callable, Collection, Sequence
from typing import Any

from ag_ui.core import BaseEvent, EventType, MessagesSnapshotEvent

from tether.agent import Agent
from tether.errors import ConfigurationError, ThreadBusyError
from tether.events import Event
from tether.serve._agui import Translator, answered_ids, call_ids
from tether.serve._sse import encode

__all__ = ["LiveRun", "LiveRuns"]

_KEEPALIVE_SECONDS = 15.0
_GATHER_SECONDS = 0.01
"""How long a follower woken by a new event lets more gather before it writes: a run
of quick steps makes a few events a step, and a write for each (a send, and a wake of
the reader) cost more than the step itself. Under a screen's frame (16 ms); the run's
end is written at once."""
_BEGIN_WAIT_SECONDS = 10.0  # how long a stop waits for a starting run to take its thread
_CALL_PARTS = frozenset(
    {EventType.TOOL_CALL_START, EventType.TOOL_CALL_ARGS, EventType.TOOL_CALL_END}
)


class LiveRun:
    """One run's task and the AG-UI events it produced so far."""

    def __init__(
        self, agent: Agent[Any], thread_id: str, translator: Translator, before: list[Any]
    ) -> None:
        self.agent = agent
        self.before = before
        """The thread's messages when the run began (AG-UI messages)."""
        self.thread_id = thread_id
        self.translator = translator
        self.chunks: list[str] = []
        self.keys: list[tuple[str, str | None]] = []
        """By chunk: its event's type and the call it is of (None for others)."""
        self._opened = 0
        """How many chunks go up to the main run's RUN_STARTED (0 before it came)."""
        self._ended = asyncio.Event()
        self._wake = asyncio.Event()
        self._begun: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self.task: asyncio.Task[None] | None = None

    @property
    def done(self) -> bool:
        """Whether the run has ended (its end is on its way to every follower)."""
        return self._ended.is_set()

    def push(self, events: list[BaseEvent]) -> None:
        if not events:
            return
        for event in events:
            self.chunks.append(encode(event))
            # from the fields themselves: pydantic's lookup of a missing attribute raises
            self.keys.append((event.type, event.__dict__.get("tool_call_id")))
            if event.type == EventType.RUN_STARTED and not self._opened:
                self._opened = len(self.chunks)
        self._wake.set()

    def _waiting(self) -> asyncio.Event:
        """What a follower that has every chunk so far waits on: set by the next push.
        (A push only sets it; the follower makes a new one when it was used, so a reply's
        thousands of pieces do not each make an event no one may wait on.)"""
        if self._wake.is_set():
            self._wake = asyncio.Event()
        return self._wake

    async def begun(self) -> None:
        """Wait until the run holds its thread; raise what stopped it before that (the
        thread is busy, its decisions were given already, ...)."""
        await asyncio.shield(self._begun)

    async def follow(
        self,
        *,
        history: bool = False,
        known_calls: Collection[str] = (),
        known_results: Collection[str] = (),
        opening: Sequence[BaseEvent] = (),
    ) -> AsyncIterator[str]:
        """Every event of the run from its first, then each new one until it ends; a
        comment line now and then keeps idle connections open. With `history`, a
        messages snapshot of the thread as the run found it comes first, right after
        the RUN_STARTED it belongs to (a client takes nothing before that).

        What one client holds shapes its own stream only, never another's: the calls in
        `known_calls` (and, with `history`, those of the snapshot) are not announced
        again, since a client adds each announcement's arguments to what it holds; the
        results in `known_results` are not sent; `opening` follows RUN_STARTED."""
        index = 0
        skip_calls, skip_results = set(known_calls), set(known_results)
        extra = "".join(encode(event) for event in opening)
        if history:
            index = self._opened
            if index:
                yield "".join(self.chunks[:index])
            yield encode(MessagesSnapshotEvent(messages=self.before))
            skip_calls |= call_ids(self.before)
            skip_results |= answered_ids(self.before)
        while True:
            wake = self._waiting()
            if index < len(self.chunks):  # all that came meanwhile, in one write
                ready = self._since(index, skip_calls, skip_results, extra)
                index = len(self.chunks)
                if ready:
                    yield ready
                continue
            if self.done:
                return
            try:  # a timeout scope, not wait_for: no task made for each wake
                async with asyncio.timeout(_KEEPALIVE_SECONDS):
                    await wake.wait()
            except TimeoutError:
                yield ": keep-alive\n\n"
                continue
            with contextlib.suppress(TimeoutError):  # what follows soon goes in one write
                async with asyncio.timeout(_GATHER_SECONDS):
                    await self._ended.wait()

    def _since(
        self, index: int, known_calls: set[str], known_results: set[str], opening: str
    ) -> str:
        """The chunks from `index` on that go to a client holding these calls and
        results, with `opening` right after the main run's RUN_STARTED."""
        ready: list[str] = []
        for at in range(index, len(self.chunks)):
            if self._shown(at, known_calls, known_results):
                ready.append(self.chunks[at])
            if at + 1 == self._opened:
                ready.append(opening)
        return "".join(ready)

    def _shown(self, at: int, known_calls: set[str], known_results: set[str]) -> bool:
        """Whether chunk `at` goes to a client holding these calls and results."""
        kind, call_id = self.keys[at]
        if call_id is None:
            return True
        if kind in _CALL_PARTS:
            return call_id not in known_calls
        return kind != EventType.TOOL_CALL_RESULT or call_id not in known_results

    async def drive(self, events: AsyncIterator[Event]) -> None:
        """Consume the run's tether events, keeping their AG-UI form."""
        try:
            async for event in events:
                piece = self.translator.piece(event)
                if piece is None:
                    self.push(self.translator.translate(event))
                else:  # already encoded: kept as `push` keeps an event
                    kind, call_id, chunk = piece
                    self.chunks.append(chunk)
                    self.keys.append((kind, call_id))
                    self._wake.set()
                if not self._begun.done():
                    self._begun.set_result(None)
        except asyncio.CancelledError:
            if not self._begun.done():
                raise
            await self._abandon()
        except Exception as exc:
            if not self._begun.done():
                self._begun.set_exception(exc)
                return
            self.push(self.translator.failed(exc))
        finally:
            if not self._begun.done():
                self._begun.set_exception(ConfigurationError("the run ended before it began"))
            self._ended.set()
            self._wake.set()

    async def _abandon(self) -> None:
        """A stopped run is recorded as cancelled, so the thread's next message starts
        a new run; the calls it left without a result are answered as abandoned."""
        with contextlib.suppress(Exception):
            await self.agent.aabandon(self.thread_id, wait=5.0)
        self.push(self.translator.stopped())

    async def ended(self, within: float) -> None:
        """Wait until the run ends, `within` seconds at most."""
        if self.task is not None and not self.done:
            await asyncio.wait({self.task}, timeout=within)

    async def stop(self) -> None:
        """Cancel the run, and wait for it to end. A run that does not hold its thread
        yet is given a moment to take it first, so that it is recorded as cancelled
        (stopped before, it would leave nothing behind and its client an error)."""
        if self.task is None or self.done:
            return
        with contextlib.suppress(Exception, TimeoutError):
            await asyncio.wait_for(self.begun(), _BEGIN_WAIT_SECONDS)
        self.task.cancel()
        with contextlib.suppress(BaseException):
            await self.task


class LiveRuns:
    """The live runs of this server, by agent name and thread."""

    def __init__(self) -> None:
        self._runs: dict[tuple[str, str], LiveRun] = {}

    def get(self, agent_name: str, thread_id: str) -> LiveRun | None:
        """The thread's run, unless it ended (a moment before it is forgotten)."""
        live = self._runs.get((agent_name, thread_id))
        return None if live is None or live.done else live

    def running(self, agent_name: str) -> set[str]:
        return {
            thread
            for (name, thread), live in self._runs.items()
            if name == agent_name and not live.done
        }

    async def start(
        self,
        agent_name: str,
        agent: Agent[Any],
        thread_id: str,
        translator: Translator,
        *,
        events: Callable[[], AsyncIterator[Event]],
        before: list[Any],
    ) -> LiveRun:
        """Start `events()` as the thread's live run, once it holds the thread; its events
        are told in AG-UI's terms by `translator`.

        Raises `ThreadBusyError` when a run of this server or another process has the
        thread, and whatever else the run raised before it began.
        """
        key = (agent_name, thread_id)
        if self.get(agent_name, thread_id) is not None:
            raise ThreadBusyError(
                f"thread {thread_id!r} has a run going on; watch it, or stop it first",
                thread_id=thread_id,
                holder="this server",
                expires=0.0,
            )
        live = LiveRun(agent, thread_id, translator, before)
        self._runs[key] = live
        live.task = asyncio.create_task(live.drive(events()))
        live.task.add_done_callback(lambda _: self._forget(key, live))
        try:
            await live.begun()
        except BaseException:
            self._forget(key, live)
            raise
        return live

    def _forget(self, key: tuple[str, str], live: LiveRun) -> None:
        if self._runs.get(key) is live:  # not a later run of the thread
            del self._runs[key]

    async def close(self) -> None:
        """Stop every live run (the server is going down); each is recorded as cancelled."""
        await asyncio.gather(*(live.stop() for live in list(self._runs.values())))
