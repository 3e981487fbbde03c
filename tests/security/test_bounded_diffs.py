"""Approval cards of edits to big files cost little work whatever the file: before, the
card's diff ran difflib over the whole file (a small replace_all on 100 KB froze the
server for tens of seconds, on every page open, and delayed the terminal's question
18.8 s). Work is counted, not timed: the Python steps the diff takes, traced, against a
bound that does not grow with the file. The event loop's share is measured in
test_event_loop.py.
"""

from __future__ import annotations

import io
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pexpect
import pytest
from rich.console import Console

from tests.cli.test_cli import scripted, spawn
from tether.approval import ApprovalRequest, Approve
from tether.cli._approve import ask
from tether.tools.diffs import MAX_SHOWN_CHARS
from tether.tools.files import change_diff

WORK = 400_000
"""Python steps one card's diff may take: what a thousand shown lines cost, with room."""
MB = 1024 * 1024


class TooMuchWork(Exception):
    pass


def steps(work: Callable[[], Any], limit: int = WORK) -> tuple[int, Any]:
    """How many Python steps (calls, lines, returns) `work()` takes, and its result;
    `TooMuchWork` as soon as they pass `limit`."""
    count = 0

    def trace(frame: Any, event: str, arg: Any) -> Any:
        nonlocal count
        count += 1
        if count > limit:
            raise TooMuchWork(f"over {limit:,} steps")
        return trace

    sys.settrace(trace)
    try:
        return count, work()
    finally:
        sys.settrace(None)


def numbered(size: int, every: int = 5) -> str:
    """Lines of numbers with "v" on every `every`-th: many lines alike, so difflib's
    matcher compares each with most of the others."""
    return "".join("v\n" if n % every == 0 else f"{n}\n" for n in range(size // 6))


def code(size: int) -> str:
    return "".join(f"    value_{n % 977} = compute({n})\n" for n in range(size // 32))


def edit(old: str, new: str, replace_all: bool = True) -> dict[str, Any]:
    return {
        "file_path": "/big.txt",
        "old_string": old,
        "new_string": new,
        "replace_all": replace_all,
    }


CARDS: dict[str, Callable[[int], tuple[str, dict[str, Any], str]]] = {
    "a replace_all on every fifth of many alike lines": lambda size: (
        "edit_file",
        edit("v\n", "w\n"),
        numbered(size),
    ),
    "a small replace_all, three hits far apart": lambda size: (
        "edit_file",
        edit("compute(7)\n", "compute(8)\n"),
        code(size),
    ),
    "every line changes": lambda size: ("edit_file", edit("compute", "calc"), code(size)),
    "one line": lambda size: ("edit_file", edit("b", "c", False), "a" * size + "b"),
    "a replace_all of every character of one long line": lambda size: (
        "edit_file",
        edit("a", "b"),
        "a" * size,
    ),
    "a replace_all shrinking one long line": lambda size: (
        "edit_file",
        edit("aa", "a"),
        "a" * size,
    ),
    "a new file": lambda size: ("write_file", {"file_path": "/big.txt", "content": code(size)}, ""),
    "a file rewritten": lambda size: (
        "write_file",
        {"file_path": "/big.txt", "content": code(size).upper()},
        code(size),
    ),
    "not UTF-8, read with replacements": lambda size: (
        "edit_file",
        edit("\x00", "\x01"),
        (bytes(range(256)) * (size // 256)).decode("utf-8", "replace"),
    ),
}


@pytest.mark.parametrize("size", [100 * 1024, MB, 10 * MB], ids=["100KB", "1MB", "10MB"])
@pytest.mark.parametrize("case", list(CARDS))
def test_a_cards_diff_costs_bounded_work_whatever_the_file(case: str, size: int) -> None:
    tool, args, before = CARDS[case](size)
    taken, diff = steps(lambda: change_diff(tool, args, before))
    assert taken <= WORK
    assert diff.startswith("--- /big.txt\n+++ /big.txt\n@@ ")
    assert len(diff) <= MAX_SHOWN_CHARS + 1_000


def test_a_far_replacement_is_shown_with_its_own_lines() -> None:
    tool, args, before = CARDS["a small replace_all, three hits far apart"](MB)
    diff = change_diff(tool, args, before)
    assert diff is not None
    changed = [line for line in diff.splitlines()[2:] if line[:1] in "+-"]
    assert changed[:2] == ["-    value_7 = compute(7)", "+    value_7 = compute(8)"]
    assert len(changed) == 2 * before.count("compute(7)\n")


def test_the_terminal_card_of_a_big_files_edit_shows_its_change(tmp_path: Path) -> None:
    (tmp_path / "big.txt").write_text(numbered(MB))
    request = ApprovalRequest("e1", "edit_file", edit("v\n", "w\n"), ("approve", "reject"))
    console = Console(record=True, width=120, file=io.StringIO())
    shown: list[str] = []

    def answer(prompt: str) -> str:
        shown.append(console.export_text())
        return "a"

    console.input = answer  # type: ignore[method-assign]
    decisions = ask([request], console, tmp_path)
    assert decisions == [Approve()]
    assert "-v\n" in shown[0].replace(" ", "")
    assert "\\ diff too large to show in full: 34,953 replacements" in shown[0]


def test_tether_asks_about_an_edit_of_a_big_file_at_once(tmp_path: Path) -> None:
    """Through the `tether` command in a terminal: the question comes with the card."""
    project = tmp_path / "project"
    project.mkdir()
    (project / "big.txt").write_text(numbered(MB))
    call = {"tool": "edit_file", "args": edit("v\n", "w\n")}
    model = scripted(project, "big.json", [[call], "Replaced."])
    child = spawn(project, "run", "--no-sandbox", "--model", model, "go")
    child.expect_exact("Approval 1 of 1: edit_file")
    child.expect_exact("-v")
    child.expect_exact("+w")
    child.expect_exact("diff too large to show in full")
    child.expect_exact("re[s]pond? ")
    child.sendline("a")
    child.expect_exact("Replaced.")
    child.expect(pexpect.EOF)
    child.close()
    assert child.exitstatus == 0
    assert (project / "big.txt").read_text() == numbered(MB).replace("v\n", "w\n")
