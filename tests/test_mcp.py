"""Tools from real MCP servers (the mcp SDK), over stdio and streamable HTTP."""

from __future__ import annotations

import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tether import ConfigurationError, create_agent
from tether.mcp import MCPServer
from tether.messages import ToolCall
from tether.models import ScriptedModel
from tether.testing import tool_results

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
    answers = {r.call_id: r for r in tool_results(result)}
    assert answers["a"].text == "42"
    assert not answers["a"].is_error
    assert answers["r"].is_error
    assert answers["bad"].is_error
    assert result.output == "42"


def test_a_slow_call_times_out_and_a_crashed_server_does_not_end_the_run() -> None:
    model = ScriptedModel(
        [
            [ToolCall("demo_slow", {"seconds": 5}, id="s")],
            [ToolCall("demo_crash", {}, id="c")],
            [ToolCall("demo_add", {"a": 1, "b": 1}, id="after")],
            "carried on",
        ]
    )
    agent = create_agent(model, mcp_servers=[stdio(timeout_seconds=0.5)])
    started = time.monotonic()
    result = agent.run("go")
    assert time.monotonic() - started < 5
    answers = {r.call_id: r for r in tool_results(result)}
    assert answers["s"].is_error
    assert answers["c"].is_error
    assert answers["after"].is_error  # the server is gone: an error, not a crash
    assert "MCP server 'demo'" in answers["after"].text
    assert result.output == "carried on"


@pytest.fixture
def http_server() -> Iterator[str]:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    process = subprocess.Popen(
        [sys.executable, SERVER, "http", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        with socket.socket() as client:
            if client.connect_ex(("127.0.0.1", port)) == 0:
                break
        time.sleep(0.05)
    yield f"http://127.0.0.1:{port}/mcp"
    process.kill()
    process.wait()


def test_streamable_http_on_loopback(http_server: str) -> None:
    model = ScriptedModel([[ToolCall("web_add", {"a": 20, "b": 22}, id="a")], "done"])
    agent = create_agent(model, mcp_servers=[MCPServer("web", url=http_server)])
    result = agent.run("Add over HTTP.")
    assert tool_results(result)[0].text == "42"


def test_bad_server_configuration() -> None:
    with pytest.raises(ConfigurationError, match="a command or a url"):
        MCPServer("x")
    with pytest.raises(ConfigurationError, match="could not list the tools"):
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
    assert said.startswith(f"could not list the tools of MCP server 'gone' ({url}): ")
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
    answers = {r.call_id: r for r in tool_results(result)}
    assert answers["before"].text == "3"
    assert answers["crash"].is_error
    assert answers["after"].is_error  # the server is gone: an error, not a cancelled run
    assert "MCP server 'web'" in answers["after"].text
    assert result.output == "carried on"
