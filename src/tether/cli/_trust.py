"""Trusting a project's settings before they weaken its own safety.

A cloned repository can ship a `tether.toml` (or `[tool.tether]`) that turns approvals
off or sends the run records elsewhere. Such settings take effect only once the user has
trusted them, as editors do with a workspace: asked once on a terminal and remembered per
project (by its path and a hash of the settings), refused without a terminal unless
`--trust` is given. Settings from the environment and flags are the user's own and need
no trust.

The answers live in `$XDG_CONFIG_HOME/tether/trusted.json` (by default
`~/.config/tether/trusted.json`), outside every project and every sandbox.
"""

from __future__ import annotations

import hashlib
import json
import os
import sys
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from tether.cli._config import LIMITS, Loaded, Settings, config_dir
from tether.errors import ConfigurationError

__all__ = ["needs_trust", "trust_file", "trusted"]


def needs_trust(loaded: Loaded) -> dict[str, Any]:
    """What the project file sets that your own settings (config file, environment,
    flags) do not, and that widens access, runs a process or raises a limit: those
    settings, as the project would have them. Everything else a project sets narrows
    (its rules, denied commands and gates add to yours) and needs no trust."""
    if not loaded.project_source:
        return {}
    mine = loaded.without_project()
    theirs = loaded.settings
    weakening = {**_gates_off(theirs, mine), **_more_runs(theirs, mine)}
    for key in ("base_url", "prices"):
        if getattr(theirs, key) != getattr(mine, key):
            weakening[key] = theirs.model_dump(mode="json")[key]
    for key in LIMITS:
        if _looser(getattr(theirs, key), getattr(mine, key)):
            weakening[key] = getattr(theirs, key)
    database = theirs.checkpointer
    if database != mine.checkpointer and not _inside_project(database):
        weakening["checkpointer"] = database
    return weakening


def _gates_off(theirs: Settings, mine: Settings) -> dict[str, Any]:
    """The approvals the project turns off, and the writes it lets skip them."""
    weakening: dict[str, Any] = {}
    off = sorted(
        name for name, on in mine.interrupt_on.items() if on and not theirs.interrupt_on[name]
    )
    if off:
        weakening["interrupt_on"] = dict.fromkeys(off, False)
    added = _new(theirs.safe_paths, mine.safe_paths)
    if added:
        weakening["safe_paths"] = added
    if _ORDER.index(theirs.mode) > _ORDER.index(mine.mode):
        weakening["mode"] = theirs.mode
    return weakening


def _more_runs(theirs: Settings, mine: Settings) -> dict[str, Any]:
    """The processes and connections the project adds to yours."""
    weakening: dict[str, Any] = {}
    allowed = _new(theirs.commands.allow, mine.commands.allow)
    if allowed:
        weakening["commands"] = {"allow": allowed}
    servers = [s.model_dump(mode="json") for s in theirs.mcp_servers if s not in mine.mcp_servers]
    if servers:  # whole, so that a changed command is asked about again
        weakening["mcp_servers"] = servers
    yours = {s.name: s for s in mine.subagents}
    replaced = [s for s in theirs.subagents if s.name in yours and s != yours[s.name]]
    if replaced:  # its tools, model and prompt in place of the ones you chose
        weakening["subagents"] = [s.model_dump(mode="json") for s in replaced]
    if theirs.network and not mine.network:
        weakening["network"] = True
    if theirs.sandbox is True and mine.sandbox is False:  # "auto" makes one where it can
        weakening["sandbox"] = True
    if theirs.sandbox == "container" and mine.sandbox != "container":
        weakening["sandbox"] = "container"  # what commands run on and can reach changes
    if theirs.image is not None and theirs.image != mine.image:
        weakening["image"] = theirs.image
    if theirs.engine is not None and theirs.engine != mine.engine:  # docker's daemon is root
        weakening["engine"] = theirs.engine
    return weakening


_ORDER = ("plan", "ask", "accept-edits", "yes")
"""The permission modes, from the one that lets least run without a question."""


def _new(values: list[str], mine: list[str]) -> list[str]:
    return [value for value in values if value not in mine]


def _looser(limit: float | None, mine: float | None) -> bool:
    return mine is not None and (limit is None or limit > mine)


def _inside_project(url: str) -> bool:
    """A SQLite file in the project's `.tether/`, with no way out of it: where the agent
    cannot reach it and sandboxed commands cannot see it."""
    if not url.startswith("sqlite:///.tether/"):
        return False
    return ".." not in url.removeprefix("sqlite:///").split("/")


def trust_file(environ: Mapping[str, str]) -> Path:
    """Where the answers are kept."""
    return config_dir(environ) / "trusted.json"


def trusted(
    loaded: Loaded,
    directory: Path,
    *,
    given: bool,
    ask: Callable[[str], bool] | None,
    environ: Mapping[str, str] = os.environ,
) -> Loaded:
    """`loaded` as it may be used: the project's weakening settings kept when trusted
    (`given` is --trust; `ask` puts a yes/no question to a person, None without a
    terminal), dropped when the person said no; ConfigurationError otherwise."""
    weakening = needs_trust(loaded)
    if not weakening or given:
        return loaded
    store = trust_file(environ)
    answers = _read(store)
    key = str(directory)
    digest = hashlib.sha256(json.dumps(weakening, sort_keys=True).encode()).hexdigest()
    known = answers.get(key)
    if isinstance(known, Mapping) and known.get("settings") == digest:
        answer = bool(known.get("trusted"))
    elif ask is None:
        raise ConfigurationError(
            f"{_where(loaded)} {describe(weakening)}. Settings from a project that weaken "
            "its safety need your trust: run once on a terminal to answer, or pass --trust "
            "to accept them for this run."
        )
    else:
        answer = ask(
            f"{_where(loaded)} {describe(weakening)}.\nTrust these settings for {directory}?"
        )
        answers[key] = {"settings": digest, "trusted": answer}
        _write(store, answers)
    return loaded if answer else _without(loaded, weakening)


def describe(weakening: Mapping[str, Any]) -> str:
    """The weakening settings in words."""
    parts = [_SAID[key](value) for key, value in weakening.items() if key in _SAID]
    parts += [f"raises {key} to {weakening[key]}" for key in LIMITS if key in weakening]
    return "; ".join(parts)


_SAID: dict[str, Callable[[Any], str]] = {
    "interrupt_on": lambda gates: "turns off approval for " + ", ".join(gates),
    "safe_paths": lambda paths: "lets writes to " + ", ".join(paths) + " skip approval",
    "network": lambda _: "lets sandboxed commands use the network",
    "mode": lambda mode: f"sets the permission mode {mode!r}",
    "commands": lambda commands: (
        f"lets the commands {', '.join(commands['allow'])} run without asking"
    ),
    "checkpointer": lambda url: f"keeps the run records at {url}",
    "mcp_servers": lambda servers: (
        "starts or connects to the MCP servers "
        + ", ".join(str(s.get("name")) for s in servers if isinstance(s, dict))
    ),
    "base_url": lambda url: f"sends the model's requests (and your API key) to {url}",
    "prices": lambda _: "sets the prices that --max-cost counts with",
    "subagents": lambda agents: (
        "replaces your subagents "
        + ", ".join(str(a.get("name")) for a in agents if isinstance(a, dict))
    ),
    "sandbox": lambda kind: (
        "runs commands in a container"
        if kind == "container"
        else "turns on `execute` (commands in the sandbox), which your settings leave off"
    ),
    "image": lambda image: f"runs commands in a container of {image}",
    "engine": lambda engine: f"runs containers with {engine}",
}
"""How each weakening setting is said."""


def _where(loaded: Loaded) -> str:
    return f"This project's {loaded.file.name if loaded.file else 'settings'}"


def _without(loaded: Loaded, weakening: Mapping[str, Any]) -> Loaded:
    """`loaded` made again without the project's weakening settings: where the project
    set them, yours (or the defaults) hold."""
    table = dict(loaded.project)
    for key in weakening:
        if key == "interrupt_on":
            gates = table.get("interrupt_on", {})
            table[key] = {name: on for name, on in gates.items() if name not in weakening[key]}
        elif key == "commands":  # its deny list only makes the run safer: it stays
            table[key] = {k: v for k, v in table.get(key, {}).items() if k != "allow"}
        elif key in ("mcp_servers", "subagents"):
            names = {entry["name"] for entry in weakening[key]}
            table[key] = [s for s in table.get(key, []) if s.get("name") not in names]
        else:
            table.pop(key, None)
    return loaded.with_project(table, "the project's value is not trusted")


def _read(store: Path) -> dict[str, Any]:
    try:
        data = json.loads(store.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return {}
    except (OSError, ValueError) as exc:
        raise ConfigurationError(f"cannot read {store}: {exc}") from None
    return data if isinstance(data, dict) else {}


def _write(store: Path, answers: Mapping[str, Any]) -> None:
    store.parent.mkdir(parents=True, exist_ok=True)
    temporary = store.with_suffix(".tmp")
    temporary.write_text(json.dumps(answers, indent=2, sort_keys=True), encoding="utf-8")
    temporary.replace(store)


def ask_on_terminal(question: str) -> bool:
    """A yes/no question on the terminal; anything but yes is no."""
    print(question, file=sys.stderr)
    answer = input("[y/N] ")
    return answer.strip().lower() in ("y", "yes")
