"""The `tether` command: run a deep agent on a project from the terminal.

    tether                      a conversation on a new thread (`tether -c`: the latest)
    tether run "read this repository and write NOTES.md summarizing its layout"
    tether threads | tether show THREAD | tether resume THREAD | tether config
    tether worker --app agents | tether enqueue NAME TASK | tether status THREAD

Only argparse loads before a command runs, so `tether --help` starts fast; the agent,
Rich and the model's SDK load when a command needs them.
"""

from __future__ import annotations

import argparse
import os
import sys
import warnings
from collections.abc import Sequence
from typing import Any

from tether import __version__
from tether.errors import (
    AlreadyDecidedError,
    ConfigurationError,
    CostUnknownWarning,
    StorageError,
    ThreadBusyError,
)

__all__ = ["EXIT_CODES", "REFUSALS", "main"]

EXIT_CODES = {
    "completed": 0,
    "error": 1,
    "usage": 2,
    "interrupted": 3,
    "budget": 4,
    "timeout": 4,
    "loop": 4,
    "content_filter": 1,
    "declined": 5,
    "cancelled": 130,
    "closed": 141,
}
"""What the command exits with, by how the run ended ("usage": a bad command or setting;
"declined": the offline model answered that it cannot do the request)."""

REFUSALS = (ConfigurationError, StorageError, ThreadBusyError, AlreadyDecidedError)
"""What the command says in one line, with the "usage" code: a bad command or setting,
a thread another run holds, decisions already given, a database that cannot be used."""

_EPILOG = """\
exit codes: 0 done, 1 the run failed, 2 bad command or configuration, a busy thread
or an unusable database,
3 waiting for approval (see `tether resume`), 4 stopped by a limit, 130 Ctrl-C,
141 the output was closed early (as by `| head`).
Settings come from tether.toml (or [tool.tether] in pyproject.toml), then TETHER_*
environment variables, then flags: `tether config` shows them and where each came from."""


_DIRECTORY = "work on the project in DIR instead of the current directory"


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line `argv` (default: `sys.argv[1:]`); the exit code."""
    options = _parser().parse_args(_with_command(sys.argv[1:] if argv is None else argv))
    warnings.showwarning = _one_line
    try:
        code = _dispatch(options)
        sys.stdout.flush()  # inside the try: a reader that left is seen here
        return code
    except KeyboardInterrupt:  # before a run started: nothing to save
        print(file=sys.stderr)
        return EXIT_CODES["cancelled"]
    except BrokenPipeError:
        # The reader went away (`tether threads | head -1`): stop quietly, as git does.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return EXIT_CODES["closed"]


def _with_command(argv: Sequence[str]) -> list[str]:
    """`argv` with the command it means: `tether`, `tether -c` and `tether --model X`
    open a conversation."""
    given = list(argv)
    if not any(word in _COMMANDS or word in ("-h", "--help", "--version") for word in given):
        given.insert(0, "chat")
    return _sandbox_words(given)


def _sandbox_words(argv: list[str]) -> list[str]:
    """`--sandbox container` as one word, and a bare `--sandbox` as the flag it was
    before it took a value: `tether run --sandbox "fix the tests"` keeps its task."""
    words: list[str] = []
    for index, word in enumerate(argv):
        if word == "--sandbox" and "--" not in argv[:index]:
            following = argv[index + 1] if index + 1 < len(argv) else None
            words.append("--sandbox=" + ("container" if following == "container" else "bwrap"))
        elif not (word == "container" and words[-1:] == ["--sandbox=container"]):
            words.append(word)
    return words


def _one_line(message: Warning | str, *_: Any, **__: Any) -> None:
    """A warning as a person reads it: one line, without Python's file and line, in
    the command's words."""
    if isinstance(message, CostUnknownWarning):
        message = (
            f"--max-cost is set, but the price of {message.model} is unknown, so its cost "
            f'counts as zero; give it in tether.toml: [prices."{message.model}"] '
            "input_per_mtok = ..., output_per_mtok = ... (US dollars per million tokens)"
        )
    print(f"warning: {message}", file=sys.stderr)


def _dispatch(options: argparse.Namespace) -> int:
    # Imported here, so that `tether --help` loads argparse alone (see the docstring).
    if options.command in _DURABLE:
        from tether.cli._durable import command

        return command(options)
    from tether.cli._commands import dispatch

    return dispatch(options)


_DURABLE = ("worker", "enqueue", "status", "decide")
_COMMANDS = ("chat", "run", "resume", "threads", "show", "delete", "config", "serve", *_DURABLE)


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="tether",
        description="Run a long-running LLM agent on the project in this directory.",
        epilog=_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action="version", version=f"tether {__version__}")
    parser.add_argument(
        "-C",
        dest="directory",
        default=".",
        metavar="DIR",
        help=_DIRECTORY,
    )
    commands = parser.add_subparsers(dest="command", metavar="COMMAND")

    chat = commands.add_parser(
        "chat",
        help="a conversation with the agent (what `tether` alone starts)",
        description="Talk with the agent: each line you type is the next message. Esc or "
        "Ctrl-C stops the agent's turn; Ctrl-D or /exit leaves; /help lists the commands.",
    )
    chat.add_argument("thread", metavar="THREAD", nargs="?", help="continue this thread")
    chat.add_argument(
        "-c",
        "--continue",
        dest="latest",
        action="store_true",
        help="continue the project's latest thread",
    )
    _setting_options(chat)

    run = commands.add_parser(
        "run", help="run the agent on a task", description="Run the agent on a task."
    )
    run.add_argument("task", help="what to do; '-' reads it from standard input")
    run.add_argument("--thread", metavar="ID", help="continue this thread (or start it)")
    _agent_options(run)

    resume = commands.add_parser(
        "resume",
        help="continue a thread's stopped run",
        description="Continue a run that waits for approval, was stopped with Ctrl-C, or "
        "was killed. On a terminal you are asked about each waiting call; elsewhere, "
        "decide with --approve, --reject or --decisions.",
    )
    resume.add_argument("thread", metavar="THREAD")
    _decision_options(resume)
    _agent_options(resume)

    threads = commands.add_parser("threads", help="list the threads, the newest first")
    _trust_option(threads)
    threads.add_argument("--limit", type=int, default=20, help="show at most this many")
    threads.add_argument("--json", action="store_true", help="one JSON object per thread")

    show = commands.add_parser("show", help="print a thread's conversation")
    _trust_option(show)
    show.add_argument("thread", metavar="THREAD")
    show.add_argument("--json", action="store_true", help="the messages as JSON")

    delete = commands.add_parser("delete", help="delete a thread's record")
    _trust_option(delete)
    delete.add_argument("thread", metavar="THREAD")

    serve = commands.add_parser(
        "serve",
        help="serve the agent over HTTP, with a page to watch runs and approve calls",
        description="Serve the project's agent (or the agents APP names) over HTTP: an "
        "AG-UI API and a web page. Every request needs the token printed at start "
        "(--token or $TETHER_SERVE_TOKEN sets it).",
    )
    serve.add_argument(
        "app",
        metavar="APP",
        nargs="?",
        help="module:attribute holding an Agent or a mapping of names to agents "
        "(default: the agent this project's settings describe)",
    )
    serve.add_argument("--host", default="127.0.0.1", help="the address to listen on")
    serve.add_argument("--port", type=int, default=8321, help="the port (default 8321)")
    serve.add_argument("--token", help="the token requests must carry (default: a new one)")
    serve.add_argument(
        "--cors",
        action="append",
        metavar="ORIGIN",
        help="let pages of this origin call the API (repeatable; none by default)",
    )
    _setting_options(serve)

    config = commands.add_parser(
        "config", help="print the effective settings and where each came from"
    )
    config.add_argument("--json", action="store_true", help="as a JSON object")
    _setting_options(config)
    _durable_commands(commands)
    for command in commands.choices.values():  # `tether run -C DIR ...` works too
        command.add_argument(
            "-C", dest="directory", default=argparse.SUPPRESS, metavar="DIR", help=_DIRECTORY
        )
    return parser


def _durable_commands(commands: Any) -> None:
    """Durable runs on DBOS workers sharing one Postgres (extra tether[dbos])."""
    worker = commands.add_parser(
        "worker",
        help="work on durable runs (DBOS + Postgres)",
        description="Import the apps, which construct DurableAgents, and run their queued "
        "runs until SIGTERM or Ctrl-C. A worker that restarts with the same --executor-id "
        "recovers the runs it had in progress.",
    )
    worker.add_argument(
        "--app",
        action="append",
        required=True,
        metavar="MODULE[:NAME]",
        help="a module that constructs DurableAgents (repeatable); found from -C DIR too",
    )
    worker.add_argument(
        "--queue", action="append", metavar="NAME", help="serve only this agent (repeatable)"
    )
    worker.add_argument(
        "--executor-id",
        metavar="ID",
        help="this worker's name, unique and the same across its restarts (default: host name)",
    )
    worker.add_argument(
        "--app-version", metavar="V", help="recover only runs of this version (default: tether's)"
    )
    enqueue = commands.add_parser("enqueue", help="queue a durable run for a worker")
    enqueue.add_argument("name", metavar="NAME", help="the DurableAgent's name (its queue)")
    enqueue.add_argument("task", help="what to do; '-' reads it from standard input")
    enqueue.add_argument("--thread", metavar="ID", help="the thread to run on (default: new)")
    enqueue.add_argument("--key", metavar="KEY", help="an idempotency key: enqueue once per key")
    enqueue.add_argument(
        "--wait", action="store_true", help="wait until the run ends or waits for a decision"
    )
    enqueue.add_argument("--json", action="store_true", help="print JSON")
    status = commands.add_parser("status", help="where a thread's latest durable run is")
    status.add_argument("thread", metavar="THREAD")
    status.add_argument("--json", action="store_true", help="print JSON")
    decide = commands.add_parser(
        "decide", help="answer the calls a durable run waits on; a worker continues it"
    )
    decide.add_argument("thread", metavar="THREAD")
    _decision_options(decide)
    for command in (worker, enqueue, status, decide):
        command.add_argument(
            "--database",
            metavar="URL",
            help="the Postgres database (default: $TETHER_DATABASE_URL)",
        )
        command.add_argument(
            "--schema", default="dbos", help="the schema of DBOS's tables (default: dbos)"
        )


def _decision_options(command: argparse.ArgumentParser) -> None:
    decide = command.add_mutually_exclusive_group()
    decide.add_argument("--approve", action="store_true", help="approve every waiting call")
    decide.add_argument(
        "--reject", metavar="REASON", nargs="?", const="", help="reject every waiting call"
    )
    decide.add_argument(
        "--decisions",
        metavar="FILE",
        help="decisions as JSON ('-' for standard input): a list in the order of the "
        'waiting calls, or an object by call id, of {"kind": "approve"}, '
        '{"kind": "edit", "args": {...}}, {"kind": "reject", "message": "..."} or '
        '{"kind": "respond", "message": "..."}',
    )


def _agent_options(command: argparse.ArgumentParser) -> None:
    _setting_options(command)
    output = command.add_mutually_exclusive_group()
    output.add_argument(
        "--json", action="store_true", help="print one JSON event per line, for scripts"
    )
    output.add_argument("-q", "--quiet", action="store_true", help="print only the answer")


def _trust_option(command: argparse.ArgumentParser) -> None:
    command.add_argument(
        "--trust",
        action="store_true",
        help="accept this project's settings that weaken approvals or move the run records, "
        "for this run (a terminal asks once instead)",
    )


def _setting_options(command: argparse.ArgumentParser) -> None:
    _trust_option(command)
    add = command.add_argument
    add("--model", metavar="PROVIDER:MODEL", help="e.g. anthropic:claude-sonnet-4-5")
    add(
        "--base-url",
        metavar="URL",
        help="ask the model at this URL (an OpenAI-compatible server: --model openai-chat:NAME)",
    )
    mode = command.add_mutually_exclusive_group()
    mode.add_argument(
        "--mode",
        choices=("ask", "accept-edits", "plan", "yes"),
        help="ask: writes and commands wait for approval (default); accept-edits: writes "
        "do not; plan: read-only, the agent proposes a plan; yes: nothing waits",
    )
    mode.add_argument(
        "-y", "--yes", dest="mode", action="store_const", const="yes", help="same as --mode yes"
    )
    add("--max-cost", type=float, metavar="USD", help="stop when the run has cost this much")
    add("--max-steps", type=int, metavar="N", help="stop after N model calls (default 200)")
    add("--timeout", type=float, metavar="SECONDS", help="stop after this long")
    add(
        "--image",
        metavar="IMAGE",
        help="the container's image, or a directory holding a root file system (podman)",
    )
    add("--skills", action="append", metavar="DIR", help="a skills directory (repeatable)")
    add("--memory", action="append", metavar="FILE", help="a memory file (repeatable)")
    add(
        "--safe",
        action="append",
        dest="safe_paths",
        metavar="GLOB",
        help="writes to paths matching GLOB need no approval (repeatable)",
    )
    sandbox = command.add_mutually_exclusive_group()
    sandbox.add_argument(
        "--sandbox",
        nargs="?",
        const=True,
        default=None,
        type=_sandbox_kind,
        metavar="container",
        help="run commands in the bubblewrap sandbox, even as root; `--sandbox container` "
        "runs them in a podman or docker container of --image",
    )
    sandbox.add_argument(
        "--no-sandbox",
        dest="sandbox",
        action="store_false",
        default=None,
        help="no `execute` tool: the agent cannot run commands",
    )


def _sandbox_kind(value: str) -> str | bool:
    if value not in ("container", "bwrap"):
        raise argparse.ArgumentTypeError(f"{value!r}: --sandbox takes `container` or nothing")
    return True if value == "bwrap" else value


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
