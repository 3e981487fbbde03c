"""Unified diffs of the changes file calls make, for approval cards and change notes:
linear in the size of the texts, and bounded in what they show.

difflib matches lines against each other, which on a file of many similar lines took
tens of seconds for a small `replace_all`. Here an edit's changes are known (where its
old text occurs), so the lines around each are shown directly; a diff of two whole
texts sets aside the lines they share at the start and at the end (compared in blocks,
in C), and only the middle is matched, by difflib when it is small. A diff stops at
`MAX_SHOWN_LINES` lines or `MAX_SHOWN_CHARS` characters and says what it left out; a
line too long to read is cut around its change. Lines end at "\\n" only, as
`read_file` counts them.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterator
from dataclasses import dataclass

__all__ = [
    "MAX_DIFFED_CHARS",
    "MAX_LINE_CHARS",
    "MAX_SHOWN_CHARS",
    "MAX_SHOWN_LINES",
    "edit_diff",
    "text_diff",
]

MAX_SHOWN_LINES = 1_000
MAX_SHOWN_CHARS = 100_000
MAX_LINE_CHARS = 1_000
MAX_DIFFED_CHARS = 16 * 1024 * 1024
"""An edit whose result would be longer is not built to be shown (the file tools
refuse files over 10 MB anyway)."""
CONTEXT = 3
MATCH_BUDGET = 10_000
"""The most (lines removed) x (lines added) difflib is given to match; a larger change
is shown as all its lines removed, then all added."""
_BLOCK = 1 << 16


@dataclass(frozen=True, slots=True)
class _Change:
    """Whole lines of the old text, [start, end), and what they become."""

    start: int
    end: int
    line: int
    """The number of the first of them in the old text, from 1."""
    new_line: int
    """Its number in the new text."""
    new: str


def text_diff(path: str, old: str, new: str) -> str:
    """The diff of `old` to `new`, or a note that nothing changes."""
    if old == new:
        return f"(no change to {path})\n"
    start, old_end, new_end = _changed_middle(old, new)
    line = old.count("\n", 0, start) + 1
    change = _Change(start, old_end, line, line, new[start:new_end])
    removed, added = _lines_in(old, start, old_end), _lines_in(change.new, 0, len(change.new))
    return _Render(path, old).hunks(iter([change]), f"{removed:,} lines removed, {added:,} added")


def edit_diff(path: str, before: str, find: str, put: str, *, replace_all: bool) -> str:
    """The diff of replacing `find` by `put` in `before`, once or (`replace_all`) at
    every occurrence, as `str.replace` does it; a note when nothing changes."""
    count = before.count(find) if find else 0
    if count == 0 or find == put:
        return f"(no change to {path})\n"
    if not replace_all:
        count = 1
    size = len(before) + count * (len(put) - len(find))
    if size > MAX_DIFFED_CHARS:
        return (
            f"(diff too large to show: {count:,} replacements would make {path} "
            f"{size:,} characters long)\n"
        )
    changes = _replacements(before, find, put, count)
    return _Render(path, before).hunks(changes, f"{count:,} replacements")


_ONE_BY_ONE = 64
"""Replacements in one line made one by one; the rest of the line is replaced by
`str.replace`, so a line of a million hits costs no more Python steps than a short one."""


def _replacements(text: str, find: str, put: str, count: int) -> Iterator[_Change]:
    """The changed lines of the first `count` replacements, those sharing a line as
    one change. Found as they are asked for: a diff cut short looks for no more."""
    grows = put.count("\n") - find.count("\n")
    added_lines, line, counted_to = 0, 1, 0
    at = text.find(find)
    while count and at >= 0:
        start = text.rfind("\n", 0, at) + 1
        pieces: list[str] = []
        cursor = end = start
        replaced = 0
        while count and at >= 0 and (not pieces or at < end):
            if replaced >= _ONE_BY_ONE and "\n" not in find:  # the rest of the line at once
                many = min(count, text.count(find, cursor, end))
                pieces.append(text[cursor:end].replace(find, put, many))
                cursor, count, replaced = end, count - many, replaced + many
                at = text.find(find, cursor) if count else -1
                break
            pieces += [text[cursor:at], put]
            cursor = at + len(find)
            if cursor - 1 >= end:  # past the line: else it ends where it did (linear)
                end = _line_end(text, cursor)
            count, replaced = count - 1, replaced + 1
            at = text.find(find, cursor) if count else -1
        pieces.append(text[cursor:end])
        line += text.count("\n", counted_to, start)
        counted_to = start
        yield _Change(start, end, line, line + added_lines, "".join(pieces))
        added_lines += replaced * grows


def _line_end(text: str, at: int) -> int:
    """The end (past its newline) of the line that holds the character before `at`."""
    if at == 0 or text[at - 1] == "\n":
        return at
    found = text.find("\n", at)
    return len(text) if found < 0 else found + 1


def _lines_in(text: str, start: int, end: int) -> int:
    """How many lines text[start:end] holds (a last one without a newline counts)."""
    if end <= start:
        return 0
    return text.count("\n", start, end) + (text[end - 1] != "\n")


def _changed_middle(old: str, new: str) -> tuple[int, int, int]:
    """(start, old end, new end): the whole lines where `old` and `new` differ, the
    lines they share at the start and at the end set aside."""
    start = old.rfind("\n", 0, _common_prefix(old, new)) + 1
    tail = _common_suffix(old, new, len(old) - start, len(new) - start)
    old_end, new_end = len(old) - tail, len(new) - tail
    if not (_starts_line(old, old_end, start) and _starts_line(new, new_end, start)):
        found = old.find("\n", old_end)  # the shared end starts mid-line: from the next
        shift = tail if found < 0 else found + 1 - old_end
        old_end, new_end = old_end + shift, new_end + shift
    return start, old_end, new_end


def _starts_line(text: str, at: int, start: int) -> bool:
    return at == start or text[at - 1] == "\n"


def _common_prefix(a: str, b: str) -> int:
    """How many characters `a` and `b` share at their start: whole blocks compared
    first, then the first block that differs halved down."""
    limit = min(len(a), len(b))
    at = 0
    while at < limit and a[at : at + _BLOCK] == b[at : at + _BLOCK]:
        at += _BLOCK
    low, high = min(at, limit), min(at + _BLOCK, limit)
    while low < high:
        middle = (low + high + 1) // 2
        if a[at:middle] == b[at:middle]:
            low = middle
        else:
            high = middle - 1
    return low


def _common_suffix(a: str, b: str, a_limit: int, b_limit: int) -> int:
    """How many characters `a` and `b` share at their end, within the last `a_limit`
    characters of `a` and `b_limit` of `b`."""
    limit = min(a_limit, b_limit)
    reversed_a, reversed_b = a[len(a) - limit :][::-1], b[len(b) - limit :][::-1]
    return _common_prefix(reversed_a, reversed_b)


class _Render:
    """The hunks of changes to `old`, each with its context, until a bound is met."""

    def __init__(self, path: str, old: str) -> None:
        self.old = old
        self.out = [f"--- {path}\n", f"+++ {path}\n"]
        self.chars = sum(map(len, self.out))
        self.lines = 2
        self.full = False

    def hunks(self, changes: Iterator[_Change], summary: str) -> str:
        """The diff; past a bound, cut with `summary` of the whole change."""
        group: list[_Change] = []
        lines = 0  # in the group: once it alone fills the diff, the rest is not looked for
        for change in changes:
            if group and self._between(group[-1], change) > 2 * CONTEXT:
                self._hunk(group)
                group, lines = [], 0
            group.append(change)
            lines += _lines_in(self.old, change.start, change.end) + change.new.count("\n")
            if self.full or lines > MAX_SHOWN_LINES:
                break
        if group and not self.full:
            self._hunk(group)
        if self.full or next(changes, None) is not None:
            self.out.append(f"\\ diff too large to show in full: {summary}\n")
        return "".join(self.out)

    def _between(self, first: _Change, second: _Change) -> int:
        return self.old.count("\n", first.end, second.start)

    def _hunk(self, group: list[_Change]) -> None:
        old, first, last = self.old, group[0], group[-1]
        begin = self._back(first.start, CONTEXT)
        finish = self._forward(last.end, CONTEXT)
        old_count = _lines_in(old, begin, finish)
        new_count = old_count + sum(
            _lines_in(c.new, 0, len(c.new)) - _lines_in(old, c.start, c.end) for c in group
        )
        before = _lines_in(old, begin, first.start)
        self._line(
            f"@@ -{_range(first.line - before, old_count)} "
            f"+{_range(first.new_line - before, new_count)} @@\n"
        )
        self._context(begin, first.start)
        for change, after in zip(group, [*group[1:], None], strict=True):
            self._body(old[change.start : change.end], change.new)
            self._context(change.end, finish if after is None else after.start)

    def _back(self, at: int, lines: int) -> int:
        for _ in range(lines):
            if at == 0:
                break
            at = self.old.rfind("\n", 0, at - 1) + 1
        return at

    def _forward(self, at: int, lines: int) -> int:
        for _ in range(lines):
            if at == len(self.old):
                break
            at = _line_end(self.old, at + 1)
        return at

    def _context(self, start: int, end: int) -> None:
        self._marked(" ", _split(self.old, start, end), 0)

    def _body(self, old: str, new: str) -> None:
        """One change: the lines both sides share as context, the rest matched by
        difflib when that is cheap, else all removed, then all added."""
        start, old_end, new_end = _changed_middle(old, new) if old != new else (0, 0, 0)
        self._marked(" ", _split(old, 0, start), 0)
        removed, added = old[start:old_end], new[start:new_end]
        around = _common_prefix(removed, added)  # a column of the first line: both start it
        if (
            0
            < _lines_in(removed, 0, len(removed)) * _lines_in(added, 0, len(added))
            <= MATCH_BUDGET
        ):
            self._matched(list(_split(removed)), list(_split(added)), around)
        else:
            self._marked("-", _split(removed), around)
            self._marked("+", _split(added), around)
        self._marked(" ", _split(old, old_end, len(old)), 0)

    def _matched(self, removed: list[str], added: list[str], around: int) -> None:
        matcher = difflib.SequenceMatcher(None, removed, added, autojunk=False)
        for tag, i1, i2, j1, j2 in matcher.get_opcodes():
            if tag == "equal":
                self._marked(" ", iter(removed[i1:i2]), 0)
            else:
                self._marked("-", iter(removed[i1:i2]), around)
                self._marked("+", iter(added[j1:j2]), around)

    def _marked(self, mark: str, lines: Iterator[str], around: int) -> None:
        for line in lines:
            if self.full:
                return
            self._line(mark + _cut(line, around))

    def _line(self, text: str) -> None:
        """One line of the diff (with its notes), unless the diff is full."""
        if self.full:
            return
        if self.lines >= MAX_SHOWN_LINES or self.chars + len(text) > MAX_SHOWN_CHARS:
            self.full = True
            return
        self.out.append(text)
        self.lines += text.count("\n")
        self.chars += len(text)


def _split(text: str, start: int = 0, end: int | None = None) -> Iterator[str]:
    """The lines of text[start:end] (whole lines), each with its newline if it has one,
    one at a time."""
    end = len(text) if end is None else end
    while start < end:
        found = text.find("\n", start, end)
        stop = end if found < 0 else found + 1
        yield text[start:stop]
        start = stop


def _cut(line: str, around: int) -> str:
    """`line` as the diff shows it: ended by a newline, a note after it when the text
    had none, and cut to `MAX_LINE_CHARS` from a little before column `around` when it
    is longer, with a note saying so."""
    body = line.removesuffix("\n")
    notes = "" if line.endswith("\n") else "\\ No newline at end of file\n"
    size = len(body)
    if size > MAX_LINE_CHARS:
        begin = max(0, min(around - MAX_LINE_CHARS // 4, size - MAX_LINE_CHARS))
        end = begin + MAX_LINE_CHARS
        body = ("…" if begin else "") + body[begin:end] + ("…" if end < size else "")
        notes += f"\\ line cut: characters {begin + 1:,} to {end:,} of {size:,} shown\n"
    return body + "\n" + notes


def _range(first: int, count: int) -> str:
    """A hunk header's range, as difflib and git write it."""
    if count == 1:
        return f"{first}"
    return f"{first - 1 if count == 0 else first},{count}"
