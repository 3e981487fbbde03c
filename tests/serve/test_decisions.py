"""Decisions over HTTP, one per click as the page sends them, against a real server: with
several calls waiting, each click decides its call and the others keep waiting; the
last one runs the turn; a click sent twice, or two clients at once, decide nothing twice."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.serve.helpers import AUTH, TOKEN, approve, events, run_input, served
from tether import create_agent, tool
from tether.agent import Agent
from tether.messages import ToolCall, ToolResultMessage
from tether.models import FunctionModel, ModelRequest
from tether.models.scripted import Turn
from tether.serve import app


def two_deploys(tmp_path: Path, log: list[str]) -> Agent[str]:
    """Asks to deploy to staging and to prod at once (both gated), then answers."""

    @tool
    def deploy(target: str) -> str:
        """Deploy."""
        log.append(target)
        return f"deployed {target}"

    def turn(request: ModelRequest) -> Turn:
        if any(isinstance(m, ToolResultMessage) for m in request.messages):
            return "Shipped."
        return [
            ToolCall("deploy", {"target": "staging"}, id="d1"),
            ToolCall("deploy", {"target": "prod"}, id="d2"),
        ]

    return create_agent(
        FunctionModel(turn),
        tools=[deploy],
        checkpointer=f"sqlite:///{tmp_path}/runs.db",
        interrupt_on={"deploy": True},
    )


@pytest.fixture
def server(tmp_path: Path) -> Iterator[tuple[str, list[str]]]:
    log: list[str] = []
    with served(app({"ops": two_deploys(tmp_path, log)}, token=TOKEN)) as url:
        yield url, log


def interrupts(found: list[dict[str, Any]]) -> list[str]:
    """The interrupts a run's events ended at, by id."""
    assert found[-1]["type"] == "RUN_FINISHED"
    return [i["id"] for i in found[-1]["outcome"].get("interrupts") or []]


def start(c: httpx.Client) -> list[str]:
    waiting = interrupts(events(c.post("/api/agents/ops", json=run_input("t", "Ship.")).text))
    assert len(waiting) == 2
    return waiting


def test_each_click_decides_its_call_and_the_last_runs_the_turn(
    server: tuple[str, list[str]],
) -> None:
    url, log = server
    with httpx.Client(base_url=url, headers=AUTH, timeout=30) as c:
        staging, prod = start(c)

        first = c.post("/api/agents/ops", json=run_input("t", resume=approve(staging)))
        assert first.status_code == 200
        assert interrupts(events(first.text)) == [prod]  # the other still waits
        detail = c.get("/api/agents/ops/threads/t").json()
        assert detail["status"] == "waiting for approval"
        assert [i["id"] for i in detail["interrupts"]] == [prod]
        [card] = detail["decided"]  # shown in its place, decided: it runs with the turn
        assert (card["id"], card["decision"], card["metadata"]["position"]) == (
            staging,
            "approve",
            0,
        )
        assert detail["interrupts"][0]["metadata"]["position"] == 1
        assert log == []  # the turn's calls run once every one is decided

        again = c.post("/api/agents/ops", json=run_input("t", resume=approve(staging)))
        assert again.status_code == 409
        assert "answered before" in again.json()["error"]
        twice = approve(prod) + approve(prod, {"kind": "reject", "message": "no"})
        assert c.post("/api/agents/ops", json=run_input("t", resume=twice)).status_code == 400
        assert c.post("/api/agents/ops", json=run_input("t", resume=[])).status_code == 400

        last = c.post(
            "/api/agents/ops",
            json=run_input("t", resume=approve(prod, {"kind": "reject", "message": "not now"})),
        )
        found = events(last.text)
        assert found[-1]["result"] == "Shipped."
        decided = {
            e["toolCallId"]: e["metadata"].get("decided")
            for e in found
            if e["type"] == "TOOL_CALL_RESULT"
        }
        assert decided == {staging.rpartition(":")[2]: None, prod.rpartition(":")[2]: "rejected"}
        late = c.post("/api/agents/ops", json=run_input("t", resume=approve(prod)))
        assert late.status_code == 409
        assert c.get("/api/agents/ops/threads/t").json()["status"] == "completed"
    assert log == ["staging"]


async def test_two_clients_deciding_different_calls_at_once_are_both_taken(
    server: tuple[str, list[str]],
) -> None:
    url, log = server
    async with httpx.AsyncClient(base_url=url, headers=AUTH, timeout=30) as c:
        staging, prod = start_sync(url)
        clicks = await asyncio.gather(
            c.post("/api/agents/ops", json=run_input("t", resume=approve(staging))),
            c.post("/api/agents/ops", json=run_input("t", resume=approve(prod))),
        )
        assert [r.status_code for r in clicks] == [200, 200]
        ends = sorted(len(interrupts(events(r.text))) for r in clicks)
        assert ends == [0, 1]  # one left the other waiting; the other ran the turn
        detail = (await c.get("/api/agents/ops/threads/t")).json()
    assert detail["status"] == "completed"
    assert sorted(log) == ["prod", "staging"]


async def test_many_clicks_on_one_of_two_calls_decide_it_once(
    server: tuple[str, list[str]],
) -> None:
    url, log = server
    async with httpx.AsyncClient(base_url=url, headers=AUTH, timeout=30) as c:
        staging, prod = start_sync(url)
        clicks = await asyncio.gather(
            *(
                c.post("/api/agents/ops", json=run_input("t", resume=approve(staging)))
                for _ in range(4)
            )
        )
        assert sorted(r.status_code for r in clicks) == [200, 409, 409, 409]
        detail = (await c.get("/api/agents/ops/threads/t")).json()
        assert [i["id"] for i in detail["interrupts"]] == [prod]
        done = await c.post("/api/agents/ops", json=run_input("t", resume=approve(prod)))
    assert events(done.text)[-1]["result"] == "Shipped."
    assert sorted(log) == ["prod", "staging"]


def start_sync(url: str) -> list[str]:
    with httpx.Client(base_url=url, headers=AUTH, timeout=30) as c:
        return start(c)
