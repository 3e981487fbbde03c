"""Sending old tool results as short placeholders: what a long run costs, step by step.

Tool results are most of what a long run sends, and every request sends them all again.
Most are stale long before the run ends: a file read ten turns ago, or read again since,
or changed since by an edit. Masking them (the call stays, its result becomes a one-line
placeholder saying how to get it back) halves the cost of coding-agent trajectories at
the same solve rate as summarizing them (Lindenbauer et al., "The Complexity Trap",
arXiv 2508.21433). Only results a call can give again are masked: those of tools marked
`read_only` and `idempotent` (`ls`, `read_file`, `glob`, `grep` and any tool of yours so
marked). A command's output, a subagent's answer or an MCP result is never masked.

A result is stale once `Masking.keep_turns` turns have passed since it came, or when a
later call supersedes it: the same call again, or a call that changes its file (a
`write_file` or `edit_file` of the path a `read_file` showed). A result that repeats the
latest one of the same call word for word is sent as a reference to it.

Masking changes what the model was sent before, which costs a fresh write of the
provider's prompt cache from that point on. So stale results are masked together, once
they add up to `Masking.batch_tokens`: between batches the request only grows, and each
step reads all of it from the cache. The run's own history keeps every result in full;
only what the model is sent changes.
"""

from __future__ import annotations

import json
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from tether import prompts
from tether.backends.errors import BackendError
from tether.backends.paths import clean
from tether.errors import ConfigurationError
from tether.messages import (
    AssistantMessage,
    Message,
    TextPart,
    ToolCall,
    ToolResult,
    ToolResultMessage,
)
from tether.tools import files

__all__ = ["Masking", "ResultMasker", "offloaded", "rereadable"]

_WORTH = 0.5  # a batch clears at least this share of the live results' size
# What a write put in its file. Not an edit's `old_string`: the file no longer holds it.
_OFFLOADED_ARGS = {"write_file": ("content",), "edit_file": ("new_string",)}


@dataclass(frozen=True, slots=True)
class Masking:
    """Which old tool results the model is sent as placeholders (see the module).

    `keep_turns`: a result is kept whole for this many turns of the model after it came.
    `min_chars`: results shorter than this are kept whole (a placeholder saves little).
    `batch_tokens`: stale results are masked together once they add up to this many
    tokens (at four characters a token), so the cached prefix breaks rarely.
    """

    keep_turns: int = 6
    min_chars: int = 400
    batch_tokens: int = 4_000

    def __post_init__(self) -> None:
        for name in ("keep_turns", "min_chars", "batch_tokens"):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                raise ConfigurationError(f"Masking.{name} must be a positive integer")


@dataclass(slots=True)
class _Held:
    """A result the model is sent whole, and could be sent as a placeholder."""

    index: int  # of its ToolResultMessage in the history
    slot: int  # its place among that message's results
    call: ToolCall
    chars: int
    text: str
    turn: int  # the turn it came in, or was last repeated in
    stale: bool = False


@dataclass(slots=True)
class _Progress:
    """What a masker knows of the history it has seen so far. Results are known by a
    number of their own, not by call id: ids from outside may repeat."""

    seen: int = 0
    last: Message | None = None
    view: list[Message] = field(default_factory=list)
    turn: int = 0
    calls: dict[str, ToolCall | None] = field(default_factory=dict)  # None: id given twice
    numbers: int = 0
    held: dict[int, _Held] = field(default_factory=dict)  # in the order they came
    latest: dict[str, int] = field(default_factory=dict)  # call key -> held number
    by_path: dict[str, set[int]] = field(default_factory=dict)  # file -> held numbers
    ages: deque[tuple[int, int]] = field(default_factory=deque)  # (turn, held number)
    inputs: deque[tuple[int, int, int]] = field(default_factory=deque)  # turn, index, chars
    stale_inputs: list[int] = field(default_factory=list)  # indexes of assistant messages
    failed: set[str] = field(default_factory=set)  # write and edit calls that failed
    stale_chars: int = 0
    live_chars: int = 0  # of held results not stale yet
    mark: int = 0  # `ResultMasker.stable`
    changed_from: int | None = None  # the first message the last batch changed


class ResultMasker:
    """The history as the model is sent it, kept up to date one step at a time: the
    work of a step is in proportion to what the step added, not to the history.

    `rerunnable` names the tools whose results may be masked; `paths` gives, for each
    tool that names a file, the argument that names it; `gated` names tools a person may
    answer for (`Respond`): their results and contents are never taken for the tool's.
    """

    def __init__(
        self,
        settings: Masking,
        rerunnable: frozenset[str],
        paths: Mapping[str, str],
        gated: frozenset[str] = frozenset(),
    ) -> None:
        self.settings = settings
        self.rerunnable = rerunnable - gated
        self.paths = paths
        self.gated = gated
        self._s = _Progress()

    def view(self, messages: Sequence[Message]) -> tuple[list[Message], int | None]:
        """What the model is sent for `messages`, and the first message it was sent
        before that has changed since (a batch was masked, or the history rewritten:
        0), or None when the view only grew."""
        s = self._s
        rewritten = s.seen > len(messages) or bool(s.seen and messages[s.seen - 1] is not s.last)
        if rewritten:
            self.reset()
            s = self._s
        for index in range(s.seen, len(messages)):
            s.view.append(self._take(index, messages[index]))
        s.seen = len(messages)
        s.last = messages[-1] if messages else None
        self._age()
        s.mark = self._stable()  # before a batch: the part the cache already holds
        # A batch costs a fresh cache write of what follows its first result: worth it
        # once what it clears is big, and big next to the live results after it.
        worth = s.stale_chars >= max(self.settings.batch_tokens * 4, s.live_chars * _WORTH)
        changed = self._mask() if worth else None
        return s.view, 0 if rewritten else changed

    @property
    def stable(self) -> int:
        """How many leading messages of the last view the cache holds as they are:
        those before the first result that could still be masked (or write offloaded)
        when the view was asked for. A batch masks only after them, so a breakpoint
        there keeps them cached across it."""
        return self._s.mark

    def _stable(self) -> int:
        s = self._s
        firsts = [s.seen]
        if s.held:  # in the order they came, so the first is the earliest
            firsts.append(next(iter(s.held.values())).index)
        if s.inputs:
            firsts.append(s.inputs[0][1])
        if s.stale_inputs:
            firsts.append(s.stale_inputs[0])
        return min(firsts)

    def reset(self) -> None:
        """Start again from the first message at the next `view`: the history was
        rewritten in place (compaction)."""
        self._s = _Progress()

    def _take(self, index: int, message: Message) -> Message:
        s = self._s
        if isinstance(message, AssistantMessage):
            s.turn += 1
            s.calls = {}
            saved = 0
            for call in message.tool_calls:
                s.calls[call.id] = None if call.id in s.calls else call
                if call.name in _OFFLOADED_ARGS and call.name not in self.gated:
                    shorter = offloaded(call, self.settings.min_chars)
                    if shorter is not call:
                        saved += len(json.dumps(call.args)) - len(json.dumps(shorter.args))
            if saved > 0:
                s.inputs.append((s.turn, index, saved))
            return message
        if not isinstance(message, ToolResultMessage):
            return message
        results = tuple(self._result(index, slot, r) for slot, r in enumerate(message.results))
        if all(new is old for new, old in zip(results, message.results, strict=True)):
            return message
        return ToolResultMessage(results)

    def _result(self, index: int, slot: int, result: ToolResult) -> ToolResult:
        s = self._s
        call = s.calls.get(result.call_id)
        if call is None:
            return result  # not this turn's, or its id names two calls: leave it be
        if result.is_error:
            if call.name in _OFFLOADED_ARGS:
                s.failed.add(call.id)  # the file does not hold what it wrote
            return result
        key = _key(call)
        path = self._path(call)
        latest = s.held.get(s.latest.get(key, -1))
        textual = all(isinstance(p, TextPart) for p in result.content)
        if latest is not None and not latest.stale and textual and result.text == latest.text:
            latest.turn = s.turn  # the same text again: it stays current
            s.ages.append((s.turn, s.latest[key]))
            return _replaced(result, prompts.text("result_repeated"))
        if latest is not None:
            self._make_stale(latest)
        if path is not None and call.name not in self.rerunnable:
            for number in s.by_path.pop(path, ()):  # the file changed
                self._make_stale(s.held[number])
        if call.name in self.rerunnable and textual and len(result.text) >= self.settings.min_chars:
            number = s.numbers = s.numbers + 1
            s.held[number] = _Held(index, slot, call, len(result.text), result.text, s.turn)
            s.live_chars += len(result.text)
            s.latest[key] = number
            s.ages.append((s.turn, number))
            if path is not None:
                s.by_path.setdefault(path, set()).add(number)
        return result

    def _path(self, call: ToolCall) -> str | None:
        """The file a call names, as the file tools read it ("a.py" is "/a.py")."""
        param = self.paths.get(call.name)
        value = call.args.get(param) if param and isinstance(call.args, dict) else None
        try:
            return clean(value) if isinstance(value, str) else None
        except BackendError:
            return None  # the call failed on it

    def _age(self) -> None:
        """Makes stale the results that have been kept `keep_turns` turns."""
        s = self._s
        ages, oldest = s.ages, s.turn - self.settings.keep_turns
        while ages and ages[0][0] <= oldest:
            turn, number = ages.popleft()
            held = s.held.get(number)
            if held is not None and held.turn == turn:  # not repeated since
                self._make_stale(held)
        inputs = s.inputs
        while inputs and inputs[0][0] <= oldest:
            _, index, saved = inputs.popleft()
            s.stale_inputs.append(index)
            s.stale_chars += saved

    def _make_stale(self, held: _Held) -> None:
        if not held.stale:
            held.stale = True
            self._s.stale_chars += held.chars
            self._s.live_chars -= held.chars

    def _mask(self) -> int | None:
        """Sends every stale result as a placeholder, and every stale write's content
        as a pointer to its file, from now on; the first message changed, if any."""
        s = self._s
        # A result of the newest turn is sent whole at least once, even if a call of
        # the same turn superseded it: the model has not seen it yet.
        stale = [n for n, h in s.held.items() if h.stale and h.turn < s.turn]
        waiting = sum(h.chars for h in s.held.values() if h.stale and h.turn == s.turn)
        by_message: dict[int, dict[int, ToolCall]] = {}
        for number in stale:
            held = s.held.pop(number)
            by_message.setdefault(held.index, {})[held.slot] = held.call
        for index, cleared in by_message.items():
            message = s.view[index]
            assert isinstance(message, ToolResultMessage)
            s.view[index] = ToolResultMessage(
                tuple(
                    _placeholder(r, cleared[slot]) if slot in cleared else r
                    for slot, r in enumerate(message.results)
                )
            )
        for index in s.stale_inputs:
            message = s.view[index]
            assert isinstance(message, AssistantMessage)
            s.view[index] = self._offloaded(message)
        s.latest = {key: n for key, n in s.latest.items() if n in s.held}
        s.by_path = {p: kept for p, ns in s.by_path.items() if (kept := ns & s.held.keys())}
        first = min([*by_message, *s.stale_inputs], default=None)
        s.stale_inputs, s.stale_chars = [], waiting
        return first

    def _offloaded(self, message: AssistantMessage) -> AssistantMessage:
        """`message` with the file contents of its successful writes and edits replaced
        by pointers to the files: the model reads the file to see them."""
        limit, failed, gated = self.settings.min_chars, self._s.failed, self.gated
        parts = tuple(
            offloaded(p, limit)
            if isinstance(p, ToolCall) and p.id not in failed and p.name not in gated
            else p
            for p in message.parts
        )
        return replace(message, parts=parts)


def _key(call: ToolCall) -> str:
    args = call.args if isinstance(call.args, str) else json.dumps(call.args, sort_keys=True)
    return f"{call.name} {args}"


def _replaced(result: ToolResult, text: str) -> ToolResult:
    return ToolResult(result.call_id, result.name, (TextPart(text),), result.is_error)


def _placeholder(result: ToolResult, call: ToolCall) -> ToolResult:
    # Short: it is sent on every later request (a longer one cost 2% more in bench/session.py)
    return _replaced(result, prompts.render("result_masked", tool=call.name))


def offloaded(call: ToolCall, limit: int) -> ToolCall:
    """`call` with each file content in its arguments longer than `limit` characters
    replaced by a pointer to the file it was written to (a `write_file`'s content, an
    `edit_file`'s new text); `call` itself when there is none."""
    keys = _OFFLOADED_ARGS.get(call.name)
    if keys is None or not isinstance(call.args, dict):
        return call
    args = dict(call.args)
    path = args.get("file_path", "the file")
    for key in keys:
        value = args.get(key)
        if isinstance(value, str) and len(value) > limit:
            args[key] = prompts.render("offloaded_input", chars=len(value), path=path)
    return call if args == call.args else replace(call, args=args)


def rereadable() -> frozenset[Callable[..., Any]]:
    """The functions of the tools whose old results may be masked: the file tools that
    read (`ls`, `read_file`, `glob`, `grep`). Called again, each shows the files as they
    are then. A tool of your own, even read-only and idempotent, may not give its result
    again (a queue, a search, a clock), so none is masked."""
    return frozenset({files.ls, files.read_file, files.glob, files.grep})
