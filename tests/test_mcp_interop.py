"""tether agents against the reference MCP servers, as published: `server-everything`,
`-filesystem` and `-memory` from npm (tests/node, run with Node 22), `mcp-server-git`
and `mcp-server-fetch` from PyPI (dev dependencies; `mcp-server-time` is in
test_mcp.py). The model is a script; everything else is real: the servers' processes,
their wire, and a restart of one of them.

What these servers ask of the client that belongs to sampling and elicitation
(server-everything's `trigger-sampling-request`, `trigger-sampling-request-async`,
`trigger-elicitation-request`, `trigger-elicitation-request-async`,
`trigger-url-elicitation`, `simulate-research-query`) is tested with that support.
"""

from __future__ import annotations

import asyncio
import http.server
import json
import os
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator, Sequence
from pathlib import Path

import pytest

from tether import ConfigurationError, create_agent
from tether.backends.filesystem import FilesystemBackend
from tether.events import Event, ToolCallFinished, ToolProgress
from tether.mcp import MCPServer
from tether.messages import AssistantMessage, BinaryPart, TextPart, ToolCall, UserMessage
from tether.models import FunctionModel, ModelRequest, ScriptedModel
from tether.testing import tool_results

from .conftest import by_server_id
from .interop import node, package

FEATURES = str(Path(__file__).parent / "mcp_servers" / "features.py")


def on_node(name: str, *args: str, **kwargs: object) -> MCPServer:
    """An npm reference server over stdio, as `MCPServer` `name`."""
    script = package(f"@modelcontextprotocol/server-{name}") / "dist" / "index.js"
    return MCPServer(name, command=str(node()), args=[str(script), *args], **kwargs)  # type: ignore[arg-type]


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


class Listening:
    """A server process on a loopback port, started again on the same port at will."""

    def __init__(self, command: Sequence[str], env: dict[str, str] | None = None) -> None:
        self.command = list(command)
        self.env = env
        self.port = free_port()
        self.process: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        env = {**os.environ, "PORT": str(self.port), **(self.env or {})}
        command = [c.replace("{port}", str(self.port)) for c in self.command]
        self.process = subprocess.Popen(
            command, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
        )
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            with socket.socket() as client:
                if client.connect_ex(("127.0.0.1", self.port)) == 0:
                    return
            time.sleep(0.05)
        raise AssertionError(f"{command} did not start listening")

    def kill(self) -> None:
        if self.process is not None:
            self.process.kill()
            self.process.wait()


@pytest.fixture
def everything_http() -> Iterator[Listening]:
    script = package("@modelcontextprotocol/server-everything") / "dist" / "index.js"
    server = Listening([str(node()), str(script), "streamableHttp"])
    server.start()
    yield server
    server.kill()


def restarting(server: Listening, turns: list[list[ToolCall] | str], at: int) -> FunctionModel:
    """A model playing `turns` that kills the server and starts it again on the same
    port before answering turn `at`."""

    def reply(request: ModelRequest) -> list[ToolCall] | str:
        done = sum(isinstance(m, AssistantMessage) for m in request.messages)
        if done == at:
            server.kill()
            server.start()
        return turns[done]

    return FunctionModel(reply)


def test_server_everything_restarted_over_http_answers_400_and_is_reconnected(
    everything_http: Listening,
) -> None:
    """Restarted, the server answers the old session with HTTP 400 ("No valid session
    ID provided", not the 404 the specification asks for). The call never ran: it is
    sent again on a new session, and the calls after it use that one."""
    turns: list[list[ToolCall] | str] = [
        [ToolCall("everything_echo", {"message": "one"}, id="one")],
        [ToolCall("everything_echo", {"message": "two"}, id="two")],
        [ToolCall("everything_echo", {"message": "three"}, id="three")],
        "done",
    ]
    url = f"http://127.0.0.1:{everything_http.port}/mcp"
    server = MCPServer("everything", url=url, timeout_seconds=20)
    result = create_agent(restarting(everything_http, turns, 1), mcp_servers=[server]).run("go")
    answers = by_server_id(result.messages)
    assert [answers[n].text for n in ("one", "two", "three")] == [
        "Echo: one",
        "Echo: two",
        "Echo: three",
    ]
    assert not any(a.is_error for a in answers.values())


def test_the_sdk_server_restarted_over_http_answers_404_and_is_reconnected() -> None:
    """The official SDK's server (MCPServer, once FastMCP), restarted, answers the old
    session with 404 "Session not found", as the specification asks: the call never
    ran, and is sent again on a new session."""
    server = Listening([sys.executable, FEATURES, "http", "{port}"])
    server.start()
    try:
        turns: list[list[ToolCall] | str] = [
            [ToolCall("f_steps", {"count": 1}, id="before")],
            [ToolCall("f_steps", {"count": 2}, id="after")],
            "done",
        ]
        remote = MCPServer("f", url=f"http://127.0.0.1:{server.port}/mcp", timeout_seconds=20)
        result = create_agent(restarting(server, turns, 1), mcp_servers=[remote]).run("go")
    finally:
        server.kill()
    answers = by_server_id(result.messages)
    assert answers["before"].text == answers["after"].text == "done"


def stream(agent: object, prompt: str) -> list[Event]:
    async def collect() -> list[Event]:
        return [e async for e in agent.stream(prompt)]  # type: ignore[attr-defined]

    return asyncio.run(collect())


def test_server_everything_tools_over_stdio(tmp_path: Path) -> None:
    """Text, an image, embedded text and text/plain blob resources, resource links,
    structured content, annotations, the agent's roots, progress of a long-running
    operation, and logging switched on (its messages are not the model's)."""
    calls = [
        ToolCall("everything_echo", {"message": "hi"}, id="echo"),
        ToolCall("everything_get-sum", {"a": 2, "b": 40}, id="sum"),
        ToolCall("everything_get-tiny-image", {}, id="image"),
        ToolCall(
            "everything_get-resource-reference",
            {"resourceType": "Blob", "resourceId": 3},
            id="blob",
        ),
        ToolCall("everything_get-resource-reference", {"resourceId": 2}, id="text"),
        ToolCall("everything_get-resource-links", {"count": 2}, id="links"),
        ToolCall("everything_get-structured-content", {"location": "Chicago"}, id="structured"),
        ToolCall("everything_get-annotated-message", {"messageType": "error"}, id="annotated"),
        ToolCall("everything_get-roots-list", {}, id="roots"),
        ToolCall("everything_toggle-simulated-logging", {}, id="logging"),
        ToolCall(
            "everything_trigger-long-running-operation", {"duration": 1, "steps": 4}, id="long"
        ),
    ]
    model = ScriptedModel([calls, "done"])
    backend = FilesystemBackend(tmp_path)
    agent = create_agent(model, mcp_servers=[on_node("everything", "stdio")], backend=backend)
    events = stream(agent, "Try everything.")
    finished = [e for e in events if isinstance(e, ToolCallFinished)]
    answers = by_server_id(_messages(events))  # type: ignore[arg-type]
    assert answers["echo"].text == "Echo: hi"
    assert "42" in answers["sum"].text
    (image,) = [p for p in answers["image"].content if isinstance(p, BinaryPart)]
    assert image.media_type == "image/png"
    assert image.data.startswith(b"\x89PNG")
    # the blob is text/plain: the model reads its words, not "N bytes, not shown"
    assert "[resource demo://resource/dynamic/blob/3]\nResource 3: This is a base64 blob" in (
        answers["blob"].text
    )
    assert "Resource 2: This is a plaintext resource" in answers["text"].text
    assert answers["links"].text.count("[resource link") == 2
    assert "temperature" in json.loads(answers["structured"].text)
    assert not answers["annotated"].is_error
    assert f"URI: {tmp_path.resolve().as_uri()}" in answers["roots"].text
    assert answers["logging"].text.startswith("Started simulated")
    assert "Long running operation completed" in answers["long"].text
    long_id = next(e.call.id for e in finished if e.call.provider_id == "long")
    progress = [e for e in events if isinstance(e, ToolProgress)]
    assert progress
    assert all(e.call_id == long_id and e.total == 4 for e in progress)
    assert [e.progress for e in progress] == sorted(e.progress for e in progress)
    assert progress[-1].progress == 4  # the last word always arrives
    assert not any(a.is_error for a in answers.values())


def _messages(events: list[Event]) -> list[object]:
    from tether.events import RunFinished

    (finished,) = [e for e in events if isinstance(e, RunFinished)]
    return list(finished.result.messages)


async def test_server_everything_resources_and_prompts_for_the_users_code() -> None:
    server = on_node("everything", "stdio")
    listed = {str(r.uri): r for r in await server.list_resources()}
    assert listed["demo://resource/static/document/features.md"].mime_type == "text/markdown"
    # a text/plain blob is read as its text
    (blob,) = await server.read_resource("demo://resource/dynamic/blob/7")
    assert isinstance(blob, TextPart)
    assert blob.text.startswith("Resource 7: This is a base64 blob created at ")
    assert await server.get_prompt("args-prompt", {"city": "Lyon"}) == [
        UserMessage((TextPart("What's weather in Lyon?"),))
    ]
    intro, embedded = await server.get_prompt(
        "resource-prompt", {"resourceType": "Blob", "resourceId": "5"}
    )
    assert "Blob resource with id: 5" in intro.text
    assert embedded.text.startswith("[resource demo://resource/dynamic/blob/5]\nResource 5: ")


def test_server_filesystem_works_in_the_roots_tether_gives_it(tmp_path: Path) -> None:
    """Started without directories, the filesystem server asks the client for its roots
    and works in them: the agent's FilesystemBackend root, no other. (It asks once the
    session is open and does not wait for the answer, so the model asks again until the
    server has it, as a model told "no directories yet" would.)"""
    root = tmp_path / "work"
    root.mkdir()
    (root / "notes.md").write_text("# notes\nbuy milk\n")
    outside = tmp_path / "secret.txt"
    outside.write_text("do not read")
    then = [
        ToolCall("filesystem_read_text_file", {"path": str(root / "notes.md")}, id="read"),
        ToolCall("filesystem_write_file", {"path": str(root / "new.txt"), "content": "hi"}),
        ToolCall("filesystem_read_text_file", {"path": str(outside)}, id="outside"),
    ]

    async def reply(request: ModelRequest) -> list[ToolCall] | str:
        results = tool_results(request.messages)  # type: ignore[arg-type]
        if not results or results[-1].text == "Allowed directories:\n":
            if results:
                await asyncio.sleep(0.1)
            assert len(results) < 100, "the server never took the roots"
            return [
                ToolCall("filesystem_list_allowed_directories", {}, id=f"allowed{len(results)}")
            ]
        if results[-1].name == "filesystem_list_allowed_directories":
            return then
        if results[-1].name == "filesystem_read_text_file":
            return [ToolCall("read_file", {"file_path": "/new.txt"}, id="mine")]
        return "ok"

    server = on_node("filesystem", timeout_seconds=20)
    agent = create_agent(
        FunctionModel(reply), mcp_servers=[server], backend=FilesystemBackend(root)
    )
    result = agent.run("Files.")
    allowed = [r for r in tool_results(result) if r.name.endswith("allowed_directories")][-1]
    answers = by_server_id(result.messages)
    assert allowed.text == f"Allowed directories:\n{root.resolve()}"
    assert answers["read"].text == "# notes\nbuy milk\n"
    assert "hi" in answers["mine"].text  # the agent's own tools see what the server wrote
    assert answers["outside"].is_error
    assert "do not read" not in answers["outside"].text


def test_server_memory_keeps_a_knowledge_graph(tmp_path: Path) -> None:
    memory = on_node("memory", env={"MEMORY_FILE_PATH": str(tmp_path / "memory.jsonl")})
    entity = {"name": "Ada", "entityType": "person", "observations": ["wrote the first program"]}
    relation = {"from": "Ada", "to": "Engine", "relationType": "programmed"}
    engine = {"name": "Engine", "entityType": "machine", "observations": []}
    # one call a turn: the server rewrites its whole file on each change, so two changes
    # at once would lose one (parallel calls are the model's choice, not tether's)
    model = ScriptedModel(
        [
            [ToolCall("memory_create_entities", {"entities": [entity, engine]}, id="create")],
            [ToolCall("memory_create_relations", {"relations": [relation]}, id="relate")],
            [ToolCall("memory_search_nodes", {"query": "program"}, id="search")],
            "ok",
        ]
    )
    answers = by_server_id(create_agent(model, mcp_servers=[memory]).run("Remember.").messages)
    assert not any(a.is_error for a in answers.values())
    assert "Ada" in answers["search"].text

    (graph,) = asyncio.run(memory.read_resource("memory://knowledge-graph"))
    assert isinstance(graph, TextPart)
    data = json.loads(graph.text)
    assert {e["name"] for e in data["entities"]} == {"Ada", "Engine"}
    assert data["relations"] == [relation]


def test_mcp_server_git_reads_and_commits(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    repo.mkdir()
    git = ["git", "-C", str(repo), "-c", "user.name=T", "-c", "user.email=t@example.com"]
    subprocess.run([*git, "init", "-q"], check=True)
    (repo / "a.txt").write_text("one\n")
    subprocess.run([*git, "add", "a.txt"], check=True)
    subprocess.run([*git, "commit", "-q", "-m", "first"], check=True)
    (repo / "a.txt").write_text("one\ntwo\n")
    server = MCPServer(
        "git",
        command=sys.executable,
        args=["-m", "mcp_server_git", "--repository", str(repo)],
        env={
            "GIT_AUTHOR_NAME": "T",
            "GIT_AUTHOR_EMAIL": "t@example.com",
            "GIT_COMMITTER_NAME": "T",
            "GIT_COMMITTER_EMAIL": "t@example.com",
        },
    )
    path = {"repo_path": str(repo)}
    calls = [
        ToolCall("git_git_status", path, id="status"),
        ToolCall("git_git_diff_unstaged", path, id="diff"),
        ToolCall("git_git_log", path, id="log"),
        ToolCall("git_git_status", {"repo_path": str(tmp_path)}, id="outside"),
    ]
    # Calls of one turn run at once: the commit waits a turn for the add it needs.
    add = [ToolCall("git_git_add", {**path, "files": ["a.txt"]}, id="add")]
    commit = [ToolCall("git_git_commit", {**path, "message": "second"}, id="commit")]
    log2 = [ToolCall("git_git_log", path, id="log2")]
    model = ScriptedModel([calls, add, commit, log2, "ok"])
    answers = by_server_id(create_agent(model, mcp_servers=[server]).run("Git.").messages)
    assert "a.txt" in answers["status"].text
    assert "+two" in answers["diff"].text
    assert "first" in answers["log"].text
    assert answers["outside"].is_error  # confined to --repository
    assert not answers["commit"].is_error
    assert "second" in answers["log2"].text


class _Page(http.server.BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        if self.path == "/robots.txt":
            self.send_error(404)
            return
        body = b"<html><body><h1>Loopback</h1><p>Served for the fetch test.</p></body></html>"
        self.send_response(200)
        self.send_header("Content-Type", "text/html")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def page() -> Iterator[str]:
    served = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Page)
    thread = threading.Thread(target=served.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{served.server_address[1]}/page"
    served.shutdown()
    served.server_close()


def test_mcp_server_fetch_on_a_loopback_page(page: str) -> None:
    server = MCPServer(
        "fetch", command=sys.executable, args=["-m", "mcp_server_fetch", "--allow-private-ips"]
    )
    model = ScriptedModel([[ToolCall("fetch_fetch", {"url": page}, id="get")], "ok"])
    (answer,) = tool_results(create_agent(model, mcp_servers=[server]).run("Fetch."))
    assert not answer.is_error
    assert "Loopback" in answer.text
    assert "Served for the fetch test." in answer.text


def test_a_server_wanting_credentials_says_where_they_go() -> None:
    """The SDK's own bearer-token check: without the token, building the agent fails
    saying the server wants credentials and that they go in `headers`; with it, calls
    work."""
    server = Listening([sys.executable, FEATURES, "http", "{port}", "bearer"])
    server.start()
    url = f"http://127.0.0.1:{server.port}/mcp"
    try:
        with pytest.raises(ConfigurationError) as refused:
            create_agent(ScriptedModel(["x"]), mcp_servers=[MCPServer("f", url=url)])
        model = ScriptedModel([[ToolCall("f_steps", {"count": 1}, id="s")], "ok"])
        authorized = MCPServer("f", url=url, headers={"Authorization": "Bearer s3cret"})
        (answer,) = tool_results(create_agent(model, mcp_servers=[authorized]).run("Go."))
    finally:
        server.kill()
    said = str(refused.value)
    assert "HTTP 401 Unauthorized: the server wants credentials" in said
    assert "resource_metadata=" in said
    assert "MCPServer(headers=...)" in said
    assert answer.text == "done"
