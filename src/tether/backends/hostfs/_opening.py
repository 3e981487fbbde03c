"""Opening beneath a directory fd without following a symlink: the open flags, the
`openat2` call where the kernel has it, and a virtual path's components."""

from __future__ import annotations

import ctypes
import errno
import os
from typing import Any

__all__ = [
    "DIR_FLAGS",
    "LIST_FLAGS",
    "O_CLOEXEC",
    "Openat2",
    "kernel",
    "lstat_at",
    "parts_of",
]

_O_PATH = getattr(os, "O_PATH", 0)
_O_DIRECTORY = getattr(os, "O_DIRECTORY", 0)
O_CLOEXEC = getattr(os, "O_CLOEXEC", 0)
DIR_FLAGS = (_O_PATH or os.O_RDONLY) | _O_DIRECTORY | os.O_NOFOLLOW | O_CLOEXEC
LIST_FLAGS = os.O_RDONLY | _O_DIRECTORY | os.O_NOFOLLOW | os.O_NONBLOCK | O_CLOEXEC

_SYS_OPENAT2 = 437  # the same number on every Linux architecture
_RESOLVE_NO_MAGICLINKS = 0x02
_RESOLVE_NO_SYMLINKS = 0x04
_RESOLVE_BENEATH = 0x08


class _OpenHow(ctypes.Structure):
    _fields_ = (
        ("flags", ctypes.c_uint64),
        ("mode", ctypes.c_uint64),
        ("resolve", ctypes.c_uint64),
    )


class Openat2:
    """openat2(2) through libc's syscall(); `available` is False where the kernel, libc
    or a seccomp filter does not offer it."""

    def __init__(self) -> None:
        self.syscall: Any = None
        try:
            self.syscall = ctypes.CDLL(None, use_errno=True).syscall
        except (OSError, AttributeError):
            return
        self.syscall.restype = ctypes.c_long
        root = os.open("/", DIR_FLAGS)
        try:
            probe = self._call(root, ".", DIR_FLAGS, 0)
        finally:
            os.close(root)
        if probe < 0:
            self.syscall = None
        else:
            os.close(probe)

    def _call(self, dir_fd: int, path: str, flags: int, mode: int) -> int:
        how = _OpenHow(
            flags | O_CLOEXEC,
            mode if flags & os.O_CREAT else 0,
            _RESOLVE_BENEATH | _RESOLVE_NO_SYMLINKS | _RESOLVE_NO_MAGICLINKS,
        )
        size = ctypes.sizeof(how)
        return int(self.syscall(_SYS_OPENAT2, dir_fd, os.fsencode(path), ctypes.byref(how), size))

    def open(self, dir_fd: int, path: str, flags: int, mode: int) -> int | None:
        """The fd (or an OSError), or None when openat2 is not available."""
        if self.syscall is None:
            return None
        for _ in range(8):
            fd = self._call(dir_fd, path, flags, mode)
            if fd >= 0:
                return fd
            code = ctypes.get_errno()
            if code != errno.EAGAIN:  # EAGAIN: a rename raced the lookup; look again
                break
        raise OSError(code, os.strerror(code), path)


_openat2: Openat2 | None = None


def kernel() -> Openat2:
    global _openat2
    if _openat2 is None:
        _openat2 = Openat2()
    return _openat2


def parts_of(path: str) -> list[str]:
    """The components of a clean virtual path; '..' never gets this far, but if it did
    the walk must not climb with it."""
    parts = [p for p in path.split("/") if p and p != "."]
    if ".." in parts:
        raise OSError(errno.EXDEV, "'..' leads out of the root", path)
    return parts


def lstat_at(directory: int, name: str) -> os.stat_result | None:
    try:
        return os.stat(name, dir_fd=directory, follow_symlinks=False)
    except FileNotFoundError:
        return None
