"""The walk under glob, grep and the hard-link check: iterative, few descriptors open,
and climbing back only into the directory it left."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tether.backends.hostfs import Root, _walk


def walked(root: Path) -> list[tuple[str, list[str]]]:
    return [(path, sorted(e.name for e in entries)) for path, _, entries in Root(root).walk("/")]


def test_a_walk_holding_one_directory_open_sees_what_a_full_one_sees(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for path in ["a/b/c/d/e", "a/b/x/y", "a/f", "g/h/i", "g/j"]:
        (tmp_path / path).mkdir(parents=True)
        (tmp_path / path / "file").write_text("x")
    full = walked(tmp_path)
    monkeypatch.setattr(_walk, "_WALK_OPEN", 1)  # every level above is set aside
    assert walked(tmp_path) == full
    paths = [path for path, _ in full]
    assert len(paths) == len(set(paths)) == 13
    assert all((path.rsplit("/", 1)[0] or "/") in paths[:n] for n, path in enumerate(paths) if n)


def test_climbing_back_never_lands_in_a_directory_other_than_the_one_left(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The walk is in /x/y/a (or b, whichever comes first), with /x/y set aside, when
    that directory goes outside the root: ".." from it now leads outside, where an "a"
    and a "b" wait. The walk opens /x/y again by its path instead, and goes on with the
    real sibling."""
    root = tmp_path / "root"
    for name in "ab":
        (root / "x/y" / name).mkdir(parents=True)
        (root / "x/y" / name / "real.txt").write_text("inside")
        (tmp_path / "outside" / name).mkdir(parents=True)
        (tmp_path / "outside" / name / "secret.txt").write_text("outside")
    monkeypatch.setattr(_walk, "_WALK_OPEN", 1)
    seen: list[str] = []
    moved = None
    for path, _, entries in Root(root).walk("/"):
        seen += [f"{path}/{e.name}" for e in entries]
        if moved is None and path in ("/x/y/a", "/x/y/b"):
            moved = path[-1]
            os.rename(root / "x/y" / moved, tmp_path / "outside/moved")
    other = "b" if moved == "a" else "a"
    assert f"/x/y/{other}/real.txt" in seen
    assert not any(name.endswith("secret.txt") for name in seen)


def test_a_walk_leaves_no_descriptor_open(tmp_path: Path) -> None:
    deep = tmp_path.joinpath(*["d"] * 300)
    deep.mkdir(parents=True)
    before = len(os.listdir("/proc/self/fd"))
    walk = Root(tmp_path).walk("/")
    for number, _ in enumerate(walk):
        if number == 150:
            assert len(os.listdir("/proc/self/fd")) - before <= _walk._WALK_OPEN + 2
            break
    walk.close()  # a walk left halfway closes what it holds
    assert len(os.listdir("/proc/self/fd")) == before
