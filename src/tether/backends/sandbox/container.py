"""Commands in a container (podman or docker): `ContainerSandbox`.

The workspace directory is the backend's `/` for the file tools, which work on it from
this side like `LocalSandbox`'s (all of `FilesystemBackend`'s guarantees), and is
bind-mounted at `/workspace` for commands. A container is started for a thread at its
first command and kept for the thread's later ones (its subagents' too); at most
`max_containers` are kept, the least recently used removed first. Its own system is
read-only, as `LocalSandbox`'s is; its `/tmp` is its own for the thread's commands.

What holds for a command, as for `LocalSandbox`'s: no network unless the sandbox was
made with `network=True`; memory, processes and CPU bounded by the engine's cgroup for
the container; no capabilities and no way to gain any (`no-new-privileges`); commands
run as the workspace's owner (root, with no capabilities, for a workspace root owns);
every `.git` and git directory read-only, those a command makes disabled once it ends,
`.tether` hidden; what a command leaves running is killed when it ends. The container's
first process runs as another user, which a command can neither signal nor trace.

The mounts are fixed when a container starts: when the workspace's git directories or
protected paths change, the thread's container is replaced (and the result says so).
When tether ends, however it ends, a watcher removes its containers (see `engines`): a
command of a tether killed with `kill -9` does not run on. The next sandbox on the
workspace disables what that command made, says so, and starts a fresh container.
"""

from __future__ import annotations

import asyncio
import atexit
import contextlib
import functools
import hashlib
import json
import os
import stat
import subprocess
import time
import uuid
import weakref
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from tether.backends.base import DEFAULT_MAX_FILE_BYTES, finished
from tether.backends.hostfs import Root, state_home
from tether.backends.sandbox import cgroups, gitdirs, records
from tether.backends.sandbox.base import ExecResult, current_session
from tether.backends.sandbox.command import Outcome, git_refusal
from tether.backends.sandbox.engines import (
    LABEL,
    Engine,
    EngineName,
    find_engine,
    owner_alive,
    process_key,
    process_key_alive,
    this_owner,
    watch,
)
from tether.backends.sandbox.local import (
    WORKSPACE,
    _drain,
    _protected_paths,
    _result,
    _sandbox_user,
    _Shell,
    tethers_own,
)
from tether.backends.sandbox.output import Output
from tether.backends.sandbox.seccomp import container_profile
from tether.errors import ConfigurationError

__all__ = ["ContainerSandbox"]

_KEEPALIVE = ("/bin/sh", "-c", "trap 'exit 0' TERM; while :; do sleep 86400 & wait $!; done")
# Runs the command, then kills what it left (all the command user's processes but this
# one; the first process is another user's).
_WRAPPER = '/bin/sh -c "$1" </dev/null; status=$?; kill -9 -1 2>/dev/null; exit $status'
_OTHER_USER = 65534
_MEMORY_LOOK_SECONDS = 0.1


@dataclass(frozen=True, slots=True)
class _Plan:
    """What a container's mounts protect: fixed when it starts."""

    git: tuple[tuple[str, gitdirs.Identity], ...]
    read_only: tuple[tuple[str, gitdirs.Identity], ...]
    hidden_dirs: tuple[str, ...]
    hidden_files: tuple[str, ...]


@dataclass(slots=True)
class _Running:
    name: str
    plan: _Plan
    first: str  # its first process, by pid and start time (see `engines.process_key`)
    cgroups: dict[str, str] = field(default_factory=dict)  # controller: directory


class ContainerSandbox(_Shell):
    """The workspace directory, with commands run in a container of `image` (a name the
    engine knows) or of `rootfs` (a directory holding a root file system; podman only,
    for docker `docker import` it first).

    `engine` is "podman" or "docker" (the first working one of the two by default).
    `network=True` gives commands the engine's default network. `memory_mb`, `cpus`
    and `max_processes` bound the container, and so each command with everything it
    starts; `timeout_seconds` bounds each command (one that runs out of time has its
    container replaced). `max_output_chars`, `read_only` and `hidden` work as for
    `LocalSandbox`. The image needs `/bin/sh` and `sleep`.
    """

    def __init__(
        self,
        workspace: str | os.PathLike[str],
        *,
        image: str | None = None,
        rootfs: str | os.PathLike[str] | None = None,
        engine: EngineName | None = None,
        network: bool = False,
        timeout_seconds: float = 120,
        memory_mb: int = 2_048,
        cpus: float = 1.0,
        max_processes: int = 256,
        max_output_chars: int = 30_000,
        max_file_bytes: int = DEFAULT_MAX_FILE_BYTES,
        read_only: Sequence[str] = (),
        hidden: Sequence[str] = ("/.tether",),
        max_containers: int = 4,
    ) -> None:
        super().__init__(
            workspace,
            timeout_seconds=timeout_seconds,
            max_output_chars=max_output_chars,
            max_file_bytes=max_file_bytes,
        )
        if (image is None) == (rootfs is None):
            raise ConfigurationError("ContainerSandbox needs one of image= and rootfs=")
        if min(memory_mb, max_processes, max_containers) <= 0 or not cpus > 0:
            raise ConfigurationError(
                "memory_mb, cpus, max_processes and max_containers must be positive"
            )
        self.engine: Engine = find_engine(engine)
        if self.engine.rootless and self.engine.cgroup_version == 1:
            raise ConfigurationError(
                f"rootless {self.engine.name} on cgroup v1 enforces no memory, CPU or process "
                "limit, and ContainerSandbox will not claim limits that do not hold: run it "
                "as root, on a machine with cgroup v2, or use LocalSandbox"
            )
        self.image = image
        self.rootfs = None if rootfs is None else _root_filesystem(rootfs, self.engine)
        self.network = network
        self.memory_mb = memory_mb
        self.cpus = cpus
        self.max_processes = max_processes
        self.max_containers = max_containers
        self.read_only = _protected_paths(read_only, "read_only")
        self.hidden = (*_protected_paths(hidden, "hidden"), *tethers_own(self.root))
        if not _mountable(str(self.root)):
            raise ConfigurationError(
                f"the container engines cannot mount {str(self.root)!r}: its path holds a "
                "':', ',' or control character"
            )
        self.uid, self.gid = _sandbox_user(self.root)
        self.limits_by = "cgroup"
        self._workspace_key = _workspace_key(self.root)
        self._running: OrderedDict[str, _Running] = OrderedDict()
        self._serial: asyncio.Lock | None = None
        self._swept = False
        _LIVE.add(self)

    # -- the public face -----------------------------------------------------------

    def close(self) -> None:
        """Remove every container this sandbox started. Blocks while the engine works:
        call it off the event loop (`await asyncio.to_thread(sandbox.close)`)."""
        names = [running.name for running in self._running.values()]
        self._running.clear()
        with contextlib.suppress(OSError, subprocess.SubprocessError):
            self.engine.remove(*names)

    def __enter__(self) -> ContainerSandbox:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()

    async def execute(self, command: str, *, timeout_seconds: float | None = None) -> ExecResult:
        limit = self._limit(timeout_seconds)
        deadline = time.monotonic() + limit
        if self._serial is None:
            self._serial = asyncio.Lock()
        async with self._serial:  # one at a time: a container has one command user
            lock = await records.lock_workspace(self.host, deadline)
            if lock is None:
                return ExecResult(
                    output=f"[not run: another command in this workspace was still running "
                    f"after {limit:g} s]",
                    exit_code=None,
                )
            try:
                return await self._execute(command, current_session(), limit, deadline)
            finally:
                os.close(lock)

    def held(self, session: str) -> dict[str, str] | None:
        """What this sandbox keeps for thread `session`: its container (recorded in the
        thread, see `tether.state.SANDBOX`)."""
        running = self._running.get(session)
        return None if running is None else {"container": running.name}

    async def resume(self, session: str, kept: object) -> str | None:
        """A run of a thread that had container `kept`: the same one when this sandbox
        still runs it; else a word that the command runs in a fresh one (a container
        ends with the process that started it: its watcher removes it)."""
        if not isinstance(kept, dict) or self.held(session) == kept:
            return None
        return (
            f"this thread's container from before ({kept.get('container')}) is gone: the "
            "command ran in a fresh one, without what earlier commands left in its /tmp"
        )

    # -- one command -----------------------------------------------------------------

    async def _execute(
        self, command: str, session: str, limit: float, deadline: float
    ) -> ExecResult:
        ready = await finished(asyncio.to_thread(self._prepare, session))
        if isinstance(ready, str):
            return ExecResult(output=f"[not run: {ready}]", exit_code=None)
        running, known, record, notes = ready
        output = Output(self.host, self.max_output_chars)
        process: asyncio.subprocess.Process | None = None
        timed_out = over_memory = False
        try:
            argv = self.engine.argv(
                "exec", "--user", f"{self.uid}:{self.gid}", "--workdir", WORKSPACE,
                running.name, "/bin/sh", "-c", _WRAPPER, "tether", command,
            )  # fmt: skip
            process = await asyncio.create_subprocess_exec(
                *argv,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
            timed_out, over_memory = await _watch(process, output, running, deadline)
        finally:
            cut_short = process is None or process.returncode is None or over_memory
            if process is not None and process.returncode is None:
                with contextlib.suppress(ProcessLookupError):
                    process.kill()
                await finished(process.wait())
            output.close()
            outcome = await finished(
                asyncio.to_thread(self._finish, session, running, known, record, cut_short)
            )
        notes += outcome.notes
        if cut_short:
            notes.append("its container was stopped; the next command starts a fresh one")
        killed = None
        if over_memory:
            killed = f"its processes together went over memory_mb ({self.memory_mb} MB of memory)"
        done = Outcome("memory" if over_memory else None, killed, tuple(notes))
        code = None if process is None or over_memory else process.returncode
        return _result(output, code, done, limit=limit, timed_out=timed_out)

    def _prepare(
        self, session: str
    ) -> str | tuple[_Running, gitdirs.GitScan, str | None, list[str]]:
        """Under the workspace's lock: sweep what a killed tether left, put right what
        its command made, and have the session's container running with the mounts the
        workspace needs now."""
        notes: list[str] = []
        orphaned = records.orphaned(self.host)
        if not self._swept or orphaned:  # before anything is looked at
            self._sweep()
            self._swept = True
        if orphaned:
            notes.append(
                "a command of a tether that was killed never finished here: its container "
                "was removed, and this command runs in a fresh one"
            )
        notes += records.recover(self.host)
        hidden = {path for path in self.hidden if self._found(path)[0] == "dir"}
        known = gitdirs.scan(self.host, frozenset(hidden))
        refusal = git_refusal(known)
        if refusal is not None:
            return refusal
        plan = _Plan(
            git=tuple(sorted(known.paths.items())),
            # A symbolic link is nothing to protect (the engine would mount its target)
            read_only=tuple(
                (path, found[1])
                for path in self.read_only
                if (found := self._found(path))[0] in ("dir", "file") and found[1] is not None
            ),
            hidden_dirs=tuple(sorted(hidden)),
            hidden_files=tuple(p for p in self.hidden if self._found(p)[0] == "file"),
        )
        unmountable = [
            path
            for path in (
                *(p for p, _ in (*plan.git, *plan.read_only)),
                *plan.hidden_dirs,
                *plan.hidden_files,
            )
            if not _mountable(path)
        ]
        if unmountable:
            return (
                f"the container engine cannot mount {unmountable[0]!r} (a ':', ',' or control "
                "character in its name), which tether keeps read-only to commands: rename it"
            )
        running = self._running.get(session)
        if running is not None and not process_key_alive(running.first):
            notes.append("its container had stopped; a fresh one was started")
            self._drop(session)
            running = None
        if running is not None and running.plan != plan:
            notes.append(
                "the workspace's git directories or protected paths changed, so its "
                "container was replaced (what earlier commands left outside /workspace is gone)"
            )
            self._drop(session)
            running = None
        if running is None:
            try:
                running = self._start(session, plan)
            except ConfigurationError as exc:
                return str(exc)
        self._running.move_to_end(session)
        record = records.write(self.host, known, hidden)
        return running, known, record, notes

    def _finish(
        self,
        session: str,
        running: _Running,
        known: gitdirs.GitScan,
        record: str | None,
        cut_short: bool,
    ) -> Outcome:
        """After a command, however it ended: nothing of it left running, what it made
        that git would take for a repository disabled, its record dropped."""
        notes: list[str] = []
        if cut_short:
            self._drop(session)  # its processes may still run: only removing ends them
        elif _leftovers(running, self.uid):
            done = self.engine.run(
                "exec", "--user", f"{self.uid}:{self.gid}", running.name,
                "/bin/sh", "-c", "kill -9 -1", timeout=30,
            )  # fmt: skip
            if done.returncode not in (0, 1) or _leftovers(running, self.uid):
                self._drop(session)
                notes.append("tether could not make sure every process of it had ended")
        done_git = gitdirs.disable_new(self.host, frozenset(running.plan.hidden_dirs), known)
        notes += gitdirs.notes(done_git)
        if record is not None:
            records.drop(record)
        return Outcome(notes=tuple(notes))

    # -- containers ------------------------------------------------------------------

    def _start(self, session: str, plan: _Plan) -> _Running:
        while len(self._running) >= self.max_containers:
            oldest = next(iter(self._running))
            self._drop(oldest)
        name = f"tether-{uuid.uuid4().hex[:16]}"
        watch(self.engine, name)
        done = self.engine.run(*self._run_args(name, session, plan), timeout=120)
        if done.returncode != 0:
            self.engine.remove(name)
            message = (done.stderr.strip() or done.stdout.strip())[-500:]
            raise ConfigurationError(f"the container could not start: {message}")
        _, pid, _ = self.engine.state(name)
        wrong = "its first process is gone" if pid is None else _misplaced(pid, self.host, plan)
        if wrong is not None:
            # The engine resolves each mount's source again, after the scan: something
            # changed the workspace meanwhile (a process of a tether that was killed).
            self.engine.remove(name)
            raise ConfigurationError(
                f"the workspace changed while the container started ({wrong}); run it again"
            )
        assert pid is not None
        running = _Running(name, plan, process_key(pid), _cgroups_of(pid))
        self._running[session] = running
        return running

    def _run_args(self, name: str, session: str, plan: _Plan) -> list[str]:
        memory = f"{self.memory_mb}m"
        files = _hard_limit("nofile", 65_536)
        processes = _hard_limit("nproc", 32_768)  # podman lowers its own to this
        other = _OTHER_USER if self.uid != _OTHER_USER else 0
        args = [
            "run", "--detach", "--name", name,
            "--label", f"{LABEL}=1",
            "--label", f"tether.workspace={self._workspace_key}",
            "--label", f"tether.session={_digest(session)}",
            "--label", f"tether.owner={this_owner()}",
            *(() if self.network else ("--network", "none")),
            "--memory", memory, "--memory-swap", memory,
            "--cpus", f"{self.cpus:g}",
            "--pids-limit", str(self.max_processes),
            # Its rlimits no higher than this process's: without CAP_SYS_RESOURCE the
            # runtime cannot raise them, and the engines' defaults are higher.
            "--ulimit", f"nofile={files}:{files}",
            "--ulimit", f"nproc={processes}:{processes}",
            "--ulimit", f"fsize={self.max_file_bytes * 10}:{self.max_file_bytes * 10}",
            "--cap-drop", "all",
            "--security-opt", "no-new-privileges",
            "--security-opt", f"seccomp={_profile_file()}",
            "--user", f"{other}:{other}",
            "--hostname", "sandbox",
            # Its own system read-only, as LocalSandbox's is: nothing a command does there
            # outlives it (a changed `sleep` would run as the first process's user).
            "--read-only",
            "--tmpfs", f"/tmp:rw,nosuid,nodev,size={memory},mode=1777",
            "--tmpfs", "/var/tmp:rw,nosuid,nodev,size=64m,mode=1777",
            "--tmpfs", "/run:rw,nosuid,nodev,size=16m,mode=755",
            "--volume", f"{self.root}:{WORKSPACE}:rw",
        ]  # fmt: skip
        for path, _ in plan.git:
            args += ["--volume", f"{self.root}{path}:{WORKSPACE}{path}:ro"]
        for path, _ in plan.read_only:
            args += ["--volume", f"{self.root}{path}:{WORKSPACE}{path}:ro"]
        # podman fills a tmpfs with what the directory under it holds unless told not to
        empty = ",notmpcopyup" if self.engine.name == "podman" else ""
        for path in plan.hidden_dirs:
            args += ["--tmpfs", f"{WORKSPACE}{path}:rw,nosuid,nodev,size=65536{empty}"]
        for path in plan.hidden_files:
            args += ["--volume", f"/dev/null:{WORKSPACE}{path}:ro"]
        args += [
            "--workdir", WORKSPACE,
            "--env", f"HOME={WORKSPACE}", "--env", "TMPDIR=/tmp", "--env", "LANG=C.UTF-8",
        ]  # fmt: skip
        if self.rootfs is not None:
            args += ["--rootfs", self.rootfs]
        else:
            assert self.image is not None
            args += ["--", self.image]
        return [*args, *_KEEPALIVE]

    def _drop(self, session: str) -> None:
        running = self._running.pop(session, None)
        if running is not None:
            self.engine.remove(running.name)

    def _sweep(self) -> None:
        """Remove the containers of tethers that are gone: those their watcher could not
        remove, and those of a boot before this one. A running one whose owner is on
        another machine or in another pid namespace is not this tether's to judge."""
        gone = []
        for container in self.engine.listed():
            alive = owner_alive(container.labels.get("tether.owner", ""))
            if alive is False or (alive is None and not container.running):
                gone.append(container.name)
        self.engine.remove(*gone)

    def _found(self, path: str) -> tuple[str | None, gitdirs.Identity | None]:
        """What `path` is ("dir", "file", "other" or None), and its identity."""
        try:
            found = self.host.lstat(path)
        except OSError:
            return None, None
        if found is None:
            return None, None
        kind = "dir" if stat.S_ISDIR(found.st_mode) else "file"
        if not stat.S_ISDIR(found.st_mode) and not stat.S_ISREG(found.st_mode):
            kind = "other"
        return kind, (found.st_dev, found.st_ino)


_LIVE: weakref.WeakSet[ContainerSandbox] = weakref.WeakSet()


@atexit.register
def _close_all() -> None:
    for sandbox in list(_LIVE):
        sandbox.close()


def _root_filesystem(rootfs: str | os.PathLike[str], engine: Engine) -> str:
    if engine.name != "podman":
        raise ConfigurationError(
            f"rootfs= works with podman; for {engine.name}, make an image of the directory "
            f"(tar -C DIR -c . | {engine.name} import - NAME) and pass image='NAME'"
        )
    path = Path(rootfs).resolve()
    if not (path / "bin" / "sh").exists():
        raise ConfigurationError(f"rootfs {str(rootfs)!r} is not a root file system (no /bin/sh)")
    return str(path)


def _mountable(path: str) -> bool:
    """Whether the engines' `--volume SOURCE:TARGET:OPTIONS` and `--tmpfs TARGET:OPTIONS`
    take `path` as it is (they split on ':' and ',')."""
    return not any(c in ":," or ord(c) < 32 or ord(c) == 127 for c in path)


def _digest(session: str) -> str:
    return hashlib.sha256(session.encode()).hexdigest()[:24]


def _profile_file() -> str:
    """The seccomp profile's file (see `seccomp.container_profile`), named by its content,
    in tether's state directory: the engines read it when a container starts. Checked
    each time, and written again when anything else is found there."""
    text = _profile_text()
    directory = Path(state_home()) / "tether" / "seccomp"
    path = directory / f"{hashlib.sha256(text.encode()).hexdigest()[:16]}.json"
    try:
        if path.read_text(encoding="utf-8") == text:
            return str(path)
    except OSError:
        pass
    directory.mkdir(parents=True, exist_ok=True, mode=0o700)
    partial = path.with_suffix(f".{os.getpid()}.partial")
    partial.write_text(text, encoding="utf-8")
    os.replace(partial, path)
    return str(path)


@functools.cache
def _profile_text() -> str:
    return json.dumps(container_profile(), sort_keys=True)


def _workspace_key(root: Path) -> str:
    """The workspace, by its device, inode and path: a directory made later in the place
    of one removed can have its inode."""
    st = os.stat(root)
    return f"{st.st_dev}-{st.st_ino}-{_digest(str(root))[:12]}"


def _hard_limit(name: str, most: int) -> int:
    import resource

    which = {"nofile": resource.RLIMIT_NOFILE, "nproc": resource.RLIMIT_NPROC}[name]
    hard = resource.getrlimit(which)[1]
    return most if hard == resource.RLIM_INFINITY else min(hard, most)


def _misplaced(pid: int, host: Root, plan: _Plan) -> str | None:
    """What the container at `pid` has mounted other than the plan says, seen from inside
    it with no symbolic link followed; None when all is in place."""
    top = os.open(f"/proc/{pid}/root", os.O_PATH | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        workspace = _beneath(top, WORKSPACE)
        if gitdirs.identity(workspace) != gitdirs.identity(os.fstat(host.fd)):
            return f"{WORKSPACE} is not the workspace"
        for path, identity in (*plan.git, *plan.read_only):
            if gitdirs.identity(_beneath(top, WORKSPACE + path)) != identity:
                return f"{path} is not what was found there"
        for path in plan.hidden_dirs:  # a file system of its own over it
            found = _beneath(top, WORKSPACE + path)
            if not stat.S_ISDIR(found.st_mode) or found.st_dev == workspace.st_dev:
                return f"{path} is not hidden"
        for path in plan.hidden_files:
            if not stat.S_ISCHR(_beneath(top, WORKSPACE + path).st_mode):
                return f"{path} is not hidden"
    except OSError as exc:
        return f"{exc.strerror}: {exc.filename or 'a mount'}"
    finally:
        os.close(top)
    return None


def _beneath(top: int, path: str) -> os.stat_result:
    """`path` below the directory `top`, each of its components reached without
    following a symbolic link."""
    parts = [part for part in path.split("/") if part]
    directory = top
    try:
        for part in parts[:-1]:
            below = os.open(part, os.O_PATH | os.O_DIRECTORY | os.O_NOFOLLOW, dir_fd=directory)
            if directory != top:
                os.close(directory)
            directory = below
        return os.stat(parts[-1], dir_fd=directory, follow_symlinks=False)
    finally:
        if directory != top:
            os.close(directory)


def _cgroups_of(pid: int) -> dict[str, str]:
    """The directories of the container's cgroups (memory, pids), found from its first
    process: read to count out-of-memory kills and find what a command left."""
    found: dict[str, str] = {}
    with contextlib.suppress(OSError), open(f"/proc/{pid}/cgroup", encoding="utf-8") as source:
        for line in source:
            _, controllers, path = line.rstrip("\n").split(":", 2)
            for controller in controllers.split(",") if controllers else ("",):
                if controller in ("memory", "pids", ""):
                    base = "/sys/fs/cgroup" + (f"/{controller}" if controller else "")
                    found[controller or "unified"] = base + path
    return found


async def _watch(
    process: asyncio.subprocess.Process, output: Output, running: _Running, deadline: float
) -> tuple[bool, bool]:
    """Read the command's output until it ends, its time runs out or the kernel kills a
    process of the container for memory (the whole command goes then, as a tree over its
    limit does in `LocalSandbox`): whether it timed out, and whether memory ended it."""
    before = await asyncio.to_thread(_oom_kills, running)
    reading = asyncio.ensure_future(_drain(process, output, max(0.0, deadline - time.monotonic())))
    try:
        while not reading.done():
            await asyncio.wait([reading], timeout=_MEMORY_LOOK_SECONDS)
            if not reading.done() and await asyncio.to_thread(_oom_kills, running) > before:
                return False, True
        timed_out = reading.result()
    finally:
        reading.cancel()
    return timed_out, await asyncio.to_thread(_oom_kills, running) > before


def _oom_kills(running: _Running) -> int:
    for controller, filename in (("memory", "memory.oom_control"), ("unified", "memory.events")):
        directory = running.cgroups.get(controller)
        if directory is not None and os.path.exists(path := os.path.join(directory, filename)):
            return cgroups.counter(path, "oom_kill")
    return 0


def _leftovers(running: _Running, uid: int) -> bool:
    """Whether a process of the command's user is still in the container (its first
    process is another user's). When the cgroup cannot be read, assume so."""
    directory = running.cgroups.get("pids") or running.cgroups.get("unified")
    if directory is None:
        return True
    try:
        with open(os.path.join(directory, "cgroup.procs"), encoding="ascii") as source:
            pids = source.read().split()
    except OSError:
        return True
    return any(_uid_of(pid) == uid for pid in pids)


def _uid_of(pid: str) -> int | None:
    try:
        with open(f"/proc/{pid}/status", encoding="ascii", errors="replace") as status:
            for line in status:
                if line.startswith("Uid:"):
                    return int(line.split()[1])
    except (OSError, ValueError):
        pass
    return None
