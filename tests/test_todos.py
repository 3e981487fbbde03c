"""`write_todos`: the run's task list, its events, bad input, and continuing it."""

from __future__ import annotations

from collections.abc import Sequence

from tether import SubAgent, Todo, create_agent
from tether.events import TodosUpdated
from tether.messages import Message, ToolCall
from tether.models import ScriptedModel
from tether.testing import tool_results

PLAN = [
    {"content": "Read the code", "status": "completed"},
    {"content": "Fix the bug", "status": "in_progress"},
    {"content": "Run the tests"},
]


def write(todos: object, call_id: str = "w1") -> ToolCall:
    return ToolCall("write_todos", {"todos": todos}, id=call_id)


def results(messages: Sequence[Message]) -> list[tuple[str, bool]]:
    return [(r.text, r.is_error) for r in tool_results(messages)]


def test_the_list_is_kept_in_the_run_and_returned() -> None:
    model = ScriptedModel([[write(PLAN)], "done"])
    result = create_agent(model).run("fix it")
    assert result.todos == (
        Todo("Read the code", "completed"),
        Todo("Fix the bug", "in_progress"),
        Todo("Run the tests", "pending"),
    )
    assert results(result.messages) == [
        ("Task list saved: 1 completed, 1 in progress, 1 pending.", False)
    ]


async def test_a_change_streams_one_event_and_a_repeat_none() -> None:
    model = ScriptedModel([[write(PLAN, "a")], [write(PLAN, "b")], [write([], "c")], "done"])
    events = [e async for e in create_agent(model).stream("go")]
    updates = [e.todos for e in events if isinstance(e, TodosUpdated)]
    assert updates == [
        (
            Todo("Read the code", "completed"),
            Todo("Fix the bug", "in_progress"),
            Todo("Run the tests", "pending"),
        ),
        (),
    ]


def test_bad_items_are_tool_errors_and_keep_the_old_list() -> None:
    model = ScriptedModel(
        [
            [write([{"content": "Plan", "status": "pending"}], "ok")],
            [write([{"content": "Ship", "status": "doing"}], "bad-status")],
            [write([{"content": "   ", "status": "pending"}], "empty")],
            "done",
        ]
    )
    result = create_agent(model).run("go")
    texts = results(result.messages)
    assert texts[0] == ("Task list saved: 1 pending.", False)
    status_error, empty_error = texts[1], texts[2]
    assert status_error[1]
    assert "todos.0.status" in status_error[0]
    assert "'pending', 'in_progress' or 'completed'" in status_error[0]
    assert empty_error[1]
    assert "todos.0.content" in empty_error[0]
    assert result.todos == (Todo("Plan", "pending"),)
    assert result.output == "done"


def test_a_continued_conversation_starts_from_the_last_list() -> None:
    agent = create_agent(ScriptedModel([[write(PLAN)], "first done", "second done"]))
    first = agent.run("start")
    second = agent.run("carry on", message_history=first.messages)
    assert second.todos == first.todos
    assert len(second.todos) == 3


def test_a_failed_call_in_the_history_is_not_restored() -> None:
    model = ScriptedModel([[write([{"content": "x", "status": "unknown"}])], "a", "b"])
    agent = create_agent(model)
    first = agent.run("start")
    assert agent.run("again", message_history=first.messages).todos == ()


def test_todos_can_be_left_out() -> None:
    agent = create_agent(ScriptedModel(["x"]), todos=False)
    assert "write_todos" not in {t.name for t in agent._plan.tool_specs}
    assert "write_todos" not in agent._plan.system_prompt


def test_a_subagent_keeps_its_own_list() -> None:
    helper = SubAgent(name="helper", description="Plans its own work.")
    model = ScriptedModel(
        [
            [ToolCall("task", {"description": "plan it", "subagent_type": "helper"})],
            [write([{"content": "sub step", "status": "pending"}])],
            "sub done",
            "parent done",
        ]
    )
    result = create_agent(model, subagents=[helper]).run("go")
    assert result.output == "parent done"
    assert result.todos == ()
