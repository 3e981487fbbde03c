"""A command on a project: its settings loaded and trusted, then the command itself,
`tether config` here and the others in their own modules."""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

from tether.cli import EXIT_CODES, REFUSALS, _threads
from tether.cli._config import Loaded, load, user_file
from tether.cli._records import checkpointer_url, recorded_settings, threads_of
from tether.cli._render import JsonOutput, Output, QuietOutput, RichOutput
from tether.cli._trust import ask_on_terminal, describe, needs_trust, trusted
from tether.errors import ConfigurationError

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
    "image",
    "mode",
    "base_url",
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
            # Looking creates nothing: with no database yet, there are no threads.
            url = checkpointer_url(loaded, directory, create=False)
            return _threads.command(options, url or "sqlite://:memory:")
        thread_id = _continued(options, loaded, directory)
        if thread_id is not None:  # the thread's own settings come before the flags
            recorded = recorded_settings(loaded, directory, thread_id)
            loaded = _trust(
                load(directory, os.environ, given, (thread_id, recorded)), directory, options
            )
        output = _output(options)
        # These load the agent (tether.agent and all it uses, tens of milliseconds): only
        # the commands that run one pay for it, so `tether config` and `threads` start fast.
        if options.command == "serve":
            from tether.cli._serve import serve

            return serve(options, loaded, directory, output)
        if options.command == "chat":
            from tether.cli._chat import chat

            return chat(loaded, directory, thread_id, output)
        from tether.cli._session import run

        return run(options, loaded, directory, output)
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
        found = threads_of(loaded, directory)
        if not found:
            raise ConfigurationError(
                "this project has no thread to continue yet: `tether` starts one"
            )
        return found[0]
    return getattr(options, "thread", None)


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


def _config(loaded: Loaded, as_json: bool) -> int:
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
