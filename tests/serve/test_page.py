"""The served page in a real headless Chromium (Debian's, driven by Playwright): a run
started from the page streams in, its subagent and todos show, an approval card shows
the diff and is approved by a click, and the run finishes. The screenshot it takes is
kept in tests/artifacts/ (the serving guide's picture is a copy of it: `make screenshots`)."""

from __future__ import annotations

import asyncio
import os
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import own_id
from tests.serve.helpers import TOKEN, served
from tether import create_agent
from tether.agent import Agent
from tether.backends.filesystem import FilesystemBackend
from tether.messages import AssistantMessage, TextPart, ToolCall, ToolResultMessage
from tether.models import FunctionModel, ModelRequest
from tether.models.scripted import Turn
from tether.serve import app

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
ARTIFACTS = Path(__file__).resolve().parent.parent / "artifacts"
# Chromium as root in a container, kept off the network it would otherwise try to reach
FLAGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]
HOSTILE = 'Looks right. <img src=x onerror="window.pwned=1"><script>window.pwned=2</script>'

pytestmark = pytest.mark.skipif(
    not os.path.exists(CHROMIUM) and not os.environ.get("CI"),
    reason="needs Debian's chromium (make test installs it)",
)


def notes_agent(root: Path, database: str) -> Agent[str]:
    """Plans, asks a reviewer (who answers with markup), then writes /notes.md (gated)."""

    async def turn(request: ModelRequest) -> Turn:
        await asyncio.sleep(0.2)  # events arrive one by one, as from a provider
        done = sum(isinstance(m, AssistantMessage) for m in request.messages)
        if request.messages[0].text.startswith("Review"):
            return HOSTILE
        todos = [
            {"content": "Ask for a review", "status": "completed"},
            {"content": "Write /notes.md", "status": "in_progress"},
        ]
        task = {"subagent_type": "general-purpose", "description": "Review the plan."}
        write = {"file_path": "/notes.md", "content": "# Notes\nhello from tether\n"}
        script: list[Turn] = [
            [
                TextPart("I will plan, ask for a review, then write the notes."),
                ToolCall("write_todos", {"todos": todos}, id="c1"),
            ],
            [ToolCall("task", task, id="c2")],
            [ToolCall("write_file", write, id="c3")],
            "Done: /notes.md is written.",
        ]
        return script[done]

    return create_agent(
        FunctionModel(turn),
        backend=FilesystemBackend(root),
        checkpointer=database,
        interrupt_on={"write_file": True},
    )


@pytest.fixture
def browser() -> Iterator[Any]:
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        launched = playwright.chromium.launch(executable_path=CHROMIUM, args=FLAGS)
        try:
            yield launched
        finally:
            launched.close()


def test_a_run_is_watched_and_approved_from_the_page(tmp_path: Path, browser: Any) -> None:
    root = tmp_path / "work"
    root.mkdir()
    database = f"sqlite:///{tmp_path}/runs.db"
    agent = notes_agent(root, database)
    errors: list[str] = []
    with served(app({"notes": agent}, token=TOKEN)) as url:
        page = browser.new_page(viewport={"width": 1400, "height": 900})
        page.on("pageerror", lambda error: errors.append(str(error)))
        page.goto(f"{url}/#token={TOKEN}")
        assert "token" not in page.url  # taken out of the address once read

        page.fill("#prompt", "Write notes about tether.")
        page.click("#send")
        page.wait_for_selector("#status.running")
        first = page.wait_for_selector(".msg.assistant")
        assert first.text_content() == "I will plan, ask for a review, then write the notes."
        assert page.locator(".card").count() == 0  # it streamed in before the run stopped

        card = page.wait_for_selector(".card", timeout=20_000)
        assert "+hello from tether" in card.text_content()
        assert page.text_content("#status") == "waiting for approval"
        assert page.locator("#todos li.completed").text_content() == "Ask for a review"
        assert "general-purpose" in page.text_content("#tree")
        ARTIFACTS.mkdir(exist_ok=True)
        page.screenshot(path=str(ARTIFACTS / "serve-page.png"))

        page.dblclick(".card button[data-decision=approve]")  # two clicks, one approval
        page.wait_for_selector("#status.completed", timeout=20_000)
        assert page.text_content(".msg.assistant >> nth=-1") == "Done: /notes.md is written."
        assert "/notes.md" in page.text_content("#files")
        assert "completed" in page.text_content("#threads")

        # what the reviewer wrote is shown as text: nothing of it ran
        assert HOSTILE in page.text_content(".subagent")
        assert page.evaluate("window.pwned") is None
        assert page.locator("#conversation img, #conversation script").count() == 0
    assert errors == []
    assert (root / "notes.md").read_text() == "# Notes\nhello from tether\n"
    history = agent.history(agent.threads()[0].thread_id)
    write = own_id(history, "c3")  # the write_file call, by tether's id
    results = [
        r
        for m in history
        if isinstance(m, ToolResultMessage)
        for r in m.results
        if r.call_id == write
    ]
    assert len(results) == 1


def test_a_run_is_stopped_from_the_page(tmp_path: Path, browser: Any) -> None:
    async def slow(request: ModelRequest) -> Turn:
        await asyncio.sleep(60)
        return "too late"

    agent = create_agent(FunctionModel(slow), checkpointer=f"sqlite:///{tmp_path}/runs.db")
    with served(app({"slow": agent}, token=TOKEN)) as url:
        page = browser.new_page()
        page.goto(f"{url}/#token={TOKEN}")
        page.fill("#prompt", "Take your time.")
        page.click("#send")
        page.wait_for_selector("#status.running")
        page.click("#stop")
        page.locator("#status", has_text="cancelled").wait_for()
    [info] = agent.threads()
    assert agent.history(info.thread_id)[0].text == "Take your time."


def test_a_run_that_failed_is_resumed_from_the_page(tmp_path: Path, browser: Any) -> None:
    from tether.errors import ModelHTTPError

    failures = [ModelHTTPError("the provider is overloaded", status_code=529)]

    def turn(request: ModelRequest) -> Turn:
        if failures:
            raise failures.pop()
        return "Back again."

    agent = create_agent(FunctionModel(turn), checkpointer=f"sqlite:///{tmp_path}/runs.db")
    with served(app({"a": agent}, token=TOKEN)) as url:
        page = browser.new_page()
        page.goto(f"{url}/#token={TOKEN}")
        page.fill("#prompt", "Hello.")
        page.click("#send")
        page.wait_for_selector("#status.error")
        page.wait_for_load_state("networkidle")  # the thread redrawn after the stream
        assert page.is_visible("#error")
        assert "overloaded" in page.text_content("#error")
        page.click("#resume")
        page.wait_for_selector("#status.completed")
        assert page.text_content(".msg.assistant >> nth=-1") == "Back again."
        assert page.locator("#resume").is_hidden()


def test_the_page_asks_for_the_token_and_refuses_a_wrong_one(tmp_path: Path, browser: Any) -> None:
    agent = create_agent(FunctionModel(lambda r: "hi"), checkpointer=f"sqlite:///{tmp_path}/r.db")
    with served(app({"a": agent}, token=TOKEN)) as url:
        page = browser.new_page()
        page.goto(url)
        page.wait_for_selector("#login:not([hidden])")
        page.fill("#token", "not-the-token-at-all")
        page.click("#login button")
        refused = page.wait_for_selector("#login-error:not([hidden])")
        assert refused.text_content() == "That token was refused."
        assert page.locator("#app").is_hidden()
        page.fill("#token", TOKEN)
        page.click("#login button")
        page.wait_for_selector("#app:not([hidden])")
        assert page.text_content("#agent") == "a (function)"


def test_two_waiting_calls_are_decided_one_click_each(tmp_path: Path, browser: Any) -> None:
    """Each card sends its own decision; a double click decides one call once, and the
    card it was on stays put (the next card's button never slides under the mouse)."""
    root = tmp_path / "work"
    root.mkdir()

    async def turn(request: ModelRequest) -> Turn:
        await asyncio.sleep(0.2)
        if any(isinstance(m, ToolResultMessage) for m in request.messages):
            return "Decided, both."
        return [
            ToolCall("write_file", {"file_path": "/a.md", "content": "A\n"}, id="w1"),
            ToolCall("write_file", {"file_path": "/b.md", "content": "B\n"}, id="w2"),
        ]

    agent = create_agent(
        FunctionModel(turn),
        backend=FilesystemBackend(root),
        checkpointer=f"sqlite:///{tmp_path}/runs.db",
        interrupt_on={"write_file": True},
    )
    errors: list[str] = []
    with served(app({"files": agent}, token=TOKEN)) as url:
        page = browser.new_page(viewport={"width": 1400, "height": 900})
        page.on("pageerror", lambda error: errors.append(str(error)))
        page.goto(f"{url}/#token={TOKEN}")
        page.fill("#prompt", "Write both files.")
        page.click("#send")
        page.locator("#status", has_text="waiting for approval").wait_for(timeout=20_000)
        page.wait_for_selector(".card >> nth=1")
        first, second = page.locator(".card").nth(0), page.locator(".card").nth(1)
        assert "+A" in first.text_content()
        box = first.bounding_box()

        first.locator("button[data-decision=approve]").dblclick()  # two clicks, one decision
        page.wait_for_load_state("networkidle")
        page.locator(".card.decided", has_text="runs once every call is decided").wait_for()
        assert page.locator(".card").count() == 2  # both shown, in their places
        assert page.locator(".card").nth(0).bounding_box() == box
        assert page.text_content("#status") == "waiting for approval"
        assert second.locator("button[data-decision=approve]").is_enabled()
        assert not (root / "a.md").exists()  # the turn runs once every call is decided
        assert page.is_hidden("#error")

        second.locator("button[data-decision=reject]").click()  # asks why first
        second.locator("textarea").fill("not b")
        second.locator("button[data-decision=reject]").click()
        page.wait_for_selector("#status.completed", timeout=20_000)
        assert page.text_content(".msg.assistant >> nth=-1") == "Decided, both."
        assert page.locator(".card").count() == 0
    assert errors == []
    assert (root / "a.md").read_text() == "A\n"
    assert not (root / "b.md").exists()
    history = agent.history(agent.threads()[0].thread_id)
    answered = [r.call_id for m in history if isinstance(m, ToolResultMessage) for r in m.results]
    assert sorted(answered) == sorted([own_id(history, "w1"), own_id(history, "w2")])
