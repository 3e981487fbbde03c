"""Daytona's hosted sandboxes through its official SDK: `DaytonaSandbox`
(`pip install 'tether[daytona]'`).

Each thread gets a Daytona sandbox of its own, created at its first command or file
operation from `params` (the SDK's `CreateSandboxFromSnapshotParams` or
`CreateSandboxFromImageParams`; Daytona's default snapshot when not given), labelled
as tether's and the thread's, and kept for the thread's later operations (its
subagents' too, those declared with `SubAgent(...)`). The thread records the sandbox's
id: a later run of it, in this process or another, takes the same sandbox back
(started again if Daytona stopped it) when it is still tether's and the thread's, and
says so; one that is gone is replaced, and that is said at the next command too.
`close()` / `aclose()` delete the sandboxes this object created or took back.

Or give one sandbox you made yourself (`sandbox=`): all threads share it, it is never
recorded, taken back or deleted. The SDK reads `DAYTONA_API_KEY` (and `DAYTONA_API_URL`,
`DAYTONA_TARGET`) unless `config=` says otherwise.

What isolates a command there (its network, its limits) is Daytona's and the params':
`CreateSandboxFromSnapshotParams(network_block_all=True)` cuts the network off.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import math
import posixpath
import shlex
from collections.abc import Awaitable
from dataclasses import replace
from typing import TYPE_CHECKING, Any, TypeVar

from tether.backends.base import DEFAULT_MAX_FILE_BYTES
from tether.backends.errors import BackendError
from tether.backends.sandbox.base import ExecResult
from tether.backends.sandbox.remote import RemoteSandbox
from tether.errors import ConfigurationError
from tether.state import SANDBOX

if TYPE_CHECKING:
    from daytona import AsyncDaytona, AsyncSandbox

__all__ = ["DaytonaSandbox"]

T = TypeVar("T")
_SLACK_SECONDS = 30  # beyond a command's own limit, for the request around it
_LABEL = "tether.thread"  # the label a thread's sandbox carries: a digest of the thread


class DaytonaSandbox(RemoteSandbox):
    """Commands and files in Daytona sandboxes, one per thread (see the module)."""

    def __init__(
        self,
        *,
        params: Any = None,
        sandbox: AsyncSandbox | None = None,
        config: Any = None,
        workdir: str = "/home/daytona/workspace",
        timeout_seconds: float = 120,
        max_output_chars: int = 30_000,
        max_file_bytes: int = DEFAULT_MAX_FILE_BYTES,
        create_timeout_seconds: float = 120,
    ) -> None:
        super().__init__(
            workdir=workdir,
            timeout_seconds=timeout_seconds,
            max_output_chars=max_output_chars,
            max_file_bytes=max_file_bytes,
        )
        try:
            import daytona as sdk
        except ImportError:
            raise ConfigurationError(
                "DaytonaSandbox needs Daytona's SDK: pip install 'tether[daytona]'"
            ) from None
        self._sdk = sdk
        self._config = config
        self._params = params
        self._given = sandbox
        self._boxes: dict[str, str] = {}  # session: the id of its sandbox
        self._loop_state: _OnLoop | None = None
        self.create_timeout_seconds = create_timeout_seconds

    # -- the end ---------------------------------------------------------------------

    async def aclose(self) -> None:
        """Delete the sandboxes this object created or took back (each, whatever befalls
        another), and close the SDK's client."""
        names, self._boxes = list(self._boxes.values()), {}
        if not names and self._loop_state is None:
            return  # nothing made, nothing to close
        failed = []
        client = self._on_loop().client()
        try:
            for identifier in names:
                try:
                    box = await self._bounded(client.get(identifier))
                    await self._bounded(client.delete(box))
                except self._sdk.DaytonaNotFoundError:
                    continue  # gone already
                except (self._sdk.DaytonaError, TimeoutError) as exc:
                    failed.append(f"{identifier} ({exc})")
        finally:
            await self._on_loop().close()
            self._loop_state = None
        if failed:
            raise BackendError(f"Daytona: these sandboxes could not be deleted: {failed}")

    def close(self) -> None:
        """`aclose()`, for code outside an event loop (after `agent.run(...)`)."""
        asyncio.run(self.aclose())

    async def run_ended(self) -> None:
        """A run ended: the SDK's client of its event loop is closed (each `agent.run()`
        has a loop of its own); the sandboxes stay for the thread's next run."""
        if self._loop_state is not None and self._loop_state.loop is asyncio.get_running_loop():
            await self._loop_state.close()
            self._loop_state = None

    # -- RemoteSandbox's three ---------------------------------------------------------

    async def run(self, command: str, timeout_seconds: float) -> tuple[str, int | None]:
        limit = max(1, math.ceil(timeout_seconds))
        try:
            done = await self._on_box(
                lambda box: box.process.exec(command, timeout=limit), limit + _SLACK_SECONDS
            )
        except TimeoutError:
            return "", None
        code = done.exit_code
        return done.result or "", None if code is None or code < 0 else int(code)

    async def put(self, path: str, data: bytes) -> None:
        parent = posixpath.dirname(path)
        output, code = await self.run(f"mkdir -p {shlex.quote(parent)}", self.timeout_seconds)
        if code != 0:
            raise BackendError(f"Daytona: could not make {parent}: {output.strip()[:300]}")
        limit = self.timeout_seconds + _SLACK_SECONDS
        await self._on_box(lambda box: box.fs.upload_file(data, path, timeout=math.ceil(limit)))

    async def get(self, path: str) -> bytes | None:
        limit = self.timeout_seconds + _SLACK_SECONDS
        try:
            data = await self._on_box(
                lambda box: box.fs.download_file(path, math.ceil(limit)), gone_is_missing=True
            )
        except _Missing:
            return None
        return data if isinstance(data, bytes) else None

    # -- what the thread keeps -------------------------------------------------------------

    def held(self, session: str) -> dict[str, str] | None:
        """The id of thread `session`'s sandbox, recorded in the thread (not one given
        with `sandbox=`, which is never taken back)."""
        identifier = self._boxes.get(session)
        return None if identifier is None else {"daytona": identifier}

    async def resume(self, session: str, kept: Any) -> str | None:
        if self._given is not None:
            return None
        await self._box(session, kept)
        return self._on_loop().notes.pop(session, None)

    # -- the thread's sandbox ------------------------------------------------------------

    async def _on_box(
        self, work: Any, seconds: float | None = None, *, gone_is_missing: bool = False
    ) -> Any:
        """`work(box)` on the session's sandbox, bounded in time. A sandbox Daytona no
        longer has is dropped and the work done once more on the thread's next one (for
        a download, the file is then missing)."""
        session = self.session()
        for attempt in range(2):
            box = await self._box(session, (self._kept or {}).get(SANDBOX))
            try:
                return await self._bounded(work(box), seconds)
            except self._sdk.DaytonaNotFoundError:
                if gone_is_missing and await self._still_there(box):
                    raise _Missing from None
                if attempt:
                    raise
                self._boxes.pop(session, None)
                self._on_loop().boxes.pop(session, None)
                self._on_loop().notes[session] = (
                    f"this thread's Daytona sandbox ({box.id}) is gone: a fresh one was made"
                )
            except self._sdk.DaytonaError as exc:
                raise BackendError(f"Daytona: {exc}") from None
        raise AssertionError("unreachable")

    async def _box(self, session: str, kept: Any) -> AsyncSandbox:
        """The sandbox of `session`: the one given; the one this object has; the one the
        thread recorded (`kept`), taken back; or a new one."""
        if self._given is not None:
            return self._given
        here = self._on_loop()
        box = here.boxes.get(session)
        if box is not None:
            return box
        async with here.lock(session):
            box = here.boxes.get(session)
            if box is None:
                identifier = self._boxes.get(session)  # ours, made on another loop
                ours = identifier is not None
                if identifier is None and isinstance(kept, dict):
                    identifier = kept.get("daytona")
                if isinstance(identifier, str):
                    box = await self._take_back(session, identifier)
                    if ours and box is not None:
                        here.notes.pop(session, None)  # nothing the model needs to hear
            if box is None:
                box = await self._create(session)
            here.boxes[session] = box
            self._boxes[session] = box.id
        if self._kept is not None:
            self._kept[SANDBOX] = {"daytona": box.id}  # recorded with the run's next sync
        return box

    async def _take_back(self, session: str, identifier: str) -> AsyncSandbox | None:
        """Sandbox `identifier`, started again if it was stopped, when it is still there
        and is tether's sandbox of this thread; None when Daytona no longer has it (the
        model is told). Any other failure is the call's: the record is kept."""
        here = self._on_loop()
        try:
            box = await self._bounded(here.client().get(identifier))
        except self._sdk.DaytonaNotFoundError:
            here.notes[session] = (
                f"this thread's Daytona sandbox from before ({identifier}) is gone: the "
                "command ran in a fresh one"
            )
            return None
        except self._sdk.DaytonaError as exc:
            raise BackendError(f"Daytona: could not reach sandbox {identifier}: {exc}") from None
        labels = getattr(box, "labels", None) or {}
        if box.id != identifier or labels.get(_LABEL) != _thread_label(session):
            here.notes[session] = (
                f"the sandbox this thread recorded ({identifier}) is not tether's sandbox of "
                "this thread: it was left alone, and the command ran in a fresh one"
            )
            return None
        if not str(box.state).lower().endswith("started"):
            await self._bounded(box.start(timeout=self.create_timeout_seconds), 2 * _SLACK_SECONDS)
        here.notes[session] = f"this thread's Daytona sandbox {identifier} was taken back"
        return box

    async def _create(self, session: str) -> AsyncSandbox:
        """A new sandbox for `session`, labelled as its. One whose creation timed out or
        was called off is deleted when Daytona says it exists."""
        params = self._params or self._sdk.CreateSandboxFromSnapshotParams()
        labels = {**(params.labels or {}), _LABEL: _thread_label(session)}
        params = params.model_copy(update={"labels": labels})
        client = self._on_loop().client()
        task = asyncio.ensure_future(client.create(params, timeout=self.create_timeout_seconds))
        try:
            return await asyncio.shield(task)
        except asyncio.CancelledError:
            task.add_done_callback(lambda done: self._delete_later(client, done))
            raise
        except self._sdk.DaytonaTimeoutError as exc:
            made = getattr(exc, "sandbox_id", None)
            if made:
                with contextlib.suppress(self._sdk.DaytonaError, TimeoutError):
                    await self._bounded(client.delete(await client.get(made)))
            raise BackendError(f"Daytona: the sandbox did not start in time: {exc}") from None
        except self._sdk.DaytonaError as exc:
            raise BackendError(f"Daytona: the sandbox could not be made: {exc}") from None

    def _delete_later(self, client: AsyncDaytona, done: asyncio.Future[AsyncSandbox]) -> None:
        if not done.cancelled() and done.exception() is None:
            box = done.result()
            asyncio.ensure_future(self._bounded(client.delete(box))).add_done_callback(
                lambda deleting: deleting.cancelled() or deleting.exception()
            )

    async def _still_there(self, box: AsyncSandbox) -> bool:
        try:
            await self._bounded(box.refresh_data())
        except self._sdk.DaytonaNotFoundError:
            return False
        return True

    async def _bounded(self, work: Awaitable[T], seconds: float | None = None) -> T:
        async with asyncio.timeout(seconds or self.timeout_seconds + _SLACK_SECONDS):
            return await work

    def _on_loop(self) -> _OnLoop:
        """What is tied to the running event loop (the SDK's client, the sandbox
        objects, the locks): made again for a new loop, such as each `agent.run()`'s."""
        loop = asyncio.get_running_loop()
        if self._loop_state is None or self._loop_state.loop is not loop:
            self._loop_state = _OnLoop(loop, lambda: self._sdk.AsyncDaytona(self._config))
        return self._loop_state

    async def execute(self, command: str, *, timeout_seconds: float | None = None) -> ExecResult:
        """The command's result, with what the model has not been told yet of the
        thread's sandbox (taken back, or gone and made again)."""
        result = await super().execute(command, timeout_seconds=timeout_seconds)
        note = self._on_loop().notes.pop(self.session(), None)
        return result if note is None else replace(result, output=f"{result.output}\n[{note}]")


class _Missing(Exception):
    """A download found no such file (its sandbox is there)."""


class _OnLoop:
    """The SDK's client, the sandbox objects and the locks of one event loop."""

    def __init__(self, loop: asyncio.AbstractEventLoop, make: Any) -> None:
        self.loop = loop
        self._make = make
        self._client: AsyncDaytona | None = None
        self.boxes: dict[str, AsyncSandbox] = {}
        self.notes: dict[str, str] = {}  # what to tell at a session's next command
        self._locks: dict[str, asyncio.Lock] = {}

    def client(self) -> AsyncDaytona:
        if self._client is None:
            self._client = self._make()
        return self._client

    def lock(self, session: str) -> asyncio.Lock:
        return self._locks.setdefault(session, asyncio.Lock())

    async def close(self) -> None:
        if self._client is not None:
            await self._client.close()  # type: ignore[no-untyped-call]  # untyped in the SDK
            self._client = None


def _thread_label(session: str) -> str:
    return hashlib.sha256(session.encode()).hexdigest()[:32]
