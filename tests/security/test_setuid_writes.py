"""tether's writes never carry a setuid or setgid bit over to the file they replace.

A write replaces a file with a new one of the old one's mode. A command (or anyone)
may have left a file with those bits; kept, they would make what the agent writes run
as the file's owner for whoever starts it. Root's `fchown` clears them anyway, so the
case that matters runs as a user who is not root.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path

import pytest

USER = 4242


@pytest.mark.skipif(os.geteuid() != 0, reason="switches to an unprivileged user")
def test_a_write_over_a_setuid_file_drops_the_bits() -> None:
    workspace = Path(tempfile.mkdtemp(dir="/tmp"))  # pytest's is not open to other users
    tool = workspace / "tool"
    tool.write_bytes(b"#!/bin/sh\n")
    for path in (workspace, tool):
        os.chown(path, USER, USER)
    tool.chmod(0o6755)  # after chown, which clears the bits
    script = textwrap.dedent(
        f"""
        import asyncio
        from tether.backends import FilesystemBackend
        backend = FilesystemBackend({str(workspace)!r}, virtual_mode=True)
        asyncio.run(backend.write("/tool", b"#!/bin/sh\\necho changed\\n"))
        """
    )
    done = subprocess.run(
        ["setpriv", f"--reuid={USER}", f"--regid={USER}", "--clear-groups",
         sys.executable, "-c", script],
        capture_output=True, text=True, check=False, env={**os.environ, "HOME": str(workspace)},
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    mode = tool.stat().st_mode
    assert tool.read_bytes().endswith(b"changed\n")
    assert not mode & 0o6000, oct(mode)
    assert mode & 0o777 == 0o755
