"""A question an MCP server asks during a call, over the AG-UI endpoint: the interrupt
carries the question (message and form) for a client to show; an answer that does not fit
is refused with 400 and the reason; AG-UI's "cancelled" dismisses the question."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx

from tests.serve.helpers import AUTH, TOKEN, approve, events, run_input, served
from tests.test_mcp_asks import Script, Served, asking, book
from tests.test_mcp_asks import served as asking_served
from tether import create_agent
from tether.models import FunctionModel
from tether.serve import app

__all__ = ["asking_served"]  # the asking server's fixture, from tests/test_mcp_asks.py


def finished(body: str) -> dict[str, Any]:
    found = events(body)
    assert found[-1]["type"] == "RUN_FINISHED"
    return found[-1]


def test_a_question_over_ag_ui_is_answered_refused_or_dismissed(
    tmp_path: Path, asking_served: Served
) -> None:
    agent = create_agent(
        FunctionModel(Script(book("AG-UI"))),
        mcp_servers=[asking(asking_served)],
        checkpointer=f"sqlite:///{tmp_path}/runs.db",
    )
    with (
        served(app({"asker": agent}, token=TOKEN)) as url,
        httpx.Client(base_url=url, headers=AUTH, timeout=30) as c,
    ):
        stopped = finished(c.post("/api/agents/asker", json=run_input("t", "Book.")).text)
        (interrupt,) = stopped["outcome"]["interrupts"]
        question = interrupt["metadata"]["question"]
        assert question["message"] == "Book a table on AG-UI?"
        assert question["asker"] == "MCP server 'asking'"
        assert question["schema"]["required"] == ["name"]
        assert interrupt["metadata"]["allowed"] == ["answer", "reject", "respond"]

        wrong = {"kind": "answer", "content": {"name": "Ann", "seats": 99}}
        refused = c.post(
            "/api/agents/asker", json=run_input("t", resume=approve(interrupt["id"], wrong))
        )
        assert refused.status_code == 400
        assert "field 'seats' must be at most 8" in refused.text

        cancel = [{"interruptId": interrupt["id"], "status": "cancelled"}]
        done = c.post("/api/agents/asker", json=run_input("t", resume=cancel))
        assert finished(done.text)["outcome"].get("interrupts") in (None, [])
    assert asking_served.runs("answer AG-UI cancel") == 1
