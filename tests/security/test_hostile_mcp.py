"""MCP servers that never answer, answer half a line, trickle, flood or answer too much:
every wait on one ends within the server's `timeout_seconds` with an error that names
it, through the library, the `tether` command and a `tether serve` server.

Each test waits in a daemon thread with a generous bound (`within`), so that a wait
that never ends fails the test instead of hanging the suite. The event loop's share
(no stall while such servers are in play) is measured in test_event_loop.py.
"""

from __future__ import annotations

import json
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, TypeVar

import httpx
import pytest

from tests.cli.test_cli import environment, scripted, tether
from tests.serve.helpers import AUTH, TOKEN, free_port, run_input
from tether import ConfigurationError, create_agent
from tether.mcp import MCPServer
from tether.messages import AssistantMessage, ToolCall
from tether.models import FunctionModel, ModelRequest, ScriptedModel
from tether.testing import tool_results

HOSTILE = str(Path(__file__).parents[1] / "mcp_servers" / "hostile.py")
TIMEOUT = 2.0
BOUND = 60.0
"""Far more than any of these waits may take: reaching it means waiting forever."""
T = TypeVar("T")


def within(seconds: float, work: Callable[[], T]) -> T:
    """`work()`'s result, failing the test when it has not returned after `seconds`."""
    outcome: list[Any] = []

    def run() -> None:
        try:
            outcome.append((True, work()))
        except BaseException as exc:  # handed to the test below
            outcome.append((False, exc))

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    thread.join(seconds)
    assert outcome, f"still waiting after {seconds:g} s"
    done, value = outcome[0]
    if not done:
        raise value
    return value  # type: ignore[no-any-return]


def stdio(mode: str, *more: str, timeout: float = TIMEOUT) -> MCPServer:
    return MCPServer(
        "h",
        command=sys.executable,
        args=[HOSTILE, mode, *more],
        timeout_seconds=timeout,
        start_timeout_seconds=timeout,
    )


class HostileHTTP:
    """The hostile server over HTTP in a process of its own, on a free port."""

    def __init__(self, mode: str, *more: str) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}/mcp"
        self.process: subprocess.Popen[bytes] | None = None
        self.start(mode, *more)

    def start(self, mode: str, *more: str) -> None:
        command = [sys.executable, HOSTILE, "http", str(self.port), mode, *more]
        self.process = subprocess.Popen(command, stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + BOUND
        while time.monotonic() < deadline:
            with socket.socket() as probe:
                if probe.connect_ex(("127.0.0.1", self.port)) == 0:
                    return
            time.sleep(0.05)
        raise AssertionError("the hostile server did not start")

    def kill(self) -> None:
        if self.process is not None:
            self.process.kill()
            self.process.wait()

    def server(self, timeout: float = TIMEOUT) -> MCPServer:
        return MCPServer("h", url=self.url, timeout_seconds=timeout, start_timeout_seconds=timeout)


@pytest.fixture
def hostile_http() -> Iterator[Callable[..., HostileHTTP]]:
    started: list[HostileHTTP] = []

    def start(mode: str, *more: str) -> HostileHTTP:
        started.append(HostileHTTP(mode, *more))
        return started[-1]

    yield start
    for server in started:
        server.kill()


NEVER_STARTED = {
    "silent": "no answer to initialize within 2 s",
    "partial": "no answer to initialize within 2 s",
    "trickle": "no answer to initialize within 2 s",
    "flood": "no answer to initialize within 2 s",
    "no-list": "no answer within 2 s",
}
"""What a server in each mode leaves an agent's making with (its tools are listed then)."""


@pytest.mark.parametrize("mode", [*NEVER_STARTED, "huge"])
def test_a_stdio_server_that_never_lists_its_tools_fails_create_agent(mode: str) -> None:
    with pytest.raises(ConfigurationError) as caught:
        within(BOUND, lambda: create_agent(ScriptedModel(["x"]), mcp_servers=[stdio(mode)]))
    said = str(caught.value)
    assert said.startswith(f"MCP server 'h' ({sys.executable}) could not list its tools: ")
    too_long = "LineTooLong: the server sent a line over 16,777,216 bytes"  # as it arrived
    assert said.endswith(NEVER_STARTED.get(mode, too_long))


@pytest.mark.parametrize("mode", [*NEVER_STARTED, "huge", "gzip"])
def test_an_http_server_that_never_lists_its_tools_fails_create_agent(
    mode: str, hostile_http: Callable[..., HostileHTTP]
) -> None:
    server = hostile_http(mode).server()
    with pytest.raises(ConfigurationError) as caught:
        within(BOUND, lambda: create_agent(ScriptedModel(["x"]), mcp_servers=[server]))
    said = str(caught.value)
    assert said.startswith(f"MCP server 'h' ({server.url}) could not list its tools: ")
    expected = {
        "huge": "the reply is over 16,777,216 bytes",  # refused as it arrived, not parsed
        "gzip": "ReplyRefused: the server sent a 'gzip' reply; none was asked for",
    }
    assert said.endswith(expected.get(mode) or NEVER_STARTED[mode])


@pytest.mark.parametrize("transport", ["stdio", "http"])
def test_a_call_the_server_never_answers_is_a_tool_error_after_its_timeout(
    transport: str, hostile_http: Callable[..., HostileHTTP]
) -> None:
    server = stdio("no-call") if transport == "stdio" else hostile_http("no-call").server()
    model = ScriptedModel([[ToolCall("h_wait", {}, id="w")], "went on"])
    agent = create_agent(model, mcp_servers=[server])
    result = within(BOUND, lambda: agent.run("Wait."))
    (answer,) = tool_results(result)
    assert answer.is_error
    assert answer.text == "MCP server 'h' failed on wait: TimeoutError: no answer within 2 s"
    assert result.output == "went on"


@pytest.mark.parametrize("transport", ["stdio", "http"])
def test_a_reply_of_countless_parts_is_cut_before_it_is_checked(
    transport: str, hostile_http: Callable[..., HostileHTTP]
) -> None:
    """Each part is validated where the session runs: 300,000 of them held the event
    loop for seconds. A long reply is read as plain JSON off the loop and cut first."""
    from tether._mcp_stdio import MAX_PARTS

    server = stdio("many-parts") if transport == "stdio" else hostile_http("many-parts").server()
    model = ScriptedModel([[ToolCall("h_wait", {}, id="w")], "went on"])
    result = within(BOUND, lambda: create_agent(model, mcp_servers=[server]).run("Wait."))
    (answer,) = tool_results(result)
    assert not answer.is_error
    assert len(answer.content) == MAX_PARTS
    assert answer.content[-1].text == f"[{300_000 - MAX_PARTS + 1:,} more content parts left out]"


def test_calls_queued_on_a_reconnect_that_never_answers_try_it_once(tmp_path: Path) -> None:
    """The server dies; every start after that never answers. Six calls in one turn all
    need it again: one tries (the server's log counts the starts), the others take that
    attempt's outcome instead of waiting a timeout each."""
    log = tmp_path / "starts.log"
    server = stdio("no-call", "--log", str(log), "--silent-after", "2")  # listing, first run
    waits = [ToolCall("h_wait", {"n": n}, id=f"w{n}") for n in range(6)]
    model = ScriptedModel([[ToolCall("h_crash", {}, id="c")], waits, "went on"])
    agent = create_agent(model, mcp_servers=[server])
    result = within(BOUND, lambda: agent.run("Go."))
    assert log.read_text().count("start") == 3
    crash, *queued = tool_results(result)
    assert crash.is_error
    for answer in queued:
        assert answer.text == (
            "MCP server 'h' is not available: TimeoutError: no answer to initialize within 2 s"
        )
    assert result.output == "went on"


def test_an_http_server_restarted_mute_fails_the_calls_after_one_try(
    hostile_http: Callable[..., HostileHTTP],
) -> None:
    """The server answers, is killed and started again on its port never to answer:
    the next calls fail within the timeout, reconnecting once."""
    http = hostile_http("no-call")

    async def reply(request: ModelRequest) -> list[ToolCall] | str:
        done = sum(isinstance(m, AssistantMessage) for m in request.messages)
        if done == 1:
            http.kill()
            http.start("trickle")
        turns: list[list[ToolCall] | str] = [
            [ToolCall("h_wait", {"n": 0}, id="first")],
            [ToolCall("h_wait", {"n": n}, id=f"then{n}") for n in range(4)],
            "went on",
        ]
        return turns[done]

    agent = create_agent(FunctionModel(reply), mcp_servers=[http.server()])  # type: ignore[arg-type]
    result = within(BOUND, lambda: agent.run("Go."))
    first, *then = tool_results(result)
    assert first.text == "MCP server 'h' failed on wait: TimeoutError: no answer within 2 s"
    assert all(answer.is_error and "MCP server 'h'" in answer.text for answer in then)
    assert result.output == "went on"


def mute_project(tmp_path: Path, mode: str, timeout: float = TIMEOUT) -> Path:
    project = tmp_path / "project"
    project.mkdir()
    (project / "tether.toml").write_text(
        f"""
[[mcp_servers]]
name = "h"
command = {json.dumps(sys.executable)}
args = [{json.dumps(HOSTILE)}, "{mode}"]
timeout_seconds = {timeout}
start_timeout_seconds = {timeout}
"""
    )
    return project


def test_tether_run_ends_with_a_clear_error_when_a_server_never_answers(tmp_path: Path) -> None:
    project = mute_project(tmp_path, "silent")
    model = scripted(project, "script.json", ["never asked"])
    done = within(
        BOUND, lambda: tether(project, "run", "--trust", "--no-sandbox", "--model", model, "go")
    )
    assert done.returncode == 2, done.stdout + done.stderr
    assert (
        f"MCP server 'h' ({sys.executable}) could not list its tools: TimeoutError: no answer "
        "to initialize within 2 s"
    ) in done.stderr
    assert "Traceback" not in done.stderr


def test_tether_serve_fails_clearly_when_a_server_never_answers(tmp_path: Path) -> None:
    project = mute_project(tmp_path, "silent")
    model = scripted(project, "script.json", ["never asked"])
    args = ["serve", "--port", str(free_port()), "--trust", "--no-sandbox", "--model", model]
    done = within(BOUND, lambda: tether(project, *args))
    assert done.returncode == 2, done.stdout + done.stderr
    assert "could not list its tools: TimeoutError: no answer to initialize within 2 s" in (
        done.stderr
    )
    assert "tether is serving" not in done.stdout


def test_tether_serve_answers_while_a_call_waits_on_a_server_that_never_answers_it(
    tmp_path: Path,
) -> None:
    project = mute_project(tmp_path, "no-call", timeout=10)
    model = scripted(project, "script.json", [[{"tool": "h_wait", "args": {}}], "went on"])
    port = free_port()
    command = [sys.executable, "-m", "tether.cli", "serve", "--port", str(port), "--trust"]
    process = subprocess.Popen(
        [*command, "--no-sandbox", "--model", model],
        cwd=project,
        env=environment(TETHER_SERVE_TOKEN=TOKEN),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert process.stdout is not None
        assert "tether is serving" in within(BOUND, process.stdout.readline)
        url = f"http://127.0.0.1:{port}"
        with (
            httpx.Client(base_url=url, headers=AUTH, timeout=BOUND) as c,
            c.stream("POST", "/api/agents/project", json=run_input("t", "Wait.")) as stream,
        ):
            lines = stream.iter_lines()
            seen = ""
            while "TOOL_CALL_START" not in seen:
                seen = next(lines)
            listed = c.get("/api/agents")  # the call waits: the server answers meanwhile
            assert listed.status_code == 200
            rest = "\n".join(lines)
        assert "TOOL_CALL_RESULT" in rest  # the call was still waiting when the list came
        assert "no answer within 10 s" in rest
        assert "went on" in rest
    finally:
        process.send_signal(signal.SIGINT)
        process.communicate(timeout=BOUND)
