"""Decisions taken over HTTP: AG-UI `resume` entries checked against the thread, and
taken one request at a time per thread.

The page sends one decision per click. A request may decide some of the waiting calls:
the others keep waiting, and the run goes on once the last is decided. A call decided
before (a double click, a second tab, a retried request) is refused with 409 and its
earlier decision; nothing runs twice.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Sequence
from typing import TYPE_CHECKING, Any

from tether.approval import Answer, Decision, Reject, decision_from_json, decision_of
from tether.errors import AlreadyDecidedError, ConfigurationError
from tether.serve import _agui

if TYPE_CHECKING:
    from tether.checkpoint.journal import Thread

__all__ = ["OneAtATime", "decisions_of"]


def decisions_of(thread: Thread, entries: Sequence[Any]) -> dict[str, Decision]:
    """AG-UI resume entries as decisions by call id, each for a call that waits."""
    waiting = {_agui.interrupt_id(r): r for r in thread.requests}
    chosen: dict[str, Decision] = {}
    for entry in entries:
        request = waiting.get(entry.interrupt_id)
        if request is None:
            _refuse_unknown(thread, entry.interrupt_id, sorted(waiting))
        elif request.call_id in chosen:
            raise ConfigurationError(f"interrupt {entry.interrupt_id!r} is answered twice")
        elif entry.status == "cancelled" and request.question is not None:
            chosen[request.call_id] = Answer(action="cancel")  # the server's question dismissed
        elif entry.status == "cancelled":
            chosen[request.call_id] = Reject("the person cancelled this call")
        else:
            chosen[request.call_id] = decision_of(entry.payload or {"kind": "approve"})
    if not chosen:
        raise ConfigurationError("the resume entries decide nothing")
    return chosen


def _refuse_unknown(thread: Thread, interrupt_id: str, waiting: list[str]) -> None:
    """Raise for an interrupt that does not wait: 409 when its call was decided before
    (in this run's last stop or an earlier one), else 400."""
    asked = {_agui.interrupt_id(r): r.call_id for r in thread.asked_requests}
    call_id = asked.get(interrupt_id, interrupt_id.rpartition(":")[2])
    earlier = thread.decided.get(call_id)
    if earlier is not None:
        raise AlreadyDecidedError(
            f"interrupt {interrupt_id!r} was answered before; nothing ran again",
            decisions={call_id: decision_from_json(earlier)},
        )
    raise ConfigurationError(f"interrupt {interrupt_id!r} is not waiting; waiting: {waiting}")


class OneAtATime:
    """Requests that decide, one at a time per (agent, thread) in this server: a second
    click reads the thread as the first left it. (Other processes are kept in order by
    the thread's lease.)"""

    def __init__(self) -> None:
        self._locks: dict[tuple[str, str], tuple[asyncio.Lock, list[int]]] = {}

    @contextlib.asynccontextmanager
    async def turn(self, agent_name: str, thread_id: str) -> AsyncIterator[None]:
        key = (agent_name, thread_id)
        lock, users = self._locks.setdefault(key, (asyncio.Lock(), [0]))
        users[0] += 1
        try:
            async with lock:
                yield
        finally:
            users[0] -= 1
            if not users[0]:  # nobody waits: the lock goes, so threads do not pile up
                del self._locks[key]
