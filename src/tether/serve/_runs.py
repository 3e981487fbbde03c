"""What a run request starts: a new run, a resumed one with the decisions and frontend
tool results it gives, or, for a durable agent, a run queued for its workers."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from tether.approval import Decision, Edit
from tether.errors import ConfigurationError
from tether.serve import _agui, _tools
from tether.serve._decisions import decisions_of
from tether.serve._durable import Cursor, followed

if TYPE_CHECKING:
    from tether.agent import Agent
    from tether.checkpoint.journal import Thread
    from tether.durable.dbos import DurableAgent
    from tether.events import Event
    from tether.models.base import ToolSpec

__all__ = [
    "DECIDE_WAIT",
    "Work",
    "cancel_durable",
    "durable_events",
    "durable_following",
    "given_decisions",
    "prompt_of",
    "run_events",
]

DECIDE_WAIT = 10.0  # seconds a decision waits for the one before it, or for the lease


@dataclass(frozen=True)
class Work:
    """What a run request starts: a function giving the run's tether events, and the
    arguments of the calls a decision changed, by call id (the client holds others)."""

    events: Callable[[], AsyncIterator[Event]]
    edits: dict[str, Any] = field(default_factory=dict)


def given_decisions(thread: Thread, given: Any) -> dict[str, Decision]:
    """The decisions a run request gives by call id: its resume entries' and the results
    its tool messages give frontend calls."""
    chosen = decisions_of(thread, given.resume) if given.resume else {}
    for call_id, answer in _tools.answers(thread, given.messages).items():
        if call_id in chosen:
            raise ConfigurationError(
                f"call {call_id!r} is answered by a resume entry and a tool message"
            )
        chosen[call_id] = answer
    return chosen


def _edits(thread: Thread, decisions: Mapping[str, Decision]) -> dict[str, Any]:
    """The arguments decisions changed, these and those the thread holds already."""
    edits = {k: d["args"] for k, d in thread.decisions.items() if d.get("kind") == "edit"}
    edits.update((k, dict(d.args)) for k, d in decisions.items() if isinstance(d, Edit))
    return edits


def run_events(agent: Agent[Any], thread: Thread, given: Any, tools: tuple[ToolSpec, ...]) -> Work:
    """What to run for an AG-UI input on `thread` (as it is now)."""
    thread_id = given.thread_id
    decisions = given_decisions(thread, given)
    if decisions:
        return Work(
            lambda: agent.stream_resume(
                thread_id, decisions=decisions, wait=DECIDE_WAIT, client_tools=tools
            ),
            _edits(thread, decisions),
        )
    prompt = prompt_of(given)
    if prompt is not None:
        _refuse_while_waiting(thread)
        return Work(lambda: agent.stream(prompt, thread_id=thread_id, client_tools=tools))
    return Work(lambda: agent.stream_resume(thread_id, client_tools=tools))


def _refuse_while_waiting(thread: Thread) -> None:
    """A new message on a thread whose run waits is refused, saying what it waits for."""
    waiting = thread.requests
    if not waiting:
        return
    pending = [r.call_id for r in waiting if r.client_tool]
    asked = [_agui.interrupt_id(r) for r in waiting if not r.client_tool]
    needs = []
    if pending:
        needs.append(f"tool messages with the results of frontend calls {pending}")
    if asked:
        needs.append(f"resume entries deciding interrupts {asked}")
    raise ConfigurationError(
        f"thread {thread.thread_id!r} waits for {' and '.join(needs)}; send those, or stop "
        "the thread's run (POST .../stop) before a new message"
    )


def prompt_of(given: Any) -> str | None:
    """The text of the input's last message when it is the user's (a new run's prompt)."""
    last = given.messages[-1] if given.messages and not given.resume else None
    if last is None or last.role != "user":
        return None
    return _text_of(last.content)


async def durable_events(durable: DurableAgent[Any], given: Any) -> Work:
    """For a durable agent: queue the run (or send the decisions) for a worker, and a
    function giving its events, read from the thread as the worker records it."""

    thread_id = given.thread_id
    thread = await durable._client.thread(thread_id)
    cursor = Cursor.at(thread)
    decisions = given_decisions(thread, given)
    if decisions:
        handle = await asyncio.to_thread(durable.handle, thread_id)
        await handle.adecide(decisions)
    else:
        prompt = prompt_of(given)
        if prompt is None:
            raise ConfigurationError(
                "a durable run that was cut short goes on by itself when its worker restarts; "
                "send a message or decisions"
            )
        handle = await durable.aenqueue(prompt, thread_id=thread_id)
    return Work(lambda: followed(durable, handle, cursor), _edits(thread, decisions))


async def durable_following(durable: DurableAgent[Any], thread_id: str) -> Any:
    """The events of the thread's durable run from now on, if it is queued or running."""

    handle = await asyncio.to_thread(durable.handle, thread_id)
    status = await handle.astatus()
    if status.state not in ("queued", "running"):
        raise ConfigurationError(f"the run of thread {thread_id!r} is {status.state}")
    cursor = Cursor.at(await durable._client.thread(thread_id))
    return lambda: followed(durable, handle, cursor)


async def cancel_durable(durable: DurableAgent[Any], thread_id: str) -> None:
    """Cancel the thread's DBOS workflow, so no worker takes the run on again."""
    handle = await asyncio.to_thread(durable.handle, thread_id)
    client = durable._client.client
    await asyncio.to_thread(client.cancel_workflow, handle.workflow_id)


def _text_of(content: Any) -> str:
    if isinstance(content, str):
        text = content
    else:
        kinds = {getattr(part, "type", None) for part in content}
        if kinds - {"text"}:
            raise ConfigurationError("only text is taken in a user message here")
        text = "\n".join(part.text for part in content)
    if not text.strip():
        raise ConfigurationError("the user message is empty")
    return text
