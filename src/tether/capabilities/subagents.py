"""Subagents: the `task` tool, its prompt, and what one run of it does.

A subagent starts with a fresh context (its task is its only message), works on its
parent's backend behind its own permissions, spends from its parent's budget, and
streams its events through its parent. Only its final report comes back.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from pydantic_core import to_json

from tether import prompts
from tether.approval import SubagentPaused
from tether.capabilities.base import Capability
from tether.errors import TetherError, ToolError
from tether.messages import AssistantMessage, Message, UserMessage
from tether.state import RunState, ToolContext
from tether.tools.task import GENERAL_PURPOSE, TASK, TASK_RUNNER, SubAgent, task_tool
from tether.tools.tool import Tool

if TYPE_CHECKING:
    from tether.agent import Agent, RunResult
    from tether.checkpoint.journal import Journal, Thread

__all__ = ["GENERAL_PURPOSE_AGENT", "Subagents"]

GENERAL_PURPOSE_AGENT = SubAgent(
    name=GENERAL_PURPOSE,
    description=(
        "Has your tools. For a multi-step job you want done outside your own context: "
        "research, a broad search, a change across many files."
    ),
)

_STOPPED_BECAUSE = {
    "budget": "it ran out of budget",
    "timeout": "it ran out of time",
    "loop": "it kept repeating the same tool call",
    "interrupted": "it was interrupted",
    "cancelled": "it was cancelled",
}


class Subagents(Capability):
    """Gives an agent the `task` tool over `agents`: each name's spec and built agent."""

    prompt_slot = "subagents"

    def __init__(self, agents: Mapping[str, tuple[SubAgent, Agent[Any]]]) -> None:
        self.agents = dict(agents)
        listing = "\n".join(f"- {name}: {spec.description}" for name, (spec, _) in agents.items())
        self.tool = replace(task_tool(), description=prompts.render("task_tool", agents=listing))

    def prompt(self) -> str:
        return prompts.text("subagents")

    def tools(self) -> Sequence[Tool]:
        return (self.tool,)

    async def on_run_start(self, state: RunState) -> None:
        state.data[TASK_RUNNER] = self.run

    async def run(self, context: ToolContext, description: str, name: str) -> str:
        """Run subagent `name` on `description` to its end; its report, for the model."""
        found = self.agents.get(name)
        if found is None:
            raise ToolError(
                f"There is no subagent type {name!r}. Choose one of: {', '.join(self.agents)}."
            )
        if not description.strip():
            raise ToolError("The task description is empty. Describe the whole task.")
        spec, agent = found
        state = context.state
        budget = state.budget
        assert budget is not None, "execute_run gives every run a budget"
        depth, most = len(state.path), budget.root.limits.max_subagent_depth
        if depth > most:
            raise ToolError(
                f"Subagents may nest at most {most} deep and this one would be {depth} deep. "
                "Do this task yourself."
            )
        from tether.loop import JOURNAL, SUBAGENT_RUNS, execute_run  # it imports this module

        number = state.data.get("task_runs", 0) + 1
        state.data["task_runs"] = number
        call_id = context.call.id
        above: Journal | None = state.data.get(JOURNAL)  # the subagent records in it too
        journal = above.under(call_id) if above is not None else None
        path = (*state.path, f"{TASK}:{name}#{number}")
        messages: list[Message] = [UserMessage.of(description)]
        new, thread = 1, None
        earlier: Thread | None = state.data.get(SUBAGENT_RUNS, {}).get(call_id)
        if earlier is not None and earlier.unfinished and journal is not None:
            journal.adopt(earlier)  # its run goes on where it stopped
            messages, thread = earlier.messages, earlier
            new = len(messages) - earlier.run_start
            path = earlier.path or path
        try:
            result = await execute_run(
                agent,
                messages,
                new_messages=new,
                deps=state.deps,
                emit=state.emit,
                path=path,
                budget=budget.child(spec.limits),
                parent=state,
                journal=journal,
                thread=thread,
                resume=thread is not None,
            )
        except TetherError as exc:
            raise ToolError(f"The subagent {name!r} failed: {exc}") from exc
        if result.stop_reason == "interrupted":
            raise SubagentPaused(result.interrupts)  # this call waits with it
        return report(result)


def report(result: RunResult[Any]) -> str:
    """A subagent's answer (text, or a structured answer as JSON), or its last words
    marked as a partial report."""
    if result.stop_reason == "completed":
        if isinstance(result.output, str):
            return result.output
        return to_json(result.output).decode()
    last = next(
        (m.text for m in reversed(result.messages) if isinstance(m, AssistantMessage) and m.text),
        "",
    )
    return prompts.render(
        "task_partial",
        because=_STOPPED_BECAUSE.get(result.stop_reason, result.stop_reason),
        report=last.strip() or "(It reported nothing.)",
    )
