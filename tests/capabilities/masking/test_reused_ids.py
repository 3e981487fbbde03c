"""Call ids from outside (a `message_history` converted from a provider that numbers its
calls `call_0`, `call_1`... per turn, as Ollama and several OpenAI-compatible servers do)
are not unique. The masker keys its bookkeeping by call id (`held`, `calls`, `latest`,
`by_path`), so a reused id (THREATS.md: "Ids from outside") breaks it:

1. the cache property: `stable` is taken from the first entry of the `held` dict, but a
   reused id keeps the dict slot of the FIRST result while pointing at a LATER message,
   so `stable` is too far ahead and a later batch rewrites a message before it;
2. the overwritten result is never masked (it leaks out of the bookkeeping) while its
   size stays counted in `live_chars`.
"""

from __future__ import annotations

from tether import Masking, create_agent
from tether.capabilities.masking import ResultMasker
from tether.messages import (
    AssistantMessage,
    Message,
    ToolCall,
    ToolResult,
    ToolResultMessage,
    UserMessage,
)
from tether.models import ModelRequest

from ._paging import paging_model

RERUNNABLE = frozenset({"read_file"})
PATHS = {"read_file": "file_path", "edit_file": "file_path", "write_file": "file_path"}


def _turn(messages: list[Message], path: str, call_id: str, text: str) -> None:
    call = ToolCall("read_file", {"file_path": path}, id=call_id)
    messages.append(AssistantMessage((call,)))
    messages.append(ToolResultMessage((ToolResult.of(call, text),)))


def test_stable_prefix_holds_with_ids_reused_across_turns() -> None:
    masker = ResultMasker(Masking(keep_turns=2, min_chars=10, batch_tokens=1), RERUNNABLE, PATHS)
    messages: list[Message] = [UserMessage.of("go")]
    _turn(messages, "/a", "call_0", "A" * 100)  # index 2
    _turn(messages, "/b", "call_1", "B" * 100)  # index 4
    _turn(messages, "/c", "call_0", "C" * 100)  # index 6: call_0 again
    sent: list[tuple[list[Message], int]] = []
    for n in range(6):
        view, _ = masker.view(messages)
        sent.append((list(view), masker.stable))
        _turn(messages, f"/new{n}", f"own_{n}", "N" * 100)
    for i, (view, mark) in enumerate(sent):
        for j, (later, _) in enumerate(sent[i + 1 :], start=i + 1):
            changed = [k for k in range(mark) if later[k] != view[k]]
            assert not changed, (
                f"request {i} said its first {mark} messages are stable, but request {j} "
                f"changed message(s) {changed}"
            )


def test_a_result_whose_id_was_reused_is_still_masked_when_old() -> None:
    masker = ResultMasker(Masking(keep_turns=1, min_chars=10, batch_tokens=1), RERUNNABLE, PATHS)
    messages: list[Message] = [UserMessage.of("go")]
    _turn(messages, "/a", "call_0", "A" * 1000)
    _turn(messages, "/b", "call_0", "B" * 1000)
    for n in range(8):
        _turn(messages, f"/x{n}", f"own_{n}", "x" * 1000)
    view, _ = masker.view(messages)
    first = view[2]
    assert isinstance(first, ToolResultMessage)
    assert first.results[0].text != "A" * 1000, (
        "the 10-turn-old result of /a is still sent whole: its id was reused, so the "
        "masker lost track of it"
    )


def test_through_an_agent_with_a_converted_history() -> None:
    """The same through `run(message_history=...)`: every request's stable prefix is sent
    unchanged by the later ones."""
    history: list[Message] = [UserMessage.of("Look at the project.")]
    for path, call_id in [("/a", "call_0"), ("/b", "call_1"), ("/c", "call_0")]:
        call = ToolCall("read_file", {"file_path": path}, id=call_id)  # reused across turns
        history.append(AssistantMessage((call,)))
        history.append(ToolResultMessage((ToolResult.of(call, f"{path} body\n" * 400),)))
    history.append(UserMessage.of("Now read the log."))
    sent: list[ModelRequest] = []

    create_agent(paging_model(sent)).run(message_history=history)
    for i, early in enumerate(sent):
        mark = early.stable_messages
        for j, later in enumerate(sent[i + 1 :], start=i + 1):
            changed = [k for k in range(mark) if later.messages[k] != early.messages[k]]
            assert not changed, (
                f"request {i} marked {mark} messages stable (a cache breakpoint there), "
                f"request {j} changed message(s) {changed}"
            )
