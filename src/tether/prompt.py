"""System-prompt assembly: one function, one documented order.

The parts, each present only when its capability is on:

1. the caller's `system_prompt`
2. the base agent prompt
3. `todos`: planning with `write_todos`
4. `memory`: AGENTS.md files and how to keep them
5. `skills`: where skills live and what each is for
6. `filesystem`: the file tools (and `execute` on a sandbox)
7. `subagents`: the `task` tool
8. `user`: prompts of capabilities passed to `create_agent`, in their order
9. `approval`: which tools wait for a human
10. `local_context`: the working directory and project (the CLI)
11. `output`: how to give a structured final answer
12. `suffix`: the harness profile's `system_prompt_suffix`
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal, TypeAlias, get_args

from tether import prompts

__all__ = ["SLOTS", "Slot", "assemble_system_prompt"]

Slot: TypeAlias = Literal[
    "todos",
    "memory",
    "skills",
    "filesystem",
    "subagents",
    "user",
    "approval",
    "local_context",
    "output",
    "suffix",
]
SLOTS: tuple[Slot, ...] = get_args(Slot)
"""The slots in prompt order."""


def assemble_system_prompt(
    custom: str | None,
    sections: Sequence[tuple[Slot, str | None]],
    *,
    base: str | None = None,
) -> str:
    """The caller's prompt, the base prompt (`base` replaces it), then `sections` in slot
    order; sections sharing a slot keep their given order. Empty parts are skipped and
    the rest are separated by a blank line."""
    ordered = sorted(sections, key=lambda section: SLOTS.index(section[0]))
    parts = (custom, prompts.text("base") if base is None else base, *(t for _, t in ordered))
    return "\n\n".join(part.strip() for part in parts if part and part.strip())
