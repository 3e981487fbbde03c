from __future__ import annotations

import os
from pathlib import Path

import pytest

from tether.messages import ToolCall
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
    return url


@pytest.fixture(params=["sqlite", "postgres"])
def store_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """A checkpointer URL: a fresh SQLite file, or the emptied test Postgres."""
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path}/runs.db"
    return postgres_url()


class Crash(BaseException):
    """Stands for the process dying: nothing after it runs, nothing catches it."""
