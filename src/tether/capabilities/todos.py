"""Planning: the `write_todos` tool and its prompt; the list lives in the run state."""

from __future__ import annotations

import functools
from collections.abc import Sequence

import pydantic

from tether import prompts
from tether.capabilities.base import Capability
from tether.messages import AssistantMessage, ToolResultMessage
from tether.state import RunState, Todo
from tether.tools.todos import WRITE_TODOS, TodoItem, todo_tool
from tether.tools.tool import Tool

__all__ = ["Todos"]


@functools.cache
def _items() -> pydantic.TypeAdapter[list[TodoItem]]:
    return pydantic.TypeAdapter(list[TodoItem])


class Todos(Capability):
    """Gives the agent `write_todos`. A run that continues a conversation starts with
    the list its last successful `write_todos` call left."""

    prompt_slot = "todos"

    def prompt(self) -> str:
        return prompts.text("todos")

    def tools(self) -> Sequence[Tool]:
        return (todo_tool(),)

    async def on_run_start(self, state: RunState) -> None:
        state.todos = last_written(state)


def last_written(state: RunState) -> tuple[Todo, ...]:
    """The list from the history's last `write_todos` call that succeeded, or ()."""
    succeeded: set[str] = set()
    for message in reversed(state.messages):
        if isinstance(message, ToolResultMessage):
            succeeded.update(
                r.call_id for r in message.results if r.name == WRITE_TODOS and not r.is_error
            )
        elif isinstance(message, AssistantMessage):
            for call in reversed(message.tool_calls):
                if call.name != WRITE_TODOS or call.id not in succeeded:
                    continue
                try:
                    args = call.args if isinstance(call.args, dict) else {}
                    items = _items().validate_python(args.get("todos"))
                except pydantic.ValidationError:
                    continue
                return tuple(Todo(item.content, item.status) for item in items)
    return ()
