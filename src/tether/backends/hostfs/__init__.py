"""Host files beneath a root directory, opened so that no symlink is ever followed.

Everything tether does to files on this machine (the `FilesystemBackend`, the sandbox's
workspace and saved command output, ownership changes, the `tether` command's reads)
goes through a `Root`. It holds a file descriptor of the root directory and opens every
path beneath it without following a symlink in any component: one `openat2` call with
`RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS` where the kernel has it (Linux 5.6+), otherwise
one `openat(O_NOFOLLOW)` per component from the directory before. A process that swaps
a directory for a symlink at any moment can make an operation fail; it cannot lead one
outside the root, because the kernel never resolves a name we did not check.

Paths here are clean virtual paths ("/src/app.py", see `tether.backends.paths`);
"/" is the root itself.

The pieces: `_opening` (the flags, `openat2`, a path's components), `_root` (`Root`: open,
look, create, replace, and the git guard), `_writing` (a file written whole before it
gets its name; the locks writers share), `_walk` (a tree walked without recursion),
`_ripgrep` and `_landlock` (grep's `rg`, run from a thread the kernel confines).
"""

from __future__ import annotations

from tether.backends.hostfs._root import InGitDirectory, LinkInPath, Root
from tether.backends.hostfs._writing import TEMPORARY_PREFIX, config_home, state_home, try_lock

__all__ = [
    "TEMPORARY_PREFIX",
    "InGitDirectory",
    "LinkInPath",
    "Root",
    "config_home",
    "state_home",
    "try_lock",
]
