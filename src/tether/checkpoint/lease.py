"""One writer per thread: the lease a run or resume holds on its thread.

A run takes the lease before it reads the thread, renews it while it works and gives it
back at its end; every record it appends is checked against it in the same transaction,
so a run that lost its lease can write nothing more. A lease ends without a word from
its holder in two ways: its time runs out (a holder on another machine that stopped
renewing), or its holder is a process of this machine that is gone (`kill -9`), which
is seen at once.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import json
import os
import socket
import time
import uuid
from collections.abc import AsyncIterator
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from tether.errors import ConfigurationError, ThreadBusyError

if TYPE_CHECKING:
    from tether.checkpoint.base import Checkpointer

__all__ = ["LEASE_SECONDS", "Holder", "Lease", "busy", "here", "hold", "lost", "take"]

LEASE_SECONDS = 30.0
"""How long a lease lasts unless renewed; its holder renews it three times as often."""


@dataclass(frozen=True, slots=True)
class Holder:
    """Who holds a lease: a process, told apart from a later one that reuses its pid."""

    token: str
    host: str
    pid: int
    machine: str
    """The host, its boot and the pid namespace: where `pid` names this process."""
    started: str
    """The process's start time (from /proc), or "" where the system does not say."""
    work: str
    """What it does with the thread: "run run_...", "decide"."""

    def to_json(self) -> str:
        return json.dumps(asdict(self), separators=(",", ":"))

    @classmethod
    def from_json(cls, text: str) -> Holder:
        try:
            return cls(**json.loads(text))
        except (ValueError, TypeError):  # written by another version: judged by time only
            return cls("", "an unknown host", 0, "", "", "unknown work")

    def describe(self) -> str:
        return f"process {self.pid} on {self.host} ({self.work})"

    def gone(self) -> bool:
        """Whether this holder was a process of this machine that has ended."""
        return self.machine == _machine() and _start_of(self.pid) != self.started


@dataclass(frozen=True, slots=True)
class Lease:
    """A thread's lease as the checkpointer holds it; `expires` in seconds since the epoch
    (by the database's clock for Postgres)."""

    thread_id: str
    holder: Holder
    expires: float

    @classmethod
    def stored(cls, thread_id: str, owner: str | None, expires: float | None) -> Lease | None:
        """The lease as a checkpointer keeps it (its holder as JSON), or None for none."""
        if owner is None or expires is None:
            return None
        return cls(thread_id, Holder.from_json(owner), expires)

    def stale(self, now: float) -> bool:
        """Whether someone else may take it: its time ran out, or its holder is gone."""
        return now >= self.expires or self.holder.gone()

    def keeps_from(self, token: str, now: float) -> bool:
        """Whether it keeps the thread from the holder with `token`."""
        return self.holder.token != token and not self.stale(now)


def here(work: str) -> Holder:
    """A new holder for this process."""
    pid = os.getpid()
    return Holder(
        uuid.uuid4().hex, socket.gethostname(), pid, _machine(), _start_of(pid) or "", work
    )


def busy(lease: Lease, *, waited: float = 0.0) -> ThreadBusyError:
    when = time.strftime("%H:%M:%S", time.localtime(lease.expires))
    after = f" after waiting {waited:g} s" if waited else ""
    return ThreadBusyError(
        f"thread {lease.thread_id!r} is busy{after}: {lease.holder.describe()} is working on "
        f"it (its lease runs to {when} and is renewed while it works); try again when it "
        "has finished (wait=SECONDS waits for it)",
        thread_id=lease.thread_id,
        holder=lease.holder.describe(),
        expires=lease.expires,
    )


def lost(thread_id: str, lease: Lease | None) -> ThreadBusyError:
    """The error of an append by a run whose lease another run has taken over."""
    who = lease.holder.describe() if lease is not None else "another run"
    return ThreadBusyError(
        f"this run no longer holds thread {thread_id!r}: {who} took it over while this run "
        "could not renew its lease (the process was paused, or the database unreachable), "
        "so this run stopped and wrote nothing more",
        thread_id=thread_id,
        holder=who,
        expires=lease.expires if lease is not None else 0.0,
    )


async def take(checkpointer: Checkpointer, thread_id: str, me: Holder, wait: float) -> None:
    """Take the thread's lease, waiting up to `wait` seconds for its holder to let go."""
    deadline = time.monotonic() + wait
    pause = 0.02
    while True:
        current = await checkpointer.acquire(thread_id, me, LEASE_SECONDS)
        if current is None:
            return
        left = deadline - time.monotonic()
        if left <= 0:
            raise busy(current, waited=wait)
        await asyncio.sleep(min(pause, left))
        pause = min(pause * 2, 0.5)


@contextlib.asynccontextmanager
async def hold(
    checkpointer: Checkpointer, thread_id: str, work: str, *, wait: float = 0.0
) -> AsyncIterator[Holder]:
    """The thread's lease, held (and renewed) for the body of the `async with`."""
    if not isinstance(wait, int | float) or isinstance(wait, bool) or not wait >= 0:
        raise ConfigurationError(f"wait must be a number of seconds >= 0, got {wait!r}")
    me = here(work)
    await take(checkpointer, thread_id, me, float(wait))
    renewing = asyncio.create_task(_renew(checkpointer, thread_id, me.token))
    try:
        yield me
    finally:
        renewing.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await renewing
        # A release that fails leaves a lease that ends with its time or this process.
        with contextlib.suppress(Exception):
            await checkpointer.release(thread_id, me.token)


async def _renew(checkpointer: Checkpointer, thread_id: str, token: str) -> None:
    while True:
        await asyncio.sleep(LEASE_SECONDS / 3)
        with contextlib.suppress(Exception):  # the run's next append says what broke
            if not await checkpointer.renew(thread_id, token, LEASE_SECONDS):
                return  # taken over: the run's next append fails


@functools.cache
def _machine() -> str:
    parts = [socket.gethostname()]
    for source in ("/proc/sys/kernel/random/boot_id", "/proc/self/ns/pid"):
        with contextlib.suppress(OSError):
            path = Path(source)
            parts.append(path.read_text().strip() if path.is_file() else os.readlink(path))
    return "/".join(parts)


def _start_of(pid: int) -> str | None:
    """When process `pid` started, "" when this system does not say, None when it is gone."""
    if not _procfs():
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return None
        except OSError:
            pass  # alive, and someone else's
        return ""
    try:
        fields = Path(f"/proc/{pid}/stat").read_bytes().rsplit(b")", 1)[1].split()
    except FileNotFoundError:
        return None
    if fields[0] in (b"Z", b"X"):  # dead, waiting to be reaped
        return None
    return fields[19].decode()


@functools.cache
def _procfs() -> bool:
    return Path(f"/proc/{os.getpid()}/stat").exists()
