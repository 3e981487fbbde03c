"""The run loop's approval gates: which calls wait for a person (or, for a client tool,
for the caller), and what the decisions given for them do.

A run tree shares one set of decisions and questions, each for the agent that asked;
a subagent keeps the gates of the agents above it, so it refuses what they gate.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from typing import TYPE_CHECKING

from tether import prompts
from tether._loop_tools import answer_unrun

if TYPE_CHECKING:
    from tether.checkpoint.journal import Thread
from tether.approval import (
    ANSWERS,
    CAN_ASK,
    CLIENT_TOOL_DECISIONS,
    Answer,
    ApprovalRequest,
    Decision,
    Edit,
    Gate,
    Reject,
    Respond,
    decision_from_json,
    joined,
)
from tether.events import AgentPath, ToolCallFinished
from tether.messages import AssistantMessage, ToolCall, ToolResult
from tether.models.base import ToolSpec
from tether.state import RunState
from tether.tools.tool import decode_args

__all__ = ["Gates"]

_GATES = "approval_gates"  # in RunState.data: the gates in force for the run
_DECISIONS = "approval_decisions"  # in RunState.data: the decisions given to the run tree
_WAITS = "can_wait"  # in RunState.data: whether a gated call may stop the run to wait
_QUESTIONS = "questions_asked"  # in RunState.data: the tree's calls that wait for answers


class Gates:
    """The gates of one run, and the decisions and questions of its tree."""

    def __init__(self, state: RunState, approvals: Mapping[str, Gate]) -> None:
        self.state = state
        inherited = state.parent.data.get(_GATES, {}) if state.parent is not None else {}
        self.gates: dict[str, Gate] = joined(inherited, approvals)
        state.data[_GATES] = self.gates
        self.decisions: dict[str, tuple[AgentPath, Decision]] = {}
        """Decisions for waiting calls, by call id, with the path of the agent that asked:
        shared by the run tree, each used once, by that agent only."""
        self.questions: dict[str, ApprovalRequest] = {}
        """Calls that stopped the run for a person's answer to their server's question,
        by call id: shared by the run tree, each for the agent that made the call."""
        self.client_tools: dict[str, ToolSpec] = {}
        """Tools the caller runs (see `execute_run`), by name."""

    def share(self, thread: Thread | None, *, waits: bool, recorded: bool) -> None:
        """Take the tree's decisions and questions: a subagent's parent's, or for the top
        run resumed on `thread`, those recorded for the calls that asked last. A gated
        call may stop the run to wait when the run is `recorded` in a thread and it and
        every run above it `waits`."""
        state, parent = self.state, self.state.parent
        if parent is not None:  # one set for the tree, each for the agent that asked
            self.decisions = parent.data.get(_DECISIONS, {})
            self.questions = parent.data.get(_QUESTIONS, {})
        elif thread is not None:
            asked = {r["call_id"]: tuple(r.get("path", ("main",))) for r in thread.asked}
            self.decisions = {
                k: (asked[k], decision_from_json(v))
                for k, v in thread.decisions.items()
                if k in asked
            }
            asked_again = [r for r in thread.asked if r.get("question")]
            self.questions = {r["call_id"]: ApprovalRequest.from_json(r) for r in asked_again}
        state.data[_DECISIONS] = self.decisions
        state.data[_WAITS] = waits and (parent is None or parent.data.get(_WAITS, True))
        state.data[_QUESTIONS] = self.questions
        state.data[CAN_ASK] = recorded and state.data[_WAITS]

    def can_wait(self) -> bool:
        """Whether a gated call may stop this run to wait (see `share`)."""
        return bool(self.state.data.get(_WAITS, True))

    def waiting(self, calls: list[ToolCall], results: list[ToolResult | None]) -> list[int]:
        """The indexes of the calls that wait for a decision none was given for. A client
        tool's call whose arguments are unreadable is answered here instead."""
        gates, client = self.gates, self.client_tools
        self._refuse_unreadable(calls, results)
        return [
            i
            for i, (c, r) in enumerate(zip(calls, results, strict=True))
            if r is None
            and not self.decided(c.id)
            and (
                self.asks(c.id)
                or c.name in client
                or (c.name in gates and gates[c.name].stops(c.args))
            )
        ]

    def refuse(
        self, calls: list[ToolCall], results: list[ToolResult | None], waiting: list[int]
    ) -> None:
        """Answer the `waiting` calls of a run that cannot stop to wait (a subagent's in
        the background, or one without a thread) with a refusal."""
        for i in waiting:
            text = prompts.render("gated_in_subagent", tool=calls[i].name)
            results[i] = answer_unrun(self.state, calls[i], text)

    def request(self, call: ToolCall) -> ApprovalRequest:
        """What a waiting call asks for: a decision, or for a client tool its result."""
        if self.asks(call.id):  # still the question its server asked
            return self.questions[call.id]
        path = self.state.path
        if call.name in self.client_tools:
            allowed = CLIENT_TOOL_DECISIONS
            return ApprovalRequest(call.id, call.name, call.args, allowed, path, client_tool=True)
        return ApprovalRequest(call.id, call.name, call.args, self.gates[call.name].allowed, path)

    def apply(self, calls: list[ToolCall], results: list[ToolResult | None]) -> None:
        """Apply the decisions given for this agent's calls, each once: an edit changes the
        call (and the history), a rejection or a response answers it, an answer to a
        server's question lets the call be made again."""
        state = self.state
        for i, call in enumerate(calls):
            if results[i] is not None or not self.decided(call.id):
                continue
            decision = self.decisions.pop(call.id)[1]  # once: a later call cannot reuse it
            if self.asks(call.id) and not isinstance(decision, Respond):
                self._answer_question(self.questions.pop(call.id), decision)
                continue  # made again, to hear the answer
            if isinstance(decision, Edit):
                calls[i] = replace(call, args=dict(decision.args))
                self._rewrite_call(calls[i])
            elif isinstance(decision, Reject):
                text = prompts.render("rejected", message=decision.message or "no reason given")
                results[i] = result = ToolResult.of(call, text, is_error=True)
                state.emit(ToolCallFinished(state.path, call, result, "rejected"))
            elif isinstance(decision, Respond):
                as_error = decision.is_error
                results[i] = result = ToolResult.of(call, decision.message, is_error=as_error)
                state.emit(ToolCallFinished(state.path, call, result, "answered"))

    def decided(self, call_id: str) -> bool:
        """Whether a decision waits for this agent's call `call_id`."""
        found = self.decisions.get(call_id)
        return found is not None and found[0] == self.state.path

    def asks(self, call_id: str) -> bool:
        """Whether this agent's call `call_id` stopped the run with its server's question."""
        found = self.questions.get(call_id)
        return found is not None and found.path == self.state.path

    def _refuse_unreadable(self, calls: list[ToolCall], results: list[ToolResult | None]) -> None:
        """A client tool's call whose arguments are not a JSON object is answered here:
        the caller is never handed a call it cannot read."""
        for i, call in enumerate(calls):
            if results[i] is not None or call.name not in self.client_tools:
                continue
            problem = decode_args(call.name, call.args)
            if isinstance(problem, str):
                results[i] = answer_unrun(self.state, call, problem)

    def _answer_question(self, request: ApprovalRequest, decision: Decision) -> None:
        """Record the person's answer for the call made again: its server gets it when
        it asks the same question (`Reject` declines)."""
        question = request.question
        assert question is not None
        answer = (
            {"action": decision.action, "content": dict(decision.content)}
            if isinstance(decision, Answer)
            else {"action": "decline", "content": {}}
        )
        asked = {"message": question.message, "schema": dict(question.schema), "answer": answer}
        self.state.data.setdefault(ANSWERS, {})[request.call_id] = (*question.answered, asked)

    def _rewrite_call(self, call: ToolCall) -> None:
        """Put an edited call in place of the model's, so the history shows what ran."""
        messages = self.state.messages
        for index in range(len(messages) - 1, -1, -1):
            message = messages[index]
            if isinstance(message, AssistantMessage) and any(
                c.id == call.id for c in message.tool_calls
            ):
                parts = tuple(
                    call if isinstance(p, ToolCall) and p.id == call.id else p
                    for p in message.parts
                )
                messages[index] = replace(message, parts=parts)
                return
