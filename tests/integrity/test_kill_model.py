"""Random batches of parallel file calls, some of them cut by a `kill -9` of the process
running them, each followed by a resume in another process; checked against a plain
model of the files.

The process dies inside a call that every file call of its turn is ordered around (it
names "/"), so what must have happened is exact: the calls before it took effect and
their results were kept; it is answered "outcome unknown", never run again; the calls
after it never started, and run on resume, in the model's order. Repeated and empty
call ids from the model change none of it.
"""

from __future__ import annotations

import json
import shutil
import signal
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule

from tests.integrity.test_file_model import Expected, apply, calls, matches
from tether import Limits, create_agent, tool
from tether.backends import FilesystemBackend, StateBackend
from tether.messages import AssistantMessage, ToolCall, ToolResultMessage
from tether.models import FunctionModel, ModelRequest

PATHS = ["/a.txt", "/d/b.txt", "/d/c.txt"]

AGENT = r"""
import json, os, signal, sys
from tether import Limits, create_agent, tool
from tether.backends import FilesystemBackend, StateBackend
from tether.messages import ToolCall, ToolResultMessage
from tether.models import FunctionModel

def make(kind, root, url, batch):
    @tool(path_param="path")
    def crash(path: str = "/") -> str:
        "Die where the call stands."
        os.kill(os.getpid(), signal.SIGKILL)
        return "never"

    def reply(request):
        if isinstance(request.messages[-1], ToolResultMessage):
            return "done"
        return list(batch)

    backend = FilesystemBackend(root) if kind == "filesystem" else StateBackend()
    quiet = Limits(loop_nudge_after=None, loop_stop_after=None)
    return create_agent(FunctionModel(reply), tools=[crash], backend=backend,
                        checkpointer=url, limits=quiet)

if __name__ == "__main__":
    kind, root, url, batch_file = sys.argv[1:]
    batch = [ToolCall(c["name"], c["args"], c["id"]) for c in json.load(open(batch_file))]
    make(kind, root, url, batch).run("go", thread_id="t")
"""


def _crash(server_id: str) -> ToolCall:
    return ToolCall("crash", {}, server_id)


class Killed(RuleBasedStateMachine):
    kind = "filesystem"

    def __init__(self) -> None:
        super().__init__()
        self.folder = Path(tempfile.mkdtemp(prefix="tether-kill-"))
        self.root = self.folder / "root"
        self.root.mkdir()
        self.url = f"sqlite:///{self.folder}/runs.db"
        self.script = self.folder / "agent.py"
        self.script.write_text(AGENT)
        self.model: dict[str, str] = {}
        self.batch: list[ToolCall] = []
        self.files: dict[str, bytes] = {}
        self.agent = self._agent()

    def _agent(self) -> Any:
        @tool(path_param="path")
        def crash(path: str = "/") -> str:
            """Die where the call stands."""
            raise AssertionError("a call that may have run was run again")

        def reply(request: ModelRequest) -> Any:
            if isinstance(request.messages[-1], ToolResultMessage):
                return "done"
            return list(self.batch)

        backend = FilesystemBackend(self.root) if self.kind == "filesystem" else StateBackend()
        quiet = Limits(loop_nudge_after=None, loop_stop_after=None)
        return create_agent(
            FunctionModel(reply),
            tools=[crash],
            backend=backend,
            checkpointer=self.url,
            limits=quiet,
        )

    @rule(data=st.data())
    def killed_then_resumed(self, data: st.DataObject) -> None:
        batch = data.draw(calls(PATHS))
        at = data.draw(st.integers(0, len(batch)))
        batch.insert(at, _crash(data.draw(st.sampled_from(["x", "", "kill"]))))
        listed = [{"name": c.name, "args": c.args, "id": c.id} for c in batch]
        (self.folder / "batch.json").write_text(json.dumps(listed))
        command = [sys.executable, str(self.script), self.kind, str(self.root), self.url]
        died = subprocess.run(
            [*command, str(self.folder / "batch.json")], check=False, capture_output=True
        )
        assert died.returncode == -signal.SIGKILL, died.stderr.decode()[-2000:]
        self.batch = batch
        result = self.agent.resume("t")
        self._check(result, batch)

    @rule(data=st.data())
    def runs_whole(self, data: st.DataObject) -> None:
        self.batch = data.draw(calls(PATHS))
        self._check(self.agent.run("go", thread_id="t"), self.batch)

    def _check(self, result: Any, batch: list[ToolCall]) -> None:
        assert result.stop_reason == "completed"
        self.files = result.files
        made = next(
            m for m in reversed(result.messages) if isinstance(m, AssistantMessage) and m.tool_calls
        )
        answered = next(m for m in reversed(result.messages) if isinstance(m, ToolResultMessage))
        assert [r.call_id for r in answered.results] == [c.id for c in made.tool_calls]
        for call, got in zip(batch, answered.results, strict=True):
            if call.name == "crash":
                expected = Expected(True, "whether it took effect is unknown")
            else:
                expected = apply(self.model, call)
            matches(got, expected, call)

    @invariant()
    def same_files(self) -> None:
        if self.kind == "state":
            found = {p: d.decode() for p, d in self.files.items()}
        else:
            found = {
                "/" + str(p.relative_to(self.root)): p.read_text()
                for p in self.root.rglob("*")
                if p.is_file() and not p.name.endswith(".tmp")
            }
        assert found == self.model

    def teardown(self) -> None:
        shutil.rmtree(self.folder, ignore_errors=True)


@pytest.mark.parametrize("kind", ["filesystem", "state"])
def test_killed_batches_resume_as_the_model_says(kind: str) -> None:
    machine = type(f"Killed_{kind}", (Killed,), {"kind": kind})
    machine.TestCase.settings = settings(
        max_examples=10,
        stateful_step_count=5,
        deadline=None,
        suppress_health_check=[HealthCheck.too_slow],
    )
    machine.TestCase().runTest()


RECORDED_THEN_KILLED = r"""
import asyncio, os, signal, sys
from tether import create_agent, tool
from tether.checkpoint.base import open_checkpointer
from tether.messages import ToolCall, ToolResultMessage
from tether.models import FunctionModel

url = sys.argv[1]

@tool
async def die_once_written() -> str:
    "Die as soon as the write's result is on record."
    records = open_checkpointer(url)
    for _ in range(3000):
        if any(r["t"] == "result" for r in await records.load("t")):
            os.kill(os.getpid(), signal.SIGKILL)
        await asyncio.sleep(0.01)
    return "the write was never recorded"

def reply(request):
    if isinstance(request.messages[-1], ToolResultMessage):
        return "done"
    return [ToolCall("write_file", {"file_path": "/a.md", "content": "kept"}),
            ToolCall("die_once_written", {})]

create_agent(FunctionModel(reply), tools=[die_once_written], checkpointer=url).run(
    "go", thread_id="t")
"""


def test_a_recorded_write_to_the_state_backend_survives_a_kill(tmp_path: Path) -> None:
    script = tmp_path / "agent.py"
    script.write_text(RECORDED_THEN_KILLED)
    url = f"sqlite:///{tmp_path}/runs.db"
    died = subprocess.run(
        [sys.executable, str(script), url], check=False, capture_output=True, timeout=120
    )
    assert died.returncode == -signal.SIGKILL, died.stderr.decode()[-2000:]

    def reply(request: ModelRequest) -> Any:
        return "done"

    result = create_agent(FunctionModel(reply), checkpointer=url).resume("t")
    wrote = next(r for m in result.messages if isinstance(m, ToolResultMessage) for r in m.results)
    assert wrote.text == "Wrote 4 bytes to /a.md."
    assert result.files == {"/a.md": b"kept"}  # the result and its effect, or neither
