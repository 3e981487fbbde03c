"""Symlinks and hard links against deny rules, on every file tool: a rule holds on what is
really opened, whatever name the model uses."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.backends.conftest import call_tool
from tether import create_agent
from tether.backends import (
    Backend,
    CompositeBackend,
    FilesystemBackend,
    PermissionedBackend,
    Rule,
    StateBackend,
)
from tether.messages import ToolCall, ToolResultMessage
from tether.models import ScriptedModel

SECRET = "KEY-CONTENT-41"
DENY_SECRETS = [Rule(operations={"read", "write"}, paths=["/secrets/**"], mode="deny")]


@pytest.fixture
def root(tmp_path: Path) -> Path:
    """secrets/key.txt behind a deny rule, and four other ways to name it."""
    (tmp_path / "secrets").mkdir()
    (tmp_path / "secrets" / "key.txt").write_text(f"{SECRET}\n")
    (tmp_path / "public").mkdir()
    (tmp_path / "public" / "readme.txt").write_text("hello\n")
    (tmp_path / "alias").symlink_to("secrets")  # a directory symlink
    (tmp_path / "file_alias").symlink_to("secrets/key.txt")  # a file symlink
    (tmp_path / "absolute_alias").symlink_to(tmp_path / "secrets")  # absolute, still inside
    os.link(tmp_path / "secrets" / "key.txt", tmp_path / "hard.txt")  # a hard link
    return tmp_path


GUARDS: dict[str, Callable[[Path], Backend]] = {
    "guard": lambda root: PermissionedBackend(FilesystemBackend(root), DENY_SECRETS),
    "nested": lambda root: PermissionedBackend(
        PermissionedBackend(FilesystemBackend(root), DENY_SECRETS), []
    ),
    "outer": lambda root: PermissionedBackend(
        PermissionedBackend(FilesystemBackend(root), []), DENY_SECRETS
    ),
    "composite": lambda root: PermissionedBackend(
        CompositeBackend(FilesystemBackend(root), {"/mem/": StateBackend()}), DENY_SECRETS
    ),
}
ALIASES = ["/alias/key.txt", "/file_alias", "/absolute_alias/key.txt", "/hard.txt"]


@pytest.fixture(params=list(GUARDS))
def guarded(request: pytest.FixtureRequest, root: Path) -> Backend:
    return GUARDS[request.param](root)


@pytest.mark.parametrize("path", ALIASES)
async def test_no_other_name_reads_a_denied_file(guarded: Backend, path: str) -> None:
    read = await call_tool(guarded, "read_file", file_path=path)
    assert read.is_error
    assert SECRET not in read.text
    if path == "/hard.txt":
        assert read.text == (
            "Permission denied: /hard.txt is a hard link to /secrets/key.txt, which may not "
            "be read."
        )
    else:
        assert "symbolic link" in read.text


@pytest.mark.parametrize("path", ALIASES)
async def test_no_other_name_changes_a_denied_file(guarded: Backend, root: Path, path: str) -> None:
    edit = await call_tool(
        guarded, "edit_file", file_path=path, old_string="KEY", new_string="PWNED"
    )
    assert edit.is_error
    write = await call_tool(guarded, "write_file", file_path=path, content="PWNED")
    assert write.is_error
    assert (root / "secrets" / "key.txt").read_text() == f"{SECRET}\n"


async def test_writing_through_a_directory_symlink_into_a_denied_tree_fails(
    guarded: Backend, root: Path
) -> None:
    write = await call_tool(guarded, "write_file", file_path="/alias/new.txt", content="x")
    assert write.text == (
        "/alias is a symbolic link to /secrets; links are not followed, so use /secrets/new.txt."
    )
    assert sorted(os.listdir(root / "secrets")) == ["key.txt"]


async def test_listing_and_searching_show_no_denied_content(guarded: Backend) -> None:
    grep = await call_tool(guarded, "grep", pattern="KEY-CONTENT", output_mode="content")
    assert grep.text.startswith("No matches")  # not through the hard link, not through links
    found = (await call_tool(guarded, "glob", pattern="**/*")).text.splitlines()
    assert "/secrets/key.txt" not in found
    assert not [line for line in found if line.startswith(("/alias", "/absolute_alias"))]
    listing = (await call_tool(guarded, "ls", path="/")).text
    assert "/alias -> /secrets" in listing  # the link is shown; it leads nowhere usable
    refused = await call_tool(guarded, "ls", path="/alias")
    assert "symbolic link to /secrets" in refused.text


async def test_a_public_file_hard_linked_into_a_denied_tree_is_refused(root: Path) -> None:
    """One file, two names: one of them denied is enough."""
    os.link(root / "public" / "readme.txt", root / "secrets" / "copy.txt")
    guarded = PermissionedBackend(FilesystemBackend(root), DENY_SECRETS)
    read = await call_tool(guarded, "read_file", file_path="/public/readme.txt")
    assert "hard link to /secrets/copy.txt" in read.text
    os.unlink(root / "secrets" / "copy.txt")
    read = await call_tool(guarded, "read_file", file_path="/public/readme.txt")
    assert read.text == "1\thello"


async def test_a_write_to_a_hard_link_replaces_the_name_only(root: Path) -> None:
    """With only writes denied, the other name of a write-denied file can be edited, and
    the edit leaves the denied file as it was."""
    rules = [Rule(operations={"write"}, paths=["/secrets/**"], mode="deny")]
    guarded = PermissionedBackend(FilesystemBackend(root), rules)
    edit = await call_tool(
        guarded, "edit_file", file_path="/hard.txt", old_string="KEY", new_string="NEW"
    )
    assert not edit.is_error, edit.text
    assert (root / "hard.txt").read_text() == "NEW-CONTENT-41\n"
    assert (root / "secrets" / "key.txt").read_text() == f"{SECRET}\n"
    assert os.stat(root / "hard.txt").st_nlink == 1


async def test_a_routed_directory_checks_hard_links_by_their_full_path(root: Path) -> None:
    routed = PermissionedBackend(
        CompositeBackend(StateBackend(), {"/disk/": FilesystemBackend(root)}),
        [Rule(operations={"read"}, paths=["/disk/secrets/**"], mode="deny")],
    )
    read = await call_tool(routed, "read_file", file_path="/disk/hard.txt")
    assert read.text == (  # the paths as the agent knows them, the route's prefix included
        "Permission denied: /disk/hard.txt is a hard link to /disk/secrets/key.txt, which may "
        "not be read."
    )


async def test_without_rules_a_hard_link_reads_normally(root: Path) -> None:
    read = await call_tool(FilesystemBackend(root), "read_file", file_path="/hard.txt")
    assert read.text == f"1\t{SECRET}"


def test_an_agent_with_permissions_refuses_the_hard_link(root: Path) -> None:
    model = ScriptedModel([[ToolCall("read_file", {"file_path": "/hard.txt"}, id="r")], "done"])
    agent = create_agent(model, backend=FilesystemBackend(root), permissions=DENY_SECRETS)
    result = agent.run("read it")
    [answer] = [r for m in result.messages if isinstance(m, ToolResultMessage) for r in m.results]
    assert answer.is_error
    assert "hard link to /secrets/key.txt" in answer.text
