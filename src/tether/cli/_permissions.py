"""Which calls wait for a person: the permission mode, the safe paths, the commands
allowed in the settings, and what a person said to "always allow" during a session."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from wcmatch import glob as wc

from tether.approval import ApprovalRequest
from tether.backends.errors import BackendError
from tether.backends.paths import clean
from tether.cli._config import Settings

__all__ = ["EDITS", "Allowances", "gates", "simple_command"]

EDITS = ("write_file", "edit_file")
_GLOB = wc.GLOBSTAR | wc.BRACE | wc.DOTGLOB
# What makes a command line more than one plain command: a prefix allowed for `pytest`
# must not let `pytest; rm -rf ~` or `pytest $(curl ...)` through.
_SHELL_SYNTAX = frozenset(";&|<>`$(){}\\\n\r*?[]~!#'\"")


def simple_command(command: str) -> list[str] | None:
    """The words of `command` when it is one plain command, else None."""
    if any(c in _SHELL_SYNTAX for c in command):
        return None
    words = command.split()
    return words or None


@dataclass
class Allowances:
    """What runs without a question: whole tools, and command prefixes (as word lists).
    The settings' `[commands] allow` start it; "always allow" in a session adds to it."""

    tools: set[str] = field(default_factory=set)
    commands: list[list[str]] = field(default_factory=list)
    exact: set[str] = field(default_factory=set)
    """Commands that are more than one plain command, allowed as written."""

    @classmethod
    def of(cls, settings: Settings) -> Allowances:
        return cls(commands=[prefix.split() for prefix in settings.commands.allow])

    def covers(self, tool: str, args: Any) -> bool:
        if tool in self.tools:
            return True
        if tool != "execute" or not isinstance(args, dict):
            return False
        command = str(args.get("command", ""))
        if command in self.exact:
            return True
        words = simple_command(command)
        return words is not None and any(words[: len(p)] == p for p in self.commands)

    def allow(self, request: ApprovalRequest) -> str:
        """Allow calls like `request` from now on; what was allowed, in words."""
        args = request.args
        if request.tool == "execute" and isinstance(args, dict):
            command = str(args.get("command", ""))
            words = simple_command(command)
            if words is None:  # `make && make install`: this very command, no other
                self.exact.add(command)
                return f"the command {command!r} as written"
            # The command and its first argument: `git status`, `pytest` (not `ls -la`).
            prefix = words[:2] if len(words) > 1 and not words[1].startswith("-") else words[:1]
            self.commands.append(prefix)
            return f"the command {' '.join(prefix)}"
        self.tools.add(request.tool)
        return f"every {request.tool} call"


def gates(
    settings: Settings, tools: set[str], allowances: Allowances
) -> dict[str, bool | dict[str, Any]]:
    """`interrupt_on` for an agent with `tools`: each gated call waits unless the mode,
    the safe paths or the allowances let it through (looked up at each call)."""
    if settings.mode == "yes":
        return {}
    wanted = {name for name, on in settings.interrupt_on.items() if on and name in tools}
    if settings.mode in ("accept-edits", "plan"):  # plan refuses writes: none is asked
        wanted -= set(EDITS)
    if settings.mode == "plan":
        wanted.discard("execute")  # not there
    return {name: {"when": _asks(name, settings.safe_paths, allowances)} for name in wanted}


def _asks(tool: str, safe: list[str], allowances: Allowances) -> Callable[[Any], bool]:
    def asks(args: Any) -> bool:
        if allowances.covers(tool, args):
            return False
        if tool in EDITS and safe and isinstance(args, dict):
            try:  # matched in the form the backend will use: "/notes/../src" is not safe
                path = clean(args.get("file_path"))
            except BackendError:
                return True
            return not wc.globmatch(path, safe, flags=_GLOB)
        return True

    return asks
