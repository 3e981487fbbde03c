"""Records of sandboxed commands under way, so that one whose tether was killed
mid-way is put right by the next.

Each command leaves a small JSON file for as long as it runs: the process that runs
it, and the git entries it was kept from. The records are the user's, kept outside
every workspace (`$XDG_STATE_HOME/tether/sandbox/`, by default
`~/.local/state/tether/sandbox/`, a directory per workspace): a record in the
workspace could be shipped by a repository or made by a command, and a forged one
would have the next start disable the user's own `.git`.
A record whose process is gone is one whose command never finished: `recover`
disables the git directories made since (see `gitdirs`) and drops the record. Commands
of one workspace run one at a time, under an flock of its directory (`try_lock`).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import secrets
import time
from dataclasses import dataclass
from pathlib import Path

from tether.backends.hostfs import Root, state_home, try_lock
from tether.backends.sandbox import gitdirs

__all__ = [
    "drop",
    "lock_workspace",
    "orphaned",
    "recover",
    "recover_at_start",
    "start_time",
    "try_lock",
    "write",
]

_log = logging.getLogger("tether.sandbox")


def _directory(host: Root) -> Path:
    """Where the records of `host`'s commands are kept: by the workspace's device and
    inode, which a second name (a link, a bind mount) of it shares."""
    st = os.fstat(host.fd)
    return Path(state_home()) / "tether" / "sandbox" / f"{st.st_dev}-{st.st_ino}"


def write(host: Root, known: gitdirs.GitScan, hidden: set[str]) -> str | None:
    """Leave a record of the command (its process, the git entries it found); the
    record's path, or None when it could not be written."""
    me = os.getpid()
    record = {
        "pid": me,
        "started": start_time(me),
        "workspace": host.path,
        "known": sorted(known.identities),
        "hidden": sorted(hidden),
    }
    try:
        directory = _directory(host)
        directory.mkdir(parents=True, exist_ok=True, mode=0o700)
        path = directory / f"{me}-{secrets.token_hex(6)}.json"
        path.write_text(json.dumps(record), encoding="utf-8")
    except OSError:
        return None
    return str(path)


async def lock_workspace(host: Root, deadline: float) -> int | None:
    """An fd of the workspace holding its exclusive flock, waited for on the event loop
    until `deadline` (of `time.monotonic`); None when it did not come."""
    fd = os.open(".", os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC, dir_fd=host.fd)
    pause = 0.005
    try:
        while not try_lock(fd):
            if time.monotonic() >= deadline:
                os.close(fd)
                return None
            await asyncio.sleep(min(pause, max(0.0, deadline - time.monotonic())))
            pause = min(pause * 2, 0.1)
    except BaseException:
        os.close(fd)
        raise
    return fd


def recover(host: Root) -> list[str]:
    """Disable what the commands of records whose processes are gone made, and drop the
    records. Call it holding the workspace's lock."""
    try:
        names = sorted(os.listdir(directory := _directory(host)))
    except OSError:
        return []
    notes: list[str] = []
    for name in names:
        record = _read_record(directory / name)
        if record is None or _alive(record) or record.workspace != host.path:
            continue  # not ours, still running, or a directory that had this inode before
        done = gitdirs.disable_new(host, record.hidden, gitdirs.GitScan(record.known))
        found = gitdirs.notes(done)
        if found:
            notes.append(
                f"a command of tether process {record.pid} on this workspace never "
                "finished (the process was killed)"
            )
            notes += found
        with contextlib.suppress(OSError):
            (directory / name).unlink()
    for note in notes:
        _log.warning("%s", note)
    return notes


def orphaned(host: Root) -> bool:
    """Whether a command of this workspace never finished: its tether is gone and its
    record left (a container's command may still run then)."""
    try:
        names = os.listdir(directory := _directory(host))
    except OSError:
        return False
    for name in names:
        record = _read_record(directory / name)
        if record is not None and record.workspace == host.path and not _alive(record):
            return True
    return False


def recover_at_start(host: Root) -> list[str]:
    """`recover` when no command of the workspace runs now (else its next command will)."""
    with contextlib.suppress(OSError):
        fd = os.open(".", os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC, dir_fd=host.fd)
        try:
            return recover(host) if try_lock(fd) else []
        finally:
            os.close(fd)  # and with it the lock
    return []


@dataclass(frozen=True, slots=True)
class _Record:
    pid: int
    started: int | None
    workspace: str
    known: dict[str, gitdirs.Identity]  # paths unknown now: what counts is the identity
    hidden: frozenset[str]


def _read_record(path: Path) -> _Record | None:
    if path.suffix != ".json":
        return None
    try:
        data = json.loads(path.read_text(encoding="utf-8")[: 1 << 22])
        known = {f"#{n}": (int(dev), int(ino)) for n, (dev, ino) in enumerate(data["known"])}
        started = data["started"]
        hidden = frozenset(str(hidden) for hidden in data["hidden"])
        pid = int(data["pid"])
        workspace = str(data["workspace"])
        return _Record(pid, None if started is None else int(started), workspace, known, hidden)
    except (OSError, ValueError, TypeError, KeyError):
        return None  # not one of ours: left alone


def drop(path: str) -> None:
    """Remove the record `write` left, the command being over."""
    with contextlib.suppress(OSError):
        os.unlink(path)


def _alive(record: _Record) -> bool:
    """Whether the process that left `record` still runs (the same one, not a new
    process that was given its number)."""
    return record.started is not None and start_time(record.pid) == record.started


def start_time(pid: int) -> int | None:
    """When process `pid` started (in clock ticks after boot): with its pid, what no
    other process shares; None when there is no such process."""
    try:
        with open(f"/proc/{pid}/stat") as source:
            text = source.read()
        return int(text[text.rfind(")") + 2 :].split()[19])
    except (OSError, ValueError, IndexError):
        return None
