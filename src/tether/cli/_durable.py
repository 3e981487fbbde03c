"""`tether worker`, `enqueue`, `status` and `decide`: durable runs on DBOS workers.

Each command imports `tether.durable.dbos` when it runs: DBOS is the dbos extra."""

from __future__ import annotations

import argparse
import importlib
import json
import sys
from dataclasses import asdict
from pathlib import Path
from typing import Any

from tether.cli import EXIT_CODES, REFUSALS
from tether.cli._approve import given_decisions
from tether.errors import ConfigurationError

__all__ = ["command"]


def command(options: argparse.Namespace) -> int:
    """Run a durable-run command; its exit code."""
    try:
        if options.command == "worker":
            return _worker(options)
        if options.command == "enqueue":
            return _enqueue(options)
        if options.command == "status":
            return _status(options)
        return _decide(options)
    except REFUSALS as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_CODES["usage"]


def _worker(options: argparse.Namespace) -> int:
    from tether.durable.dbos import _REGISTRY, serve

    directory = Path(options.directory).resolve()
    sys.path.insert(0, str(directory))  # `--app agents` finds agents.py in the project
    for app in options.app:
        _import(app)
    chosen = dict(_REGISTRY)
    if options.queue:
        unknown = sorted(set(options.queue) - set(chosen))
        if unknown:
            known = ", ".join(sorted(chosen)) or "none"
            raise ConfigurationError(
                f"no durable agent serves the queue(s) {', '.join(unknown)}; "
                f"the apps define: {known}"
            )
        chosen = {name: chosen[name] for name in options.queue}
    names = ", ".join(sorted(chosen)) or "nothing"
    print(f"tether worker: serving {names}; Ctrl-C stops", file=sys.stderr, flush=True)
    serve(
        list(chosen.values()),
        database=options.database,
        executor_id=options.executor_id,
        app_version=options.app_version,
        schema=options.schema,
    )
    return 0


def _import(app: str) -> None:
    """Import `module` or `module:attribute`; the DurableAgents it makes register."""
    from tether.durable.dbos import DurableAgent

    module_name, _, attribute = app.partition(":")
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        raise ConfigurationError(f"cannot import the app {module_name!r}: {exc}") from None
    if attribute and not isinstance(getattr(module, attribute, None), DurableAgent):
        raise ConfigurationError(f"{app!r} is not a DurableAgent")


def _enqueue(options: argparse.Namespace) -> int:
    from tether.durable.dbos import enqueue

    task = sys.stdin.read() if options.task == "-" else options.task
    handle = enqueue(
        options.name,
        task,
        thread_id=options.thread,
        key=options.key,
        database=options.database,
        schema=options.schema,
    )
    if not options.wait:
        if options.json:
            print(json.dumps({"thread_id": handle.thread_id, "workflow_id": handle.workflow_id}))
        else:
            print(f"queued on {options.name}: thread {handle.thread_id}")
        return 0
    status = handle.wait()
    return _print_status(status, options.json)


def _status(options: argparse.Namespace) -> int:
    from tether.durable.dbos import status_of_thread

    status = status_of_thread(options.thread, database=options.database, schema=options.schema)
    return _print_status(status, options.json)


def _decide(options: argparse.Namespace) -> int:
    from tether.durable.dbos import _Client

    handle = _Client(options.database, options.schema).latest(options.thread)
    status = handle.status()
    if status.state != "waiting":
        raise ConfigurationError(
            f"the run of thread {options.thread} is {status.state}, not waiting for a decision"
        )
    decisions = given_decisions(options, list(status.interrupts))
    if decisions is None:
        raise ConfigurationError("decide with --approve, --reject [REASON] or --decisions FILE")
    handle.decide(decisions)
    count, waiting = len(decisions), len(status.interrupts)
    if count < waiting:  # a mapping by call id may decide some of them
        print(f"decided {count} of {waiting} calls; the others still wait ({options.thread})")
        return EXIT_CODES["interrupted"]
    print(f"decided {count} call(s); a worker continues thread {options.thread}")
    return 0


def _print_status(status: Any, as_json: bool) -> int:
    """Print where a run is; exit 0 while it is queued, running or done, else the code
    `tether run` would give."""
    if as_json:
        print(json.dumps(asdict(status), default=str))
    else:
        print(f"thread {status.thread_id}: {status.state}")
        for request in status.interrupts:
            print(f"  waits: {request.tool} {json.dumps(request.args)} ({request.call_id})")
        if status.stop_reason is not None:
            print(f"  stop reason: {status.stop_reason}")
        if status.output is not None:
            output = status.output
            print(output if isinstance(output, str) else json.dumps(output, indent=2))
        if status.error:
            print(f"  error: {status.error}", file=sys.stderr)
    if status.state == "waiting":
        return EXIT_CODES["interrupted"]
    if status.state == "failed":
        return EXIT_CODES["error"]
    if status.state == "cancelled":
        return EXIT_CODES["cancelled"]
    return EXIT_CODES.get(status.stop_reason or "completed", EXIT_CODES["error"])
