"""`tether threads`, `tether show` and `tether delete`: reading the run records."""

from __future__ import annotations

import argparse
import asyncio
import json
import time
from typing import Any

from tether.checkpoint.base import Checkpointer, ThreadInfo, open_checkpointer
from tether.checkpoint.journal import Thread, read_thread
from tether.cli._render import call_line, cut, exit_code, request_line, result_note, spending
from tether.cli._render import shown as escaped
from tether.errors import ConfigurationError
from tether.messages import (
    AssistantMessage,
    ToolResult,
    ToolResultMessage,
    UserMessage,
    to_json,
)

__all__ = ["command", "list_threads", "status"]


def command(options: argparse.Namespace, url: str) -> int:
    """Run `threads`, `show` or `delete` on the threads at `url`."""
    return asyncio.run(_command(options, open_checkpointer(url)))


async def _command(options: argparse.Namespace, checkpointer: Checkpointer) -> int:
    try:
        if options.command == "threads":
            await list_threads(checkpointer, options.limit, as_json=options.json)
            return 0
        if options.command == "delete":
            if not await checkpointer.delete(options.thread):
                raise ConfigurationError(f"there is no thread {options.thread}")
            print(f"deleted {options.thread}")
            return 0
        thread = await read_thread(checkpointer, options.thread)
        if not thread.exists:
            raise ConfigurationError(
                f"there is no thread {options.thread}; `tether threads` lists them"
            )
        if options.json:
            print(json.dumps(json.loads(to_json(thread.messages)), indent=2, ensure_ascii=False))
            return 0
        info = next(
            (t for t in await checkpointer.threads() if t.thread_id == thread.thread_id), None
        )
        print(_details(thread, info))
        print(_conversation(thread))
        return 0
    finally:
        await checkpointer.close()


def status(thread: Thread) -> str:
    """How the thread's last run stands, in a word or three."""
    if thread.interrupts:
        return "waiting for approval"
    if thread.stop_reason is None:
        return "stopped (resumable)"
    return thread.stop_reason


async def list_threads(
    checkpointer: Checkpointer, limit: int, *, as_json: bool, mark: str | None = None
) -> None:
    """Print the latest `limit` threads, one line (or JSON object) each; `mark` is the
    thread a session is on."""
    infos = (await checkpointer.threads())[: max(limit, 0)]
    rows: list[dict[str, Any]] = []
    for info in infos:
        thread = await read_thread(checkpointer, info.thread_id)
        first = next((m.text for m in thread.messages if isinstance(m, UserMessage)), "")
        rows.append(
            {
                "thread_id": info.thread_id,
                "updated": info.updated,
                "status": status(thread),
                "task": " ".join(first.split()),
            }
        )
    if as_json:
        for row in rows:
            print(json.dumps(row, ensure_ascii=False))
        return
    if not rows:
        print('no threads yet: `tether run "..."` starts one')
        return
    for row in rows:
        task: str = row["task"]
        task = cut(task, 60)
        here = "*" if row["thread_id"] == mark else " " if mark else ""
        print(f"{here}{row['thread_id']}  {_ago(row['updated']):>8}  {row['status']:<22} {task}")


def _ago(stamp: float) -> str:
    seconds = max(0, time.time() - stamp)
    for size, unit in ((86_400, "d"), (3_600, "h"), (60, "m")):
        if seconds >= size:
            return f"{int(seconds // size)}{unit} ago"
    return f"{int(seconds)}s ago"


def _details(thread: Thread, info: ThreadInfo | None) -> str:
    """The thread's model, times, spending, and the calls waiting for a decision."""
    recorded = thread.metadata.get("cli", {})
    model = recorded.get("model", "unknown") if isinstance(recorded, dict) else "unknown"
    lines = [f"# {thread.thread_id} · {status(thread)}", f"model: {model}"]
    if info is not None:
        lines.append(f"started: {_when(info.created)} · last written: {_when(info.updated)}")
    lines.append(f"spent: {spending(thread.total_usage, thread.total_cost_usd)}")
    for request in thread.requests:
        call = request_line(request)
        lines.append(f"waiting for approval: {call} (tether resume {thread.thread_id})")
    return "\n".join(lines)


def _when(stamp: float) -> str:
    moment = time.strftime("%Y-%m-%d %H:%M", time.localtime(stamp))
    return f"{moment} ({_ago(stamp)})"


def _conversation(thread: Thread) -> str:
    """The thread as a person reads it: prompts, answers, one line per tool call, and
    what commands printed."""
    lines: list[str] = []
    calls: dict[str, Any] = {}
    for message in thread.messages:
        if isinstance(message, UserMessage):
            lines += ["", f"you: {message.text}"]
        elif isinstance(message, AssistantMessage):
            calls.update({c.id: c for c in message.tool_calls})
            if message.text.strip():
                lines += ["", f"agent: {message.text.strip()}"]
        elif isinstance(message, ToolResultMessage):
            for result in message.results:
                call = calls.get(result.call_id)
                shown = call_line(call) if call is not None else result.name
                lines += _result_lines(shown, result)
    return "\n".join(lines)


def _result_lines(call: str, result: ToolResult) -> list[str]:
    """A call's outcome, and a command's whole output."""
    if result.is_error:
        return [f"  ✗ {call} — {result_note(result)}"]
    if result.name != "execute":
        return [f"  ✓ {call}"]
    code = exit_code(result)
    output = [f"    │ {escaped(line)}" for line in result.text.splitlines()]
    return [f"  ✗ {call} — exit code {code}" if code else f"  ✓ {call}", *output]
