"""The agent the settings describe, and the workspace (a backend) it works on."""

from __future__ import annotations

import contextlib
import os
import shutil
import stat
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from wcmatch.glob import escape

from tether import Limits, Price, SubAgent, create_agent
from tether.agent import Agent
from tether.backends.base import Backend
from tether.backends.composite import CompositeBackend
from tether.backends.errors import BackendError
from tether.backends.filesystem import FilesystemBackend
from tether.backends.hostfs import Root
from tether.backends.paths import clean
from tether.backends.permissions import Rule
from tether.backends.sandbox.local import LocalSandbox
from tether.capabilities.compaction import HISTORY_DIR
from tether.capabilities.eviction import EVICTION_DIR
from tether.capabilities.local_context import LocalContext
from tether.capabilities.sandbox import CommandPolicy
from tether.cli._config import Loaded
from tether.cli._permissions import EDITS, Allowances, gates
from tether.cli._records import checkpointer_url
from tether.cli._render import Output
from tether.errors import ConfigurationError
from tether.mcp import MCPServer
from tether.models.base import Model
from tether.models.resolve import OFFLINE_NOTICE, infer_model, parse_model

__all__ = ["build_agent", "workspace"]

# Never the agent's to touch, whatever the configured rules say: tether's own records
# (threads, the sandbox's records, .tether/.gitignore), and git.
_PROTECTED = (
    ({"read", "write"}, ["/.tether", "/.tether/**"]),
    ({"write"}, ["/.git/**"]),
)


_PLAN_PROMPT = (
    "Plan mode: the user wants a plan before any change. Read and search as much as you "
    "need, but write no file and run no command (both are refused); end with a concrete, "
    "numbered plan of the changes you would make, and the files each one touches."
)


def build_agent(
    loaded: Loaded,
    directory: Path,
    output: Output,
    backend: Backend,
    allowances: Allowances | None = None,
) -> Agent[str]:
    """The agent the settings describe, working on `directory` through `backend`; the
    calls `allowances` covers run without a question."""
    settings = loaded.settings
    assert settings.model is not None  # load() fills it in
    model = _model(settings.model, loaded)
    if model.provider == "local" and loaded.sources["model"].startswith("default"):
        output.notice(OFFLINE_NOTICE, dim=True)
    memory = settings.memory
    if memory is None:
        memory = _agents_file(directory)
    rules = [Rule(ops, paths, "deny") for ops, paths in _PROTECTED]  # type: ignore[arg-type]
    database = settings.checkpointer.removeprefix("sqlite:///")
    if database != settings.checkpointer and not database.startswith("/"):  # in the project
        where = escape(clean(database))
        rules.append(Rule(["read", "write"], [where, where + "-*"], "deny"))
    if settings.mode == "plan":
        rules.append(Rule(["write"], ["/**"], "deny"))
    prompt = [settings.system_prompt, _PLAN_PROMPT if settings.mode == "plan" else None]
    common: dict[str, Any] = {
        "limits": Limits(
            max_steps=settings.max_steps,
            max_cost_usd=settings.max_cost,
            timeout_seconds=settings.timeout,
        ),
        "backend": CompositeBackend(backend, _working_files(directory)),
        "permissions": [*rules, *(r.rule() for r in settings.permissions)],
        "skills": settings.skills,
        "memory": memory,
        "capabilities": [LocalContext(directory)],
        "checkpointer": checkpointer_url(loaded, directory),
        "system_prompt": "\n\n".join(p for p in prompt if p) or None,
        "prices": {name: Price(**price.model_dump()) for name, price in settings.prices.items()},
        "mcp_servers": [  # a command starts in the project, as `execute`'s do
            MCPServer(**server.model_dump(), cwd=str(directory) if server.command else None)
            for server in settings.mcp_servers
            if settings.mode != "plan"  # their tools may change anything
        ],
        "subagents": [
            SubAgent(
                s.name,
                s.description,
                system_prompt=s.prompt,
                tools=s.tools,
                model=None if s.model is None else _model(s.model, loaded),
            )
            for s in settings.subagents
        ],
        "command_policy": CommandPolicy(deny=settings.commands.deny)
        if settings.commands.deny and hasattr(backend, "execute")
        else None,
    }
    # The gates may name only tools the agent has (the model's profile may leave some
    # out), so the tools are looked at first.
    tools = set(create_agent(model, **common)._plan.tools)
    unknown = [n for n, on in settings.interrupt_on.items() if on and n not in tools]
    unknown = [n for n in unknown if n not in ("execute", *EDITS)]
    if unknown:
        raise ConfigurationError(
            f"interrupt_on names {unknown}, which this agent does not have; its tools: "
            f"{', '.join(sorted(tools))}"
        )
    allowed = allowances if allowances is not None else Allowances.of(settings)
    return create_agent(model, interrupt_on=gates(settings, tools, allowed), **common)


def _model(spec: str, loaded: Loaded) -> Model:
    """The model `spec` names, asked at the settings' `base_url` when one is set."""
    url = loaded.settings.base_url
    if url is None:
        return infer_model(spec)
    provider, name = parse_model(spec)
    # Each adapter loads its provider's SDK: only the one asked for is imported.
    if provider == "anthropic":
        from tether.models.anthropic import AnthropicModel

        return AnthropicModel(name, base_url=url)
    if provider in ("openai", "openai-chat"):
        from tether.models.openai import OpenAIModel

        return OpenAIModel(name, base_url=url, api="chat" if provider == "openai-chat" else None)
    raise ConfigurationError(
        f"base_url ({loaded.sources['base_url']}) is where an anthropic:, openai: or "
        f"openai-chat: model is asked, not a {provider}: one"
    )


def _working_files(directory: Path) -> dict[str, Backend]:
    """The agent's own files (large tool results, the history compaction saves) routed
    to `.tether/`, out of the user's tree and out of every sandboxed command's reach."""
    routes: dict[str, Backend] = {}
    for route in (EVICTION_DIR, HISTORY_DIR):
        inside = f"/.tether{route}"
        try:  # made without following a link: a repository could plant one there
            os.close(Root(directory).make_dirs(inside))
        except (BackendError, OSError) as exc:
            raise ConfigurationError(
                f"the agent's working directory {inside} cannot be made in the project "
                f"({exc}); a directory on the way is a symbolic link or not a directory"
            ) from None
        routes[route] = FilesystemBackend(directory / inside.lstrip("/"))
    return routes


def _agents_file(directory: Path) -> list[str]:
    """The project's AGENTS.md as memory, when it has one: where a symlink in the
    project (`AGENTS.md -> CLAUDE.md`) points, since links are not followed."""
    host = Root(directory)
    found = host.lstat("/AGENTS.md")
    if found is None:
        return []
    if stat.S_ISREG(found.st_mode):
        return ["/AGENTS.md"]
    link = host.link_in("/AGENTS.md")
    if link is None or link.target is None:
        return []
    try:  # the target itself must be a plain file, reached with no link on the way
        target = host.lstat(link.target)
    except OSError:
        return []
    return [link.target] if target is not None and stat.S_ISREG(target.st_mode) else []


def _backend(loaded: Loaded, directory: Path, output: Output) -> Backend:
    settings = loaded.settings
    wanted = settings.sandbox
    if settings.mode == "plan":  # nothing runs
        return FilesystemBackend(directory)
    if wanted == "auto" and shutil.which("bwrap") is None:
        output.notice("no `execute`: bubblewrap is not installed", dim=True)
        return FilesystemBackend(directory)
    if not wanted:
        return FilesystemBackend(directory)
    if wanted == "container":
        return _container(loaded, directory)
    try:
        return LocalSandbox(directory, network=settings.network)
    except ConfigurationError as why:
        if settings.sandbox is True:
            raise
        output.notice(f"no `execute`: {why}", dim=True)  # why the sandbox cannot run here
        return FilesystemBackend(directory)


def _container(loaded: Loaded, directory: Path) -> Backend:
    from tether.backends.sandbox.container import ContainerSandbox

    image = loaded.settings.image
    if image is None:
        raise ConfigurationError(
            "--sandbox container needs --image: an image podman or docker knows, or a "
            "directory holding a root file system (image = ... in tether.toml)"
        )
    network, engine = loaded.settings.network, loaded.settings.engine
    if image.startswith(("/", ".", "~")):  # a path: a root file system
        root = Path(image).expanduser()
        if not root.is_absolute() and loaded.sources.get("image") == loaded.project_source:
            root = directory / root  # a project's path is the project's
        if not root.is_dir():
            raise ConfigurationError(f"--image {image}: no such directory")
        return ContainerSandbox(directory, rootfs=root, network=network, engine=engine)
    return ContainerSandbox(directory, image=image, network=network, engine=engine)


@contextlib.contextmanager
def workspace(loaded: Loaded, directory: Path, output: Output) -> Iterator[Backend]:
    """The backend the settings ask for, closed at the end."""
    checkpointer_url(loaded, directory)  # .tether is made before the sandbox hides it
    backend = _backend(loaded, directory, output)
    try:
        yield backend
    finally:
        close = getattr(backend, "close", None)
        if close is not None:
            close()
