"""Virtual paths: one checked, canonical form for every backend.

A virtual path is absolute and POSIX-style: "/src/app.py". `clean` is the only way a
path from the model reaches a backend; it refuses whatever could mean something else on
some system (NUL bytes, backslashes, drive letters, `..`, `~`) instead of guessing.
"""

from __future__ import annotations

import re

from tether.backends.errors import BackendError

__all__ = ["MAX_PATH_LENGTH", "clean", "is_under", "join"]

MAX_PATH_LENGTH = 4096
_DRIVE = re.compile(r"^[A-Za-z]:")


def clean(path: object) -> str:
    """The canonical form of `path`, or a `BackendError` saying what is wrong with it.

    Relative paths are taken from "/"; repeated and trailing slashes and "." parts go.
    """
    if not isinstance(path, str):
        raise BackendError(f"A path must be a string, got {type(path).__name__}.")
    if not path.strip():
        raise BackendError("The path is empty.")
    if "\x00" in path:
        raise BackendError("The path contains a NUL byte.")
    if len(path) > MAX_PATH_LENGTH:
        raise BackendError(f"The path is longer than {MAX_PATH_LENGTH} characters.")
    if "\\" in path:
        raise BackendError(f"Use '/' in paths, not '\\': {path!r}.")
    if _DRIVE.match(path):
        raise BackendError(f"Drive letters are not paths here: {path!r}. Paths start at '/'.")
    parts = [p for p in path.split("/") if p not in ("", ".")]
    if ".." in parts:
        raise BackendError(f"'..' is not allowed in paths: {path!r}. Use an absolute path.")
    if parts and parts[0].startswith("~"):
        raise BackendError(f"'~' is not expanded: {path!r}. Use an absolute path.")
    if any(p != p.strip() or any(ord(c) < 32 for c in p) for p in parts):
        raise BackendError(
            f"Path parts must not start or end with spaces or hold control characters: {path!r}."
        )
    return "/" + "/".join(parts)


def is_under(path: str, directory: str) -> bool:
    """Whether clean `path` is `directory` or inside it."""
    return directory in ("/", path) or path.startswith(directory + "/")


def join(directory: str, name: str) -> str:
    """`name` inside clean `directory`."""
    return directory.rstrip("/") + "/" + name
