"""The durable stores behave like InMemoryStore, survive their objects, and back
/memories/ files across threads."""

from __future__ import annotations

from pathlib import Path

import pytest

from tether import create_agent
from tether.backends import CompositeBackend, StateBackend, StoreBackend
from tether.messages import ToolCall
from tether.models import ScriptedModel
from tether.stores import InMemoryStore, PostgresStore, SqliteStore, Store

from .conftest import postgres_url


@pytest.fixture(params=["memory", "sqlite", "postgres"])
def make_store(request: pytest.FixtureRequest, tmp_path: Path) -> object:
    """A function giving a new store object over the same data each time it is called."""
    if request.param == "memory":
        shared = InMemoryStore()
        return lambda: shared
    if request.param == "sqlite":
        return lambda: SqliteStore(tmp_path / "store.db")
    url = postgres_url()
    return lambda: PostgresStore(url)


async def test_items_round_trip_and_outlive_the_store_object(make_store: object) -> None:
    store: Store = make_store()  # type: ignore[operator]
    await store.put(("user", "ada"), "prefs.md", b"tabs")
    await store.put(("user", "ada"), "notes.md", b"\x00binary\xff")
    await store.put(("user", "bob"), "prefs.md", b"spaces")
    await store.put(("user", "ada"), "prefs.md", b"tabs, 4 wide")

    again: Store = make_store()  # type: ignore[operator]
    item = await again.get(("user", "ada"), "prefs.md")
    assert item is not None
    assert item.value == b"tabs, 4 wide"
    assert item.updated > 0
    assert {k: v.value for k, v in (await again.items(("user", "ada"))).items()} == {
        "prefs.md": b"tabs, 4 wide",
        "notes.md": b"\x00binary\xff",
    }
    await again.delete(("user", "ada"), "prefs.md")
    await again.delete(("user", "ada"), "missing.md")  # absent: nothing happens
    assert await again.get(("user", "ada"), "prefs.md") is None
    assert list(await again.items(("user", "bob"))) == ["prefs.md"]
    assert await again.items(("nobody",)) == {}


def test_memories_persist_across_threads_and_agents(tmp_path: Path) -> None:
    def agent(turns: list[object]) -> object:
        backend = CompositeBackend(
            default=StateBackend(),
            routes={"/memories/": StoreBackend(SqliteStore(tmp_path / "mem.db"), namespace="a1")},
        )
        return create_agent(
            ScriptedModel(turns),  # type: ignore[arg-type]
            backend=backend,
            checkpointer=f"sqlite:///{tmp_path}/runs.db",
        )

    write = ToolCall("write_file", {"file_path": "/memories/user.md", "content": "Ada"})
    agent([[write], "saved"]).run("Remember me.", thread_id="monday")  # type: ignore[attr-defined]
    read = ToolCall("read_file", {"file_path": "/memories/user.md"})
    later = agent([[read], "found"]).run("Who am I?", thread_id="tuesday")  # type: ignore[attr-defined]
    texts = [r.text for m in later.messages if hasattr(m, "results") for r in m.results]
    assert "Ada" in texts[0]


def test_a_store_without_swap_is_refused_by_name() -> None:
    from tether.backends import StoreBackend
    from tether.errors import ConfigurationError

    class OldStore:
        async def get(self, namespace: object, key: str) -> None: ...
        async def put(self, namespace: object, key: str, value: bytes) -> None: ...
        async def delete(self, namespace: object, key: str) -> None: ...
        async def items(self, namespace: object) -> dict[str, object]: ...

    with pytest.raises(ConfigurationError, match=r"got OldStore \(it has no swap\)"):
        StoreBackend(OldStore())  # type: ignore[arg-type]
