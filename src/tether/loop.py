"""The run loop. One step: check limits -> build request -> model -> tools -> loop check.

A run never loses what it did: whatever ends it (an answer, a limit, a timeout, an
error), the `RunResult` holds every message, the usage and the cost. Errors are raised
with that result attached as `.result`.

`_Run._step` is the driver; the model's side of a step is `tether._loop_model`, the
tools' side `tether._loop_tools`, and the gates that stop a run for a person's
decision `tether._loop_gates`. The loop takes its agent as a `RunnableAgent` and hands
itself down to the subagents capability (`RUN_AGENT`), so it never imports the agent
and capabilities never import it.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import asdict
from typing import TYPE_CHECKING, Any

from tether import prompts, tracing
from tether._loop_gates import Gates
from tether._loop_model import ModelCalls
from tether._loop_tools import ToolCalls, answer_unrun, refuse_cut_off
from tether.approval import ApprovalRequest
from tether.errors import (
    ConfigurationError,
    ContentFilterError,
    OutputError,
    RunError,
    TetherError,
    describe,
)
from tether.events import (
    AgentPath,
    ApprovalRequested,
    Event,
    RunFinished,
    RunStarted,
    ToolCallFinished,
    ToolCallStarted,
)
from tether.limits import Budget, LoopDetector
from tether.messages import (
    AssistantMessage,
    Message,
    ToolCall,
    ToolResult,
    ToolResultMessage,
    UserMessage,
)
from tether.models.base import ModelRequest, ToolSpec
from tether.output import FINAL_RESULT
from tether.plan import RunnableAgent
from tether.result import RunResult, StopReason
from tether.state import FILES_SEEN, JOURNAL, RUN_AGENT, SAMPLE, SANDBOX, SUBAGENT_RUNS, RunState
from tether.tracing import span

if TYPE_CHECKING:
    from tether.checkpoint.journal import Journal, Thread

__all__ = ["JOURNAL", "SUBAGENT_RUNS", "compact_thread", "execute_run"]

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
    agent: RunnableAgent,
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
        if thread.sandbox is not None and parent is None:
            state.data[SANDBOX] = thread.sandbox
        if resume:
            _restore(state, budget, thread)
    run = _Run(agent, state, budget, new_messages, journal)
    run.gates.client_tools = {spec.name: spec for spec in client_tools}
    if resume and thread is not None:
        run.pending = thread.pending_calls
        run.recorded = (thread.results, thread.started)
        state.data[SUBAGENT_RUNS] = thread.subagents
    run.gates.share(thread if resume else None, waits=waits, recorded=journal is not None)
    state.data[SAMPLE] = run.model.sample
    state.data[RUN_AGENT] = execute_run
    if journal is not None:
        state.data[JOURNAL] = journal
    return await run.execute()


async def compact_thread(
    agent: RunnableAgent, journal: Journal, thread: Thread, emit: Callable[[Event], None]
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
    """One run of an agent: what it has done so far, and the steps that take it on."""

    def __init__(
        self,
        agent: RunnableAgent,
        state: RunState,
        budget: Budget,
        new_messages: int,
        journal: Journal | None = None,
    ) -> None:
        self.agent = agent
        self.journal = journal
        self.plan = agent._plan
        self.state = state
        self.budget = budget
        self.system_prompt = self.plan.system_prompt
        self.pending: AssistantMessage | None = None
        self.recorded: tuple[dict[str, ToolResult], set[str]] = ({}, set())
        self.interrupts: list[ApprovalRequest] = []
        self.gates = Gates(state, self.plan.approvals)
        self.tools = ToolCalls(agent, state, journal)
        self.model = ModelCalls(agent, state, budget)
        self.new_messages = new_messages
        self.new_messages_start = len(state.messages) - new_messages
        self.stop_reason: StopReason | None = None
        self.output: Any = None
        self.output_failures = 0
        self.wrapped_up = False
        self.force_output = False
        self.loops = LoopDetector()
        self.announced = False

    async def execute(self) -> RunResult[Any]:
        """The run, to its end, inside its `invoke_agent` span."""
        state, plan = self.state, self.plan
        attributes = tracing.agent_attributes(
            self.agent.model, state, structured=plan.output.structured
        )
        with span(f"invoke_agent {state.path[-1]}", attributes, tracing=plan.tracing) as current:
            result = await self._execute()
            if current is not None:
                current.set_attributes(tracing.agent_outcome(result))
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
            from pydantic_core import to_jsonable_python  # not paid by a build

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
        response = await self.model.call(request)
        self.model.record(response, request)
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
        """The request for this step: the prompt, the messages and the tools, as the
        capabilities' `before_model` hooks shape it."""
        plan = self.plan
        request = ModelRequest(
            system_prompt=self.system_prompt,
            messages=tuple(self.state.messages),
            tools=(*plan.tool_specs, *self.gates.client_tools.values()),
            settings=self.agent.model_settings,
            output_tool=FINAL_RESULT if plan.output.structured else None,
            force_output=self.force_output and plan.output.structured,
        )
        for capability in plan.before_model:
            request = await capability.before_model(self.state, request)
        return request

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
            elif call.id in started and not self.gates.asks(call.id):  # else it is made again
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
        """Answer a turn's calls: the final answer first, then the gates, then the tools.
        Every call gets a result in one message, unless the run stops to wait for them."""
        results: list[ToolResult | None] = [(known or {}).get(call.id) for call in calls]
        if cut_off:
            refuse_cut_off(self.state, calls, results)
        answer_error = self._take_answer(calls, results)
        if self.stop_reason != "completed" and await self._await_approval(calls, results):
            return  # the calls stay unanswered until a person decides
        to_run = [i for i, result in enumerate(results) if result is None]
        if self.stop_reason == "completed":
            for i in to_run:
                results[i] = ToolResult.of(calls[i], _NOT_RUN, is_error=True)
            to_run = []
        tools = self.tools
        try:
            await tools.run(calls, to_run, results)
        finally:
            if not tools.paused:
                self.state.messages.append(
                    ToolResultMessage(
                        tuple(r or tools.stopped(calls[i], None) for i, r in enumerate(results))
                    )
                )
        if tools.paused:  # a subagent waits for decisions: so does this run, calls unanswered
            await self._interrupt(tools.paused)
            return
        if answer_error is not None:
            self._output_failed(answer_error, None)

    async def _await_approval(
        self, calls: list[ToolCall], results: list[ToolResult | None]
    ) -> bool:
        """Apply the decisions given for calls that need one; if any such call has none,
        stop the run for a person to decide, and return True. A call of a client tool
        always waits: its answer is the caller's result."""
        gates = self.gates
        waiting = gates.waiting(calls, results)
        if waiting and (self.journal is None or not gates.can_wait()):
            gates.refuse(calls, results, waiting)  # a subagent cannot stop its parent's run
            waiting = []
        if waiting:
            await self._interrupt([gates.request(calls[i]) for i in waiting])
            return True
        gates.apply(calls, results)
        return False

    async def _interrupt(self, requests: list[ApprovalRequest]) -> None:
        """Stop the run for decisions on `requests` (its own calls', or its subagents'),
        recorded in its thread; the top run of the tree tells the caller."""
        self.interrupts = requests
        self.stop_reason = "interrupted"
        if self.journal is not None:
            await self.journal.interrupt(self.state, [asdict(r) for r in requests])
        if self.state.parent is None:
            self.state.emit(ApprovalRequested(self.state.path, tuple(requests)))

    def _filtered(self, calls: list[ToolCall]) -> None:
        """The provider's content filter stopped the reply: its text stays in the history,
        its calls are answered without running, and the run ends with its own reason."""
        state = self.state
        results = [answer_unrun(state, call, _FILTERED) for call in calls]
        if results:
            state.messages.append(ToolResultMessage(tuple(results)))
        self.stop_reason = "content_filter"
        raise ContentFilterError(
            "the provider's content filter stopped the model's reply; "
            "the part it sent is kept in the run's messages"
        )

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

    # -- the result --------------------------------------------------------------

    def _result(self, stop_reason: StopReason) -> RunResult[Any]:
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


def _stop_of(error: TetherError) -> StopReason:
    """How a run that `error` ended stopped."""
    return "content_filter" if isinstance(error, ContentFilterError) else "error"


def _loop_deadline(budget: Budget) -> float | None:
    """The budget's deadline on the event loop's clock."""
    deadline = budget.deadline
    if deadline is None:
        return None
    return asyncio.get_running_loop().time() + (deadline - time.monotonic())
