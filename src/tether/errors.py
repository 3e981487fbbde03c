"""Every error tether raises, in one tree.

```
TetherError                  root; `.result` holds the partial RunResult when it ended a run
├── ConfigurationError       API misuse: a bad argument to create_agent, @tool, Limits, a model
├── ModelError               a model could not produce a response
│   ├── ModelHTTPError       the provider answered with an HTTP error (after any retries)
│   ├── ContentFilterError   the provider's content filter stopped the reply
│   └── ScriptExhaustedError a ScriptedModel was asked for more turns than it has
├── ToolError                raised by a tool: its message goes back to the model as an error
│   └── BackendError         a file operation failed (tether.backends)
├── ToolFatalError           raised by a tool to stop the run on purpose
├── OutputError              the model never produced a valid final answer
├── StorageError             a checkpointer or store cannot use its database
├── ThreadBusyError          another run holds the thread (its lease)
├── AlreadyDecidedError      decisions were sent for calls already decided
├── ProviderBlockedError     a test reached for a real provider (tether.testing)
└── RunError                 any other exception ended the run (the original is `__cause__`)

TetherWarning (UserWarning)
├── CostUnknownWarning       a cost limit is set but the model's price is unknown
├── SkillWarning             a skill was skipped or replaced (tether.capabilities.skills)
└── MemoryWarning            memory files were cut in the prompt (tether.capabilities.memory)
```

Mistakes the model can fix (unknown tool, bad arguments, a tool that raised) are never
raised: they go back to the model as tool results with `is_error=True`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from tether.result import RunResult

__all__ = [
    "AlreadyDecidedError",
    "ConfigurationError",
    "ContentFilterError",
    "CostUnknownWarning",
    "MCPServerError",
    "ModelError",
    "ModelHTTPError",
    "OutputError",
    "ProviderBlockedError",
    "RunError",
    "ScriptExhaustedError",
    "StorageError",
    "TetherError",
    "TetherWarning",
    "ThreadBusyError",
    "ToolError",
    "ToolFatalError",
    "UsageEstimatedWarning",
]


class TetherError(Exception):
    """Base of every tether error.

    When the error ended a run, `result` holds everything the run did before it:
    messages, usage, cost and steps. Nothing is lost by catching it.
    """

    result: RunResult[Any] | None = None


class ConfigurationError(TetherError, ValueError):
    """tether was called with an argument it cannot use; the message says which and why."""


class ModelError(TetherError):
    """A model could not produce a response.

    For a provider's model, `url` is where the request went, `request_id` the provider's
    id for it (quote it to their support) and `retries` how many times it was retried.
    `transient` says the fault may pass (a rate limit, an overloaded or failing server, a
    dropped connection, a timeout): another try, or another model, may succeed.
    """

    transient: bool = False

    def __init__(
        self,
        message: str,
        *,
        url: str | None = None,
        request_id: str | None = None,
        retries: int = 0,
    ) -> None:
        super().__init__(message)
        self.url = url
        self.request_id = request_id
        self.retries = retries


class ModelHTTPError(ModelError):
    """The provider answered with an HTTP error status, after any retries were spent.

    `status_code` is the HTTP status and `body` the provider's error payload, if any.
    """

    def __init__(
        self,
        message: str,
        *,
        status_code: int,
        body: object = None,
        url: str | None = None,
        request_id: str | None = None,
        retries: int = 0,
    ) -> None:
        super().__init__(message, url=url, request_id=request_id, retries=retries)
        self.status_code = status_code
        self.body = body


class ContentFilterError(ModelError):
    """The provider's content filter stopped the model's reply (Azure's `content_filter`,
    Gemini's `SAFETY`, Bedrock's guardrails, Anthropic's `refusal`).

    The run ends with `stop_reason="content_filter"` and no output; `result.messages` keeps
    what the model sent before the filter cut in, and its tool calls, if any, are answered
    without running. Asking again with the same input usually meets the same filter.
    """


class ScriptExhaustedError(ModelError):
    """A ScriptedModel was asked for a turn past the end of its script."""


class ToolError(TetherError):
    """Raise inside a tool to send its message to the model as an error result, verbatim.

    The run goes on: the model reads the message and can try something else.
    """


class ProviderBlockedError(TetherError):
    """A test tried to reach a real model provider while `tether.testing` forbids it."""


class MCPServerError(TetherError):
    """An MCP server could not be reached, or refused what was asked of it."""


class ToolFatalError(TetherError):
    """Raise inside a tool to stop the whole run, not just report an error to the model."""


class OutputError(TetherError):
    """The model did not produce a valid final answer within the allowed retries."""


class StorageError(TetherError):
    """A checkpointer or store could not read or write its database.

    `database` names it (a file path, or host and database name without the password).
    The message says what broke and what to do; tether changed nothing in a database it
    could not read.
    """

    def __init__(self, message: str, *, database: str) -> None:
        super().__init__(message)
        self.database = database


class ThreadBusyError(TetherError):
    """Another run or resume holds the thread: only one writes to a thread at a time.

    `holder` describes who (a process on a host, and its run); `expires` is when its
    lease ends unless renewed, in seconds since the epoch. Pass `wait=` to the run or
    resume to wait for it instead.
    """

    def __init__(self, message: str, *, thread_id: str, holder: str, expires: float) -> None:
        super().__init__(message)
        self.thread_id = thread_id
        self.holder = holder
        self.expires = expires


class AlreadyDecidedError(TetherError):
    """Decisions were sent for calls that were decided before; nothing ran again.

    `decisions` holds the earlier decisions, by call id.
    """

    def __init__(self, message: str, *, decisions: dict[str, Any]) -> None:
        super().__init__(message)
        self.decisions = decisions


class RunError(TetherError):
    """An unexpected exception ended the run; the original exception is `__cause__`."""


def describe(exc: BaseException) -> str:
    """An exception as "Type: message", never with an empty message after the colon; an
    exception group (anyio's "unhandled errors in a TaskGroup") as the errors inside it."""
    while isinstance(exc, BaseExceptionGroup) and len(exc.exceptions) == 1:
        exc = exc.exceptions[0]
    if isinstance(exc, BaseExceptionGroup):
        return "; ".join(describe(inner) for inner in exc.exceptions)
    text = str(exc).strip()
    return f"{type(exc).__name__}: {text}" if text else f"{type(exc).__name__} (no message)"


class TetherWarning(UserWarning):
    """Base of tether's warnings."""


class UsageEstimatedWarning(TetherWarning):
    """A model reported no token usage, so its tokens (and cost, and the limits on them)
    are worked out from characters instead."""


class CostUnknownWarning(TetherWarning):
    """A cost limit is set, but the price of the model in use is unknown; `model` is its
    "provider:model" name."""

    def __init__(self, message: str, model: str = "") -> None:
        super().__init__(message)
        self.model = model
