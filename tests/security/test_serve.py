"""The server as an attacker meets it: requests without the token, pages of other sites
(by CORS or by pointing a domain at 127.0.0.1), two clicks on one approval (in one
server or two), clicks on several cards of one thread at once, and a waiting call whose
diff would show a file the agent cannot read."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

import httpx
import pytest

from tests.serve.helpers import AUTH, TOKEN, approve, client, events, run_input, served
from tether import create_agent, tool
from tether.agent import Agent
from tether.backends.filesystem import FilesystemBackend
from tether.backends.permissions import Rule
from tether.messages import AssistantMessage, ToolCall
from tether.models import FunctionModel, ModelRequest, ScriptedModel
from tether.models.scripted import Turn
from tether.serve import app

ROUTES = [
    ("GET", "/api/agents"),
    ("POST", "/api/agents/a"),
    ("GET", "/api/agents/a/threads"),
    ("GET", "/api/agents/a/threads/t"),
    ("DELETE", "/api/agents/a/threads/t"),
    ("GET", "/api/agents/a/threads/t/events"),
    ("POST", "/api/agents/a/threads/t/stop"),
    ("GET", "/api"),  # and any path but the page's own: nothing is found without it
    ("GET", "/nowhere"),
]


def waiting_on(body: str) -> str:
    """The id of the one interrupt a run's AG-UI stream ended at."""
    [interrupt] = events(body)[-1]["outcome"]["interrupts"]
    interrupt_id: str = interrupt["id"]
    return interrupt_id


def counting(tmp_path: Path, log: list[str]) -> Agent[str]:
    @tool
    def deploy(target: str) -> str:
        """Deploy."""
        log.append(target)
        return "deployed"

    def turn(request: ModelRequest) -> Turn:  # by the conversation: two servers agree
        done = sum(isinstance(m, AssistantMessage) for m in request.messages)
        return [[ToolCall("deploy", {"target": "prod"}, id="d1")], "done"][done]

    return create_agent(
        FunctionModel(turn),
        tools=[deploy],
        checkpointer=f"sqlite:///{tmp_path}/runs.db",
        interrupt_on={"deploy": True},
    )


@pytest.mark.parametrize(("method", "path"), ROUTES)
@pytest.mark.parametrize("given", [None, "Bearer wrong-token-0123456789", f"Basic {TOKEN}", TOKEN])
async def test_every_api_route_needs_the_token(
    tmp_path: Path, method: str, path: str, given: str | None
) -> None:
    log: list[str] = []
    application = app({"a": counting(tmp_path, log)}, token=TOKEN)
    async with client(application) as c:
        headers = {} if given is None else {"Authorization": given}
        c.headers.pop("Authorization")
        response = await c.request(method, path, headers=headers, json=run_input("t", "Go."))
    assert response.status_code == 401
    assert response.headers["www-authenticate"] == "Bearer"
    assert log == []


async def test_a_domain_pointed_at_the_loopback_address_is_not_answered(tmp_path: Path) -> None:
    """DNS rebinding: a hostile page's own domain, resolving to 127.0.0.1, would make the
    browser send it this server's answers; the Host header gives it away."""
    application = app({"a": counting(tmp_path, [])}, token=TOKEN)
    async with client(application) as c:
        assert (await c.get("/", headers={"Host": "evil.example"})).status_code == 400
        assert (
            await c.get("/api/agents", headers={"Host": "evil.example:8321"})
        ).status_code == 400
        assert (await c.get("/api/agents", headers={"Host": "localhost:8321"})).status_code == 200


async def test_other_origins_get_no_cors_answer_unless_configured(tmp_path: Path) -> None:
    agent = counting(tmp_path, [])
    preflight = {
        "Origin": "https://evil.example",
        "Access-Control-Request-Method": "POST",
        "Access-Control-Request-Headers": "authorization",
    }
    async with client(app({"a": agent}, token=TOKEN)) as c:
        answer = await c.options("/api/agents/a", headers=preflight)
        plain = await c.get("/api/agents", headers={"Origin": "https://evil.example"})
    assert "access-control-allow-origin" not in answer.headers
    assert "access-control-allow-origin" not in plain.headers

    allowed = app({"a": agent}, token=TOKEN, cors_origins=["https://ui.example"])
    async with client(allowed) as c:
        ours = await c.options(
            "/api/agents/a", headers={**preflight, "Origin": "https://ui.example"}
        )
        theirs = await c.options("/api/agents/a", headers=preflight)
    assert ours.headers["access-control-allow-origin"] == "https://ui.example"
    assert "access-control-allow-origin" not in theirs.headers


async def test_two_clicks_on_one_approval_run_the_call_once(tmp_path: Path) -> None:
    log: list[str] = []
    application = app({"a": counting(tmp_path, log)}, token=TOKEN)
    async with client(application) as c:
        waiting = waiting_on((await c.post("/api/agents/a", json=run_input("t", "Go."))).text)
        clicks = await asyncio.gather(
            *(
                c.post("/api/agents/a", json=run_input("t", resume=approve(waiting)))
                for _ in range(5)
            )
        )
    codes = sorted(r.status_code for r in clicks)
    assert codes == [200, 409, 409, 409, 409]
    assert log == ["prod"]


async def test_two_servers_on_one_database_run_an_approved_call_once(tmp_path: Path) -> None:
    """Two processes serving the same threads (here two apps, each with its own agent and
    connection): the thread's lease and the once-only decisions hold across them."""
    log: list[str] = []
    first = app({"a": counting(tmp_path, log)}, token=TOKEN)
    second = app({"a": counting(tmp_path, log)}, token=TOKEN)
    async with client(first) as one, client(second) as two:
        waiting = waiting_on((await one.post("/api/agents/a", json=run_input("t", "Go."))).text)
        clicks = await asyncio.gather(
            one.post("/api/agents/a", json=run_input("t", resume=approve(waiting))),
            two.post("/api/agents/a", json=run_input("t", resume=approve(waiting))),
        )
        detail = (await two.get("/api/agents/a/threads/t")).json()
    assert sorted(r.status_code for r in clicks) == [200, 409]
    assert log == ["prod"]
    assert detail["status"] == "completed"


def file_agent(tmp_path: Path, call: ToolCall) -> Agent[str]:
    root = tmp_path / "work"
    (root / "private").mkdir(parents=True)
    (root / "private" / "key.txt").write_text("PRIVATE-KEY-MATERIAL\n")
    (tmp_path / "outside.txt").write_text("OUTSIDE-SECRET\n")
    os.symlink(tmp_path / "outside.txt", root / "link.md")
    return create_agent(
        ScriptedModel([[call], "done"]),
        backend=FilesystemBackend(root),
        permissions=[Rule(["read"], ["/private/**"], "deny")],
        checkpointer=f"sqlite:///{tmp_path}/runs.db",
        interrupt_on={"edit_file": True},
    )


@pytest.mark.parametrize(
    ("path", "secret"),
    [("/link.md", "OUTSIDE-SECRET"), ("/private/key.txt", "PRIVATE-KEY-MATERIAL")],
)
async def test_an_approval_card_shows_no_file_the_agent_cannot_read(
    tmp_path: Path, path: str, secret: str
) -> None:
    """The card's diff reads the file as the agent would: through its backend (no link
    followed) and behind its rules, so a model cannot show a person's page what it could
    not read itself."""
    args = {"file_path": path, "old_string": "x", "new_string": "y"}
    agent = file_agent(tmp_path, ToolCall("edit_file", args, id="e1"))
    application = app({"a": agent}, token=TOKEN)
    async with client(application) as c:
        await c.post("/api/agents/a", json=run_input("t", "Edit."))
        detail = await c.get("/api/agents/a/threads/t")
    [card] = detail.json()["interrupts"]
    assert card["metadata"]["tool"] == "edit_file"
    assert secret not in detail.text


async def test_a_readable_file_shows_its_whole_change(tmp_path: Path) -> None:
    """The guard above must not blind the card: a file the agent can read is diffed."""
    args = {"file_path": "/notes.md", "old_string": "two", "new_string": "TWO"}
    agent = file_agent(tmp_path, ToolCall("edit_file", args, id="e1"))
    (tmp_path / "work" / "notes.md").write_text("one\ntwo\nthree\n")
    application = app({"a": agent}, token=TOKEN)
    async with client(application) as c:
        await c.post("/api/agents/a", json=run_input("t", "Edit."))
        [card] = (await c.get("/api/agents/a/threads/t")).json()["interrupts"]
        done = await c.post("/api/agents/a", json=run_input("t", resume=approve(card["id"])))
    assert card["metadata"]["diff"].splitlines()[2:] == [
        "@@ -1,3 +1,3 @@",
        " one",
        "-two",
        "+TWO",
        " three",
    ]
    assert events(done.text)[-1]["result"] == "done"
    assert (tmp_path / "work" / "notes.md").read_text() == "one\nTWO\nthree\n"


def test_a_websocket_is_closed_before_anything_reads_it(tmp_path: Path) -> None:
    from starlette.testclient import TestClient
    from starlette.websockets import WebSocketDisconnect

    application = app({"a": counting(tmp_path, [])}, token=TOKEN, hosts=None)
    headers = {"Authorization": f"Bearer {TOKEN}"}
    with (
        TestClient(application) as c,
        pytest.raises(WebSocketDisconnect) as closed,
        c.websocket_connect("/api/agents", headers=headers),
    ):
        pass
    assert closed.value.code == 1008


async def test_an_allowed_origin_reads_a_refusal_but_gets_nothing_without_the_token(
    tmp_path: Path,
) -> None:
    application = app(
        {"a": counting(tmp_path, [])}, token=TOKEN, cors_origins=["https://ui.example"]
    )
    async with client(application) as c:
        c.headers.pop("Authorization")
        refused = await c.get("/api/agents", headers={"Origin": "https://ui.example"})
    assert refused.status_code == 401
    assert refused.headers["access-control-allow-origin"] == "https://ui.example"


def two_calls(tmp_path: Path, log: list[str]) -> Agent[str]:
    @tool
    def deploy(target: str) -> str:
        """Deploy."""
        log.append(target)
        return "deployed"

    def turn(request: ModelRequest) -> Turn:
        done = sum(isinstance(m, AssistantMessage) for m in request.messages)
        calls = [ToolCall("deploy", {"target": t}, id=t) for t in ("staging", "prod")]
        return [calls, "done"][done]

    return create_agent(
        FunctionModel(turn),
        tools=[deploy],
        checkpointer=f"sqlite:///{tmp_path}/runs.db",
        interrupt_on={"deploy": True},
    )


async def test_clicks_on_two_cards_in_two_servers_at_once_run_each_call_once(
    tmp_path: Path,
) -> None:
    """Two real servers on one database, each clicked on a different card of the same
    thread at the same moment, then both clicked again on both: each decision is taken
    once, the turn runs once, and every repeat is refused."""
    log: list[str] = []
    with (
        served(app({"a": two_calls(tmp_path, log)}, token=TOKEN)) as one_url,
        served(app({"a": two_calls(tmp_path, log)}, token=TOKEN)) as two_url,
    ):
        async with (
            httpx.AsyncClient(base_url=one_url, headers=AUTH, timeout=60) as one,
            httpx.AsyncClient(base_url=two_url, headers=AUTH, timeout=60) as two,
        ):
            started = await one.post("/api/agents/a", json=run_input("t", "Go."))
            staging, prod = (i["id"] for i in events(started.text)[-1]["outcome"]["interrupts"])
            clicks = await asyncio.gather(
                one.post("/api/agents/a", json=run_input("t", resume=approve(staging))),
                two.post("/api/agents/a", json=run_input("t", resume=approve(prod))),
            )
            again = await asyncio.gather(
                *(
                    client.post("/api/agents/a", json=run_input("t", resume=approve(card)))
                    for client in (one, two)
                    for card in (staging, prod)
                )
            )
            detail = (await two.get("/api/agents/a/threads/t")).json()
    assert [r.status_code for r in clicks] == [200, 200]
    assert [r.status_code for r in again] == [409, 409, 409, 409]
    assert sorted(log) == ["prod", "staging"]
    assert detail["status"] == "completed"
