"""What the API and the page show of a thread: its status, messages, approval cards
(with the change each waiting file call would make), changed files and subagent runs."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from pydantic_core import to_jsonable_python

from tether.approval import ApprovalRequest
from tether.backends.errors import BackendError
from tether.backends.permissions import PermissionedBackend
from tether.backends.state import StateBackend
from tether.capabilities.subagents import files_of
from tether.messages import AssistantMessage, ToolResultMessage, UserMessage
from tether.serve import _agui
from tether.tools.files import change_diff

if TYPE_CHECKING:
    from tether.agent import Agent
    from tether.checkpoint.journal import Thread

__all__ = ["first_prompt", "thread_json", "thread_status"]


def thread_status(thread: Thread, live: bool) -> str:
    """Where the thread's run is, in the page's words."""
    if live:
        return "running"
    if thread.interrupts and all(r.client_tool for r in thread.requests):
        return "waiting for tool results"
    if thread.interrupts:
        return "waiting for approval"
    if thread.stop_reason is None:
        return "stopped (resumable)"
    return thread.stop_reason


def first_prompt(thread: Thread) -> str:
    """The thread's first message from the user, on one line and cut short."""
    first = next((m.text for m in thread.messages if isinstance(m, UserMessage)), "")
    return " ".join(first.split())[:200]


async def thread_json(agent: Agent[Any], thread: Thread, live: bool) -> dict[str, Any]:
    """A thread as the page shows it."""
    waiting, decided = await _cards(agent, thread)
    return {
        "thread_id": thread.thread_id,
        "status": thread_status(thread, live),
        "running": live,
        "messages": _dumped(_agui.messages(thread.messages)),
        "todos": to_jsonable_python(thread.todos),
        "usage": to_jsonable_python(thread.total_usage),
        "cost_usd": thread.total_cost_usd,
        "output": to_jsonable_python(thread.output),
        "metadata": thread.metadata,
        "interrupts": waiting,
        "decided": decided,
        "files": _changes(agent, thread),
        "subagents": _subagents(thread),
    }


async def _cards(agent: Agent[Any], thread: Thread) -> tuple[list[Any], list[Any]]:
    """The approval cards of the calls the thread's run stopped at, each with its place
    among them (`metadata.position`): those still waiting, and those decided already
    (with their `decision`), which run once every one is decided."""
    waiting: list[Any] = []
    decided: list[Any] = []
    open_ids = {r.call_id for r in thread.requests}
    for position, request in enumerate(thread.asked_requests if open_ids else ()):
        shown = _agui.interrupt(request).model_dump(by_alias=True, mode="json")
        shown["metadata"]["diff"] = await _pending_diff(agent, thread, request)
        shown["metadata"]["position"] = position
        if request.call_id in open_ids:
            waiting.append(shown)
        elif request.call_id in thread.decisions:
            decided.append({**shown, "decision": thread.decisions[request.call_id]["kind"]})
    return waiting, decided


def _dumped(models: Sequence[Any]) -> list[Any]:
    return [m.model_dump(by_alias=True, mode="json") for m in models]


def _subagents(thread: Thread) -> list[dict[str, Any]]:
    """The subagent runs of the thread's last run, by the `task` call that made each."""
    return [
        {
            "call_id": call_id,
            "subagent_run_id": _agui.subagent_id(sub.path),
            "status": thread_status(sub, False),
            "messages": _dumped(_agui.messages(sub.messages)),
            "subagents": _subagents(sub),
        }
        for call_id, sub in thread.subagents.items()
    ]


def _changes(agent: Agent[Any], thread: Thread) -> list[dict[str, Any]]:
    """The files the thread's file calls changed (subagents' included), oldest first.
    A main-agent call is one of the agent's own file tools only when the agent has that
    tool: else it was a frontend tool of that name (the client ran it, nothing here)."""

    own = set(agent._plan.tools)
    done: dict[str, bool] = {}
    calls = []
    for source in [thread, *_all_subagents(thread)]:
        for message in source.messages:
            if isinstance(message, ToolResultMessage):
                done.update((r.call_id, not r.is_error) for r in message.results)
            elif isinstance(message, AssistantMessage):  # frontend tools are the main run's
                calls += [c for c in message.tool_calls if source is not thread or c.name in own]
    changes = []
    for call in calls:
        change = _agui.change_of(call) if done.get(call.id) else None
        if change is not None:
            changes.append({**change, "call_id": call.id})
    return changes


def _all_subagents(thread: Thread) -> list[Thread]:
    found = []
    for sub in thread.subagents.values():
        found += [sub, *_all_subagents(sub)]
    return found


async def _pending_diff(agent: Agent[Any], thread: Thread, request: ApprovalRequest) -> str | None:
    """The change a waiting file call would make, the file read as the agent that asked
    would read it (its rules, and those of every agent above it): from the thread's own
    files, else through its backend. Nothing is shown of a file it may not read."""

    if request.client_tool:  # the client's own tool, whatever its name: no file of ours
        return None
    args = request.args
    view = files_of(agent, request.path)
    if view is None or not isinstance(args, Mapping) or not isinstance(args.get("file_path"), str):
        return None
    path = args["file_path"]
    try:
        inner = view
        while isinstance(inner, PermissionedBackend):  # the rules, whatever holds the file
            inner.check("read", path)
            inner = inner.backend
        if path in thread.files:
            before = thread.files[path][0].decode("utf-8", "replace")
        elif isinstance(inner, StateBackend) or await view.stat(path) is None:
            before = ""
        else:
            before = (await view.read(path)).decode("utf-8", "replace")
    except (BackendError, OSError):
        return None
    return await asyncio.to_thread(change_diff, request.tool, args, before)
