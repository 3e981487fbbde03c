"""Decisions on the calls that wait for approval: asked of a person at the terminal, or
given with --approve, --reject or --decisions.

Rich, of the cli extra, is imported where it is used: `tether run --json` (which also
imports this module) works without it."""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shlex
import subprocess
import sys
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tether.approval import (
    ApprovalRequest,
    Approve,
    Decision,
    Edit,
    Reject,
    Respond,
    decisions_from_json,
)
from tether.backends.errors import BackendError
from tether.backends.filesystem import FilesystemBackend
from tether.capabilities.subagents import files_of
from tether.cli._permissions import Allowances
from tether.cli._questions import ask_question
from tether.cli._render import asked_by, shown
from tether.errors import ConfigurationError
from tether.tools.files import change_diff

if TYPE_CHECKING:
    from rich.console import Console
    from rich.syntax import Syntax

    from tether.agent import Agent
    from tether.backends.base import Backend

__all__ = ["ask", "given_decisions"]

_KEYS = {"a": "approve", "w": "always", "e": "edit", "r": "reject", "s": "respond"}
_LABELS = {
    "approve": "\\[a]pprove",
    "always": "al\\[w]ays allow",
    "edit": "\\[e]dit",
    "reject": "\\[r]eject",
    "respond": "re\\[s]pond",
}


def ask(
    requests: Sequence[ApprovalRequest],
    console: Console,
    root: Path,
    allowances: Allowances | None = None,
    *,
    agent: Agent[Any] | None = None,
) -> list[Decision]:
    """A decision for each request, asked one by one. With `allowances` (in a session)
    a person can also approve calls like it from now on, and calls covered by what was
    allowed before in the same list are approved without asking. A file is shown as
    the agent that asked would read it (`agent`'s rules, down to that subagent's)."""
    from rich.markup import escape

    decisions: list[Decision] = []
    for number, request in enumerate(requests, 1):
        if request.question is not None:  # a server's question: only the person answers
            title = f"Question {number} of {len(requests)}: {request.tool}"
            decisions.append(ask_question(request, console, title))
            continue
        if allowances is not None and allowances.covers(request.tool, request.args):
            decisions.append(Approve())
            continue
        found = files_of(agent, request.path) if agent is not None else None
        workspace = found or FilesystemBackend(root)
        doomed = _cannot_succeed(request, workspace)
        if doomed is not None:  # asking would waste the person's time: the agent is told
            console.print(f"[yellow]Not asked: {escape(shown(doomed))}[/]")
            decisions.append(Respond(f"Not run: {doomed}"))
            continue
        title = f"Approval {number} of {len(requests)}: {request.tool}{asked_by(request)}"
        console.rule(f"[bold]{escape(title)}[/]")
        _show(request, console, workspace)
        decision = _decide(request, console, always=allowances is not None)
        if decision is None:
            assert allowances is not None
            what = allowances.allow(request)
            console.print(f"[dim]Allowed {escape(what)} for the rest of this session[/]")
            decision = Approve()
        decisions.append(decision)
    return decisions


def given_decisions(
    options: argparse.Namespace, waiting: list[ApprovalRequest]
) -> list[Decision] | dict[str, Decision] | None:
    """The decisions given with --approve, --reject or --decisions, if any."""
    if options.approve:
        return {r.call_id: Approve() for r in waiting}
    if options.reject is not None:
        return {r.call_id: Reject(options.reject) for r in waiting}
    if options.decisions is None:
        return None
    try:
        text = sys.stdin.read() if options.decisions == "-" else Path(options.decisions).read_text()
        return decisions_from_json(json.loads(text))
    except (OSError, ValueError) as exc:
        raise ConfigurationError(f"cannot read the decisions: {exc}") from None


def _syntax(text: str, lexer: str) -> Syntax:
    from rich.syntax import Syntax

    return Syntax(text, lexer, word_wrap=True, background_color="default")


def _show(request: ApprovalRequest, console: Console, workspace: Backend) -> None:
    """The call as a person should judge it: control and invisible characters escaped."""
    args = request.args
    if isinstance(args, str):
        console.print(shown(args, keep="\n"), markup=False)
        return
    if request.tool == "execute":
        console.print(_syntax(shown(f"$ {args.get('command', '')}", keep="\n"), "bash"))
        return
    diff = _diff(request.tool, args, workspace)
    if diff is not None:
        console.print(_syntax(shown(diff, keep="\n\t"), "diff"))
        return
    console.print(_syntax(shown(json.dumps(args, indent=2, ensure_ascii=False), keep="\n"), "json"))


def _cannot_succeed(request: ApprovalRequest, workspace: Backend) -> str | None:
    """Why a file call would fail as it stands (so its diff would mislead), or None."""
    args = request.args
    path = args.get("file_path") if isinstance(args, Mapping) else None
    if request.tool not in ("write_file", "edit_file") or not isinstance(path, str):
        return None
    assert isinstance(args, Mapping)
    data, refused = _read(workspace, path)
    if request.tool == "write_file":
        if data is None:
            return None
        return f"{path} already exists and write_file only creates files; read it, then edit_file"
    if refused is not None:  # an edit reads the file first
        return refused
    try:  # a diff of a file that is not text would show a change that cannot happen
        text = None if data is None else data.decode("utf-8")
    except UnicodeDecodeError:
        return f"{path} is not UTF-8 text and cannot be edited"
    return _edit_fails(path, text, args)


def _read(workspace: Backend, path: str) -> tuple[bytes | None, str | None]:
    """The file at `path` through `workspace`, as the call will read it (None when it is
    not there); and why it may not be read, when that is why there is none."""
    try:
        return asyncio.run(workspace.read(path)), None
    except BackendError as exc:
        try:
            asyncio.run(workspace.stat(path))
        except BackendError:
            return None, str(exc).rstrip(".")
        return None, None


def _edit_fails(path: str, text: str | None, args: Mapping[str, Any]) -> str | None:
    if text is None:
        return f"{path} does not exist; write_file creates it"
    old = str(args.get("old_string", ""))
    count = text.count(old) if old else 0
    if count == 0:
        return f"old_string was not found in {path}; read the file and copy the text exactly"
    if count > 1 and not args.get("replace_all"):
        return (
            f"old_string occurs {count} times in {path}; add surrounding lines to make it "
            "unique, or set replace_all"
        )
    return None


def _diff(tool: str, args: Mapping[str, Any], workspace: Backend) -> str | None:
    """The change a write_file or edit_file call would make, as a unified diff (asked
    only of calls that can succeed: see `_cannot_succeed`)."""
    path = args.get("file_path")
    if tool not in ("write_file", "edit_file") or not isinstance(path, str):
        return None
    try:  # through the backend: a symlink shows nothing, as the write will be refused
        before = asyncio.run(workspace.read(path)).decode("utf-8")
    except (BackendError, UnicodeDecodeError):
        before = ""
    return change_diff(tool, args, before)


def _decide(request: ApprovalRequest, console: Console, *, always: bool) -> Decision | None:
    """The person's decision; None for "always allow" (approve this and calls like it)."""
    allowed: list[str] = [kind for kind in _KEYS.values() if kind in request.allowed]
    if always and "approve" in allowed:
        allowed.insert(1, "always")
    question = " ".join(_LABELS[kind] for kind in allowed) + "? "
    while True:
        answer = console.input(question).strip().lower()
        kind = _KEYS.get(answer[:1]) if answer else None
        if kind in allowed:
            break
        console.print(f"[yellow]Answer one of: {', '.join(allowed)}[/]")
    if kind == "always":
        return None
    if kind == "approve":
        return Approve()
    if kind == "reject":
        return Reject(console.input("Why (optional, the agent reads it)? ").strip())
    if kind == "respond":
        return Respond(console.input("Reply to the agent instead of running the call: "))
    return Edit(_edited(request, console))


def _edited(request: ApprovalRequest, console: Console) -> dict[str, Any]:
    args = dict(request.args) if isinstance(request.args, Mapping) else {}
    if request.tool == "execute":
        args["command"] = console.input("New command: ")
        return args
    editor = os.environ.get("VISUAL") or os.environ.get("EDITOR")
    text = json.dumps(args, indent=2, ensure_ascii=False)
    while True:
        if editor:
            text = _in_editor(editor, text)
        else:
            text = console.input("New arguments, as JSON on one line: ")
        try:
            edited = json.loads(text)
        except ValueError as exc:
            console.print(f"[red]Not JSON: {exc}[/]")
            continue
        if isinstance(edited, dict):
            return edited
        console.print("[red]The arguments must be a JSON object[/]")


def _in_editor(editor: str, text: str) -> str:
    with tempfile.NamedTemporaryFile("w+", suffix=".json", delete=False) as handle:
        handle.write(text)
    try:
        subprocess.run([*shlex.split(editor), handle.name], check=False)
        return Path(handle.name).read_text()
    finally:
        os.unlink(handle.name)
