"""The forms a tool's server asks with, and the answers a person gives them: checked
against what MCP allows, with the form's defaults filled in (tether.questions), and the
`Answer` decision as threads and pages write it (tether.approval)."""

from __future__ import annotations

from dataclasses import asdict
from typing import Any

import pytest

from tether import ConfigurationError
from tether.approval import (
    Answer,
    ApprovalRequest,
    Reject,
    decision_from_json,
    decision_of,
    decision_to_json,
    match_decisions,
)
from tether.questions import Question, QuestionError, answer_of, question_of

EVERY_KIND: dict[str, Any] = {
    "type": "object",
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "properties": {
        "name": {"type": "string", "title": "Name", "minLength": 1, "pattern": "^x"},
        "email": {"type": "string", "format": "email"},
        "site": {"type": "string", "format": "uri"},
        "born": {"type": "string", "format": "date"},
        "at": {"type": "string", "format": "date-time"},
        "age": {"type": "integer", "minimum": 0, "maximum": 150, "default": 30},
        "score": {"type": "number", "default": 9.5},
        "ok": {"type": "boolean", "default": True},
        "size": {"type": "string", "enum": ["s", "m", "l"], "enumNames": ["S", "M", "L"]},
        "hero": {"type": "string", "oneOf": [{"const": "h1", "title": "Hero one"}]},
        "tags": {
            "type": "array",
            "items": {"type": "string", "enum": ["a", "b", "c"]},
            "maxItems": 2,
            "default": ["a"],
        },
        "fish": {"type": "array", "items": {"anyOf": [{"const": "f1", "title": "Tuna"}]}},
    },
    "required": ["name"],
}


def asked(schema: dict[str, Any] = EVERY_KIND, message: str = "Who are you?") -> Question:
    return question_of(message, schema, asker="MCP server 'test'")


def test_every_kind_of_field_mcp_allows_is_asked_with_only_the_keys_tether_knows() -> None:
    question = asked()
    assert "$schema" not in question.schema
    assert question.schema["properties"]["name"] == {
        "type": "string",
        "title": "Name",
        "minLength": 1,
    }  # a regular expression from a server is not run
    assert [name for name, _, required in question.fields if required] == ["name"]
    assert question.schema["properties"]["hero"]["oneOf"] == [{"const": "h1", "title": "Hero one"}]


def test_defaults_fill_the_fields_an_answer_leaves_out() -> None:
    assert answer_of(asked(), {"name": "Ann"}) == {
        "name": "Ann",
        "age": 30,
        "score": 9.5,
        "ok": True,
        "tags": ["a"],
    }


def test_an_answer_of_every_kind_is_checked_and_kept() -> None:
    content = {
        "name": "Ann",
        "email": "ann@example.org",
        "site": "https://example.org/ann",
        "born": "1990-02-03",
        "at": "2026-11-24T10:00:00Z",
        "age": 41.0,
        "size": "m",
        "hero": "h1",
        "tags": ["a", "c"],
        "fish": ["f1"],
        "ok": False,
    }
    answer = answer_of(asked(), content)
    assert answer["age"] == 41
    assert isinstance(answer["age"], int)
    assert answer["ok"] is False
    assert answer["tags"] == ["a", "c"]


@pytest.mark.parametrize(
    ("content", "problem"),
    [
        ({}, "field 'name' (Name) is required"),
        ({"name": ""}, "must be at least 1 characters long"),
        ({"name": "x" * 10_001}, "must be at most 10,000 characters long"),
        ({"name": "A", "email": "not an email"}, "field 'email' must be a valid email"),
        ({"name": "A", "email": "a@b"}, "field 'email' must be a valid email"),
        ({"name": "A", "site": "example.org"}, "field 'site' must be a valid uri"),
        ({"name": "A", "born": "03/02/1990"}, "field 'born' must be a valid date"),
        ({"name": "A", "age": 1.5}, "field 'age' must be a whole number"),
        ({"name": "A", "age": 200}, "field 'age' must be at most 150"),
        ({"name": "A", "age": True}, "field 'age' must be a number"),
        ({"name": "A", "score": float("nan")}, "field 'score' must be a number"),
        ({"name": "A", "score": 10**400}, "field 'score' must be a number"),
        ({"name": "A", "ok": "yes"}, "field 'ok' must be true or false"),
        ({"name": "A", "size": "xl"}, "field 'size' must be one of ['s', 'm', 'l']"),
        ({"name": "A", "hero": "Hero one"}, "field 'hero' must be one of ['h1']"),
        ({"name": "A", "tags": ["a", "b", "c"]}, "field 'tags' must name at most 2 choice(s)"),
        ({"name": "A", "tags": ["a", "a"]}, "field 'tags' names a choice twice"),
        ({"name": "A", "tags": "a"}, "field 'tags' must be a list of choices"),
        ({"name": "A", "fish": ["f2"]}, "has ['f2'], not among the choices ['f1']"),
        ({"name": "A", "color": "red"}, "'color' is not a field of the form"),
    ],
)
def test_an_answer_that_does_not_fit_says_which_field_and_why(
    content: dict[str, Any], problem: str
) -> None:
    with pytest.raises(ConfigurationError) as refused:
        answer_of(asked(), content)
    assert problem in str(refused.value)
    assert "MCP server 'test'" in str(refused.value)


@pytest.mark.parametrize(
    ("schema", "problem"),
    [
        ({"type": "array"}, "must be an object schema"),
        ("not a schema", "must be an object schema"),
        (
            {"type": "object", "properties": {"a": {"type": "object", "properties": {}}}},
            "nested objects are not asked",
        ),
        ({"type": "object", "properties": {"a": {"$ref": "#/x"}}}, "must be a string, number"),
        (
            {"type": "object", "properties": {"a": {"type": "array", "items": {"type": "number"}}}},
            "holds choices of strings only",
        ),
        ({"type": "object", "properties": {}, "required": ["a"]}, "does not have: ['a']"),
        (
            {"type": "object", "properties": {f"f{i}": {"type": "string"} for i in range(33)}},
            "the form has 33 fields; at most 32",
        ),
        ({"type": "object", "properties": {"x" * 65: {"type": "string"}}}, "field name must be"),
        ({"type": "object", "properties": {"a\nb": {"type": "string"}}}, "field name must be"),
        (
            {"type": "object", "properties": {"a": {"type": "integer", "default": "ten"}}},
            "its default must be a number",
        ),
        (
            {"type": "object", "properties": {"a": {"type": "number", "minimum": 2, "maximum": 1}}},
            "minimum is above maximum",
        ),
        (
            {"type": "object", "properties": {"a": {"type": "string", "enum": list(range(3))}}},
            "choices must be 1 to 100 strings",
        ),
        (
            {"type": "object", "properties": {"a": {"type": "string", "enum": ["x"] * 101}}},
            "choices must be 1 to 100 strings",
        ),
        (
            {"type": "object", "properties": {"a": {"type": "string", "format": "regex"}}},
            "format must be one of",
        ),
        (
            {"type": "object", "properties": {"a": {"type": "string", "description": "d" * 1001}}},
            "description must be text of at most 1000",
        ),
    ],
)
def test_a_form_mcp_does_not_allow_is_not_asked(schema: object, problem: str) -> None:
    with pytest.raises(QuestionError) as refused:
        question_of("Question?", schema, asker="MCP server 'test'")
    assert problem in str(refused.value)


def test_a_message_too_long_is_not_asked() -> None:
    with pytest.raises(QuestionError, match="4,001 characters long"):
        question_of("?" * 4001, {"type": "object", "properties": {}}, asker="x")


def request_with(question: Question) -> ApprovalRequest:
    return ApprovalRequest(
        "call_1",
        "files_book",
        {"day": "Monday"},
        ("answer", "reject", "respond"),
        ("main", "task:booker#1"),
        question=question,
    )


def test_a_request_with_its_question_reads_back_as_the_thread_records_it() -> None:
    question = asked()
    request = request_with(question)
    assert ApprovalRequest.from_json(asdict(request)) == request


def test_answers_are_written_and_read_as_json() -> None:
    for decision in (Answer({"name": "Ann"}), Answer(action="decline"), Answer(action="cancel")):
        assert decision_from_json(decision_to_json(decision)) == decision
        assert decision_of(decision_to_json(decision)) == decision
    assert decision_of({"kind": "answer", "content": {"a": 1}}) == Answer({"a": 1})
    with pytest.raises(ConfigurationError, match="an answer is"):
        decision_of({"kind": "answer", "action": "maybe"})
    with pytest.raises(ConfigurationError, match="an answer is"):
        decision_of({"kind": "answer", "content": ["not", "a", "mapping"]})


def test_a_decision_on_a_question_is_checked_and_recorded_with_its_defaults() -> None:
    waiting = [asdict(request_with(asked()))]
    chosen = match_decisions(waiting, [Answer({"name": "Ann"})])
    assert chosen["call_1"]["content"]["age"] == 30
    assert match_decisions(waiting, [Reject("no")])["call_1"]["kind"] == "reject"
    with pytest.raises(ConfigurationError, match=r"field 'name' \(Name\) is required"):
        match_decisions(waiting, [Answer()])
    with pytest.raises(ConfigurationError, match="has no content"):
        match_decisions(waiting, [Answer({"name": "Ann"}, action="decline")])


def test_an_answer_is_refused_for_a_call_that_asks_no_question() -> None:
    gated = [asdict(ApprovalRequest("c", "write_file", {}, ("approve", "reject")))]
    with pytest.raises(ConfigurationError, match="'answer' is not allowed"):
        match_decisions(gated, [Answer()])
