"""The run loop. One step: check limits -> build request -> model -> tools -> loop check.

A run never loses what it did: whatever ends it (an answer, a limit, a timeout, an
error), the `RunResult` holds every message, the usage and the cost. Errors are raised
with that result attached as `.result`.
"""

from __future__ import annotations

import asyncio
import functools
import itertools
import time
import uuid
import warnings
from collections.abc import AsyncIterator, Callable, Sequence
from dataclasses import asdict, replace
from typing import TYPE_CHECKING, Any

from pydantic_core import to_jsonable_python

from tether import prompts, tracing
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
    SubagentPaused,
    decision_from_json,
    joined,
)
from tether.backends.errors import BackendError
from tether.backends.paths import clean, is_under
from tether.errors import (
    ConfigurationError,
    ContentFilterError,
    CostUnknownWarning,
    ModelError,
    OutputError,
    RunError,
    TetherError,
    ToolError,
    describe,
)
from tether.events import (
    AgentPath,
    ApprovalRequested,
    Event,
    ModelDelta,
    RunFinished,
    RunStarted,
    StepFinished,
    ToolCallFinished,
    ToolCallStarted,
)
from tether.limits import Budget, LoopDetector
from tether.messages import (
    AssistantMessage,
    Message,
    OnTheWire,
    ToolCall,
    ToolResult,
    ToolResultMessage,
    UserMessage,
    new_call_id,
    own_calls,
)
from tether.models.base import ModelRequest, ModelResponse, StreamDelta, StreamItem, ToolSpec
from tether.models.usage import checked
from tether.output import FINAL_RESULT
from tether.state import FILES_SEEN, SAMPLE, RunState, ToolContext
from tether.tools.tool import decode_args
from tether.tracing import failed, span

if TYPE_CHECKING:
    from tether.agent import Agent, RunResult, StopReason
    from tether.capabilities.base import ToolHandler
    from tether.checkpoint.journal import Journal, Thread

__all__ = ["JOURNAL", "SUBAGENT_RUNS", "execute_run"]

_GATES = "approval_gates"  # in RunState.data: the gates in force for the run
_DECISIONS = "approval_decisions"  # in RunState.data: the decisions given to the run tree
_WAITS = "can_wait"  # in RunState.data: whether a gated call may stop the run to wait
_QUESTIONS = "questions_asked"  # in RunState.data: the tree's calls that wait for answers
JOURNAL = "journal"
"""In RunState.data: the journal recording the run, when it has a thread."""
SUBAGENT_RUNS = "subagent_runs"
"""In RunState.data of a resumed run: its subagents' recorded runs, by `task` call id."""
_NOT_RUN = "Not run: the final answer was given in the same turn."
_NOT_AN_ANSWER = {
    "length": ("the reply was cut off by the output token limit", "reply_cut_off"),
    "malformed_call": ("the model's tool call was malformed", "malformed_call"),
}
"""Replies without calls that are never the answer, by finish reason: what went wrong,
and the prompt that tells the model."""
_FILTERED = "Not run: the provider's content filter stopped the reply this call was in."
_DUPLICATE_ANSWER = "Ignored: an earlier call in this turn already gave the final answer."
_ANSWER_RECEIVED = "Final answer received."
_STATE_UNKNOWN = (
    "Interrupted: the run stopped while this call was running, so whether it took effect "
    "is unknown. Check before calling it again."
)


async def execute_run(
    agent: Agent[Any],
    messages: list[Message],
    *,
    new_messages: int = 1,
    deps: Any = None,
    emit: Callable[[Event], None] | None = None,
    path: AgentPath = ("main",),
    budget: Budget | None = None,
    parent: RunState | None = None,
    journal: Journal | None = None,
    thread: Thread | None = None,
    resume: bool = False,
    run_id: str | None = None,
    waits: bool = True,
    client_tools: Sequence[ToolSpec] = (),
) -> RunResult[Any]:
    """Run `agent` on `messages` until it stops; the last `new_messages` are this run's prompt.

    A subagent's run gets its `parent`'s run state: it shares the parent's backend and
    charges its usage to the parent, within `budget` (a child of the parent's).
    With a `journal` the run is recorded in its thread; `thread` gives the files and
    todos the thread holds, and with `resume` its unfinished last run is continued.
    `run_id` names a new run (one is made up otherwise). With `waits=False` (a subagent
    in the background) a gated call is refused rather than waited for, here and below.
    `client_tools` are offered to the model beside the agent's own; the caller runs
    them: a call of one waits, as a gated call does, for the caller's answer.
    """
    budget = budget or Budget(agent.limits)
    state = RunState(
        run_id=run_id or f"run_{uuid.uuid4().hex[:16]}",
        path=path,
        messages=messages,
        deps=deps,
        budget=budget,
        parent=parent,
    )
    if parent is not None:
        state.backend = parent.backend
    if emit is not None:
        state.emit = emit
    if journal is not None:
        state.thread_id = journal.thread_id
    if thread is not None:
        state.files = dict(thread.files)
        state.todos = thread.todos
        state.data[FILES_SEEN] = dict(thread.seen)  # a file changed since is read again
        if resume:
            _restore(state, budget, thread)
    run = _Run(agent, state, budget, new_messages, journal)
    run.client_tools = {spec.name: spec for spec in client_tools}
    if parent is not None:  # one set of decisions for the tree, each for the agent that asked
        run.decisions = parent.data.get(_DECISIONS, {})
        run.questions = parent.data.get(_QUESTIONS, {})
    if resume and thread is not None:
        run.pending = thread.pending_calls
        run.recorded = (thread.results, thread.started)
        if parent is None:  # given to the top run, for the calls that asked last
            asked = {r["call_id"]: tuple(r.get("path", ("main",))) for r in thread.asked}
            run.decisions = {
                k: (asked[k], decision_from_json(v))
                for k, v in thread.decisions.items()
                if k in asked
            }
            run.questions = {
                r["call_id"]: ApprovalRequest.from_json(r)
                for r in thread.asked
                if r.get("question")
            }
        state.data[SUBAGENT_RUNS] = thread.subagents
    state.data[_DECISIONS] = run.decisions
    state.data[_WAITS] = waits and (parent is None or parent.data.get(_WAITS, True))
    state.data[_QUESTIONS] = run.questions
    state.data[CAN_ASK] = journal is not None and state.data[_WAITS]
    state.data[SAMPLE] = run.sample
    if journal is not None:
        state.data[JOURNAL] = journal
    return await run.execute()


async def compact_thread(
    agent: Agent[Any], journal: Journal, thread: Thread, emit: Callable[[Event], None]
) -> None:
    """Compact `thread`'s history now, as a run of its own that calls no tool: set up as
    a run is, summarized by `agent`'s compaction, recorded by `journal`."""
    from tether.capabilities.compaction import ContextCompaction

    hooks = agent._plan.before_model
    compaction = next((c for c in hooks if isinstance(c, ContextCompaction)), None)
    if compaction is None:
        raise ConfigurationError("this agent has no compaction to use (compaction=None)")
    budget = Budget(agent.limits)
    state = RunState(
        run_id=f"run_{uuid.uuid4().hex[:16]}",
        path=("main",),
        messages=list(thread.messages),
        deps=None,
        budget=budget,
        parent=None,
    )
    state.emit, state.thread_id = emit, journal.thread_id
    state.files, state.todos = dict(thread.files), thread.todos
    await journal.begin(state, len(state.messages))
    stop = "error"
    try:
        for capability in agent._plan.on_run_start:
            await capability.on_run_start(state)
        await compaction.compact_now(state)
        stop = "completed"
    finally:
        for capability in agent._plan.on_run_end:
            await capability.on_run_end(state)
        await journal.end(state, stop, None)  # a failed compaction leaves nothing to resume


def _restore(state: RunState, budget: Budget, thread: Thread) -> None:
    """Continue the spending of the thread's unfinished run."""
    assert thread.run_id is not None
    state.run_id = thread.run_id
    state.usage, state.cost_usd, state.steps = thread.usage, thread.cost_usd, thread.steps
    state.usage_by_agent["/".join(state.path)] = thread.usage
    budget.usage, budget.cost_usd = thread.usage, thread.cost_usd or 0.0
    budget.steps, budget.model_calls = thread.steps, thread.usage.requests


class _Run:
    def __init__(
        self,
        agent: Agent[Any],
        state: RunState,
        budget: Budget,
        new_messages: int,
        journal: Journal | None = None,
    ) -> None:
        self.agent = agent
        self.journal = journal
        self.system_prompt = agent._plan.system_prompt
        self.pending: AssistantMessage | None = None
        self.recorded: tuple[dict[str, ToolResult], set[str]] = ({}, set())
        self.decisions: dict[str, tuple[AgentPath, Decision]] = {}
        """Decisions for waiting calls, by call id, with the path of the agent that asked:
        shared by the run tree, each used once, by that agent only."""
        self.interrupts: list[ApprovalRequest] = []
        self.questions: dict[str, ApprovalRequest] = {}
        """Calls that stopped the run for a person's answer to their server's question,
        by call id: shared by the run tree, each for the agent that made the call."""
        self.sampling = asyncio.Lock()
        self.paused: list[ApprovalRequest] = []
        """Requests of subagents that stopped for decisions during this turn's calls."""
        self.client_tools: dict[str, ToolSpec] = {}
        """Tools the caller runs (see `execute_run`), by name."""
        self.plan = agent._plan
        self.state = state
        # A subagent keeps the gates of the agents above it (it refuses what they gate).
        inherited = state.parent.data.get(_GATES, {}) if state.parent is not None else {}
        self.gates: dict[str, Gate] = joined(inherited, self.plan.approvals)
        state.data[_GATES] = self.gates
        self.budget = budget
        self.new_messages = new_messages
        self.new_messages_start = len(state.messages) - new_messages
        self.stop_reason: StopReason | None = None
        self.output: Any = None
        self.output_failures = 0
        self.wrapped_up = False
        self.force_output = False
        self.warned_unknown_cost = False
        self.loops = LoopDetector()
        self.wire = OnTheWire()
        self.announced = False
        self.handle_tool: ToolHandler = self._invoke_tool
        for capability in reversed(self.plan.around_tool):
            self.handle_tool = functools.partial(capability.around_tool, proceed=self.handle_tool)

    async def execute(self) -> RunResult[Any]:
        state = self.state
        model = self.agent.model
        attributes = {
            "gen_ai.operation.name": "invoke_agent",
            "gen_ai.agent.name": state.path[-1],
            "gen_ai.provider.name": tracing.provider_name(model),
            "gen_ai.request.model": model.name,
            "gen_ai.output.type": "json" if self.plan.output.structured else "text",
            "tether.run_id": state.run_id,
        }
        if state.thread_id is not None:
            attributes["gen_ai.conversation.id"] = state.thread_id
        with span(
            f"invoke_agent {state.path[-1]}", attributes, tracing=self.plan.tracing
        ) as current:
            result = await self._execute()
            if current is not None:
                current.set_attributes(
                    {
                        "tether.stop_reason": result.stop_reason,
                        "tether.steps": result.steps,
                        "gen_ai.usage.input_tokens": result.usage.input_tokens,
                        "gen_ai.usage.output_tokens": result.usage.output_tokens,
                    }
                )
            return result

    async def _execute(self) -> RunResult[Any]:
        state = self.state
        error: TetherError | None = None
        try:
            await self._run_until_stopped()
        except TetherError as exc:
            error = exc
        except Exception as exc:
            error = RunError(f"the run failed: {describe(exc)}")
            error.__cause__ = exc
        finally:  # also when the run is cancelled
            for capability in self.plan.on_run_end:
                await capability.on_run_end(state)
        result = self._result(_stop_of(error) if error else self.stop_reason or "error")
        if self.journal is not None:
            try:
                await self.journal.end(state, result.stop_reason, to_jsonable_python(result.output))
            except TetherError as exc:  # storage failed: the run's own error comes first
                if error is None:
                    error = exc
                    result = self._result("error")
        self._announce()  # a run that failed before it began still began
        state.emit(RunFinished(state.path, result))
        if error is not None:
            error.result = result
            raise error
        return result

    async def _run_until_stopped(self) -> None:
        try:
            async with asyncio.timeout_at(_loop_deadline(self.budget)) as scope:
                pending = self.pending
                if pending is not None:  # kept from the start hooks' repairs: it is resumed
                    self.state.messages.pop()
                for capability in self.plan.on_run_start:
                    await capability.on_run_start(self.state)
                if self.plan.run_prompt:
                    extra = [
                        (c.prompt_slot, await c.run_prompt(self.state))
                        for c in self.plan.run_prompt
                    ]
                    self.system_prompt = self.plan.run_system_prompt(extra)
                if pending is not None:
                    self.state.messages.append(pending)
                    self._announce()
                    await self._resume_calls(pending)
                else:
                    self.new_messages_start = len(self.state.messages) - self.new_messages
                    if self.journal is not None:
                        await self.journal.begin(self.state, self.new_messages_start)
                    self._announce()
                while self.stop_reason is None:
                    await self._step()
        except TimeoutError:
            if not scope.expired():
                raise
            self.stop_reason = "timeout"

    def _announce(self) -> None:
        """Say the run started, once: when it is on record, so that whoever stops it
        from then on finds it in its thread."""
        if not self.announced:
            self.announced = True
            self.state.emit(RunStarted(self.state.path, self.state.run_id))

    async def _step(self) -> None:
        if self._limit_reached():
            return
        request = await self._prepare_request()
        response = await self._call_model(request)
        self._record(response, request)
        if response.finish_reason == "content_filter":
            self._filtered(response.message.tool_calls)
        calls = response.message.tool_calls
        if calls:
            await self._handle_calls(calls, cut_off=response.finish_reason == "length")
            if self.stop_reason is None:
                self._check_loops(calls)
        elif response.finish_reason in _NOT_AN_ANSWER:
            reason, prompt = _NOT_AN_ANSWER[response.finish_reason]
            # a dropped call is sent again as a call, not forced into an answer
            force = response.finish_reason != "malformed_call"
            self._output_failed(reason, prompts.text(prompt), force=force)
        else:
            self._handle_reply(response.message)
        if self.stop_reason == "completed" and await self._more_to_do():
            self.stop_reason, self.output = None, None  # another step, with what came in

    async def _more_to_do(self) -> bool:
        """Whether a capability has work for the agent before its answer stands."""
        more = False
        for capability in self.plan.before_finish:
            more = await capability.before_finish(self.state) or more
        return more

    # -- limits ------------------------------------------------------------------

    def _limit_reached(self) -> bool:
        share, limit = self.budget.pressure()
        if share >= 1:
            self.stop_reason = "timeout" if limit == "timeout_seconds" else "budget"
            return True
        if share >= self.agent.limits.wrap_up_at and not self.wrapped_up:
            self.wrapped_up = True
            self.force_output = True
            finish = (
                f"call `{FINAL_RESULT}` with your best answer"
                if self.plan.output.structured
                else "give your best final answer"
            )
            self._say(
                prompts.render(
                    "wrap_up",
                    percent=min(int(share * 100), 99),
                    limit=Budget.describe(limit),
                    finish=finish,
                )
            )
        return False

    def _check_loops(self, calls: Sequence[ToolCall]) -> None:
        limits = self.agent.limits
        streak, repeated = max((self.loops.observe(call), call.name) for call in calls)
        if limits.loop_stop_after is not None and streak >= limits.loop_stop_after:
            self.stop_reason = "loop"
        elif limits.loop_nudge_after is not None and streak >= limits.loop_nudge_after:
            self._say(prompts.render("loop_nudge", tool=repeated, count=streak))

    # -- the model ---------------------------------------------------------------

    async def _prepare_request(self) -> ModelRequest:
        plan = self.plan
        request = ModelRequest(
            system_prompt=self.system_prompt,
            messages=tuple(self.state.messages),
            tools=(*plan.tool_specs, *self.client_tools.values()),
            settings=self.agent.model_settings,
            output_tool=FINAL_RESULT if plan.output.structured else None,
            force_output=self.force_output and plan.output.structured,
        )
        for capability in plan.before_model:
            request = await capability.before_model(self.state, request)
        return request

    async def _call_model(self, request: ModelRequest) -> ModelResponse:
        model, traced = self.agent.model, self.plan.tracing
        call = tracing.model_call(model, request, self.state.thread_id, traced)
        if call is None:  # no span, no metrics: their attributes cost nothing
            return await self._stream_model(request)
        with call:  # the span and the metrics; an exception marks both
            response = await self._stream_model(request)
            call.answered(response)
        return response

    async def _stream_model(self, request: ModelRequest) -> ModelResponse:
        """Stream the model's reply as events; every tool call in it gets tether's own id,
        the one its streamed arguments were shown under."""
        state = self.state
        response: ModelResponse | None = None
        ids = _StreamedCalls()
        stream = self.agent.model.stream(replace(request, messages=self.wire(request.messages)))
        try:
            async for item in stream:
                if isinstance(item, StreamDelta):
                    call_id = ids.of(item) if item.part == "tool_call" else item.call_id
                    delta = ModelDelta(state.path, item.part, item.delta, call_id, item.tool)
                    state.emit(delta)
                else:
                    response = item
        finally:
            await _close(stream)
        if response is None:
            raise ModelError(f"model {self.agent.model.name!r} ended its stream without a response")
        response = replace(response, message=own_calls(response.message, ids.in_order()))
        response = checked(response, request, self.agent.model.name)  # before anyone counts
        for capability in self.plan.after_model:
            response = await capability.after_model(state, response)
        return response

    def _record(self, response: ModelResponse, request: ModelRequest) -> None:
        state = self.state
        usage, cost = self.plan.prices.charge_of(response, self.agent.model, request)
        if cost is None:
            self._warn_unknown_cost()
        state.messages.append(response.message)
        state.charge(usage, cost)
        state.steps += 1
        self.budget.count_step()
        top = state.root
        state.emit(StepFinished(state.path, self.budget.root.steps, top.usage, top.cost_usd))

    def _warn_unknown_cost(self) -> None:
        """Once a run: a cost limit cannot hold for a model without a price."""
        if self.agent.limits.max_cost_usd is None or self.warned_unknown_cost:
            return
        self.warned_unknown_cost = True
        model = self.agent.model
        warnings.warn(
            CostUnknownWarning(
                f"max_cost_usd is set, but the price of model {model.name!r} is unknown, so "
                "its cost is counted as zero; pass prices={...} to create_agent",
                model=f"{model.provider}:{model.name}" if model.provider else model.name,
            ),
            stacklevel=2,
        )

    # -- the answer --------------------------------------------------------------

    def _handle_reply(self, message: AssistantMessage) -> None:
        """A reply without tool calls: the final answer, or a reason to ask again."""
        output = self.plan.output
        text = message.text
        if not output.structured:
            if text.strip():
                self._finish(text)
            else:
                self._output_failed("the reply was empty", prompts.text("empty_reply"))
            return
        value, valid = output.validate_text(text)
        if valid:
            self._finish(value)
        else:
            self._output_failed(
                f"the model replied with text instead of calling '{FINAL_RESULT}'",
                prompts.render("call_final_result", tool=FINAL_RESULT),
            )

    def _finish(self, value: Any) -> None:
        self.output = value
        self.stop_reason = "completed"

    def _output_failed(self, reason: str, correction: str | None, *, force: bool = True) -> None:
        """Count a failed final answer; ask again, or give up past `output_retries`."""
        self.output_failures += 1
        self.force_output = self.force_output or force
        if self.output_failures > self.agent.output_retries:
            raise OutputError(
                f"no valid final answer after {self.agent.output_retries} retries; "
                f"last problem: {reason}"
            )
        if correction is not None:
            self._say(correction)

    def _say(self, text: str) -> None:
        self.state.messages.append(UserMessage.of(text))

    # -- tools -------------------------------------------------------------------

    async def _resume_calls(self, pending: AssistantMessage) -> None:
        """Answer the calls a killed or paused run left: recorded results are kept, calls
        that never started run now, a `task` call whose subagent's run is unfinished goes
        on with that run, and a call that started without a recorded result is reported as
        interrupted (or run again, for an idempotent tool)."""
        results, started = self.recorded
        below = self.state.data.get(SUBAGENT_RUNS, {})
        known: dict[str, ToolResult] = {}
        for call in pending.tool_calls:
            if call.id in results:
                known[call.id] = results[call.id]
            elif call.id in below and below[call.id].unfinished:
                continue  # the subagent resumes where it stopped
            elif call.id in started and not self._asks(call.id):  # else it is made again
                tool = self.plan.tools.get(call.name)
                if tool is None or not tool.idempotent:
                    known[call.id] = ToolResult.of(call, _STATE_UNKNOWN, is_error=True)
        calls = pending.tool_calls
        await self._handle_calls(calls, cut_off=False, known=known)
        if self.stop_reason is None:
            self._check_loops(calls)

    async def _handle_calls(
        self,
        calls: list[ToolCall],
        *,
        cut_off: bool,
        known: dict[str, ToolResult] | None = None,
    ) -> None:
        results: list[ToolResult | None] = [(known or {}).get(call.id) for call in calls]
        if cut_off:
            self._refuse_cut_off(calls, results)
        answer_error = self._take_answer(calls, results)
        if self.stop_reason != "completed" and await self._await_approval(calls, results):
            return  # the calls stay unanswered until a person decides
        to_run = [i for i, result in enumerate(results) if result is None]
        if self.stop_reason == "completed":
            for i in to_run:
                results[i] = ToolResult.of(calls[i], _NOT_RUN, is_error=True)
            to_run = []
        try:
            await self._run_tools(calls, to_run, results)
        finally:
            if not self.paused:
                self.state.messages.append(
                    ToolResultMessage(
                        tuple(r or self._stopped(calls[i], None) for i, r in enumerate(results))
                    )
                )
        if self.paused:  # a subagent waits for decisions: so does this run, calls unanswered
            await self._interrupt(self.paused)
            return
        if answer_error is not None:
            self._output_failed(answer_error, None)

    async def _await_approval(
        self, calls: list[ToolCall], results: list[ToolResult | None]
    ) -> bool:
        """Apply the decisions given for calls that need one; if any such call has none,
        stop the run for a person to decide, and return True. A call of a client tool
        always waits: its answer is the caller's result."""
        gates, client = self.gates, self.client_tools
        self._refuse_unreadable(calls, results)
        waiting = [
            i
            for i, (c, r) in enumerate(zip(calls, results, strict=True))
            if r is None
            and not self._decided(c.id)
            and (
                self._asks(c.id)
                or c.name in client
                or (c.name in gates and gates[c.name].stops(c.args))
            )
        ]
        if waiting and (self.journal is None or not self.state.data.get(_WAITS, True)):
            # A subagent cannot stop its parent's run to wait: the call is refused.
            for i in waiting:
                text = prompts.render("gated_in_subagent", tool=calls[i].name)
                refused = results[i] = ToolResult.of(calls[i], text, is_error=True)
                self.state.emit(ToolCallStarted(self.state.path, calls[i]))
                self.state.emit(ToolCallFinished(self.state.path, calls[i], refused))
            waiting = []
        if waiting:
            await self._interrupt([self._request(calls[i]) for i in waiting])
            return True
        for i, call in enumerate(calls):
            if results[i] is not None or not self._decided(call.id):
                continue
            decision = self.decisions.pop(call.id)[1]  # once: a later call cannot reuse it
            if self._asks(call.id) and not isinstance(decision, Respond):
                self._answer_question(self.questions.pop(call.id), decision)
                continue  # made again, to hear the answer
            if isinstance(decision, Edit):
                calls[i] = replace(call, args=dict(decision.args))
                self._rewrite_call(calls[i])
            elif isinstance(decision, Reject):
                text = prompts.render("rejected", message=decision.message or "no reason given")
                results[i] = result = ToolResult.of(call, text, is_error=True)
                self.state.emit(ToolCallFinished(self.state.path, call, result, "rejected"))
            elif isinstance(decision, Respond):
                as_error = decision.is_error
                results[i] = result = ToolResult.of(call, decision.message, is_error=as_error)
                self.state.emit(ToolCallFinished(self.state.path, call, result, "answered"))
        return False

    def _request(self, call: ToolCall) -> ApprovalRequest:
        """What a waiting call asks for: a decision, or for a client tool its result."""
        if self._asks(call.id):  # still the question its server asked
            return self.questions[call.id]
        path = self.state.path
        if call.name in self.client_tools:
            allowed = CLIENT_TOOL_DECISIONS
            return ApprovalRequest(call.id, call.name, call.args, allowed, path, client_tool=True)
        return ApprovalRequest(call.id, call.name, call.args, self.gates[call.name].allowed, path)

    def _refuse_unreadable(self, calls: list[ToolCall], results: list[ToolResult | None]) -> None:
        """A client tool's call whose arguments are not a JSON object is answered here:
        the caller is never handed a call it cannot read."""
        for i, call in enumerate(calls):
            if results[i] is not None or call.name not in self.client_tools:
                continue
            problem = decode_args(call.name, call.args)
            if isinstance(problem, str):
                self.state.emit(ToolCallStarted(self.state.path, call))
                results[i] = refused = ToolResult.of(call, problem, is_error=True)
                self.state.emit(ToolCallFinished(self.state.path, call, refused))

    def _asks(self, call_id: str) -> bool:
        """Whether this agent's call `call_id` stopped the run with its server's question."""
        found = self.questions.get(call_id)
        return found is not None and found.path == self.state.path

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

    async def sample(self, request: ModelRequest) -> ModelResponse:
        """A request to this agent's model made for one of its tools (an MCP server's
        sampling), with the agent's model settings: one at a time, refused once the
        budget is spent, its output cut to the request's `max_tokens`, the agent's own
        and the tokens the limits leave, and counted in the run's usage, cost and budget."""
        async with self.sampling:
            share, limit = self.budget.pressure()
            if share >= 1:
                raise ToolError(f"the run's {Budget.describe(limit)} is spent")
            left = self.budget.output_tokens_left()
            if left is not None and left < 1:
                raise ToolError("the run's token budget is spent")
            asked = (request.settings.max_tokens, self.agent.model_settings.max_tokens, left)
            most = min((n for n in asked if n is not None), default=None)  # the smallest
            settings = replace(self.agent.model_settings, max_tokens=most)
            request = replace(request, settings=settings)
            model = self.agent.model
            response = checked(await model.request(request), request, model.name)
            usage, cost = self.plan.prices.charge_of(response, model, request)
            if cost is None:
                self._warn_unknown_cost()
            self.state.charge(usage, cost)
            return response

    def _decided(self, call_id: str) -> bool:
        """Whether a decision waits for this agent's call `call_id`."""
        found = self.decisions.get(call_id)
        return found is not None and found[0] == self.state.path

    async def _interrupt(self, requests: list[ApprovalRequest]) -> None:
        """Stop the run for decisions on `requests` (its own calls', or its subagents'),
        recorded in its thread; the top run of the tree tells the caller."""
        self.interrupts = requests
        self.stop_reason = "interrupted"
        if self.journal is not None:
            await self.journal.interrupt(self.state, [asdict(r) for r in requests])
        if self.state.parent is None:
            self.state.emit(ApprovalRequested(self.state.path, tuple(requests)))

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

    def _filtered(self, calls: list[ToolCall]) -> None:
        """The provider's content filter stopped the reply: its text stays in the history,
        its calls are answered without running, and the run ends with its own reason."""
        state = self.state
        results = []
        for call in calls:
            state.emit(ToolCallStarted(state.path, call))
            result = ToolResult.of(call, _FILTERED, is_error=True)
            results.append(result)
            state.emit(ToolCallFinished(state.path, call, result))
        if results:
            state.messages.append(ToolResultMessage(tuple(results)))
        self.stop_reason = "content_filter"
        raise ContentFilterError(
            "the provider's content filter stopped the model's reply; "
            "the part it sent is kept in the run's messages"
        )

    def _refuse_cut_off(self, calls: list[ToolCall], results: list[ToolResult | None]) -> None:
        """Calls whose arguments the output limit cut short are answered, never run."""
        state = self.state
        for i, call in enumerate(calls):
            if isinstance(call.args, str):
                state.emit(ToolCallStarted(state.path, call))
                result = ToolResult.of(
                    call, prompts.render("cut_off", tool=call.name), is_error=True
                )
                results[i] = result
                state.emit(ToolCallFinished(state.path, call, result))

    def _take_answer(self, calls: list[ToolCall], results: list[ToolResult | None]) -> str | None:
        """Check `final_result` calls in order; the first valid one is the answer.

        Returns the last validation error when there were answer calls and none was valid.
        """
        output = self.plan.output
        if not output.structured:
            return None
        error: str | None = None
        for i, call in enumerate(calls):
            if call.name != FINAL_RESULT or results[i] is not None:
                continue
            self.state.emit(ToolCallStarted(self.state.path, call))
            if self.stop_reason == "completed":
                result = ToolResult.of(call, _DUPLICATE_ANSWER, is_error=True)
            else:
                value, error = output.validate_call(call)
                if error is None:
                    self._finish(value)
                result = ToolResult.of(call, error or _ANSWER_RECEIVED, is_error=error is not None)
            results[i] = result
            self.state.emit(ToolCallFinished(self.state.path, call, result))
        return None if self.stop_reason == "completed" else error

    async def _run_tools(
        self, calls: list[ToolCall], indexes: list[int], results: list[ToolResult | None]
    ) -> None:
        """Run the calls at `indexes` concurrently, storing each result at its index.

        If one raises `ToolFatalError` or the run is cancelled, the calls still running
        are cancelled and every call gets a result before the error goes on.
        """
        if not indexes:
            return
        order = self._in_order(calls, indexes)
        if self.journal is not None:  # a call that waits for others is recorded as it starts
            now = [calls[i].id for i in indexes if not order[i]]
            await self.journal.started(self.state, now)
        if len(indexes) == 1:  # the common case needs no task of its own
            (i,) = indexes
            try:
                results[i] = await self._run_tool(calls[i])
            except Exception as exc:
                results[i] = self._stopped(calls[i], exc)
                raise
            return
        tasks: dict[int, asyncio.Future[ToolResult | None]] = {}
        for i, earlier in order.items():
            waits = [tasks[j] for j in earlier]
            tasks[i] = asyncio.ensure_future(self._run_tool_after(waits, calls[i]))
        try:
            await asyncio.gather(*tasks.values())
        finally:
            for task in tasks.values():
                task.cancel()
            await asyncio.wait(tasks.values())
            for i, task in tasks.items():
                error = None if task.cancelled() else task.exception()
                if task.cancelled() or error is not None:
                    results[i] = self._stopped(calls[i], error)
                else:
                    results[i] = task.result()

    def _in_order(self, calls: list[ToolCall], indexes: list[int]) -> dict[int, list[int]]:
        """For each call to run, the earlier calls it must wait for: those whose paths
        overlap its own, unless both only read. Calls on other paths run at once."""
        scopes: dict[int, tuple[str, bool]] = {}
        for i in indexes:
            tool = self.plan.tools.get(calls[i].name)
            named = None if tool is None else tool.path_of(calls[i])
            if tool is None or named is None:
                continue
            try:
                scopes[i] = (clean(named), not tool.read_only)
            except BackendError:  # a path the tool refuses anyway
                continue
        order: dict[int, list[int]] = {i: [] for i in indexes}
        if len(scopes) > _MOST_COMPARED:  # a huge turn: its calls on paths, one by one
            scoped = [i for i in indexes if i in scopes]
            order.update({i: [j] for j, i in itertools.pairwise(scoped)})
            return order
        for position, i in enumerate(indexes):
            scope = scopes.get(i)
            earlier = indexes[:position] if scope is not None else []
            order[i] = [j for j in earlier if j in scopes and _overlap(scope, scopes[j])]
        return order

    async def _run_tool_after(
        self, earlier: list[asyncio.Future[ToolResult | None]], call: ToolCall
    ) -> ToolResult | None:
        if earlier:
            await asyncio.wait(earlier)
            if self.journal is not None:
                await self.journal.started(self.state, [call.id])
        return await self._run_tool(call)

    def _stopped(self, call: ToolCall, error: BaseException | None) -> ToolResult:
        """The result of a call the run abandoned: cancelled, or ended by `error`."""
        if error is None:
            text = "Cancelled: the run stopped before this call finished."
        else:
            text = f"Tool '{call.name}' stopped the run: {error}"
        result = ToolResult.of(call, text, is_error=True)
        self.state.emit(ToolCallFinished(self.state.path, call, result))
        return result

    async def _run_tool(self, call: ToolCall) -> ToolResult | None:
        state = self.state
        state.emit(ToolCallStarted(state.path, call))
        tool = self.plan.tools.get(call.name)
        attributes = {
            "gen_ai.operation.name": "execute_tool",
            "gen_ai.tool.name": call.name,
            "gen_ai.tool.call.id": call.id,
            "gen_ai.tool.type": "function",
        }
        if tool is not None:
            attributes["gen_ai.tool.description"] = tool.description
        traced = self.plan.tracing
        with span(f"execute_tool {call.name}", attributes, tracing=traced) as current:
            try:
                result = await self.handle_tool(call, ToolContext(state, call))
            except SubagentPaused as paused:  # the call waits, unanswered
                self.paused += paused.requests
                return None
            if result.is_error:
                failed(current, "tool_error", result.text[:200])
            if current is not None and traced.content:
                current.set_attributes(tracing.tool_content(call.args, result))
        if self.journal is not None:  # recorded before the next model call: never run twice
            await self.journal.result(state, result)
        state.emit(ToolCallFinished(state.path, call, result))
        return result

    async def _invoke_tool(self, call: ToolCall, context: ToolContext) -> ToolResult:
        tool = self.plan.tools.get(call.name)
        if tool is None:
            names = ", ".join(sorted(spec.name for spec in self.plan.tool_specs)) or "none"
            return ToolResult.of(
                call,
                f"There is no tool named '{call.name}'. Available tools: {names}.",
                is_error=True,
            )
        return await tool.run(call, context, timeout_seconds=self.agent.limits.tool_timeout_seconds)

    # -- the result --------------------------------------------------------------

    def _result(self, stop_reason: StopReason) -> RunResult[Any]:
        from tether.agent import RunResult

        state = self.state
        return RunResult(
            output=self.output if stop_reason == "completed" else None,
            stop_reason=stop_reason,
            messages=tuple(state.messages),
            usage=state.usage,
            cost_usd=state.cost_usd,
            steps=state.steps,
            run_id=state.run_id,
            new_messages_start=self.new_messages_start,
            files={path: data for path, (data, _) in state.files.items()},
            todos=state.todos,
            usage_by_agent=dict(state.usage_by_agent),
            thread_id=state.thread_id,
            interrupts=tuple(self.interrupts),
        )


class _StreamedCalls:
    """tether's ids for the calls of one streaming reply, made as their arguments start
    to stream: by the call's place in the reply where the adapter says it, else by the
    server's id (which may be missing or repeated: then the arguments cannot be told apart)."""

    def __init__(self) -> None:
        self.ids: dict[int | str, str] = {}

    def of(self, delta: StreamDelta) -> str | None:
        key = delta.index if delta.index is not None else delta.call_id
        if key is None:
            return None
        found = self.ids.get(key)
        if found is None:
            found = self.ids[key] = new_call_id()
        return found

    def in_order(self) -> list[str]:
        """The ids for the reply's calls, in the order of the calls."""
        if all(isinstance(key, int) for key in self.ids):
            count = max((k for k in self.ids if isinstance(k, int)), default=-1) + 1
            return [self.ids.get(n) or new_call_id() for n in range(count)]
        return list(self.ids.values())  # in the order their arguments began


_MOST_COMPARED = 200
"""Calls on paths in one turn past which each is not compared with every other (the
comparisons grow with the square of their number): they run one by one instead."""


def _overlap(one: tuple[str, bool] | None, other: tuple[str, bool]) -> bool:
    """Whether two calls' (path, writes) must not run at once: one path is the other or
    under it, and one of them writes."""
    if one is None or not (one[1] or other[1]):
        return False
    return is_under(one[0], other[0]) or is_under(other[0], one[0])


def _stop_of(error: TetherError) -> StopReason:
    """How a run that `error` ended stopped."""
    return "content_filter" if isinstance(error, ContentFilterError) else "error"


def _loop_deadline(budget: Budget) -> float | None:
    """The budget's deadline on the event loop's clock."""
    deadline = budget.deadline
    if deadline is None:
        return None
    return asyncio.get_running_loop().time() + (deadline - time.monotonic())


async def _close(stream: AsyncIterator[StreamItem]) -> None:
    aclose = getattr(stream, "aclose", None)
    if aclose is not None:
        await aclose()
