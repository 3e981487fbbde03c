"""Permission rules: order, default allow, invisibility, the policy hook."""

from __future__ import annotations

import pytest

from tether import ConfigurationError, create_agent
from tether.backends import PermissionedBackend, Rule, StateBackend
from tether.messages import ToolCall
from tether.models import ScriptedModel

from .conftest import call_tool, fails, ok


async def seeded() -> StateBackend:
    backend = StateBackend()
    for path in ("/app/main.py", "/app/.env", "/secrets/key.pem", "/workspace/notes.md"):
        await backend.write(path, b"token = 1\n")
    return backend


async def test_first_matching_rule_wins_and_no_match_allows() -> None:
    backend = await seeded()
    rules = [
        Rule(operations={"write"}, paths=["/workspace/**"], mode="allow"),
        Rule(operations={"write"}, paths=["/**"], mode="deny"),
    ]
    guarded = PermissionedBackend(backend, rules)
    await ok(guarded, "write_file", file_path="/workspace/new.md", content="x")
    assert "Permission denied: write access to /app/new.py" in await fails(
        guarded, "write_file", file_path="/app/new.py", content="x"
    )
    await ok(guarded, "read_file", file_path="/app/main.py")  # no read rule: allowed

    reversed_order = PermissionedBackend(backend, rules[::-1])
    await fails(reversed_order, "write_file", file_path="/workspace/other.md", content="x")


async def test_denied_paths_are_invisible_to_ls_glob_and_grep() -> None:
    guarded = PermissionedBackend(
        await seeded(),
        [Rule(operations={"read"}, paths=["/**/.env", "/secrets/**"], mode="deny")],
    )
    listing = (await ok(guarded, "ls", path="/app")).text
    assert ".env" not in listing
    assert "/app/main.py" in listing
    found = (await ok(guarded, "glob", pattern="**/*")).text
    assert ".env" not in found
    assert "key.pem" not in found
    hits = (await ok(guarded, "grep", pattern="token")).text.split("\n")
    assert hits == ["/app/main.py", "/workspace/notes.md"]
    assert "Permission denied" in await fails(guarded, "read_file", file_path="/secrets/key.pem")
    assert "Permission denied" in await fails(guarded, "ls", path="/secrets/x")


async def test_edit_needs_write_permission() -> None:
    guarded = PermissionedBackend(
        await seeded(), [Rule(operations={"write"}, paths=["/app/**"], mode="deny")]
    )
    error = await fails(
        guarded, "edit_file", file_path="/app/main.py", old_string="1", new_string="2"
    )
    assert "Permission denied: write" in error


async def test_policy_hook_sees_every_operation() -> None:
    seen: list[tuple[str, str]] = []

    def policy(operation: str, path: str) -> str | None:
        seen.append((operation, path))
        return "no dotfiles" if "/." in path else None

    guarded = PermissionedBackend(await seeded(), policy=policy)  # type: ignore[arg-type]
    assert "Refused by policy: no dotfiles" in await fails(
        guarded, "read_file", file_path="/app/.env"
    )
    await ok(guarded, "read_file", file_path="/app/main.py")
    assert ("read", "/app/main.py") in seen


async def test_nested_guards_only_narrow() -> None:
    parent = PermissionedBackend(
        await seeded(), [Rule(operations={"write"}, paths=["/secrets/**"], mode="deny")]
    )
    child = PermissionedBackend(
        parent, [Rule(operations={"write"}, paths=["/secrets/**"], mode="allow")]
    )
    await fails(child, "write_file", file_path="/secrets/new.pem", content="x")


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"operations": {"delete"}, "paths": ["/x"], "mode": "deny"}, "operations"),
        ({"operations": set(), "paths": ["/x"], "mode": "deny"}, "operations"),
        ({"operations": {"read"}, "paths": "/x", "mode": "deny"}, "paths"),
        ({"operations": {"read"}, "paths": ["x/**"], "mode": "deny"}, "absolute"),
        ({"operations": {"read"}, "paths": ["/x"], "mode": "block"}, "mode"),
    ],
)
def test_bad_rules_are_configuration_errors(kwargs: dict[str, object], message: str) -> None:
    with pytest.raises(ConfigurationError, match=message):
        Rule(**kwargs)  # type: ignore[arg-type]


def test_agent_permissions_guard_the_run() -> None:
    model = ScriptedModel(
        [
            [ToolCall("write_file", {"file_path": "/.env", "content": "A=1"})],
            [ToolCall("write_file", {"file_path": "/ok.txt", "content": "fine"})],
            "done",
        ]
    )
    agent = create_agent(
        model, permissions=[Rule(operations={"write"}, paths=["/**/.env"], mode="deny")]
    )
    result = agent.run("write")
    assert result.messages[2].results[0].is_error  # type: ignore[union-attr]
    assert result.files == {"/ok.txt": b"fine"}


def test_permissions_take_rules_only() -> None:
    with pytest.raises(ConfigurationError, match="Rule"):
        create_agent(ScriptedModel(["x"]), permissions=["/secrets/**"])  # type: ignore[list-item]


async def test_denied_call_results_do_not_leak_contents() -> None:
    guarded = PermissionedBackend(
        await seeded(), [Rule(operations={"read"}, paths=["/secrets/**"], mode="deny")]
    )
    result = await call_tool(guarded, "grep", pattern="token", path="/secrets")
    assert result.text == "No matches for 'token' under /secrets."
