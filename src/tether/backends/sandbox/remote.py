"""A sandbox on another machine (a hosted provider's): `RemoteSandbox`.

A provider's adapter subclasses it with three methods on the remote machine's own paths:
`run` (a shell command, to its end or its time limit), `put` and `get` (a file's bytes).
Everything else a `SandboxBackend` needs is built here on those three: the file tools
work on `workdir` through `find` and `stat` run there (GNU findutils and coreutils, as
Debian, Ubuntu and most images have), grep downloads the text files it searches and
matches them here with the same RE2 patterns as every other backend, and long command
output is cut for the model and kept whole in the sandbox, as `LocalSandbox` does.

The remote machine is the boundary: tether cannot see into it, so what isolates a
command there (network, limits, users) is the provider's to say. Adapters register in
the `tether.sandboxes` entry point group (see `tether.backends.sandbox.providers`).
"""

from __future__ import annotations

import asyncio
import shlex
import uuid
from abc import ABC, abstractmethod
from collections.abc import Callable
from typing import Any

from tether.backends.base import DEFAULT_MAX_FILE_BYTES, FileInfo, GrepHit, as_given
from tether.backends.errors import BackendError
from tether.backends.paths import clean
from tether.backends.sandbox.base import ExecResult, current_session, session_of
from tether.backends.sandbox.output import OUTPUT_DIR
from tether.backends.search import compile_pattern, grep_text, is_binary
from tether.errors import ConfigurationError

__all__ = ["RemoteSandbox"]

# Type, size, modification time and the path below the start (last: a name may hold a
# tab), then the target of a link: two NUL-ended strings an entry.
_FIELDS = "%y\\t%s\\t%T@\\t%P\\0%l\\0"
_GREP_FILES = 2_000  # beyond this many files under the path, grep asks for a narrower one
_DOWNLOADS = 8  # files fetched at once by grep
_SAVED_OUTPUT_LIMIT = 50 * 1024 * 1024  # a command's full output is kept up to this, as locally


class RemoteSandbox(ABC):
    """Subclass with `run`, `put` and `get` to make a provider's machine a sandbox
    backend. `workdir` is the remote directory that is `/` for the file tools and the
    current directory of commands; `timeout_seconds` bounds each command (the model may
    ask for less, never more); `max_output_chars` is what the model sees of an output.
    """

    network: bool | None = None  # what the prompt says of the network: None, unknown

    def __init__(
        self,
        *,
        workdir: str = "/workspace",
        timeout_seconds: float = 120,
        max_output_chars: int = 30_000,
        max_file_bytes: int = DEFAULT_MAX_FILE_BYTES,
    ) -> None:
        if not workdir.startswith("/") or timeout_seconds <= 0 or max_output_chars < 100:
            raise ConfigurationError(
                "workdir must be absolute, timeout_seconds positive and max_output_chars at "
                "least 100"
            )
        self.workdir = workdir.rstrip("/") or "/"
        self.timeout_seconds = timeout_seconds
        self.max_output_chars = max_output_chars
        self.max_file_bytes = max_file_bytes
        self.shown: Callable[[str], str] = as_given
        self._session: str | None = None
        self._kept: dict[str, Any] | None = None  # the bound run's data (see `state.SANDBOX`)

    # -- what an adapter gives -------------------------------------------------------

    @abstractmethod
    async def run(self, command: str, timeout_seconds: float) -> tuple[str, int | None]:
        """Run `command` with a shell on the remote machine and wait for it: its output
        (stdout and stderr) and exit code, None for a command killed at the limit."""

    @abstractmethod
    async def put(self, path: str, data: bytes) -> None:
        """Write the remote file `path` (an absolute path there), making its parents."""

    @abstractmethod
    async def get(self, path: str) -> bytes | None:
        """The remote file `path`'s bytes, None when there is no such file."""

    def held(self, session: str) -> Any:
        """What this sandbox keeps for thread `session`, recorded in the thread so that
        a later run can take it back (`resume`): JSON, or None. An adapter whose
        machines outlive a process (a hosted sandbox's id) says it here."""
        return None

    async def resume(self, session: str, kept: Any) -> str | None:
        """Take back for thread `session` what an earlier run's `held` said it kept,
        where it can; a note for the model where it cannot (None: nothing to say)."""
        return None

    # -- commands ----------------------------------------------------------------------

    async def execute(self, command: str, *, timeout_seconds: float | None = None) -> ExecResult:
        limit = min(self.timeout_seconds, timeout_seconds or self.timeout_seconds)
        where = shlex.quote(self.workdir)
        output, code = await self.run(f"mkdir -p {where} && cd {where} && {command}", limit)
        if len(output) <= self.max_output_chars:
            return ExecResult(output=output, exit_code=code, timed_out=code is None)
        path: str | None = f"{OUTPUT_DIR}/execute-{uuid.uuid4().hex[:12]}.txt"
        whole = output.encode("utf-8", errors="replace")[:_SAVED_OUTPUT_LIMIT]
        try:
            await self.put(self._remote(str(path)), whole)
            where = (
                f"the full output is in {path}: read it in parts with read_file or search it "
                "with grep"
            )
        except (BackendError, OSError) as exc:  # the command ran: its output and code stand
            path, where = None, f"the rest could not be saved: {exc}"
        note = f"\n[output cut at {self.max_output_chars} characters; {where}]"
        return ExecResult(
            output=output[: self.max_output_chars] + note,
            exit_code=code,
            truncated=True,
            timed_out=code is None,
            full_output=path,
        )

    async def upload(self, path: str, data: bytes) -> None:
        await self.write(path, data)

    async def download(self, path: str) -> bytes:
        return await self.read(path)

    # -- files -------------------------------------------------------------------------

    def bind(self, state: Any) -> RemoteSandbox:
        """This sandbox, for one run: its file operations and commands go to the run's
        session (its thread's), as `execute` does (see `base.session`)."""
        view = self.named(self.shown)
        view._session = session_of(state)
        view._kept = state.root.data
        return view

    def session(self) -> str:
        """Whose machine an operation is on: the bound run's session, or the one that
        `execute` runs in now. An adapter with a machine a thread keys them by this."""
        return self._session or current_session()

    def named(self, shown: Callable[[str], str]) -> RemoteSandbox:
        """This sandbox, naming paths in its messages with `shown` (a shallow copy)."""
        view = object.__new__(type(self))
        view.__dict__.update(self.__dict__)
        view.shown = shown
        return view

    async def read(self, path: str) -> bytes:
        path = clean(path)
        found = await self.stat(path)
        if found is None:
            raise BackendError(f"No such file: {self.shown(path)}")
        if found.is_dir:
            raise BackendError(f"{self.shown(path)} is a directory. List it with ls.")
        if found.link is not None:
            raise BackendError(
                f"{self.shown(path)} is a symbolic link to {found.link}; links are not "
                "followed: read what it names"
            )
        if found.size > self.max_file_bytes:
            raise BackendError(
                f"{self.shown(path)} is {found.size} bytes, over the {self.max_file_bytes} "
                "byte limit."
            )
        data = await self.get(self._remote(path))
        if data is None:
            raise BackendError(f"No such file: {self.shown(path)}")
        if len(data) > self.max_file_bytes:  # it grew meanwhile
            raise BackendError(
                f"{self.shown(path)} is {len(data)} bytes, over the {self.max_file_bytes} "
                "byte limit."
            )
        return data

    async def write(self, path: str, data: bytes) -> None:
        path = clean(path)
        if path == "/":
            raise BackendError(f"'{self.shown('/')}' is a directory; give a file path.")
        if len(data) > self.max_file_bytes:
            raise BackendError(
                f"The content is {len(data)} bytes, over the {self.max_file_bytes} byte limit."
            )
        found = await self.stat(path)  # and no link on the way (stat refuses one)
        if found is not None and (found.is_dir or found.link is not None):
            what = "a directory" if found.is_dir else f"a symbolic link to {found.link}"
            raise BackendError(f"{self.shown(path)} is {what}; give a file path.")
        await self.put(self._remote(path), data)

    async def stat(self, path: str) -> FileInfo | None:
        path = clean(path)
        found = await self._find(path, "-maxdepth", "0")
        return found[0] if found else None

    async def ls(self, path: str) -> list[FileInfo]:
        path = clean(path)
        found = await self.stat(path)
        if found is None:
            if path == "/":
                return []
            raise BackendError(f"No such directory: {self.shown(path)}")
        if not found.is_dir:
            raise BackendError(
                f"{self.shown(path)} is a file, not a directory. Read it with read_file."
            )
        return await self._find(path, "-mindepth", "1", "-maxdepth", "1")

    async def files(self, path: str) -> list[FileInfo]:
        """Every regular file below `path`, none inside a `.git` (as on every backend)."""
        return await self._find(
            clean(path), "-mindepth", "1", "-name", ".git", "-prune", "-o", "-type", "f"
        )

    async def grep(
        self, pattern: str, path: str, *, literal: bool = False, ignore_case: bool = False
    ) -> list[GrepHit]:
        path = clean(path)
        regex = compile_pattern(pattern, literal=literal, ignore_case=ignore_case)
        found = await self.stat(path)
        if found is None or found.link is not None:
            return []
        listed = [found] if not found.is_dir else await self.files(path)
        if len(listed) > _GREP_FILES:
            raise BackendError(
                f"{self.shown(path)} holds {len(listed)} files, more than grep searches in a "
                f"remote sandbox ({_GREP_FILES}): search a directory below it, or run grep "
                "with execute"
            )
        gate = asyncio.Semaphore(_DOWNLOADS)

        async def searched(info: FileInfo) -> list[GrepHit]:
            """One file's hits: at most `_DOWNLOADS` files are held at once."""
            if info.size > self.max_file_bytes:
                return []
            async with gate:
                data = await self.get(self._remote(info.path)) or b""
                if is_binary(data):
                    return []
                return await asyncio.to_thread(grep_text, info.path, data, regex)

        found_hits = await asyncio.gather(*(searched(info) for info in listed))
        return [hit for hits in found_hits for hit in hits]

    # -- on the remote machine -----------------------------------------------------------

    def _remote(self, path: str) -> str:
        return self.workdir + path if self.workdir != "/" else path

    async def _find(self, path: str, *tests: str) -> list[FileInfo]:
        """What GNU find says of `path` (with `tests`), as FileInfo sorted by path; none
        when nothing is there. A symbolic link among the directories on the way, a find
        that fails or runs out of time, are a BackendError: never a listing that only
        looks complete."""
        parts = [part for part in path.split("/") if part]
        on_the_way = [self._remote("/" + "/".join(parts[:n])) for n in range(1, len(parts))]
        target = shlex.quote(self._remote(path))
        checks = "".join(
            f"[ -L {shlex.quote(p)} ] && {{ printf 'link\\0%s' {shlex.quote(p)}; exit 0; }}; "
            for p in on_the_way
        )
        command = (
            f"{checks}[ -e {target} ] || [ -L {target} ] || {{ printf 'absent'; exit 0; }}; "
            f"find {target} {' '.join(tests)} -printf '{_FIELDS}'; printf 'status\\0%s' $?"
        )
        output, code = await self.run(command, self.timeout_seconds)
        if code is None:
            raise BackendError(
                f"listing {self.shown(path)} took longer than {self.timeout_seconds:g} s"
            )
        if output == "absent":
            return []
        strings = output.split("\0")
        if strings[:1] == ["link"]:
            link = strings[1][len(self.workdir) :] if len(strings) > 1 else "a directory"
            raise BackendError(
                f"{self.shown(link or '/')} is a symbolic link: a remote sandbox's file tools do "
                f"not follow links (on the way to {self.shown(path)})"
            )
        if strings[-2:-1] != ["status"] or strings[-1] != "0":
            raise BackendError(
                f"listing {self.shown(path)} failed in the sandbox (find ended with "
                f"{strings[-1][:200] if strings[-2:-1] == ['status'] else 'no status'}); is "
                "GNU find there?"
            )
        entries = []
        for record, link in zip(strings[0:-2:2], strings[1:-2:2], strict=False):
            fields = record.split("\t", 3)
            if len(fields) != 4:
                continue
            kind, size, modified, below = fields
            name = path if not below else (path.rstrip("/") + "/" + below)
            try:
                entries.append(
                    FileInfo(
                        name,
                        is_dir=kind == "d",
                        size=int(size) if kind == "f" else 0,
                        modified=float(modified),
                        link=link if kind == "l" else None,
                    )
                )
            except ValueError:
                continue
        return sorted(entries, key=lambda entry: entry.path)
