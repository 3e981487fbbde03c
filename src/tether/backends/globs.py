"""Glob patterns, matched in time linear in the path whatever the pattern.

The dialect is wcmatch's with GLOBSTAR, BRACE and DOTGLOB, which glob and grep used
before: `*` and `?` stay within a path segment, `**` as a whole segment is any number
of segments, `[...]` and `[!...]` are classes (POSIX ones such as `[[:alpha:]]`
included), `{a,b}` and `{1..3}` expand, `\\` escapes, and names starting with a dot
are matched like any other. wcmatch turns a pattern into a backtracking regular
expression: `**/d/**/d/**/*.x` took a second on one path 400 directories deep, holding
the interpreter (and with it the event loop) all along. Here the pattern becomes an
RE2 expression instead, matched by an automaton.
"""

from __future__ import annotations

import functools

import bracex
import re2  # type: ignore[import-untyped]

from tether.backends.errors import BackendError

__all__ = ["Glob", "compile_glob"]

MAX_EXPANSIONS = 1_000
"""The most patterns one pattern's braces may expand to (wcmatch's limit)."""
_NEVER = r"[^\x{0}-\x{10FFFF}]"
_POSIX = {
    "alnum": "0-9A-Za-z",
    "alpha": "A-Za-z",
    "ascii": "\x00-.0-\x7f",
    "blank": " \t",
    "cntrl": "\x00-\x1f\x7f",
    "digit": "0-9",
    "graph": "!-.0-~",
    "lower": "a-z",
    "print": " -.0-~",
    "punct": "!-.:-@[-`{-~",
    "space": " \t\n\r\x0b\x0c",
    "upper": "A-Z",
    "word": "0-9A-Z_a-z",
    "xdigit": "0-9A-Fa-f",
}
"""Each POSIX class as character ranges, "/" left out (no class matches it)."""


class Glob:
    """A compiled glob pattern: `match(path)` is whether the whole path matches."""

    def __init__(self, expression: str) -> None:
        options = re2.Options()
        options.log_errors = False
        options.never_capture = True  # a yes or no: the fastest engine runs
        try:  # UTF-8 bytes, which RE2 reads natively (text would be converted each call)
            self._regex = re2.compile(expression.encode(), options)
        except re2.error:
            raise BackendError("The glob pattern is too complex; make it simpler.") from None

    def match(self, path: str) -> bool:
        return self._regex.fullmatch(path.encode(errors="surrogatepass")) is not None


@functools.lru_cache(maxsize=64)
def compile_glob(pattern: str) -> Glob:
    """The compiled `pattern`, or a `BackendError` saying why it cannot be."""
    try:
        expanded = bracex.expand(pattern, keep_escapes=True, limit=MAX_EXPANSIONS)
    except bracex.ExpansionLimitException:
        raise BackendError(
            f"The glob pattern's braces expand to more than {MAX_EXPANSIONS:,} patterns."
        ) from None
    return Glob("|".join(f"(?:{_translate(one)})" for one in expanded) or _NEVER)


def _translate(pattern: str) -> str:
    """One pattern without braces as an RE2 expression."""
    pattern = _plain_slashes(pattern)
    if pattern.endswith("/"):
        return _NEVER  # only a directory would match, and files are what is matched
    parts = ["/"] if pattern.startswith("/") else []
    segments = [s for s in pattern.split("/") if s]
    for number, segment in enumerate(segments, start=1):
        last = number == len(segments)
        if segment == "**":
            parts.append(".*" if last else "(?:[^/]*/)*")
        elif not segment.strip("*"):
            parts.append("[^/]+" + ("" if last else "/"))  # a segment is never empty
        else:
            parts.append(_segment(segment) + ("" if last else "/"))
    return "".join(parts)


def _plain_slashes(pattern: str) -> str:
    """`pattern` with escaped slashes as plain ones (a slash is always a separator) and
    without a last backslash that escapes nothing, as wcmatch reads it."""
    out: list[str] = []
    at = 0
    while at < len(pattern):
        if pattern[at] == "\\":
            escaped = pattern[at + 1 : at + 2]
            out.append(escaped if escaped in ("/", "") else pattern[at : at + 2])
            at += 2
        else:
            out.append(pattern[at])
            at += 1
    return "".join(out)


def _segment(text: str) -> str:
    out: list[str] = []
    at = 0
    while at < len(text):
        char = text[at]
        if char == "*":
            out.append("[^/]*")
        elif char == "?":
            out.append("[^/]")
        elif char == "[" and (found := _class(text, at)) is not None:
            expression, at = found
            out.append(expression)
            continue
        elif char == "\\":  # escapes the next character
            at += 1
            out.append(_literal(text[at]))
        else:
            out.append(_literal(char))
        at += 1
    return "".join(out)


def _class(text: str, at: int) -> tuple[str, int] | None:
    """The class starting at `text[at]` ("[") and the index past it; None when it is
    not closed (the "[" is then a plain character)."""
    at += 1
    negated = at < len(text) and text[at] in "!^"
    at += negated
    ranges: list[tuple[str, str]] = []
    first = True
    while at < len(text) and (text[at] != "]" or first):
        first = False
        if text.startswith("[:", at) and (end := text.find(":]", at + 2)) >= 0:
            name = text[at + 2 : end]
            if name in _POSIX:
                ranges += _ranges(_POSIX[name])
                at = end + 2
                continue
        low, at = _class_char(text, at)
        high = low
        if at + 1 < len(text) and text[at] == "-" and text[at + 1] != "]":
            high, at = _class_char(text, at + 1)
        if low <= high:
            ranges.append((low, high))
    if at >= len(text):
        return None
    return _class_expression(ranges, negated), at + 1


def _class_char(text: str, at: int) -> tuple[str, int]:
    if text[at] == "\\" and at + 1 < len(text):
        at += 1
    return text[at], at + 1


def _ranges(spec: str) -> list[tuple[str, str]]:
    """ "a-z0" as [("a", "z"), ("0", "0")]."""
    out, at = [], 0
    while at < len(spec):
        if at + 2 < len(spec) and spec[at + 1] == "-":
            out.append((spec[at], spec[at + 2]))
            at += 3
        else:
            out.append((spec[at], spec[at]))
            at += 1
    return out


def _class_expression(ranges: list[tuple[str, str]], negated: bool) -> str:
    """An RE2 class of `ranges` (or of everything else, `negated`), never "/"."""
    kept: list[tuple[str, str]] = []
    for low, high in ranges:  # "/" taken out of each range
        if low < "/":
            kept.append((low, min(high, ".")))
        if high > "/":
            kept.append((max(low, "0"), high))
    if negated:
        kept.append(("/", "/"))
    elif not kept:
        return _NEVER
    items = "".join(_hex(low) if low == high else f"{_hex(low)}-{_hex(high)}" for low, high in kept)
    return f"[{'^' if negated else ''}{items}]"


def _literal(char: str) -> str:
    return char if char.isalnum() and char.isascii() else _hex(char)


def _hex(char: str) -> str:
    return f"\\x{{{ord(char):x}}}"
