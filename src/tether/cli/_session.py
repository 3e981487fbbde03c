"""The commands: building the agent from the settings, and driving its runs to the
terminal (`run`, `resume`), or reading its threads (`threads`, `show`, `delete`)."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import functools
import json
import os
import shutil
import signal
import stat
import sys
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from tether.backends.errors import BackendError
from tether.backends.paths import clean
from tether.cli import EXIT_CODES, REFUSALS
from tether.cli._approve import ask
from tether.cli._config import RECORDED, Loaded, load
from tether.cli._permissions import EDITS, Allowances, gates
from tether.cli._render import JsonOutput, Output, QuietOutput, RichOutput, declined
from tether.errors import ConfigurationError, TetherError

if TYPE_CHECKING:
    from tether.agent import Agent, RunResult
    from tether.approval import ApprovalRequest, Decision
    from tether.backends.base import Backend
    from tether.backends.hostfs import Root
    from tether.checkpoint.base import Checkpointer
    from tether.checkpoint.journal import Thread
    from tether.events import Event
    from tether.models.base import Model
    from tether.questions import Question

__all__ = [
    "Interrupted",
    "build_agent",
    "consume",
    "dispatch",
    "explain_wait",
    "project_root",
    "run_metadata",
    "workspace",
]

T = TypeVar("T")

_SETTING_FLAGS = (
    "model",
    "max_cost",
    "max_steps",
    "timeout",
    "skills",
    "memory",
    "safe_paths",
    "sandbox",
    "mode",
    "base_url",
)
# Never the agent's to touch, whatever the configured rules say: tether's own records
# (threads, the sandbox's records, .tether/.gitignore), and git.
_PROTECTED = (
    ({"read", "write"}, ["/.tether", "/.tether/**"]),
    ({"write"}, ["/.git/**"]),
)


def dispatch(options: argparse.Namespace) -> int:
    """Run the parsed command; its exit code."""
    output: Output | None = None
    try:
        directory = Path(options.directory).expanduser()
        if not directory.is_dir():
            raise ConfigurationError(f"{options.directory!r} is not a directory")
        directory = project_root(directory.resolve())
        flags = {k: getattr(options, k, None) for k in _SETTING_FLAGS}
        given = {k: v for k, v in flags.items() if v is not None}
        loaded = load(directory, os.environ, given)
        if options.command == "config":
            return _config(loaded, options.json)
        loaded = _trust(loaded, directory, options)
        if options.command in ("threads", "show", "delete"):
            from tether.cli._threads import command

            # Looking creates nothing: with no database yet, there are no threads.
            url = _checkpointer_url(loaded, directory, create=False)
            return command(options, url or "sqlite://:memory:")
        thread_id = _continued(options, loaded, directory)
        if thread_id is not None:  # the thread's own settings come before the flags
            recorded = _recorded(loaded, directory, thread_id)
            loaded = _trust(
                load(directory, os.environ, given, (thread_id, recorded)), directory, options
            )
        output = _output(options)
        if options.command == "serve":
            from tether.cli._serve import serve

            return serve(options, loaded, directory, output)
        if options.command == "chat":
            from tether.cli._chat import chat

            return chat(loaded, directory, thread_id, output)
        return _run(options, loaded, directory, output)
    except REFUSALS as exc:
        if output is None:
            print(f"error: {exc}", file=sys.stderr)
        else:
            output.error(str(exc))
        return EXIT_CODES["usage"]


def _continued(options: argparse.Namespace, loaded: Loaded, directory: Path) -> str | None:
    """The thread the command goes on with, if any: given, or the latest with `-c`."""
    if options.command == "chat" and options.latest:
        if options.thread:
            raise ConfigurationError("give a THREAD or --continue, not both")
        found = _threads_of(loaded, directory)
        if not found:
            raise ConfigurationError(
                "this project has no thread to continue yet: `tether` starts one"
            )
        return found[0]
    return getattr(options, "thread", None)


def _threads_of(loaded: Loaded, directory: Path) -> list[str]:
    """The project's thread ids, the latest first."""

    async def listed(checkpointer: Checkpointer) -> list[str]:
        return [info.thread_id for info in await checkpointer.threads()]

    return _reading(loaded, directory, listed) or []


def _recorded(loaded: Loaded, directory: Path, thread_id: str) -> dict[str, Any]:
    """The settings `thread_id` last ran with ({} for a new thread)."""
    from tether.checkpoint.journal import read_thread

    async def metadata(checkpointer: Checkpointer) -> dict[str, Any]:
        return (await read_thread(checkpointer, thread_id)).metadata

    found = (_reading(loaded, directory, metadata) or {}).get("cli")
    return dict(found) if isinstance(found, dict) else {}


def _reading(
    loaded: Loaded, directory: Path, read: Callable[[Checkpointer], Awaitable[T]]
) -> T | None:
    """What `read` finds in the run records; None when there are none yet."""
    from tether.checkpoint.base import open_checkpointer

    url = _checkpointer_url(loaded, directory, create=False)
    if url is None:
        return None

    async def opened() -> T:
        checkpointer = open_checkpointer(url)
        try:
            return await read(checkpointer)
        finally:
            await checkpointer.close()

    return asyncio.run(opened())


def run_metadata(loaded: Loaded) -> dict[str, Any]:
    """What a run records of its settings, for the next run on its thread."""
    settings = loaded.settings.model_dump(mode="json")
    return {"cli": {key: settings[key] for key in RECORDED}}


def project_root(start: Path) -> Path:
    """The project `start` is in: the nearest directory at or above it with a
    `tether.toml` or a `.git`, else `start` itself. The search stops below the home
    directory and `/`, so a home kept in git never becomes every project's root."""
    stops = {Path.home().resolve(), Path(start.anchor)}
    for directory in (start, *start.parents):
        if directory in stops and directory != start:
            break
        if any(os.path.lexists(directory / name) for name in ("tether.toml", ".git")):
            return directory
    return start


def _trust(loaded: Loaded, directory: Path, options: argparse.Namespace) -> Loaded:
    from tether.cli._trust import ask_on_terminal, trusted

    terminal = sys.stdin.isatty() and sys.stderr.isatty()
    return trusted(
        loaded,
        directory,
        given=bool(getattr(options, "trust", False)),
        ask=ask_on_terminal if terminal else None,
    )


def _output(options: argparse.Namespace) -> Output:
    if getattr(options, "json", False):
        return JsonOutput()
    try:
        from rich.console import Console
    except ImportError:
        raise ConfigurationError(
            "the terminal output of tether needs Rich: pip install 'tether[cli]' (or use --json)"
        ) from None
    if getattr(options, "quiet", False):
        return QuietOutput(Console(stderr=True, highlight=False))
    return RichOutput(Console(highlight=False))


# -- config ---------------------------------------------------------------------


def _config(loaded: Loaded, as_json: bool) -> int:
    from tether.cli._trust import describe, needs_trust

    values = loaded.settings.model_dump(mode="json")
    untrusted = needs_trust(loaded)
    if as_json:
        print(
            json.dumps(
                {
                    "file": str(loaded.file) if loaded.file else None,
                    "settings": values,
                    "sources": loaded.sources,
                    "needs_trust": sorted(untrusted),
                },
                indent=2,
            )
        )
        return 0
    from tether.cli._config import user_file

    mine = user_file(os.environ)
    print(f"# user file: {mine}{'' if mine.is_file() else ' (none)'}")
    print(
        f"# project file: {loaded.file or 'none (tether.toml or [tool.tether] in pyproject.toml)'}"
    )
    for key, value in values.items():
        line = f"{key} = {json.dumps(value)}"
        trust = ", needs your trust" if key in untrusted else ""
        print(f"{line:<48} # {loaded.sources[key]}{trust}")
    if untrusted:
        print(f"# the project file {describe(untrusted)}: a run asks you to trust that first")
    return 0


# -- building the agent ----------------------------------------------------------


def _checkpointer_url(loaded: Loaded, directory: Path, *, create: bool = True) -> str | None:
    """The checkpointer URL, a relative SQLite path made relative to the project; None
    when `create` is false and that SQLite database does not exist yet.

    A project could ship `.tether` as a symlink to put the run records (and what a
    resumed run trusts) elsewhere: the directory and the file must be plain ones.
    """
    url = loaded.settings.checkpointer
    if url.startswith("sqlite:///") and not url.startswith("sqlite:////"):
        relative = url.removeprefix("sqlite:///")
        if not _plain_database(directory, relative, create=create):
            return None
        return f"sqlite:///{(directory / relative).as_posix()}"
    return url


def _ignored_by_git(host: Root) -> None:
    """`.tether/.gitignore` ignoring everything in it, unless the directory has one."""
    try:
        fd = host.open("/.tether/.gitignore", os.O_WRONLY | os.O_CREAT | os.O_EXCL)
    except FileExistsError:
        return
    with os.fdopen(fd, "w") as file:
        file.write("# tether's run records, made by tether: never committed\n*\n")


def _plain_database(directory: Path, relative: str, *, create: bool) -> bool:
    """Whether the database can be opened (it exists, or `create`), its way checked."""
    from tether.backends.hostfs import Root

    if any(part.casefold() == ".git" for part in relative.split("/")):
        raise ConfigurationError(f"the run records cannot be kept in git's own files ({relative})")
    try:
        path = clean(relative)
        host = Root(directory)
        parent = path.rsplit("/", 1)[0] or "/"
        os.close(host.make_dirs(parent) if create else host.open_dir(parent))
        if create and parent == "/.tether":
            _ignored_by_git(host)
        # SQLite opens its journal files beside the database by name too.
        found = {suffix: host.lstat(path + suffix) for suffix in ("", "-wal", "-shm", "-journal")}
    except FileNotFoundError:
        if create:
            raise
        return False
    except (BackendError, OSError) as exc:
        raise ConfigurationError(
            f"the run records {relative} cannot be kept in the project ({exc}); a directory "
            "on the way is a symbolic link or not a directory"
        ) from None
    for suffix, there in found.items():
        if there is not None and not stat.S_ISREG(there.st_mode):
            raise ConfigurationError(
                f"the run records' {relative + suffix} in the project is not a regular file "
                "(a symbolic link?); remove it or set checkpointer elsewhere"
            )
    return create or found[""] is not None


_PLAN_PROMPT = (
    "Plan mode: the user wants a plan before any change. Read and search as much as you "
    "need, but write no file and run no command (both are refused); end with a concrete, "
    "numbered plan of the changes you would make, and the files each one touches."
)


def build_agent(
    loaded: Loaded,
    directory: Path,
    output: Output,
    backend: Backend,
    allowances: Allowances | None = None,
) -> Agent[str]:
    """The agent the settings describe, working on `directory` through `backend`; the
    calls `allowances` covers run without a question."""
    from wcmatch.glob import escape

    from tether import Limits, Price, SubAgent, create_agent
    from tether.backends.composite import CompositeBackend
    from tether.backends.permissions import Rule
    from tether.capabilities.local_context import LocalContext
    from tether.capabilities.sandbox import CommandPolicy
    from tether.mcp import MCPServer
    from tether.models.resolve import OFFLINE_NOTICE

    settings = loaded.settings
    assert settings.model is not None  # load() fills it in
    model = _model(settings.model, loaded)
    if model.provider == "local" and loaded.sources["model"].startswith("default"):
        output.notice(OFFLINE_NOTICE, dim=True)
    memory = settings.memory
    if memory is None:
        memory = _agents_file(directory)
    rules = [Rule(ops, paths, "deny") for ops, paths in _PROTECTED]  # type: ignore[arg-type]
    database = settings.checkpointer.removeprefix("sqlite:///")
    if database != settings.checkpointer and not database.startswith("/"):  # in the project
        where = escape(clean(database))
        rules.append(Rule(["read", "write"], [where, where + "-*"], "deny"))
    if settings.mode == "plan":
        rules.append(Rule(["write"], ["/**"], "deny"))
    prompt = [settings.system_prompt, _PLAN_PROMPT if settings.mode == "plan" else None]
    common: dict[str, Any] = {
        "limits": Limits(
            max_steps=settings.max_steps,
            max_cost_usd=settings.max_cost,
            timeout_seconds=settings.timeout,
        ),
        "backend": CompositeBackend(backend, _working_files(directory)),
        "permissions": [*rules, *(r.rule() for r in settings.permissions)],
        "skills": settings.skills,
        "memory": memory,
        "capabilities": [LocalContext(directory)],
        "checkpointer": _checkpointer_url(loaded, directory),
        "system_prompt": "\n\n".join(p for p in prompt if p) or None,
        "prices": {name: Price(**price.model_dump()) for name, price in settings.prices.items()},
        "mcp_servers": [  # a command starts in the project, as `execute`'s do
            MCPServer(**server.model_dump(), cwd=str(directory) if server.command else None)
            for server in settings.mcp_servers
            if settings.mode != "plan"  # their tools may change anything
        ],
        "subagents": [
            SubAgent(
                s.name,
                s.description,
                system_prompt=s.prompt,
                tools=s.tools,
                model=None if s.model is None else _model(s.model, loaded),
            )
            for s in settings.subagents
        ],
        "command_policy": CommandPolicy(deny=settings.commands.deny)
        if settings.commands.deny and hasattr(backend, "execute")
        else None,
    }
    # The gates may name only tools the agent has (the model's profile may leave some
    # out), so the tools are looked at first.
    tools = set(create_agent(model, **common)._plan.tools)
    unknown = [n for n, on in settings.interrupt_on.items() if on and n not in tools]
    unknown = [n for n in unknown if n not in ("execute", *EDITS)]
    if unknown:
        raise ConfigurationError(
            f"interrupt_on names {unknown}, which this agent does not have; its tools: "
            f"{', '.join(sorted(tools))}"
        )
    allowed = allowances if allowances is not None else Allowances.of(settings)
    return create_agent(model, interrupt_on=gates(settings, tools, allowed), **common)


def _model(spec: str, loaded: Loaded) -> Model:
    """The model `spec` names, asked at the settings' `base_url` when one is set."""
    from tether.models.resolve import infer_model, parse_model

    url = loaded.settings.base_url
    if url is None:
        return infer_model(spec)
    provider, name = parse_model(spec)
    if provider == "anthropic":
        from tether.models.anthropic import AnthropicModel

        return AnthropicModel(name, base_url=url)
    if provider in ("openai", "openai-chat"):
        from tether.models.openai import OpenAIModel

        return OpenAIModel(name, base_url=url, api="chat" if provider == "openai-chat" else None)
    raise ConfigurationError(
        f"base_url ({loaded.sources['base_url']}) is where an anthropic:, openai: or "
        f"openai-chat: model is asked, not a {provider}: one"
    )


def _working_files(directory: Path) -> dict[str, Backend]:
    """The agent's own files (large tool results, the history compaction saves) routed
    to `.tether/`, out of the user's tree and out of every sandboxed command's reach."""
    from tether.backends.filesystem import FilesystemBackend
    from tether.backends.hostfs import Root
    from tether.capabilities.compaction import HISTORY_DIR
    from tether.capabilities.eviction import EVICTION_DIR

    routes: dict[str, Backend] = {}
    for route in (EVICTION_DIR, HISTORY_DIR):
        inside = f"/.tether{route}"
        try:  # made without following a link: a repository could plant one there
            os.close(Root(directory).make_dirs(inside))
        except (BackendError, OSError) as exc:
            raise ConfigurationError(
                f"the agent's working directory {inside} cannot be made in the project "
                f"({exc}); a directory on the way is a symbolic link or not a directory"
            ) from None
        routes[route] = FilesystemBackend(directory / inside.lstrip("/"))
    return routes


def _agents_file(directory: Path) -> list[str]:
    """The project's AGENTS.md as memory, when it has one: where a symlink in the
    project (`AGENTS.md -> CLAUDE.md`) points, since links are not followed."""
    from tether.backends.hostfs import Root

    host = Root(directory)
    found = host.lstat("/AGENTS.md")
    if found is None:
        return []
    if stat.S_ISREG(found.st_mode):
        return ["/AGENTS.md"]
    link = host.link_in("/AGENTS.md")
    if link is None or link.target is None:
        return []
    try:  # the target itself must be a plain file, reached with no link on the way
        target = host.lstat(link.target)
    except OSError:
        return []
    return [link.target] if target is not None and stat.S_ISREG(target.st_mode) else []


def _backend(loaded: Loaded, directory: Path, output: Output) -> Backend:
    from tether.backends.filesystem import FilesystemBackend

    settings = loaded.settings
    wanted = settings.sandbox
    if settings.mode == "plan":  # nothing runs
        return FilesystemBackend(directory)
    if wanted == "auto" and shutil.which("bwrap") is None:
        output.notice("no `execute`: bubblewrap is not installed", dim=True)
        return FilesystemBackend(directory)
    if not wanted:
        return FilesystemBackend(directory)
    from tether.backends.sandbox.local import LocalSandbox

    try:
        return LocalSandbox(directory, network=settings.network)
    except ConfigurationError as why:
        if settings.sandbox is True:
            raise
        output.notice(f"no `execute`: {why}", dim=True)  # why the sandbox cannot run here
        return FilesystemBackend(directory)


# -- running ---------------------------------------------------------------------


def _run(options: argparse.Namespace, loaded: Loaded, directory: Path, output: Output) -> int:
    with workspace(loaded, directory, output) as backend:
        agent = build_agent(loaded, directory, output, backend)
        return _drive(options, agent, run_metadata(loaded), directory, output)


@contextlib.contextmanager
def workspace(loaded: Loaded, directory: Path, output: Output) -> Iterator[Backend]:
    """The backend the settings ask for, closed at the end."""
    _checkpointer_url(loaded, directory)  # .tether is made before the sandbox hides it
    backend = _backend(loaded, directory, output)
    try:
        yield backend
    finally:
        close = getattr(backend, "close", None)
        if close is not None:
            close()


def _drive(
    options: argparse.Namespace,
    agent: Agent[Any],
    metadata: dict[str, Any],
    directory: Path,
    output: Output,
) -> int:
    """Run or resume the thread the options name, asking about approvals on a terminal."""
    console = output.console
    interactive = console is not None and console.is_terminal and sys.stdin.isatty()
    to_ask: list[ApprovalRequest] = []  # asked first, where Ctrl-C is handled
    if options.command == "run":
        task = sys.stdin.read() if options.task == "-" else options.task
        thread_id = options.thread or f"thread_{uuid.uuid4().hex[:16]}"
        _check_startable(agent, thread_id)
        events = functools.partial(agent.stream, task, thread_id=thread_id, metadata=metadata)
    else:
        thread_id = options.thread
        thread, decisions = _resumable(options, agent, thread_id)
        waiting = list(thread.requests)
        if decisions is None and waiting:
            if console is None or not interactive:
                explain_wait(waiting, thread_id, output)
                return EXIT_CODES["interrupted"]
            to_ask = waiting
        events = functools.partial(agent.stream_resume, thread_id, decisions=decisions)
    try:
        if to_ask and console is not None:
            answers = ask(to_ask, console, directory, agent=agent)
            events = functools.partial(agent.stream_resume, thread_id, decisions=answers)
        result = asyncio.run(consume(events(), output))
        while result.stop_reason == "interrupted" and console is not None and interactive:
            decided = ask(list(result.interrupts), console, directory, agent=agent)
            result = asyncio.run(consume(agent.stream_resume(thread_id, decisions=decided), output))
    except (KeyboardInterrupt, Interrupted):
        output.close()
        output.notice(f"Stopped. The thread is saved; continue it with: tether resume {thread_id}")
        return EXIT_CODES["cancelled"]
    except REFUSALS:
        raise  # a bad decision or setting, a busy thread, a broken database: one line
    except TetherError as exc:  # the run ended in an error
        output.error(str(exc))
        output.notice(_failed(thread_id))
        return EXIT_CODES["error"]
    finally:
        output.close()
    return _ended(result, thread_id, output)


def _failed(thread_id: str) -> str:
    """How to go on from a run that ended in an error."""
    return (
        f"The thread keeps what the run did. Try the run again from its last step with: "
        f'tether resume {thread_id}, or go on with: tether run --thread {thread_id} "..."'
    )


def _ended(result: RunResult[Any], thread_id: str, output: Output) -> int:
    """Say how to go on from a run that did not complete; the exit code."""
    if result.stop_reason == "interrupted":
        explain_wait(list(result.interrupts), thread_id, output)
    elif result.stop_reason in ("budget", "timeout", "loop"):
        output.notice(_why_stopped(result.stop_reason, thread_id))
    elif declined(result.output):
        return EXIT_CODES["declined"]
    return EXIT_CODES[result.stop_reason]


class Interrupted(Exception):
    """Ctrl-C stopped a run."""


async def consume(events: AsyncIterator[Event], output: Output) -> RunResult[Any]:
    """Show the events; the main run's result. Ctrl-C stops the run with `Interrupted`."""
    from tether.events import RunFinished

    found: RunResult[Any] | None = None
    with _ctrl_c_stops(asyncio.current_task()) as pressed:
        try:
            async for event in events:
                output.event(event)
                if isinstance(event, RunFinished) and len(event.path) == 1:
                    found = event.result
        except asyncio.CancelledError:
            if pressed:
                raise Interrupted from None
            raise
    assert found is not None, "a stream ends with the run's RunFinished"
    return found


@contextlib.contextmanager
def _ctrl_c_stops(task: asyncio.Task[Any] | None) -> Iterator[list[bool]]:
    """Ctrl-C cancels `task`; what it yields is true once it did. The loop's own handler
    wakes the loop whichever thread the signal lands on (a worker's, a child watcher's);
    asyncio.run's notices it only when the loop next wakes, which can be the run's end."""
    pressed: list[bool] = []
    loop = asyncio.get_running_loop()

    def stop() -> None:
        pressed.append(True)
        if task is not None:
            task.cancel()

    try:
        loop.add_signal_handler(signal.SIGINT, stop)
    except (NotImplementedError, RuntimeError, ValueError):  # not the main thread
        yield pressed
        return
    try:
        yield pressed
    finally:
        loop.remove_signal_handler(signal.SIGINT)


def _resumable(
    options: argparse.Namespace, agent: Agent[Any], thread_id: str
) -> tuple[Thread, list[Decision] | dict[str, Decision] | None]:
    """The thread `tether resume` goes on with and the decisions given for it, or why it
    cannot, in the command's words."""
    thread = _thread(agent, thread_id)
    if not thread.exists:
        raise ConfigurationError(f"there is no thread {thread_id}; `tether threads` lists them")
    # Given twice (two terminals), the same flags answer the same calls: the second is
    # told they were decided, and never answers calls that came up since.
    decisions = _given_decisions(options, list(thread.requests or thread.asked_requests))
    if decisions is None and not thread.resumable:
        raise ConfigurationError(
            f"thread {thread_id} has nothing to resume: its last run ended "
            f"({thread.stop_reason}); go on with: tether chat {thread_id}, or "
            f'tether run --thread {thread_id} "..."'
        )
    return thread, decisions


def _check_startable(agent: Agent[Any], thread_id: str) -> None:
    thread = _thread(agent, thread_id)
    if thread.unfinished:
        raise ConfigurationError(
            f"thread {thread_id} has a run that did not finish "
            f"({thread.stop_reason or 'stopped'}); continue it with: tether resume {thread_id}"
        )


def _thread(agent: Agent[Any], thread_id: str) -> Thread:
    from tether.checkpoint.journal import read_thread

    assert agent.checkpointer is not None  # build_agent always gives one
    return asyncio.run(read_thread(agent.checkpointer, thread_id))


def _given_decisions(
    options: argparse.Namespace, waiting: list[ApprovalRequest]
) -> list[Decision] | dict[str, Decision] | None:
    """The decisions given with --approve, --reject or --decisions, if any."""
    from tether.approval import Approve, Reject

    if options.approve:
        return {r.call_id: Approve() for r in waiting}
    if options.reject is not None:
        return {r.call_id: Reject(options.reject) for r in waiting}
    if options.decisions is None:
        return None
    from tether.approval import decisions_from_json

    try:
        text = sys.stdin.read() if options.decisions == "-" else Path(options.decisions).read_text()
        return decisions_from_json(json.loads(text))
    except (OSError, ValueError) as exc:
        raise ConfigurationError(f"cannot read the decisions: {exc}") from None


def explain_wait(requests: list[ApprovalRequest], thread_id: str, output: Output) -> None:
    from tether.cli._render import request_line

    lines = [f"Waiting for approval of {len(requests)} call(s):"]
    for request in requests:
        lines.append(f"  {request_line(request)}")
        if request.question is not None:  # a server's question, with its form
            lines += question_lines(request.question)
    lines.append(
        f"Continue with: tether resume {thread_id} "
        "(on a terminal, or with --approve, --reject or --decisions FILE)"
    )
    if any(request.question is not None for request in requests):
        lines.append(
            'A question is answered with --decisions FILE holding {"kind": "answer", '
            '"content": {field: value}} (or "action": "decline" or "cancel")'
        )
    output.notice("\n".join(lines))


def question_lines(question: Question) -> list[str]:
    """A server's question as lines under its call: who asks, what, and the form."""
    from tether.cli._questions import describe_field
    from tether.cli._render import shown

    said = shown(question.message, keep="\n").replace("\n", "\n      ")
    lines = [f"    {shown(question.asker)} asks: {said}"]
    lines += [f"      {describe_field(*field)}" for field in question.fields]
    return lines


def _why_stopped(reason: str, thread_id: str) -> str:
    what = {
        "budget": "a limit (--max-steps or --max-cost) was reached",
        "timeout": "the time limit (--timeout) was reached",
        "loop": "the agent kept repeating the same call",
    }[reason]
    return f'Stopped: {what}. Go on with: tether run --thread {thread_id} "continue"'
