"""System-prompt assembly, in one place and in the documented order."""

from __future__ import annotations

from collections.abc import Sequence

from tether import prompts

__all__ = ["assemble_system_prompt"]


def assemble_system_prompt(
    custom: str | None,
    sections: Sequence[str | None],
    *,
    base: str | None = None,
) -> str:
    """The user's prompt first, then the base agent prompt, then each capability's section.

    Empty sections are skipped; sections are separated by a blank line.
    """
    parts = (custom, prompts.text("base") if base is None else base, *sections)
    return "\n\n".join(part.strip() for part in parts if part and part.strip())
