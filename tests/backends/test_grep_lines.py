"""A pattern that is only text finds a file's matching lines by searching the file whole
(one search a matching line, not one a line): it must find exactly the lines the test of
each line finds, with the same numbers and text."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from tether.backends.base import GrepHit
from tether.backends.search import compile_pattern, grep_text, split_lines


def _line_by_line(path: str, data: bytes, pattern: str, *, literal: bool, ignore_case: bool):
    """The answer as grep gave it before: every line tested on its own."""
    regex = compile_pattern(pattern, literal=literal, ignore_case=ignore_case)
    if b"\x00" in data:
        return []
    return [
        GrepHit(path, number, line.decode("utf-8", errors="replace"))
        for number, line in enumerate(split_lines(data), start=1)
        if regex.line.search(line) is not None
    ]


_pieces = st.sampled_from(
    [
        b"needle",
        b"NEEDLE",
        b"nEEdle",
        b"need",
        b"le",
        b"\n",
        b"\n\n",
        b"\r",
        b"\r\n",
        b"\xff",
        b"\xc3",
        "é".encode(),
        "É".encode(),
        "\u212a".encode(),  # Kelvin sign: folds to k
        "\u017f".encode(),  # long s: folds to s
        b"k",
        b"s",
        b"x * 2",
        b"a.b",
        b" ",
        b"\t",
    ]
)
_patterns = st.sampled_from(
    ["needle", "NEEDLE", "le", "k", "s", "ks", "é", "x * 2", "a.b", "e\r", " ", "\t", "ee"]
)


@settings(max_examples=400, deadline=None)
@given(
    data=st.lists(_pieces, max_size=24).map(b"".join),
    pattern=_patterns,
    literal=st.booleans(),
    ignore_case=st.booleans(),
)
def test_searching_the_whole_file_finds_the_lines_each_line_test_finds(
    data: bytes, pattern: str, literal: bool, ignore_case: bool
) -> None:
    regex = compile_pattern(pattern, literal=literal, ignore_case=ignore_case)
    got = grep_text("/f", data, regex)
    assert got == _line_by_line("/f", data, pattern, literal=literal, ignore_case=ignore_case)


def test_only_text_is_searched_whole() -> None:
    def one_line(pattern: str, *, literal: bool = False, ignore_case: bool = False) -> bool:
        return compile_pattern(pattern, literal=literal, ignore_case=ignore_case).one_line

    assert one_line("needle_")
    assert one_line("x * 2", literal=True)
    assert one_line("café", ignore_case=True)
    # a regular expression can reach over a line break (\s, [^x]) or read its ends
    assert not one_line("x * 2")
    assert not one_line(r"a\sb")
    assert not one_line("[^x]y")
    assert not one_line("end$")
    assert not one_line("a\nb", literal=True)
    exact = compile_pattern("needle", literal=False, ignore_case=False)
    assert exact.text == b"needle"
    assert compile_pattern("needle", literal=True, ignore_case=True).text is None


def test_lines_are_numbered_and_cut_as_before() -> None:
    data = b"a needle\n\nneedle needle\r\nnone\nlast needle"
    regex = compile_pattern("needle", literal=True, ignore_case=False)
    assert grep_text("/f", data, regex) == [
        GrepHit("/f", 1, "a needle"),
        GrepHit("/f", 3, "needle needle\r"),
        GrepHit("/f", 5, "last needle"),
    ]
    assert grep_text("/f", b"needle\x00", regex) == []  # binary
    assert grep_text("/f", b"", regex) == []
