"""Keeping a long run inside the model's input window.

Before each model call, stale tool results are masked (`tether.capabilities.masking`:
old or superseded results of re-runnable tools are sent as short placeholders). Then the
context is measured, as the model is sent it: the input tokens the provider reported
for the last request, plus what was added since at the characters-per-token rate that
report showed. Past `Compaction.trigger` of the window (85%) three things happen, each
only if the one before did not bring the context back under the trigger:

1. Offloading: the arguments of older `write_file`/`edit_file` calls larger than
   `tool_token_limit_before_evict` are replaced by a pointer to the file they wrote.
2. Summarization: the older messages are written in full to
   `/conversation_history/<run>/<n>.md`, then replaced by a structured summary the
   model writes, keeping the most recent `keep` (10%) of the window verbatim.
   (`<run>` is the thread id when the run belongs to a thread.)
   A summary that fails or runs too long becomes a plain marker instead (truncation).
3. A hard guard: while the request would still pass the window, the oldest kept
   exchanges are dropped, and at last the largest remaining texts are cut.

A tool call is never separated from its result: cuts fall just before an assistant
message. Each compaction streams a `Compacted` event.
"""

from __future__ import annotations

import contextlib
import functools
import json
import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any, Literal

from tether import prompts
from tether.backends.base import create
from tether.backends.errors import BackendError
from tether.capabilities.base import Capability
from tether.capabilities.masking import Masking, ResultMasker, offloaded, rereadable
from tether.errors import ConfigurationError, describe
from tether.events import Compacted
from tether.messages import (
    AssistantMessage,
    BinaryPart,
    Message,
    TextPart,
    ThinkingPart,
    ToolCall,
    ToolResult,
    ToolResultMessage,
    UserMessage,
)
from tether.models.base import Model, ModelRequest, ModelResponse, ModelSettings
from tether.models.prices import PriceBook
from tether.state import RunState

if TYPE_CHECKING:
    from tether.tools.tool import Tool

__all__ = ["Compaction", "ContextCompaction", "Masking"]

HISTORY_DIR = "/conversation_history"
_NAME_TRIES = 20  # numbers tried for a history file when others take them first
BINARY_CHARS = 6_400  # an image or document counts as about 1,600 tokens
HARD_LIMIT = 0.95  # the share of the window a request may fill after every step above
SUMMARY_SHARE = 0.25  # a summary longer than this share of the window is not used
TRANSCRIPT_SHARE = 0.5  # the summary request's transcript fills at most this share
DEFAULT_MASKING = Masking()


@dataclass(frozen=True, slots=True)
class Compaction:
    """When a run's context is made smaller, and how much of it is kept.

    `trigger` and `keep` are shares of the model's input window (its profile's
    `max_input_tokens`, or `max_input_tokens` here). For a model whose window is
    unknown, compaction starts at `fallback_trigger_tokens` and keeps the last
    `fallback_keep_messages` messages. `summarize=False` drops old messages instead of
    asking the model for a summary. `model` writes the summaries instead of the agent's
    own model: a cheaper one, say (a `Model` or a "provider:model" string). `masking`
    says which old tool results are sent as placeholders (see `Masking`); None sends
    every result whole until the history is compacted.
    """

    trigger: float = 0.85
    keep: float = 0.10
    max_input_tokens: int | None = None
    fallback_trigger_tokens: int = 170_000
    fallback_keep_messages: int = 6
    summarize: bool = True
    model: Model | str | None = None
    masking: Masking | None = DEFAULT_MASKING

    def __post_init__(self) -> None:
        if not 0 < self.keep < self.trigger <= 1:
            raise ConfigurationError(
                f"Compaction needs 0 < keep < trigger <= 1, got keep={self.keep}, "
                f"trigger={self.trigger}"
            )
        for name in ("max_input_tokens", "fallback_trigger_tokens", "fallback_keep_messages"):
            value = getattr(self, name)
            if value is not None and (isinstance(value, bool) or value < 1):
                raise ConfigurationError(f"Compaction.{name} must be a positive integer")
        if self.masking is not None and not isinstance(self.masking, Masking):
            raise ConfigurationError(
                f"Compaction.masking must be a Masking or None, got {describe(self.masking)}"
            )


@dataclass(slots=True)
class _Window:
    """The token budget of one run's requests."""

    size: int | None  # None: unknown
    trigger: int
    keep_tokens: int | None  # None: keep `keep_messages` instead
    keep_messages: int


class _Meter:
    """Measures a run's requests in characters and converts them to tokens."""

    def __init__(self, fixed_chars: int) -> None:
        self.fixed = fixed_chars
        self.counted = 0
        self.last: Message | None = None
        self.sizes: list[int] = []  # of each message counted
        self.message_chars = 0
        self.changed_from: int | None = None
        self.chars_per_token = 4.0
        self.reported: tuple[int, int] | None = None  # (chars sent, tokens reported)
        self.pending_chars: int | None = None
        self.compactions = 0

    def chars(self, messages: Sequence[Message]) -> int:
        """Characters of a request with `messages`; only new messages are counted when
        the list grew by appending (and those from `recount`'s `start` on)."""
        counted = self.counted
        if self.changed_from is not None:
            counted, self.changed_from = min(counted, self.changed_from, len(messages)), None
        elif counted > len(messages) or (counted and messages[counted - 1] is not self.last):
            counted = 0
        self.message_chars -= sum(self.sizes[counted:])
        del self.sizes[counted:]
        self.sizes += (message_chars(m) for m in messages[counted:])
        self.message_chars += sum(self.sizes[counted:])
        self.counted, self.last = len(messages), (messages[-1] if messages else None)
        return self.fixed + self.message_chars

    def tokens(self, messages: Sequence[Message]) -> int:
        return self.to_tokens(self.chars(messages))

    def recount(self, start: int = 0) -> None:
        """Count the messages from `start` on again at the next call: they were
        rewritten (all of them by default)."""
        self.changed_from = start if self.changed_from is None else min(start, self.changed_from)

    def to_tokens(self, chars: int) -> int:
        """Tokens for a request of `chars`: the last report plus the change since."""
        if self.reported is None:
            return math.ceil(chars / self.chars_per_token)
        sent, reported = self.reported
        return max(0, reported + math.ceil((chars - sent) / self.chars_per_token))

    def calibrate(self, input_tokens: int) -> None:
        sent = self.pending_chars
        if sent is None or input_tokens <= 0:
            return
        self.reported = (sent, input_tokens)
        self.chars_per_token = min(max(sent / input_tokens, 1.0), 8.0)


class ContextCompaction(Capability):
    """Offloads, summarizes and, as a last resort, truncates the history of a run so
    that no request passes the model's input window (see the module docstring)."""

    def __init__(
        self,
        settings: Compaction,
        model: Model,
        prices: PriceBook,
        offload_tokens: int | None,
    ) -> None:
        self.settings = settings
        self.model = model
        summarizer = settings.model
        if isinstance(summarizer, str):
            from tether.models.resolve import infer_model

            summarizer = infer_model(summarizer)
        self.summarizer: Model = summarizer or model
        self.prices = prices
        self.offload_chars = None if offload_tokens is None else offload_tokens * 4
        self._fixed: tuple[object, str, int] | None = None
        self._rerunnable: frozenset[str] = frozenset()
        self._paths: dict[str, str] = {}
        self._gated: frozenset[str] = frozenset()

    def know_tools(self, tools: Mapping[str, Tool], gated: Iterable[str] = ()) -> None:
        """The agent's tools, and those a person may answer for (`interrupt_on`): which
        may have their old results masked (the file tools that read: calling one again
        shows the files as they are), and which argument names a path."""
        readers = rereadable()
        self._rerunnable = frozenset(n for n, t in tools.items() if t.function in readers)
        self._paths = {n: t.path_param for n, t in tools.items() if t.path_param}
        self._gated = frozenset(gated)

    async def before_model(self, state: RunState, request: ModelRequest) -> ModelRequest:
        meter = state.data.get("context")
        if not isinstance(meter, _Meter):
            meter = state.data["context"] = _Meter(self._fixed_chars(request))
        masker = self._masker(state)
        window = self._window
        sent = self._sent(state, meter, masker)
        chars = meter.chars(sent)
        tokens = meter.to_tokens(chars)
        compacted = tokens > window.trigger or bool(
            window.size and tokens > window.size * HARD_LIMIT
        )
        if compacted:

            def resent() -> list[Message]:  # the history was rewritten in place
                if masker is not None:
                    masker.reset()
                meter.recount()
                return self._sent(state, meter, masker)

            await self._compact(state, meter, window, tokens, lambda: meter.tokens(resent()))
            sent = resent()
            chars = meter.chars(sent)
        if masker is not None:
            request = replace(request, messages=tuple(sent), stable_messages=masker.stable)
        elif compacted:
            request = replace(request, messages=tuple(sent))
        meter.pending_chars = chars
        return request

    def _masker(self, state: RunState) -> ResultMasker | None:
        masking = self.settings.masking
        if masking is None or not self._rerunnable:
            return None
        masker = state.data.get("masking")
        if not isinstance(masker, ResultMasker):
            masker = ResultMasker(masking, self._rerunnable, self._paths, self._gated)
            state.data["masking"] = masker
        return masker

    @staticmethod
    def _sent(state: RunState, meter: _Meter, masker: ResultMasker | None) -> list[Message]:
        """The history as the model is sent it: with stale results masked."""
        if masker is None:
            return state.messages
        view, changed = masker.view(state.messages)
        if changed is not None:
            meter.recount(changed)
        return view

    async def compact_now(self, state: RunState) -> None:
        """Make the history as small as it goes now, keeping the latest exchange: what a
        person asks for between runs (`Agent.compact`). Streams `Compacted` if it did."""
        window = replace(self._window, keep_tokens=None, keep_messages=1)
        meter = _Meter(0)
        if _cut(state.messages, meter, window) <= 1:  # one message (a summary) is as small
            return
        await self._compact(state, meter, window, meter.tokens(state.messages), force=True)

    def _fixed_chars(self, request: ModelRequest) -> int:
        """The system prompt and tool specs in characters: the same objects in every run
        of an agent, so they are measured once."""
        known = self._fixed
        if known is not None and known[0] == request.tools and known[1] == request.system_prompt:
            return known[2]
        chars = len(request.system_prompt) + sum(_spec_chars(t) for t in request.tools)
        self._fixed = (request.tools, request.system_prompt, chars)
        return chars

    async def after_model(self, state: RunState, response: ModelResponse) -> ModelResponse:
        meter = state.data.get("context")
        if isinstance(meter, _Meter):
            meter.calibrate(response.usage.input_tokens)
        return response

    @functools.cached_property
    def _window(self) -> _Window:
        """The model's window and this agent's thresholds in tokens (fixed per model)."""
        settings = self.settings
        size = settings.max_input_tokens or getattr(
            getattr(self.model, "profile", None), "max_input_tokens", None
        )
        if size is None:
            return _Window(
                None, settings.fallback_trigger_tokens, None, settings.fallback_keep_messages
            )
        return _Window(size, int(size * settings.trigger), int(size * settings.keep), 0)

    async def _compact(
        self,
        state: RunState,
        meter: _Meter,
        window: _Window,
        before: int,
        measure: Callable[[], int] | None = None,
        *,
        force: bool = False,
    ) -> None:
        """Makes the history smaller, a step at a time; `measure` gives the tokens it
        will be sent as after each step (with stale results masked)."""
        messages = state.messages

        def measured() -> int:
            if measure is not None:
                return measure()
            meter.recount()
            return meter.tokens(messages)

        cut = _cut(messages, meter, window)
        how: Literal["offload", "summary", "truncate"] | None = None
        history = None
        tokens = before
        if self.offload_chars is not None and _offload_inputs(messages, cut, self.offload_chars):
            tokens, how = measured(), "offload"
        if (force or tokens > window.trigger) and cut > 0:
            history = await self._save_history(state, messages[:cut])
            head, how = await self._head(state, meter, window, messages[:cut], history)
            messages[:] = [head, *messages[cut:]]
            tokens = measured()
        if window.size is not None and tokens > window.size * HARD_LIMIT:
            _squeeze(messages, meter, int(window.size * HARD_LIMIT), history)
            squeezed = measured()
            if squeezed < tokens:
                tokens, how = squeezed, "truncate"
        if how is None:
            return  # nothing could be made smaller; the next step tries again
        meter.compactions += 1
        state.emit(Compacted(state.path, how, before, tokens, history))

    async def _save_history(self, state: RunState, old: Sequence[Message]) -> str | None:
        """Writes the messages about to be replaced in full; their path, or None."""
        backend = state.backend
        if backend is None:
            return None
        folder = f"{HISTORY_DIR}/{state.thread_id or state.run_id}"
        try:
            first = len(await backend.ls(folder)) + 1  # a thread's runs share the folder
        except BackendError:
            first = 1
        transcript = render_transcript(old).encode()
        for number in range(first, first + _NAME_TRIES):
            path = f"{folder}/{number}.md"
            try:  # a new file: another agent of the thread may be saving its history too
                await create(backend, path, transcript)
                return path
            except BackendError:
                with contextlib.suppress(BackendError):
                    if await backend.stat(path) is not None:
                        continue  # taken meanwhile: the next number
                return None
        return None

    async def _head(
        self,
        state: RunState,
        meter: _Meter,
        window: _Window,
        old: Sequence[Message],
        history: str | None,
    ) -> tuple[UserMessage, Literal["summary", "truncate"]]:
        """The message that stands for `old`: a summary, or a marker if none is made."""
        summary = None
        if self.settings.summarize:
            summary = await self._summarize(state, meter, window, old)
        if summary is None:
            return _marker(history), "truncate"
        intro = _with_history(prompts.text("context_summary"), history)
        return UserMessage.of(f"{intro}\n\n{summary}"), "summary"

    async def _summarize(
        self, state: RunState, meter: _Meter, window: _Window, old: Sequence[Message]
    ) -> str | None:
        size = window.size or window.trigger
        transcript = render_transcript(old)
        room = int(size * TRANSCRIPT_SHARE * meter.chars_per_token)
        if len(transcript) > room:
            head = room // 5
            transcript = (
                transcript[:head]
                + f"\n\n[... {len(transcript) - room} characters left out ...]\n\n"
                + transcript[-(room - head) :]
            )
        longest = int(size * SUMMARY_SHARE)
        request = ModelRequest(
            system_prompt=prompts.text("summarize"),
            messages=(UserMessage.of(transcript),),
            settings=ModelSettings(max_tokens=longest),
        )
        try:
            response = await self.summarizer.request(request)
        except Exception:  # any failure falls back to truncation
            return None
        state.charge(*self.prices.charge_of(response, self.summarizer, request))
        summary = response.message.text.strip()
        if not summary or len(summary) / meter.chars_per_token > longest:
            return None
        return summary


def _cut(messages: Sequence[Message], meter: _Meter, window: _Window) -> int:
    """Where the kept, verbatim part of the history starts: at an assistant message, so
    no tool call is separated from its result; 0 when nothing can be cut."""
    starts = [i for i, m in enumerate(messages) if isinstance(m, AssistantMessage) and i > 0]
    if not starts:
        return 0
    if window.keep_tokens is None:
        wanted = len(messages) - window.keep_messages
        return next((i for i in starts if i >= wanted), starts[-1])
    budget = window.keep_tokens * meter.chars_per_token
    tail = 0
    best = starts[-1]  # the latest exchange is kept even when it alone is over budget
    for i in reversed(range(len(messages))):
        tail += message_chars(messages[i])
        if tail > budget:
            break
        if i > 0 and isinstance(messages[i], AssistantMessage):
            best = i
    return best


def _offload_inputs(messages: list[Message], end: int, limit: int) -> bool:
    """Replaces large file contents in older successful write/edit calls by a pointer."""
    succeeded = {
        r.call_id
        for m in messages
        if isinstance(m, ToolResultMessage)
        for r in m.results
        if not r.is_error
    }
    changed = False
    for i in range(end):
        message = messages[i]
        if not isinstance(message, AssistantMessage):
            continue
        parts = tuple(
            offloaded(p, limit) if isinstance(p, ToolCall) and p.id in succeeded else p
            for p in message.parts
        )
        if any(new is not old for new, old in zip(parts, message.parts, strict=True)):
            messages[i] = replace(message, parts=parts)
            changed = True
    return changed


def _squeeze(messages: list[Message], meter: _Meter, limit: int, history: str | None) -> None:
    """The last resort: drop the oldest exchanges, then cut the longest texts, until the
    request fits in `limit` tokens."""
    marker = _marker(history)
    while meter.tokens(messages) > limit:
        starts = [i for i, m in enumerate(messages) if isinstance(m, AssistantMessage) and i > 1]
        if len(starts) < 2:
            break
        messages[:] = [marker, *messages[starts[0] :]]
        meter.recount()
    while meter.tokens(messages) > limit:
        over = meter.tokens(messages) - limit
        if not _cut_longest(messages, math.ceil(over * meter.chars_per_token) + 200):
            break
        meter.recount()


def _with_history(text: str, history: str | None) -> str:
    return f"{text} {prompts.render('history_where', path=history)}" if history else text


def _marker(history: str | None) -> UserMessage:
    """What stands for dropped messages: a note saying so, and where they are kept."""
    return UserMessage.of(_with_history(prompts.text("context_dropped"), history))


def _cut_longest(messages: list[Message], chars: int) -> bool:
    """Shortens the longest text in the history by about `chars`; False if none is left
    that can be shortened."""
    found: tuple[int, int, int] | None = None  # (length, message index, part index)
    for i, message in enumerate(messages):
        for j, text in enumerate(_texts(message)):
            if text is not None and len(text) > 400 and (found is None or len(text) > found[0]):
                found = (len(text), i, j)
    if found is None:
        return False
    length, i, j = found
    keep = max(200, length - chars)
    messages[i] = _with_text(messages[i], j, keep)
    return True


def _texts(message: Message) -> list[str | None]:
    """The text of each cuttable piece of a message, in order (None: not text)."""
    if isinstance(message, ToolResultMessage):
        return [r.text for r in message.results]
    if isinstance(message, UserMessage):
        return [p.text if isinstance(p, TextPart) else None for p in message.content]
    return [p.text if isinstance(p, TextPart) else None for p in message.parts]


def _with_text(message: Message, index: int, keep: int) -> Message:
    def cut(text: str) -> str:
        return text[:keep] + "\n" + prompts.render("text_cut", chars=len(text) - keep)

    if isinstance(message, ToolResultMessage):
        results = list(message.results)
        result = results[index]
        binaries = tuple(p for p in result.content if isinstance(p, BinaryPart))
        shortened: tuple[TextPart | BinaryPart, ...] = (TextPart(cut(result.text)), *binaries)
        results[index] = ToolResult(result.call_id, result.name, shortened, result.is_error)
        return ToolResultMessage(tuple(results))
    if isinstance(message, UserMessage):
        content = list(message.content)
        text = content[index]
        assert isinstance(text, TextPart)
        content[index] = TextPart(cut(text.text))
        return replace(message, content=tuple(content))
    parts = list(message.parts)
    part = parts[index]
    assert isinstance(part, TextPart)
    parts[index] = TextPart(cut(part.text))
    return replace(message, parts=tuple(parts))


def message_chars(message: Message) -> int:
    """A message's size as a model sees it, in characters; binaries count as images."""
    if isinstance(message, UserMessage):
        return sum(_part_chars(p) for p in message.content)
    if isinstance(message, AssistantMessage):
        return sum(_part_chars(p) for p in message.parts)
    return sum(_part_chars(p) for r in message.results for p in r.content) + 20 * len(
        message.results
    )


def _part_chars(part: Any) -> int:
    if isinstance(part, TextPart | ThinkingPart):
        return len(part.text)
    if isinstance(part, ToolCall):  # repr is close to the JSON and several times cheaper
        args = part.args if isinstance(part.args, str) else repr(part.args)
        return len(part.name) + len(args) + 20
    if isinstance(part, BinaryPart):
        return BINARY_CHARS
    return 0


def _spec_chars(spec: Any) -> int:
    return len(spec.name) + len(spec.description) + len(json.dumps(spec.parameters))


def render_transcript(messages: Sequence[Message]) -> str:
    """Messages as Markdown, in full: the history files and the summary's input."""
    out: list[str] = []
    for message in messages:
        if isinstance(message, UserMessage):
            out.append("## User\n\n" + _content_text(message.content))
        elif isinstance(message, AssistantMessage):
            lines = ["## Assistant"]
            for part in message.parts:
                if isinstance(part, TextPart) and part.text:
                    lines.append(part.text)
                elif isinstance(part, ToolCall):
                    args = part.args if isinstance(part.args, str) else json.dumps(part.args)
                    lines.append(f"Tool call `{part.name}` ({part.id}): {args}")
            out.append("\n\n".join(lines))
        else:
            for result in message.results:
                mark = " (error)" if result.is_error else ""
                out.append(
                    f"## Tool result `{result.name}` ({result.call_id}){mark}\n\n"
                    + _content_text(result.content)
                )
    return "\n\n".join(out) + "\n"


def _content_text(parts: Sequence[Any]) -> str:
    return "\n".join(
        p.text if isinstance(p, TextPart) else f"[{p.media_type}, {len(p.data)} bytes]"
        for p in parts
    )
