"""What the sandbox needs from this machine, checked once, with errors that say what to do."""

from __future__ import annotations

import functools
import os
import shutil
import subprocess
from collections.abc import Sequence

from tether.backends.sandbox.seccomp import command_filter
from tether.errors import ConfigurationError

__all__ = ["bwrap_path", "probe", "seccomp_fd"]

_INSTALL = (
    "install bubblewrap (Debian/Ubuntu: apt-get install bubblewrap; Fedora: dnf install bubblewrap)"
)
_NEEDED_OPTIONS = ("--bind-fd", "--size", "--seccomp", "--info-fd")


def bwrap_path() -> str:
    found = shutil.which("bwrap")
    if found is None:
        raise ConfigurationError(
            f"LocalSandbox needs bubblewrap, which is not installed: {_INSTALL}. "
            "UnsafeLocalShell runs commands without isolation, if you accept that."
        )
    return found


@functools.cache
def _bwrap_can(option: str) -> bool:
    """Whether this bubblewrap knows `option` (--disable-userns came in 0.8)."""
    found = shutil.which("bwrap")
    if found is None:
        return False
    done = subprocess.run([found, "--help"], capture_output=True, text=True, check=False)
    return option in done.stdout + done.stderr


@functools.cache
def probe(argv: Sequence[str]) -> None:
    """Fails with a clear error when this machine cannot make the sandbox."""
    seccomp = seccomp_fd()
    try:
        done = subprocess.run(
            [*argv, "--seccomp", str(seccomp), "--", "/bin/true"],
            capture_output=True,
            text=True,
            check=False,
            pass_fds=(seccomp,),
        )
    finally:
        os.close(seccomp)
    if done.returncode == 0:
        return
    if not all(_bwrap_can(option) for option in _NEEDED_OPTIONS):
        raise ConfigurationError(
            f"LocalSandbox needs bubblewrap 0.8 or later (for {', '.join(_NEEDED_OPTIONS)}); "
            f"this one says: {done.stderr.strip()[:200]}. Debian 12, Ubuntu 24.04 and "
            "Fedora 38 have it."
        )
    raise ConfigurationError(
        f"bubblewrap cannot create a sandbox here ({done.stderr.strip()}). It needs "
        "user namespaces: on Debian and Ubuntu, sysctl kernel.unprivileged_userns_clone=1 "
        "(and on Ubuntu 24.04+, an AppArmor profile for bwrap); in a container, run it "
        "with user namespaces allowed."
    )


def seccomp_fd() -> int:
    """An fd holding the sandbox's seccomp filter (see `tether.backends.sandbox.seccomp`)."""
    fd = os.memfd_create("tether-seccomp", os.MFD_CLOEXEC)
    os.write(fd, command_filter())
    os.lseek(fd, 0, os.SEEK_SET)
    return fd
