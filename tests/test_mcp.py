"""Tools from real MCP servers (the mcp SDK), over stdio and streamable HTTP."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tether import ConfigurationError, create_agent
from tether.errors import MCPServerError
from tether.mcp import MCPServer
from tether.messages import AssistantMessage, BinaryPart, TextPart, ToolCall, UserMessage
from tether.models import FunctionModel, ModelRequest, ScriptedModel
from tether.testing import tool_results

from .conftest import by_server_id

SERVER = str(Path(__file__).resolve().parent / "mcp_servers" / "demo.py")


def stdio(**kwargs: object) -> MCPServer:
    return MCPServer("demo", command=sys.executable, args=[SERVER], **kwargs)  # type: ignore[arg-type]


def test_stdio_tools_are_prefixed_called_and_errors_are_tool_errors() -> None:
    model = ScriptedModel(
        [
            [
                ToolCall("demo_add", {"a": 2, "b": 40}, id="a"),
                ToolCall("demo_refuse", {"reason": "not today"}, id="r"),
                ToolCall("demo_add", {"a": "x"}, id="bad"),
            ],
            "42",
        ]
    )
    agent = create_agent(model, mcp_servers=[stdio()])
    specs = {t.name: t for t in model.requests[0].tools} if model.requests else {}
    assert not specs  # listed at build time, nothing sent yet
    result = agent.run("Add.")
    names = {t.name for t in model.requests[0].tools}
    assert {"demo_add", "demo_refuse", "demo_slow", "demo_crash"} <= names
    add = next(t for t in model.requests[0].tools if t.name == "demo_add")
    assert add.description == "Add two numbers."
    assert add.parameters["required"] == ["a", "b"]
    answers = by_server_id(result.messages)
    assert answers["a"].text == "42"
    assert not answers["a"].is_error
    assert answers["r"].is_error
    assert answers["bad"].is_error
    assert result.output == "42"


def test_a_slow_call_times_out_and_a_crashed_server_is_started_again() -> None:
    model = ScriptedModel(
        [
            [ToolCall("demo_pid", {}, id="first")],
            [ToolCall("demo_slow", {"seconds": 5}, id="s")],
            [ToolCall("demo_crash", {}, id="c")],
            [ToolCall("demo_pid", {}, id="after")],
            "carried on",
        ]
    )
    agent = create_agent(model, mcp_servers=[stdio(timeout_seconds=0.5)])
    started = time.monotonic()
    result = agent.run("go")
    assert time.monotonic() - started < 5
    answers = by_server_id(result.messages)
    assert answers["s"].is_error
    assert answers["c"].is_error  # it may have run: it is not sent again
    assert "MCP server 'demo' failed on crash: MCPError: Connection closed" in answers["c"].text
    assert not answers["after"].is_error  # the next call starts the server again
    assert answers["after"].text != answers["first"].text
    assert result.output == "carried on"


def pids(result: object) -> list[int]:
    return [int(r.text) for r in tool_results(result) if not r.is_error]  # type: ignore[arg-type]


def killing(turns: list[list[ToolCall] | str], at: int, kill: object) -> FunctionModel:
    """A model playing `turns` that calls `kill(result_texts)` before answering turn `at`,
    then waits a moment as a model on the network would (the event loop runs meanwhile)."""

    async def reply(request: ModelRequest) -> list[ToolCall] | str:
        done = sum(isinstance(m, AssistantMessage) for m in request.messages)
        if done == at:
            kill([r.text for r in tool_results(request.messages)])  # type: ignore[operator]
            await asyncio.sleep(0.3)
        return turns[done]

    return FunctionModel(reply)  # type: ignore[arg-type]


def test_a_stdio_server_killed_between_calls_is_started_again() -> None:
    def kill(texts: list[str]) -> None:
        os.kill(int(texts[0]), signal.SIGKILL)

    turns: list[list[ToolCall] | str] = [
        [ToolCall("demo_pid", {}, id="one")],
        [ToolCall("demo_pid", {}, id="two")],
        "done",
    ]
    result = create_agent(killing(turns, 1, kill), mcp_servers=[stdio()]).run("go")
    first, second = pids(result)
    assert first != second


class HTTPServer:
    """The demo server over streamable HTTP in a process of its own, on a free port."""

    def __init__(self, *modes: str) -> None:
        self.modes = modes
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            self.port = probe.getsockname()[1]
        self.url = f"http://127.0.0.1:{self.port}/mcp"
        self.process: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        self.process = subprocess.Popen(
            [sys.executable, SERVER, "http", str(self.port), *self.modes],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            with socket.socket() as client:
                if client.connect_ex(("127.0.0.1", self.port)) == 0:
                    return
            time.sleep(0.05)
        raise TimeoutError("the MCP server did not start")

    def kill(self) -> None:
        if self.process is not None:
            self.process.kill()
            self.process.wait()


HTTP_MODES = [(), ("stateless",), ("json",)]
"""The SDK server's modes: sessions and event streams (its default), no sessions, JSON
replies instead of streams."""


@pytest.fixture(params=HTTP_MODES, ids=lambda modes: "+".join(modes) or "default")
def http(request: pytest.FixtureRequest) -> Iterator[HTTPServer]:
    server = HTTPServer(*request.param)
    server.start()
    yield server
    server.kill()


@pytest.fixture
def http_server(http: HTTPServer) -> str:
    return http.url


def test_streamable_http_on_loopback(http_server: str) -> None:
    model = ScriptedModel([[ToolCall("web_add", {"a": 20, "b": 22}, id="a")], "done"])
    agent = create_agent(model, mcp_servers=[MCPServer("web", url=http_server)])
    result = agent.run("Add over HTTP.")
    assert tool_results(result)[0].text == "42"


def test_bad_server_configuration() -> None:
    with pytest.raises(ConfigurationError, match="a command or a url"):
        MCPServer("x")
    with pytest.raises(ConfigurationError, match="could not list its tools"):
        create_agent(ScriptedModel(["x"]), mcp_servers=[MCPServer("gone", command="/nonexistent")])


def test_every_argument_name_reaches_the_server() -> None:
    call = ToolCall("demo_quote", {"context": "c", "state": "s", "function": "f"}, id="q")
    model = ScriptedModel([[call], "done"])
    result = create_agent(model, mcp_servers=[stdio()]).run("Quote.")
    (answer,) = tool_results(result)
    assert answer.text == "context=c state=s function=f"


def test_a_server_that_cannot_be_reached_says_why() -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]  # closed once the block ends: nothing listens
    url = f"http://127.0.0.1:{port}/mcp"
    with pytest.raises(ConfigurationError) as caught:
        create_agent(ScriptedModel(["x"]), mcp_servers=[MCPServer("gone", url=url)])
    said = str(caught.value)
    assert said.startswith(f"MCP server 'gone' ({url}) could not list its tools: ")
    assert "ConnectError" in said
    assert "TaskGroup" not in said


def test_the_general_purpose_subagent_has_the_mcp_tools_too() -> None:
    def reply(request: object) -> object:
        from tether.messages import AssistantMessage, UserMessage

        messages = request.messages  # type: ignore[attr-defined]
        first = messages[0]
        done = sum(isinstance(m, AssistantMessage) for m in messages)
        if isinstance(first, UserMessage) and first.text == "Add 2 and 3.":
            return [[ToolCall("demo_add", {"a": 2, "b": 3}, id="sub")], "5"][done]
        task = ToolCall("task", {"description": "Add 2 and 3.", "subagent_type": "general-purpose"})
        return [[task], "The subagent says 5."][done]

    from tether.models import FunctionModel

    model = FunctionModel(reply)  # type: ignore[arg-type]
    result = create_agent(model, mcp_servers=[stdio()]).run("Delegate.")
    assert result.output == "The subagent says 5."
    (task,) = tool_results(result)
    assert task.text == "5"
    sub_tools = {
        t.name for r in model.requests if r.messages[0].text == "Add 2 and 3." for t in r.tools
    }  # type: ignore[union-attr]
    assert "demo_add" in sub_tools


def test_a_stdio_server_starts_when_stderr_is_captured(capsys: pytest.CaptureFixture[str]) -> None:
    model = ScriptedModel([[ToolCall("demo_add", {"a": 1, "b": 2}, id="a")], "3"])
    result = create_agent(model, mcp_servers=[stdio()]).run("Add.")  # capsys: no fileno
    (answer,) = tool_results(result)
    assert answer.text == "3"


def test_a_tool_that_must_run_as_a_task_is_left_out() -> None:
    import mcp.types

    from tether.mcp import _task_only

    schema = {"type": "object"}
    required = mcp.types.ToolExecution(task_support="required")
    optional = mcp.types.ToolExecution(task_support="optional")
    assert _task_only(mcp.types.Tool(name="t", input_schema=schema, execution=required))
    assert not _task_only(mcp.types.Tool(name="t", input_schema=schema, execution=optional))
    assert not _task_only(mcp.types.Tool(name="t", input_schema=schema))


def test_resources_in_results_reach_the_model_as_content() -> None:
    model = ScriptedModel([[ToolCall("demo_attach", {}, id="a")], "seen"])
    result = create_agent(model, mcp_servers=[stdio()]).run("Attach.")
    (answer,) = tool_results(result)
    texts = [p.text for p in answer.content]  # type: ignore[union-attr]
    assert texts == [
        "[resource file:///notes.txt]\nhello notes",
        "[resource file:///a.bin: 3 bytes of application/octet-stream, not shown]",
        "[resource link report (application/pdf) file:///report.pdf: The quarterly report]",
    ]


def test_an_http_server_that_dies_mid_run_is_a_tool_error(http_server: str) -> None:
    model = ScriptedModel(
        [
            [ToolCall("web_add", {"a": 1, "b": 2}, id="before")],
            [ToolCall("web_crash", {}, id="crash")],
            [ToolCall("web_add", {"a": 3, "b": 4}, id="after")],
            "carried on",
        ]
    )
    agent = create_agent(model, mcp_servers=[MCPServer("web", url=http_server, timeout_seconds=5)])
    result = agent.run("go")
    answers = by_server_id(result.messages)
    assert answers["before"].text == "3"
    assert answers["crash"].is_error
    assert answers["after"].is_error  # the server is gone: an error, not a cancelled run
    assert "MCP server 'web'" in answers["after"].text
    assert result.output == "carried on"


def test_an_http_server_killed_and_restarted_mid_run_is_reconnected(http: HTTPServer) -> None:
    def restart(texts: list[str]) -> None:
        http.kill()
        http.start()

    turns: list[list[ToolCall] | str] = [
        [ToolCall("web_pid", {}, id="one")],
        [ToolCall("web_pid", {}, id="two"), ToolCall("web_pid", {}, id="three")],
        "done",
    ]
    server = MCPServer("web", url=http.url, timeout_seconds=5)
    result = create_agent(killing(turns, 1, restart), mcp_servers=[server]).run("go")
    first, second, third = pids(result)  # the new server knows no session: a new one
    assert first != second == third


async def test_async_with_agent_keeps_one_server_for_its_runs() -> None:
    def turns() -> list[list[ToolCall] | str]:
        return [[ToolCall("demo_pid", {}, id="p")], "done"]

    agent = create_agent(ScriptedModel(turns() * 4), mcp_servers=[stdio()])
    async with agent:
        inside = [pids(await agent.arun("pid")) for _ in range(2)]
        async with agent:  # blocks nest
            inside.append(pids(await agent.arun("pid")))
        inside.append(pids(await agent.arun("pid")))
    assert len({pid for (pid,) in inside}) == 1
    (kept,) = inside[0]
    for _ in range(50):  # the block's end stops the server
        try:
            os.kill(kept, 0)
        except ProcessLookupError:
            break
        await asyncio.sleep(0.1)
    else:
        raise AssertionError("the server outlived the block")
    outside = create_agent(ScriptedModel(turns() * 2), mcp_servers=[stdio()])
    (one,), (two,) = [pids(await outside.arun("pid")) for _ in range(2)]
    assert one != two != kept  # without a block, each run starts its own


async def test_concurrent_runs_share_the_kept_server() -> None:
    model = FunctionModel(
        lambda request: (
            "done"
            if any(isinstance(m, AssistantMessage) for m in request.messages)
            else [ToolCall("demo_pid", {}, id="p")]
        )
    )
    agent = create_agent(model, mcp_servers=[stdio()])
    async with agent:
        results = await asyncio.gather(*(agent.arun(f"run {n}") for n in range(4)))
    assert len({pid for r in results for pid in pids(r)}) == 1
    assert sum(len(pids(r)) for r in results) == 4


def test_a_published_server_mcp_server_time() -> None:
    """`mcp-server-time` from PyPI (a dev dependency), built on the SDK by its authors."""
    server = MCPServer(
        "time",
        command=sys.executable,
        args=["-m", "mcp_server_time", "--local-timezone", "UTC"],
        prefix="",
    )
    call = ToolCall(
        "convert_time",
        {"source_timezone": "Europe/Paris", "time": "12:00", "target_timezone": "Asia/Tokyo"},
        id="c",
    )
    now = ToolCall("get_current_time", {"timezone": "America/New_York"}, id="n")
    bad = ToolCall("get_current_time", {"timezone": "Mars/Olympus"}, id="bad")
    model = ScriptedModel([[call, now, bad], "done"])
    result = create_agent(model, mcp_servers=[server]).run("What time is it?")
    assert {"convert_time", "get_current_time"} <= {t.name for t in model.requests[0].tools}
    answers = by_server_id(result.messages)
    converted = json.loads(answers["c"].text)
    assert converted["source"]["timezone"] == "Europe/Paris"
    assert converted["target"]["timezone"] == "Asia/Tokyo"
    assert json.loads(answers["n"].text)["timezone"] == "America/New_York"
    assert answers["bad"].is_error
    assert "Mars/Olympus" in answers["bad"].text


async def test_resources_and_prompts_for_the_users_code() -> None:
    server = stdio()
    listed = {r.name: r for r in await server.list_resources()}
    assert str(listed["notes"].uri) == "file:///notes.txt"
    assert listed["logo"].mime_type == "image/png"
    assert await server.read_resource("file:///notes.txt") == [TextPart("buy milk")]
    (logo,) = await server.read_resource("file:///logo.png")
    assert logo == BinaryPart(b"\x89PNG-ish", "image/png")
    (prompt,) = await server.list_prompts()
    assert prompt.name == "review"
    assert [a.name for a in prompt.arguments] == ["language"]
    history = await server.get_prompt("review", {"language": "Rust"})
    assert history == [
        UserMessage((TextPart("Review this Rust code."),)),
        AssistantMessage((TextPart("Paste it and I will."),)),
    ]
    model = ScriptedModel(["Here is my review."])
    result = await create_agent(model).arun("fn main() {}", message_history=history)
    assert [m.text for m in model.requests[0].messages] == [  # type: ignore[union-attr]
        "Review this Rust code.",
        "Paste it and I will.",
        "fn main() {}",
    ]
    assert result.output == "Here is my review."
    with pytest.raises(MCPServerError) as caught:
        await server.read_resource("file:///nowhere")
    assert str(caught.value) == (
        f"MCP server 'demo' ({sys.executable}) could not read file:///nowhere: "
        "MCPError: Unknown resource: file:///nowhere"
    )


def test_timeouts_are_checked_and_a_start_gets_at_least_ten_seconds() -> None:
    assert stdio(timeout_seconds=0.5).start_seconds == 10  # a process takes time to start
    assert stdio(timeout_seconds=90).start_seconds == 90
    assert stdio(timeout_seconds=0.5, start_timeout_seconds=2).start_seconds == 2
    for bad in (0, -1, float("nan"), float("inf")):
        with pytest.raises(ConfigurationError, match="must be a positive number of seconds"):
            stdio(timeout_seconds=bad)
        with pytest.raises(ConfigurationError, match="start_timeout_seconds must be"):
            stdio(start_timeout_seconds=bad)
