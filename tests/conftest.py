from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

import pytest

from tests.sandboxes import make_sandbox  # noqa: F401  (a fixture: every sandbox backend)
from tether.messages import AssistantMessage, Message, ToolCall, ToolResult, ToolResultMessage
from tether.state import RunState, ToolContext

pytest_plugins = ["tether.pytest_plugin"]  # no test may reach a real provider


@pytest.fixture
def context() -> ToolContext:
    """A tool context outside any run."""
    return ToolContext(RunState(run_id="run_test", path=("main",), messages=[]), ToolCall("t"))


def postgres_url() -> str:
    """The test database `make test` starts (scripts/postgres-for-tests.sh), emptied."""
    url = os.environ.get("TETHER_TEST_POSTGRES")
    if not url:
        if os.environ.get("CI"):
            pytest.fail("TETHER_TEST_POSTGRES is not set: run the suite with `make test`")
        pytest.skip("TETHER_TEST_POSTGRES is not set; `make test` starts a local Postgres")
    import psycopg

    with psycopg.connect(url, autocommit=True) as db:
        db.execute(
            "DROP TABLE IF EXISTS tether_records, tether_leases, tether_store, tether_schema"
        )
        db.execute("DROP FUNCTION IF EXISTS tether_append")
    return url


@pytest.fixture(params=["sqlite", "postgres"])
def store_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """A checkpointer URL: a fresh SQLite file, or the emptied test Postgres."""
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path}/runs.db"
    return postgres_url()


class Crash(BaseException):
    """Stands for the process dying: nothing after it runs, nothing catches it."""


def by_server_id(messages: Sequence[Message]) -> dict[str, ToolResult]:
    """The results of a conversation's tool calls, by the id the model gave each call
    (`ToolCall.provider_id`): scripts name calls by the ids they give them, while tether
    keys everything by its own. Each server id must name one call only."""
    answers = [m for m in messages if isinstance(m, ToolResultMessage)]
    results = {r.call_id: r for m in answers for r in m.results}
    found: dict[str, ToolResult] = {}
    for message in messages:
        if isinstance(message, AssistantMessage):
            for call in message.tool_calls:
                if call.provider_id is not None and call.id in results:
                    assert call.provider_id not in found, f"server id {call.provider_id} twice"
                    found[call.provider_id] = results[call.id]
    return found


def own_id(messages: Sequence[Message], server_id: str) -> str:
    """tether's id of the one call the model gave `server_id`."""
    (found,) = [
        c.id
        for m in messages
        if isinstance(m, AssistantMessage)
        for c in m.tool_calls
        if c.provider_id == server_id
    ]
    return found


@pytest.fixture(autouse=True)
def _own_state_directory(
    tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each test keeps tether's per-user state (the sandbox's records of commands under
    way) apart, as two users would: none reads what another left."""
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path_factory.mktemp("state")))
