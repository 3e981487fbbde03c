"""The diffs approval cards show: right (applied to the old text they give the new one),
in the unified format, and bounded in what they show."""

from __future__ import annotations

import re

from hypothesis import given, settings
from hypothesis import strategies as st

from tether.tools.diffs import (
    MAX_LINE_CHARS,
    MAX_SHOWN_CHARS,
    MAX_SHOWN_LINES,
    edit_diff,
    text_diff,
)
from tether.tools.files import change_diff

_HEADER = re.compile(r"@@ -(\d+)(?:,(\d+))? \+(\d+)(?:,(\d+))? @@")


def applied(old: str, diff: str) -> str:
    """`old` with `diff` applied, every hunk checked against it as `patch` would."""
    entries: list[tuple[str, str]] = []
    for line in diff.split("\n")[2:]:
        if line == "\\ No newline at end of file":
            mark, text = entries[-1]
            entries[-1] = (mark, text.removesuffix("\n"))
        elif line:
            entries.append((line[0], line[1:] + "\n"))
    source = [part + "\n" for part in old.split("\n")]
    source[-1] = source[-1][:-1]
    if not source[-1]:
        source.pop()
    out: list[str] = []
    at = 0
    for mark, text in entries:
        if mark == "@":
            found = _HEADER.match("@" + text)
            assert found, text
            count = int(found[2] or 1)
            start = int(found[1]) - (1 if count else 0)
            out += source[at:start]
            at = start
            continue
        if mark in " -":
            assert source[at] == text, (source[at], text)
            at += 1
        if mark in " +":
            out.append(text)
    return "".join(out + source[at:])


pieces = st.sampled_from(["a", "b", "\n", "ab\n", "x", "\t", "é", "\x00"])
texts = st.lists(pieces, max_size=60).map("".join)


@settings(max_examples=500)
@given(texts, texts)
def test_a_diff_of_two_texts_turns_the_old_into_the_new(old: str, new: str) -> None:
    diff = text_diff("/f", old, new)
    if old == new:
        assert diff == "(no change to /f)\n"
    else:
        assert applied(old, diff) == new


@settings(max_examples=500)
@given(
    texts,
    st.sampled_from(["a", "b\n", "\n", "ab", "\na", "x\nx"]),
    st.sampled_from(["", "A", "B\n", "\n", "ba", "q\nq\n"]),
    st.booleans(),
)
def test_an_edits_diff_is_the_edit(before: str, find: str, put: str, replace_all: bool) -> None:
    diff = edit_diff("/f", before, find, put, replace_all=replace_all)
    after = before.replace(find, put, -1 if replace_all else 1)
    if after == before:
        assert diff == "(no change to /f)\n"
    else:
        assert applied(before, diff) == after


def test_the_format_is_difflibs_for_a_small_change() -> None:
    diff = change_diff(
        "edit_file", {"file_path": "/n.md", "old_string": "two", "new_string": "TWO"}, "one\ntwo\n"
    )
    assert diff == "--- /n.md\n+++ /n.md\n@@ -1,2 +1,2 @@\n one\n-two\n+TWO\n"
    created = change_diff("write_file", {"file_path": "/a", "content": "x\ny"}, "")
    assert created == "--- /a\n+++ /a\n@@ -0,0 +1,2 @@\n+x\n+y\n\\ No newline at end of file\n"


def test_an_edit_with_no_before_shows_the_text_it_replaces() -> None:
    args = {"file_path": "/a", "old_string": "one\ntwo\n", "new_string": "one\n2\n"}
    assert (
        change_diff("edit_file", args, None) == "--- /a\n+++ /a\n@@ -1,2 +1,2 @@\n one\n-two\n+2\n"
    )


def test_a_long_diff_stops_at_its_bounds_and_says_what_it_left_out() -> None:
    before = "".join(f"line {n}\n" for n in range(50_000))
    diff = edit_diff("/big", before, "line", "LINE", replace_all=True)
    assert len(diff.splitlines()) <= MAX_SHOWN_LINES + 1
    assert diff.endswith("\\ diff too large to show in full: 50,000 replacements\n")
    written = text_diff("/big", "", before)
    assert len(written) <= MAX_SHOWN_CHARS + 200
    assert written.endswith("\\ diff too large to show in full: 0 lines removed, 50,000 added\n")


def test_a_long_line_is_cut_around_its_change() -> None:
    before = "a" * 500_000 + "OLD" + "a" * 500_000
    diff = edit_diff("/one-line", before, "OLD", "NEW", replace_all=False)
    lines = diff.splitlines()[2:]
    [removed] = [line for line in lines if line.startswith("-")]
    [added] = [line for line in lines if line.startswith("+")]
    assert "OLD" in removed
    assert "NEW" in added
    assert len(removed) < MAX_LINE_CHARS + 10
    assert "\\ line cut: characters 499,751 to 500,750 of 1,000,003 shown" in diff


def test_an_edit_too_large_to_build_is_described_not_built() -> None:
    diff = edit_diff("/a", "a" * 1_000_000, "a", "b" * 100_000, replace_all=True)
    assert diff == (
        "(diff too large to show: 1,000,000 replacements would make /a "
        "100,000,000,000 characters long)\n"
    )


def test_changes_far_apart_are_hunks_of_their_own_and_near_ones_share_one() -> None:
    before = "".join(f"{n}\n" for n in range(100))
    diff = edit_diff("/n", before, "5\n", "five\n", replace_all=True)
    headers = [line for line in diff.splitlines() if line.startswith("@@")]
    assert headers[:3] == ["@@ -3,7 +3,7 @@", "@@ -13,7 +13,7 @@", "@@ -23,7 +23,7 @@"]
    assert applied(before, diff) == before.replace("5\n", "five\n")
