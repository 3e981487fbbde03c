"""Frontend tools: the tools an AG-UI client offers in its run request (`tools`), checked
before the model sees them, and the tool messages that answer their calls.

The client runs a frontend tool itself. A call of one is streamed to the client and
waits in the thread like a gated call (an `ApprovalRequest` with `client_tool`); the run
ends with its id in `pendingToolCallIds`. The client's next run brings the result as a
tool message (role "tool", `toolCallId`) at the end of `messages`, and the run goes on.

What a page or a model might try, and what holds:
- A frontend tool never replaces one of the agent's own tools or `final_result`, in any
  case; names are letters, digits, '_' and '-' (64 at most, as every provider takes
  them); a schema is a JSON object of type "object"; counts and sizes are bounded.
- A tool message answers a frontend call that waits, and nothing else. One naming a
  call of the agent's own that waits for approval is refused: those are decided by
  `resume` entries only. So is one naming a call the thread does not know, one giving a
  frontend call another result than the one it got, or one giving a call that has its
  result another one. Any other tool message is the client's copy of a result it was
  sent, and changes nothing.
- A result is cut to `RESULT_CHARS` characters, like a long result of the agent's own
  tools (whose eviction keeps 20,000 tokens' worth in view).
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from tether.approval import Respond, decision_from_json
from tether.errors import AlreadyDecidedError, ConfigurationError
from tether.messages import AssistantMessage, ToolResultMessage
from tether.models.base import ToolSpec
from tether.serve._agui import result_text

if TYPE_CHECKING:
    from tether.checkpoint.journal import Thread

__all__ = ["MOST_TOOLS", "RESULT_CHARS", "answers", "client_tools", "trailing"]

MOST_TOOLS = 64
"""Frontend tools one run may offer."""
SCHEMA_CHARS = 16_000
"""The longest schema of one frontend tool, as JSON."""
ALL_CHARS = 128_000
"""The most the frontend tools of one run may add to every request to the model."""
DESCRIPTION_CHARS = 4_000
SCHEMA_DEPTH = 32
RESULT_CHARS = 80_000
"""The longest result a tool message gives a call; the rest is cut, and said so."""
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_-]{0,63}")
_NO_ARGUMENTS = {"type": "object", "properties": {}}


def client_tools(tools: Sequence[Any]) -> tuple[ToolSpec, ...]:
    """The frontend tools of a run request (AG-UI `Tool`s) as the model sees them, each
    checked; ConfigurationError names the first one refused and why. (That none is named
    as one of the agent's own tools is checked by the agent, for every caller.)"""
    if len(tools) > MOST_TOOLS:
        raise ConfigurationError(
            f"a run takes {MOST_TOOLS} frontend tools at most, got {len(tools)}"
        )
    specs: list[ToolSpec] = []
    total = 0
    for tool in tools:
        spec = _spec(tool)
        total += len(spec.description) + len(json.dumps(spec.parameters))
        specs.append(spec)
    if total > ALL_CHARS:
        raise ConfigurationError(
            f"the frontend tools take {total} characters; {ALL_CHARS} at most are taken"
        )
    return tuple(specs)


def _spec(tool: Any) -> ToolSpec:
    name = tool.name
    if not isinstance(name, str) or not _NAME.fullmatch(name):
        raise ConfigurationError(
            f"frontend tool name {str(name)[:80]!r} is refused: a name is 1 to 64 letters, "
            "digits, '_' or '-', starting with a letter or '_'"
        )
    description = tool.description
    if not isinstance(description, str) or len(description) > DESCRIPTION_CHARS:
        raise ConfigurationError(
            f"frontend tool {name!r}: the description is text of {DESCRIPTION_CHARS} "
            "characters at most"
        )
    schema = _NO_ARGUMENTS if tool.parameters in (None, {}) else tool.parameters
    if not isinstance(schema, Mapping) or schema.get("type") != "object":
        raise ConfigurationError(
            f"frontend tool {name!r}: parameters must be a JSON schema of type 'object'"
        )
    properties = schema.get("properties", {})
    if not isinstance(properties, Mapping) or not all(
        isinstance(p, Mapping) for p in properties.values()
    ):
        raise ConfigurationError(
            f"frontend tool {name!r}: 'properties' must map each argument to its schema"
        )
    if _outgrows(schema, SCHEMA_CHARS):  # measured before a long one is written out
        raise ConfigurationError(
            f"frontend tool {name!r}: its schema is over {SCHEMA_CHARS} characters; "
            f"{SCHEMA_CHARS} at most"
        )
    if _depth(schema) > SCHEMA_DEPTH:
        raise ConfigurationError(
            f"frontend tool {name!r}: its schema nests deeper than {SCHEMA_DEPTH} levels"
        )
    size = len(json.dumps(schema))
    if size > SCHEMA_CHARS:
        raise ConfigurationError(
            f"frontend tool {name!r}: its schema is {size} characters; {SCHEMA_CHARS} at most"
        )
    return ToolSpec(name, description, dict(schema))


def _outgrows(value: Any, limit: int) -> bool:
    """Whether JSON `value` surely takes more than `limit` characters written out: its
    strings, keys and one character per other item counted, the walk stopping as soon
    as they pass `limit` (a long schema is never written out whole to be measured)."""
    size = 0
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, Mapping):
            size += 1 + sum(len(str(k)) + 3 for k in item)
            stack += item.values()
        elif isinstance(item, list):
            size += 1 + len(item)
            stack += item
        else:
            size += len(item) + 2 if isinstance(item, str) else 1
        if size > limit:
            return True
    return False


def _depth(value: Any) -> int:
    """How deep JSON `value` nests (walked without recursion)."""
    deepest = 0
    stack = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        deepest = max(deepest, depth)
        if isinstance(item, Mapping):
            stack += [(v, depth + 1) for v in item.values()]
        elif isinstance(item, list):
            stack += [(v, depth + 1) for v in item]
    return deepest


def trailing(messages: Sequence[Any]) -> list[Any]:
    """The tool messages at the end of a run request's messages: those that may answer
    calls (the others are history the client keeps)."""
    found: list[Any] = []
    for message in reversed(messages):
        if message.role != "tool":
            break
        found.append(message)
    return found[::-1]


def answers(thread: Thread, messages: Sequence[Any]) -> dict[str, Respond]:
    """The results the tool messages at the end of `messages` give the thread's waiting
    frontend calls, by call id; raises for a tool message that answers nothing it may
    (see the module's rules)."""
    waiting = {r.call_id: r for r in thread.requests}
    known, results = _calls_and_results(thread)
    chosen: dict[str, Respond] = {}
    for message in trailing(messages):
        call_id = message.tool_call_id
        given = _text_of(message)
        text = _bounded(given)
        request = waiting.get(call_id)
        if request is not None and request.client_tool:
            if call_id in chosen:
                raise ConfigurationError(f"call {call_id!r} is answered by two tool messages")
            chosen[call_id] = Respond(text, is_error=message.error is not None)
        elif request is not None:
            raise ConfigurationError(
                f"call {call_id!r} ({request.tool}) waits for a decision, which a tool message "
                "does not give: answer its interrupt with a resume entry"
            )
        elif call_id in results:
            if results[call_id] not in (given, text):
                earlier = thread.decided.get(call_id)
                raise AlreadyDecidedError(
                    f"call {call_id!r} has its result already; a tool message does not "
                    "change it, and nothing ran again",
                    decisions={call_id: decision_from_json(earlier)} if earlier else {},
                )
        elif call_id not in known:
            raise ConfigurationError(
                f"tool message {message.id!r} answers call {call_id!r}, which is not a call "
                "of this thread"
            )
    return chosen


def _calls_and_results(thread: Thread) -> tuple[set[str], dict[str, str]]:
    """The ids of the calls of a thread and of its subagents' runs, and the text of the
    results recorded for them."""
    calls: set[str] = set()
    results: dict[str, str] = {}
    stack = [thread]
    while stack:
        current = stack.pop()
        calls.update(r.call_id for r in current.requests)
        for message in current.messages:
            if isinstance(message, AssistantMessage):
                calls.update(c.id for c in message.tool_calls)
            elif isinstance(message, ToolResultMessage):
                results.update((r.call_id, result_text(r)) for r in message.results)
        results.update((i, result_text(r)) for i, r in current.results.items())
        stack += current.subagents.values()
    return calls, results


def _text_of(message: Any) -> str:
    content = message.content
    if isinstance(content, str):
        text = content
    elif all(getattr(part, "type", None) == "text" for part in content):
        text = "\n".join(part.text for part in content)
    else:
        raise ConfigurationError(
            f"tool message {message.id!r}: only text is taken as a frontend tool's result"
        )
    if message.error is not None and message.error not in text:
        text = f"{text}\n{message.error}" if text else message.error
    return text


def _bounded(text: str) -> str:
    if len(text) <= RESULT_CHARS:
        return text
    cut = len(text) - RESULT_CHARS
    return f"{text[:RESULT_CHARS]}\n\n[cut: {cut} more characters not shown]"
