"""`tether`, `tether chat [THREAD]` and `tether -c`: a conversation with the agent.

Each line typed is the next message of one thread. The agent's turn streams as `tether
run` shows it; Esc or Ctrl-C stops the turn and keeps the session (its work so far stays
in the thread, and the next message sets the stopped run aside). Lines starting with "/"
are the session's commands (`/help`). Line editing and history come from prompt_toolkit
on a terminal; from a pipe, each line read is a message and nobody can approve a call.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import sys
import termios
import tty
import uuid
from collections.abc import AsyncIterator, Callable, Coroutine, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from tether import __version__
from tether.checkpoint.journal import Thread, read_thread
from tether.cli import EXIT_CODES, REFUSALS
from tether.cli._agent import build_agent, workspace
from tether.cli._approve import ask
from tether.cli._config import MODES, Loaded, changed
from tether.cli._permissions import Allowances
from tether.cli._records import run_metadata
from tether.cli._render import TODO_MARKS, Output, RichOutput, cut, shown, spending
from tether.cli._session import Interrupted, consume, explain_wait
from tether.cli._threads import list_threads
from tether.errors import ConfigurationError, TetherError
from tether.messages import AssistantMessage, UserMessage

if TYPE_CHECKING:
    from rich.console import Console

    from tether.agent import Agent, RunResult
    from tether.approval import ApprovalRequest, Decision
    from tether.events import Event

__all__ = ["COMMANDS", "chat"]

T = TypeVar("T")

COMMANDS = {
    "/help": "what you can type",
    "/model [PROVIDER:MODEL]": "the model, or switch to another",
    "/mode [MODE]": "the permission mode, or switch: " + ", ".join(MODES),
    "/cost": "tokens and dollars this thread has spent, subagents included",
    "/todos": "the agent's task list",
    "/allowed": 'what runs without asking ("always allow" and [commands] allow)',
    "/compact": "summarize the thread's older messages now, keeping the latest reply",
    "/retry": "try a stopped or failed turn again from its last step",
    "/threads": "the project's latest threads",
    "/clear": "start a new thread (this one stays: `tether chat THREAD`)",
    "/exit": "leave (also Ctrl-D)",
}
"""The session's commands and what each does."""

_ESCAPE = b"\x1b"


class _Stopped(Exception):
    """Esc was pressed during a turn."""


def chat(loaded: Loaded, directory: Path, thread_id: str | None, output: Output) -> int:
    """Hold a conversation on `thread_id` (a new thread when None); the exit code."""
    console = output.console
    if not isinstance(output, RichOutput) or console is None:
        raise ConfigurationError(
            "a conversation prints for people: leave out --json and --quiet "
            '(for scripts: tether run --json "...")'
        )
    session = _Session(loaded, directory, console, thread_id)
    try:
        return session.hold()
    except KeyboardInterrupt:  # a second Ctrl-C pressed before the prompt took the keys
        return EXIT_CODES["completed"]
    finally:
        try:
            session.stack.close()  # the workspace the last agent used goes back to its owners
        finally:
            session.runner.close()


@dataclass
class _Session:
    loaded: Loaded
    directory: Path
    console: Console
    thread_id: str | None
    allowances: Allowances = field(init=False)
    stack: contextlib.ExitStack[Any] = field(default_factory=contextlib.ExitStack)
    runner: asyncio.Runner = field(default_factory=asyncio.Runner)
    """One event loop for the session, so what the agent keeps (its MCP servers) lasts
    from turn to turn."""
    agent: Agent[Any] = field(init=False)
    terminal: bool = field(init=False)

    def __post_init__(self) -> None:
        self.allowances = Allowances.of(self.loaded.settings)
        self.terminal = sys.stdin.isatty() and self.console.is_terminal
        if self.thread_id is None:
            self.thread_id = _new_thread()

    @property
    def thread(self) -> str:
        assert self.thread_id is not None
        return self.thread_id

    # -- the conversation --------------------------------------------------------

    def hold(self) -> int:
        self._build()
        opened = self._read_thread()
        self._greet(opened)
        if opened.requests and self.terminal:  # it waits for approval: ask first
            self._go_on(opened)
        read = self._reader()
        stopping = False
        while True:
            try:
                line = read().strip()
                stopping = False
                if line.startswith("/") and not self._command(line):
                    return EXIT_CODES["completed"]
                if line and not line.startswith("/"):
                    self._say(line)
            except KeyboardInterrupt:  # at the prompt, or in a command: a turn has its own
                if stopping:
                    return EXIT_CODES["completed"]
                stopping = True
                self.console.print("[dim](Ctrl-C again, Ctrl-D or /exit leaves)[/]")
            except EOFError:
                return EXIT_CODES["completed"]

    def _say(self, text: str) -> None:
        metadata = run_metadata(self.loaded)

        def events() -> AsyncIterator[Event]:
            if self._read_thread().unfinished:  # a stopped turn, an unanswered question
                self.runner.run(self.agent.aabandon(self.thread))  # is set aside
            return self.agent.stream(text, thread_id=self.thread, metadata=metadata)

        self._turn(events)

    def _turn(self, events: Callable[[], AsyncIterator[Event]]) -> None:
        """Play a turn to its end, asking about the calls that wait on the way."""
        output = RichOutput(self.console)
        try:
            result = self._play(events(), output)
            while result.stop_reason == "interrupted":
                if not self.terminal:
                    explain_wait(list(result.interrupts), self.thread, output)
                    return
                decided = self._ask(list(result.interrupts))
                result = self._play(
                    self.agent.stream_resume(self.thread, decisions=decided), output
                )
        except (KeyboardInterrupt, Interrupted, _Stopped):
            output.close()
            self.console.print(
                "[yellow]Stopped.[/] [dim]What the turn did is kept; /retry goes on with "
                "it, a new message sets it aside.[/]"
            )
        except REFUSALS as exc:
            output.error(str(exc))
        except TetherError as exc:
            output.error(str(exc))
            output.notice("/retry tries the turn again from its last step.", dim=True)
        finally:
            output.close()

    def _play(self, events: AsyncIterator[Event], output: RichOutput) -> RunResult[Any]:
        return self.runner.run(_escapable(consume(events, output), watch=self.terminal))

    def _ask(self, requests: list[ApprovalRequest]) -> list[Decision]:
        return ask(requests, self.console, self.directory, self.allowances, agent=self.agent)

    def _go_on(self, thread: Thread) -> None:
        """Resume the thread's last run, asking first about the calls it waits on."""
        waiting = list(thread.requests)
        self._turn(
            lambda: self.agent.stream_resume(
                self.thread, decisions=self._ask(waiting) if waiting else None
            )
        )

    # -- commands ----------------------------------------------------------------

    def _command(self, line: str) -> bool:
        """Do a slash command; False to leave."""
        name, _, argument = line.partition(" ")
        argument = argument.strip()
        handlers: dict[str, Callable[[str], None]] = {
            "/help": self._help,
            "/model": self._model,
            "/mode": self._mode,
            "/cost": self._cost,
            "/todos": self._todos,
            "/allowed": self._allowed,
            "/compact": self._compact,
            "/retry": self._retry,
            "/threads": self._threads,
            "/clear": self._clear,
        }
        if name in ("/exit", "/quit"):
            return False
        handler = handlers.get(name)
        if handler is None:
            self.console.print(f"[yellow]No command {shown(name)}[/]; /help lists them.")
            return True
        try:
            handler(argument)
        except REFUSALS as exc:
            self.console.print(f"[bold red]error:[/] {_escape(str(exc))}")
        return True

    def _help(self, _: str) -> None:
        width = max(len(name) for name in COMMANDS)
        lines = [f"  {name:<{width}}  {_escape(what)}" for name, what in COMMANDS.items()]
        self.console.print(
            "Type a message for the agent. Esc or Ctrl-C stops its turn.\n" + "\n".join(lines),
            highlight=False,
        )

    def _model(self, model: str) -> None:
        if model:
            self._change("model", model, f"/model {model}")
        self.console.print(f"model: {self.loaded.settings.model}")

    def _mode(self, mode: str) -> None:
        if mode:
            self._change("mode", mode, f"/mode {mode}")
        current = self.loaded.settings.mode
        self.console.print(f"mode: {current} — {MODES[current]}")

    def _change(self, key: str, value: str, source: str) -> None:
        """Set one setting for the rest of the session, and rebuild the agent on it (a
        setting that cannot be used leaves the session as it was)."""
        self._build(changed(self.loaded, key, value, source))

    def _cost(self, _: str) -> None:
        thread = self._read_thread()
        spent = spending(thread.total_usage, thread.total_cost_usd)
        self.console.print(f"thread {self.thread}: {spent}", highlight=False)

    def _todos(self, _: str) -> None:
        todos = self._read_thread().todos
        if not todos:
            self.console.print("no todos yet")
        for todo in todos:
            self.console.print(f"  {TODO_MARKS[todo.status]} {_escape(todo.content)}")

    def _allowed(self, _: str) -> None:
        allowed = self.allowances
        items = [f"every {tool} call" for tool in sorted(allowed.tools)]
        items += [f"the command {' '.join(words)}" for words in allowed.commands]
        items += [f"the command {command!r} as written" for command in sorted(allowed.exact)]
        mode = self.loaded.settings.mode
        self.console.print(
            f"mode {mode}: {MODES[mode]}\n"
            + ("\n".join(f"  {_escape(item)}" for item in items) or "  nothing else allowed"),
            highlight=False,
        )

    def _compact(self, _: str) -> None:
        thread = self._read_thread()
        if not thread.exists:
            self.console.print("nothing to compact yet")
            return
        if thread.unfinished:
            self.console.print("the last turn stopped midway: /retry it or send a message first")
            return
        with self.console.status("compacting…"):
            done = self.runner.run(self.agent.acompact(self.thread))
        if not done:
            self.console.print("nothing to compact: only the latest exchange is left")
        for event in done:
            saved = f"; the full history is in {event.history_path}" if event.history_path else ""
            self.console.print(
                f"compacted ({event.how}): {event.tokens_before:,} → {event.tokens_after:,} "
                f"tokens{saved}",
                highlight=False,
            )

    def _retry(self, _: str) -> None:
        thread = self._read_thread()
        if not thread.resumable:
            self.console.print("nothing to retry: the last turn ended")
            return
        self._go_on(thread)

    def _threads(self, _: str) -> None:
        assert self.agent.checkpointer is not None
        self.runner.run(list_threads(self.agent.checkpointer, 10, as_json=False, mark=self.thread))

    def _clear(self, _: str) -> None:
        self.thread_id = _new_thread()
        self.console.print(f"new thread {self.thread}")

    # -- helpers -----------------------------------------------------------------

    def _build(self, loaded: Loaded | None = None) -> None:
        """The agent for `loaded` (default: the current settings), on a fresh workspace;
        the one before is closed once the new one is built."""
        loaded = loaded or self.loaded
        output = RichOutput(self.console)
        with contextlib.ExitStack() as stack:
            backend = stack.enter_context(workspace(loaded, self.directory, output))
            agent = build_agent(loaded, self.directory, output, backend, self.allowances)
            self.runner.run(agent.__aenter__())
            stack.callback(lambda: self.runner.run(agent.__aexit__(None, None, None)))
            self.agent = agent
            self.stack.close()
            self.stack, self.loaded = stack.pop_all(), loaded

    def _read_thread(self) -> Thread:
        assert self.agent.checkpointer is not None
        return self.runner.run(read_thread(self.agent.checkpointer, self.thread))

    def _greet(self, thread: Thread) -> None:
        settings = self.loaded.settings
        if thread.exists:
            opening = f"thread {self.thread} ({len(thread.messages)} messages)"
        else:
            opening = f"new thread {self.thread}"
        self.console.print(
            f"[bold]tether {__version__}[/] · {_escape(str(settings.model))} · "
            f"mode {settings.mode} · {opening}",
            highlight=False,
        )
        last = _last_exchange(thread)
        if last:
            self.console.print(last, markup=False, style="dim")
        if thread.unfinished and not thread.requests:
            self.console.print(
                "[yellow]Its last run stopped midway:[/] /retry goes on with it; "
                "a new message sets it aside."
            )
        self.console.print(
            "[dim]Type a message; /help lists the commands. Esc or Ctrl-C stops a turn, "
            "Ctrl-D leaves.[/]"
        )

    def _reader(self) -> Callable[[], str]:
        """A function that reads the next line: with editing and history on a terminal."""
        if not self.terminal:
            return _read_line
        try:
            from prompt_toolkit import PromptSession
            from prompt_toolkit.completion import WordCompleter
            from prompt_toolkit.history import FileHistory
        except ImportError:
            raise ConfigurationError(
                "a conversation on a terminal needs prompt_toolkit: pip install 'tether[cli]'"
            ) from None

        history = _history_file()
        session: PromptSession[str] = PromptSession(
            history=FileHistory(str(history)),
            completer=WordCompleter([name.split()[0] for name in COMMANDS], sentence=True),
            complete_while_typing=False,
        )
        return lambda: session.prompt("> ")


def _read_line() -> str:
    line = sys.stdin.readline()
    if not line:
        raise EOFError
    return line


def _new_thread() -> str:
    return f"thread_{uuid.uuid4().hex[:16]}"


def _history_file() -> Path:
    """What was typed, kept per user (never in the project, which a repository could
    have laid out to point somewhere else)."""
    base = os.environ.get("XDG_STATE_HOME") or str(Path.home() / ".local" / "state")
    folder = Path(base) / "tether"
    folder.mkdir(parents=True, exist_ok=True)
    return folder / "history"


def _last_exchange(thread: Thread) -> str:
    """The thread's last message from the person and the agent's last answer, cut short."""
    said = next((m.text for m in reversed(thread.messages) if isinstance(m, UserMessage)), "")
    answer = next(
        (m.text for m in reversed(thread.messages) if isinstance(m, AssistantMessage) and m.text),
        "",
    )
    lines = []
    for who, said_text in (("you", said), ("agent", answer)):
        text = " ".join(said_text.split())
        if text:
            lines.append(f"{who}: {shown(cut(text, 160))}")
    return "\n".join(lines)


def _escape(text: str) -> str:
    from rich.markup import escape  # as in _render: Rich is imported where it is used

    return escape(text)


async def _escapable(work: Coroutine[Any, Any, T], *, watch: bool) -> T:
    """Run `work`; on a terminal (`watch`), the Esc key stops it with `_Stopped`."""
    task = asyncio.ensure_future(work)
    if not watch:
        return await task
    pressed = False

    def on_key() -> None:
        nonlocal pressed
        with contextlib.suppress(OSError):
            if os.read(fd, 64) == _ESCAPE:  # alone: arrow keys send escape sequences
                pressed = True
                task.cancel()

    fd = sys.stdin.fileno()
    with _keys_one_by_one(fd):
        loop = asyncio.get_running_loop()
        loop.add_reader(fd, on_key)
        try:
            return await task
        except asyncio.CancelledError:
            if pressed:
                raise _Stopped from None
            raise
        finally:
            loop.remove_reader(fd)


@contextlib.contextmanager
def _keys_one_by_one(fd: int) -> Iterator[None]:
    """The terminal without line buffering or echo (Ctrl-C still interrupts)."""
    saved = termios.tcgetattr(fd)
    tty.setcbreak(fd)
    try:
        yield
    finally:
        termios.tcsetattr(fd, termios.TCSADRAIN, saved)
