"""The sandbox's seccomp filter: what a command may not do whatever user it runs as.

- No user namespaces of its own. Inside a new user namespace a process holds every
  capability over it, which opens a large part of the kernel to it (mounts, network
  setup, ...). bubblewrap's own `--disable-userns` works only when bubblewrap makes a
  user namespace itself, which it does not when tether runs as root, so the filter
  covers both cases: `unshare` and `clone` with CLONE_NEWUSER fail with EPERM, and
  `clone3` (whose flags a filter cannot read) with ENOSYS, so that the C library falls
  back to `clone`.
- No setuid or setgid bit (`chmod` and its kin with S_ISUID or S_ISGID fail with
  EPERM): a command owns the files it makes in the workspace, and a setuid file there
  would run as that owner (root, when root owns the workspace) for whoever starts it on
  the host. Writing to a file clears those bits anyway, so `open` needs no rule.
  A file made with those bits (`open`, `openat`, `creat`, `mknod` with O_CREAT and
  such a mode) is refused too: empty, it keeps them until something writes to it, and
  root's writes do not clear them.
- No kernel keyrings (`add_key`, `request_key`, `keyctl`): the keys of the user a
  command runs as are that user's secrets on the host too.
- No vsock sockets (AF_VSOCK): they reach the hypervisor of a virtual machine and
  ignore network namespaces, so "no network" would not hold without this.

System calls of another architecture (32-bit ones on a 64-bit kernel) fail with EPERM,
so they cannot go around the filter. A classic BPF program of a few dozen instructions,
written here rather than through libseccomp so that the sandbox needs no C library
beyond bubblewrap.
"""

from __future__ import annotations

import platform
import struct
from dataclasses import dataclass

from tether.errors import ConfigurationError

__all__ = ["command_filter", "container_profile"]


@dataclass(frozen=True, slots=True)
class _Calls:
    """One machine's audit architecture and system call numbers."""

    arch: int
    unshare: int
    clone: int
    keys: tuple[int, ...]  # add_key, request_key, keyctl
    mode_in_arg1: tuple[int, ...]  # chmod (where there is one), fchmod, creat, mknod
    mode_in_arg2: tuple[int, ...]  # fchmodat, fchmodat2, mknodat
    socket: int
    open_flags_mode: tuple[tuple[int, int], ...]  # (call, argument of its flags): open, openat


_FCHMODAT2 = 452  # the same number everywhere
_MACHINES = {
    "x86_64": _Calls(
        0xC000003E, 272, 56, (248, 249, 250), (90, 91, 85, 133), (268, _FCHMODAT2, 259),
        41, ((2, 1), (257, 2)),
    ),
    "aarch64": _Calls(
        0xC00000B7, 97, 220, (217, 218, 219), (52,), (53, _FCHMODAT2, 33), 198, ((56, 2),)
    ),
    "riscv64": _Calls(
        0xC00000F3, 97, 220, (217, 218, 219), (52,), (53, _FCHMODAT2, 33), 198, ((56, 2),)
    ),
}  # fmt: skip
_AF_VSOCK = 40
_MAKES_A_FILE = 0o100 | 0o20000000  # O_CREAT | __O_TMPFILE
_CLONE3 = 435
_OPENAT2 = 437
_CLONE_NEWUSER = 0x10000000
_SET_ID_BITS = 0o6000  # S_ISUID | S_ISGID
_X32_BIT = 0x40000000  # x86_64's x32 calls: the same numbers with this bit set
_EPERM, _ENOSYS = 1, 38

_LOAD, _JEQ, _JGE, _JSET, _RETURN = 0x20, 0x15, 0x35, 0x45, 0x06  # BPF_W|BPF_ABS, BPF_K
_ALLOW, _ERRNO = 0x7FFF0000, 0x00050000
_NR, _ARCH = 0, 4  # offsets in struct seccomp_data


def _arg(index: int) -> int:
    """Where argument `index` starts (its low word, little-endian) in seccomp_data."""
    return 16 + 8 * index


class _Program:
    """A BPF program written with labels: a jump names where it goes, and `bytes()`
    works out the offsets once every label is placed."""

    def __init__(self) -> None:
        self.lines: list[tuple[int, int, str | None, str | None]] = []
        self.labels: dict[str, int] = {}

    def op(self, code: int, k: int, true: str | None = None, false: str | None = None) -> None:
        self.lines.append((code, k, true, false))

    def label(self, name: str) -> None:
        self.labels[name] = len(self.lines)

    def __bytes__(self) -> bytes:
        out = b""
        for index, (code, k, true, false) in enumerate(self.lines):
            jt = self.labels[true] - index - 1 if true else 0
            jf = self.labels[false] - index - 1 if false else 0
            out += struct.pack("=HBBI", code, jt, jf, k)
        return out


def command_filter(machine: str | None = None) -> bytes:
    """The filter for `machine` (default: this one), as bubblewrap's --seccomp reads it."""
    machine = machine or platform.machine()
    calls = _MACHINES.get(machine)
    if calls is None:
        raise ConfigurationError(
            f"LocalSandbox knows the system calls of {', '.join(_MACHINES)}, not of {machine}"
        )
    p = _Program()
    p.op(_LOAD, _ARCH)
    p.op(_JEQ, calls.arch, None, "deny")  # another architecture
    p.op(_LOAD, _NR)
    p.op(_JGE, _X32_BIT, "deny")
    p.op(_JEQ, _CLONE3, "no-such-call")
    p.op(_JEQ, _OPENAT2, "no-such-call")  # its mode is in a struct a filter cannot read
    p.op(_JEQ, calls.unshare, "namespace-flags")
    p.op(_JEQ, calls.clone, "namespace-flags")
    for number in calls.keys:
        p.op(_JEQ, number, "deny")
    for number in calls.mode_in_arg1:
        p.op(_JEQ, number, "mode-in-arg1")
    for number in calls.mode_in_arg2:
        p.op(_JEQ, number, "mode-in-arg2")
    p.op(_JEQ, calls.socket, "socket-family")
    for number, flags in calls.open_flags_mode:
        p.op(_JEQ, number, f"open-flags-in-arg{flags}")
    p.op(_RETURN, _ALLOW)
    p.label("socket-family")
    p.op(_LOAD, _arg(0))
    p.op(_JEQ, _AF_VSOCK, "deny")
    p.op(_RETURN, _ALLOW)
    for flags in sorted({flags for _, flags in calls.open_flags_mode}):
        p.label(f"open-flags-in-arg{flags}")  # a new file's mode follows its flags
        p.op(_LOAD, _arg(flags))
        p.op(_JSET, _MAKES_A_FILE, f"mode-in-arg{flags + 1}")
        p.op(_RETURN, _ALLOW)
    for name, offset, bits in (
        ("namespace-flags", _arg(0), _CLONE_NEWUSER),
        ("mode-in-arg1", _arg(1), _SET_ID_BITS),
        ("mode-in-arg2", _arg(2), _SET_ID_BITS),
        ("mode-in-arg3", _arg(3), _SET_ID_BITS),
    ):
        p.label(name)
        p.op(_LOAD, offset)
        p.op(_JSET, bits, "deny")
        p.op(_RETURN, _ALLOW)
    p.label("no-such-call")
    p.op(_RETURN, _ERRNO | _ENOSYS)
    p.label("deny")
    p.op(_RETURN, _ERRNO | _EPERM)
    return bytes(p)


# What a container engine's own default profile also keeps from a process without
# capabilities, beyond the filter above: kernel interfaces with a long record of
# privilege escalations (io_uring, userfaultfd, perf events, eBPF) and obsolete calls.
_CONTAINER_DENIED = (
    "add_key", "request_key", "keyctl",
    "bpf", "perf_event_open", "userfaultfd", "kcmp", "lookup_dcookie",
    "io_uring_setup", "io_uring_enter", "io_uring_register",
    "uselib", "ustat", "sysfs", "_sysctl", "vm86", "vm86old", "nfsservctl",
)  # fmt: skip


def container_profile() -> dict[str, object]:
    """The same rules as an OCI seccomp profile, for podman and docker's
    `--security-opt seccomp=FILE`: allowed unless a rule says otherwise, with the
    container engines' usual denials of calls a process without capabilities could
    still make. Every other architecture's calls are refused (none is listed)."""

    def masked(index: int, bits: int) -> list[dict[str, object]]:
        return [{"index": index, "value": bits, "valueTwo": bits, "op": "SCMP_CMP_MASKED_EQ"}]

    def deny(names: list[str], args: list[dict[str, object]] | None = None) -> dict[str, object]:
        return {"names": names, "action": "SCMP_ACT_ERRNO", "errnoRet": _EPERM, "args": args or []}

    rules = [
        deny(list(_CONTAINER_DENIED)),
        {"names": ["clone3", "openat2"], "action": "SCMP_ACT_ERRNO", "errnoRet": _ENOSYS},
        deny(["unshare", "clone"], masked(0, _CLONE_NEWUSER)),
    ]
    # The family is an int: the kernel reads the low 32 bits, so the rule compares those
    # alone (equality on all 64 would let `socket(40 | 1 << 32, ...)` by).
    low = {"index": 0, "value": 0xFFFFFFFF, "valueTwo": _AF_VSOCK, "op": "SCMP_CMP_MASKED_EQ"}
    rules.append(deny(["socket"], [low]))
    for bit in (0o4000, 0o2000):  # S_ISUID, S_ISGID: each a rule (masked equality)
        rules.append(deny(["chmod", "fchmod", "creat", "mknod"], masked(1, bit)))
        rules.append(deny(["fchmodat", "fchmodat2", "mknodat"], masked(2, bit)))
        for made in (0o100, 0o20000000):  # O_CREAT, __O_TMPFILE: the mode then counts
            rules.append(deny(["open"], masked(1, made) + masked(2, bit)))
            rules.append(deny(["openat"], masked(2, made) + masked(3, bit)))
    architecture = {"x86_64": "SCMP_ARCH_X86_64", "aarch64": "SCMP_ARCH_AARCH64"}
    machine = platform.machine()
    if machine not in architecture:
        raise ConfigurationError(
            f"ContainerSandbox knows the system calls of {', '.join(architecture)}, not of "
            f"{machine}"
        )
    return {
        "defaultAction": "SCMP_ACT_ALLOW",
        "defaultErrnoRet": _EPERM,
        "architectures": [architecture[machine]],
        "syscalls": rules,
    }
