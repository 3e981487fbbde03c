"""FilesystemBackend: files on the real disk, confined to a root directory.

In virtual mode (the default) the agent's "/" is `root`, and nothing the agent names can
reach outside it: every path is resolved with its symlinks (in any component) and must
land inside root; the last component is opened with O_NOFOLLOW; only regular files are
read or written, never devices, FIFOs or sockets. `.git` directories are not listed or
searched. ripgrep does glob and grep when `rg` is on PATH; the pure-Python walk gives
the same results without it.
"""

from __future__ import annotations

import asyncio
import base64
import json
import os
import re
import shutil
import stat
import subprocess
from pathlib import Path
from typing import Any

from tether.backends.base import DEFAULT_MAX_FILE_BYTES, FileInfo, GrepHit
from tether.backends.errors import BackendError
from tether.backends.paths import clean
from tether.backends.search import compile_pattern, grep_text
from tether.errors import ConfigurationError

__all__ = ["FilesystemBackend"]

_SKIPPED_DIRS = frozenset({".git"})


class FilesystemBackend:
    """The directory `root` as the agent's filesystem.

    `virtual_mode=False` drops the confinement: paths are host paths ("/etc/hosts" is
    that file). Use it only where the agent may touch the whole machine.
    `use_ripgrep=None` uses `rg` when it is on PATH; True requires it; False never does.
    """

    def __init__(
        self,
        root: str | os.PathLike[str] = ".",
        *,
        virtual_mode: bool = True,
        max_file_bytes: int = DEFAULT_MAX_FILE_BYTES,
        use_ripgrep: bool | None = None,
    ) -> None:
        resolved = Path(root).expanduser().resolve()
        if not resolved.is_dir():
            raise ConfigurationError(f"FilesystemBackend root {str(root)!r} is not a directory")
        self.root = resolved
        self.virtual_mode = virtual_mode
        self.max_file_bytes = max_file_bytes
        self.ripgrep = shutil.which("rg") if use_ripgrep is not False else None
        if use_ripgrep and self.ripgrep is None:
            raise ConfigurationError(
                "use_ripgrep=True but `rg` is not on PATH (apt-get install ripgrep)"
            )

    def __repr__(self) -> str:
        return f"FilesystemBackend({str(self.root)!r}, virtual_mode={self.virtual_mode})"

    def bind(self, state: Any) -> FilesystemBackend:
        return self

    # -- paths -------------------------------------------------------------------

    def host(self, path: str) -> Path:
        """The host path for virtual `path`, symlinks resolved, checked to be inside root."""
        path = clean(path)
        if not self.virtual_mode:
            return Path(os.path.realpath(path))
        real = Path(os.path.realpath(self.root / path.lstrip("/")))
        if real != self.root and not real.is_relative_to(self.root):
            raise BackendError(f"{path} leads outside the workspace (through a symlink); refused.")
        return real

    def virtual(self, host: Path) -> str:
        """The virtual path of a host path inside root."""
        if not self.virtual_mode:
            return str(host)
        relative = host.relative_to(self.root).as_posix()
        return "/" if relative == "." else "/" + relative

    # -- operations ----------------------------------------------------------------

    async def ls(self, path: str) -> list[FileInfo]:
        return await asyncio.to_thread(self._ls, path)

    def _ls(self, path: str) -> list[FileInfo]:
        directory = self.host(path)
        if not directory.exists():
            raise BackendError(f"No such directory: {path}")
        if not directory.is_dir():
            raise BackendError(f"{path} is a file, not a directory. Read it with read_file.")
        entries = []
        with os.scandir(directory) as scan:
            for entry in scan:
                info = self._info(Path(entry.path))
                if info is not None:
                    entries.append(info)
        return sorted(entries, key=lambda f: f.path)

    def _info(self, host: Path) -> FileInfo | None:
        """A listing entry; None for what the agent cannot use (escaping links, devices)."""
        try:
            real = Path(os.path.realpath(host))
            if self.virtual_mode and real != self.root and not real.is_relative_to(self.root):
                return None
            st = os.stat(real)
        except (OSError, ValueError):
            return None
        if not (stat.S_ISREG(st.st_mode) or stat.S_ISDIR(st.st_mode)) or _undecodable(host.name):
            return None
        if stat.S_ISDIR(st.st_mode):
            return FileInfo(self.virtual(host), is_dir=True, modified=st.st_mtime)
        return FileInfo(self.virtual(host), size=st.st_size, modified=st.st_mtime)

    async def read(self, path: str) -> bytes:
        return await asyncio.to_thread(self._read, path)

    def _read(self, path: str) -> bytes:
        path = clean(path)
        real = self.host(path)
        try:
            fd = os.open(real, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
        except FileNotFoundError:
            raise BackendError(f"No such file: {path}") from None
        except IsADirectoryError:
            raise BackendError(f"{path} is a directory. List it with ls.") from None
        except OSError as exc:
            raise BackendError(f"Cannot read {path}: {exc.strerror}.") from None
        try:
            st = os.fstat(fd)
            if stat.S_ISDIR(st.st_mode):
                raise BackendError(f"{path} is a directory. List it with ls.")
            if not stat.S_ISREG(st.st_mode):
                raise BackendError(f"{path} is not a regular file (a device, FIFO or socket).")
            if st.st_size > self.max_file_bytes:
                raise BackendError(
                    f"{path} is {st.st_size} bytes, over the {self.max_file_bytes} byte limit."
                )
        except BaseException:
            os.close(fd)
            raise
        with os.fdopen(fd, "rb") as file:
            data = file.read(self.max_file_bytes + 1)
        if len(data) > self.max_file_bytes:  # it grew while we read it
            raise BackendError(f"{path} is over the {self.max_file_bytes} byte limit.")
        return data

    async def write(self, path: str, data: bytes) -> None:
        if len(data) > self.max_file_bytes:
            raise BackendError(
                f"The content is {len(data)} bytes, over the {self.max_file_bytes} byte limit."
            )
        await asyncio.to_thread(self._write, path, data)

    def _write(self, path: str, data: bytes) -> None:
        path = clean(path)
        real = self.host(path)
        if real == self.root or real.is_dir():
            raise BackendError(f"{path} is a directory; give a file path.")
        try:
            real.parent.mkdir(parents=True, exist_ok=True)
            self.host(path)  # a parent made just now must not have turned into a way out
            flags = os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW | os.O_NONBLOCK
            fd = os.open(real, flags, 0o644)
        except (FileExistsError, NotADirectoryError):
            raise BackendError(f"A parent of {path} is a file.") from None
        except OSError as exc:
            raise BackendError(f"Cannot write {path}: {exc.strerror}.") from None
        with os.fdopen(fd, "wb") as file:
            if not stat.S_ISREG(os.fstat(file.fileno()).st_mode):
                raise BackendError(f"{path} is not a regular file (a device, FIFO or socket).")
            file.write(data)

    async def stat(self, path: str) -> FileInfo | None:
        return await asyncio.to_thread(self._stat, path)

    def _stat(self, path: str) -> FileInfo | None:
        real = self.host(path)
        return self._info(real) if os.path.lexists(real) else None

    async def files(self, path: str) -> list[FileInfo]:
        return await asyncio.to_thread(self._files, path)

    def _files(self, path: str) -> list[FileInfo]:
        directory = self.host(path)
        if not directory.is_dir():
            return []
        names = self._rg_files(directory) if self.ripgrep else _walk(directory)
        host_prefix = str(directory) + "/"
        virtual_prefix = self.virtual(directory).rstrip("/") + "/"
        found = []
        for name in names:  # plain strings and os.lstat: pathlib costs ~10 µs a file here
            try:
                st = os.lstat(host_prefix + name)
            except OSError:
                continue
            if stat.S_ISREG(st.st_mode):
                found.append(FileInfo(virtual_prefix + name, size=st.st_size, modified=st.st_mtime))
        found.sort(key=lambda f: f.path)
        return found

    async def grep(
        self, pattern: str, path: str, *, literal: bool = False, ignore_case: bool = False
    ) -> list[GrepHit]:
        regex = compile_pattern(pattern, literal=literal, ignore_case=ignore_case)
        if self.ripgrep:
            return await asyncio.to_thread(self._rg_grep, pattern, path, literal, ignore_case)
        return await asyncio.to_thread(self._py_grep, regex, path)

    def _py_grep(self, regex: re.Pattern[str], path: str) -> list[GrepHit]:
        hits: list[GrepHit] = []
        for info in self._files(path):
            try:
                data = self._read(info.path)
            except BackendError:
                continue  # over the size limit, or gone since the listing
            hits += grep_text(info.path, data, regex)
        return hits

    # -- ripgrep -------------------------------------------------------------------

    def _rg(self, directory: Path, *args: str) -> bytes:
        assert self.ripgrep is not None
        command = [
            self.ripgrep,
            "--hidden",
            "--no-ignore",
            "--no-messages",
            "--glob",
            "!.git",
            *args,
        ]
        done = subprocess.run(command, cwd=directory, capture_output=True, check=False)
        if done.returncode > 1:
            raise BackendError(f"Search failed: {done.stderr.decode(errors='replace').strip()}")
        return done.stdout

    def _rg_files(self, directory: Path) -> list[str]:
        output = self._rg(directory, "--files", "--null")
        names = []
        for raw in output.split(b"\x00"):
            if raw:
                try:
                    names.append(raw.decode())
                except UnicodeDecodeError:
                    continue
        return names

    def _rg_grep(self, pattern: str, path: str, literal: bool, ignore_case: bool) -> list[GrepHit]:
        directory = self.host(path)
        if not directory.is_dir():
            return []
        flags = ["--json", "--max-filesize", str(self.max_file_bytes)]
        flags += ["--fixed-strings"] if literal else []
        flags += ["--ignore-case"] if ignore_case else []
        output = self._rg(directory, *flags, "--regexp", pattern)
        hits: list[GrepHit] = []
        binary: set[str] = set()
        for line in output.splitlines():
            event = json.loads(line)
            data = event.get("data", {})
            name = data.get("path", {}).get("text")
            if name is None:
                continue
            if event["type"] == "end" and data.get("binary_offset") is not None:
                binary.add(name)
            elif event["type"] == "match":
                text = _rg_text(data["lines"])
                hits.append(GrepHit(self.virtual(directory / name), data["line_number"], text))
        skipped = {self.virtual(directory / name) for name in binary}
        return sorted((h for h in hits if h.path not in skipped), key=lambda h: (h.path, h.line))


def _rg_text(lines: dict[str, str]) -> str:
    if "text" in lines:
        text = lines["text"]
    else:
        text = base64.b64decode(lines["bytes"]).decode("utf-8", errors="replace")
    return text[:-1] if text.endswith("\n") else text


def _walk(directory: Path) -> list[str]:
    """What `rg --files` lists: regular files at any depth, no symlinks, no .git."""
    names = []
    for current, dirs, files in os.walk(directory, followlinks=False):
        dirs[:] = [d for d in dirs if d not in _SKIPPED_DIRS and not _undecodable(d)]
        base = Path(current)
        for name in files:
            if not _undecodable(name) and not (base / name).is_symlink():
                names.append((base / name).relative_to(directory).as_posix())
    return names


def _undecodable(name: str) -> bool:
    """A name that is not valid UTF-8 on disk (os gives it back with surrogates)."""
    try:
        name.encode()
    except UnicodeEncodeError:
        return True
    return False
