"""LocalContext: where the agent works, in the prompt (what the `tether` command adds).

The section names the directory, its git branch when it is a repository, and its top
level, so the agent does not spend its first steps finding out where it is. It is read
once, when the agent is built, from the directory alone: no subprocess, no network, and
(like every host file tether reads) no symlink followed.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

from tether import prompts
from tether.backends.hostfs import Root
from tether.backends.paths import misleading
from tether.capabilities.base import Capability

__all__ = ["LocalContext"]

_MAX_ENTRIES = 40
_HIDDEN = frozenset({".git", ".tether", ".venv", "__pycache__", "node_modules"})


class LocalContext(Capability):
    """The working directory `root` described in the prompt's local-context section."""

    prompt_slot = "local_context"

    def __init__(self, root: str | os.PathLike[str]) -> None:
        self.root = Path(root).resolve()

    def prompt(self) -> str:
        host = Root(self.root)
        branch = git_branch(host)
        return prompts.render(
            "local_context",
            directory=self.root,
            git=f" It is a git repository, on `{branch}`." if branch else "",
            listing=top_level(host),
        )


def git_branch(root: Root) -> str | None:
    """The checked-out branch (or commit, when detached) of the repository at `root`."""
    try:
        fd = root.open("/.git/HEAD", os.O_RDONLY | os.O_NONBLOCK)
    except OSError:
        return None
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return None
        head = os.read(fd, 512).decode("utf-8", errors="replace").strip()
    finally:
        os.close(fd)
    if not head or any(misleading(c) for c in head):
        return None
    return head.removeprefix("ref: refs/heads/") if head.startswith("ref: ") else head[:12]


def top_level(root: Root) -> str:
    """The entries of `root`, directories marked with "/", at most 40 of them."""
    try:
        fd = root.open_dir("/")
        try:
            with os.scandir(fd) as scan:
                entries = sorted(scan, key=lambda e: e.name)
        finally:
            os.close(fd)
    except OSError:
        return "(cannot be listed)"
    names = [
        f"{e.name}/" if e.is_dir(follow_symlinks=False) else e.name
        for e in entries
        if e.name not in _HIDDEN and not any(misleading(c) for c in e.name)
    ]
    if not names:
        return "(empty)"
    more = len(names) - _MAX_ENTRIES
    shown = ", ".join(f"`{n}`" for n in names[:_MAX_ENTRIES])
    return shown + (f", and {more} more" if more > 0 else "")
