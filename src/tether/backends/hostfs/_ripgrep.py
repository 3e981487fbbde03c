"""ripgrep, confined: the files beneath a directory that hold a literal text, found by
`rg` in a process that the kernel lets read nothing else.

ripgrep walks the tree by name, so a process swapping a directory for a symlink could
lead it out of the root. It never gets the chance: it runs from a thread made for it
and restricted with Landlock (see `_landlock`) to reading beneath the directory it was
given (held by fd, so a swap of the directory itself changes nothing), its own
executable and the libraries the dynamic loader maps; it may write nothing. What it
finds are only candidates: the caller opens each one again beneath the root, without
following a symlink, and checks it.

Used only for literal text, where ripgrep's dialect and RE2's agree on every line:
both are byte substrings, and both fold case with Unicode's simple folding. Without
`rg` on PATH, or Landlock in the kernel, `search` returns None and the caller walks the
tree itself. The settings that could widen what rg does (a config file named in
`RIPGREP_CONFIG_PATH`, ignore files, symlinks) are all turned off on its command line.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import os
import shutil
import subprocess
import tempfile
import threading
from collections.abc import Callable, Sequence

from tether.backends.hostfs import _landlock
from tether.backends.hostfs._landlock import EXECUTE, READ_DIR, READ_FILE
from tether.backends.search import REGEX_SYNTAX

__all__ = ["SEARCH_SECONDS", "literal_text", "search"]

SEARCH_SECONDS = 10.0
"""How long rg may run before it is stopped and the tree is searched without it (a
FIFO swapped in for a file while rg lists the tree would hold it forever)."""
_OPTIONS = (
    "--files-with-matches",
    "--null",  # names may hold newlines
    "--no-config",
    "--no-ignore",  # the agent sees what .gitignore hides
    "--hidden",
    "--no-messages",
    "--encoding=none",  # bytes as they are, as RE2 sees them
    "--glob=!.git/",
    "--fixed-strings",
)


def literal_text(pattern: str, *, literal: bool, ignore_case: bool) -> str | None:
    """The text a grep for `pattern` looks for, when rg finds exactly what RE2 would
    (literal text, or a pattern with nothing special in it; ASCII when case is
    ignored); else None."""
    if "\n" in pattern or "\x00" in pattern or not pattern:
        return None
    if not literal and not REGEX_SYNTAX.isdisjoint(pattern):
        return None
    if ignore_case and not pattern.isascii():
        return None  # the case tables of two Unicode versions may differ
    return pattern


class _Ripgrep:
    """The `rg` executable and the files it must read to start (its loader, libraries)."""

    def __init__(self, executable: str, needs: list[str]) -> None:
        self.executable = executable
        self.needs = needs


_found: _Ripgrep | None = None
_looked = False
_looking = threading.Lock()


def _ripgrep() -> _Ripgrep | None:
    """The `rg` on PATH, when it runs under Landlock here; looked for once a process."""
    global _found, _looked
    with _looking:
        if not _looked:
            _looked = True
            _found = _find()
        return _found


def _find() -> _Ripgrep | None:
    if _landlock.abi() < 1:
        return None
    executable = shutil.which("rg")
    if executable is None or not os.path.isabs(executable):
        return None
    executable = os.path.realpath(executable)
    try:
        traced = subprocess.run(  # the loader lists what it would map, and stops
            [executable],
            env={**os.environ, "LD_TRACE_LOADED_OBJECTS": "1"},
            stdin=subprocess.DEVNULL,
            capture_output=True,
            timeout=SEARCH_SECONDS,
            check=False,
        )
    except (OSError, subprocess.SubprocessError):
        return None
    needs = [word for word in traced.stdout.decode(errors="replace").split() if word[:1] == "/"]
    needs += [path for path in ("/etc/ld.so.cache",) if os.path.exists(path)]
    found = _Ripgrep(executable, needs)
    with tempfile.TemporaryDirectory() as empty:  # it must start, confined, and find nothing
        fd = os.open(empty, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        try:
            probe = _confined(found, fd, ["--", "x", "."], _Stop())
        finally:
            os.close(fd)
    return found if probe == (1, b"") else None


_collection = threading.Lock()
_quiet = 0  # threads restricted now
_was_enabled = False


def _no_collection() -> None:
    """Turn the garbage collector off while a restricted thread lives: a collection runs
    on whichever thread allocates, with any object's finalizer, which must not run
    where it can write nothing (a temporary directory's cleanup would fail there)."""
    global _quiet, _was_enabled
    with _collection:
        if _quiet == 0:
            _was_enabled = gc.isenabled()
            gc.disable()
        _quiet += 1


def _collection_again() -> None:
    global _quiet
    with _collection:
        _quiet -= 1
        if _quiet == 0 and _was_enabled:
            gc.enable()


def _start_restricted(body: Callable[[], None]) -> threading.Thread:
    """`body` on a new thread, which it restricts. No garbage is collected from before
    it starts until it has ended (a thread that waits for it turns collection on again):
    a collection runs on whichever thread allocates, and the thread's own teardown does."""
    thread = threading.Thread(target=body, name="tether-rg", daemon=True)
    _no_collection()
    try:
        thread.start()
    except BaseException:
        _collection_again()
        raise
    threading.Thread(target=_collect_after, args=(thread,), daemon=True).start()
    return thread


def _collect_after(thread: threading.Thread) -> None:
    thread.join()  # returns once the thread has run its last Python code
    _collection_again()


class _Stop:
    """Stops a confined rg from another thread: now, or before it starts."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.stopped = False
        self.process: subprocess.Popen[bytes] | None = None

    def __call__(self) -> None:
        with self.lock:
            self.stopped = True
            if self.process is not None:
                self.process.kill()


def _confined(
    rg: _Ripgrep, directory: int, args: Sequence[str], stop: _Stop
) -> tuple[int, bytes] | None:
    """rg's exit status and output, run beneath `directory` in a thread made for it and
    restricted first; None when it could not run or was stopped."""
    out: list[tuple[int, bytes] | None] = [None]
    _start_restricted(lambda: _run(rg, directory, args, stop, out)).join()
    return out[0]


def _run(
    rg: _Ripgrep,
    directory: int,
    args: Sequence[str],
    stop: _Stop,
    out: list[tuple[int, bytes] | None],
) -> None:
    """The body of the restricted thread (it ends with it, and the restriction too)."""
    opened: list[int] = []
    try:
        null = os.open(os.devnull, os.O_RDWR | os.O_CLOEXEC)  # opened while it still can
        opened.append(null)
        allowed = [(directory, READ_FILE | READ_DIR)]
        for path in [*rg.needs, rg.executable]:
            fd = os.open(path, os.O_PATH | os.O_CLOEXEC)
            opened.append(fd)
            allowed.append((fd, READ_FILE | EXECUTE))
        _landlock.restrict_thread(allowed)
        with stop.lock:
            if stop.stopped:
                return
            stop.process = subprocess.Popen(
                [rg.executable, *_OPTIONS, *args],
                cwd=f"/proc/self/fd/{directory}",  # the child's own copy of the fd
                stdin=null,
                stdout=subprocess.PIPE,
                stderr=null,
            )
        output, _ = stop.process.communicate()
        if not stop.stopped:
            out[0] = (stop.process.returncode, output)
    except (OSError, subprocess.SubprocessError):
        pass  # not run: the caller searches without it
    finally:
        for fd in opened:
            os.close(fd)


async def search(
    open_dir: Callable[[], int], text: str, *, ignore_case: bool, max_bytes: int
) -> list[str] | None:
    """The paths (relative to the directory `open_dir` opens) of the files beneath it,
    of at most `max_bytes`, where rg finds `text` on a line; None when rg is not there,
    not confined, failed or ran past `SEARCH_SECONDS`. Cancelled, it stops rg."""
    rg = _found if _looked else await asyncio.to_thread(_ripgrep)
    if rg is None:
        return None
    loop = asyncio.get_running_loop()
    finished: asyncio.Future[tuple[int, bytes] | None] = loop.create_future()

    def body() -> None:
        out: list[tuple[int, bytes] | None] = [None]
        try:
            directory = open_dir()  # before the thread is restricted
            try:
                _run(rg, directory, [*flags, "--regexp", text, "."], stop, out)
            finally:
                os.close(directory)
        except OSError:
            pass  # not a directory (any more): the caller's own search says why
        finally:
            with contextlib.suppress(RuntimeError):  # the loop closed meanwhile
                loop.call_soon_threadsafe(_settle, finished, out[0])

    flags = [f"--max-filesize={max_bytes}", *(["--ignore-case"] if ignore_case else [])]
    stop = _Stop()
    _start_restricted(body)
    try:
        done = await asyncio.wait_for(asyncio.shield(finished), SEARCH_SECONDS)
    except TimeoutError:
        stop()
        return None
    except BaseException:
        stop()
        raise
    if done is None or done[0] not in (0, 1):  # 2: an error, maybe a file left unread
        return None
    names = done[1].split(b"\0")
    return [os.fsdecode(name.removeprefix(b"./")) for name in names if name]


def _settle(
    future: asyncio.Future[tuple[int, bytes] | None], result: tuple[int, bytes] | None
) -> None:
    if not future.done():
        future.set_result(result)
