"""Server-sent events written from an event's fields (and a reply's pieces written
without building events at all) are the bytes the AG-UI SDK's encoder writes."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
from ag_ui.core import (
    BaseEvent,
    CustomEvent,
    EventType,
    ReasoningMessageContentEvent,
    ReasoningMessageStartEvent,
    RunStartedEvent,
    StateSnapshotEvent,
    TextMessageContentEvent,
    TextMessageEndEvent,
    TextMessageStartEvent,
    ToolCallArgsEvent,
    ToolCallEndEvent,
    ToolCallResultEvent,
    ToolCallStartEvent,
)
from ag_ui.core import TextPart as AguiText
from ag_ui.encoder import EventEncoder

from tests.serve.helpers import events
from tether import create_agent
from tether.events import Event, ModelDelta, StepFinished, ToolCallFinished, ToolCallStarted
from tether.messages import TextPart, ToolCall, ToolResult, Usage
from tether.models import FunctionModel
from tether.serve import _live
from tether.serve._agui import Translator
from tether.serve._live import LiveRuns
from tether.serve._sse import content, encode

ODD = ["plain", 'quote " and \\ back', "line\nbreak\ttab\r\x00\x1f\x7f", "é 漢字 😀 \u2028", ""]

EVENTS: list[BaseEvent] = [
    *(TextMessageContentEvent(message_id="r.reply1", delta=text) for text in ODD if text),
    TextMessageContentEvent(message_id="m", delta="x", subagent_run_id="task:coder#1"),
    TextMessageStartEvent(message_id="m", role="assistant"),
    TextMessageEndEvent(message_id="m", subagent_run_id="a/b"),
    ReasoningMessageStartEvent(message_id="t1"),
    ReasoningMessageContentEvent(message_id="t1", delta="hmm"),
    ToolCallStartEvent(tool_call_id="c1", tool_call_name="ls", parent_message_id="m"),
    ToolCallArgsEvent(tool_call_id="c1", delta='{"path": "/"}'),
    ToolCallEndEvent(tool_call_id="c1"),
    ToolCallResultEvent(
        message_id="x", tool_call_id="c1", content="ok", role="tool", metadata={"is_error": False}
    ),
    ToolCallResultEvent(
        message_id="x", tool_call_id="c1", content="no", metadata={"is_error": True, "n": 2}
    ),
    ToolCallResultEvent(
        message_id="x", tool_call_id="c1", content="f", metadata={"nested": {"a": [1, None]}}
    ),
    ToolCallResultEvent(message_id="x", tool_call_id="c1", content=[AguiText(text="parts")]),
    TextMessageContentEvent(message_id="m", delta="stamped", timestamp=12),
    TextMessageContentEvent(message_id="m", delta="raw", raw_event={"a": None}),
    TextMessageContentEvent(message_id="m", delta="extra", **{"more": None}),  # type: ignore[arg-type]
    CustomEvent(name="tether.file_changed", value={"path": "/a", "none": None}),
    CustomEvent(name="nothing", value=None),  # a required field: null, not left out
    CustomEvent(name="tuple", value=(1, "a")),
    StateSnapshotEvent(snapshot={"todos": [], "cost_usd": 0.0}),
    StateSnapshotEvent(
        snapshot={
            "todos": [{"content": "é \x00", "status": "pending"}],
            "steps": 3,
            "usage": {"input_tokens": 10**30, "ok": True},
            "cost_usd": 0.1 + 0.2,
        }
    ),
    StateSnapshotEvent(snapshot={"cost_usd": float("inf"), "n": float("nan")}),
    StateSnapshotEvent(snapshot={1: "a key that is no string"}),
    StateSnapshotEvent(snapshot=None),
    StateSnapshotEvent(snapshot={"kind": EventType.RUN_STARTED}),
    RunStartedEvent(thread_id="t", run_id="r"),
]


@pytest.mark.parametrize("event", EVENTS, ids=lambda e: type(e).__name__)
def test_an_event_is_written_as_the_sdk_writes_it(event: BaseEvent) -> None:
    assert encode(event) == EventEncoder().encode(event)


@pytest.mark.parametrize("text", [t for t in ODD if t])
@pytest.mark.parametrize("subagent", [None, "task:coder#1/task:x#2"])
def test_a_piece_is_written_as_the_event_holding_it(text: str, subagent: str | None) -> None:
    cases: list[tuple[EventType, BaseEvent]] = [
        (
            EventType.TEXT_MESSAGE_CONTENT,
            TextMessageContentEvent(message_id="m1", delta=text, subagent_run_id=subagent),
        ),
        (
            EventType.REASONING_MESSAGE_CONTENT,
            ReasoningMessageContentEvent(message_id="m1", delta=text, subagent_run_id=subagent),
        ),
        (
            EventType.TOOL_CALL_ARGS,
            ToolCallArgsEvent(tool_call_id="m1", delta=text, subagent_run_id=subagent),
        ),
    ]
    for kind, event in cases:
        assert content(kind, "m1", text, subagent) == EventEncoder().encode(event)


def _told(run: list[Event]) -> tuple[list[tuple[Any, Any, str]], int]:
    """The chunks a live run keeps for `run` when pieces take the short path, and how
    many did."""
    translator, kept, short = Translator("t", "r"), [], 0
    for event in run:
        piece = translator.piece(event)
        if piece is None:
            kept += [
                (e.type, e.__dict__.get("tool_call_id"), encode(e))
                for e in translator.translate(event)
            ]
        else:
            kind, call_id, chunk = piece
            kept.append((kind, call_id, chunk))
            short += 1
    return kept, short


def test_a_runs_pieces_are_told_as_translating_them_tells_them() -> None:
    main, sub = ("main",), ("main", "task:coder#1")
    call = ToolCall("write_file", {"file_path": "/a"}, id="w1")
    run: list[Event] = []
    for path in (main, sub):
        run += [
            ModelDelta(path, "thinking", "Let me"),
            ModelDelta(path, "thinking", " think."),
            ModelDelta(path, "text", "Writing"),
            ModelDelta(path, "text", ""),
            ModelDelta(path, "text", " it."),
            ModelDelta(path, "thinking", "Again."),
            ModelDelta(path, "text", "Back."),
            ModelDelta(path, "tool_call", '{"file_path": ', "w1", "write_file"),
            ModelDelta(path, "tool_call", '"/a"}', "w1", "write_file"),
            ModelDelta(path, "tool_call", "{}", "x1"),  # no tool named: told whole later
            ModelDelta(path, "tool_call", "{}", None, "ls"),
            ModelDelta(path, "text", "After."),
            ModelDelta(path, "tool_call", "more", "w1", "write_file"),  # ended already
            StepFinished(path, 1, Usage(), 0.0),
            ToolCallStarted(path, call),
            ToolCallFinished(path, call, ToolResult.of(call, "done")),
            ModelDelta(path, "text", "Next reply."),
            ModelDelta(path, "text", " Goes on."),
        ]
    translator = Translator("t", "r")
    expected = [
        (e.type, e.__dict__.get("tool_call_id"), EventEncoder().encode(e))
        for event in run
        for e in translator.translate(event)
    ]
    kept, short = _told(run)
    assert kept == expected
    assert short >= 10  # the path was taken, for text, thinking and arguments alike


async def test_followers_of_a_streaming_run_each_read_every_piece_once(tmp_path: Path) -> None:
    pieces = [TextPart(f"w{n} ") for n in range(300)]
    agent = create_agent(
        FunctionModel(lambda _: pieces), checkpointer=f"sqlite:///{tmp_path}/runs.db"
    )
    runs = LiveRuns()
    live = await runs.start(
        "a",
        agent,
        "t1",
        Translator("t1", "r"),
        events=lambda: agent.stream("Go.", thread_id="t1"),
        before=[],
    )

    async def read() -> str:
        return "".join([chunk async for chunk in live.follow()])

    early = asyncio.create_task(read())
    await asyncio.sleep(0)
    late = await read()
    for body in (await early, late):
        found = events(body)
        text = "".join(e["delta"] for e in found if e["type"] == "TEXT_MESSAGE_CONTENT")
        assert text == "".join(p.text for p in pieces)
        assert found[0]["type"] == "RUN_STARTED"
        assert found[-1]["type"] == "RUN_FINISHED"


async def test_a_follower_writes_what_comes_meanwhile_at_once_and_the_end_without_waiting(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # a run of quick steps: a write (and a wake of the reader) for each event cost more
    # than the step; what comes while a woken follower gathers goes in one write
    monkeypatch.setattr(_live, "_GATHER_SECONDS", 30.0)
    agent = create_agent(FunctionModel(lambda _: "-"), checkpointer=f"sqlite:///{tmp_path}/r.db")
    burst, finish = asyncio.Event(), asyncio.Event()
    main = ("main",)

    async def run() -> Any:
        yield ModelDelta(main, "text", "first")
        await burst.wait()
        for n in range(40):
            yield ModelDelta(main, "text", f" w{n}")
            await asyncio.sleep(0)  # the follower may run between any two
        await finish.wait()

    live = await LiveRuns().start("a", agent, "t", Translator("t", "r"), events=run, before=[])
    writes: list[str] = []
    async with asyncio.timeout(10):  # the end is written at once, not after the gathering
        async for chunk in live.follow():
            writes.append(chunk)
            burst.set()
            finish.set()
    texts = [[e["delta"] for e in events(w) if "delta" in e] for w in writes]
    assert texts[0] == ["first"]
    assert texts[1] == [f" w{n}" for n in range(40)]  # one write
    assert len(writes) == 2
