"""A subagent's gates and rules only add to its parent's: its own narrower `when` gate
cannot let through what the parent gates, its own allowed decisions cannot widen the
parent's, the file an approval card shows is read as the subagent that asked would
read it, and a policy's read refusal holds for listings and searches on every backend."""

from __future__ import annotations

import asyncio
import contextlib
import re
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tether import SubAgent, create_agent, tool
from tether.agent import Agent
from tether.approval import Gate, joined
from tether.backends.base import Backend
from tether.backends.composite import CompositeBackend
from tether.backends.errors import BackendError
from tether.backends.filesystem import FilesystemBackend
from tether.backends.permissions import PermissionedBackend, Rule
from tether.backends.store import StoreBackend
from tether.capabilities.subagents import files_of
from tether.messages import AssistantMessage, ToolCall
from tether.models import FunctionModel, ModelRequest
from tether.models.scripted import Turn
from tether.stores.memory import InMemoryStore


def _deploying(log: list[str], sub_gates: dict[str, Any] | None, target: str) -> Agent[str]:
    @tool
    def deploy(env: str) -> str:
        """Deploy to an environment."""
        log.append(env)
        return f"deployed {env}"

    def turn(request: ModelRequest) -> Turn:
        first = request.messages[0].text  # type: ignore[union-attr]
        done = sum(isinstance(m, AssistantMessage) for m in request.messages)
        if first == "Ship.":
            call = ToolCall("task", {"subagent_type": "deployer", "description": "Deploy."})
            return [[call], "shipped"][min(done, 1)]
        return [[ToolCall("deploy", {"env": target})], "deployed"][min(done, 1)]

    deployer = SubAgent("deployer", "Deploys.", tools=[deploy], interrupt_on=sub_gates)
    return create_agent(
        FunctionModel(turn),
        tools=[deploy],
        subagents=[deployer],
        checkpointer="sqlite://:memory:",
        interrupt_on={"deploy": {"allow": ["approve", "reject"]}},
    )


@pytest.mark.parametrize(
    "sub_gates",
    [
        {"deploy": {"when": lambda args: args["env"] == "production"}},
        {"deploy": {"when": lambda args: False}},
        {"deploy": False},
        {"deploy": {"allow": ["approve", "edit", "respond"]}},
    ],
    ids=["narrower-when", "never", "off", "more-decisions"],
)
def test_a_subagents_own_gate_cannot_let_through_what_its_parent_gates(
    sub_gates: dict[str, Any],
) -> None:
    log: list[str] = []
    paused = _deploying(log, sub_gates, "staging").run("Ship.", thread_id="t")
    assert log == []
    assert paused.stop_reason == "interrupted"
    (request,) = paused.interrupts
    assert request.tool == "deploy"
    assert request.args == {"env": "staging"}
    assert set(request.allowed) <= {"approve", "reject"}


def test_a_subagents_wider_gate_adds_to_its_parents() -> None:
    parent = {"deploy": Gate(when=lambda args: args["env"] == "production")}
    child = {"deploy": Gate(when=lambda args: args["env"] == "staging"), "rm": Gate()}
    gates = joined(parent, child)
    assert gates["deploy"].stops({"env": "production"})
    assert gates["deploy"].stops({"env": "staging"})
    assert not gates["deploy"].stops({"env": "dev"})
    assert gates["rm"].stops({})
    narrow = joined({"x": Gate(("approve",))}, {"x": Gate(("edit",))})
    assert narrow["x"].allowed == ("reject",)  # no decision both allow: only a refusal


_DECIDE = st.lists(st.sampled_from(["approve", "edit", "reject", "respond"]), min_size=1)


@settings(max_examples=200, deadline=None)
@given(
    layers=st.lists(
        st.tuples(_DECIDE, st.one_of(st.none(), st.sets(st.integers(0, 5)))),
        min_size=1,
        max_size=4,
    ),
    value=st.integers(0, 5),
)
def test_gates_joined_down_a_tree_stop_whatever_any_of_them_stops(
    layers: list[tuple[list[str], set[int] | None]], value: int
) -> None:
    gates: dict[str, Gate] = {}
    made = []
    for allow, stopped in layers:
        when = None if stopped is None else (lambda args, s=frozenset(stopped): args["v"] in s)
        gate = Gate(tuple(d for d in ("approve", "edit", "reject", "respond") if d in allow), when)  # type: ignore[arg-type]
        made.append(gate)
        gates = joined(gates, {"tool": gate})
    args = {"v": value}
    assert gates["tool"].stops(args) == any(g.stops(args) for g in made)
    for gate in made:
        assert set(gates["tool"].allowed) <= set(gate.allowed) | {"reject"}


# -- the approval card reads as the agent that asked ----------------------------------


def test_a_subagents_file_view_keeps_its_own_rules_and_its_parents(tmp_path: Path) -> None:
    (tmp_path / "secret.txt").write_text("s3cret\n")
    (tmp_path / "private.txt").write_text("mine\n")
    (tmp_path / "open.txt").write_text("hello\n")
    inner = SubAgent(
        "inner", "Writes.", permissions=[Rule(["read"], ["/secret.txt"], "deny")], tools=[]
    )
    outer = SubAgent("outer", "Delegates.", subagents=[inner], tools=[])
    agent = create_agent(
        FunctionModel(lambda r: "x"),
        backend=FilesystemBackend(tmp_path),
        permissions=[Rule(["read"], ["/private.txt"], "deny")],
        subagents=[outer],
    )

    def read(view: Backend | None, path: str) -> bytes | str:
        assert view is not None
        try:
            return asyncio.run(view.read(path))
        except BackendError as exc:
            return str(exc)

    top = files_of(agent, ("main",))
    deep = files_of(agent, ("main", "task:outer#1", "task:inner#3"))
    assert read(top, "/secret.txt") == b"s3cret\n"
    assert "Permission denied" in str(read(top, "/private.txt"))
    assert "Permission denied" in str(read(deep, "/secret.txt"))
    assert "Permission denied" in str(read(deep, "/private.txt"))  # the parent's rules hold
    assert read(deep, "/open.txt") == b"hello\n"
    assert files_of(agent, ("main", "task:nobody#1")) is None


# -- a policy's read refusal holds for listings and searches -------------------------


def _backends(tmp_path: Path) -> dict[str, Backend]:
    store = StoreBackend(InMemoryStore())
    return {
        "filesystem": FilesystemBackend(tmp_path),
        "store": store,
        "composite": CompositeBackend(StoreBackend(InMemoryStore(), "other"), {"/r/": store}),
    }


_FILES = st.dictionaries(
    st.sampled_from(["/a.txt", "/s/b.txt", "/s/c/d.txt", "/r/e.txt", "/r/s/f.txt", "/g.txt"]),
    st.sampled_from(["password=1", "nothing", "password and more"]),
    min_size=1,
)


@settings(max_examples=60, deadline=None)
@given(files=_FILES, refused=st.sets(st.sampled_from(["/s", "/r/s", "/g.txt", "/r"])))
@pytest.mark.parametrize("kind", ["filesystem", "store", "composite"])
def test_a_policys_read_refusal_holds_for_ls_glob_and_grep(
    tmp_path_factory: pytest.TempPathFactory, kind: str, files: dict[str, str], refused: set[str]
) -> None:
    backend = _backends(tmp_path_factory.mktemp("files"))[kind]

    def policy(operation: str, path: str) -> str | None:
        hidden = any(path == r or path.startswith(r + "/") for r in refused)
        return "secret" if operation == "read" and hidden else None

    guarded = PermissionedBackend(backend, [], policy)

    async def look() -> list[str]:
        for path, text in files.items():
            await backend.write(path, text.encode())
        seen = [f.path for f in await guarded.files("/")]
        seen += [h.path for h in await guarded.grep("password", "/")]
        for directory in ("/", "/r", "/s"):
            with contextlib.suppress(BackendError):
                seen += [f.path for f in await guarded.ls(directory)]
        return seen

    for path in asyncio.run(look()):
        assert policy("read", path) is None, path


def test_a_denied_subagent_search_shows_no_hidden_name(tmp_path: Path) -> None:
    (tmp_path / "keys").mkdir()
    (tmp_path / "keys" / "prod.pem").write_text("BEGIN KEY\n")
    backend = PermissionedBackend(
        StoreBackend(InMemoryStore()), [], lambda op, p: "no" if p.startswith("/keys") else None
    )
    asyncio.run(backend.backend.write("/keys/prod.pem", b"BEGIN KEY"))
    hits = asyncio.run(backend.grep("BEGIN", "/"))
    assert not [h for h in hits if re.search("keys", h.path)]


def test_an_agent_built_elsewhere_answers_to_its_parents_command_policy(tmp_path: Path) -> None:
    from tether.backends.sandbox.local import UnsafeLocalShell
    from tether.capabilities.sandbox import CommandPolicy

    shell = UnsafeLocalShell(tmp_path)
    run = ToolCall("execute", {"command": "echo rm-ran > ran.txt"})
    inner = create_agent(
        FunctionModel(lambda r: [[run], "ran"][len(r.messages) > 1]), backend=shell
    )
    call = ToolCall("task", {"subagent_type": "runner", "description": "Run it."})
    agent = create_agent(
        FunctionModel(lambda r: [[call], "done"][len(r.messages) > 1]),
        backend=shell,
        command_policy=CommandPolicy(deny=["rm"]),
        subagents=[SubAgent("runner", "Runs commands.", agent=inner)],
    )
    result = agent.run("Go.")
    assert result.stop_reason == "completed"
    assert not (tmp_path / "ran.txt").exists()


def test_an_approval_card_shows_a_file_as_the_subagent_that_asked_reads_it(
    tmp_path: Path,
) -> None:
    from types import SimpleNamespace

    from tether.approval import ApprovalRequest
    from tether.serve._views import _pending_diff

    (tmp_path / "secret.txt").write_text("s3cret\n")
    (tmp_path / "open.txt").write_text("hello\n")
    inner = SubAgent(
        "inner", "Edits.", permissions=[Rule(["read"], ["/secret.txt"], "deny")], tools=[]
    )
    agent = create_agent(
        FunctionModel(lambda r: "x"), backend=FilesystemBackend(tmp_path), subagents=[inner]
    )
    thread = SimpleNamespace(files={})

    def card(path: str, asked_by: tuple[str, ...]) -> str | None:
        args = {
            "file_path": path,
            "old_string": "s3cret" if "secret" in path else "hello",
            "new_string": "x",
        }
        request = ApprovalRequest("c1", "edit_file", args, ("approve",), asked_by)
        return asyncio.run(_pending_diff(agent, thread, request))  # type: ignore[arg-type]

    assert "s3cret" in str(card("/secret.txt", ("main",)))
    assert card("/secret.txt", ("main", "task:inner#1")) is None
    assert "hello" in str(card("/open.txt", ("main", "task:inner#1")))
    thread.files = {"/secret.txt": (b"s3cret\n", None)}  # a thread's own copy: same rules
    assert card("/secret.txt", ("main", "task:inner#1")) is None


def test_the_terminal_does_not_ask_about_an_edit_of_a_file_the_agent_may_not_read(
    tmp_path: Path,
) -> None:
    from rich.console import Console

    from tether.approval import ApprovalRequest, Respond
    from tether.cli._approve import ask

    (tmp_path / ".env").write_text("KEY=s3cret\n")
    agent = create_agent(
        FunctionModel(lambda r: "x"),
        backend=FilesystemBackend(tmp_path),
        permissions=[Rule(["read"], ["/.env"], "deny")],
    )
    args = {"file_path": "/.env", "old_string": "s3cret", "new_string": "x"}
    request = ApprovalRequest("c1", "edit_file", args, ("approve", "reject"), ("main",))
    console = Console(record=True, width=200)
    [decision] = ask([request], console, tmp_path, agent=agent)
    assert isinstance(decision, Respond)
    assert "Permission denied" in decision.message
    assert "s3cret" not in console.export_text()
