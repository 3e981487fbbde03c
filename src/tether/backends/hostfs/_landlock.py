"""Landlock (Linux 5.13+): the calling thread, and every process it starts from then on,
may read only beneath the directories and files it names, and may write nothing.

Landlock rules hold on inodes, not on names: a directory swapped for a symlink to
elsewhere leads a restricted process to a refusal, whatever path it was given. The
restriction is per thread and cannot be lifted, so it is only ever taken by a thread
made for it (see `tether.backends.hostfs._ripgrep`).
"""

from __future__ import annotations

import ctypes
import errno
import os
from collections.abc import Sequence
from typing import Any

__all__ = ["EXECUTE", "READ_DIR", "READ_FILE", "abi", "restrict_thread"]

_SYS_CREATE_RULESET, _SYS_ADD_RULE, _SYS_RESTRICT_SELF = 444, 445, 446  # every architecture
_CREATE_RULESET_VERSION = 1
_RULE_PATH_BENEATH = 1
_PR_SET_NO_NEW_PRIVS = 38

EXECUTE, READ_FILE, READ_DIR = 1 << 0, 1 << 2, 1 << 3
_FS_RIGHTS = {1: (1 << 13) - 1, 2: (1 << 14) - 1, 3: (1 << 15) - 1, 5: (1 << 16) - 1}
"""Every filesystem right each ABI version knows (later ones add refer, truncate, ioctl)."""
_NET_RIGHTS = (1 << 2) - 1  # bind and connect (TCP), from ABI 4


class _RulesetAttr(ctypes.Structure):
    _fields_ = (("handled_access_fs", ctypes.c_uint64), ("handled_access_net", ctypes.c_uint64))


class _PathBeneath(ctypes.Structure):
    _pack_ = 1
    _fields_ = (("allowed_access", ctypes.c_uint64), ("parent_fd", ctypes.c_int32))


_libc: Any = None
_syscall: Any = None
_abi: int | None = None


def abi() -> int:
    """The kernel's Landlock ABI version; 0 where it has none (or a filter hides it)."""
    global _libc, _syscall, _abi
    if _abi is None:
        _abi = 0
        try:
            _libc = ctypes.CDLL(None, use_errno=True)
            _syscall = _libc.syscall
            _syscall.restype = ctypes.c_long
            _abi = max(0, int(_syscall(_SYS_CREATE_RULESET, None, 0, _CREATE_RULESET_VERSION)))
        except (OSError, AttributeError):
            _abi = 0
    return _abi


def _checked(result: int) -> int:
    if result < 0:
        code = ctypes.get_errno() or errno.EPERM
        raise OSError(code, os.strerror(code))
    return result


def restrict_thread(allowed: Sequence[tuple[int, int]]) -> None:
    """Restrict the calling thread for good: it (and what it starts) may use only the
    rights given for each fd in `allowed` (a directory's rights hold beneath it), write
    nothing and, from ABI 4, open no TCP connection. OSError when that cannot be done."""
    version = abi()
    if version < 1:
        raise OSError(errno.ENOSYS, "Landlock is not available")
    rights = _FS_RIGHTS[max(v for v in _FS_RIGHTS if v <= version)]
    attr = _RulesetAttr(rights, _NET_RIGHTS if version >= 4 else 0)
    size = ctypes.sizeof(attr) if version >= 4 else ctypes.sizeof(ctypes.c_uint64)
    ruleset = _checked(_syscall(_SYS_CREATE_RULESET, ctypes.byref(attr), size, 0))
    try:
        for fd, access in allowed:
            rule = _PathBeneath(access, fd)
            _checked(_syscall(_SYS_ADD_RULE, ruleset, _RULE_PATH_BENEATH, ctypes.byref(rule), 0))
        # no_new_privs (per thread, as Landlock is) lets an unprivileged thread restrict
        # itself; a restricted exec of a set-user-id program then gains nothing either.
        _checked(int(_libc.prctl(_PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0)))
        _checked(_syscall(_SYS_RESTRICT_SELF, ruleset, 0))
    finally:
        os.close(ruleset)
