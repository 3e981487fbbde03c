"""The sandbox's seccomp filter: commands cannot make user namespaces of their own.

Inside a new user namespace a process holds every capability over it, which opens a
large part of the kernel to it (mounts, network setup, ...). bubblewrap's own
`--disable-userns` works only when bubblewrap makes a user namespace itself, which it
does not when tether runs as root, so one filter covers both cases: `unshare` and `clone`
with CLONE_NEWUSER fail with EPERM, and `clone3` (whose flags a filter cannot read) with
ENOSYS, so that the C library falls back to `clone`. System calls of another
architecture (32-bit ones on a 64-bit kernel) fail with EPERM, so they cannot go around
the filter.

A classic BPF program of a dozen instructions, written here rather than through
libseccomp so that the sandbox needs no C library beyond bubblewrap.
"""

from __future__ import annotations

import platform
import struct

from tether.errors import ConfigurationError

__all__ = ["no_user_namespaces"]

# (AUDIT_ARCH_*, unshare, clone) by machine; clone3 is 435 everywhere.
_ARCHITECTURES = {
    "x86_64": (0xC000003E, 272, 56),
    "aarch64": (0xC00000B7, 97, 220),
    "riscv64": (0xC00000F3, 97, 220),
}
_CLONE3 = 435
_CLONE_NEWUSER = 0x10000000
_X32_BIT = 0x40000000  # x86_64's x32 calls: the same numbers with this bit set
_EPERM, _ENOSYS = 1, 38

_LOAD, _JEQ, _JGE, _JSET, _RETURN = 0x20, 0x15, 0x35, 0x45, 0x06  # BPF_W|BPF_ABS, BPF_K
_ALLOW, _ERRNO = 0x7FFF0000, 0x00050000
_NR, _ARCH, _ARG0 = 0, 4, 16  # offsets in struct seccomp_data (little-endian low word)


def _op(code: int, k: int, true: int = 0, false: int = 0) -> bytes:
    return struct.pack("=HBBI", code, true, false, k)


def no_user_namespaces(machine: str | None = None) -> bytes:
    """The filter for `machine` (default: this one), as bubblewrap's --seccomp reads it."""
    machine = machine or platform.machine()
    if machine not in _ARCHITECTURES:
        raise ConfigurationError(
            f"LocalSandbox knows the system calls of {', '.join(_ARCHITECTURES)}, not of {machine}"
        )
    arch, unshare, clone = _ARCHITECTURES[machine]
    program = [
        _op(_LOAD, _ARCH),  # 0
        _op(_JEQ, arch, 0, 9),  # 1: another architecture -> 11
        _op(_LOAD, _NR),  # 2
        _op(_JGE, _X32_BIT, 7, 0),  # 3: x32 -> 11
        _op(_JEQ, _CLONE3, 5, 0),  # 4: clone3 -> 10
        _op(_JEQ, unshare, 1, 0),  # 5: unshare -> 7
        _op(_JEQ, clone, 0, 2),  # 6: clone -> 7, anything else -> 9
        _op(_LOAD, _ARG0),  # 7: the flags
        _op(_JSET, _CLONE_NEWUSER, 2, 0),  # 8: a new user namespace -> 11
        _op(_RETURN, _ALLOW),  # 9
        _op(_RETURN, _ERRNO | _ENOSYS),  # 10
        _op(_RETURN, _ERRNO | _EPERM),  # 11
    ]
    return b"".join(program)
