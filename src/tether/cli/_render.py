"""What the command prints while a run goes on: Rich output for people, one JSON object
per line for scripts (`--json`), or only the answer (`--quiet`).

Rich, of the cli extra, is imported where it is used: `--json` works without it."""

from __future__ import annotations

import contextlib
import json
import sys
import time
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Protocol

from pydantic_core import to_jsonable_python

from tether.backends.paths import misleading
from tether.events import (
    ApprovalRequested,
    Compacted,
    Event,
    ModelDelta,
    RunFinished,
    StepFinished,
    TodosUpdated,
    ToolCallFinished,
    ToolCallStarted,
)
from tether.messages import ToolCall, ToolResult, Usage
from tether.models._plain import CANNOT_DO
from tether.state import Todo

if TYPE_CHECKING:
    from rich.console import Console, RenderableType
    from rich.live import Live
    from rich.spinner import Spinner

    from tether.agent import RunResult
    from tether.approval import ApprovalRequest

__all__ = [
    "TODO_MARKS",
    "JsonOutput",
    "Output",
    "QuietOutput",
    "RichOutput",
    "agent_label",
    "asked_by",
    "call_line",
    "cut",
    "declined",
    "exit_code",
    "request_line",
    "shown",
    "spending",
]

_MAIN_ARGUMENT = {
    "read_file": "file_path",
    "write_file": "file_path",
    "edit_file": "file_path",
    "ls": "path",
    "glob": "pattern",
    "grep": "pattern",
    "execute": "command",
    "task": "subagent_type",
}
OUTPUT_LINES = 4
"""The last lines of a command's output shown under its call."""
DIFF_LINES = 8
"""The lines of an unasked edit's change shown under its call."""
TODO_MARKS = {"completed": "[green]✔[/]", "in_progress": "[yellow]▶[/]", "pending": "○"}


class Output(Protocol):
    """Where a run's events, notices and errors go."""

    @property
    def console(self) -> Console | None:
        """A Rich console for questions (approvals), or None when nobody can be asked."""

    def event(self, event: Event) -> None: ...
    def notice(self, text: str, *, dim: bool = False) -> None: ...
    def error(self, text: str) -> None: ...
    def pause(self) -> None: ...
    def close(self) -> None: ...


def agent_label(path: tuple[str, ...]) -> str:
    """ "" for the main agent, "researcher#1" for its first researcher subagent."""
    return "/".join(part.removeprefix("task:") for part in path[1:])


def shown(text: str, *, keep: str = "") -> str:
    """`text` with control and invisible formatting characters (bidi overrides,
    zero-width spaces) written as escapes, so that what a person reads is what it is;
    characters in `keep` (such as newlines) stay."""
    if not any(misleading(c) and c not in keep for c in text):
        return text
    return "".join(
        c if c in keep or not misleading(c) else c.encode("unicode_escape").decode() for c in text
    )


def call_line(call: ToolCall, limit: int = 80) -> str:
    """A call as one short line: the tool and its main argument."""
    args = call.args
    if isinstance(args, str):
        return f"{call.name} (arguments cut off)"
    key = _MAIN_ARGUMENT.get(call.name)
    if call.name == "write_todos":
        detail = f"{len(args.get('todos', []))} items"
    elif key is not None and key in args:
        detail = str(args[key])
        if call.name == "task":
            detail += ": " + str(args.get("description", ""))
    else:
        detail = json.dumps(args, ensure_ascii=False, default=str)
    flat = " ".join(detail[: 4 * limit].split())  # a line shows the start: look no further
    if len(detail) > 4 * limit:
        flat += " …"
    return f"{call.name} {cut(shown(flat), limit)}"


def cut(text: str, limit: int) -> str:
    """`text`, at most `limit` characters: cut short with an ellipsis when longer."""
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _first_lines(text: str, limit: int) -> tuple[list[str], int]:
    """The first `limit` lines of `text` and how many it has, without splitting all of
    it: a call's text can be megabytes, and the terminal shows a few lines."""
    if not text:
        return [], 0
    total = text.count("\n") + (not text.endswith("\n"))
    return text.split("\n", limit)[: min(limit, total)], total


def request_line(request: ApprovalRequest) -> str:
    """A call waiting for approval as one short line, as `call_line` writes a call, with
    the subagent that made it."""
    args = request.args if isinstance(request.args, str) else dict(request.args)
    return call_line(ToolCall(request.tool, args, id=request.call_id)) + asked_by(request)


def asked_by(request: ApprovalRequest) -> str:
    """ " (by subagent outer#1/inner#1)" for a subagent's call; "" for the agent's."""
    label = agent_label(request.path)
    return f" (by subagent {label})" if label else ""


def spending(usage: Usage, cost: float | None) -> str:
    """What a thread spent, subagents included, in one line."""
    calls = f"{usage.requests:,} model call" + ("" if usage.requests == 1 else "s")
    price = "cost unknown (no price known)" if cost is None else f"${cost:.4f}"
    return (
        f"{calls} · {usage.input_tokens:,} tokens in · {usage.output_tokens:,} out · {price}, "
        "subagents included"
    )


def result_note(result: ToolResult, limit: int = 100) -> str:
    """The first line of a failed call's error."""
    first = shown(next((line for line in result.text.splitlines() if line.strip()), ""))
    return cut(first, limit)


def exit_code(result: ToolResult) -> int | None:
    """The exit code `execute` reported on its last line, if any."""
    lines = result.text.rstrip().splitlines()
    last = lines[-1] if lines else ""
    if last.startswith("[exit code ") and last.endswith("]"):
        with contextlib.suppress(ValueError):
            return int(last.removeprefix("[exit code ").removesuffix("]"))
    return None


def declined(output: Any) -> bool:
    """Whether the answer is the offline model saying it cannot do the request."""
    return isinstance(output, str) and output.startswith(CANNOT_DO)


def stats(usage: Usage, cost: float | None, steps: int, seconds: float) -> str:
    price = "cost unknown" if cost is None else f"${cost:.4f}"
    step = "step" if steps == 1 else "steps"
    return f"{steps} {step} · {usage.total_tokens:,} tokens · {price} · {seconds:.1f}s"


class RichOutput:
    """Model text as it arrives, one line per tool call, the todo list when it changes,
    a live footer (steps, tokens, cost, time) on a terminal, and a summary at the end."""

    def __init__(self, console: Console | None = None) -> None:
        from rich.console import Console

        self.console = console or Console(highlight=False)
        self.started = time.monotonic()
        self.steps, self.usage, self.cost = 0, Usage(), 0.0
        self.cost_known = True
        self.activity = "thinking"
        self.text = ""
        self.said = ""  # the main agent's text in the current step, and the last one
        self.last_said = ""
        self.live: Live | None = None
        self.spinner: Spinner | None = None
        self.asked: set[str] = set()
        """Calls a person was asked about: their change was shown then."""

    # -- the footer --------------------------------------------------------------

    def _footer(self) -> RenderableType:
        from rich.spinner import Spinner

        elapsed = time.monotonic() - self.started
        price = f"${self.cost:.4f}" if self.cost_known else "cost unknown"
        line = (
            f"step {self.steps} · {self.usage.total_tokens:,} tokens · {price} · "
            f"{elapsed:.0f}s · {self.activity}"
        )
        if self.spinner is None:
            self.spinner = Spinner("dots", style="cyan")
        self.spinner.update(text=f"[dim]{line}[/]")
        return self.spinner

    def _show_footer(self) -> None:
        if self.live is None and self.console.is_terminal:
            from rich.live import Live

            self.live = Live(
                get_renderable=self._footer,
                console=self.console,
                refresh_per_second=8,
                transient=True,
            )
            self.live.start()

    def pause(self) -> None:
        """Take the footer away (before a question)."""
        self._flush()
        if self.live is not None:
            self.live.stop()
            self.live = None

    def close(self) -> None:
        self.pause()

    # -- events ------------------------------------------------------------------

    def event(self, event: Event) -> None:
        self._show_footer()
        label = agent_label(event.path)
        if isinstance(event, ModelDelta | StepFinished):
            self._progress(label, event)
        elif isinstance(event, ToolCallStarted):
            self.activity = f"running {call_line(event.call, 40)}"
        elif isinstance(event, ToolCallFinished):
            self._tool_line(label, event)
        elif isinstance(event, TodosUpdated):
            self._todos(label, event.todos)
        elif isinstance(event, Compacted):
            self.console.print(
                f"[dim]  context compacted ({event.how}): "
                f"{event.tokens_before:,} → {event.tokens_after:,} tokens[/]"
            )
        elif isinstance(event, RunFinished) and not label:
            self.pause()
            if event.result.stop_reason != "interrupted":  # questions or a note follow
                self._answer(event.result.output)
                self._summary(event.result)
        elif isinstance(event, ApprovalRequested):
            self.asked.update(r.call_id for r in event.requests)  # the person saw these
            self.pause()

    def _progress(self, label: str, event: ModelDelta | StepFinished) -> None:
        """The main agent's text, line by line; the footer's numbers after each step."""
        if isinstance(event, ModelDelta):
            if event.part == "text" and not label:
                self.text += event.delta
                self.said += event.delta
                *lines, self.text = self.text.split("\n")
                for line in lines:
                    self.console.print(line, markup=False)
            return
        self._flush()
        if not label:
            self.last_said, self.said = self.said, ""
        self.steps, self.usage = event.steps, event.usage
        self.cost_known = event.cost_usd is not None
        self.cost = event.cost_usd or 0.0
        self.activity = "thinking"

    def _flush(self) -> None:
        if self.text:
            self.console.print(self.text, markup=False)
            self.text = ""

    def _tool_line(self, label: str, event: ToolCallFinished) -> None:
        """One line for the call: ✓, ✗ with why (an error, a non-zero exit, a person's
        rejection) or ↩ for an answer given instead; then what a person should see of
        it (a command's last lines, the change an edit made without a question)."""
        from rich.markup import escape

        self._flush()
        call, result = event.call, event.result
        who = f"[magenta]{escape(label)}[/] " if label else ""
        line = escape(call_line(call))
        code = exit_code(result) if call.name == "execute" else None
        if event.decided == "answered":
            note = escape(result_note(result))
            self.console.print(f"  {who}[cyan]↩[/] {line} [dim]— answered: {note}[/]")
        elif result.is_error:
            note = escape(result_note(result))
            self.console.print(f"  {who}[red]✗[/] {line} [dim]— {note}[/]")
        elif code:
            self.console.print(f"  {who}[red]✗[/] {line} [dim]— exit code {code}[/]")
        else:
            self.console.print(f"  {who}[green]✓[/] {line}")
        if event.decided is not None or result.is_error:
            return
        if call.name == "execute":
            self._command_output(result)
        elif call.name in ("write_file", "edit_file") and call.id not in self.asked:
            self._change(call)

    def _command_output(self, result: ToolResult) -> None:
        """The last lines a command printed, dim; the rest is in `tether show`."""
        from rich.markup import escape

        lines = result.text.splitlines()
        if lines and lines[-1].startswith("[exit code "):
            lines.pop()
        shown_lines = [shown(line) for line in lines[-OUTPUT_LINES:]]
        if len(lines) > OUTPUT_LINES:
            more = len(lines) - OUTPUT_LINES
            self.console.print(f"    [dim]… {more} more lines (tether show THREAD)[/]")
        for line in shown_lines:
            self.console.print(f"    [dim]│ {escape(cut(line, 200))}[/]")

    def _change(self, call: ToolCall) -> None:
        """What an edit that ran without a question changed, in a few diff lines."""
        from rich.markup import escape

        args = call.args if isinstance(call.args, dict) else {}
        if call.name == "edit_file":
            removed = str(args.get("old_string", ""))
            before, total = _first_lines(removed, DIFF_LINES)
            after, added = _first_lines(str(args.get("new_string", "")), DIFF_LINES)
            total += added
        else:
            before, (after, total) = [], _first_lines(str(args.get("content", "")), DIFF_LINES)
        lines = [("red", "-", line) for line in before] + [("green", "+", line) for line in after]
        for style, sign, line in lines[:DIFF_LINES]:
            self.console.print(f"    [{style}]{sign} {escape(shown(cut(line, 200)))}[/]")
        if total > DIFF_LINES:
            self.console.print(f"    [dim]… {total - DIFF_LINES} more lines[/]")

    def _todos(self, label: str, todos: tuple[Todo, ...]) -> None:
        from rich.markup import escape

        self._flush()
        title = f"Todos ({label})" if label else "Todos"
        lines = [f"  {TODO_MARKS[t.status]} {escape(t.content)}" for t in todos]
        self.console.print(f"[bold]{title}[/]\n" + "\n".join(lines or ["  (empty)"]))

    def _answer(self, output: Any) -> None:
        """The answer, unless it already streamed (some models stream only tool JSON)."""
        if output is None:
            return
        text = output if isinstance(output, str) else json.dumps(to_jsonable_python(output))
        if text.strip() and text.strip() != self.last_said.strip():
            self.console.print(text, markup=False)

    def _summary(self, result: RunResult[Any]) -> None:
        from rich.markup import escape

        elapsed = time.monotonic() - self.started
        line = escape(stats(result.usage, result.cost_usd, result.steps, elapsed))
        said: str = result.stop_reason
        style = "green" if said == "completed" else "yellow"
        if said == "error":
            style = "red"
        if said == "completed" and declined(result.output):
            said, style = "not done", "yellow"  # an answer, but not to what was asked
        self.console.print(f"[{style}]● {said}[/] [dim]· {line}[/]")

    def notice(self, text: str, *, dim: bool = False) -> None:
        self._flush()
        self.console.print(text, markup=False, style="dim" if dim else None, soft_wrap=True)

    def error(self, text: str) -> None:
        from rich.console import Console
        from rich.markup import escape

        self.pause()
        Console(stderr=True, highlight=False).print(f"[bold red]error:[/] {escape(text)}")


class QuietOutput:
    """Only the final answer, on stdout; errors on stderr."""

    def __init__(self, console: Console | None) -> None:
        self.console = console

    def event(self, event: Event) -> None:
        if isinstance(event, RunFinished) and len(event.path) == 1:
            output = event.result.output
            if output is not None:
                print(output if isinstance(output, str) else json.dumps(to_jsonable_python(output)))

    def notice(self, text: str, *, dim: bool = False) -> None:
        if not dim:
            print(text, file=sys.stderr)

    def error(self, text: str) -> None:
        print(f"error: {text}", file=sys.stderr)

    def pause(self) -> None:
        pass

    def close(self) -> None:
        pass


class JsonOutput:
    """One JSON object per event on stdout (`{"kind": ..., "path": [...], ...}`); notices
    and errors go to stderr. The run's end is a `run_finished` object without messages."""

    console = None

    def event(self, event: Event) -> None:
        data = (
            finished_json(event.result, event.path)
            if isinstance(event, RunFinished)
            else to_jsonable_python(event, bytes_mode="base64")
        )
        print(json.dumps(data, ensure_ascii=False), flush=True)

    def notice(self, text: str, *, dim: bool = False) -> None:
        print(text, file=sys.stderr)

    def error(self, text: str) -> None:
        print(json.dumps({"kind": "error", "message": text}), flush=True)

    def pause(self) -> None:
        pass

    def close(self) -> None:
        pass


def finished_json(result: RunResult[Any], path: tuple[str, ...]) -> Mapping[str, Any]:
    """A run's end as JSON: how it stopped and what it spent, without the messages."""
    return {
        "kind": "run_finished",
        "path": list(path),
        "stop_reason": result.stop_reason,
        "output": to_jsonable_python(result.output),
        "thread_id": result.thread_id,
        "steps": result.steps,
        "usage": to_jsonable_python(result.usage),
        "cost_usd": result.cost_usd,
        "todos": to_jsonable_python(result.todos),
        "interrupts": to_jsonable_python(result.interrupts),
    }
