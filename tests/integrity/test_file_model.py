"""Random batches of parallel file-tool calls, with call ids a server repeats or leaves
empty, through every backend, checked against a plain model of the files: a dict of
texts, with each turn's calls applied one after another in the model's order.

What must hold after every batch: each call has a result of its own, under an id of its
own; each result is the one the model predicts; the files are the model's, and nothing
else is left beside them (no temporary file, no lost edit).
"""

from __future__ import annotations

import asyncio
import os
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, rule

from tether import Limits, create_agent
from tether.backends import CompositeBackend, FilesystemBackend, StateBackend, StoreBackend
from tether.backends.search import split_lines
from tether.messages import AssistantMessage, ToolCall, ToolResult, ToolResultMessage
from tether.models import FunctionModel, ModelRequest
from tether.stores import SqliteStore

# Few names and letters, so that calls collide: the same file, the same text twice.
TEXT = st.text(alphabet="ab\n", max_size=8)
FIND = st.text(alphabet="ab", min_size=1, max_size=2)
PUT = st.text(alphabet="abX", max_size=3)
SERVER_IDS = st.sampled_from(["x", "y", ""])  # repeated and empty, as servers send them


def calls(paths: list[str]) -> st.SearchStrategy[list[ToolCall]]:
    path = st.sampled_from(paths)
    write = st.builds(
        lambda p, c, i: ToolCall("write_file", {"file_path": p, "content": c}, i),
        path,
        TEXT,
        SERVER_IDS,
    )
    edit = st.builds(
        lambda p, o, n, a, i: ToolCall(
            "edit_file", {"file_path": p, "old_string": o, "new_string": n, "replace_all": a}, i
        ),
        path,
        FIND,
        PUT,
        st.booleans(),
        SERVER_IDS,
    )
    read = st.builds(lambda p, i: ToolCall("read_file", {"file_path": p}, i), path, SERVER_IDS)
    return st.lists(st.one_of(write, edit, read), min_size=1, max_size=6)


@dataclass(frozen=True)
class Expected:
    is_error: bool
    text: str
    """The whole result, or (for an error) a phrase it holds."""


def apply(files: dict[str, str], call: ToolCall) -> Expected:  # noqa: PLR0911
    """What `call` does to the model's files, and what it answers."""
    assert isinstance(call.args, dict)
    args: dict[str, Any] = call.args
    path = args["file_path"]
    if call.name == "write_file":
        if path in files:
            return Expected(True, "already exists")
        files[path] = args["content"]
        return Expected(False, f"Wrote {len(args['content'].encode())} bytes to {path}.")
    if call.name == "edit_file" and args["old_string"] == args["new_string"]:
        return Expected(True, "are the same")
    if path not in files:
        return Expected(True, f"No such file: {path}")
    text = files[path]
    if call.name == "read_file":
        if not text:
            return Expected(False, f"{path} is empty.")
        numbered = [f"{n}\t{line}" for n, line in enumerate(split_lines(text), start=1)]
        return Expected(False, "\n".join(numbered))
    old, new = args["old_string"], args["new_string"]
    count = text.count(old)
    if count == 0:
        return Expected(True, "was not found")
    if count > 1 and not args["replace_all"]:
        return Expected(True, f"occurs {count} times")
    files[path] = text.replace(old, new)
    return Expected(False, f"Replaced {count} occurrence(s) in {path}.")


def matches(got: ToolResult, expected: Expected, call: ToolCall) -> None:
    assert got.is_error == expected.is_error, (call, got.text, expected)
    if expected.is_error:
        assert expected.text in got.text, (call, got.text)
    else:
        assert got.text == expected.text, (call, got.text)


class Setup:
    """One backend under test: the agent's keywords, and how to list its files."""

    def __init__(self, kind: str, folder: Path) -> None:
        self.kind, self.folder = kind, folder
        self.paths = ["/a.txt", "/d/b.txt", "/d/c.txt"]
        self.store = SqliteStore(folder / "store.db") if kind in ("store", "composite") else None
        self.root = folder / "root"
        self.root.mkdir()
        if kind == "state":
            self.backend: Any = StateBackend()
        elif kind == "filesystem":
            self.backend = FilesystemBackend(self.root)
        elif kind == "store":
            self.backend = StoreBackend(self.store, "files")  # type: ignore[arg-type]
        else:
            self.paths = ["/a.txt", "/d/b.txt", "/mem/c.txt", "/mem/d/e.txt"]
            routes = {"/mem/": StoreBackend(self.store, "files")}  # type: ignore[arg-type]
            self.backend = CompositeBackend(FilesystemBackend(self.root), routes)

    def agent_options(self) -> dict[str, Any]:
        # The state backend keeps its files in the thread, from one run to the next.
        return {
            "backend": self.backend,
            "checkpointer": f"sqlite:///{self.folder}/runs.db",
            "limits": Limits(loop_nudge_after=None, loop_stop_after=None),  # calls repeat here
        }

    def files(self, state_files: dict[str, bytes]) -> dict[str, str]:
        if self.kind == "state":
            return {p: d.decode() for p, d in state_files.items()}
        listed = asyncio.run(self.backend.files("/"))
        found = {f.path: asyncio.run(self.backend.read(f.path)).decode() for f in listed}
        on_disk = sorted(
            "/" + os.path.relpath(os.path.join(d, n), self.root)
            for d, _, names in os.walk(self.root)
            for n in names
        )
        if self.kind != "store":  # nothing but the files: no temporary file left over
            assert on_disk == sorted(p for p in found if not p.startswith("/mem/")), on_disk
        return found


class FileTools(RuleBasedStateMachine):
    kind = "state"

    def __init__(self) -> None:
        super().__init__()
        self.folder = Path(self._make_folder())
        self.setup = Setup(self.kind, self.folder)
        self.model: dict[str, str] = {}
        self.ids: set[str] = set()
        self.batch: list[ToolCall] = []
        self.state_files: dict[str, bytes] = {}

        def reply(request: ModelRequest) -> Any:
            last = request.messages[-1]
            return "done" if isinstance(last, ToolResultMessage) else list(self.batch)

        self.agent = create_agent(FunctionModel(reply), **self.setup.agent_options())

    def _make_folder(self) -> str:
        import tempfile

        return tempfile.mkdtemp(prefix="tether-model-")

    @initialize()
    def start(self) -> None:
        self.model = {}

    @rule(data=st.data())
    def parallel_calls(self, data: st.DataObject) -> None:
        self.batch = data.draw(calls(self.setup.paths))
        result = self.agent.run("go", thread_id="t")
        assert result.stop_reason == "completed"
        self.state_files = result.files
        made = next(
            m for m in reversed(result.messages) if isinstance(m, AssistantMessage) and m.tool_calls
        )
        answered = next(m for m in reversed(result.messages) if isinstance(m, ToolResultMessage))
        own = [c.id for c in made.tool_calls]
        assert [r.call_id for r in answered.results] == own
        assert len(set(own)) == len(own), "an id given twice in one turn"
        assert not self.ids & set(own), "an id of an earlier turn given again"
        self.ids |= set(own)
        for call, got in zip(self.batch, answered.results, strict=True):
            matches(got, apply(self.model, call), call)

    @invariant()
    def same_files(self) -> None:
        if hasattr(self, "setup"):
            assert self.setup.files(self.state_files) == self.model

    def teardown(self) -> None:
        if self.setup.store is not None:
            asyncio.run(self.setup.store.close())
        shutil.rmtree(self.folder, ignore_errors=True)


SETTINGS = settings(
    max_examples=60,
    stateful_step_count=8,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
)


@pytest.mark.parametrize("kind", ["state", "filesystem", "store", "composite"])
def test_parallel_file_calls_match_the_model(kind: str) -> None:
    machine = type(f"FileTools_{kind}", (FileTools,), {"kind": kind})
    machine.TestCase.settings = SETTINGS
    machine.TestCase().runTest()
