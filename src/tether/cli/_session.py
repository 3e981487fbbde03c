"""The commands: building the agent from the settings, and driving its runs to the
terminal (`run`, `resume`), or reading its threads (`threads`, `show`, `delete`)."""

from __future__ import annotations

import argparse
import asyncio
import functools
import json
import os
import shutil
import stat
import sys
import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

from wcmatch import glob as wc

from tether.backends.errors import BackendError
from tether.backends.paths import clean
from tether.cli import EXIT_CODES, REFUSALS
from tether.cli._approve import ask
from tether.cli._config import Loaded, load
from tether.cli._render import JsonOutput, Output, QuietOutput, RichOutput
from tether.errors import ConfigurationError, TetherError

if TYPE_CHECKING:
    from tether.agent import Agent, RunResult
    from tether.approval import ApprovalRequest, Decision
    from tether.backends.base import Backend
    from tether.backends.hostfs import Root
    from tether.checkpoint.journal import Thread
    from tether.events import Event

__all__ = ["dispatch", "project_root"]

_SETTING_FLAGS = (
    "model",
    "max_cost",
    "max_steps",
    "timeout",
    "skills",
    "memory",
    "safe_paths",
    "sandbox",
)
# Never the agent's to touch, whatever the configured rules say: the run records, and git.
_PROTECTED = (
    ({"read", "write"}, ["/.tether/*.db", "/.tether/*.db-*"]),
    ({"write"}, ["/.git/**"]),
)
_GLOB = wc.GLOBSTAR | wc.BRACE | wc.DOTGLOB


def dispatch(options: argparse.Namespace) -> int:
    """Run the parsed command; its exit code."""
    output: Output | None = None
    try:
        directory = Path(options.directory).expanduser()
        if not directory.is_dir():
            raise ConfigurationError(f"{options.directory!r} is not a directory")
        directory = project_root(directory.resolve())
        flags = {k: getattr(options, k, None) for k in _SETTING_FLAGS}
        loaded = load(directory, os.environ, {k: v for k, v in flags.items() if v is not None})
        if options.command == "config":
            return _config(loaded, options.json)
        loaded = _trust(loaded, directory, options)
        if options.command in ("threads", "show", "delete"):
            from tether.cli._threads import command

            # Looking creates nothing: with no database yet, there are no threads.
            url = _checkpointer_url(loaded, directory, create=False)
            return command(options, url or "sqlite://:memory:")
        output = _output(options)
        return _run(options, loaded, directory, output)
    except REFUSALS as exc:
        if output is None:
            print(f"error: {exc}", file=sys.stderr)
        else:
            output.error(str(exc))
        return EXIT_CODES["usage"]


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
    if options.json:
        return JsonOutput()
    try:
        from rich.console import Console
    except ImportError:
        raise ConfigurationError(
            "the terminal output of tether needs Rich: pip install 'tether[cli]' (or use --json)"
        ) from None
    if options.quiet:
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


def build_agent(loaded: Loaded, directory: Path, output: Output, backend: Backend) -> Agent[str]:
    """The agent the settings describe, working on `directory` through `backend`."""
    from tether import Limits, create_agent
    from tether.backends.permissions import Rule
    from tether.capabilities.local_context import LocalContext
    from tether.models.resolve import OFFLINE_NOTICE, infer_model

    settings = loaded.settings
    assert settings.model is not None  # load() fills it in
    model = infer_model(settings.model)
    if model.provider == "local" and loaded.sources["model"].startswith("default"):
        output.notice(OFFLINE_NOTICE, dim=True)
    memory = settings.memory
    if memory is None:
        memory = _agents_file(directory)
    rules = [Rule(ops, paths, "deny") for ops, paths in _PROTECTED]  # type: ignore[arg-type]
    common: dict[str, Any] = {
        "limits": Limits(
            max_steps=settings.max_steps,
            max_cost_usd=settings.max_cost,
            timeout_seconds=settings.timeout,
        ),
        "backend": backend,
        "permissions": [*rules, *(r.rule() for r in settings.permissions)],
        "skills": settings.skills,
        "memory": memory,
        "capabilities": [LocalContext(directory)],
        "checkpointer": _checkpointer_url(loaded, directory),
    }
    # The gates may name only tools the agent has (the model's profile may leave some
    # out), so the tools are looked at first.
    tools = create_agent(model, **common)._plan.tools
    gates = {
        name: _gate(name, settings.safe_paths)
        for name, on in settings.interrupt_on.items()
        if on and name in tools
    }
    unknown = [n for n, on in settings.interrupt_on.items() if on and n not in tools]
    unknown = [n for n in unknown if n not in ("execute", "edit_file", "write_file")]
    if unknown:
        raise ConfigurationError(
            f"interrupt_on names {unknown}, which this agent does not have; its tools: "
            f"{', '.join(sorted(tools))}"
        )
    return create_agent(model, interrupt_on=gates, **common)


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


def _gate(tool: str, safe: list[str]) -> bool | dict[str, Any]:
    """Every call of `tool` waits, except file writes inside the safe paths."""
    if tool not in ("write_file", "edit_file") or not safe:
        return True

    def outside(args: Any) -> bool:
        try:  # matched in the form the backend will use: "/notes/../src" is not safe
            path = clean(args.get("file_path"))
        except BackendError:
            return True
        return not wc.globmatch(path, safe, flags=_GLOB)

    return {"when": outside}


def _backend(loaded: Loaded, directory: Path, output: Output) -> Backend:
    from tether.backends.filesystem import FilesystemBackend

    settings = loaded.settings
    wanted = settings.sandbox
    if wanted == "auto":
        if shutil.which("bwrap") is None:
            output.notice("no `execute`: bubblewrap is not installed", dim=True)
            return FilesystemBackend(directory)
        if os.geteuid() == 0 and directory.stat().st_uid == 0:
            output.notice(
                "no `execute`: root owns this directory, so the sandbox would lend it to the "
                "user nobody while it runs; --sandbox accepts that",
                dim=True,
            )
            return FilesystemBackend(directory)
    if not wanted:
        return FilesystemBackend(directory)
    from tether.backends.sandbox.local import LocalSandbox

    try:
        return LocalSandbox(directory, network=settings.network)
    except ConfigurationError:
        if settings.sandbox is True:
            raise
        output.notice("no `execute`: bubblewrap cannot make a sandbox here", dim=True)
        return FilesystemBackend(directory)


# -- running ---------------------------------------------------------------------


def _run(options: argparse.Namespace, loaded: Loaded, directory: Path, output: Output) -> int:
    _checkpointer_url(loaded, directory)  # .tether is made before a sandbox lends anything
    backend = _backend(loaded, directory, output)
    try:
        return _drive(options, build_agent(loaded, directory, output, backend), directory, output)
    finally:
        close = getattr(backend, "close", None)
        if close is not None:
            close()  # a sandbox gives the workspace back to its owners


def _drive(options: argparse.Namespace, agent: Agent[Any], directory: Path, output: Output) -> int:
    """Run or resume the thread the options name, asking about approvals on a terminal."""
    console = output.console
    interactive = console is not None and console.is_terminal and sys.stdin.isatty()
    to_ask: list[ApprovalRequest] = []  # asked first, where Ctrl-C is handled
    if options.command == "run":
        task = sys.stdin.read() if options.task == "-" else options.task
        thread_id = options.thread or f"thread_{uuid.uuid4().hex[:16]}"
        _check_startable(agent, thread_id)
        events = functools.partial(agent.stream, task, thread_id=thread_id)
    else:
        thread_id = options.thread
        thread = _thread(agent, thread_id)
        if not thread.exists:
            raise ConfigurationError(f"there is no thread {thread_id}; `tether threads` lists them")
        waiting = list(thread.requests)
        # Given twice (two terminals), the same flags answer the same calls: the second
        # is told they were decided, and never answers calls that came up since.
        decisions = _given_decisions(options, waiting or list(thread.asked_requests))
        if decisions is None and waiting:
            if console is None or not interactive:
                _explain_wait(waiting, thread_id, output)
                return EXIT_CODES["interrupted"]
            to_ask = waiting
        events = functools.partial(agent.stream_resume, thread_id, decisions=decisions)
    try:
        if to_ask and console is not None:
            answers = ask(to_ask, console, directory)
            events = functools.partial(agent.stream_resume, thread_id, decisions=answers)
        result = asyncio.run(_consume(events(), output))
        while result.stop_reason == "interrupted" and console is not None and interactive:
            decided = ask(list(result.interrupts), console, directory)
            result = asyncio.run(
                _consume(agent.stream_resume(thread_id, decisions=decided), output)
            )
    except KeyboardInterrupt:
        output.close()
        output.notice(f"Stopped. The thread is saved; continue it with: tether resume {thread_id}")
        return EXIT_CODES["cancelled"]
    except REFUSALS:
        raise  # a bad decision or setting, a busy thread, a broken database: one line
    except TetherError as exc:  # the run ended in an error
        output.error(str(exc))
        output.notice(
            f'The thread keeps what the run did; go on with: tether run --thread {thread_id} "..."'
        )
        return EXIT_CODES["error"]
    finally:
        output.close()
    return _ended(result, thread_id, output)


def _ended(result: RunResult[Any], thread_id: str, output: Output) -> int:
    """Say how to go on from a run that did not complete; the exit code."""
    if result.stop_reason == "interrupted":
        _explain_wait(list(result.interrupts), thread_id, output)
    elif result.stop_reason in ("budget", "timeout", "loop"):
        output.notice(_why_stopped(result.stop_reason, thread_id))
    return EXIT_CODES[result.stop_reason]


async def _consume(events: AsyncIterator[Event], output: Output) -> RunResult[Any]:
    """Show the events; the main run's result."""
    from tether.events import RunFinished

    found: RunResult[Any] | None = None
    async for event in events:
        output.event(event)
        if isinstance(event, RunFinished) and len(event.path) == 1:
            found = event.result
    assert found is not None, "a stream ends with the run's RunFinished"
    return found


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
    from tether.cli._approve import decisions_from_json

    try:
        text = sys.stdin.read() if options.decisions == "-" else Path(options.decisions).read_text()
        return decisions_from_json(json.loads(text))
    except (OSError, ValueError) as exc:
        raise ConfigurationError(f"cannot read the decisions: {exc}") from None


def _explain_wait(requests: list[ApprovalRequest], thread_id: str, output: Output) -> None:
    from tether.cli._render import call_line
    from tether.messages import ToolCall

    lines = [f"Waiting for approval of {len(requests)} call(s):"]
    for request in requests:
        args = request.args if isinstance(request.args, str) else dict(request.args)
        call = ToolCall(request.tool, args, id=request.call_id)
        lines.append(f"  {call_line(call)}")
    lines.append(
        f"Continue with: tether resume {thread_id} "
        "(on a terminal, or with --approve, --reject or --decisions FILE)"
    )
    output.notice("\n".join(lines))


def _why_stopped(reason: str, thread_id: str) -> str:
    what = {
        "budget": "a limit (--max-steps or --max-cost) was reached",
        "timeout": "the time limit (--timeout) was reached",
        "loop": "the agent kept repeating the same call",
    }[reason]
    return f'Stopped: {what}. Go on with: tether run --thread {thread_id} "continue"'
