"""The prompts are product code: these snapshots make every change to them visible."""

from __future__ import annotations

from inline_snapshot import snapshot
from pydantic import BaseModel

from tether import create_agent
from tether.models import ScriptedModel
from tether.prompt import Slot, assemble_system_prompt


class Answer(BaseModel):
    total: int


def test_sections_follow_the_documented_order_and_skip_empty_ones() -> None:
    sections: list[tuple[Slot, str | None]] = [
        ("output", "Answer."),
        ("user", "First user."),
        ("subagents", "Delegate."),
        ("user", None),
        ("todos", "  "),
        ("user", "Second user."),
        ("filesystem", "Files."),
    ]
    prompt = assemble_system_prompt("Custom.", sections, base="Base.")
    assert prompt.split("\n\n") == [
        "Custom.",
        "Base.",
        "Files.",
        "Delegate.",
        "First user.",
        "Second user.",
        "Answer.",
    ]


def test_the_assembled_prompt_of_a_structured_agent() -> None:
    model = ScriptedModel([[]])
    agent = create_agent(model, system_prompt="You add numbers.", output_type=Answer)
    assert agent._plan.system_prompt == snapshot("""\
You add numbers.

You complete tasks by calling tools. Work in steps: call a tool, read its result, decide the next step. Call independent tools together in one turn. When a tool returns an error, read it, fix the call and try again; never repeat a call that failed the same way. Keep replies short. When the task is done, give your final answer.

## Task list
For work of three or more steps, keep a task list with `write_todos`, sending the whole list each time. Mark a task `in_progress` before you start it and `completed` as soon as it is done; keep one task in progress at a time, and add tasks you discover. Skip the list for quick tasks.

## Files
You have a filesystem rooted at `/`; paths are absolute, like `/src/app.py`.
- `ls` lists a directory.
- `glob` finds files by pattern (`**/*.py`).
- `grep` searches file contents.
- `read_file` shows numbered lines; read long files in parts with `offset` and `limit`.
- `write_file` creates a new file.
- `edit_file` changes an existing file; read the file first.
- Keep notes and large intermediate results in files instead of repeating them in replies.

## Subagents
`task` hands a self-contained job to a subagent, which starts with a fresh context and returns only its final report. Use it for jobs that take many steps or would fill your context, and start several in one turn when they are independent. Describe each job completely: the subagent sees nothing of this conversation. Do quick tasks yourself.

When the task is done, give your answer by calling `final_result` once, with arguments that match its schema. A plain text reply does not count as the final answer.\
""")
