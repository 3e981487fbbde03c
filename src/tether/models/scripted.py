"""Models for tests: a fixed script of turns, or a function that decides each reply.

Both are public so users can test their own agents without a provider or a key, and
both record every request, so a test can check the prompt and tool specs sent.
"""

from __future__ import annotations

import asyncio
import inspect
import json
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from pathlib import Path
from typing import TypeAlias

from tether.errors import ConfigurationError, ScriptExhaustedError
from tether.messages import (
    AssistantMessage,
    AssistantPart,
    TextPart,
    ThinkingPart,
    ToolCall,
    Usage,
    UserMessage,
)
from tether.models.base import ModelRequest, ModelResponse, StreamDelta, StreamItem
from tether.models.estimate import InputEstimate, output_tokens
from tether.models.profiles import ModelProfile

__all__ = ["FunctionModel", "ScriptedModel", "Turn", "script_file_model"]

Turn: TypeAlias = (
    str
    | Sequence[ToolCall | TextPart | ThinkingPart | str]
    | AssistantMessage
    | ModelResponse
    | BaseException
)
"""One scripted reply: text (a final answer), a list of tool calls (and text), a ready
message or response, or an exception to raise from the model."""


class _TestModel:
    """What both test models share: recording requests, usage estimates and streaming."""

    def __init__(self, name: str, profile: ModelProfile | None) -> None:
        self._name = name
        self.profile = profile or ModelProfile()
        """Limits the harness reads, such as `max_input_tokens` for compaction."""
        self._estimate = InputEstimate()
        self.requests: list[ModelRequest] = []
        """Every request received, in order."""

    @property
    def name(self) -> str:
        return self._name

    @property
    def provider(self) -> str:
        return "test"

    async def request(self, request: ModelRequest) -> ModelResponse:
        self.requests.append(request)
        turn = await self._next_turn(request)
        return _response(turn, request, self._name, self._estimate)

    async def stream(self, request: ModelRequest) -> AsyncIterator[StreamItem]:
        response = await self.request(request)
        for delta in _deltas(response.message):
            yield delta
        yield response

    async def _next_turn(self, request: ModelRequest) -> Turn:
        raise NotImplementedError


class ScriptedModel(_TestModel):
    """Replies with the given turns, one per request, in order.

    A turn is a string (a final text answer), a list of `ToolCall`s (a tool turn, which
    may mix in text), an `AssistantMessage`/`ModelResponse` used as-is, or an exception
    instance, raised when its turn comes. Usage is estimated at four characters a token.
    Asking for more turns than the script has raises `ScriptExhaustedError`.
    """

    def __init__(
        self,
        turns: Sequence[Turn],
        *,
        name: str = "scripted",
        profile: ModelProfile | None = None,
    ) -> None:
        if isinstance(turns, str) or not isinstance(turns, Sequence):
            raise ConfigurationError(
                f"ScriptedModel takes a list of turns, got {type(turns).__name__}"
            )
        if not turns:
            raise ConfigurationError(
                "ScriptedModel needs at least one turn: a string for a final answer "
                "or a list of ToolCall for a tool turn"
            )
        super().__init__(name, profile)
        self._turns = list(turns)

    @property
    def remaining(self) -> int:
        """Turns not yet used."""
        return max(0, len(self._turns) - len(self.requests))

    async def _next_turn(self, request: ModelRequest) -> Turn:
        index = len(self.requests) - 1
        if index >= len(self._turns):
            raise ScriptExhaustedError(
                f"ScriptedModel was asked for turn {index + 1}, but its script has only "
                f"{len(self._turns)}; add turns or check why the agent did not stop"
            )
        return self._turns[index]


class FunctionModel(_TestModel):
    """Replies with whatever `function(request)` returns (a `Turn`; it may be async)."""

    def __init__(
        self,
        function: Callable[[ModelRequest], Turn | Awaitable[Turn]],
        *,
        name: str = "function",
        profile: ModelProfile | None = None,
    ) -> None:
        if not callable(function):
            raise ConfigurationError(
                f"FunctionModel takes a callable, got {type(function).__name__}"
            )
        super().__init__(name, profile)
        self._function = function

    async def _next_turn(self, request: ModelRequest) -> Turn:
        turn = self._function(request)
        if inspect.isawaitable(turn):
            turn = await turn
        return turn


def script_file_model(path: str) -> FunctionModel:
    """A model that plays a JSON script file: what `--model test:<file>` gives the CLI.

    The file holds a list of turns, or an object whose keys pick a list by a text found
    in the conversation's first message (so a subagent gets its own turns; the key ""
    matches every conversation). A turn is a string (the final answer) or a list of
    strings and `{"tool": name, "args": {...}}` calls; a `{"pause": seconds}` in the list
    delays the reply (to stop a turn midway). The turn played is the number of replies
    the conversation already has, so a run resumed in another process goes on where it
    stopped.
    """
    try:
        script = json.loads(Path(path).read_text())
    except (OSError, ValueError) as exc:
        raise ConfigurationError(f"cannot read the model script {path!r}: {exc}") from exc
    scripts = script if isinstance(script, dict) else {"": script}
    if not scripts or not all(isinstance(v, list) and v for v in scripts.values()):
        raise ConfigurationError(
            f"the model script {path!r} must hold a list of turns, or an object of such lists"
        )

    async def play(request: ModelRequest) -> Turn:
        opening = request.messages[0] if request.messages else None
        first = opening.text if isinstance(opening, UserMessage) else ""
        key = next((k for k in scripts if k in first), None)
        if key is None:
            raise ScriptExhaustedError(f"no script in {path!r} matches the task {first!r}")
        turns, played = scripts[key], sum(isinstance(m, AssistantMessage) for m in request.messages)
        if played >= len(turns):
            raise ScriptExhaustedError(f"the script {key!r} in {path!r} has no turn {played + 1}")
        turn = turns[played]
        if isinstance(turn, str):
            return turn
        for item in turn:
            if isinstance(item, dict) and "pause" in item:
                await asyncio.sleep(float(item["pause"]))
        return [
            item
            if isinstance(item, str)
            else ToolCall(item["tool"], item.get("args", {}), id=f"call_{played}_{i}")
            for i, item in enumerate(turn)
            if isinstance(item, str) or "pause" not in item
        ]

    return FunctionModel(play, name=Path(path).name)


def _response(
    turn: Turn, request: ModelRequest, model_name: str, estimate: InputEstimate
) -> ModelResponse:
    if isinstance(turn, BaseException):
        raise turn
    if isinstance(turn, ModelResponse):
        return turn
    if isinstance(turn, AssistantMessage):
        return ModelResponse(turn, finish_reason=_finish_reason(turn))
    parts = _parts(turn)
    usage = Usage(
        input_tokens=estimate.tokens(request),
        output_tokens=output_tokens(parts),
        requests=1,
    )
    message = AssistantMessage(parts, model_name=model_name, usage=usage)
    return ModelResponse(message, finish_reason=_finish_reason(message))


def _parts(
    turn: str | Sequence[ToolCall | TextPart | ThinkingPart | str],
) -> tuple[AssistantPart, ...]:
    if isinstance(turn, str):
        return (TextPart(turn),)
    parts: list[AssistantPart] = []
    for item in turn:
        if isinstance(item, str):
            parts.append(TextPart(item))
        elif isinstance(item, ToolCall | TextPart | ThinkingPart):
            parts.append(item)
        else:
            raise ConfigurationError(
                f"a scripted turn may hold ToolCall, TextPart, ThinkingPart or str, "
                f"not {type(item).__name__}"
            )
    return tuple(parts)


def _finish_reason(message: AssistantMessage) -> str:
    return "tool_calls" if message.tool_calls else "stop"


def _deltas(message: AssistantMessage) -> list[StreamDelta]:
    deltas: list[StreamDelta] = []
    calls = 0
    for part in message.parts:
        if isinstance(part, TextPart) and part.text:
            deltas.append(StreamDelta("text", part.text))
        elif isinstance(part, ThinkingPart) and part.text:
            deltas.append(StreamDelta("thinking", part.text))
        elif isinstance(part, ToolCall):
            args = part.args if isinstance(part.args, str) else json.dumps(part.args)
            deltas.append(StreamDelta("tool_call", args, part.id, part.name, calls))
            calls += 1
    return deltas
