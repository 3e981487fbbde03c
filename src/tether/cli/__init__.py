"""The `tether` command: run a deep agent on a project from the terminal.

    tether run "read this repository and write NOTES.md summarizing its layout"
    tether threads | tether show THREAD | tether resume THREAD | tether config

Only argparse loads before a command runs, so `tether --help` starts fast; the agent,
Rich and the model's SDK load when a command needs them.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

__all__ = ["EXIT_CODES", "main"]

EXIT_CODES = {
    "completed": 0,
    "error": 1,
    "usage": 2,
    "interrupted": 3,
    "budget": 4,
    "timeout": 4,
    "loop": 4,
    "cancelled": 130,
}
"""What the command exits with, by how the run ended ("usage": a bad command or setting)."""

_EPILOG = """\
exit codes: 0 done, 1 the run failed, 2 bad command or configuration,
3 waiting for approval (see `tether resume`), 4 stopped by a limit, 130 Ctrl-C.
Settings come from tether.toml (or [tool.tether] in pyproject.toml), then TETHER_*
environment variables, then flags: `tether config` shows them and where each came from."""


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line `argv` (default: `sys.argv[1:]`); the exit code."""
    parser = _parser()
    options = parser.parse_args(argv)
    if options.command is None:
        parser.print_help()
        return EXIT_CODES["usage"]
    from tether.cli._session import dispatch

    try:
        return dispatch(options)
    except KeyboardInterrupt:  # before a run started: nothing to save
        print(file=sys.stderr)
        return EXIT_CODES["cancelled"]


def _parser() -> argparse.ArgumentParser:
    from tether import __version__

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
        help="work on the project in DIR instead of the current directory",
    )
    commands = parser.add_subparsers(dest="command", metavar="COMMAND")

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
    decide = resume.add_mutually_exclusive_group()
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
    _agent_options(resume)

    threads = commands.add_parser("threads", help="list the threads, the newest first")
    threads.add_argument("--limit", type=int, default=20, help="show at most this many")
    threads.add_argument("--json", action="store_true", help="one JSON object per thread")

    show = commands.add_parser("show", help="print a thread's conversation")
    show.add_argument("thread", metavar="THREAD")
    show.add_argument("--json", action="store_true", help="the messages as JSON")

    delete = commands.add_parser("delete", help="delete a thread's record")
    delete.add_argument("thread", metavar="THREAD")

    config = commands.add_parser(
        "config", help="print the effective settings and where each came from"
    )
    config.add_argument("--json", action="store_true", help="as a JSON object")
    _setting_options(config)
    return parser


def _agent_options(command: argparse.ArgumentParser) -> None:
    _setting_options(command)
    output = command.add_mutually_exclusive_group()
    output.add_argument(
        "--json", action="store_true", help="print one JSON event per line, for scripts"
    )
    output.add_argument("-q", "--quiet", action="store_true", help="print only the answer")


def _setting_options(command: argparse.ArgumentParser) -> None:
    add = command.add_argument
    add("--model", metavar="PROVIDER:MODEL", help="e.g. anthropic:claude-sonnet-4-5")
    add("--max-cost", type=float, metavar="USD", help="stop when the run has cost this much")
    add("--max-steps", type=int, metavar="N", help="stop after N model calls (default 200)")
    add("--timeout", type=float, metavar="SECONDS", help="stop after this long")
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
        action="store_true",
        default=None,
        help="run commands in the bubblewrap sandbox, even as root",
    )
    sandbox.add_argument(
        "--no-sandbox",
        dest="sandbox",
        action="store_false",
        default=None,
        help="no `execute` tool: the agent cannot run commands",
    )


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
