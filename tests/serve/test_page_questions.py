"""A question an MCP server asks during a call, on the served page in a real headless
Chromium: the card shows the server's message and its form (as text, never markup),
a wrong answer is refused with the reason, and the filled-in form answers it."""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path
from typing import Any

from tests.serve.helpers import TOKEN, served
from tests.serve.test_page import browser, pytestmark
from tether import create_agent
from tether.mcp import MCPServer
from tether.messages import ToolCall, ToolResultMessage
from tether.models import FunctionModel, ModelRequest
from tether.models.scripted import Turn
from tether.serve import app

__all__ = ["browser", "pytestmark"]  # the Chromium fixture and skip, from test_page

SERVER = str(Path(__file__).resolve().parent.parent / "mcp_servers" / "asking.py")
HOSTILE = '<img src=x onerror="window.pwned=1">Seats?'


def test_a_servers_question_is_shown_and_answered_on_the_page(tmp_path: Path, browser: Any) -> None:
    schema = {
        "type": "object",
        "properties": {
            "name": {"type": "string", "title": "Your name", "minLength": 2},
            "seats": {"type": "integer", "default": 2, "description": "how many"},
            "window": {"type": "boolean"},
            "meal": {"type": "string", "oneOf": [{"const": "v", "title": "Veg"}]},
        },
        "required": ["name"],
    }

    async def turn(request: ModelRequest) -> Turn:
        await asyncio.sleep(0.1)
        results = [m for m in request.messages if isinstance(m, ToolResultMessage)]
        if results:
            return f"Told: {results[-1].results[0].text}"
        return [ToolCall("asking_ask", {"message": HOSTILE, "schema": schema})]

    server = MCPServer("asking", command=sys.executable, args=[SERVER])
    agent = create_agent(
        FunctionModel(turn), mcp_servers=[server], checkpointer=f"sqlite:///{tmp_path}/runs.db"
    )
    errors: list[str] = []
    with served(app({"asker": agent}, token=TOKEN)) as url:
        page = browser.new_page(viewport={"width": 1400, "height": 900})
        page.on("pageerror", lambda error: errors.append(str(error)))
        page.goto(f"{url}/#token={TOKEN}")
        page.fill("#prompt", "Ask me.")
        page.click("#send")
        card = page.wait_for_selector(".card.question", timeout=20_000)
        assert page.text_content(".question-message") == HOSTILE  # text, not markup
        assert "MCP server 'asking' asks" in card.text_content()
        assert page.locator(".card.question label").count() == 4
        assert page.input_value("[data-field=seats]") == "2"  # the form's default
        page.fill("[data-field=name]", "A")  # too short: tether says so
        page.click(".card button[data-decision=answer]")
        page.wait_for_selector("#error:not([hidden])", timeout=20_000)
        assert "must be at least 2 characters long" in page.text_content("#error")

        page.click("#threads li[data-thread]")  # drawn again: the question still waits
        page.wait_for_selector(".card.question:not(.decided)", timeout=20_000)
        page.fill("[data-field=name]", "Ann")
        page.select_option("[data-field=window]", "yes")
        page.select_option("[data-field=meal]", "v")
        page.click(".card button[data-decision=answer]")
        page.wait_for_selector("#status.completed", timeout=20_000)
        told = page.text_content(".msg.assistant >> nth=-1")
        assert told == "Told: accept: meal='v', name='Ann', seats=2, window=True"
        assert page.evaluate("window.pwned") is None
    assert errors == []
