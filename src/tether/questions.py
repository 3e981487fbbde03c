"""Questions a tool asks the person while it runs (an MCP server's elicitation), and
the checks on the forms they ask with and the answers they get.

An MCP server may ask for a few values during a call: a message and a flat form of
strings, numbers, booleans and choices (the "requested schema"). The server is not
trusted: `question_of` accepts only the form MCP allows, of bounded size, and keeps only
the keys it knows; `answer_of` checks what a person answers against that form, filling
in the form's defaults for fields left out, as the MCP specification asks of a client.
"""

from __future__ import annotations

import datetime
import math
import urllib.parse
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal, TypeAlias

from tether.errors import ConfigurationError

__all__ = [
    "MOST_ANSWERED",
    "Action",
    "Question",
    "QuestionError",
    "answer_of",
    "choice_values",
    "question_of",
    "recorded_answer",
]

Action: TypeAlias = Literal["accept", "decline", "cancel"]
"""What a person did with a question: answered it, refused it, or dismissed it."""

MOST_ANSWERED = 8
"""Questions one call may ask, and have answered, before the next is declined."""
_MESSAGE_CHARS = 4_000
_FIELDS = 32
_NAME_CHARS = 64
_TITLE_CHARS = 200
_DESCRIPTION_CHARS = 1_000
_CHOICES = 100
_CHOICE_CHARS = 200
_ANSWER_CHARS = 10_000
"""The longest string a person may answer, whatever the form allows."""
_FORMATS = ("email", "uri", "date", "date-time")
_TYPES = ("string", "number", "integer", "boolean", "array")


class QuestionError(ValueError):
    """A server's question that tether does not ask: not the flat form MCP allows, or too
    big. The message says what is wrong, for the server."""


@dataclass(frozen=True, slots=True)
class Question:
    """A question for the person, asked by a tool's server during a call.

    `message` is the server's question; `schema` the form of the answer it wants, as a
    JSON schema of one flat object (`properties`: name -> a string, number, integer,
    boolean, or a choice of strings; `required`: the names that must be given),
    checked and stripped down to what MCP allows. `asker` says who asks, in tether's
    words ("MCP server 'files'"), never the server's. `answered` holds the questions the
    same call asked before, with their answers: the call is made again once the person
    answers, and these are given again when they are asked again.
    """

    message: str
    schema: Mapping[str, Any]
    asker: str
    answered: tuple[Mapping[str, Any], ...] = ()

    @property
    def fields(self) -> list[tuple[str, Mapping[str, Any], bool]]:
        """The form's fields in order: name, JSON schema, and whether it is required."""
        required = set(self.schema.get("required", ()))
        properties: Mapping[str, Mapping[str, Any]] = self.schema.get("properties", {})
        return [(name, spec, name in required) for name, spec in properties.items()]

    def same_as(self, message: str, schema: Mapping[str, Any]) -> bool:
        """Whether `message` and (checked) `schema` ask this very question."""
        return message == self.message and dict(schema) == dict(self.schema)

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Question:
        """A question as a thread records it (`dataclasses.asdict` of one)."""
        return cls(
            str(data["message"]),
            dict(data["schema"]),
            str(data["asker"]),
            tuple(dict(a) for a in data.get("answered", ())),
        )


def question_of(message: object, schema: object, *, asker: str) -> Question:
    """A server's question checked: its message and a form MCP allows, of bounded size,
    keeping only the keys tether understands. Raises `QuestionError` saying what is wrong."""
    if not isinstance(message, str):
        raise QuestionError("the question's message must be a string")
    if len(message) > _MESSAGE_CHARS:
        raise QuestionError(
            f"the question's message is {len(message):,} characters long; "
            f"at most {_MESSAGE_CHARS:,} are asked"
        )
    return Question(message, _form(schema), asker)


def _form(schema: object) -> dict[str, Any]:
    if not isinstance(schema, Mapping) or schema.get("type") != "object":
        raise QuestionError('the requested schema must be an object schema ({"type": "object"})')
    properties = schema.get("properties", {})
    if not isinstance(properties, Mapping):
        raise QuestionError("the requested schema's properties must be an object")
    if len(properties) > _FIELDS:
        raise QuestionError(f"the form has {len(properties)} fields; at most {_FIELDS} are asked")
    fields = {_name(name): _field(name, spec) for name, spec in properties.items()}
    required = schema.get("required", [])
    if not isinstance(required, list) or not all(isinstance(r, str) for r in required):
        raise QuestionError("the requested schema's required must be a list of field names")
    unknown = [r for r in required if r not in fields]
    if unknown:
        raise QuestionError(f"required names fields the form does not have: {unknown}")
    form: dict[str, Any] = {"type": "object", "properties": fields}
    if required:
        form["required"] = list(dict.fromkeys(required))
    return form


def _name(name: object) -> str:
    if not isinstance(name, str) or not 0 < len(name) <= _NAME_CHARS or not name.isprintable():
        raise QuestionError(
            f"a field name must be printable text of 1 to {_NAME_CHARS} characters, "
            f"got {name!r:.80}"
        )
    return name


def _field(name: str, spec: object) -> dict[str, Any]:
    """One field of the form, checked, with the keys tether knows for its type."""
    if not isinstance(spec, Mapping) or spec.get("type") not in _TYPES:
        raise QuestionError(
            f"field {name!r} must be a string, number, integer, boolean or array of choices; "
            "nested objects are not asked"
        )
    kind = spec["type"]
    field: dict[str, Any] = {"type": kind}
    for key, most in (("title", _TITLE_CHARS), ("description", _DESCRIPTION_CHARS)):
        value = spec.get(key)
        if value is not None:
            if not isinstance(value, str) or len(value) > most:
                raise QuestionError(f"field {name!r}: {key} must be text of at most {most} chars")
            field[key] = value
    if kind == "string":
        _string(name, spec, field)
    elif kind in ("number", "integer"):
        _range(name, spec, field)
    elif kind == "array":
        _choices_field(name, spec, field)
    if "default" in spec and spec["default"] is not None:
        problem = _problem(field, spec["default"])
        if problem is not None:
            raise QuestionError(f"field {name!r}: its default {problem}")
        field["default"] = spec["default"]
    return field


def _range(name: str, spec: Mapping[str, Any], field: dict[str, Any]) -> None:
    for key in ("minimum", "maximum"):
        if spec.get(key) is not None:
            field[key] = _number(name, key, spec[key])
    if field.get("minimum", -math.inf) > field.get("maximum", math.inf):
        raise QuestionError(f"field {name!r}: minimum is above maximum")


def _string(name: str, spec: Mapping[str, Any], field: dict[str, Any]) -> None:
    if "enum" in spec:
        field["enum"] = _choices(name, spec["enum"])
        titles = spec.get("enumNames")
        if titles is not None:
            if not _texts(titles) or len(titles) != len(field["enum"]):
                raise QuestionError(f"field {name!r}: enumNames must name each choice")
            field["enumNames"] = list(titles)
    elif "oneOf" in spec:
        field["oneOf"] = _titled(name, spec["oneOf"])
    else:
        for key in ("minLength", "maxLength"):
            if spec.get(key) is not None:
                field[key] = _count(name, key, spec[key])
        if field.get("minLength", 0) > field.get("maxLength", _ANSWER_CHARS):
            raise QuestionError(f"field {name!r}: minLength is above maxLength")
        form = spec.get("format")
        if form is not None:
            if form not in _FORMATS:
                raise QuestionError(f"field {name!r}: format must be one of {list(_FORMATS)}")
            field["format"] = form


def _choices_field(name: str, spec: Mapping[str, Any], field: dict[str, Any]) -> None:
    """A multiple choice: `items` is a string enum or an `anyOf` of titled constants."""
    items = spec.get("items")
    if not isinstance(items, Mapping):
        raise QuestionError(f"field {name!r}: an array field needs items with its choices")
    if "anyOf" in items:
        field["items"] = {"anyOf": _titled(name, items["anyOf"])}
    elif items.get("type") == "string" and "enum" in items:
        field["items"] = {"type": "string", "enum": _choices(name, items["enum"])}
    else:
        raise QuestionError(f"field {name!r}: an array field holds choices of strings only")
    for key in ("minItems", "maxItems"):
        if spec.get(key) is not None:
            field[key] = _count(name, key, spec[key])
    if field.get("minItems", 0) > field.get("maxItems", _CHOICES):
        raise QuestionError(f"field {name!r}: minItems is above maxItems")


def _texts(values: object) -> bool:
    return (
        isinstance(values, list)
        and 0 < len(values) <= _CHOICES
        and all(isinstance(v, str) and len(v) <= _CHOICE_CHARS for v in values)
    )


def _choices(name: str, values: object) -> list[str]:
    if not _texts(values):
        raise QuestionError(
            f"field {name!r}: choices must be 1 to {_CHOICES} strings of at most "
            f"{_CHOICE_CHARS} characters"
        )
    assert isinstance(values, list)
    if len(set(values)) != len(values):
        raise QuestionError(f"field {name!r}: a choice is listed twice")
    return list(values)


def _titled(name: str, options: object) -> list[dict[str, str]]:
    if not isinstance(options, list) or not all(
        isinstance(o, Mapping) and isinstance(o.get("const"), str) for o in options
    ):
        raise QuestionError(f"field {name!r}: titled choices are {{'const': ..., 'title': ...}}")
    values = _choices(name, [o["const"] for o in options])
    titles = [o.get("title", o["const"]) for o in options]
    if not _texts(titles):
        raise QuestionError(f"field {name!r}: a choice's title must be short text")
    return [{"const": v, "title": t} for v, t in zip(values, titles, strict=True)]


def _finite(value: object) -> bool:
    """Whether `value` is a JSON number a form can hold: not a bool, not NaN or infinite,
    and an integer no bigger than a double holds exactly."""
    if isinstance(value, bool):
        return False
    if isinstance(value, int):
        return abs(value) <= 2**53
    return isinstance(value, float) and math.isfinite(value)


def _number(name: str, key: str, value: object) -> int | float:
    if not _finite(value):
        raise QuestionError(f"field {name!r}: {key} must be a finite number")
    assert isinstance(value, int | float)
    return value


def _count(name: str, key: str, value: object) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= _ANSWER_CHARS:
        raise QuestionError(f"field {name!r}: {key} must be a whole number from 0 to 10,000")
    return value


def choice_values(field: Mapping[str, Any]) -> list[str] | None:
    """The values a single choice (`field`) or a multiple choice's items allow, or None."""
    spec = field.get("items", field)
    if "enum" in spec:
        return list(spec["enum"])
    titled = spec.get("oneOf") or spec.get("anyOf")
    return [o["const"] for o in titled] if titled else None


def _problem(field: Mapping[str, Any], value: object) -> str | None:
    """What is wrong with `value` for `field`, in words, or None when it fits."""
    kind = field["type"]
    if kind == "boolean":
        return None if isinstance(value, bool) else "must be true or false"
    if kind in ("number", "integer"):
        return _number_problem(field, value)
    if kind == "array":
        return _many_problem(field, value)
    if not isinstance(value, str):
        return "must be text"
    allowed = choice_values(field)
    if allowed is not None:
        return None if value in allowed else f"must be one of {allowed}"
    return _text_problem(field, value)


def _number_problem(field: Mapping[str, Any], value: object) -> str | None:
    if not _finite(value):
        return "must be a number"
    assert isinstance(value, int | float)
    if field["type"] == "integer" and not float(value).is_integer():
        return "must be a whole number"
    low, high = field.get("minimum"), field.get("maximum")
    if low is not None and value < low:
        return f"must be at least {low}"
    if high is not None and value > high:
        return f"must be at most {high}"
    return None


def _many_problem(field: Mapping[str, Any], value: object) -> str | None:
    allowed = choice_values(field) or []
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        return f"must be a list of choices from {allowed}"
    outside = [v for v in value if v not in allowed]
    if outside:
        return f"has {outside}, not among the choices {allowed}"
    if len(set(value)) != len(value):
        return "names a choice twice"
    low, high = field.get("minItems", 0), field.get("maxItems")
    if len(value) < low:
        return f"must name at least {low} choice(s)"
    if high is not None and len(value) > high:
        return f"must name at most {high} choice(s)"
    return None


def _text_problem(field: Mapping[str, Any], value: str) -> str | None:
    low, high = field.get("minLength", 0), min(field.get("maxLength", _ANSWER_CHARS), _ANSWER_CHARS)
    if len(value) < low:
        return f"must be at least {low} characters long"
    if len(value) > high:
        return f"must be at most {high:,} characters long"
    form = field.get("format")
    if form is not None and not _formatted(form, value):
        return f"must be a valid {form}"
    return None


def _formatted(form: str, value: str) -> bool:
    """Whether `value` has the string format `form` (checked without regular expressions:
    a long answer costs no more than its length)."""
    if form == "email":
        local, at, domain = value.partition("@")
        return (
            bool(at and local and domain)
            and "@" not in domain
            and not any(c.isspace() for c in value)
            and "." in domain.strip(".")
        )
    if form == "uri":
        parts = urllib.parse.urlsplit(value)
        scheme = parts.scheme
        return bool(scheme) and scheme[0].isalpha() and bool(parts.netloc or parts.path)
    try:
        if form == "date":
            datetime.date.fromisoformat(value)
        else:
            datetime.datetime.fromisoformat(value)
    except ValueError:
        return False
    return True


def answer_of(question: Question, content: Mapping[str, Any] | None) -> dict[str, Any]:
    """`content` checked against the question's form, with the form's defaults filled in
    for the fields it leaves out. Raises `ConfigurationError` listing every problem."""
    if content is not None and not isinstance(content, Mapping):
        raise ConfigurationError(f"an answer's content is a mapping of fields, got {content!r:.80}")
    given = dict(content or {})
    fields = question.fields
    names = [name for name, _, _ in fields]
    problems = [f"{key!r} is not a field of the form" for key in given if key not in names]
    answer: dict[str, Any] = {}
    for name, spec, required in fields:
        value = given.get(name, spec.get("default"))
        if value is None:
            if required:
                problems.append(f"{_label(name, spec)} is required")
            continue
        problem = _problem(spec, value)
        if problem is not None:
            problems.append(f"{_label(name, spec)} {problem}")
        answer[name] = int(value) if spec["type"] == "integer" and _whole(value) else value
    if problems:
        listing = "; ".join(problems)
        fields_text = ", ".join(names) or "none"
        raise ConfigurationError(
            f"the answer does not fit the question of {question.asker}: {listing} "
            f"(fields: {fields_text})"
        )
    return answer


def _whole(value: object) -> bool:
    return isinstance(value, float) and value.is_integer()


def _label(name: str, spec: Mapping[str, Any]) -> str:
    title = spec.get("title")
    return f"field {name!r} ({title})" if title and title != name else f"field {name!r}"


def recorded_answer(
    recorded: Sequence[Mapping[str, Any]], question: Question, used: Sequence[int]
) -> int | None:
    """Where in `recorded` (answered questions: `{"message", "schema", "answer"}`) the
    first answer to this very `question` is that this attempt of the call has not `used`
    yet; None when there is none (a question never answered, or asked once more)."""
    for index, earlier in enumerate(recorded):
        if index not in used and question.same_as(
            str(earlier.get("message")), earlier.get("schema") or {}
        ):
            return index
    return None
