"""LocalContext: where the agent works, in the prompt (what the `tether` command adds).

The section names the directory, its git branch when it is a repository, and its top
level, so the agent does not spend its first steps finding out where it is. It is read
once, when the agent is built, from the directory alone: no subprocess, no network.
"""

from __future__ import annotations

import os
from pathlib import Path

from tether import prompts
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
        branch = git_branch(self.root)
        return prompts.render(
            "local_context",
            directory=self.root,
            git=f" It is a git repository, on `{branch}`." if branch else "",
            listing=top_level(self.root),
        )


def git_branch(root: Path) -> str | None:
    """The checked-out branch (or commit, when detached) of the repository at `root`."""
    try:
        head = (root / ".git" / "HEAD").read_text().strip()
    except OSError:
        return None
    return head.removeprefix("ref: refs/heads/") if head.startswith("ref: ") else head[:12]


def top_level(root: Path) -> str:
    """The entries of `root`, directories marked with "/", at most 40 of them."""
    try:
        entries = sorted(os.scandir(root), key=lambda e: e.name)
    except OSError:
        return "(cannot be listed)"
    names = [f"{e.name}/" if e.is_dir() else e.name for e in entries if e.name not in _HIDDEN]
    if not names:
        return "(empty)"
    more = len(names) - _MAX_ENTRIES
    shown = ", ".join(f"`{n}`" for n in names[:_MAX_ENTRIES])
    return shown + (f", and {more} more" if more > 0 else "")
