"""The command's settings, layered: defaults, then the user's own file
(`$XDG_CONFIG_HOME/tether/config.toml`, by default `~/.config/tether/config.toml`), then
the project file (`tether.toml`, or `[tool.tether]` in `pyproject.toml`), then the model
the thread continued last ran with, then `TETHER_*` environment variables, then flags.
The thread's limits count where they are tighter and no flag sets them. Each value
remembers the layer it came from, for `tether config`."""

from __future__ import annotations

import os
import tomllib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    StrictBool,
    ValidationError,
    field_validator,
    model_validator,
)

from tether.backends.hostfs import Root, config_home
from tether.backends.permissions import Rule
from tether.errors import ConfigurationError
from tether.models.resolve import default_model, parse_model

__all__ = [
    "ENVIRONMENT",
    "LIMITS",
    "MODES",
    "RECORDED",
    "CommandSettings",
    "Loaded",
    "RuleSettings",
    "Settings",
    "changed",
    "config_dir",
    "load",
    "settle",
    "user_file",
]

MODES = {
    "ask": "file writes and commands wait for your approval",
    "accept-edits": "file writes run without asking; commands wait for your approval",
    "plan": "read-only: the agent looks around and proposes a plan (no writes, commands or "
    "MCP tools)",
    "yes": "everything runs without asking (for CI; the project's deny rules still hold)",
}
"""The permission modes, and what each means."""
Mode = Literal["ask", "accept-edits", "plan", "yes"]

DEFAULT_GATES = {"execute": True, "write_file": True, "edit_file": True}
ENVIRONMENT = {
    "TETHER_MODEL": "model",
    "TETHER_MAX_STEPS": "max_steps",
    "TETHER_MAX_COST": "max_cost",
    "TETHER_TIMEOUT": "timeout",
    "TETHER_SANDBOX": "sandbox",
    "TETHER_IMAGE": "image",
    "TETHER_ENGINE": "engine",
    "TETHER_CHECKPOINTER": "checkpointer",
    "TETHER_MODE": "mode",
    "TETHER_BASE_URL": "base_url",
}
"""The environment variables read, and the setting each one sets."""

_ENV_FLAGS = {
    **dict.fromkeys(("1", "true", "yes", "on"), True),
    **dict.fromkeys(("0", "false", "no", "off"), False),
}


class RuleSettings(BaseModel):
    """One `[[permissions]]` entry: a `tether.backends.permissions.Rule`."""

    model_config = ConfigDict(extra="forbid")
    operations: list[Literal["read", "write"]]
    paths: list[str]
    mode: Literal["allow", "deny"]

    def rule(self) -> Rule:
        return Rule(self.operations, self.paths, self.mode)


class CommandSettings(BaseModel):
    """The `[commands]` table: which commands run without a question, which never run."""

    model_config = ConfigDict(extra="forbid")
    allow: list[str] = []
    """Command prefixes (`"git status"`, `"pytest"`) that run without asking, when the
    command is that one simple command (no `;`, `&&`, pipes, redirections or `$(...)`)."""
    deny: list[str] = []
    """RE2 patterns searched anywhere in a command: a match is refused, whatever the mode."""

    @field_validator("deny")
    @classmethod
    def _patterns(cls, patterns: list[str]) -> list[str]:
        # Here, not at the top: it loads the sandbox, which `tether config` never needs.
        from tether.capabilities.sandbox import CommandPolicy

        try:
            CommandPolicy(deny=patterns)
        except ConfigurationError as exc:
            raise ValueError(str(exc).removeprefix("CommandPolicy has a bad pattern: ")) from None
        return patterns

    @field_validator("allow")
    @classmethod
    def _prefixes(cls, prefixes: list[str]) -> list[str]:
        for prefix in prefixes:
            if not prefix.strip():
                raise ValueError("an allowed command prefix cannot be empty")
        return [" ".join(prefix.split()) for prefix in prefixes]


class PriceSettings(BaseModel):
    """One `[prices."provider:model"]` table: US dollars per million tokens."""

    model_config = ConfigDict(extra="forbid")
    input_per_mtok: float = Field(ge=0)
    output_per_mtok: float = Field(ge=0)
    cache_read_per_mtok: float | None = Field(None, ge=0)
    cache_write_per_mtok: float | None = Field(None, ge=0)


class MCPSettings(BaseModel):
    """One `[[mcp_servers]]` entry: a command to start (stdio) or a `url` (HTTP)."""

    model_config = ConfigDict(extra="forbid")
    name: str = Field(pattern=r"^[A-Za-z0-9_-]{1,40}$")
    command: str | None = None
    args: list[str] = []
    env: dict[str, str] | None = None
    url: str | None = None
    headers: dict[str, str] = {}
    prefix: str | None = None
    timeout_seconds: float = Field(60.0, gt=0)
    start_timeout_seconds: float | None = Field(None, gt=0)

    @model_validator(mode="after")
    def _one_way(self) -> MCPSettings:
        if (self.command is None) == (self.url is None):
            raise ValueError(f"MCP server {self.name!r} needs a command or a url, not both")
        return self


class SubagentSettings(BaseModel):
    """One `[[subagents]]` entry: a kind of agent the `task` tool can start."""

    model_config = ConfigDict(extra="forbid")
    name: str = Field(pattern=r"^[A-Za-z0-9_-]{1,64}$")
    description: str = Field(min_length=1)
    prompt: str | None = None
    """Its own instructions."""
    tools: list[str] | None = None
    """The names of the only tools it has (unset: the agent's own)."""
    model: str | None = None

    _spelled = field_validator("model")(lambda cls, model: _spelled_model(model))


def _spelled_model(model: str | None) -> str | None:
    if model is not None:
        try:
            parse_model(model)
        except ConfigurationError as exc:
            raise ValueError(str(exc)) from None
    return model


class Settings(BaseModel):
    """Everything `tether run` can be told, with its default."""

    model_config = ConfigDict(extra="forbid")
    model: str | None = None
    """A "provider:model" string; unset, the first of Claude, GPT, the offline model
    whose key is set."""
    max_steps: int | None = Field(200, ge=1)
    max_cost: float | None = Field(None, gt=0)
    """In US dollars, subagents included."""
    timeout: float | None = Field(None, gt=0)
    """In seconds."""
    sandbox: StrictBool | Literal["auto", "container"] = "auto"
    """Run `execute` in the local bubblewrap sandbox: True, False (no `execute` tool),
    "auto" (the sandbox when it can run here, else no `execute`, with a notice), or
    "container" (a podman or docker container of `image`)."""
    image: str | None = None
    """The container's image (a name podman or docker knows), or a directory holding a
    root file system (podman): for `sandbox = "container"`."""
    engine: Literal["podman", "docker"] | None = None
    """The container engine; unset, the first of podman and docker that works here."""
    network: StrictBool = False
    """Let sandboxed commands use the network."""
    skills: list[str] = []
    memory: list[str] | None = None
    """Memory files; unset, `/AGENTS.md` when the project has one."""
    safe_paths: list[str] = []
    """Globs where write_file and edit_file need no approval."""
    interrupt_on: dict[str, StrictBool] = Field(default_factory=lambda: dict(DEFAULT_GATES))
    """Tools whose calls wait for a person's approval (merged over the defaults)."""
    permissions: list[RuleSettings] = []
    checkpointer: str = "sqlite:///.tether/runs.db"
    """Where threads are kept; a relative SQLite path is inside the project."""
    mode: Mode = "ask"
    """How much runs without a question (`MODES`)."""
    commands: CommandSettings = CommandSettings()
    system_prompt: str | None = None
    """Instructions added to tether's own system prompt."""

    base_url: str | None = None
    """Where an `anthropic:`, `openai:` or `openai-chat:` model is asked (an
    OpenAI-compatible server, a proxy)."""
    prices: dict[str, PriceSettings] = {}
    """Prices of models genai-prices does not know, by "provider:model" or "model"."""
    mcp_servers: list[MCPSettings] = []
    subagents: list[SubagentSettings] = []

    _spelled = field_validator("model")(lambda cls, model: _spelled_model(model))

    @field_validator("checkpointer")
    @classmethod
    def _known_database(cls, url: str) -> str:
        if not url.startswith(("sqlite://", "postgresql://", "postgres://")):
            raise ValueError(
                f"{url!r} is no database tether keeps threads in: use sqlite:///PATH.db "
                "or postgresql://USER@HOST/DB"
            )
        return url

    @field_validator("safe_paths", "skills", "memory")
    @classmethod
    def _absolute(cls, paths: list[str] | None) -> list[str] | None:
        for path in paths or ():
            if not path.startswith("/"):
                raise ValueError(f"paths start at the project's root, '/': write '/{path}'")
        return paths


Layer = tuple[str, Mapping[str, Any]]
"""One layer of settings: its name (where it came from) and what it sets."""
Thread = tuple[str, Mapping[str, Any]]
"""A thread continued: its id and the settings it recorded (see `RECORDED`)."""


@dataclass(frozen=True, slots=True)
class Loaded:
    """The settings, where each came from, and the project file read (if any): its
    table as written, and the name of its layer in `sources`. `layers`, `thread` and
    `flags` are what the settings were made of, so they can be made again without the
    project's untrusted part (`tether.cli._trust`)."""

    settings: Settings
    sources: dict[str, str]
    file: Path | None
    project: Mapping[str, Any] = field(default_factory=dict)
    project_source: str = ""
    layers: tuple[Layer, ...] = ()
    thread: Thread | None = None
    flags: Mapping[str, Any] = field(default_factory=dict)

    def without_project(self) -> Settings:
        """The settings made of every layer but the project's: what the user set."""
        layers = [layer for layer in self.layers if layer[0] != self.project_source]
        return settle(layers, self.thread, self.flags)[0]

    def with_project(self, table: Mapping[str, Any], why: str) -> Loaded:
        """These settings with the project's table replaced by `table`; the settings
        that changed say `why`."""
        layers = [
            (name, table if name == self.project_source else given) for name, given in self.layers
        ]
        settings, sources = settle(layers, self.thread, self.flags)
        for key, value in settings:
            if value != getattr(self.settings, key):
                sources[key] = f"{sources[key]} ({why})"
        return Loaded(
            settings,
            sources,
            self.file,
            self.project,
            self.project_source,
            self.layers,
            self.thread,
            self.flags,
        )


RECORDED = ("model", "max_steps", "max_cost", "timeout")
"""The settings a thread remembers from its last run. A thread's records come from the
project's `.tether/`, which a repository could ship: so its model comes before your
environment and flags, and its limits count only where they are tighter than yours (its
permission mode is not recorded at all)."""
LIMITS = ("max_steps", "max_cost", "timeout")
"""The settings that bound a run: a smaller number is tighter."""


def load(
    directory: Path,
    environ: Mapping[str, str],
    flags: Mapping[str, Any],
    thread: Thread | None = None,
) -> Loaded:
    """The settings for a run in `directory`; `flags` holds the options given (not None),
    and `thread` the id and recorded settings of the thread continued (see `RECORDED`)."""
    file, table = _project_file(directory)
    layers = _layers(file, table, environ, flags, thread)
    settings, sources = settle(layers, thread, flags)
    if settings.model is None:
        settings.model = default_model(environ)
        sources["model"] = "default: " + _why(settings.model)
    project = _describe(file) if file else ""
    return Loaded(settings, sources, file, table, project, tuple(layers), thread, flags)


def settle(
    layers: Sequence[Layer], thread: Thread | None, flags: Mapping[str, Any]
) -> tuple[Settings, dict[str, str]]:
    """The settings `layers` make, the weakest first, and where each came from. A later
    layer's value replaces an earlier one, but lists of rules and names add up (see
    `_merged`): a project cannot drop a rule or a denied command of yours."""
    values: dict[str, Any] = {}
    sources: dict[str, str] = {}
    for layer, given in layers:
        for key, value in given.items():
            source = _source(layer, key)
            if key in values and key in _ADDED:
                source = f"{sources[key]} + {source}"
            values[key] = _merged(key, values.get(key), value)
            sources[key] = source
    if thread is not None:
        _tighter(values, sources, thread, flags)
    try:
        settings = Settings.model_validate(values)
    except ValidationError as exc:
        raise ConfigurationError(_explain(exc, sources)) from None
    for key in Settings.model_fields:
        sources.setdefault(key, "default")
    return settings, sources


_ADDED = frozenset(
    {"interrupt_on", "permissions", "safe_paths", "commands", "mcp_servers", "subagents"}
)
"""The settings each layer adds to rather than replaces."""


def _merged(key: str, before: Any, value: Any) -> Any:
    """`value` of a later layer over `before`: rules and lists added after the earlier
    ones (so the earlier layer's rules match first), tables merged key by key, named
    entries replaced by name. A value of the wrong shape replaces, for validation to
    name."""
    if key == "interrupt_on" and isinstance(value, Mapping):
        return {**(before if isinstance(before, Mapping) else DEFAULT_GATES), **value}
    if key not in _ADDED or before is None:
        return value
    if key == "commands" and isinstance(before, Mapping) and isinstance(value, Mapping):
        joined = {**before, **value}
        for part in ("allow", "deny"):
            if isinstance(before.get(part), list) and isinstance(value.get(part), list):
                joined[part] = _added(before[part], value[part])
        return joined
    if not (isinstance(before, list) and isinstance(value, list)):
        return value
    if key in ("mcp_servers", "subagents"):
        named = {_name(entry): entry for entry in before}
        named.update((_name(entry), entry) for entry in value)
        return list(named.values())
    return _added(before, value)


def _added(before: list[Any], value: list[Any]) -> list[Any]:
    return [*before, *(entry for entry in value if entry not in before)]


def _name(entry: Any) -> Any:
    name = entry.get("name") if isinstance(entry, Mapping) else None
    return name if isinstance(name, str) else id(entry)


def _layers(
    file: Path | None,
    table: Mapping[str, Any],
    environ: Mapping[str, str],
    flags: Mapping[str, Any],
    thread: Thread | None,
) -> list[Layer]:
    """The layers of settings, by name, the first the weakest."""
    layers: list[Layer] = []
    mine = user_file(environ)
    if mine.is_file():
        layers.append(("user config " + str(mine), _read_toml(mine)))
    if file is not None:
        layers.append((_describe(file), table))
    if thread is not None and "model" in thread[1]:
        layers.append((f"thread {thread[0]}", {"model": thread[1]["model"]}))
    layers.append(("env", _from_environment(environ)))
    layers.append(("flag", flags))
    return layers


def _tighter(
    values: dict[str, Any],
    sources: dict[str, str],
    thread: Thread,
    flags: Mapping[str, Any],
) -> None:
    """The thread's recorded limits, where they are tighter and no flag sets them."""
    for key in LIMITS:
        recorded = thread[1].get(key)
        if key in flags:
            continue
        if not isinstance(recorded, int | float) or isinstance(recorded, bool):
            continue
        current = values.get(key, Settings.model_fields[key].default)
        try:  # from the environment, a limit is still text here
            tighter = current is None or recorded < float(current)
        except (TypeError, ValueError):
            continue  # a bad setting of yours: validation says so
        if tighter:
            values[key] = recorded
            sources[key] = f"thread {thread[0]} (tighter than {sources.get(key, 'default')})"


def _from_environment(environ: Mapping[str, str]) -> dict[str, Any]:
    found: dict[str, Any] = {ENVIRONMENT[k]: v for k, v in environ.items() if k in ENVIRONMENT}
    if "sandbox" in found:  # a variable is text: "1", "yes", "off", "auto" ...
        word = found["sandbox"].strip().lower()
        found["sandbox"] = _ENV_FLAGS.get(word, word)
    return found


def changed(loaded: Loaded, key: str, value: Any, source: str) -> Loaded:
    """`loaded` with one setting changed (checked as any other), said to come from `source`."""
    values = {**loaded.settings.model_dump(), key: value}
    try:
        settings = Settings.model_validate(values)
    except ValidationError as exc:
        raise ConfigurationError(_explain(exc, {key: source})) from None
    sources = {**loaded.sources, key: source}
    return Loaded(
        settings,
        sources,
        loaded.file,
        loaded.project,
        loaded.project_source,
        loaded.layers,
        loaded.thread,
        loaded.flags,
    )


def config_dir(environ: Mapping[str, str]) -> Path:
    """The user's tether directory: `$XDG_CONFIG_HOME/tether`, by default ~/.config/tether."""
    return Path(config_home(environ)) / "tether"


def user_file(environ: Mapping[str, str]) -> Path:
    """The user's own settings, under every project's."""
    return config_dir(environ) / "config.toml"


def _read_toml(path: Path) -> dict[str, Any]:
    try:
        return tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        raise ConfigurationError(f"cannot read {path}: {exc}") from None


def _project_file(directory: Path) -> tuple[Path | None, dict[str, Any]]:
    """`tether.toml`, else `pyproject.toml` with a `[tool.tether]` table, else nothing."""
    host = Root(directory)
    for name in ("tether.toml", "pyproject.toml"):
        path = directory / name
        try:  # never through a symlink: the file must be the project's own
            fd = host.open(f"/{name}", os.O_RDONLY | os.O_NONBLOCK)
        except FileNotFoundError:
            continue
        except OSError as exc:
            raise ConfigurationError(
                f"cannot read {path}: {exc.strerror} (a symbolic link is not read)"
            ) from None
        try:
            with os.fdopen(fd, "rb") as file:
                data = tomllib.loads(file.read(1_000_000).decode("utf-8"))
        except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
            raise ConfigurationError(f"cannot read {path}: {exc}") from None
        if name == "tether.toml":
            return path, data
        table = data.get("tool", {}).get("tether")
        if table is not None:
            if not isinstance(table, dict):
                raise ConfigurationError(f"{path}: [tool.tether] must be a table")
            return path, table
    return None, {}


def _describe(file: Path) -> str:
    return "pyproject.toml [tool.tether]" if file.name == "pyproject.toml" else file.name


def _source(layer: str, key: str) -> str:
    if layer == "env":
        return next(f"env {name}" for name, field in ENVIRONMENT.items() if field == key)
    if layer == "flag":
        return "flag --safe" if key == "safe_paths" else f"flag --{key.replace('_', '-')}"
    return layer


def _why(model: str) -> str:
    if model.startswith("anthropic:"):
        return "ANTHROPIC_API_KEY is set"
    if model.startswith("openai:"):
        return "OPENAI_API_KEY is set"
    return "no API key is set, so the offline model"


_EXPECTED = {
    "sandbox": 'true, false, "auto" or "container"',
    "network": "true or false",
    "mode": "one of " + ", ".join(MODES),
}
"""Settings whose pydantic message would name its types, said in the file's words."""


def _explain(error: ValidationError, sources: Mapping[str, str]) -> str:
    lines: dict[str, str] = {}
    for problem in error.errors():
        where = ".".join(str(part) for part in problem["loc"])
        top = str(problem["loc"][0]) if problem["loc"] else ""
        origin = sources.get(top, "")
        if problem["type"] == "extra_forbidden":
            known = ", ".join(Settings.model_fields)
            lines[where] = f"unknown setting {where!r} ({origin}); known settings: {known}"
        elif top in _EXPECTED:  # one line, though each type of the union refused it
            lines[top] = f"{top} ({origin}) must be {_EXPECTED[top]}, got {problem['input']!r}"
        else:
            said = problem["msg"].removeprefix("Value error, ")
            lines[where] = f"{where} ({origin}): {said}"
    return "bad configuration: " + "; ".join(lines.values())
