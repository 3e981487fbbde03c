"""Hostile paths and symlink layouts: nothing reads or writes outside the root."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.backends.conftest import call_tool
from tether.backends import FilesystemBackend, StateBackend
from tether.backends.paths import clean


@pytest.fixture
def layout(tmp_path: Path) -> tuple[Path, Path]:
    """root/ with files and traps; outside/ with a secret next to it."""
    root, outside = tmp_path / "root", tmp_path / "outside"
    (root / "inner").mkdir(parents=True)
    outside.mkdir()
    (outside / "secret.txt").write_text("TOP SECRET")
    (root / "a.txt").write_text("hello")
    (root / "link_out").symlink_to(outside)  # a directory link leading out
    (root / "file_link").symlink_to(outside / "secret.txt")  # a file link leading out
    (root / "inner" / "deep_link").symlink_to("/etc")  # absolute link, one level down
    (root / "inner" / "up_link").symlink_to("../../outside")  # relative link leading out
    (root / "ok_link.txt").symlink_to(root / "a.txt")  # a link that stays inside
    (root / "loop").symlink_to(root / "loop")  # a link to itself
    os.mkfifo(root / "pipe")  # reading it must not hang
    return root, outside


HOSTILE = [
    "../outside/secret.txt",
    "/../outside/secret.txt",
    "/a.txt/../../outside/secret.txt",
    "..",
    "/..",
    "inner/../../outside",
    "/./../outside/secret.txt",
    "/inner/./../../x",
    "/a\x00b",
    "\x00",
    "C:\\Windows\\system.ini",
    "C:/Windows/system.ini",
    "c:secret",
    "\\\\server\\share\\x",
    "/inner\\..\\..\\outside",
    "~",
    "~/secret.txt",
    "~root/.bashrc",
    "/link_out/secret.txt",
    "/link_out",
    "/link_out/new.txt",
    "/file_link",
    "/inner/deep_link/passwd",
    "/inner/deep_link",
    "/inner/up_link/secret.txt",
    "/inner/up_link",
    "/loop",
    "/pipe",
    "",
    "   ",
    "/" + "a" * 5000,
    "/a\nb",
    "/ leading-space",
    "/trailing-space ",
]


@pytest.mark.parametrize("path", HOSTILE)
async def test_hostile_paths_fail_readably_and_stay_inside(
    layout: tuple[Path, Path], path: str
) -> None:
    root, outside = layout
    backend = FilesystemBackend(root)
    before = sorted(p.name for p in outside.iterdir())
    for name, args in [
        ("read_file", {"file_path": path}),
        ("write_file", {"file_path": path, "content": "pwned"}),
        ("edit_file", {"file_path": path, "old_string": "TOP", "new_string": "pwned"}),
        ("ls", {"path": path}),
    ]:
        result = await call_tool(backend, name, **args)
        assert result.is_error, f"{name}({path!r}) succeeded: {result.text}"
        assert result.text.strip(), f"{name}({path!r}) gave an empty error"
        assert "Traceback" not in result.text
        assert "TOP SECRET" not in result.text
    assert sorted(p.name for p in outside.iterdir()) == before
    assert (outside / "secret.txt").read_text() == "TOP SECRET"
    assert not (root.parent / "pwned").exists()


async def test_search_and_listing_never_leave_the_root(layout: tuple[Path, Path]) -> None:
    root, _ = layout
    backend = FilesystemBackend(root)
    found = (await call_tool(backend, "glob", pattern="**/*")).text
    assert "secret" not in found
    assert "passwd" not in found
    grep = await call_tool(backend, "grep", pattern="SECRET|root:")
    assert grep.text.startswith("No matches")
    listing = (await call_tool(backend, "ls", path="/")).text
    assert "link_out" not in listing  # links leading out are not listed
    assert "file_link" not in listing
    assert "pipe" not in listing
    assert "/ok_link.txt -> /a.txt" in listing  # a link inside is listed with its target


async def test_a_link_inside_is_not_followed_but_named(layout: tuple[Path, Path]) -> None:
    root, _ = layout
    result = await call_tool(FilesystemBackend(root), "read_file", file_path="/ok_link.txt")
    assert result.is_error
    assert result.text == (
        "/ok_link.txt is a symbolic link to /a.txt; links are not followed, so use /a.txt."
    )
    edit = await call_tool(
        FilesystemBackend(root),
        "edit_file",
        file_path="/ok_link.txt",
        old_string="hello",
        new_string="bye",
    )
    assert "symbolic link to /a.txt" in edit.text
    assert (root / "a.txt").read_text() == "hello"
    assert (root / "ok_link.txt").is_symlink()


async def test_writing_through_a_link_to_outside_is_refused(layout: tuple[Path, Path]) -> None:
    root, outside = layout
    result = await call_tool(
        FilesystemBackend(root), "write_file", file_path="/link_out/new.txt", content="x"
    )
    assert result.text == (
        "/link_out is a symbolic link leading outside the workspace; links are not followed."
    )
    assert not (outside / "new.txt").exists()


async def test_state_backend_refuses_the_same_paths() -> None:
    backend = StateBackend()
    for path in HOSTILE[:18]:
        result = await call_tool(backend, "write_file", file_path=path, content="x")
        assert result.is_error, path
    assert backend.data == {}


def test_clean_gives_one_canonical_form() -> None:
    assert clean("a//b/./c/") == "/a/b/c"
    assert clean("/") == "/"
    assert clean("./x") == "/x"


async def test_backends_check_paths_themselves(layout: tuple[Path, Path]) -> None:
    """Custom tools call the backend directly; the checks must hold there too."""
    from tether.backends import BackendError, CompositeBackend, PermissionedBackend, Rule

    root, _ = layout
    backends = [
        FilesystemBackend(root),
        StateBackend(),
        CompositeBackend(StateBackend(), {"/m/": StateBackend()}),
    ]
    for backend in backends:
        for bad in ("../outside/secret.txt", "/a\x00b", "C:\\x", "/m/../../x"):
            with pytest.raises(BackendError):
                await backend.read(bad)
            with pytest.raises(BackendError):
                await backend.write(bad, b"x")
    guarded = PermissionedBackend(
        StateBackend({"/secrets/key": (b"k", 0.0)}),
        [Rule(operations={"read"}, paths=["/secrets/**"], mode="deny")],
    )
    for sneaky in ("//secrets/key", "/secrets/./key", "secrets/key"):
        with pytest.raises(BackendError, match="Permission denied"):
            await guarded.read(sneaky)


async def test_without_virtual_mode_paths_are_host_paths(layout: tuple[Path, Path]) -> None:
    root, outside = layout
    backend = FilesystemBackend(root, virtual_mode=False)
    secret = await call_tool(backend, "read_file", file_path=str(outside / "secret.txt"))
    assert secret.text == "1\tTOP SECRET"  # the caller chose to give the whole machine
    through_link = await call_tool(backend, "read_file", file_path=str(root / "file_link"))
    assert "is a symbolic link to" in through_link.text  # still never followed
    listing = await call_tool(backend, "ls", path=str(outside))
    assert listing.text.startswith(f"{outside}/secret.txt (10 bytes")


async def test_a_write_to_a_symlink_names_it_and_leaves_it(layout: tuple[Path, Path]) -> None:
    """Custom tools write through the backend directly: a link is named, not replaced."""
    from tether.backends import BackendError

    root, _ = layout
    with pytest.raises(BackendError, match=r"/ok_link\.txt is a symbolic link to /a\.txt"):
        await FilesystemBackend(root).write("/ok_link.txt", b"x")
    assert (root / "ok_link.txt").is_symlink()
    assert (root / "a.txt").read_text() == "hello"


@pytest.mark.parametrize("walk", [False, True])
def test_the_resolver_never_climbs_out_even_if_asked_directly(
    layout: tuple[Path, Path], walk: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Defense in depth below `clean`: the host resolver itself refuses '..'."""
    from tether.backends.hostfs import Root, _opening

    if walk:
        without = _opening.Openat2.__new__(_opening.Openat2)
        without.syscall = None
        monkeypatch.setattr(_opening, "_openat2", without)
    root, _ = layout
    host = Root(root)
    for path in ("/../outside/secret.txt", "/inner/../../outside/secret.txt", "/.."):
        with pytest.raises(OSError, match="leads out of the root"):
            host.open(path, os.O_RDONLY)


async def test_a_write_to_the_longest_name_works(tmp_path: Path) -> None:
    name = "é" * 127  # 254 bytes: the temporary file beside it must still fit
    backend = FilesystemBackend(tmp_path)
    await backend.write(f"/{name}", b"x")
    await backend.write(f"/{name}", b"y")
    assert (tmp_path / name).read_bytes() == b"y"
    assert os.listdir(tmp_path) == [name]  # no temporary file left behind
