"""Human approval of tool calls: what a run asks for, and the decisions that answer it.

`create_agent(interrupt_on={"write_file": True, "delete": {"allow": ["approve", "reject"]}})`
stops a run before those tools run, with `stop_reason="interrupted"` and one
`ApprovalRequest` per waiting call in `RunResult.interrupts`. `agent.resume(thread_id,
decisions=[...])` answers them, in the same process or another one; a mapping by call id
may answer some of them, and the others keep waiting (the turn's calls run once every one
is decided). A `"when"` predicate on the call's arguments gates only some calls:
`{"write_file": {"when": lambda args: not args["file_path"].startswith("/notes/")}}`.

Subagents keep their parent's gates. A gated call of a subagent, at any depth, stops
the whole run the same way, its request naming the subagent (`path`); `resume` goes on
inside that subagent, and calls that finished (its own, or sibling subagents') never run
again. Without a thread to record the wait in, a subagent's gated call is refused with
a tool error telling it to leave that call to the main agent.

A tool's server may also ask the person a question while the call runs (an MCP server's
elicitation): the run stops the same way, the request carrying the `question` (a
message and a form), and `Answer(content={...})` answers it (`Reject` declines it,
`Answer(action="cancel")` dismisses it, `Respond` ends the call with a result of your
own). The call is then made again from its start, and the server's same question gets
the recorded answer; a different question stops the run again.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, TypeAlias

from tether.errors import AlreadyDecidedError, ConfigurationError
from tether.questions import Action, Question, answer_of

__all__ = [
    "ANSWERS",
    "CAN_ASK",
    "CLIENT_TOOL_DECISIONS",
    "DECISIONS",
    "DECISION_KINDS",
    "DECISION_TYPES",
    "QUESTION_DECISIONS",
    "Answer",
    "ApprovalRequest",
    "Approve",
    "Decision",
    "Edit",
    "Gate",
    "Question",
    "Reject",
    "Respond",
    "WaitsForAnswer",
    "approval_rules",
    "decision_from_json",
    "decision_of",
    "decision_to_json",
    "decisions_from_json",
    "joined",
    "match_decisions",
]

DecisionKind: TypeAlias = Literal["approve", "edit", "reject", "respond", "answer"]
DECISIONS: tuple[DecisionKind, ...] = ("approve", "edit", "reject", "respond")
"""The decisions on a call that waits for approval before it runs."""
QUESTION_DECISIONS: tuple[DecisionKind, ...] = ("answer", "reject", "respond")
"""The decisions on a call whose server asked the person a question."""
ANSWERS = "question_answers"
"""In RunState.data: by call id, what the call's server asked before and the person's
answers (`{"message", "schema", "answer"}`), given again when the call is made again."""
CAN_ASK = "can_ask"
"""In RunState.data: whether the run can stop to wait for a person (it has a thread, and
it is not a subagent in the background)."""
CLIENT_TOOL_DECISIONS: tuple[DecisionKind, ...] = ("respond", "reject")
"""What can answer a client tool's call: its result, or a refusal. Never run here."""
GateConfig: TypeAlias = bool | Mapping[str, Any]
"""One `interrupt_on` value: True, False, or {"allow": [decisions], "when": predicate}."""


@dataclass(frozen=True, slots=True)
class Approve:
    """Run the call as the model made it."""

    kind: Literal["approve"] = "approve"


@dataclass(frozen=True, slots=True)
class Edit:
    """Run the call with these arguments instead; they are validated and permission
    checked like the model's own."""

    args: Mapping[str, Any] = field(default_factory=dict)
    kind: Literal["edit"] = "edit"


@dataclass(frozen=True, slots=True)
class Reject:
    """Do not run the call; the model is told it was rejected, and why."""

    message: str = ""
    kind: Literal["reject"] = "reject"


@dataclass(frozen=True, slots=True)
class Respond:
    """Do not run the call; `message` is its result, as if the tool had said it (a
    failure, with `is_error`)."""

    message: str
    is_error: bool = False
    kind: Literal["respond"] = "respond"


@dataclass(frozen=True, slots=True)
class Answer:
    """The person's answer to a question a tool's server asked during the call: "accept"
    with `content` (the form's fields; checked against the form, its defaults filled in
    for fields left out), or "decline" or "cancel" (no content). The server is told, as
    the call is made again."""

    content: Mapping[str, Any] = field(default_factory=dict)
    action: Action = "accept"
    kind: Literal["answer"] = "answer"


Decision: TypeAlias = Approve | Edit | Reject | Respond | Answer


@dataclass(frozen=True, slots=True)
class ApprovalRequest:
    """A tool call waiting for a decision, and the decisions allowed for it. `path` is
    the agent that made it: ("main",), or a subagent's ("main", "task:coder#1").

    With `client_tool`, the call is of a tool the caller runs (a run's `client_tools`):
    it waits for the caller's result, given as `Respond` (or refused with `Reject`).
    """

    call_id: str
    tool: str
    args: Mapping[str, Any] | str
    allowed: tuple[DecisionKind, ...]
    path: tuple[str, ...] = ("main",)
    client_tool: bool = False
    question: Question | None = None
    """What the tool's server asks the person, when the call waits for an answer rather
    than for approval (its decisions are then `QUESTION_DECISIONS`)."""

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> ApprovalRequest:
        """A request as a thread records it (`dataclasses.asdict` of one)."""
        return cls(
            data["call_id"],
            data["tool"],
            data["args"],
            tuple(data["allowed"]),
            tuple(data.get("path", ("main",))),
            bool(data.get("client_tool", False)),
            question=Question.from_json(data["question"]) if data.get("question") else None,
        )


class SubagentPaused(BaseException):
    """Raised through a `task` call whose subagent stopped for decisions, so the run
    above stops too, leaving the call unanswered. A BaseException, as cancellation is:
    tool error handling must not turn it into a result."""

    def __init__(self, requests: Sequence[ApprovalRequest]) -> None:
        super().__init__(f"{len(requests)} call(s) of a subagent wait for a decision")
        self.requests = tuple(requests)


class WaitsForAnswer(SubagentPaused):
    """Raised through a tool call whose server asked the person a question the run
    cannot answer itself: the run stops, the call unanswered, until the person answers
    (`request.question`); then the call is made again."""

    def __init__(self, request: ApprovalRequest) -> None:
        super().__init__([request])
        self.args = (f"{request.tool} waits for the person's answer to a question",)


@dataclass(frozen=True, slots=True)
class Gate:
    """A tool's approval rule: the decisions allowed, and which calls it stops (all of
    them when `when` is None)."""

    allowed: tuple[DecisionKind, ...] = DECISIONS
    when: Callable[[Mapping[str, Any]], bool] | None = None

    def stops(self, args: Mapping[str, Any] | str) -> bool:
        """Whether a call with `args` must wait for a decision."""
        if self.when is None or isinstance(args, str):
            return True
        return bool(self.when(args))

    def also(self, other: Gate) -> Gate:
        """This gate and `other` both in force: a call either stops waits, and only the
        decisions both allow can be taken (rejecting, when they share none)."""
        allowed = tuple(d for d in self.allowed if d in other.allowed) or ("reject",)
        if self.when is None or other.when is None:
            return Gate(allowed)
        return Gate(allowed, lambda args: self.stops(args) or other.stops(args))


def joined(outer: Mapping[str, Gate], inner: Mapping[str, Gate]) -> dict[str, Gate]:
    """The gates of an agent (`inner`) under the gates of the agents above it (`outer`):
    a tool gated by both keeps both, so a subagent's gate only adds to its parent's."""
    gates = dict(outer)
    for name, gate in inner.items():
        gates[name] = gates[name].also(gate) if name in gates else gate
    return gates


def approval_rules(
    interrupt_on: Mapping[str, GateConfig] | None,
    tool_names: Sequence[str],
) -> dict[str, Gate]:
    """`interrupt_on` checked and normalized: tool name -> its gate."""
    rules: dict[str, Gate] = {}
    for name, config in (interrupt_on or {}).items():
        if name not in tool_names:
            known = ", ".join(sorted(tool_names)) or "none"
            raise ConfigurationError(
                f"interrupt_on names {name!r}, which is not a tool of this agent (tools: {known})"
            )
        if config is False:
            continue
        rules[name] = Gate() if config is True else _gate(name, config)
    return rules


def _gate(name: str, config: object) -> Gate:
    shape = "True, False or {'allow': [decisions], 'when': predicate}"
    if not isinstance(config, Mapping) or not config or set(config) - {"allow", "when"}:
        raise ConfigurationError(f"interrupt_on[{name!r}] must be {shape}, got {config!r}")
    allow = config.get("allow", DECISIONS)
    if isinstance(allow, str) or not isinstance(allow, Sequence) or not allow:
        raise ConfigurationError(
            f"interrupt_on[{name!r}]['allow'] must be a non-empty list of decisions, got {allow!r}"
        )
    unknown = [a for a in allow if a not in DECISIONS]
    if unknown:
        raise ConfigurationError(
            f"interrupt_on[{name!r}] allows unknown decisions {unknown}; "
            f"choose from {list(DECISIONS)}"
        )
    when = config.get("when")
    if when is not None and not callable(when):
        raise ConfigurationError(
            f"interrupt_on[{name!r}]['when'] must be a function of the call's arguments, "
            f"got {when!r}"
        )
    return Gate(tuple(d for d in DECISIONS if d in allow), when)


def decision_to_json(decision: Decision) -> dict[str, Any]:
    if isinstance(decision, Answer):
        return {"kind": "answer", "action": decision.action, "content": dict(decision.content)}
    if isinstance(decision, Edit):
        return {"kind": "edit", "args": dict(decision.args)}
    if isinstance(decision, Respond) and decision.is_error:
        return {"kind": "respond", "message": decision.message, "is_error": True}
    if isinstance(decision, Reject | Respond):
        return {"kind": decision.kind, "message": decision.message}
    return {"kind": "approve"}


def decision_from_json(data: Mapping[str, Any]) -> Decision:
    kind = data["kind"]
    if kind == "edit":
        return Edit(data["args"])
    if kind == "reject":
        return Reject(data["message"])
    if kind == "respond":
        return Respond(data["message"], bool(data.get("is_error", False)))
    if kind == "answer":
        return Answer(data.get("content") or {}, data.get("action", "accept"))
    return Approve()


def match_decisions(
    requests: Sequence[Mapping[str, Any]],
    decisions: Sequence[Decision] | Mapping[str, Decision] | None,
    *,
    decided: Mapping[str, Mapping[str, Any]] | None = None,
) -> dict[str, dict[str, Any]]:
    """`decisions` as JSON by call id, each checked against the waiting request it answers
    and the decisions that request allows.

    A mapping by call id may answer some of the waiting calls: the others keep waiting. A
    list answers all of them, in the order of `requests`. `decided` holds the decisions
    given before, by call id: a mapping that names one of those calls again raises
    `AlreadyDecidedError` (a double click, a second client), so nothing is decided twice.
    """
    waiting = {r["call_id"]: r for r in requests}
    listing = ", ".join(f"{r['tool']} ({r['call_id']})" for r in requests)
    if decisions is None:
        raise ConfigurationError(
            f"{len(requests)} call(s) wait for a decision: {listing}; pass decisions=[...]"
        )
    if isinstance(decisions, Mapping):
        if not decisions:
            raise ConfigurationError(f"decisions={{}} decides nothing; waiting: {listing}")
        unknown = [k for k in decisions if k not in waiting]
        _refuse_decided_again(unknown, decided or {})  # 409, not 400: it was waiting before
        if unknown:
            raise ConfigurationError(
                f"decisions name calls that are not waiting: {unknown}; waiting: {listing}"
            )
        by_id = dict(decisions)
    elif isinstance(decisions, str | bytes) or len(decisions) != len(requests):
        got = "a string" if isinstance(decisions, str | bytes) else len(decisions)
        raise ConfigurationError(
            f"{len(requests)} call(s) wait for a decision ({listing}), got {got} decisions; "
            "to decide some of them only, pass a mapping by call id"
        )
    else:
        by_id = {r["call_id"]: d for r, d in zip(requests, decisions, strict=True)}
    return {k: _checked(d, waiting[k]) for k, d in by_id.items()}


def _refuse_decided_again(ids: Sequence[object], decided: Mapping[str, Mapping[str, Any]]) -> None:
    again = [i for i in ids if isinstance(i, str) and i in decided]
    if again:
        earlier = {i: decision_from_json(decided[i]) for i in again}
        listing = ", ".join(f"{i}: {d.kind}" for i, d in earlier.items())
        raise AlreadyDecidedError(
            f"these calls were decided before ({listing}); nothing ran again", decisions=earlier
        )


DECISION_TYPES = (Approve, Edit, Reject, Respond, Answer)
DECISION_KINDS = (
    "Approve(), Edit(args=...), Reject(message=...), Respond(message=...) or Answer(content=...)"
)


def _checked(decision: object, request: Mapping[str, Any]) -> dict[str, Any]:
    if not isinstance(decision, DECISION_TYPES):
        raise ConfigurationError(f"a decision is {DECISION_KINDS}, got {decision!r}")
    if decision.kind not in request["allowed"]:
        raise ConfigurationError(
            f"{decision.kind!r} is not allowed for {request['tool']} ({request['call_id']}); "
            f"allowed: {list(request['allowed'])}"
        )
    if isinstance(decision, Edit) and not isinstance(decision.args, Mapping):
        raise ConfigurationError(f"Edit args must be a mapping, got {decision.args!r}")
    if isinstance(decision, Answer):
        return _answered(decision, request)
    return decision_to_json(decision)


def _answered(decision: Answer, request: Mapping[str, Any]) -> dict[str, Any]:
    """An answer as the thread records it: an accepted form checked against the question
    and completed with its defaults."""
    if decision.action not in ("accept", "decline", "cancel"):
        raise ConfigurationError(
            f"Answer action is 'accept', 'decline' or 'cancel', got {decision.action!r}"
        )
    content: dict[str, Any] = {}
    if request.get("question") is None:
        raise ConfigurationError(f"{request['tool']} ({request['call_id']}) asks no question")
    if decision.action == "accept":
        content = answer_of(Question.from_json(request["question"]), decision.content)
    elif decision.content:
        raise ConfigurationError(f"an Answer with action {decision.action!r} has no content")
    return {"kind": "answer", "action": decision.action, "content": content}


def decisions_from_json(data: object) -> list[Decision] | dict[str, Decision]:
    """Decisions written as JSON: a list in the order of the waiting calls, or an object
    by call id, of `{"kind": "approve" | "edit" | "reject" | "respond" | "answer", ...}`."""
    if isinstance(data, list):
        return [decision_of(item) for item in data]
    if isinstance(data, dict):
        return {str(key): decision_of(value) for key, value in data.items()}
    raise ConfigurationError(f"decisions must be a JSON list or object, got {data!r}")


def decision_of(item: object) -> Decision:
    """One decision written as JSON (from a person, a file, a web page), checked."""
    if isinstance(item, Mapping) and item.get("kind") == "answer":
        return _answer_of(item)
    if not isinstance(item, Mapping) or item.get("kind") not in DECISIONS:
        raise ConfigurationError(
            'a decision is {"kind": "approve"}, {"kind": "edit", "args": {...}}, '
            f'{{"kind": "reject", "message": "..."}} or {{"kind": "respond", '
            f'"message": "..."}}; got {item!r}'
        )
    message = str(item.get("message", ""))
    return decision_from_json(
        {"kind": item["kind"], "args": item.get("args", {}), "message": message}
    )


def _answer_of(item: Mapping[str, Any]) -> Answer:
    """An answer to a question written as JSON, checked (its content against the
    question later, when it is matched with the request it answers)."""
    content, action = item.get("content") or {}, item.get("action", "accept")
    if not isinstance(content, Mapping) or action not in ("accept", "decline", "cancel"):
        raise ConfigurationError(
            'an answer is {"kind": "answer", "action": "accept" | "decline" | "cancel", '
            f'"content": {{field: value}}}}; got {item!r:.300}'
        )
    return Answer(dict(content), action)
