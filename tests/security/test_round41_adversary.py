"""Round 41, adversarial review: grep's whole-file search of text patterns, a served
run's followers gathering events before they write, and the offline model loading in
its worker thread (requantized to Q8_0 by default).

Found and fixed: a request cancelled while the model loaded, or while it generated,
kept the engine working for no one. Not fixable here: the engine holds Python's
interpreter lock while it loads the model (see docs/guides/models.md)."""

from __future__ import annotations

import asyncio
import random
import sys
import threading
import types
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from tether.backends.base import GrepHit
from tether.backends.search import compile_pattern, grep_text, split_lines
from tether.errors import ConfigurationError
from tether.messages import UserMessage
from tether.models import ModelRequest, local

HANG = 30.0  # seconds: only to turn a hang into a failure, never a measure of speed


# -- grep: the whole-file search of a text pattern ---------------------------------------


def _line_by_line(data: bytes, pattern: str, *, literal: bool, ignore_case: bool) -> list[GrepHit]:
    """grep's answer as it was: every line tested on its own by the line regex."""
    regex = compile_pattern(pattern, literal=literal, ignore_case=ignore_case)
    if b"\x00" in data:
        return []
    return [
        GrepHit("/f", number, line.decode("utf-8", errors="replace"))
        for number, line in enumerate(split_lines(data), start=1)
        if regex.line.search(line) is not None
    ]


_CHARS = [
    "a", "A", "k", "K", "\u212a", "s", "S", "\u017f", "ß", "ẞ", "é", "É", "ǅ", "ǆ", "Ǆ",
    "ς", "\u03c3", "Σ", "ΐ", "ΐ", "i", "I", "İ", "\u0131", "ﬀ", "\u0345", "\u03b9", "Ω", "Ω",
    "µ", "μ",
    "ÿ", "Ÿ", "\r", "\t", " ", "#", "-", ",", "'", "x", "\x00", "\x7f", "\u2028", "\x85",
]  # fmt: skip
_RAW = [
    b"\n", b"\r\n", b"\n\n", b"\xff", b"\xc3", b"\xe2\x84", b"\x84\xaa", b"\xa9",
    b"\xed\xa0\x80", b"\xf4\x90\x80\x80", b"\xc0\x80", b"\xe2\x80\xa8", b"\xc2\x85",
]  # fmt: skip


def test_grep_of_text_finds_what_each_line_test_finds_on_hostile_bytes() -> None:
    """Seeded (so the same every run): case folds that change a character's length,
    invalid UTF-8 cut at line ends, Unicode line separators RE2 does not split at,
    CR, NUL in the pattern, the pattern at a line's start and end."""
    rng = random.Random(41)
    checked = 0
    while checked < 4000:
        pattern = "".join(rng.choice(_CHARS) for _ in range(rng.randint(1, 3)))
        parts: list[bytes] = []
        for _ in range(rng.randint(0, 16)):
            r = rng.random()
            if r < 0.3:
                parts.append(rng.choice(_RAW))
            elif r < 0.55:
                parts.append((pattern if rng.random() < 0.5 else pattern.swapcase()).encode())
            else:
                parts.append(rng.choice(_CHARS).replace("\x00", "").encode())
        data = b"".join(parts)
        literal, ignore_case = rng.random() < 0.5, rng.random() < 0.5
        regex = compile_pattern(pattern, literal=literal, ignore_case=ignore_case)
        assert regex.one_line
        expected = _line_by_line(data, pattern, literal=literal, ignore_case=ignore_case)
        assert grep_text("/f", data, regex) == expected, (pattern, literal, ignore_case, data)
        checked += 1


@pytest.mark.parametrize("ignore_case", [False, True])
@pytest.mark.parametrize(
    ("data", "lines"),
    [
        (b"needle", [1]),  # the whole file, no newline
        (b"needle\n", [1]),
        (b"\nneedle", [2]),  # last line without newline
        (b"\n\n\nneedle\n\n", [4]),
        (b"needleneedleneedle\nx\nneedle", [1, 3]),  # many a line
        (b"x\r\nneedle\r\n", [2]),
        (b"need\nle\n", []),  # not across a line break
        (b"\n" * 50, []),
        (b"", []),
        (b"needle\x00", []),  # binary
        (b"\xffneedle\xc3\n\xa9needle", [1, 2]),
    ],
)
def test_grep_of_text_numbers_and_cuts_lines_as_before(
    data: bytes, lines: list[int], ignore_case: bool
) -> None:
    for literal in (False, True):
        regex = compile_pattern("needle", literal=literal, ignore_case=ignore_case)
        got = grep_text("/f", data, regex)
        assert got == _line_by_line(data, "needle", literal=literal, ignore_case=ignore_case)
        assert [h.line for h in got] == lines


def test_grep_of_a_pattern_with_a_nul_or_a_line_break() -> None:
    nul = compile_pattern("a\x00b", literal=False, ignore_case=False)
    assert grep_text("/f", b"a\x00b\n", nul) == []  # a file holding it is binary
    broken = compile_pattern("a\nb", literal=True, ignore_case=False)
    assert not broken.one_line  # tested line by line: no line holds a "\n"
    assert grep_text("/f", b"a\nb\n", broken) == []
    with pytest.raises(Exception, match="empty"):
        compile_pattern("", literal=True, ignore_case=False)


class _Counted(bytes):
    """Bytes that tally how much of themselves each search reads."""

    read = 0

    def _add(self, start: int, stop: int) -> None:
        type(self).read += max(0, stop - start)

    def find(self, sub: Any, start: Any = 0, end: Any = None) -> int:
        found = super().find(sub, start, end)
        self._add(start or 0, len(self) if found < 0 else found + len(sub))
        return found

    def rfind(self, sub: Any, start: Any = 0, end: Any = None) -> int:
        found = super().rfind(sub, start, end)
        self._add(max(found, start or 0), len(self) if end is None else end)
        return found

    def count(self, sub: Any, start: Any = 0, end: Any = None) -> int:
        self._add(start or 0, len(self) if end is None else end)
        return super().count(sub, start, end)


@pytest.mark.parametrize(
    "data",
    [
        b"needle " * 20_000,  # one line, many matches
        b"needle\n" * 20_000,  # many lines, each a match
        (b"x" * 500 + b"needle\n") * 200,  # long lines, the match at the end
        (b"needle" + b"x" * 500 + b"\n") * 200,  # the match at the start
        b"\n" * 50_000 + b"needle",  # many empty lines, then one
    ],
)
def test_grep_of_text_reads_the_file_a_bounded_number_of_times(data: bytes) -> None:
    """Stalling everyone: no rescanning. Counted, not timed: every search (`find`,
    `rfind`, `count`) of the file reads at most a few times its length in all."""
    regex = compile_pattern("needle", literal=True, ignore_case=False)
    counted = _Counted(data)
    _Counted.read = 0
    hits = grep_text("/f", counted, regex)
    assert hits == _line_by_line(data, "needle", literal=True, ignore_case=False)
    assert _Counted.read <= 4 * len(data) + 64


class _Whole:
    """A proxy of a pattern's whole-file regex recording where each search starts."""

    def __init__(self, regex: Any) -> None:
        self.regex = regex
        self.starts: list[int] = []

    def search(self, data: bytes, pos: int = 0, *rest: Any) -> Any:
        self.starts.append(pos)
        return self.regex.search(data, pos, *rest)


@pytest.mark.parametrize(
    "data",
    [
        b"KnEeDlE " * 20_000,
        b"kneedle\n" * 20_000,
        (b"x" * 300 + "\u212aNEEDLE".encode() + b"\n") * 300,
    ],
)
def test_grep_ignoring_case_searches_once_a_matching_line(data: bytes) -> None:
    regex = compile_pattern("kneedle", literal=False, ignore_case=True)
    spy = _Whole(regex.whole)
    regex.whole = spy
    hits = grep_text("/f", data, regex)
    assert len(hits) == len(split_lines(data))
    assert len(spy.starts) <= len(hits) + 1  # one search a matching line, one to end
    assert spy.starts == sorted(set(spy.starts))  # never back over what it read
    assert all(s == 0 or data[s - 1 : s] == b"\n" for s in spy.starts)  # at line starts


# -- serve: a follower gathers what comes soon, the run's end goes at once ------------------


class _Translator:
    """Passes AG-UI events through as they are (the events fed are AG-UI's already)."""

    thread_id = "t"
    run_id = "r"

    def piece(self, event: Any) -> None:
        return None

    def translate(self, event: Any) -> list[Any]:
        return [event]

    def failed(self, error: BaseException) -> list[Any]:
        from ag_ui.core import RunErrorEvent

        return [RunErrorEvent(message=str(error), code=type(error).__name__)]

    def stopped(self) -> list[Any]:
        from ag_ui.core import RunFinishedEvent

        return [RunFinishedEvent(thread_id="t", run_id="r", metadata={"stopped": True})]


class _Agent:
    async def aabandon(self, thread_id: str, wait: float = 0) -> bool:
        return True


class _GatherSeen(asyncio.Event):
    """The run's end event, telling when a follower starts gathering on it."""

    def __init__(self, ended: asyncio.Event) -> None:
        super().__init__()
        self.gathering = asyncio.Event()
        if ended.is_set():
            self.set()

    async def wait(self) -> Any:
        self.gathering.set()
        return await super().wait()


async def _live_run(monkeypatch: pytest.MonkeyPatch) -> tuple[Any, asyncio.Queue[Any]]:
    """A live run fed AG-UI events from a queue (None ends it), followers gathering for
    an hour: what a test sees at once it saw without any gathering."""
    from tether.serve import _live

    monkeypatch.setattr(_live, "_GATHER_SECONDS", 3600.0)
    feed: asyncio.Queue[Any] = asyncio.Queue()

    async def events() -> AsyncIterator[Any]:
        while (event := await feed.get()) is not None:
            yield event

    live = _live.LiveRun(_Agent(), "t", _Translator(), [])  # type: ignore[arg-type]
    live._ended = _GatherSeen(live._ended)
    live.task = asyncio.create_task(live.drive(events()))
    return live, feed


def _started() -> Any:
    from ag_ui.core import RunStartedEvent

    return RunStartedEvent(thread_id="t", run_id="r")


def _text(delta: str) -> Any:
    from ag_ui.core import TextMessageContentEvent

    return TextMessageContentEvent(message_id="m", delta=delta)


async def test_a_follower_writes_the_runs_end_at_once_whatever_it_gathers(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    live, feed = await _live_run(monkeypatch)
    feed.put_nowait(_started())
    followed = live.follow()
    assert "RUN_STARTED" in await asyncio.wait_for(followed.__anext__(), HANG)
    reading = asyncio.ensure_future(followed.__anext__())
    feed.put_nowait(_text("one"))
    await asyncio.wait_for(live._ended.gathering.wait(), HANG)  # woken, now gathering
    feed.put_nowait(_text("two"))
    feed.put_nowait(None)  # the run ends: what gathered goes in one write, at once
    written = await asyncio.wait_for(reading, HANG)
    assert '"one"' in written
    assert '"two"' in written
    with pytest.raises(StopAsyncIteration):
        await asyncio.wait_for(followed.__anext__(), HANG)


async def test_a_follower_leaving_while_it_gathers_leaves_the_run_and_the_others(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    live, feed = await _live_run(monkeypatch)
    feed.put_nowait(_started())
    got: list[str] = []

    async def read(into: list[str] | None) -> None:
        async for chunk in live.follow():
            if into is not None:
                into.append(chunk)

    leaving = asyncio.create_task(read(None))
    staying = asyncio.create_task(read(got))
    await asyncio.sleep(0)
    feed.put_nowait(_text("one"))
    await asyncio.wait_for(live._ended.gathering.wait(), HANG)
    leaving.cancel()  # a client gone while its stream gathers
    with pytest.raises(asyncio.CancelledError):
        await asyncio.wait_for(leaving, HANG)
    assert not live.done
    assert not live.task.done()
    feed.put_nowait(_text("two"))
    feed.put_nowait(None)
    await asyncio.wait_for(staying, HANG)
    body = "".join(got)
    assert body.index('"one"') < body.index('"two"')
    assert live.done


async def test_a_stop_while_followers_gather_is_written_at_once(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    live, feed = await _live_run(monkeypatch)
    feed.put_nowait(_started())
    await asyncio.wait_for(live.begun(), HANG)
    followed = live.follow()
    await asyncio.wait_for(followed.__anext__(), HANG)
    reading = asyncio.ensure_future(followed.__anext__())
    feed.put_nowait(_text("one"))
    await asyncio.wait_for(live._ended.gathering.wait(), HANG)
    await asyncio.wait_for(live.stop(), HANG)
    written = await asyncio.wait_for(reading, HANG)
    assert '"one"' in written
    assert '"stopped":true' in written


# -- the offline model: loading off the loop, once, and cancelled -------------------------


def _plain_request() -> ModelRequest:
    return ModelRequest(system_prompt="Be brief.", messages=(UserMessage.of("hi"),), tools=())


class _Chunk:
    def __init__(self, text: str, finished: str | None = None) -> None:
        delta = types.SimpleNamespace(content=text)
        self.choices = [types.SimpleNamespace(delta=delta, finish_reason=finished)]
        self.usage = None


class _FakeEngine:
    """A mistralrs stand-in: loading waits on `release`; each generated chunk waits on
    `more`; it records what the worker thread was asked to do."""

    def __init__(self, chunks: int = 3) -> None:
        self.release = threading.Event()
        self.loading = threading.Event()
        self.more = threading.Semaphore(0)
        self.loads = 0
        self.sent = 0
        self.pulled = 0
        self.chunks = chunks
        engine = self

        class Which:
            @staticmethod
            def GGUF(**kwargs: Any) -> dict[str, Any]:
                return kwargs

        class Runner:
            def __init__(self, **kwargs: Any) -> None:
                engine.loads += 1
                engine.loading.set()
                assert engine.release.wait(HANG), "the test never released the load"

            def send_chat_completion_request(self, chat: Any) -> Any:
                engine.sent += 1
                return engine._generate()

        module = types.ModuleType("mistralrs")
        module.Which = Which  # type: ignore[attr-defined]
        module.Runner = Runner  # type: ignore[attr-defined]
        module.ChatCompletionRequest = dict  # type: ignore[attr-defined]
        self.module = module

    def _generate(self) -> Any:
        for n in range(self.chunks):
            if not self.more.acquire(timeout=HANG):
                return
            self.pulled += 1
            yield _Chunk(f"w{n} ", "stop" if n == self.chunks - 1 else None)


@pytest.fixture
def fake_engine(monkeypatch: pytest.MonkeyPatch) -> Any:
    engine = _FakeEngine()
    monkeypatch.setitem(sys.modules, "mistralrs", engine.module)
    local._runner.cache_clear()
    yield engine
    engine.release.set()
    for _ in range(engine.chunks * 4):
        engine.more.release()
    _join_model_threads()
    local._runner.cache_clear()


def _join_model_threads() -> None:
    """Wait for every worker thread of the offline model to end."""
    for thread in threading.enumerate():
        if thread.name == "tether-local-model":
            thread.join(HANG)
            assert not thread.is_alive(), "a model thread is stuck"


async def test_two_requests_at_once_load_the_model_once_off_the_loop(fake_engine: Any) -> None:
    model = local.LocalModel(max_output_tokens=5)
    first = asyncio.create_task(model.request(_plain_request()))
    second = asyncio.create_task(local.LocalModel(max_output_tokens=5).request(_plain_request()))
    # the loop runs on while the first load waits: it is what lets the load go on
    await asyncio.to_thread(fake_engine.loading.wait, HANG)
    fake_engine.release.set()
    for _ in range(2 * fake_engine.chunks):
        fake_engine.more.release()
    answers = await asyncio.wait_for(asyncio.gather(first, second), HANG)
    assert [a.message.text for a in answers] == ["w0 w1 w2 "] * 2
    assert fake_engine.loads == 1


async def test_a_missing_engine_is_a_configuration_error_every_time(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setitem(sys.modules, "mistralrs", None)  # as if the extra were missing
    local._runner.cache_clear()
    try:
        for _ in range(2):  # the loading lock is let go after a failure: no hang
            with pytest.raises(ConfigurationError, match="local"):
                await asyncio.wait_for(local.LocalModel().request(_plain_request()), HANG)
    finally:
        local._runner.cache_clear()


async def test_a_bad_requantization_is_a_configuration_error() -> None:
    pytest.importorskip("mistralrs")
    local._runner.cache_clear()
    try:
        for bad in ("Q9_9", 8):
            model = local.LocalModel(requantize=bad)  # type: ignore[arg-type]
            with pytest.raises(ConfigurationError, match="could not load"):
                await asyncio.wait_for(model.request(_plain_request()), HANG)
    finally:
        local._runner.cache_clear()


async def test_a_bad_gguf_file_is_a_configuration_error(tmp_path: Path) -> None:
    pytest.importorskip("mistralrs")
    bad = tmp_path / "bad.gguf"
    bad.write_bytes(b"GGUF" + b"\xff" * 64)
    with pytest.raises(ConfigurationError, match="could not load"):
        await asyncio.wait_for(local.LocalModel(path=bad).request(_plain_request()), HANG)


# A run cancelled while the model loads: its worker thread must not start a generation
# once the load ends (it did: the engine spent up to max_output_tokens on no one).
async def test_a_request_cancelled_while_the_model_loads_generates_nothing(
    fake_engine: Any,
) -> None:
    asking = asyncio.create_task(local.LocalModel().request(_plain_request()))
    await asyncio.to_thread(fake_engine.loading.wait, HANG)
    asking.cancel()
    with pytest.raises(asyncio.CancelledError):
        await asking
    fake_engine.release.set()
    for _ in range(fake_engine.chunks):
        fake_engine.more.release()
    await asyncio.to_thread(_join_model_threads)
    assert fake_engine.sent == 0, "the cancelled request was sent to the engine"


# The same in generation: the worker thread stops pulling chunks once the request that
# wanted them is cancelled.
async def test_a_request_cancelled_while_generating_stops_pulling(fake_engine: Any) -> None:
    fake_engine.release.set()
    first = asyncio.Event()

    async def read() -> None:
        async for _ in local.LocalModel().stream(_plain_request()):
            first.set()

    reading = asyncio.create_task(read())
    fake_engine.more.release()  # one chunk
    await asyncio.wait_for(first.wait(), HANG)
    reading.cancel()
    with pytest.raises(asyncio.CancelledError):
        await reading
    for _ in range(fake_engine.chunks):  # the engine could go on: nothing should pull
        fake_engine.more.release()
    await asyncio.to_thread(_join_model_threads)
    # the one the thread was already waiting for when the request was cancelled, no more
    assert fake_engine.pulled <= 2 < fake_engine.chunks, "chunks were pulled for no one"
