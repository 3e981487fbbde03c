"""Watching a sandboxed command's whole process tree from outside, off the event loop.

A thread looks at the tree every tenth of a second and kills it when it goes over a
limit, so that `cpu_seconds` (always) and `memory_mb` (where no cgroup holds it) count
every process of the command together:

- the tree is the command's cgroup when it has one, else every process descended from
  the first process of the sandbox's PID namespace (orphans are adopted by it, so none
  slips out);
- CPU time is the sum of what each process used and what its finished children did;
- without a cgroup, memory is what the processes hold themselves (their proportional
  share of anonymous and shared pages, so pages shared after a fork count once) plus
  what fills the sandbox's `/tmp` and `/dev/shm`. Memory the kernel keeps for them
  outside their address space (an unmapped memfd, pipe and socket buffers) is not seen:
  only a cgroup counts that, which is why per-process limits stay as a backstop.
"""

from __future__ import annotations

import contextlib
import json
import os
import select
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

from tether.backends.sandbox.cgroups import Cgroup

__all__ = ["Limit", "TreeLimits", "Watchdog"]

Limit = Literal["memory", "cpu"]
_INTERVAL = 0.1
_TICKS = os.sysconf("SC_CLK_TCK")
_PAGE = os.sysconf("SC_PAGE_SIZE")


@dataclass(frozen=True, slots=True)
class TreeLimits:
    """What a command's processes may use together."""

    memory_bytes: int
    cpu_seconds: float


class Watchdog:
    """Watches one command. `info_fd` is the read end of bubblewrap's `--info-fd`, from
    which it learns the sandbox's first process; `kill` ends the whole tree."""

    def __init__(
        self, info_fd: int, limits: TreeLimits, cgroup: Cgroup | None, kill: Callable[[], None]
    ) -> None:
        self.limits, self.cgroup, self._kill = limits, cgroup, kill
        self.over: Limit | None = None
        self._info_fd = info_fd
        self._first: int | None = None
        self._first_fd: int | None = None  # a pidfd: it cannot name another process later
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._watch, name="tether-watchdog", daemon=True)
        self._thread.start()

    def stop(self) -> Limit | None:
        """Stop watching (call once the command's first process has exited) and say which
        limit the tree went over, if any. Blocks briefly: call it off the event loop."""
        self._stop.set()
        self._thread.join(timeout=30)
        os.close(self._info_fd)
        if self.over is None and self.cgroup is not None and self.cgroup.oom_kills():
            self.over = "memory"  # a process was killed for it just before the end
        return self.over

    def wait_gone(self, timeout: float = 10.0) -> bool:
        """Wait until every process of the sandbox has ended (the namespace's first
        process ends last). Blocks: call it off the event loop."""
        if self._first_fd is None:
            return True
        try:
            poller = select.poll()
            poller.register(self._first_fd, select.POLLIN)
            return bool(poller.poll(timeout * 1000))
        finally:
            os.close(self._first_fd)
            self._first_fd = None

    def _watch(self) -> None:
        self._learn_first_process()
        while not self._stop.wait(_INTERVAL):
            over = self._check()
            if over is not None:
                self.over = over
                self._kill()
                return

    def _learn_first_process(self) -> None:
        """Read `{"child-pid": N}` from bubblewrap (nothing comes when it fails to start)."""
        data = b""
        with contextlib.suppress(OSError):
            while chunk := os.read(self._info_fd, 4096):
                data += chunk
                if b"}" in data:
                    break
        with contextlib.suppress(ValueError, TypeError, AttributeError):
            self._first = int(json.loads(data)["child-pid"])
        if self._first is not None:
            with contextlib.suppress(OSError):
                self._first_fd = os.pidfd_open(self._first)

    def _check(self) -> Limit | None:
        members = self.cgroup.members() if self.cgroup else _descendants(self._first)
        if sum(_cpu_seconds(pid) for pid in members) > self.limits.cpu_seconds:
            return "cpu"
        if self.cgroup is not None:
            return "memory" if self.cgroup.oom_kills() else None
        used = sum(_memory(pid) for pid in members)
        if self._first is not None:
            used += sum(_filled(f"/proc/{self._first}/root{d}") for d in ("/tmp", "/dev/shm"))
        return "memory" if used > self.limits.memory_bytes else None


def _descendants(first: int | None) -> list[int]:
    """`first` and every process below it."""
    if first is None:
        return []
    children: dict[int, list[int]] = {}
    for name in os.listdir("/proc"):
        if name.isdigit():
            fields = _stat(int(name))
            if fields:
                children.setdefault(int(fields[1]), []).append(int(name))
    found, todo = [], [first]
    while todo:
        pid = todo.pop()
        found.append(pid)
        todo.extend(children.get(pid, ()))
    return found


def _stat(pid: int) -> list[str]:
    """The fields of /proc/PID/stat after the command name (state, ppid, ...)."""
    try:
        with open(f"/proc/{pid}/stat") as stat:
            text = stat.read()
    except OSError:
        return []
    return text[text.rfind(")") + 2 :].split()


def _cpu_seconds(pid: int) -> float:
    """CPU time of `pid` and of its children that have ended (user and system)."""
    fields = _stat(pid)
    if len(fields) < 15:
        return 0.0
    return sum(int(value) for value in fields[11:15]) / _TICKS


def _memory(pid: int) -> int:
    """Bytes of anonymous and shared memory `pid` holds, shared pages split among those
    that share them; its resident set where the kernel has no finer account."""
    fields: dict[str, int] = {}
    try:
        with open(f"/proc/{pid}/smaps_rollup") as rollup:
            for line in rollup:
                name, _, rest = line.partition(":")
                parts = rest.split()
                if parts and parts[0].isdigit():
                    fields[name] = int(parts[0]) * 1024
    except OSError:
        fields_from_stat = _stat(pid)
        return int(fields_from_stat[21]) * _PAGE if len(fields_from_stat) > 21 else 0
    if "Pss_Anon" in fields:
        return fields["Pss_Anon"] + fields.get("Pss_Shmem", 0)
    return fields.get("Pss", 0)


def _filled(path: str) -> int:
    """Bytes in use on the file system mounted at `path` (a sandbox's tmpfs)."""
    try:
        usage = os.statvfs(path)
    except OSError:
        return 0
    return (usage.f_blocks - usage.f_bfree) * usage.f_frsize
