"""Token counts worked out from characters, for models that report none: about four
characters a token, the rate the scripted test models and LangChain models without
usage both use."""

from __future__ import annotations

import math
from collections.abc import Sequence

from tether.messages import (
    AssistantMessage,
    AssistantPart,
    BinaryPart,
    Message,
    TextPart,
    ThinkingPart,
    ToolCall,
    UserMessage,
    shared_prefix,
)
from tether.models.base import ModelRequest

__all__ = ["CHARS_PER_TOKEN", "InputEstimate", "message_chars", "output_tokens", "part_chars"]

CHARS_PER_TOKEN = 4


def output_tokens(parts: Sequence[AssistantPart]) -> int:
    """The tokens of a reply made of `parts`, at least one."""
    return max(1, math.ceil(sum(part_chars(p) for p in parts) / CHARS_PER_TOKEN))


def part_chars(part: AssistantPart | TextPart | BinaryPart) -> int:
    if isinstance(part, TextPart | ThinkingPart):
        return len(part.text)
    if isinstance(part, ToolCall):
        return len(part.name) + len(str(part.args))
    return len(part.data)


class InputEstimate:
    """Estimates input tokens, counting each message once as the conversation grows.

    A conversation usually grows by appending, or changes near its end, so only the
    messages after those it shares with the last request are counted again.
    """

    def __init__(self) -> None:
        self._fixed: tuple[object, str, int] | None = None
        self._messages: tuple[Message, ...] = ()
        self._sizes: list[int] = []
        self._chars = 0

    def tokens(self, request: ModelRequest) -> int:
        messages = request.messages
        start = shared_prefix(self._messages, messages)
        self._chars -= sum(self._sizes[start:])
        del self._sizes[start:]
        self._sizes += (message_chars(m) for m in messages[start:])
        self._chars += sum(self._sizes[start:])
        chars = self._chars
        self._messages = messages
        fixed = self._fixed_chars(request)
        return max(1, math.ceil((fixed + chars) / CHARS_PER_TOKEN))

    def _fixed_chars(self, request: ModelRequest) -> int:
        """The system prompt and the tools: the same objects at every step of a run (in
        a new tuple: compared element by element, by identity first), so measured once."""
        known = self._fixed
        if known is None or known[0] != request.tools or known[1] != request.system_prompt:
            known = self._fixed = (request.tools, request.system_prompt, _fixed_chars_of(request))
        return known[2]


def _fixed_chars_of(request: ModelRequest) -> int:
    return len(request.system_prompt) + sum(
        len(t.name) + len(t.description) + len(str(t.parameters)) for t in request.tools
    )


def message_chars(message: Message) -> int:
    if isinstance(message, UserMessage):
        return sum(part_chars(p) for p in message.content)
    if isinstance(message, AssistantMessage):
        return sum(part_chars(p) for p in message.parts)
    return sum(part_chars(p) for r in message.results for p in r.content)
