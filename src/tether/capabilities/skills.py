"""Skills (the Agent Skills format): folders with a `SKILL.md`, disclosed progressively.

A skill is a directory holding `SKILL.md`: YAML frontmatter (`name`, `description`, and
optionally `license`, `compatibility`, `allowed-tools`, `metadata`), then instructions,
beside any scripts, references or templates. When a run starts, every source directory
is read from the agent's backend and only each skill's name, description and path go
into the prompt; the agent reads the rest with the file tools when a skill applies.

A skill that cannot be used (no SKILL.md, bad frontmatter, a name the format forbids)
is left out with a `SkillWarning`; the others still load. When two sources hold a skill
of the same name, the later source wins, with a warning.
"""

from __future__ import annotations

import re
import warnings
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from tether import _checks, prompts
from tether.backends.errors import BackendError
from tether.backends.paths import clean
from tether.capabilities.base import Capability
from tether.errors import ConfigurationError, TetherWarning
from tether.state import RunState

__all__ = ["Skill", "SkillWarning", "Skills", "parse_skill"]

_NAME = re.compile(r"[a-z0-9]+(-[a-z0-9]+)*")
_FIELDS = {"name", "description", "license", "compatibility", "allowed-tools", "metadata"}
MAX_SKILL_BYTES = 1024 * 1024


class SkillWarning(TetherWarning):
    """A skill was left out or replaced; the message says which and why."""


@dataclass(frozen=True, slots=True)
class Skill:
    """What the prompt shows of a skill, and where its files are."""

    name: str
    description: str
    path: str
    """The path of its SKILL.md."""
    license: str | None = None
    allowed_tools: tuple[str, ...] = ()
    metadata: Mapping[str, str] | None = None


def parse_skill(path: str, text: str) -> Skill:
    """The skill in `text` (the SKILL.md at `path`), or ValueError saying what is wrong."""
    if not text.startswith("---"):
        raise ValueError("SKILL.md must start with YAML frontmatter between '---' lines")
    _, _, rest = text.partition("---")
    front, found, _ = rest.partition("\n---")
    if not found:
        raise ValueError("the frontmatter has no closing '---' line")
    import yaml  # imported when a skill is read: pyyaml costs ~8 ms at import

    try:
        data = yaml.safe_load(front)
    except yaml.YAMLError as exc:
        raise ValueError(f"the frontmatter is not valid YAML ({exc})") from exc
    if not isinstance(data, dict):
        raise ValueError("the frontmatter must be a mapping of fields")
    unknown = sorted(set(data) - _FIELDS)
    if unknown:
        raise ValueError(f"unknown frontmatter fields {unknown}; allowed: {sorted(_FIELDS)}")
    name, description = data.get("name"), data.get("description")
    folder = path.rsplit("/", 2)[-2] if path.count("/") >= 2 else ""
    if not isinstance(name, str) or not 1 <= len(name) <= 64 or not _NAME.fullmatch(name):
        raise ValueError(
            f"name {name!r} must be 1-64 lowercase letters, digits and single hyphens, "
            "not starting or ending with a hyphen"
        )
    if name != folder:
        raise ValueError(f"name {name!r} must match its directory name {folder!r}")
    if not isinstance(description, str) or not description.strip() or len(description) > 1024:
        raise ValueError("description must be a non-empty string of at most 1024 characters")
    return Skill(
        name=name,
        description=" ".join(description.split()),
        path=path,
        license=_optional_str(data, "license"),
        allowed_tools=_tools(data.get("allowed-tools")),
        metadata=_metadata(data.get("metadata")),
    )


def _optional_str(data: Mapping[str, Any], key: str) -> str | None:
    value = data.get(key)
    if value is not None and not isinstance(value, str):
        raise ValueError(f"{key} must be a string")
    return value


def _tools(value: Any) -> tuple[str, ...]:
    if value is None:
        return ()
    if isinstance(value, str):
        return tuple(value.split())
    if isinstance(value, list) and all(isinstance(v, str) for v in value):
        return tuple(value)
    raise ValueError("allowed-tools must be a space-separated string or a list of strings")


def _metadata(value: Any) -> Mapping[str, str] | None:
    if value is None:
        return None
    if not isinstance(value, dict):
        raise ValueError("metadata must be a mapping")
    return {str(k): str(v) for k, v in value.items()}


class Skills(Capability):
    """Finds the skills under `sources` (backend directories) at the start of each run
    and lists them in the prompt."""

    prompt_slot = "skills"

    def __init__(self, sources: Sequence[str]) -> None:
        sources = _checks.each("skills", sources, str, "directories, like ['/skills/']")
        if not sources:
            raise ConfigurationError("skills takes a list of directories, like ['/skills/']")
        try:
            self.sources = tuple(clean(s) for s in sources)
        except BackendError as exc:
            raise ConfigurationError(f"bad skills directory: {exc}") from exc

    async def run_prompt(self, state: RunState) -> str | None:
        found = await discover(state.backend, self.sources)
        state.data["skills"] = found
        if not found:
            return None
        listing = "\n".join(f"- {s.name}: {s.description} ({s.path})" for s in found.values())
        return prompts.render("skills", skills=listing)


async def discover(backend: Any, sources: Sequence[str]) -> dict[str, Skill]:
    """Every usable skill under `sources`, by name; later sources win."""
    found: dict[str, Skill] = {}
    if backend is None:
        warnings.warn("skills need the file tools (filesystem=True)", SkillWarning, stacklevel=2)
        return found
    for source in sources:
        try:
            entries = await backend.ls(source)
        except BackendError as exc:
            warnings.warn(f"no skills read from {source}: {exc}", SkillWarning, stacklevel=2)
            continue
        for entry in entries:
            if not entry.is_dir:
                continue
            skill = await _load(backend, f"{entry.path}/SKILL.md")
            if skill is None:
                continue
            if skill.name in found:
                warnings.warn(
                    f"skill {skill.name!r} in {found[skill.name].path} is replaced by the one "
                    f"in {skill.path}",
                    SkillWarning,
                    stacklevel=2,
                )
            found[skill.name] = skill
    return found


async def _load(backend: Any, path: str) -> Skill | None:
    try:
        data = await backend.read(path)
    except BackendError:
        warnings.warn(f"{path.rsplit('/', 1)[0]} has no SKILL.md; skipped", SkillWarning, 3)
        return None
    if len(data) > MAX_SKILL_BYTES:
        warnings.warn(f"{path} is over {MAX_SKILL_BYTES} bytes; skipped", SkillWarning, 3)
        return None
    try:
        return parse_skill(path, data.decode("utf-8"))
    except (ValueError, UnicodeDecodeError) as exc:
        warnings.warn(f"{path} skipped: {exc}", SkillWarning, 3)
        return None
