"""The run loop's side of the model: one streamed request, what it costs, and the
requests a tool makes of the run's model (an MCP server's sampling).

Each reply is streamed as `ModelDelta` events, its tool calls get tether's own ids,
and its usage and cost are charged to the run, its ancestors and the budget.
"""

from __future__ import annotations

import asyncio
import warnings
from collections.abc import AsyncIterator
from dataclasses import replace

from tether import tracing
from tether.errors import CostUnknownWarning, ModelError, ToolError
from tether.events import ModelDelta, StepFinished
from tether.limits import Budget
from tether.messages import OnTheWire, new_call_id, own_calls
from tether.models.base import ModelRequest, ModelResponse, StreamDelta, StreamItem
from tether.models.estimate import InputEstimate
from tether.models.usage import checked
from tether.plan import RunnableAgent
from tether.state import RunState

__all__ = ["ModelCalls"]


class ModelCalls:
    """The requests one run makes of its agent's model."""

    def __init__(self, agent: RunnableAgent, state: RunState, budget: Budget) -> None:
        self.agent = agent
        self.plan = agent._plan
        self.state = state
        self.budget = budget
        self.wire = OnTheWire()
        self.sampling = asyncio.Lock()
        self.warned_unknown_cost = False
        self.input_estimate = InputEstimate()
        """For a model that reports no usage: counts each message of the run once."""

    async def call(self, request: ModelRequest) -> ModelResponse:
        """The model's reply to `request`, streamed as events, traced when tracing is on."""
        model, traced = self.agent.model, self.plan.tracing
        call = tracing.model_call(model, request, self.state.thread_id, traced)
        if call is None:  # no span, no metrics: their attributes cost nothing
            return await self._stream(request)
        with call:  # the span and the metrics; an exception marks both
            response = await self._stream(request)
            call.answered(response)
        return response

    async def _stream(self, request: ModelRequest) -> ModelResponse:
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
        response = checked(  # before anyone counts
            response, request, self.agent.model.name, estimate=self.input_estimate
        )
        for capability in self.plan.after_model:
            response = await capability.after_model(state, response)
        return response

    def record(self, response: ModelResponse, request: ModelRequest) -> None:
        """Add the reply to the conversation and count it: a step, its usage and cost."""
        state = self.state
        usage, cost = self.plan.prices.charge_of(response, self.agent.model, request)
        if cost is None:
            self.warn_unknown_cost()
        state.messages.append(response.message)
        state.charge(usage, cost)
        state.steps += 1
        self.budget.count_step()
        top = state.root
        state.emit(StepFinished(state.path, self.budget.root.steps, top.usage, top.cost_usd))

    def warn_unknown_cost(self) -> None:
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
                self.warn_unknown_cost()
            self.state.charge(usage, cost)
            return response


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


async def _close(stream: AsyncIterator[StreamItem]) -> None:
    aclose = getattr(stream, "aclose", None)
    if aclose is not None:
        await aclose()
