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

from tether.cli._config import DEFAULT_GATES, Loaded, Settings, config_dir
from tether.errors import ConfigurationError

__all__ = ["needs_trust", "trust_file", "trusted"]


def needs_trust(loaded: Loaded) -> dict[str, Any]:
    """The settings from the project file that weaken safety: what they would be."""
    own = loaded.project_source
    table = {k: v for k, v in loaded.project.items() if loaded.sources.get(k) == own}
    weakening: dict[str, Any] = {}
    gates = table.get("interrupt_on")
    if isinstance(gates, Mapping):
        off = sorted(name for name, on in gates.items() if on is False)
        if off:
            weakening["interrupt_on"] = {name: False for name in off}
    if table.get("safe_paths"):
        weakening["safe_paths"] = table["safe_paths"]
    if table.get("network") is True:
        weakening["network"] = True
    if table.get("mode") in ("accept-edits", "yes"):
        weakening["mode"] = table["mode"]
    commands = table.get("commands")
    if isinstance(commands, Mapping) and commands.get("allow"):
        weakening["commands"] = {"allow": commands["allow"]}
    for key in ("mcp_servers", "base_url", "prices"):
        if table.get(key):
            weakening[key] = table[key]
    database = table.get("checkpointer")
    if isinstance(database, str) and not _inside_project(database):
        weakening["checkpointer"] = database
    return weakening


def _inside_project(url: str) -> bool:
    """A SQLite file given relative to the project, with no way out of it."""
    if not url.startswith("sqlite:///") or url.startswith("sqlite:////"):
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
    parts = []
    if "interrupt_on" in weakening:
        parts.append("turns off approval for " + ", ".join(weakening["interrupt_on"]))
    if "safe_paths" in weakening:
        parts.append("lets writes to " + ", ".join(weakening["safe_paths"]) + " skip approval")
    if "network" in weakening:
        parts.append("lets sandboxed commands use the network")
    if "mode" in weakening:
        parts.append(f"sets the permission mode {weakening['mode']!r}")
    if "commands" in weakening:
        allowed = ", ".join(weakening["commands"]["allow"])
        parts.append(f"lets the commands {allowed} run without asking")
    if "checkpointer" in weakening:
        parts.append(f"keeps the run records at {weakening['checkpointer']}")
    if "mcp_servers" in weakening:
        names = ", ".join(
            str(s.get("name")) for s in weakening["mcp_servers"] if isinstance(s, dict)
        )
        parts.append(f"starts or connects to the MCP servers {names}")
    if "base_url" in weakening:
        parts.append(f"sends the model's requests (and your API key) to {weakening['base_url']}")
    if "prices" in weakening:
        parts.append("sets the prices that --max-cost counts with")
    return "; ".join(parts)


def _where(loaded: Loaded) -> str:
    return f"This project's {loaded.file.name if loaded.file else 'settings'}"


def _without(loaded: Loaded, weakening: Mapping[str, Any]) -> Loaded:
    """`loaded` with the weakening project settings back at their defaults (or at what
    the user's own layers set)."""
    settings = loaded.settings.model_copy(deep=True)
    sources = dict(loaded.sources)
    for key in weakening:
        if key == "interrupt_on":
            settings.interrupt_on = {**settings.interrupt_on, **DEFAULT_GATES}
        elif key == "commands":  # its deny list only makes the run safer: it stays
            settings.commands = settings.commands.model_copy(update={"allow": []})
        else:
            setattr(
                settings, key, Settings.model_fields[key].get_default(call_default_factory=True)
            )
        sources[key] = "default (the project's value is not trusted)"
    return Loaded(settings, sources, loaded.file, loaded.project, loaded.project_source)


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
