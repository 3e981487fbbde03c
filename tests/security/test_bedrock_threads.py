"""A Bedrock run that stops (its time limit, a cancel) while boto3's thread is blocked
reading the server: nothing blocking runs on the event loop, and the thread ends with
the run, not when the model's read timeout (minutes) or the server lets it go.

THREATS.md "Waiting forever" (a cancelled run stops its threads) and "Stalling
everyone" (nothing blocking on the event loop). The server here stays silent for a
minute and the model's read timeout is five: the bounds below are a few seconds, so a
loaded machine passes and the old behaviour (a minute) cannot.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
import time
from collections.abc import AsyncIterator, Callable

from tests.models.faults import Reply, serving
from tests.models.test_bedrock import STREAM, model
from tether import Limits, create_agent

SILENCE = 60.0  # how long the server says nothing more
READ_TIMEOUT = 300.0  # the model's own timeout: never what ends the wait here
ENDS_WITHIN = 15.0  # the run and its thread end within this (without the fix: SILENCE)
STALL_LIMIT = 5.0  # the longest the event loop may go without running a heartbeat


def _bedrock_threads() -> set[threading.Thread]:
    return {t for t in threading.enumerate() if t.name == "tether-bedrock"}


async def _still_alive(threads: set[threading.Thread]) -> list[threading.Thread]:
    """`threads` that did not end within ENDS_WITHIN seconds (waited for off the loop)."""
    deadline = time.monotonic() + ENDS_WITHIN
    for thread in threads:
        await asyncio.to_thread(thread.join, max(0.0, deadline - time.monotonic()))
    return [t for t in threads if t.is_alive()]


@contextlib.asynccontextmanager
async def _heartbeat() -> AsyncIterator[list[float]]:
    """Yields a one-item list: the longest the loop went without a 10 ms heartbeat."""
    worst = [0.0]
    done = asyncio.Event()

    async def beat() -> None:
        last = time.perf_counter()
        while not done.is_set():
            await asyncio.sleep(0.01)
            now = time.perf_counter()
            worst[0] = max(worst[0], now - last - 0.01)
            last = now

    task = asyncio.create_task(beat())
    await asyncio.sleep(0.02)
    try:
        yield worst
    finally:
        done.set()
        await task


async def _until(condition: Callable[[], object], seconds: float = 30.0) -> None:
    deadline = time.monotonic() + seconds
    while not condition():
        assert time.monotonic() < deadline, "the request never reached the server"
        await asyncio.sleep(0.02)


async def test_a_time_limit_in_a_blocked_read_neither_stalls_the_loop_nor_leaves_the_thread() -> (
    None
):
    # The reply's head, then silence: boto3's thread is blocked reading the stream.
    silent = Reply(body=b"", headers=STREAM, then="hang", hang=SILENCE)
    with serving([silent], chunked=True) as server:
        bedrock = model(server.url, max_retries=0, timeout_seconds=READ_TIMEOUT)
        await asyncio.to_thread(bedrock._bedrock)  # boto3's setup is done before the clock
        before = _bedrock_threads()
        agent = create_agent(bedrock, limits=Limits(timeout_seconds=2), checkpointer=None)
        async with _heartbeat() as worst:
            started = time.monotonic()
            run = asyncio.create_task(agent.arun("Hi"))
            await _until(lambda: server.requests)
            threads = _bedrock_threads() - before  # the request's thread, reading
            result = await run
            took = time.monotonic() - started
        assert threads
        assert result.stop_reason == "timeout"
        assert took < ENDS_WITHIN, f"the run took {took:.1f} s to stop"
        assert worst[0] < STALL_LIMIT, f"the event loop stalled {worst[0]:.1f} s"
        assert not await _still_alive(threads)


async def test_a_cancelled_run_waiting_for_the_status_line_ends_its_thread() -> None:
    # Not even a status line: the thread is blocked inside converse_stream itself.
    mute = Reply(head=False, then="hang", hang=SILENCE)
    with serving([mute]) as server:
        bedrock = model(server.url, max_retries=0, timeout_seconds=READ_TIMEOUT)
        await asyncio.to_thread(bedrock._bedrock)
        before = _bedrock_threads()
        run = asyncio.create_task(create_agent(bedrock, checkpointer=None).arun("Hi"))
        await _until(lambda: server.requests)
        threads = _bedrock_threads() - before  # the request's thread, waiting
        async with _heartbeat() as worst:
            started = time.monotonic()
            run.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await run
            took = time.monotonic() - started
        assert took < ENDS_WITHIN, f"the cancel took {took:.1f} s"
        assert worst[0] < STALL_LIMIT, f"the event loop stalled {worst[0]:.1f} s"
        assert threads
        assert not await _still_alive(threads)
