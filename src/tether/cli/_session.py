"""A run in the terminal (`tether run`, `tether resume`): its events shown as they come,
the calls that wait for approval asked about, Ctrl-C stopping it with the thread saved,
and how to go on when it stops."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import functools
import signal
import sys
import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tether.checkpoint.journal import Thread, read_thread
from tether.cli import EXIT_CODES, REFUSALS
from tether.cli._agent import build_agent, workspace
from tether.cli._approve import ask, given_decisions
from tether.cli._config import Loaded
from tether.cli._questions import describe_field
from tether.cli._records import run_metadata
from tether.cli._render import Output, declined, request_line, shown
from tether.errors import ConfigurationError, TetherError
from tether.events import Event, RunFinished

if TYPE_CHECKING:
    from tether.agent import Agent, RunResult
    from tether.approval import ApprovalRequest, Decision
    from tether.questions import Question

__all__ = ["Interrupted", "consume", "explain_wait", "question_lines", "run"]


def run(options: argparse.Namespace, loaded: Loaded, directory: Path, output: Output) -> int:
    """`tether run` or `tether resume`, on the agent the settings describe; the exit code."""
    with workspace(loaded, directory, output) as backend:
        agent = build_agent(loaded, directory, output, backend)
        return _drive(options, agent, run_metadata(loaded), directory, output)


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
    decisions = given_decisions(options, list(thread.requests or thread.asked_requests))
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
    assert agent.checkpointer is not None  # build_agent always gives one
    return asyncio.run(read_thread(agent.checkpointer, thread_id))


def explain_wait(requests: list[ApprovalRequest], thread_id: str, output: Output) -> None:
    """Say which calls the run waits on, and how to decide on them."""
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
