"""The project's run records: where they are kept (a plain SQLite file in `.tether/`,
never reached through a symlink), what reading them finds, and the settings a run
records for the next run on its thread."""

from __future__ import annotations

import asyncio
import os
import stat
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any, TypeVar

from tether.backends.errors import BackendError
from tether.backends.hostfs import Root
from tether.backends.paths import clean
from tether.checkpoint.base import Checkpointer, open_checkpointer
from tether.checkpoint.journal import read_thread
from tether.cli._config import RECORDED, Loaded
from tether.errors import ConfigurationError

__all__ = ["checkpointer_url", "recorded_settings", "run_metadata", "threads_of"]

T = TypeVar("T")


def run_metadata(loaded: Loaded) -> dict[str, Any]:
    """What a run records of its settings, for the next run on its thread."""
    settings = loaded.settings.model_dump(mode="json")
    return {"cli": {key: settings[key] for key in RECORDED}}


def threads_of(loaded: Loaded, directory: Path) -> list[str]:
    """The project's thread ids, the latest first."""

    async def listed(checkpointer: Checkpointer) -> list[str]:
        return [info.thread_id for info in await checkpointer.threads()]

    return _reading(loaded, directory, listed) or []


def recorded_settings(loaded: Loaded, directory: Path, thread_id: str) -> dict[str, Any]:
    """The settings `thread_id` last ran with ({} for a new thread)."""

    async def metadata(checkpointer: Checkpointer) -> dict[str, Any]:
        return (await read_thread(checkpointer, thread_id)).metadata

    found = (_reading(loaded, directory, metadata) or {}).get("cli")
    return dict(found) if isinstance(found, dict) else {}


def _reading(
    loaded: Loaded, directory: Path, read: Callable[[Checkpointer], Awaitable[T]]
) -> T | None:
    """What `read` finds in the run records; None when there are none yet."""
    url = checkpointer_url(loaded, directory, create=False)
    if url is None:
        return None

    async def opened() -> T:
        checkpointer = open_checkpointer(url)
        try:
            return await read(checkpointer)
        finally:
            await checkpointer.close()

    return asyncio.run(opened())


def checkpointer_url(loaded: Loaded, directory: Path, *, create: bool = True) -> str | None:
    """The checkpointer URL, a relative SQLite path made relative to the project; None
    when `create` is false and that SQLite database does not exist yet.

    A project could ship `.tether` as a symlink to put the run records (and what a
    resumed run trusts) elsewhere: the directory and the file must be plain ones.
    """
    url = loaded.settings.checkpointer
    if url.startswith("sqlite:///") and not url.startswith("sqlite:////"):
        relative = url.removeprefix("sqlite:///")
        if not _plain_database(directory, relative, create=create):
            return None
        return f"sqlite:///{(directory / relative).as_posix()}"
    return url


def _ignored_by_git(host: Root) -> None:
    """`.tether/.gitignore` ignoring everything in it, unless the directory has one."""
    try:
        fd = host.open("/.tether/.gitignore", os.O_WRONLY | os.O_CREAT | os.O_EXCL)
    except FileExistsError:
        return
    with os.fdopen(fd, "w") as file:
        file.write("# tether's run records, made by tether: never committed\n*\n")


def _plain_database(directory: Path, relative: str, *, create: bool) -> bool:
    """Whether the database can be opened (it exists, or `create`), its way checked."""
    if any(part.casefold() == ".git" for part in relative.split("/")):
        raise ConfigurationError(f"the run records cannot be kept in git's own files ({relative})")
    try:
        path = clean(relative)
        host = Root(directory)
        parent = path.rsplit("/", 1)[0] or "/"
        os.close(host.make_dirs(parent) if create else host.open_dir(parent))
        if create and parent == "/.tether":
            _ignored_by_git(host)
        # SQLite opens its journal files beside the database by name too.
        found = {suffix: host.lstat(path + suffix) for suffix in ("", "-wal", "-shm", "-journal")}
    except FileNotFoundError:
        if create:
            raise
        return False
    except (BackendError, OSError) as exc:
        raise ConfigurationError(
            f"the run records {relative} cannot be kept in the project ({exc}); a directory "
            "on the way is a symbolic link or not a directory"
        ) from None
    for suffix, there in found.items():
        if there is not None and not stat.S_ISREG(there.st_mode):
            raise ConfigurationError(
                f"the run records' {relative + suffix} in the project is not a regular file "
                "(a symbolic link?); remove it or set checkpointer elsewhere"
            )
    return create or found[""] is not None
