"""`write_todos`: the agent's task list, replaced whole on every call."""

from __future__ import annotations

import functools
from collections import Counter
from typing import Annotated

import pydantic

from tether.events import TodosUpdated
from tether.state import Todo, TodoStatus, ToolContext
from tether.tools.tool import Tool, tool

__all__ = ["WRITE_TODOS", "todo_tool"]

WRITE_TODOS = "write_todos"


class TodoItem(pydantic.BaseModel):
    """One task and where it stands."""

    model_config = pydantic.ConfigDict(extra="forbid")

    content: Annotated[str, pydantic.StringConstraints(strip_whitespace=True, min_length=1)]
    status: TodoStatus = "pending"


async def write_todos(context: ToolContext, todos: list[TodoItem]) -> str:
    """Replace your task list with `todos`: send the whole list every time.

    Args:
        todos: Every task, in order, each with its status.
    """
    state = context.state
    new = tuple(Todo(item.content, item.status) for item in todos)
    if new != state.todos:
        state.todos = new
        state.emit(TodosUpdated(state.path, new))
    if not new:
        return "The task list is now empty."
    counts = Counter(todo.status for todo in new)
    parts = (
        f"{counts[status]} {status.replace('_', ' ')}"
        for status in ("completed", "in_progress", "pending")
        if counts[status]
    )
    return f"Task list saved: {', '.join(parts)}."


@functools.cache
def todo_tool() -> Tool:
    """The `write_todos` tool, built on first use like the file tools."""
    return tool(write_todos)
