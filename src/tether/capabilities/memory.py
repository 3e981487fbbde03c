"""Memory: AGENTS.md-style files loaded into the prompt at the start of every run.

The agent keeps them up to date with the file tools. On a `StoreBackend` route (say
`/memories/`) they outlive the thread. Past `max_chars` in all, the files are cut in the
prompt (never on disk) with a `MemoryWarning`.
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence

from tether import _checks, prompts
from tether.backends.errors import BackendError
from tether.backends.paths import clean
from tether.capabilities.base import Capability
from tether.errors import ConfigurationError, TetherWarning
from tether.state import RunState

__all__ = ["Memory", "MemoryWarning"]


class MemoryWarning(TetherWarning):
    """Memory files are longer than the cap, so the prompt holds only their start."""


class Memory(Capability):
    """Loads the memory files at `paths` into the prompt, at most `max_chars` in all."""

    prompt_slot = "memory"

    def __init__(self, paths: Sequence[str], *, max_chars: int = 20_000) -> None:
        paths = _checks.each("memory", paths, str, "file paths, like ['/AGENTS.md']")
        if not paths:
            raise ConfigurationError("memory takes a list of file paths, like ['/AGENTS.md']")
        if max_chars < 1:
            raise ConfigurationError(f"max_chars must be positive, got {max_chars}")
        try:
            self.paths = tuple(clean(p) for p in paths)
        except BackendError as exc:
            raise ConfigurationError(f"bad memory path: {exc}") from exc
        self.max_chars = max_chars

    async def run_prompt(self, state: RunState) -> str:
        room = self.max_chars
        parts = []
        for path in self.paths:
            text = await _read(state, path)
            if text is None:
                parts.append(f"### {path}\n(does not exist yet)")
                continue
            if len(text) > room:
                warnings.warn(
                    f"memory is over {self.max_chars} characters; {path} is cut in the prompt",
                    MemoryWarning,
                    stacklevel=2,
                )
                text = text[:room] + f"\n[... cut: {len(text) - room} more characters in {path}]"
            room = max(0, room - len(text))
            parts.append(f"### {path}\n{text.strip()}")
        return prompts.render("memory", files="\n\n".join(parts))


async def _read(state: RunState, path: str) -> str | None:
    if state.backend is None:
        return None
    try:
        data: bytes = await state.backend.read(path)
    except BackendError:
        return None
    return data.decode("utf-8", errors="replace")
