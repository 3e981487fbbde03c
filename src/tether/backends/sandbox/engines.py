"""The container engines a `ContainerSandbox` drives (podman, docker): found on the
PATH, checked once, and asked to start, run in, list and remove containers.

Every container tether starts carries labels saying it is tether's, which workspace
and thread it serves, and which process owns it (with the machine's boot and the
process's start time, so a new process given the same number is not taken for it).
A tether that ends however it ends (`kill -9` too) has its containers removed by a
watcher (`watch`); those a watcher could not remove are swept by the next tether.
"""

from __future__ import annotations

import functools
import json
import os
import shutil
import subprocess
from dataclasses import dataclass
from typing import Literal

from tether.backends.sandbox.records import start_time
from tether.errors import ConfigurationError

__all__ = [
    "ENGINES",
    "Container",
    "Engine",
    "find_engine",
    "owner_alive",
    "process_key",
    "process_key_alive",
    "this_owner",
    "watch",
]

ENGINES = ("podman", "docker")
EngineName = Literal["podman", "docker"]
LABEL = "tether.sandbox"
_PROBE_SECONDS = 30.0
_INSTALL = (
    "install podman and runc (Debian/Ubuntu: apt-get install podman runc) or docker "
    "(apt-get install docker.io, with its daemon running)"
)


@dataclass(frozen=True, slots=True)
class Container:
    """A container tether started, as the engine lists it."""

    id: str
    name: str
    labels: dict[str, str]
    running: bool


@dataclass(frozen=True, slots=True)
class Engine:
    """One engine's command line. `rootless` engines on cgroup v1 enforce no limit."""

    name: EngineName
    path: str
    rootless: bool
    cgroup_version: int

    def argv(self, *args: str) -> list[str]:
        return [self.path, *args]

    def run(self, *args: str, timeout: float = _PROBE_SECONDS) -> subprocess.CompletedProcess[str]:
        """Run the engine and wait (call it off the event loop)."""
        return subprocess.run(
            self.argv(*args),
            capture_output=True,
            text=True,
            check=False,
            timeout=timeout,
            stdin=subprocess.DEVNULL,
        )

    def listed(self) -> list[Container]:
        """Every container tether started on this engine, running or not."""
        done = self.run(
            "ps", "--all", "--no-trunc", "--filter", f"label={LABEL}", "--format", "{{.ID}}"
        )
        ids = done.stdout.split()
        if done.returncode != 0 or not ids:
            return []
        found = self.run("inspect", *ids)
        try:
            described = json.loads(found.stdout or "[]")
        except ValueError:
            return []
        containers = []
        for item in described:
            labels = (item.get("Config") or {}).get("Labels") or {}
            state = item.get("State") or {}
            name = str(item.get("Name", "")).lstrip("/")
            if labels.get(LABEL) == "1":
                running = bool(state.get("Running"))
                containers.append(Container(str(item["Id"]), name, dict(labels), running))
        return containers

    def state(self, name: str) -> tuple[bool, int | None, bool]:
        """Whether `name` runs, its first process's pid on this machine, and whether the
        kernel's out-of-memory killer ended it."""
        done = self.run(
            "inspect", "--format", "{{.State.Running}} {{.State.Pid}} {{.State.OOMKilled}}", name
        )
        words = done.stdout.split()
        if done.returncode != 0 or len(words) != 3:
            return False, None, False
        pid = int(words[1]) if words[1].isdigit() and words[1] != "0" else None
        return words[0] == "true", pid, words[2] == "true"

    def remove(self, *names: str) -> None:
        if names:
            self.run("rm", "--force", *names, timeout=60)


def find_engine(choice: EngineName | None) -> Engine:
    """The engine named, or the first of podman and docker found working here."""
    if choice is not None and choice not in ENGINES:
        raise ConfigurationError(f"engine must be 'podman' or 'docker', got {choice!r}")
    reasons = []
    for name in (choice,) if choice is not None else ENGINES:
        path = shutil.which(name)
        if path is None:
            reasons.append(f"{name} is not installed")
            continue
        engine, why = _probe(name, path)
        if engine is not None:
            return engine
        reasons.append(why)
    raise ConfigurationError(f"ContainerSandbox found no engine: {'; '.join(reasons)}. {_INSTALL}")


@functools.cache
def _probe(name: EngineName, path: str) -> tuple[Engine | None, str]:
    template = (
        "{{.Host.Security.Rootless}} {{.Host.CgroupsVersion}}"
        if name == "podman"
        else "{{.SecurityOptions}} {{.CgroupVersion}}"
    )
    try:
        done = subprocess.run(
            [path, "info", "--format", template],
            capture_output=True,
            text=True,
            check=False,
            timeout=_PROBE_SECONDS,
            stdin=subprocess.DEVNULL,
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        return None, f"{name} did not answer ({exc})"
    if done.returncode != 0:
        return None, f"{name} does not work here ({_first_line(done.stderr)})"
    words = done.stdout.split()
    version = words[-1] if words else ""
    rootless = "rootless" in done.stdout if name == "docker" else words[:1] == ["true"]
    cgroup_version = 2 if version in ("v2", "2") else 1
    return Engine(name, path, rootless, cgroup_version), ""


def _first_line(text: str) -> str:
    lines = text.strip().splitlines()
    return lines[-1][:300] if lines else "no message"


# Keeps the names it is given until this process ends (the end of its pipe), then
# removes those containers, and with them every process in them.
_WATCHER = (
    'names=""; while read -r name; do names="$names $name"; done; '
    '[ -z "$names" ] || "$0" rm --force $names >/dev/null 2>&1'
)
_WATCHERS: dict[tuple[str, str | None], subprocess.Popen[bytes]] = {}
_WATCHED: dict[tuple[str, str | None], list[str]] = {}


def watch(engine: Engine, name: str) -> None:
    """Have container `name` removed when this process ends, however it ends (`kill -9`
    too): a watcher in a session of its own holds a pipe from this process and removes
    the containers it was told of once the pipe closes. A command of a tether that was
    killed would otherwise run on, with no time limit, in the workspace. A watcher that
    died is replaced, and told every name again."""
    key = (engine.path, os.environ.get("DOCKER_HOST") or os.environ.get("CONTAINER_HOST"))
    names = _WATCHED.setdefault(key, [])
    names.append(name)
    watcher = _WATCHERS.get(key)
    told = names[-1:]
    if watcher is None or watcher.poll() is not None:
        watcher = _WATCHERS[key] = subprocess.Popen(
            ["/bin/sh", "-c", _WATCHER, engine.path],
            stdin=subprocess.PIPE,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,  # not in this process's group: a kill of it spares it
        )
        told = names
    assert watcher.stdin is not None
    try:
        watcher.stdin.write("".join(f"{n}\n" for n in told).encode())
        watcher.stdin.flush()
    except BrokenPipeError:  # it died just now: the next start has a new one told all
        pass


@functools.cache
def this_owner() -> str:
    """Who owns the containers this process starts: the machine's boot, this process's
    pid namespace, its pid and its start time."""
    return ":".join(
        (_boot_id(), _pid_namespace(os.getpid()), str(os.getpid()), _started(os.getpid()))
    )


def owner_alive(owner: str) -> bool | None:
    """Whether the process `owner` names still runs: None when it is another machine's
    or another pid namespace's, which this one cannot tell."""
    parts = owner.split(":")
    if len(parts) != 4 or not parts[2].isdigit():
        return None
    boot, namespace, pid, started = parts
    if boot != _boot_id() or namespace != _pid_namespace(os.getpid()):
        return None
    return _started(int(pid)) == started != ""


def process_key(pid: int) -> str:
    """A process of this machine, by its pid and start time: no other has both."""
    return f"{pid}:{_started(pid)}"


def process_key_alive(key: str) -> bool:
    """Whether the process `process_key` named still runs (read from /proc: no engine
    call, so each command can ask)."""
    pid, _, started = key.partition(":")
    return pid.isdigit() and started != "" and _started(int(pid)) == started


@functools.cache
def _boot_id() -> str:
    try:
        with open("/proc/sys/kernel/random/boot_id", encoding="ascii") as source:
            return source.read().strip()
    except OSError:
        return "unknown"


def _pid_namespace(pid: int) -> str:
    try:
        return str(os.stat(f"/proc/{pid}/ns/pid").st_ino)
    except OSError:
        return "unknown"


def _started(pid: int) -> str:
    found = start_time(pid)
    return "" if found is None else str(found)
