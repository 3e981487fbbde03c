"""Every error tether raises, in one tree.

```
TetherError                  root; `.result` holds the partial RunResult when it ended a run
├── ConfigurationError       API misuse: a bad argument to create_agent, @tool, Limits, a model
├── ModelError               a model could not produce a response
│   ├── ModelHTTPError       the provider answered with an HTTP error (after any retries)
│   └── ScriptExhaustedError a ScriptedModel was asked for more turns than it has
├── ToolError                raised by a tool: its message goes back to the model as an error
│   └── BackendError         a file operation failed (tether.backends)
├── ToolFatalError           raised by a tool to stop the run on purpose
├── OutputError              the model never produced a valid final answer
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
    from tether.agent import RunResult

__all__ = [
    "ConfigurationError",
    "CostUnknownWarning",
    "ModelError",
    "ModelHTTPError",
    "OutputError",
    "ProviderBlockedError",
    "RunError",
    "ScriptExhaustedError",
    "TetherError",
    "TetherWarning",
    "ToolError",
    "ToolFatalError",
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
    """A model could not produce a response."""


class ModelHTTPError(ModelError):
    """The provider answered with an HTTP error status, after any retries were spent.

    `status_code` is the HTTP status and `body` the provider's error payload, if any.
    """

    def __init__(self, message: str, *, status_code: int, body: object = None) -> None:
        super().__init__(message)
        self.status_code = status_code
        self.body = body


class ScriptExhaustedError(ModelError):
    """A ScriptedModel was asked for a turn past the end of its script."""


class ToolError(TetherError):
    """Raise inside a tool to send its message to the model as an error result, verbatim.

    The run goes on: the model reads the message and can try something else.
    """


class ProviderBlockedError(TetherError):
    """A test tried to reach a real model provider while `tether.testing` forbids it."""


class ToolFatalError(TetherError):
    """Raise inside a tool to stop the whole run, not just report an error to the model."""


class OutputError(TetherError):
    """The model did not produce a valid final answer within the allowed retries."""


class RunError(TetherError):
    """An unexpected exception ended the run; the original exception is `__cause__`."""


class TetherWarning(UserWarning):
    """Base of tether's warnings."""


class CostUnknownWarning(TetherWarning):
    """A cost limit is set, but the price of the model in use is unknown."""
