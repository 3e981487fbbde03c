"""Generated link layouts and generated calls: whatever the layout and the paths, nothing
outside the root and nothing under a denied rule is read or written."""

from __future__ import annotations

import asyncio
import contextlib
import os
import tempfile
from dataclasses import dataclass
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.backends.conftest import call_tool
from tether.backends import BackendError, FilesystemBackend, PermissionedBackend, Rule
from tether.backends.paths import clean

from .watch import Watch

MARK = "HIDDEN-MARK-93"  # in every file the agent must not see
NAMES = ["a", "b", "secrets", "pub", "k.txt"]
LINK_TEXTS = [
    "secrets",
    "secrets/k.txt",
    "../secrets",
    "..",
    "../..",
    "../outside",
    "../outside/o.txt",
    "../../outside",
    "pub",
    "pub/f.txt",
    "a",
    "{outside}",
    "{outside}/o.txt",
    "{root}/secrets",
    "/etc",
    "missing",
]
DENY = [Rule(operations={"read", "write"}, paths=["/secrets/**"], mode="deny")]


@dataclass(frozen=True)
class Entry:
    """One thing the layout adds inside the root."""

    parts: tuple[str, ...]
    kind: str  # "dir", "file", "symlink", "hardlink"
    target: str


entries = st.builds(
    Entry,
    st.lists(st.sampled_from(NAMES), min_size=1, max_size=3).map(tuple),
    st.sampled_from(["dir", "file", "symlink", "symlink", "hardlink", "hardlink"]),
    st.sampled_from(LINK_TEXTS),
)
TOOLS = ["read_file", "write_file", "edit_file", "ls", "glob", "grep"]
any_path = st.lists(st.sampled_from([*NAMES, ".", "..", "", "o.txt", "f.txt"]), max_size=4).map(
    lambda parts: "/" + "/".join(parts)
)


def _aimed(layout: list[Entry]) -> st.SearchStrategy[str]:
    """Paths through what the layout made (most calls), or anywhere."""
    made = ["/" + "/".join(e.parts) for e in layout]
    below = [f"{p}/{name}" for p in made for name in ("o.txt", "k.txt", "f.txt", "x")]
    if not made:
        return any_path
    return st.one_of(st.sampled_from(made + below), any_path)


def _build(root: Path, outside: Path, layout: list[Entry]) -> None:
    (root / "secrets").mkdir()
    (root / "secrets" / "k.txt").write_text(f"{MARK} key\n")
    (root / "pub").mkdir()
    (root / "pub" / "f.txt").write_text("public\n")
    (outside / "o.txt").write_text(f"{MARK} outside\n")
    for entry in layout:
        place = root.joinpath(*entry.parts)
        with contextlib.suppress(OSError):  # a generated clash: leave that entry out
            place.parent.mkdir(parents=True, exist_ok=True)
            if entry.kind == "dir":
                place.mkdir()
            elif entry.kind == "file":
                place.write_text("plain\n")
            elif entry.kind == "symlink":
                place.symlink_to(entry.target.format(root=root, outside=outside))
            else:  # a hard link to a denied file, or to a public one
                source = "secrets/k.txt" if len(entry.target) % 2 else "pub/f.txt"
                os.link(root / source, place)


def _args(tool: str, path: str, number: int) -> dict[str, object]:
    if tool == "read_file":
        return {"file_path": path}
    if tool == "write_file":
        return {"file_path": f"{path.rstrip('/')}/new{number}.txt", "content": "new"}
    if tool == "edit_file":
        return {"file_path": path, "old_string": "e", "new_string": "E", "replace_all": True}
    if tool == "grep":
        return {"pattern": "HIDDEN|public|plain|key", "path": path, "output_mode": "content"}
    if tool == "glob":
        return {"pattern": "**/*", "path": path}
    return {"path": path}


def _snapshot(directory: Path) -> dict[str, bytes | str]:
    found: dict[str, bytes | str] = {}
    for current, dirs, files in os.walk(directory):
        for name in dirs + files:
            path = Path(current) / name
            key = str(path.relative_to(directory))
            found[key] = f"-> {os.readlink(path)}" if path.is_symlink() else b""
            if path.is_file() and not path.is_symlink():
                found[key] = path.read_bytes()
    return found


@settings(
    max_examples=60,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(layout=st.lists(entries, max_size=8), data=st.data())
def test_nothing_outside_or_denied_is_read_or_written(
    layout: list[Entry], data: st.DataObject
) -> None:
    calls = st.tuples(st.sampled_from(TOOLS), _aimed(layout))
    operations = [("grep", "/"), *data.draw(st.lists(calls, min_size=1, max_size=12))]
    with tempfile.TemporaryDirectory() as temporary:
        root, outside = Path(temporary) / "root", Path(temporary) / "outside"
        root.mkdir()
        outside.mkdir()
        _build(root, outside, layout)
        outside_before = _snapshot(outside)
        secrets_before = _snapshot(root / "secrets")
        watch = Watch(outside)
        backend = PermissionedBackend(FilesystemBackend(root), DENY)

        async def play() -> list[str]:
            texts = []
            for number, (tool, path) in enumerate(operations):
                result = await call_tool(backend, tool, **_args(tool, path, number))
                texts.append(result.text)
            return texts

        texts = asyncio.run(play())
        events = watch.events()
        watch.close()
        assert events == []
        assert _snapshot(outside) == outside_before
        assert _snapshot(root / "secrets") == secrets_before
        leaked = [t for t in texts if MARK in t]
        assert not leaked, (layout, operations, leaked)
        assert not [t for t in texts if "Traceback" in t or "Errno" in t], texts


@given(st.text(max_size=60))
def test_clean_gives_a_canonical_path_or_a_readable_refusal(text: str) -> None:
    try:
        path = clean(text)
    except BackendError as exc:
        refusal = str(exc)
    else:
        refusal = ""
    if refusal:
        assert refusal.strip()
        return
    assert path.startswith("/")
    assert clean(path) == path  # canonical: cleaning again changes nothing
    parts = path.split("/")[1:]
    assert ".." not in parts
    assert "" not in parts or path == "/"
    assert not any(c in path for c in ("\\", "\x00", "\u202e", "\n"))
