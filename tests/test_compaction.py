"""Context compaction: offloading, summarization, truncation, and the window holding."""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence

import pytest

from tether import Compaction, ConfigurationError, Limits, create_agent, tool
from tether.capabilities.compaction import _Meter, render_transcript
from tether.events import Compacted, ToolCallStarted
from tether.messages import (
    AssistantMessage,
    Message,
    TextPart,
    ToolCall,
    ToolResultMessage,
    UserMessage,
)
from tether.models import FunctionModel, ModelProfile, ModelRequest
from tether.models.estimate import InputEstimate
from tether.models.scripted import Turn

SUMMARY = "## Session intent\nFetch every page.\n## Next steps\nKeep fetching."


def tokens_of(request: ModelRequest) -> int:
    """The request's size as the test model reports it (its own estimate, from zero)."""
    return InputEstimate().tokens(request)


def pairs_intact(messages: Sequence[Message]) -> bool:
    """Every tool result answers a call of the assistant message just before it."""
    for i, message in enumerate(messages):
        if isinstance(message, ToolResultMessage):
            before = messages[i - 1] if i else None
            if not isinstance(before, AssistantMessage):
                return False
            if {r.call_id for r in message.results} != {c.id for c in before.tool_calls}:
                return False
    return True


class Watcher:
    """A FunctionModel body that records every request and answers summary requests."""

    def __init__(self, step: Callable[[ModelRequest, int], Turn], summary: Turn = SUMMARY):
        self.step, self.summary = step, summary
        self.largest = 0
        self.steps = 0
        self.summaries = 0
        self.requests: list[ModelRequest] = []
        self.broken_pairs = 0

    def __call__(self, request: ModelRequest) -> Turn:
        self.largest = max(self.largest, tokens_of(request))
        if not request.tools:  # the summary request
            self.summaries += 1
            return self.summary
        self.requests.append(request)
        self.broken_pairs += not pairs_intact(request.messages)
        self.steps += 1
        return self.step(request, self.steps)


@tool
def fetch(page: int) -> str:
    """Fetch one page."""
    return f"page {page}: " + "lorem ipsum " * 100


def fetch_pages(total: int) -> Callable[[ModelRequest, int], Turn]:
    def step(request: ModelRequest, n: int) -> Turn:
        if n > total:
            return "all pages fetched"
        return [ToolCall("fetch", {"page": n - 1}, id=f"call_{n - 1}")]

    return step


async def test_a_5000_step_run_never_passes_an_8000_token_window() -> None:
    watcher = Watcher(fetch_pages(5_000))
    model = FunctionModel(watcher, profile=ModelProfile(max_input_tokens=8_000))
    events: list[Compacted] = []
    pages_seen: set[int] = set()
    calls_seen: set[int] = set()
    page_of_call: dict[str, int] = {}  # tether's id of each call -> the page it fetched
    agent = create_agent(model, tools=[fetch], limits=Limits(max_steps=None))
    result = None
    async for event in agent.stream("Fetch pages 0 to 4999."):
        if isinstance(event, Compacted):
            events.append(event)
        if isinstance(event, ToolCallStarted):
            assert event.call.id not in page_of_call
            assert event.call.provider_id == f"call_{event.call.args['page']}"  # type: ignore[index]
            page_of_call[event.call.id] = event.call.args["page"]  # type: ignore[index]
        if event.kind == "run_finished":
            result = event.result
    assert result is not None
    assert result.output == "all pages fetched"
    assert result.steps == 5_001

    assert watcher.largest <= 8_000
    assert watcher.broken_pairs == 0
    assert watcher.summaries == len(events) > 100
    assert all(e.how == "summary" and e.tokens_after < e.tokens_before for e in events)

    # Every original message is in a history file, or still in the conversation.
    history = "".join(
        data.decode()
        for path, data in result.files.items()
        if path.startswith("/conversation_history/")
    )
    kept = render_transcript(result.messages)
    for text in (history, kept):
        pages_seen.update(int(n) for n in re.findall(r"page (\d+): lorem", text))
        calls = re.findall(r"Tool call `fetch` \((call_[0-9a-f]{16})\)", text)
        calls_seen.update(page_of_call[c] for c in calls)
    assert pages_seen == calls_seen == set(range(5_000))
    assert history.count("## User\n\nFetch pages 0 to 4999.") == 1

    first = result.messages[0]
    assert isinstance(first, UserMessage)
    assert first.text.startswith("[Summary of the conversation so far")
    assert "/conversation_history/" in first.text
    assert first.text.endswith(SUMMARY)
    assert result.usage.requests == result.steps + watcher.summaries


def test_requests_between_compactions_extend_each_other() -> None:
    """Compaction rewrites the history rarely, so cached prefixes keep hitting."""
    watcher = Watcher(fetch_pages(200))
    model = FunctionModel(watcher, profile=ModelProfile(max_input_tokens=8_000))
    create_agent(model, tools=[fetch], limits=Limits(max_steps=None)).run("go")
    rewrites = 0
    for before, after in zip(watcher.requests, watcher.requests[1:], strict=False):
        n = len(before.messages)
        if after.messages[:n] != before.messages:
            rewrites += 1
    assert rewrites == watcher.summaries
    assert 0 < rewrites < len(watcher.requests) // 5


def test_large_file_writes_are_offloaded_before_anything_is_summarized() -> None:
    big = "def f():\n    return 1\n" * 150  # 3,300 characters

    def step(request: ModelRequest, n: int) -> Turn:
        if n <= 3:
            path = f"/src/module{n}.py"
            return [ToolCall("write_file", {"file_path": path, "content": big}, id=f"w{n}")]
        if n <= 6:
            return [ToolCall("ls", {"path": "/src"}, id=f"l{n}")]
        return "written"

    watcher = Watcher(step)
    model = FunctionModel(watcher, profile=ModelProfile(max_input_tokens=4_000))
    agent = create_agent(model, tool_token_limit_before_evict=500)
    result = agent.run("Write the modules.")

    assert watcher.summaries == 0
    calls = [c for m in result.messages if isinstance(m, AssistantMessage) for c in m.tool_calls]
    offloaded = [c for c in calls if c.name == "write_file" and c.args["content"] != big]
    assert offloaded
    assert offloaded[0].args["content"] == (
        "[3300 characters written to /src/module1.py; read the file for what it holds now]"
    )
    assert result.files["/src/module1.py"] == big.encode()
    assert watcher.largest <= 4_000


def test_a_failed_summary_falls_back_to_a_marker() -> None:
    watcher = Watcher(fetch_pages(60), summary=RuntimeError("summarizer down"))
    model = FunctionModel(watcher, profile=ModelProfile(max_input_tokens=6_000))
    result = create_agent(model, tools=[fetch], limits=Limits(max_steps=None)).run("go")

    assert result.output == "all pages fetched"
    first = result.messages[0]
    assert isinstance(first, UserMessage)
    assert first.text.startswith("[Earlier messages were removed to fit the context window.]")
    assert "/conversation_history/" in first.text
    assert watcher.largest <= 6_000


def test_a_summary_that_runs_too_long_is_not_used() -> None:
    watcher = Watcher(fetch_pages(60), summary="blah " * 2_000)
    model = FunctionModel(watcher, profile=ModelProfile(max_input_tokens=6_000))
    result = create_agent(model, tools=[fetch], limits=Limits(max_steps=None)).run("go")
    assert result.messages[0].text.startswith("[Earlier messages were removed")  # type: ignore[union-attr]
    assert watcher.largest <= 6_000


def test_one_result_larger_than_the_window_is_cut_to_fit() -> None:
    @tool
    def dump() -> str:
        """Dump everything."""
        return "data " * 20_000  # 100,000 characters, about 25,000 tokens

    def step(request: ModelRequest, n: int) -> Turn:
        return [ToolCall("dump", {}, id="d1")] if n == 1 else "seen"

    watcher = Watcher(step)
    model = FunctionModel(watcher, profile=ModelProfile(max_input_tokens=5_000))
    agent = create_agent(model, tools=[dump], tool_token_limit_before_evict=None)
    result = agent.run("Dump it.")
    assert result.output == "seen"
    assert watcher.largest <= 5_000
    texts = [r.text for m in result.messages if isinstance(m, ToolResultMessage) for r in m.results]
    assert "characters cut to fit the context window]" in texts[0]


def test_an_unknown_window_uses_the_fallback_trigger_and_keeps_the_last_messages() -> None:
    watcher = Watcher(fetch_pages(40))
    model = FunctionModel(watcher)  # no max_input_tokens in its profile
    agent = create_agent(
        model,
        tools=[fetch],
        limits=Limits(max_steps=None),
        compaction=Compaction(fallback_trigger_tokens=4_000, fallback_keep_messages=6),
    )
    result = agent.run("go")
    assert watcher.summaries > 0
    after = next(
        r
        for r in watcher.requests
        if isinstance(r.messages[0], UserMessage) and r.messages[0].text.startswith("[Summary")
    )
    assert len(after.messages) <= 1 + 6
    assert result.output == "all pages fetched"


def test_compaction_can_be_configured_or_turned_off() -> None:
    watcher = Watcher(fetch_pages(30))
    model = FunctionModel(watcher, profile=ModelProfile(max_input_tokens=8_000))
    create_agent(model, tools=[fetch], compaction=None).run("go")
    assert watcher.summaries == 0
    assert watcher.largest > 8_000  # nothing held it back

    with pytest.raises(ConfigurationError, match="keep < trigger"):
        Compaction(trigger=0.5, keep=0.6)
    with pytest.raises(ConfigurationError, match="compaction must be"):
        create_agent(model, compaction=0.85)  # type: ignore[arg-type]


def test_summary_requests_are_charged_to_the_budget() -> None:
    watcher = Watcher(fetch_pages(400))
    model = FunctionModel(watcher, profile=ModelProfile(max_input_tokens=8_000))
    agent = create_agent(model, tools=[fetch], limits=Limits(max_steps=None, max_model_calls=60))
    result = agent.run("go")
    assert result.stop_reason == "budget"
    assert result.usage.requests == 60
    assert watcher.summaries > 0


def test_the_meter_adds_new_messages_at_the_reported_rate() -> None:
    meter = _Meter(fixed_chars=1_000)
    history: list[Message] = [UserMessage.of("x" * 3_000)]
    assert meter.tokens(history) == 1_000  # 4,000 characters at the default 4 a token
    meter.pending_chars = meter.chars(history)
    meter.calibrate(2_000)  # the provider counted 2 characters a token
    history.append(AssistantMessage((TextPart("y" * 1_000),)))
    assert meter.tokens(history) == 2_000 + 500
    history[:] = [UserMessage.of("short")]  # rewritten: counted again from scratch
    assert meter.tokens(history) == 2_000 + (1_005 - 4_000) // 2 + 1


def test_a_repaired_history_stays_paired_through_compaction() -> None:
    dangling = AssistantMessage((ToolCall("fetch", {"page": -1}, id="lost"),))
    history: list[Message] = [UserMessage.of("Fetch everything."), dangling]
    watcher = Watcher(fetch_pages(120))
    model = FunctionModel(watcher, profile=ModelProfile(max_input_tokens=6_000))
    agent = create_agent(model, tools=[fetch], limits=Limits(max_steps=None))
    result = agent.run("Go on.", message_history=history)
    assert watcher.summaries > 0
    assert watcher.broken_pairs == 0
    assert pairs_intact(result.messages)
    assert watcher.largest <= 6_000


def test_runs_of_one_thread_keep_their_histories_side_by_side(tmp_path: object) -> None:
    watcher = Watcher(fetch_pages(40))
    model = FunctionModel(watcher, profile=ModelProfile(max_input_tokens=6_000))
    agent = create_agent(
        model,
        tools=[fetch],
        limits=Limits(max_steps=None),
        checkpointer=f"sqlite:///{tmp_path}/r.db",
    )
    agent.run("first", thread_id="t")
    watcher.steps = 0  # the second run fetches its forty pages again
    result = agent.run("second", thread_id="t")
    files = sorted(p for p in result.files if p.startswith("/conversation_history/t/"))
    assert len(files) >= 2
    assert files == [f"/conversation_history/t/{n}.md" for n in range(1, len(files) + 1)]
    assert "## User\n\nfirst" in result.files[files[0]].decode()


def test_a_thread_can_be_compacted_between_runs(tmp_path: object) -> None:
    def reply(request: ModelRequest) -> Turn:
        if request.system_prompt and "summar" in request.system_prompt.lower():
            return "SUMMARY: the user asked three questions."
        return f"answer {sum(isinstance(m, UserMessage) for m in request.messages)}"

    url = f"sqlite:///{tmp_path}/runs.db"
    agent = create_agent(FunctionModel(reply), checkpointer=url)
    for question in ("one?", "two?", "three?"):
        agent.run(question, thread_id="t")
    (done,) = agent.compact("t")
    assert done.how == "summary"
    assert done.history_path == "/conversation_history/t/1.md"
    history = agent.history("t")
    assert "SUMMARY: the user asked three questions." in history[0].text
    assert [m.text for m in history[1:]] == ["answer 3"]  # the latest exchange is kept
    assert agent.compact("t") == []  # only the summary is older than the latest exchange
    assert agent.run("four?", thread_id="t").output == "answer 2"  # the summary and four
    with pytest.raises(ConfigurationError, match="no thread 'nope' to compact"):
        agent.compact("nope")


def test_a_cheaper_model_can_write_the_summaries() -> None:
    watcher = Watcher(fetch_pages(60), summary=RuntimeError("the agent's model must not summarize"))
    cheap_requests: list[ModelRequest] = []

    def cheap(request: ModelRequest) -> Turn:
        cheap_requests.append(request)
        return SUMMARY

    model = FunctionModel(watcher, profile=ModelProfile(max_input_tokens=6_000))
    agent = create_agent(
        model,
        tools=[fetch],
        limits=Limits(max_steps=None),
        compaction=Compaction(model=FunctionModel(cheap, name="cheap")),
    )
    result = agent.run("go")
    assert result.output == "all pages fetched"
    assert cheap_requests  # it wrote the summaries
    assert watcher.summaries == 0  # the agent's model wrote none
    assert SUMMARY in result.messages[0].text  # type: ignore[union-attr]
    with pytest.raises(ConfigurationError, match="unknown model provider 'nowhere'"):
        create_agent(model, compaction=Compaction(model="nowhere:x"))
