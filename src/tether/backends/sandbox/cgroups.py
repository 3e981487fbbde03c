"""A cgroup per sandboxed command, so its limits hold for its whole process tree.

Where this process may make cgroups below its own (root with cgroup v1, or a cgroup v2
subtree delegated to it with the `memory` and `pids` controllers on), each command runs
in a new one: `memory` caps all its processes together (swap and its `/tmp` included)
and `pids` caps how many there are, whoever they run as; the kernel counts every
process however it was started. The cgroup is made below this process's own, so any
limit set on tether itself still holds for its commands.

A command joins its cgroup before bubblewrap starts (the small shell that becomes
bubblewrap writes its own pid into `cgroup.procs` first), so nothing it starts is
outside. The
cgroup is removed once its last process is gone; one left by a process that was killed
(named `tether-<pid>-...` after its dead owner) is removed the next time one is made.
"""

from __future__ import annotations

import contextlib
import errno
import os
import re
import secrets
import signal
import time
from collections.abc import Iterator
from dataclasses import dataclass

__all__ = ["Cgroup", "CgroupUnavailable", "counter", "make"]

_NAME = re.compile(r"tether-(\d+)-[0-9a-f]+")


class CgroupUnavailable(Exception):
    """No cgroup can be made here; the message says why."""


@dataclass(frozen=True, slots=True)
class Cgroup:
    """One command's cgroup: a directory per hierarchy (v1: memory, then pids; v2: one)."""

    version: int
    directories: tuple[str, ...]

    def procs_files(self) -> list[str]:
        """The files a process writes its pid into to join it (one per hierarchy)."""
        return [os.path.join(d, "cgroup.procs") for d in self.directories]

    def members(self) -> list[int]:
        """The pids of the processes in it now."""
        try:
            with open(os.path.join(self.directories[0], "cgroup.procs")) as procs:
                return [int(line) for line in procs if line.strip()]
        except OSError:
            return []

    def oom_kills(self) -> int:
        """How many of its processes the kernel killed for going over the memory limit."""
        name = "memory.oom_control" if self.version == 1 else "memory.events"
        return counter(os.path.join(self.directories[0], name), "oom_kill")

    def forks_refused(self) -> int:
        """How many forks failed because the tree had `max_processes` already."""
        return counter(os.path.join(self.directories[-1], "pids.events"), "max")

    def kill(self) -> None:
        """SIGKILL every process in it."""
        if self.version == 2:
            with contextlib.suppress(OSError):
                _write(os.path.join(self.directories[0], "cgroup.kill"), "1")
                return
        for pid in self.members():
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGKILL)

    def remove(self, timeout: float = 10.0) -> bool:
        """Kill what is left, wait until it is gone (at most `timeout` seconds) and remove
        the cgroup. False when it could not be removed in time (it is swept later).
        Blocks: call it off the event loop."""
        deadline = time.monotonic() + timeout
        pause = 0.001
        while True:
            self.kill()
            if _remove_all(self.directories):
                return True
            if time.monotonic() > deadline:
                return False
            time.sleep(pause)  # the last processes are being torn down
            pause = min(pause * 2, 0.05)


def make(memory_bytes: int, max_processes: int) -> Cgroup:
    """A new cgroup below this process's own, with the limits set; CgroupUnavailable
    says why none can be made."""
    version, parents = _parents()
    name = f"tether-{os.getpid()}-{secrets.token_hex(6)}"
    made: list[str] = []
    try:
        for parent in parents:
            _sweep(parent)
            os.mkdir(os.path.join(parent, name), 0o755)
            made.append(os.path.join(parent, name))
        cgroup = Cgroup(version, tuple(made))
        _set_limits(cgroup, memory_bytes, max_processes)
    except OSError as exc:
        _remove_all(made)
        raise CgroupUnavailable(f"cannot make a cgroup in {parents[0]}: {exc.strerror}") from None
    return cgroup


def _set_limits(cgroup: Cgroup, memory_bytes: int, max_processes: int) -> None:
    memory, pids = cgroup.directories[0], cgroup.directories[-1]
    if cgroup.version == 1:
        _write(os.path.join(memory, "memory.limit_in_bytes"), str(memory_bytes))
        # Swap counts too, where the kernel accounts it (the file is absent otherwise).
        with contextlib.suppress(FileNotFoundError):
            _write(os.path.join(memory, "memory.memsw.limit_in_bytes"), str(memory_bytes))
    else:
        _write(os.path.join(memory, "memory.max"), str(memory_bytes))
        for name, value in (("memory.swap.max", "0"), ("memory.oom.group", "1")):
            with contextlib.suppress(FileNotFoundError):
                _write(os.path.join(memory, name), value)
    _write(os.path.join(pids, "pids.max"), str(max_processes))


def _parents() -> tuple[int, tuple[str, ...]]:
    """Where this process's cgroups are: (1, (memory, pids)) with cgroup v1, or (2, (its
    own,)) with a v2 subtree that has both controllers."""
    own = _own_cgroups()
    mounts = list(_cgroup_mounts())
    v1 = [_directory(mounts, "cgroup", controller, own) for controller in ("memory", "pids")]
    if v1[0] is not None and v1[1] is not None:
        return 1, tuple(dict.fromkeys((v1[0], v1[1])))  # one, when both share a hierarchy
    v2 = _directory(mounts, "cgroup2", "", own)
    if v2 is None:
        raise CgroupUnavailable("this system has neither cgroup v1 memory and pids nor cgroup v2")
    _enable_controllers(v2)
    return 2, (v2,)


def _enable_controllers(directory: str) -> None:
    """Have the v2 controllers on for the cgroups below `directory`. The kernel refuses
    when `directory` itself holds processes (except at the top), so a v2 system helps
    only where tether runs in the top cgroup or one delegated with them on."""
    try:
        with open(os.path.join(directory, "cgroup.subtree_control")) as control:
            enabled = set(control.read().split())
    except OSError as exc:
        raise CgroupUnavailable(f"cannot read {directory}: {exc.strerror}") from None
    missing = {"memory", "pids"} - enabled
    if not missing:
        return
    try:
        _write(
            os.path.join(directory, "cgroup.subtree_control"),
            " ".join(f"+{name}" for name in sorted(missing)),
        )
    except OSError as exc:
        raise CgroupUnavailable(
            f"the memory and pids controllers are not delegated to {directory} ({exc.strerror})"
        ) from None


def _own_cgroups() -> dict[str, str]:
    """This process's cgroup by controller ('' for the v2 hierarchy)."""
    found: dict[str, str] = {}
    with open("/proc/self/cgroup") as lines:
        for line in lines:
            _, controllers, path = line.rstrip("\n").split(":", 2)
            for controller in controllers.split(",") if controllers else [""]:
                found[controller] = path
    return found


def _cgroup_mounts() -> Iterator[tuple[str, str, str, frozenset[str]]]:
    """(root, mount point, type, options) of each cgroup file system mounted here."""
    with open("/proc/self/mountinfo") as lines:
        for line in lines:
            left, _, right = line.partition(" - ")
            fields, described = left.split(), right.split()
            if len(fields) >= 5 and len(described) >= 3 and described[0] in ("cgroup", "cgroup2"):
                root, point = _unescape(fields[3]), _unescape(fields[4])
                yield root, point, described[0], frozenset(described[2].split(","))


def _directory(
    mounts: list[tuple[str, str, str, frozenset[str]]],
    kind: str,
    controller: str,
    own: dict[str, str],
) -> str | None:
    """The directory of this process's cgroup for `controller` in a `kind` mount."""
    path = own.get(controller)
    if path is None:
        return None
    for root, point, mounted, options in mounts:
        if mounted != kind or (kind == "cgroup" and controller not in options):
            continue
        if path == root or path.startswith(root.rstrip("/") + "/"):
            return os.path.join(point, path[len(root) :].lstrip("/")).rstrip("/")
    return None


def _sweep(parent: str) -> None:
    """Remove the empty cgroups left by tether processes that are gone."""
    with contextlib.suppress(OSError), os.scandir(parent) as entries:
        for entry in entries:
            found = _NAME.fullmatch(entry.name)
            if found and int(found[1]) != os.getpid() and not _alive(int(found[1])):
                with contextlib.suppress(OSError):
                    os.rmdir(entry.path)  # fails while processes are still in it


def _remove_all(directories: list[str] | tuple[str, ...]) -> bool:
    done = True
    for directory in directories:
        try:
            os.rmdir(directory)
        except FileNotFoundError:
            pass
        except OSError as exc:
            if exc.errno != errno.EBUSY:
                raise
            done = False
    return done


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def counter(path: str, key: str) -> int:
    """The value of `key` in a cgroup file of `key value` lines (0 when absent)."""
    try:
        with open(path) as lines:
            for line in lines:
                name, _, value = line.partition(" ")
                if name == key:
                    return int(value)
    except (OSError, ValueError):
        pass
    return 0


def _write(path: str, value: str) -> None:
    with open(path, "w") as control:
        control.write(value)


def _unescape(field: str) -> str:
    """mountinfo writes space, tab, newline and backslash as octal escapes."""
    return re.sub(r"\\([0-7]{3})", lambda m: chr(int(m[1], 8)), field)
