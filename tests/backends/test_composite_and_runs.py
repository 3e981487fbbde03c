"""Composite routing, StoreBackend persistence, StateBackend per run, eviction."""

from __future__ import annotations

from tests.conftest import by_server_id, own_id
from tether import ConfigurationError, create_agent, tool
from tether.backends import CompositeBackend, StateBackend, StoreBackend
from tether.messages import ToolCall
from tether.models import ScriptedModel
from tether.stores import InMemoryStore
from tether.tools.files import FILE_TOOL_NAMES

from .conftest import ok


async def test_composite_routes_by_longest_prefix_and_keeps_full_paths() -> None:
    store = InMemoryStore()
    memories, deep = StoreBackend(store, "a"), StoreBackend(store, "b")
    backend = CompositeBackend(StateBackend(), {"/memories/": memories, "/memories/deep/": deep})
    await ok(backend, "write_file", file_path="/memories/prefs.md", content="tabs")
    await ok(backend, "write_file", file_path="/memories/deep/x.md", content="deep")
    await ok(backend, "write_file", file_path="/scratch.txt", content="tmp")

    assert await memories.read("/prefs.md") == b"tabs"
    assert await deep.read("/x.md") == b"deep"
    listing = (await ok(backend, "ls", path="/")).text.split("\n")
    assert listing[0] == "/memories/"
    assert listing[1].startswith("/scratch.txt (3 bytes")
    inner = (await ok(backend, "ls", path="/memories")).text.split("\n")
    assert inner[0] == "/memories/deep/"
    assert inner[1].startswith("/memories/prefs.md")
    found = (await ok(backend, "glob", pattern="**/*.md")).text.split("\n")
    assert found == ["/memories/deep/x.md", "/memories/prefs.md"]
    hits = await ok(backend, "grep", pattern="tabs|deep|tmp", output_mode="content")
    assert hits.text.split("\n") == [
        "/memories/deep/x.md",
        "1:deep",
        "/memories/prefs.md",
        "1:tabs",
        "/scratch.txt",
        "1:tmp",
    ]


def test_a_route_for_root_is_refused() -> None:
    import pytest

    with pytest.raises(ConfigurationError, match="route cannot be '/'"):
        CompositeBackend(StateBackend(), {"/": StateBackend()})


def write(path: str, content: str) -> ToolCall:
    return ToolCall("write_file", {"file_path": path, "content": content})


def test_state_files_belong_to_one_run() -> None:
    agent = create_agent(ScriptedModel([[write("/a.txt", "one")], "ok", "ok"]))
    first = agent.run("write")
    second = agent.run("nothing")
    assert first.files == {"/a.txt": b"one"}
    assert second.files == {}


def test_store_files_outlive_the_run() -> None:
    store = InMemoryStore()
    model = ScriptedModel(
        [
            [write("/memories/name.md", "Ada")],
            "saved",
            [ToolCall("read_file", {"file_path": "/memories/name.md"})],
            "Ada",
        ]
    )
    agent = create_agent(
        model, backend=CompositeBackend(StateBackend(), {"/memories/": StoreBackend(store, "bot")})
    )
    agent.run("remember")
    result = agent.run("recall")
    assert result.messages[2].results[0].text == "1\tAda"  # type: ignore[union-attr]
    assert result.files == {}


def test_large_results_are_saved_to_a_file_with_a_preview() -> None:
    @tool
    def dump() -> str:
        """Return a lot of text."""
        return "\n".join(f"row {i}: " + "x" * 90 for i in range(1000))

    model = ScriptedModel([[ToolCall("dump", {}, "call_big")], "done"])
    result = create_agent(model, tools=[dump], tool_token_limit_before_evict=1_000).run("go")
    note = by_server_id(result.messages)["call_big"].text
    path = f"/large_tool_results/{own_id(result.messages, 'call_big')}"  # by tether's id
    assert f"saved to {path}" in note
    assert "row 9: " in note
    assert "row 10: " not in note
    assert result.files[path].startswith(b"row 0: ")
    assert len(result.files[path]) > 90_000


def test_eviction_can_be_turned_off_and_spares_small_results() -> None:
    @tool
    def dump() -> str:
        """Return a lot of text."""
        return "y" * 50_000

    model = ScriptedModel([[ToolCall("dump", {})], "done"])
    result = create_agent(model, tools=[dump], tool_token_limit_before_evict=None).run("go")
    assert len(result.messages[2].results[0].text) == 50_000  # type: ignore[union-attr]
    model = ScriptedModel([[ToolCall("dump", {})], "done"])
    result = create_agent(model, tools=[dump]).run("go")  # 12,500 tokens: under 20,000
    assert result.files == {}


def test_filesystem_can_be_left_out() -> None:
    import pytest

    model = ScriptedModel(["hi"])
    create_agent(model, filesystem=False).run("x")
    assert not {t.name for t in model.requests[0].tools} & set(FILE_TOOL_NAMES)
    assert "## Files" not in model.requests[0].system_prompt
    with pytest.raises(ConfigurationError, match="filesystem=True"):
        create_agent(ScriptedModel(["x"]), filesystem=False, backend=StateBackend())
    with pytest.raises(ConfigurationError, match="Backend"):
        create_agent(ScriptedModel(["x"]), backend="./project")  # type: ignore[arg-type]
