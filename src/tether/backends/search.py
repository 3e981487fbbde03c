"""glob and grep, written once: every backend's results come from here or match it.

Patterns are RE2 syntax (Go's and ripgrep's dialect): matching takes time linear in the
text whatever the pattern, so no pattern the model writes can stall a run. What that
dialect leaves out (lookaround, backreferences) is what makes that guarantee possible.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, AnyStr

import re2  # type: ignore[import-untyped]

from tether.backends.base import FileInfo, GrepHit
from tether.backends.errors import BackendError
from tether.backends.globs import compile_glob
from tether.backends.paths import is_under

__all__ = [
    "REGEX_SYNTAX",
    "Pattern",
    "compile_pattern",
    "glob_match",
    "grep_files",
    "grep_text",
    "include_match",
    "is_binary",
    "relative",
    "shown",
    "split_lines",
]


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
    matcher = compile_glob(pattern)  # linear in each path, whatever the pattern
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
    matcher = compile_glob(include)
    return matcher.match(path.rsplit("/", 1)[-1]) or matcher.match(relative(path, directory))


REGEX_SYNTAX = frozenset("\\.+*?()|[]{}^$")
"""The characters that make a pattern more than the text it spells, in RE2's syntax."""


class Pattern:
    """A compiled grep pattern: a line test, and a quick test of a whole file."""

    def __init__(
        self, line: Any, whole: Any, *, one_line: bool = False, text: bytes | None = None
    ) -> None:
        self.line = line
        self.whole = whole  # None when the pattern is anchored to the start or end of text
        self.one_line = one_line
        """Whether every match of `whole` lies within one line, and every line that
        matches holds one: true of text without a line break, literal or spelling
        nothing special. A file's matching lines are then found by searching it whole."""
        self.text = text
        """The bytes every match is, when that is all the pattern is (text, case kept)."""

    def matches(self, text: str) -> bool:
        return self.line.search(text.encode(errors="replace")) is not None

    def might_match(self, data: bytes) -> bool:
        """False only when no line of `data` can match: most files are ruled out at once."""
        return self.whole is None or self.whole.search(data) is not None


_UNSUPPORTED = (
    ("(?<=", "lookbehind"),
    ("(?<!", "lookbehind"),
    ("(?=", "lookahead"),
    ("(?!", "lookahead"),
    ("\\Z", "\\Z (\\z ends the line)"),
)


def compile_pattern(pattern: str, *, literal: bool, ignore_case: bool) -> Pattern:
    """The compiled grep pattern, or a `BackendError` explaining why it does not compile."""
    if not pattern:
        raise BackendError("The search pattern is empty.")
    options = re2.Options()
    options.log_errors = False
    options.literal = literal
    options.case_sensitive = not ignore_case
    options.never_capture = True  # a yes or no is all grep needs: the fastest engine runs
    anchored = not literal and ("\\A" in pattern or "\\z" in pattern)
    try:
        # Patterns and text are UTF-8 bytes, which RE2 reads natively: no file is decoded
        # unless one of its lines matches.
        line = re2.compile(pattern.encode(), options)
        text = pattern if literal else f"(?m:{pattern})"
        whole = None if anchored else re2.compile(text.encode(), options)
    except UnicodeEncodeError:
        raise BackendError(f"The pattern {shown(pattern)} is not valid Unicode.") from None
    except re2.error as exc:
        raise BackendError(_explain(pattern, exc)) from None
    one_line = (literal or REGEX_SYNTAX.isdisjoint(pattern)) and "\n" not in pattern
    exact = pattern.encode() if one_line and not ignore_case else None
    return Pattern(line, whole, one_line=one_line, text=exact)


def _explain(pattern: str, exc: re2.error) -> str:
    reason = exc.args[0] if exc.args else exc
    if isinstance(reason, bytes):
        reason = reason.decode(errors="replace")
    text = f"The pattern {shown(pattern)} is not a valid regular expression ({reason})."
    missing = sorted({name for mark, name in _UNSUPPORTED if mark in pattern})
    if (
        not missing
        and str(reason).startswith("invalid escape sequence: \\")
        and str(reason)[-1].isdigit()
    ):
        missing = ["backreferences"]
    if missing:
        text += (
            f" Patterns are RE2 syntax, which has no {' or '.join(missing)}; "
            "that is what keeps every search linear in time."
        )
    return text + " Fix it, or search for it literally."


def shown(pattern: str, limit: int = 200) -> str:
    """A pattern quoted for a message, cut to `limit` characters."""
    if len(pattern) <= limit:
        return repr(pattern)
    return f"{pattern[:limit]!r}... ({len(pattern)} characters)"


def grep_text(path: str, data: bytes, pattern: Pattern) -> list[GrepHit]:
    """The matching lines of one file; none for a binary file."""
    if is_binary(data):
        return []
    if pattern.one_line:
        return _lines_holding(path, data, pattern)
    if not pattern.might_match(data):
        return []
    search = pattern.line.search
    return [  # split as bytes: "\n" is never inside a UTF-8 sequence
        GrepHit(path, number, line.decode("utf-8", errors="replace"))
        for number, line in enumerate(split_lines(data), start=1)
        if search(line) is not None
    ]


def _lines_holding(path: str, data: bytes, pattern: Pattern) -> list[GrepHit]:
    """The lines of `data` that hold a match of a `one_line` pattern: one search of the
    text for each matching line, not one search for every line. Each search starts at
    the next line, so the text is read once."""
    hits: list[GrepHit] = []
    number, counted, position, end = 1, 0, 0, len(data)
    while position < end:
        if pattern.text is not None:
            start = data.find(pattern.text, position)
        else:
            found = pattern.whole.search(data, position)
            start = -1 if found is None else found.start()
        if start < 0:
            break
        first = data.rfind(b"\n", 0, start) + 1
        last = data.find(b"\n", start)
        if last < 0:
            last = end
        number += data.count(b"\n", counted, first)
        counted = first
        hits.append(GrepHit(path, number, data[first:last].decode("utf-8", errors="replace")))
        position = last + 1
    return hits


def grep_files(files: Iterable[tuple[str, bytes]], pattern: Pattern) -> list[GrepHit]:
    """The matching lines of several files, in path order. CPU-bound: run it in a thread."""
    hits: list[GrepHit] = []
    for path, data in sorted(files):
        hits += grep_text(path, data, pattern)
    return hits


def split_lines(text: AnyStr) -> list[AnyStr]:
    """Lines split at "\\n" only (as ripgrep does); a final newline starts no new line.
    Text or UTF-8 bytes alike."""
    lines = text.split(b"\n" if isinstance(text, bytes) else "\n")
    if not lines[-1]:
        lines.pop()
    return lines


def is_binary(data: bytes) -> bool:
    """A NUL byte makes a file binary: grep skips it and read_file will not show it."""
    return b"\x00" in data
