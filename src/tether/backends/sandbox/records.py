"""Records of sandboxed commands under way, so that one whose tether was killed
mid-way is put right by the next.

Each command leaves a small JSON file in `.tether/sandbox/` (hidden from commands) for
as long as it runs: the process that runs it, and the git entries it was kept from.
A record whose process is gone is one whose command never finished: `recover`
disables the git directories made since (see `gitdirs`) and drops the record. Commands
of one workspace run one at a time, under an flock of its directory (`try_lock`).
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import json
import logging
import os
import secrets
from dataclasses import dataclass

from tether.backends.hostfs import Root
from tether.backends.sandbox import gitdirs

__all__ = ["drop", "recover", "recover_at_start", "try_lock", "write"]

_RECORDS = "/.tether/sandbox"
_log = logging.getLogger("tether.sandbox")


def write(host: Root, known: gitdirs.GitScan, hidden: set[str]) -> str | None:
    """Leave a record of the command (its process, the git entries it found) in
    `.tether/`, when the workspace has one hidden from commands."""
    if _RECORDS.rsplit("/", 1)[0] not in hidden:
        return None  # no .tether (a library's workspace): nothing to recover from later
    me = os.getpid()
    path = f"{_RECORDS}/{me}-{secrets.token_hex(6)}.json"
    record = {
        "pid": me,
        "started": _start_time(me),
        "known": sorted(known.identities),
        "hidden": sorted(hidden),
    }
    try:
        with os.fdopen(host.create(path), "w") as out:
            json.dump(record, out)
    except OSError:
        return None
    return path


def recover(host: Root) -> list[str]:
    """Disable what the commands of records whose processes are gone made, and drop the
    records. Call it holding the workspace's lock."""
    try:
        directory = host.open_dir(_RECORDS)
    except OSError:
        return []
    notes: list[str] = []
    try:
        for name in sorted(os.listdir(directory)):
            record = _read_record(directory, name)
            if record is None or _alive(record):
                continue
            known = gitdirs.GitScan(record.known)
            done = gitdirs.disable_new(host, record.hidden, known)
            found = gitdirs.notes(done)
            if found:
                notes.append(
                    f"a command of tether process {record.pid} on this workspace never "
                    "finished (the process was killed)"
                )
                notes += found
            with contextlib.suppress(OSError):
                os.unlink(name, dir_fd=directory)
    finally:
        os.close(directory)
    for note in notes:
        _log.warning("%s", note)
    return notes


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
    known: dict[str, gitdirs.Identity]  # paths unknown now: what counts is the identity
    hidden: frozenset[str]


def _read_record(directory: int, name: str) -> _Record | None:
    if not name.endswith(".json"):
        return None
    try:
        fd = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=directory)
        with os.fdopen(fd) as source:
            data = json.loads(source.read(1 << 22))
        known = {f"#{n}": (int(dev), int(ino)) for n, (dev, ino) in enumerate(data["known"])}
        started = data["started"]
        hidden = frozenset(str(path) for path in data["hidden"])
        pid = int(data["pid"])
        return _Record(pid, None if started is None else int(started), known, hidden)
    except (OSError, ValueError, TypeError, KeyError):
        return None  # not one of ours: left alone


def drop(host: Root, path: str) -> None:
    directory, name = path.rsplit("/", 1)
    with contextlib.suppress(OSError):
        fd = host.open_dir(directory)
        try:
            os.unlink(name, dir_fd=fd)
        finally:
            os.close(fd)


def _alive(record: _Record) -> bool:
    """Whether the process that left `record` still runs (the same one, not a new
    process that was given its number)."""
    return record.started is not None and _start_time(record.pid) == record.started


def _start_time(pid: int) -> int | None:
    try:
        with open(f"/proc/{pid}/stat") as source:
            text = source.read()
        return int(text[text.rfind(")") + 2 :].split()[19])
    except (OSError, ValueError, IndexError):
        return None


def try_lock(fd: int) -> bool:
    """Take the exclusive flock of `fd` if no one holds it."""
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return False
    except OSError as exc:
        if exc.errno in (errno.ENOLCK, errno.EOPNOTSUPP):
            return True  # a file system without locks: commands may then overlap
        raise
    return True
