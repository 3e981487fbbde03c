"""The seam between the loop and a model: one request in, one response out."""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol, TypeAlias, runtime_checkable

from tether.errors import ModelError
from tether.messages import AssistantMessage, Message, Usage

__all__ = [
    "Model",
    "ModelRequest",
    "ModelResponse",
    "ModelSettings",
    "StreamDelta",
    "StreamItem",
    "ToolSpec",
    "response_of",
]


@dataclass(frozen=True, slots=True)
class ToolSpec:
    """A tool as the model sees it: name, description and JSON schema of its arguments."""

    name: str
    description: str
    parameters: Mapping[str, Any]


@dataclass(frozen=True, slots=True)
class ModelSettings:
    """Per-request knobs; `None` leaves the provider's default. `extra` goes to the wire as-is."""

    max_tokens: int | None = None
    temperature: float | None = None
    timeout_seconds: float | None = None
    extra: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class ModelRequest:
    """Everything a model is asked in one turn.

    `output_tool` names the tool that delivers the final structured answer, when the
    agent has one. `force_output` is set once the model has failed to give that answer
    (or the budget is nearly spent): adapters then make the model answer, with native
    JSON-schema output or by forcing the tool, where the provider supports it.
    `stable_messages` is how many leading messages the run's later requests will send
    unchanged (0: not known): an adapter with prompt caching marks a cache point after
    them, so a request that changes a message after them still reads them from the cache.
    """

    system_prompt: str
    messages: tuple[Message, ...]
    tools: tuple[ToolSpec, ...] = ()
    settings: ModelSettings = ModelSettings()
    output_tool: str | None = None
    force_output: bool = False
    stable_messages: int = 0

    @property
    def output_spec(self) -> ToolSpec | None:
        """The spec of `output_tool`, when there is one."""
        if self.output_tool is None:
            return None
        return next((t for t in self.tools if t.name == self.output_tool), None)


@dataclass(frozen=True, slots=True)
class ModelResponse:
    """A model's complete reply.

    `finish_reason` is normalized to "stop", "tool_calls", "length" (cut off by the
    output limit), "content_filter" or "malformed_call" (the model's tool call was
    dropped or broken) when the provider's reason maps to one, and is the provider's
    own word otherwise.
    """

    message: AssistantMessage
    finish_reason: str | None = None
    response_id: str | None = None
    """The provider's id for this reply (for tracing and support requests), when it gives one."""
    provider: str | None = None
    """Who served the reply, when not the model's own provider (a `FallbackModel`'s)."""

    @property
    def usage(self) -> Usage:
        """Tokens this response cost."""
        return self.message.usage

    @property
    def model_name(self) -> str | None:
        """The model that actually answered, as the provider reported it."""
        return self.message.model_name


@dataclass(frozen=True, slots=True)
class StreamDelta:
    """A piece of a reply while it streams: answer text, thinking, or tool-call arguments
    (with the call's id and, where the provider says it as it streams, its tool's name).

    `index` says which call the arguments belong to: its position among the reply's
    tool calls (0 for the first). Adapters give it because servers do not promise
    distinct call ids; the loop then puts tether's own id on the event."""

    part: Literal["text", "thinking", "tool_call"]
    delta: str
    call_id: str | None = None
    tool: str | None = None
    index: int | None = None


StreamItem: TypeAlias = StreamDelta | ModelResponse


@runtime_checkable
class Model(Protocol):
    """What the loop needs from a model.

    `stream` yields `StreamDelta`s as the reply arrives and ends with exactly one
    `ModelResponse`; `request` returns that response directly. A model that speaks to a
    server may also have a `server_url` attribute (the URL its requests go to), which
    traces record.
    """

    @property
    def name(self) -> str:
        """Model name, used to look up its price (e.g. "claude-sonnet-4-5")."""
        ...

    @property
    def provider(self) -> str | None:
        """Provider id (e.g. "anthropic"), or None when it does not matter."""
        ...

    async def request(self, request: ModelRequest) -> ModelResponse:
        """Send one request and wait for the whole response."""
        ...

    def stream(self, request: ModelRequest) -> AsyncIterator[StreamItem]:
        """Send one request and yield the reply as it arrives, the full response last."""
        ...


async def response_of(stream: AsyncIterator[StreamItem]) -> ModelResponse:
    """Drain a model stream and return its final response."""
    response: ModelResponse | None = None
    async for item in stream:
        if isinstance(item, ModelResponse):
            response = item
    if response is None:
        raise ModelError("the model stream ended without a response")
    return response
