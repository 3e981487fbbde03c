"""The run loop's side of tools: running a turn's calls, at once where they may.

Each call goes through the capabilities' `around_tool` hooks to its tool, inside a
span. It is recorded in the thread as started before it runs, so that a resumed run
never runs it twice, and its result as soon as it finishes. Calls on overlapping paths
wait for each other when one of them writes; every other call runs at once.
"""

from __future__ import annotations

import asyncio
import functools
import itertools
from typing import TYPE_CHECKING

from tether import prompts, tracing
from tether.approval import ApprovalRequest, SubagentPaused
from tether.backends.errors import BackendError
from tether.backends.paths import clean, is_under
from tether.events import ToolCallFinished, ToolCallStarted
from tether.messages import ToolCall, ToolResult
from tether.plan import RunnableAgent
from tether.state import RunState, ToolContext
from tether.tracing import failed, span

if TYPE_CHECKING:
    from tether.capabilities.base import ToolHandler
    from tether.checkpoint.journal import Journal

__all__ = ["ToolCalls", "answer_unrun", "refuse_cut_off"]

_MOST_COMPARED = 200
"""Calls on paths in one turn past which each is not compared with every other (the
comparisons grow with the square of their number): they run one by one instead."""


class ToolCalls:
    """Runs one run's tool calls. `paused` collects the requests of subagents that
    stopped for decisions during a turn's calls: such a call waits, unanswered."""

    def __init__(self, agent: RunnableAgent, state: RunState, journal: Journal | None) -> None:
        self.agent = agent
        self.plan = agent._plan
        self.state = state
        self.journal = journal
        self.paused: list[ApprovalRequest] = []
        self.handle: ToolHandler = self._invoke
        for capability in reversed(self.plan.around_tool):
            self.handle = functools.partial(capability.around_tool, proceed=self.handle)

    async def run(
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
                results[i] = await self._run_one(calls[i])
            except Exception as exc:
                results[i] = self.stopped(calls[i], exc)
                raise
            return
        tasks: dict[int, asyncio.Future[ToolResult | None]] = {}
        for i, earlier in order.items():
            waits = [tasks[j] for j in earlier]
            tasks[i] = asyncio.ensure_future(self._run_after(waits, calls[i]))
        try:
            await asyncio.gather(*tasks.values())
        finally:
            for task in tasks.values():
                task.cancel()
            await asyncio.wait(tasks.values())
            for i, task in tasks.items():
                error = None if task.cancelled() else task.exception()
                if task.cancelled() or error is not None:
                    results[i] = self.stopped(calls[i], error)
                else:
                    results[i] = task.result()

    def stopped(self, call: ToolCall, error: BaseException | None) -> ToolResult:
        """The result of a call the run abandoned: cancelled, or ended by `error`."""
        if error is None:
            text = "Cancelled: the run stopped before this call finished."
        else:
            text = f"Tool '{call.name}' stopped the run: {error}"
        result = ToolResult.of(call, text, is_error=True)
        self.state.emit(ToolCallFinished(self.state.path, call, result))
        return result

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

    async def _run_after(
        self, earlier: list[asyncio.Future[ToolResult | None]], call: ToolCall
    ) -> ToolResult | None:
        if earlier:
            await asyncio.wait(earlier)
            if self.journal is not None:
                await self.journal.started(self.state, [call.id])
        return await self._run_one(call)

    async def _run_one(self, call: ToolCall) -> ToolResult | None:
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
                result = await self.handle(call, ToolContext(state, call))
            except SubagentPaused as paused:  # the call waits, unanswered
                self.paused += paused.requests
                return None
            if result.is_error:
                failed(current, "tool_error", result.text[:200])
            if current is not None and traced.content:
                current.set_attributes(tracing.tool_content(call.args, result))
        if self.journal is not None:
            await self.journal.result(state, result)
        state.emit(ToolCallFinished(state.path, call, result))
        return result

    async def _invoke(self, call: ToolCall, context: ToolContext) -> ToolResult:
        tool = self.plan.tools.get(call.name)
        if tool is None:
            names = ", ".join(sorted(spec.name for spec in self.plan.tool_specs)) or "none"
            return ToolResult.of(
                call,
                f"There is no tool named '{call.name}'. Available tools: {names}.",
                is_error=True,
            )
        return await tool.run(call, context, timeout_seconds=self.agent.limits.tool_timeout_seconds)


def answer_unrun(state: RunState, call: ToolCall, text: str) -> ToolResult:
    """Answer `call` with the error `text` without running it, as events show a call."""
    state.emit(ToolCallStarted(state.path, call))
    result = ToolResult.of(call, text, is_error=True)
    state.emit(ToolCallFinished(state.path, call, result))
    return result


def refuse_cut_off(
    state: RunState, calls: list[ToolCall], results: list[ToolResult | None]
) -> None:
    """Calls whose arguments the output limit cut short are answered, never run."""
    for i, call in enumerate(calls):
        if isinstance(call.args, str):
            results[i] = answer_unrun(state, call, prompts.render("cut_off", tool=call.name))


def _overlap(one: tuple[str, bool] | None, other: tuple[str, bool]) -> bool:
    """Whether two calls' (path, writes) must not run at once: one path is the other or
    under it, and one of them writes."""
    if one is None or not (one[1] or other[1]):
        return False
    return is_under(one[0], other[0]) or is_under(other[0], one[0])
