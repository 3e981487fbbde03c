"""Glob patterns mean what they meant when wcmatch matched them (GLOBSTAR, BRACE and
DOTGLOB), now matched by RE2: checked against wcmatch on generated patterns and paths."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from wcmatch import glob as wc

from tether.backends.errors import BackendError
from tether.backends.globs import MAX_EXPANSIONS, compile_glob

_WCMATCH = wc.GLOBSTAR | wc.BRACE | wc.DOTGLOB

pieces = st.sampled_from(
    [
        *"ab.x-_é /",
        "*",
        "**",
        "?",
        "[ab]",
        "[!a]",
        "[a-c]",
        "[+-0]",
        "[z-a]",
        "[]]",
        "[!]a]",
        "[é-ü]",
        "[[:alpha:]]",
        "[[:punct:]]",
        "[[:digit:]]",
        "{a,b}",
        "{,a}",
        "{a,b/c}",
        "{1..2}",
        "\\*",
        "\\",
        "[",
        "]",
    ]
)
names = st.sampled_from(["a", "b", "ab", ".a", "x", "1", "[", "*", "-", "_", "a.b", "é", " "])


@pytest.mark.filterwarnings("ignore::FutureWarning")  # wcmatch's own, on "[[" in a pattern
@settings(max_examples=3_000, suppress_health_check=list(HealthCheck), deadline=None)
@given(
    st.lists(pieces, min_size=1, max_size=7), st.lists(names, min_size=1, max_size=5), st.booleans()
)
def test_a_pattern_matches_what_wcmatch_matches(
    pattern_pieces: list[str], path_names: list[str], absolute: bool
) -> None:
    pattern = ("/" if absolute else "") + "".join(pattern_pieces).lstrip("/")
    path = ("/" if absolute else "") + "/".join(path_names)
    try:
        expected = wc.compile(pattern, flags=_WCMATCH).match(path)
    except Exception:  # what wcmatch refuses is not compared
        return
    assert compile_glob(pattern).match(path) == expected, (pattern, path)


@pytest.mark.parametrize(
    ("pattern", "path", "matches"),
    [
        ("**/*.py", "a.py", True),
        ("**/*.py", "src/pkg/a.py", True),
        ("*.py", "src/a.py", False),
        ("src/**", "src", False),
        ("src/**", "src/a/b", True),
        ("*.{py,md}", "x.md", True),
        ("a/", "a", False),
        ("[!a]b", "/b", False),
        ("a[+-0]b", "a/b", False),
        (".*", ".env", True),
        ("*", ".env", True),
    ],
)
def test_glob_examples(pattern: str, path: str, matches: bool) -> None:
    assert compile_glob(pattern).match(path) is matches


def test_braces_that_expand_too_far_are_refused() -> None:
    with pytest.raises(BackendError, match=f"more than {MAX_EXPANSIONS:,} patterns"):
        compile_glob("{a,b}" * 11)
