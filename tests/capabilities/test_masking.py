"""Masking stale tool results: what the model is sent, step by step, and what it keeps."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tether import Compaction, Masking, create_agent
from tether.capabilities.masking import ResultMasker
from tether.errors import ConfigurationError
from tether.messages import (
    AssistantMessage,
    Message,
    TextPart,
    ToolCall,
    ToolResult,
    ToolResultMessage,
    UserMessage,
)
from tether.models import FunctionModel, ModelRequest
from tether.models._bedrock_converse import converse_messages
from tether.models.anthropic import _messages

RERUNNABLE = frozenset({"read_file", "grep"})
PATHS = {"read_file": "file_path", "edit_file": "file_path", "write_file": "file_path"}
SMALL = Masking(keep_turns=2, min_chars=10, batch_tokens=1)


def turn(messages: list[Message], call: ToolCall, text: str, *, error: bool = False) -> None:
    messages.append(AssistantMessage((call,)))
    messages.append(ToolResultMessage((ToolResult.of(call, text, is_error=error),)))


def read(path: str, n: int) -> ToolCall:
    return ToolCall("read_file", {"file_path": path}, id=f"r{n}")


def texts(view: list[Message]) -> list[str]:
    return [r.text for m in view if isinstance(m, ToolResultMessage) for r in m.results]


def test_a_result_is_masked_once_it_is_old_and_recent_ones_stay_whole() -> None:
    masker = ResultMasker(SMALL, RERUNNABLE, PATHS)
    messages: list[Message] = [UserMessage.of("go")]
    for n in range(4):
        turn(messages, read(f"/f{n}.py", n), f"contents of file {n} " * 5)
        view, _ = masker.view(messages)
    shown = texts(view)
    assert shown[0].startswith("[Old read_file result")
    assert "call read_file again" in shown[0]
    assert shown[-1] == "contents of file 3 " * 5  # the latest turns are sent whole
    assert shown[-2] == "contents of file 2 " * 5
    assert texts(messages)[0] == "contents of file 0 " * 5  # the history keeps it all


def test_an_edit_makes_the_read_of_its_file_stale_and_an_error_or_command_never() -> None:
    masker = ResultMasker(Masking(keep_turns=50, min_chars=10, batch_tokens=1), RERUNNABLE, PATHS)
    messages: list[Message] = [UserMessage.of("go")]
    turn(messages, read("/a.py", 1), "x = 1\n" * 20)
    turn(messages, read("/b.py", 2), "y = 2\n" * 20)
    turn(messages, ToolCall("execute", {"command": "ls"}, id="e"), "a.py b.py " * 20)
    turn(messages, read("/c.py", 3), "missing " * 20, error=True)
    edit = ToolCall("edit_file", {"file_path": "a.py", "old_string": "x", "new_string": "z"})
    turn(messages, edit, "Edited /a.py.")
    view, changed = masker.view(messages)
    shown = texts(view)
    assert changed
    assert shown[0].startswith("[Old read_file result")  # its file changed since
    assert shown[1:4] == texts(messages)[1:4]  # another file, a command, an error


def test_the_same_result_again_is_sent_as_a_reference() -> None:
    masker = ResultMasker(Masking(keep_turns=50, min_chars=10), RERUNNABLE, PATHS)
    messages: list[Message] = [UserMessage.of("go")]
    turn(messages, read("/a.py", 1), "x = 1\n" * 20)
    turn(messages, read("/a.py", 2), "x = 1\n" * 20)
    turn(messages, read("/a.py", 3), "x = 2\n" * 20)  # changed: sent whole
    view, _ = masker.view(messages)
    shown = texts(view)
    assert shown[0] == "x = 1\n" * 20
    assert shown[1].startswith("[Unchanged")
    assert shown[2] == "x = 2\n" * 20


def test_old_file_contents_in_writes_become_pointers_unless_the_write_failed() -> None:
    masker = ResultMasker(SMALL, RERUNNABLE, PATHS)
    messages: list[Message] = [UserMessage.of("go")]
    good = ToolCall("write_file", {"file_path": "/new.py", "content": "a" * 100}, id="w1")
    bad = ToolCall("write_file", {"file_path": "/old.py", "content": "b" * 100}, id="w2")
    turn(messages, good, "Wrote 100 bytes to /new.py.")
    turn(messages, bad, "/old.py is a file that already exists.", error=True)
    for n in range(4):
        turn(messages, read(f"/f{n}.py", n), f"contents of file {n} " * 5)
        view, _ = masker.view(messages)
    calls = [p for m in view if isinstance(m, AssistantMessage) for p in m.tool_calls]
    assert "written to /new.py" in calls[0].args["content"]
    assert calls[1].args["content"] == "b" * 100


def test_the_anthropic_request_marks_the_stable_part_for_the_cache() -> None:
    messages: list[Message] = [UserMessage.of("go")]
    for n in range(3):
        turn(messages, read(f"/f{n}.py", n), "text " * 10)
    body = _messages(messages, cache=True, stable=3)
    marked = [
        (i, j)
        for i, m in enumerate(body)
        for j, b in enumerate(m["content"])
        if "cache_control" in b
    ]
    assert marked == [(2, 0), (len(body) - 1, 0)]  # after message 3 (index 2), and the end


def test_bedrock_puts_a_cache_point_after_the_stable_part() -> None:
    messages: list[Message] = [UserMessage.of("go")]
    for n in range(3):
        turn(messages, read(f"/f{n}.py", n), "text " * 10)
    body = converse_messages(messages, cache=True, stable=3)
    points = [
        (i, j) for i, m in enumerate(body) for j, b in enumerate(m["content"]) if "cachePoint" in b
    ]
    assert points == [(2, 1), (len(body) - 1, 1)]  # after message 3 (index 2), and the end
    assert converse_messages(messages, cache=True, stable=len(messages)) == converse_messages(
        messages, cache=True
    )  # one point at the end when all of it is stable


# -- the properties, over any run ---------------------------------------------------------

TOOLS = ["read_file", "grep", "edit_file", "execute"]


@st.composite
def runs(draw: st.DrawFn) -> list[list[tuple[str, str, str, bool]]]:
    """Turns of (tool, path, result text, is_error) calls."""
    call = st.tuples(
        st.sampled_from(TOOLS),
        st.sampled_from(["/a", "/b", "/c"]),
        st.sampled_from(["", "short", "long text " * 4, "other long " * 4, "x" * 90]),
        st.booleans(),
    )
    return draw(st.lists(st.lists(call, min_size=1, max_size=3), min_size=1, max_size=25))


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(runs(), st.integers(1, 4), st.integers(1, 40), st.integers(1, 30))
def test_masking_properties(
    run: list[list[tuple[str, str, str, bool]]], keep: int, min_chars: int, batch: int
) -> None:
    masker = ResultMasker(Masking(keep, min_chars, batch), RERUNNABLE, PATHS)
    messages: list[Message] = [UserMessage.of("go")]
    sent: list[list[Message]] = []
    stable: list[int] = []
    n = 0
    for calls in run:
        made = []
        for tool, path, _, _ in calls:
            n += 1
            key = "pattern" if tool == "grep" else "file_path"
            made.append(ToolCall(tool, {key: path}, id=f"c{n}"))
        messages.append(AssistantMessage(tuple(made)))
        messages.append(
            ToolResultMessage(
                tuple(
                    ToolResult.of(c, text, is_error=error)
                    for c, (_, _, text, error) in zip(made, calls, strict=True)
                )
            )
        )
        view, _ = masker.view(messages)
        sent.append(list(view))
        stable.append(masker.stable)
        _check_view(messages, view)
    # what a request marks as stable, every later request sends unchanged
    for i, (view, mark) in enumerate(zip(sent, stable, strict=True)):
        for later in sent[i + 1 :]:
            assert later[:mark] == view[:mark]


def _check_view(messages: list[Message], view: list[Message]) -> None:
    assert len(view) == len(messages)
    turns = sum(isinstance(m, AssistantMessage) for m in messages)
    seen = 0
    earlier: list[str] = []
    for original, shown in zip(messages, view, strict=True):
        assert type(original) is type(shown)
        if isinstance(original, AssistantMessage):
            seen += 1
            assert isinstance(shown, AssistantMessage)
            assert [c.id for c in shown.tool_calls] == [c.id for c in original.tool_calls]
            continue
        if not isinstance(original, ToolResultMessage):
            assert shown is original
            continue
        assert isinstance(shown, ToolResultMessage)
        for before, after in zip(original.results, shown.results, strict=True):
            assert (after.call_id, after.name, after.is_error) == (
                before.call_id,
                before.name,
                before.is_error,
            )
            earlier.append(before.text)
            if after.text == before.text:
                continue
            # only results a call can give again, never an error, are ever replaced
            assert before.name in RERUNNABLE
            assert not before.is_error
            if after.text.startswith("[Unchanged"):
                assert before.text in earlier[:-1]  # the same text came before
            else:
                assert after.text.startswith("[Old ")
                assert turns - seen >= 1  # the newest turn's results are sent whole


# -- through an agent -----------------------------------------------------------------------


def test_an_agent_masks_by_default_and_compaction_none_or_masking_none_turn_it_off() -> None:
    def run(**options: Any) -> list[str]:
        seen: list[ModelRequest] = []

        def reply(request: ModelRequest) -> list[ToolCall] | str:
            seen.append(request)
            n = len(seen)
            if n == 1:
                text = "".join(f"line {i}\n" for i in range(9000))
                return [ToolCall("write_file", {"file_path": "/big.md", "content": text})]
            part = {"file_path": "/big.md", "offset": n * 400, "limit": 400}
            return [ToolCall("read_file", part, id=f"r{n}")] if n < 16 else "done"

        create_agent(FunctionModel(reply), **options).run("Read it again and again.")
        return texts(list(seen[-1].messages))

    masked = run()
    assert any(t.startswith("[Old read_file result") for t in masked)
    for off in ({"compaction": None}, {"compaction": Compaction(masking=None)}):
        assert not any(t.startswith("[") for t in run(**off))


def test_masking_settings_are_checked() -> None:
    with pytest.raises(ConfigurationError, match="keep_turns"):
        Masking(keep_turns=0)
    with pytest.raises(ConfigurationError, match="masking"):
        Compaction(masking="yes")  # type: ignore[arg-type]
    assert TextPart  # the message types above are the public ones
