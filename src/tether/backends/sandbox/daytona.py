"""Daytona's hosted sandboxes through its official SDK: `DaytonaSandbox`
(`pip install 'tether[daytona]'`).

Each thread gets a Daytona sandbox of its own, created at its first command or file
operation from `params` (the SDK's `CreateSandboxFromSnapshotParams` or
`CreateSandboxFromImageParams`; Daytona's default snapshot when not given) and kept
for the thread's later ones, its subagents' too; `aclose()` deletes those it created.
Or give one sandbox you made yourself (`sandbox=`), which all threads then share and
which is left for you to delete. The SDK reads `DAYTONA_API_KEY` (and `DAYTONA_API_URL`,
`DAYTONA_TARGET`) unless `config=` says otherwise.

What isolates a command there (its network, its limits) is Daytona's and the params':
`CreateSandboxFromSnapshotParams(network_block_all=True)` cuts the network off.
"""

from __future__ import annotations

import asyncio
import math
import posixpath
import shlex
from typing import TYPE_CHECKING, Any

from tether.backends.base import DEFAULT_MAX_FILE_BYTES
from tether.backends.sandbox.remote import RemoteSandbox
from tether.errors import ConfigurationError
from tether.state import SANDBOX

if TYPE_CHECKING:
    from daytona import AsyncDaytona, AsyncSandbox

__all__ = ["DaytonaSandbox"]

_SLACK_SECONDS = 30  # beyond a command's own limit, for the request around it


class DaytonaSandbox(RemoteSandbox):
    """Commands and files in Daytona sandboxes, one per thread (see the module)."""

    def __init__(
        self,
        *,
        params: Any = None,
        sandbox: AsyncSandbox | None = None,
        config: Any = None,
        daytona: AsyncDaytona | None = None,
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
        self._client = daytona  # the caller's, when given: never closed here
        self._own_client = False
        self._config = config
        self._params = params
        self._given = sandbox
        self._created: dict[str, AsyncSandbox] = {}
        self._creating: dict[str, asyncio.Lock] = {}
        self.create_timeout_seconds = create_timeout_seconds

    async def aclose(self) -> None:
        """Delete the sandboxes this one created, and close the client it made."""
        created, self._created = list(self._created.values()), {}
        client = self._client
        if client is None:
            return
        for box in created:
            await client.delete(box)
        if self._own_client:
            await client.close()  # type: ignore[no-untyped-call]  # untyped in the SDK
            self._client, self._own_client = None, False

    # -- RemoteSandbox's three ---------------------------------------------------------

    async def run(self, command: str, timeout_seconds: float) -> tuple[str, int | None]:
        box = await self._box()
        limit = max(1, math.ceil(timeout_seconds))
        try:
            async with asyncio.timeout(limit + _SLACK_SECONDS):
                done = await box.process.exec(command, timeout=limit)
        except (TimeoutError, self._sdk.DaytonaTimeoutError):
            return "", None
        code = done.exit_code
        return done.result or "", None if code is None or code < 0 else int(code)

    async def put(self, path: str, data: bytes) -> None:
        parent = posixpath.dirname(path)
        output, code = await self.run(f"mkdir -p {shlex.quote(parent)}", self.timeout_seconds)
        if code != 0:
            raise self._error(f"could not make {parent}: {output.strip()[:300]}")
        box = await self._box()
        await box.fs.upload_file(data, path)

    async def get(self, path: str) -> bytes | None:
        box = await self._box()
        try:
            data = await box.fs.download_file(path)
        except self._sdk.DaytonaNotFoundError:
            return None
        return data if isinstance(data, bytes) else None

    # -- the thread's sandbox ------------------------------------------------------------

    def held(self, session: str) -> dict[str, str] | None:
        """The id of thread `session`'s Daytona sandbox, recorded in the thread: a run
        resumed in another process takes the same sandbox back."""
        box = self._given or self._created.get(session)
        return None if box is None else {"daytona": box.id}

    async def resume(self, session: str, kept: Any) -> str | None:
        if self._given is not None or self._created.get(session) is not None:
            return None
        identifier = kept.get("daytona") if isinstance(kept, dict) else None
        if not isinstance(identifier, str):
            return None
        if await self._take_back(session, identifier) is not None:
            return f"this thread's Daytona sandbox {identifier} was taken back"
        return (
            f"this thread's Daytona sandbox from before ({identifier}) is gone: the command "
            "ran in a fresh one"
        )

    async def _box(self) -> AsyncSandbox:
        if self._given is not None:
            return self._given
        session = self.session()
        box = self._created.get(session)
        if box is not None:
            return box
        lock = self._creating.setdefault(session, asyncio.Lock())
        async with lock:
            box = self._created.get(session)
            if box is None:
                kept = (self._kept or {}).get(SANDBOX)
                if isinstance(kept, dict) and isinstance(kept.get("daytona"), str):
                    box = await self._take_back(session, kept["daytona"])
            if box is None:
                client = self._daytona()
                box = await client.create(self._params, timeout=self.create_timeout_seconds)
                self._created[session] = box
        if self._kept is not None:
            self._kept[SANDBOX] = {"daytona": box.id}  # recorded with the run's next sync
        return box

    async def _take_back(self, session: str, identifier: str) -> AsyncSandbox | None:
        """Thread `session`'s sandbox `identifier`, started again if it was stopped;
        None when Daytona no longer has it."""
        client = self._daytona()
        try:
            box = await client.get(identifier)
            if not str(box.state).lower().endswith("started"):
                await box.start(timeout=self.create_timeout_seconds)
        except self._sdk.DaytonaError:
            return None
        self._created[session] = box
        return box

    def _daytona(self) -> AsyncDaytona:
        if self._client is None:
            self._client = self._sdk.AsyncDaytona(self._config)
            self._own_client = True
        return self._client

    def _error(self, text: str) -> Exception:
        from tether.backends.errors import BackendError

        return BackendError(f"Daytona: {text}")
