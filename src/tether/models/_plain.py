"""Plain requests for the offline model: what a request could ask of the file tools, one
constrained choice by the model, and an answer written from what the tools did.

A 135M model cannot copy a file name or a sentence out of a request reliably, nor be
trusted to report what happened. So the harness reads the request for the file names
and texts it holds, the model only chooses the action and which of those names and
texts it is about (constrained decoding: it cannot invent one), and once the tool has
run, the answer is written from the tool's result. It cannot claim what it did not do,
and what it cannot do (a question, an explanation) it declines in plain words. A
replacement or an added line it can make exactly is read first and then made with
`edit_file` (see `_plain_edit`).
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from tether.messages import AssistantMessage, Message, ToolCall, ToolResultMessage, UserMessage
from tether.models import _plain_edit
from tether.models._plain_edit import Edit

__all__ = [
    "CANNOT_DO",
    "Reading",
    "answer",
    "applies",
    "call_of",
    "declined",
    "next_step",
    "prompt",
    "read",
]

CANNOT_DO = "The offline model cannot do this."
"""How every answer the offline model declines to give begins."""

WRITE, READ, LIST, EDIT = "write_file", "read_file", "ls", "edit_file"
_TOOLS = frozenset({WRITE, READ, LIST, EDIT, "execute"})

_QUOTED = re.compile(
    r"\"([^\"]+)\"|(?<![\w])'([^']+)'(?![\w])|\u201c([^\u201d]+)\u201d|\u2018([^\u2019]+)\u2019"
)
_PATH = re.compile(r"(?<![\w/.-])(/?(?:[\w-]+/)*[\w-]+\.[A-Za-z]\w{0,6})(?![\w/-])")
_NAMED = re.compile(
    r"\b(?:file|document|note)\s+(?:called|named|titled)\s+[\"'\u201c\u2018]?([\w./-]+?)"
    r"[\"'\u201d\u2019]?(?=[\s,.!?:;]|$)",
    re.IGNORECASE,
)
_AFTER_WORDS = re.compile(
    r"\b(?:saying|says|that says|containing|contains|with the (?:text|words|line)|"
    r"the (?:text|words|line)|that reads|reading|with)\s*:?\s+(.+)",
    re.IGNORECASE,
)
_INTO = re.compile(
    r"\s+(?:in|into|to|inside|as)\s+(?:a\s+|the\s+)?(?:new\s+)?(?:file\s+)?"
    r"(?:called\s+|named\s+)?\S+\s*[.!]?\s*$",
    re.IGNORECASE,
)
_VERB_TEXT = re.compile(
    r"^(?:please\s+|can you\s+|could you\s+)?(?:write|put|save|store|add|jot down|note down|"
    r"record|type|place)\s+(?:the\s+(?:text|line|words)\s+)?(.+?)\s+(?:in|into|to|inside)\s+",
    re.IGNORECASE,
)
_MAKE_SAY = re.compile(r"\b(?:make|have)\s+\S+\s+(?:say|contain|read)\s+(.+)", re.IGNORECASE)
_LISTING = re.compile(
    r"\b(?:list|ls|files|folder|directory|directories|what'?s here|what is here)\b",
    re.IGNORECASE,
)
# Asks to change or remove what a file holds: showing the file, or writing over it, is
# no answer to these. Only an edit `_plain_edit` reads exactly is offered; the rest are
# declined.
_CHANGING = re.compile(
    r"\b(?:delete|remove|erase|rename|move|copy|change|replace|edit|modify|update|append|"
    r"insert|fix|rewrite|swap|truncate|substitute)\b"
    r"|\b(?:add|put|write|type|place)\b.*\b(?:at|to|on)\s+the\s+(?:very\s+)?"
    r"(?:end|bottom|top|beginning|start)\b",
    re.IGNORECASE,
)
_ENDING = " .!?,;:"
MAX_REQUEST_CHARS = 2_000
"""Longer is not a plain request (and is never searched: the patterns backtrack)."""


@dataclass(frozen=True)
class Reading:
    """What a request could ask of the file tools: the file names and the texts it holds
    (each a choice the model may make), whether it speaks of listing, whether it asks
    to change or remove a file's content, and the edit it asks for when that is one the
    offline model can make exactly."""

    paths: tuple[str, ...]
    texts: tuple[str, ...]
    listing: bool
    changing: bool = False
    edit: Edit | None = None


def applies(tools: Sequence[str]) -> bool:
    """Whether an agent with these tools is the offline file helper: it has the file
    tools tether gives it, and no others (an agent with tools of its own is left to the
    model as it is)."""
    names = set(tools)
    return bool(names & {WRITE, READ, LIST}) and names <= _TOOLS


def read(request: str) -> Reading:
    """The choices `request` offers (none for one too long to be a plain request)."""
    if len(request) > MAX_REQUEST_CHARS:
        return Reading((), (), False)
    quoted = [next(g for g in m.groups() if g) for m in _QUOTED.finditer(request)]
    paths = [m.group(1) for m in _PATH.finditer(request)]
    paths += [m.group(1) for m in _NAMED.finditer(request)]
    paths += [q for q in quoted if _PATH.fullmatch(q.strip())]
    texts = [q for q in quoted if not _PATH.fullmatch(q.strip())]
    texts += _unquoted_texts(request, paths)
    edit = _plain_edit.edit_of(request, _PATH, _QUOTED)
    return Reading(
        tuple(_unique("/" + p.strip().lstrip("/") for p in paths)),
        tuple(_unique(t for t in (t.strip() for t in texts) if t and t not in paths)),
        bool(_LISTING.search(request)),
        edit is not None or _asks_to_change(request),
        edit,
    )


def _asks_to_change(request: str) -> bool:
    """Whether the request's own words (not a quoted text or a file name, such as "fix
    the copy" or update.md) ask to change or remove what a file holds."""
    words = _NAMED.sub(" ", _PATH.sub(" ", _QUOTED.sub(" ", request)))
    return bool(_CHANGING.search(words))


def _unquoted_texts(request: str, paths: list[str]) -> list[str]:
    """Texts given without quotes: after "saying", "containing", a colon, or between a
    verb and the file ("put buy milk in notes.txt")."""
    found: list[str] = []
    for pattern in (_AFTER_WORDS, _MAKE_SAY, _VERB_TEXT):
        for match in pattern.finditer(request):
            found.append(_INTO.sub("", match.group(1)).strip(_ENDING))
    if ":" in request:
        after = request.rsplit(":", 1)[1].strip(_ENDING)
        if after and not any(p in after for p in paths):
            found.append(after)
    return [f.strip("\"'\u201c\u201d\u2018\u2019 ") for f in found if f]


def _unique(items: Any) -> list[str]:
    seen: dict[str, None] = {}
    for item in items:
        seen.setdefault(item, None)
    return list(seen)


_ACTIONS = {  # each action: what it does, an example request and the reply to it
    "write": (
        "save the given text in the named file.",
        "Save 'call mom' in reminders.txt",
        '{"action": "write", "file": "/reminders.txt", "text": "call mom"}',
    ),
    "read": (
        "show what the named file says.",
        "What does todo.md say?",
        '{"action": "read", "file": "/todo.md"}',
    ),
    "list": ("list the files.", "Which files are here?", '{"action": "list"}'),
    "replace": (
        "change a given text to another in the named file.",
        "Replace 'red' with 'blue' in colors.txt",
        '{"action": "replace", "file": "/colors.txt"}',
    ),
    "append": (
        "add a given line at the end of the named file.",
        "Add the line 'bread' at the end of shopping.txt",
        '{"action": "append", "file": "/shopping.txt"}',
    ),
    "decline": (
        "anything else (a question, a greeting, an explanation, a change to code).",
        "How do I fix this bug?",
        '{"action": "decline"}',
    ),
}


def prompt(actions: Sequence[str] = tuple(_ACTIONS)) -> str:
    """The system prompt of the choice: the actions offered, and one example of each.
    Only those offered: the prompt is most of what the model reads, and reading it is
    most of the time a first request takes on a CPU."""
    offered = [a for a in _ACTIONS if a in actions]
    lines = ["Turn the request into one action on files, or decline it.", "Actions:"]
    lines += [f"- {a}: {_ACTIONS[a][0]}" for a in offered]
    lines.append("Examples:")
    for action in offered:
        lines += [f"Request: {_ACTIONS[action][1]}", _ACTIONS[action][2]]
    lines.append("Reply with one JSON object.")
    return "\n".join(lines)


def schema(reading: Reading, tools: Sequence[str]) -> dict[str, Any]:
    """The replies the model may give for `reading`: an action the request holds what it
    needs for (a write needs a file and a text, a read a file, a list a word for it),
    with the file and text among the request's own; or declining. A request to change
    or remove what a file holds is offered only the edit read from it, if any."""
    options: list[dict[str, Any]] = []
    files = {"enum": list(reading.paths)}
    if reading.changing:
        edit = reading.edit
        if edit is not None and READ in tools and EDIT in tools:
            options.append(_action(edit.action, file={"enum": [edit.path]}))
        return {"anyOf": [*options, _action("decline")]}
    if WRITE in tools and reading.paths and reading.texts:
        options.append(_action("write", file=files, text={"enum": list(reading.texts)}))
    if READ in tools and reading.paths:
        options.append(_action("read", file=files))
    if LIST in tools and reading.listing:
        options.append(_action("list"))
    options.append(_action("decline"))
    return {"anyOf": options}


def _action(name: str, **fields: dict[str, Any]) -> dict[str, Any]:
    return {
        "type": "object",
        "properties": {"action": {"const": name}, **fields},
        "required": ["action", *fields],
        "additionalProperties": False,
    }


def call_of(reply: str, call_id: str) -> ToolCall | None:
    """The tool call the model's choice stands for; None when it declined."""
    try:
        choice = json.loads(reply)
        action = choice["action"]
    except (ValueError, KeyError, TypeError):
        return None
    if action == "write":
        return ToolCall(WRITE, {"file_path": choice["file"], "content": choice["text"]}, call_id)
    if action in ("read", "replace", "append"):  # an edit reads the file first
        return ToolCall(READ, {"file_path": choice["file"]}, call_id)
    if action == "list":
        return ToolCall(LIST, {"path": "/"}, call_id)
    return None


Done = tuple[ToolCall, str, bool]
"""A call made for the request, its result's text, and whether it failed."""


def task(messages: Sequence[Message]) -> tuple[str, list[Done]]:
    """The request (the last user message) and the calls made for it that have a result
    yet, in order."""
    start = max((i for i, m in enumerate(messages) if isinstance(m, UserMessage)), default=-1)
    request = messages[start].text if start >= 0 else ""  # type: ignore[union-attr]
    calls: dict[str, ToolCall] = {}
    done: list[Done] = []
    for message in messages[start + 1 :]:
        if isinstance(message, AssistantMessage):
            calls.update((c.id, c) for c in message.tool_calls[:1])
        elif isinstance(message, ToolResultMessage):
            for result in message.results:
                if result.call_id in calls:
                    done.append((calls.pop(result.call_id), result.text, result.is_error))
    return request, done


def next_step(reading: Reading, done: Sequence[Done], call_id: str) -> ToolCall | str:
    """After the calls `done` for the request read as `reading`: the next call (the edit
    after its file was read), or the final answer, written from what the tools did."""
    call, result, failed = done[-1]
    edit = reading.edit
    if failed or edit is None or not reading.changing:
        return answer(call, result, failed)
    if call.name == READ and len(done) == 1:
        step = _plain_edit.after_read(edit, result, call_id)
        return step if isinstance(step, ToolCall) else f"{CANNOT_DO} {step}, so nothing changed."
    if call.name == EDIT:
        return _plain_edit.done(edit)
    return answer(call, result, failed)


def answer(call: ToolCall, result: str, failed: bool) -> str:
    """The final answer, from what the tool did: never more than its result says."""
    args = call.args if isinstance(call.args, dict) else {}
    if failed:
        return f"{call.name} failed: {result}"
    if call.name == WRITE:
        text = json.dumps(args.get("content", ""), ensure_ascii=False)
        return f"Wrote {text} to {args.get('file_path')}."
    if call.name == READ:
        lines = [re.sub(r"^\s*\d+\t", "", line) for line in result.splitlines()]
        shown = "\n".join(line for line in lines if not line.startswith("(lines "))
        return f"{args.get('file_path')} says:\n{shown}"
    names = [line.split(" (")[0] for line in result.splitlines()]
    return "The files: " + ", ".join(names) if names else result


def declined() -> str:
    """The answer to a request the offline model cannot do."""
    return (
        f"{CANNOT_DO} It is a 135M model running on this machine, which can write a "
        "given text to a named file, read a named file, or list the files, and nothing "
        "more. For anything else, set ANTHROPIC_API_KEY or OPENAI_API_KEY, or point "
        "tether at a local OpenAI-compatible server (such as --model ollama:qwen3)."
    )
