"""What tether's MCP client tells servers and takes from them on its own: the roots it
names are directories the agent may list, never others; a server flooding progress
notifications costs neither memory nor the event loop's time."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.security.test_event_loop import worst_stall
from tether import create_agent
from tether._mcp_client import PROGRESS_EVERY, Progress, Root, backend_roots
from tether.backends import CompositeBackend, StateBackend
from tether.backends.errors import BackendError
from tether.backends.filesystem import FilesystemBackend
from tether.backends.permissions import PermissionedBackend, Rule
from tether.events import Event, ToolProgress
from tether.mcp import MCPServer
from tether.messages import ToolCall
from tether.models import ScriptedModel
from tether.state import RunState, ToolContext
from tether.testing import tool_results

FEATURES = str(Path(__file__).parents[1] / "mcp_servers" / "features.py")
STALL_LIMIT = 0.2


@pytest.fixture
def dirs(tmp_path: Path) -> tuple[Path, Path]:
    work, notes = tmp_path / "work", tmp_path / "notes"
    work.mkdir()
    notes.mkdir()
    return work, notes


def composite(work: Path, notes: Path) -> CompositeBackend:
    return CompositeBackend(FilesystemBackend(work), {"/notes/": FilesystemBackend(notes)})


def test_roots_are_the_directories_the_agent_may_list(dirs: tuple[Path, Path]) -> None:
    work, notes = dirs
    both = (Root(work.resolve().as_uri(), "/"), Root(notes.resolve().as_uri(), "/notes"))
    assert backend_roots(composite(work, notes)) == both
    deny_notes = [Rule({"read"}, ["/notes", "/notes/**"], "deny")]
    assert backend_roots(composite(work, notes), deny_notes) == both[:1]
    deny_all = [Rule({"read"}, ["/", "/**"], "deny")]
    assert backend_roots(composite(work, notes), deny_all) == ()
    # a rule on writing hides nothing
    assert backend_roots(composite(work, notes), [Rule({"write"}, ["/**"], "deny")]) == both


def test_roots_follow_the_policy_and_guards_inside_the_backend(dirs: tuple[Path, Path]) -> None:
    work, notes = dirs

    def no_notes(operation: str, path: str) -> str | None:
        return "private" if path.startswith("/notes") else None

    def broken(operation: str, path: str) -> str | None:
        raise BackendError("the policy failed")

    assert [r.name for r in backend_roots(composite(work, notes), policy=no_notes)] == ["/"]
    assert backend_roots(composite(work, notes), policy=broken) == ()
    # a guard inside a route speaks in the route's own paths
    guarded = PermissionedBackend(FilesystemBackend(notes), [Rule({"read"}, ["/"], "deny")])
    inner = CompositeBackend(FilesystemBackend(work), {"/notes/": guarded})
    assert [r.name for r in backend_roots(inner)] == ["/"]


def test_backends_without_host_directories_name_none() -> None:
    assert backend_roots(StateBackend()) == ()
    assert backend_roots(CompositeBackend(StateBackend(), {"/s/": StateBackend()})) == ()


def test_a_server_asking_for_roots_learns_only_what_the_agent_may_list(
    dirs: tuple[Path, Path],
) -> None:
    work, notes = dirs
    server = MCPServer("f", command=sys.executable, args=[FEATURES])
    model = ScriptedModel([[ToolCall("f_roots", {})], "ok"])
    agent = create_agent(
        model,
        mcp_servers=[server],
        backend=composite(work, notes),
        permissions=[Rule({"read"}, ["/notes", "/notes/**"], "deny")],
    )
    (answer,) = tool_results(agent.run("Roots?"))
    assert answer.text == f"{work.resolve().as_uri()} /"
    assert str(notes) not in answer.text


async def test_progress_after_a_call_ended_is_not_passed_on() -> None:
    heard: list[Event] = []
    state = RunState(run_id="r", path=("main",), messages=[])
    state.emit = heard.append
    progress = Progress(ToolContext(state, ToolCall("t")))
    for n in range(1000):  # a flood: one event now, the newest held
        await progress(float(n), 1000.0, None)
    progress.close()
    await progress(5000.0, None, "late")
    await asyncio.sleep(PROGRESS_EVERY * 2)
    assert 2 <= len(heard) <= 3  # the first, maybe one at its time, and the last word
    assert [e.progress for e in heard][-1] == 999  # type: ignore[union-attr]


def test_a_progress_flood_holds_neither_memory_nor_the_event_loop() -> None:
    """Measured in a fresh interpreter (see test_event_loop.py for why)."""
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-q",
            "-p",
            "no:cacheprovider",
            f"{__file__}::test_flood_measured_in_a_fresh_interpreter",
        ],
        env={**os.environ, "TETHER_WATCHDOG": "1"},
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-2000:]
    assert "1 passed" in done.stdout


@pytest.mark.skipif(not os.environ.get("TETHER_WATCHDOG"), reason="run by the test above")
async def test_flood_measured_in_a_fresh_interpreter() -> None:
    """3,000 notifications as fast as the server can send them: the run hears at most one
    per `PROGRESS_EVERY` seconds of the call, and the last; the loop never waits."""
    server = MCPServer("f", command=sys.executable, args=[FEATURES], timeout_seconds=120)
    model = ScriptedModel([[ToolCall("f_steps", {"count": 3000}, id="s")], "ok"])
    agent = await asyncio.to_thread(create_agent, model, mcp_servers=[server])
    progress: list[ToolProgress] = []
    took = 0.0

    async def run() -> None:
        nonlocal took
        started = time.monotonic()
        async for event in agent.stream("Flood."):
            if isinstance(event, ToolProgress):
                progress.append(event)
        took = time.monotonic() - started

    stall = await worst_stall(run)
    assert len(progress) <= took / PROGRESS_EVERY + 2
    assert len(progress) < 300
    assert progress[-1].progress == 3000
    assert stall <= STALL_LIMIT, f"the event loop stalled {stall:.3f} s"


def test_a_directory_whose_contents_are_denied_is_no_root(dirs: tuple[Path, Path]) -> None:
    work, notes = dirs
    for denied in ("/notes/**", "/notes/*"):
        rules = [Rule({"read"}, [denied], "deny")]
        assert [r.name for r in backend_roots(composite(work, notes), rules)] == ["/"]


@pytest.mark.parametrize(
    ("charset", "used"),
    [
        ("punycode", "utf-8"),  # quadratic in time: never used
        ("idna", "utf-8"),  # raises on bytes it does not like
        ("undefined", "utf-8"),
        ("utf-7", "utf-8"),
        ("rot13", "utf-8"),
        ("nonsense", "utf-8"),
        ("latin-1", "iso8859-1"),
        ("windows-1252", "cp1252"),
        ("UTF-16LE", "utf-16-le"),
        ("us-ascii", "ascii"),
    ],
)
def test_a_text_blob_is_decoded_only_in_a_common_charset(charset: str, used: str) -> None:
    from tether._mcp_content import _charset, _text_of

    assert _charset(f"; charset={charset}") == used
    text = _text_of(b"caf\xe9 \xff\x00", f"text/plain; charset={charset}")
    assert text == b"caf\xe9 \xff\x00".decode(used, "replace")  # never raises
