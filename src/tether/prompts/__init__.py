"""The prompt texts, kept as short Markdown files beside this module."""

from __future__ import annotations

import functools
from importlib import resources

__all__ = ["render", "text"]


@functools.cache
def text(name: str) -> str:
    """The prompt `name`.md, without its trailing newline."""
    return resources.files(__package__).joinpath(f"{name}.md").read_text("utf-8").strip()


def render(name: str, **values: object) -> str:
    """The prompt `name`.md with `{placeholders}` filled in."""
    return text(name).format(**values)
