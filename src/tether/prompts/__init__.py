"""The prompt texts, kept as short Markdown files beside this module."""

from __future__ import annotations

import functools
import os

__all__ = ["render", "text"]

_HERE = os.path.dirname(__file__)


@functools.cache
def text(name: str) -> str:
    """The prompt `name`.md, without its trailing newline."""
    try:  # beside this file, as installed; importlib.resources (and the zipfile module it
        # loads, a few milliseconds of the first agent's build) only for a zipped package
        with open(os.path.join(_HERE, f"{name}.md"), encoding="utf-8") as file:
            found = file.read()
    except OSError:
        from importlib import resources

        found = resources.files(__package__).joinpath(f"{name}.md").read_text("utf-8")
    return found.strip()


def render(name: str, **values: object) -> str:
    """The prompt `name`.md with `{placeholders}` filled in."""
    return text(name).format(**values)
