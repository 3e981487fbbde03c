"""Virtual paths: one checked, canonical form for every backend.

A virtual path is absolute and POSIX-style: "/src/app.py". `clean` is the only way a
path from the model reaches a backend; it refuses whatever could mean something else on
some system (NUL bytes, backslashes, drive letters, `..`, `~`) instead of guessing, and
names a person could misread: control characters and invisible formatting ones, such as
the bidirectional overrides that make "evil\u202etxt.exe" look like "evilexe.txt".
"""

from __future__ import annotations

import re
import unicodedata

from tether.backends.errors import BackendError

__all__ = ["MAX_PATH_LENGTH", "clean", "is_under", "join", "misleading"]

_MISLEADING = frozenset({"Cc", "Cf", "Zl", "Zp", "Cs"})

MAX_PATH_LENGTH = 4096
_DRIVE = re.compile(r"^[A-Za-z]:")


def clean(path: object) -> str:
    """The canonical form of `path`, or a `BackendError` saying what is wrong with it.

    Relative paths are taken from "/"; repeated and trailing slashes and "." parts go.
    """
    if not isinstance(path, str):
        raise BackendError(f"A path must be a string, got {type(path).__name__}.")
    problem = _problem(path)
    if problem is not None:
        raise BackendError(problem)
    parts = [p for p in path.split("/") if p not in ("", ".")]
    if ".." in parts:
        raise BackendError(f"'..' is not allowed in paths: {path!r}. Use an absolute path.")
    if parts and parts[0].startswith("~"):
        raise BackendError(f"'~' is not expanded: {path!r}. Use an absolute path.")
    if any(p != p.strip() for p in parts):
        raise BackendError(f"Path parts must not start or end with spaces: {path!r}.")
    return "/" + "/".join(parts)


def _problem(path: str) -> str | None:
    """What makes the string `path` unusable as a whole, if anything."""
    if not path.strip():
        return "The path is empty."
    if len(path) > MAX_PATH_LENGTH:
        return f"The path is longer than {MAX_PATH_LENGTH} characters."
    if "\\" in path:
        return f"Use '/' in paths, not '\\': {path!r}."
    if _DRIVE.match(path):
        return f"Drive letters are not paths here: {path!r}. Paths start at '/'."
    if any(misleading(c) for c in path):
        return (
            "Paths must not hold control characters (NUL bytes, newlines, ...) or invisible "
            f"formatting characters (such as bidirectional overrides): {path!r}."
        )
    return None


def misleading(character: str) -> bool:
    """A control character or an invisible formatting one (bidi overrides, zero-width
    spaces, line separators): text holding it may not read as what it is."""
    return unicodedata.category(character) in _MISLEADING


def is_under(path: str, directory: str) -> bool:
    """Whether clean `path` is `directory` or inside it."""
    return directory in ("/", path) or path.startswith(directory + "/")


def join(directory: str, name: str) -> str:
    """`name` inside clean `directory`."""
    return directory.rstrip("/") + "/" + name
