"""Asking a person at the terminal a question a tool's server asked during a call (an
MCP server's elicitation): its message and form shown as text, each field asked in turn.

Rich is imported where it is used, as in `_render`: `--json` works without it."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from tether.approval import Answer, ApprovalRequest, Decision, Reject, Respond
from tether.cli._render import asked_by, shown
from tether.errors import ConfigurationError
from tether.questions import Question, answer_of, choice_values

if TYPE_CHECKING:
    from rich.console import Console

__all__ = ["ask_question", "describe_field"]

_KEYS = {"a": "answer", "d": "decline", "c": "cancel", "s": "respond"}
_LABELS = "\\[a]nswer \\[d]ecline \\[c]ancel re\\[s]pond? "


def ask_question(request: ApprovalRequest, console: Console, title: str) -> Decision:
    """The person's decision on a question: the form filled in, declined, dismissed, or
    a reply to the agent instead of the call. Everything the server wrote is shown as
    text, control characters escaped."""
    from rich.markup import escape

    question = request.question
    assert question is not None
    console.rule(f"[bold]{escape(title)}[/]")
    asker = f"{question.asker}, during {request.tool}{asked_by(request)}, asks:"
    console.print(escape(shown(asker)))
    said = shown(question.message, keep="\n").split("\n")  # each line marked as the server's:
    console.print("\n".join("  │ " + line for line in said), markup=False)  # no fake header
    for name, spec, required in question.fields:
        console.print("  " + describe_field(name, spec, required), markup=False)
    while True:
        answer = console.input(_LABELS).strip().lower()
        kind = _KEYS.get(answer[:1]) if answer else None
        if kind is not None:
            break
        console.print("[yellow]Answer one of: answer, decline, cancel, respond[/]")
    if kind == "decline":
        return Reject(console.input("Why (optional, the agent reads it)? ").strip())
    if kind == "cancel":
        return Answer(action="cancel")
    if kind == "respond":
        return Respond(console.input("Reply to the agent instead of the call: "))
    return Answer(_filled(question, console))


def describe_field(name: str, spec: Mapping[str, Any], required: bool) -> str:
    """One field of a form as a line: its name and title, kind, bounds, default."""
    title = spec.get("title")
    label = shown(f"{name} ({title})" if title and title != name else name)
    facts = [_kind(spec)]
    if required:
        facts.append("required")
    for key, word in (("minimum", "≥"), ("maximum", "≤")):
        if key in spec:
            facts.append(f"{word} {spec[key]}")
    for key, word in (("minLength", "at least"), ("maxLength", "at most")):
        if key in spec:
            facts.append(f"{word} {spec[key]} characters")
    if "default" in spec:
        facts.append(f"default {shown(json.dumps(spec['default'], ensure_ascii=False))}")
    line = f"{label}: {', '.join(facts)}"
    description = spec.get("description")
    return f"{line} — {shown(description)}" if description else line


def _kind(spec: Mapping[str, Any]) -> str:
    choices = choice_values(spec)
    if choices is not None:
        many = "any of" if spec["type"] == "array" else "one of"
        return f"{many} {', '.join(shown(c) for c in choices)}"
    kind = {"string": "text", "integer": "whole number", "boolean": "yes or no"}
    return str(spec.get("format") or kind.get(spec["type"], spec["type"]))


def _filled(question: Question, console: Console) -> dict[str, Any]:
    """The form, asked field by field until what is given fits it (an empty line keeps
    a field's default, or leaves it out). A field's name is the server's: plain text,
    never markup nor highlighted."""
    from rich.text import Text

    while True:
        content: dict[str, Any] = {}
        for name, spec, _ in question.fields:
            text = console.input(Text(f"{shown(name)}: ")).strip()
            if text:
                content[name] = _value(spec, text)
        try:
            answer_of(question, content)
        except ConfigurationError as exc:
            console.print(shown(str(exc)), style="red", markup=False)
            continue
        return content


def _value(spec: Mapping[str, Any], text: str) -> Any:
    """What a person typed for a field, as the field's kind (left as text when it does
    not read as one: the check says what is wrong)."""
    kind = spec["type"]
    if kind == "boolean":
        return {"y": True, "yes": True, "true": True, "n": False, "no": False, "false": False}.get(
            text.lower(), text
        )
    if kind in ("integer", "number"):
        try:
            return int(text) if kind == "integer" else float(text)
        except ValueError:
            return text
    if kind == "array":
        return [part.strip() for part in text.split(",") if part.strip()]
    return text
