"""`tether serve`: the project's agent (or agents from Python) over HTTP, with the page."""

from __future__ import annotations

import argparse
import contextlib
import importlib
import ipaddress
import os
import sys
from pathlib import Path
from typing import Any

from tether.cli._agent import build_agent, workspace
from tether.cli._config import Loaded
from tether.cli._render import Output
from tether.errors import ConfigurationError

__all__ = ["serve"]


def serve(options: argparse.Namespace, loaded: Loaded, directory: Path, output: Output) -> int:
    """Serve until Ctrl-C; the exit code."""
    try:  # the serve extra's
        import uvicorn

        from tether.serve import LOOPBACK_HOSTS, TOKEN_VARIABLE, app, new_token
    except ImportError:
        raise ConfigurationError(
            "`tether serve` needs the serve extra: pip install 'tether[serve]'"
        ) from None
    token = options.token or os.environ.get(TOKEN_VARIABLE) or new_token()
    local = _is_loopback(options.host)
    hosts = LOOPBACK_HOSTS if local else None
    if not local:
        output.notice(
            f"listening on {options.host}: other machines can reach this server, and anyone "
            "with the token can run the agent",
            dim=False,
        )
    with contextlib.ExitStack() as stack:
        if options.app:
            agents = _imported(options.app, directory)
        else:
            backend = stack.enter_context(workspace(loaded, directory, output))
            agents = {_name(directory): build_agent(loaded, directory, output, backend)}
        application = app(agents, token=token, hosts=hosts, cors_origins=options.cors or ())
        shown = f"[{options.host}]" if ":" in options.host else options.host
        ready = (
            f"tether is serving at http://{shown}:{options.port}/#token={token}\n"
            "Ctrl-C stops it; a run going on is recorded as cancelled."
        )
        config = uvicorn.Config(
            application, host=options.host, port=options.port, log_level="warning"
        )
        with contextlib.suppress(KeyboardInterrupt):  # uvicorn raises Ctrl-C again, once done
            _Server(config, ready).run()
    return 0


def _Server(config: Any, ready: str) -> Any:
    """uvicorn's server, saying `ready` once its socket listens (so whoever reads the
    line can connect at once), and made to stop the live runs first when it is told to
    stop, so their streams end (each run recorded as cancelled) instead of holding it
    open."""
    import uvicorn  # the serve extra, which serve() found installed

    class Server(uvicorn.Server):
        async def startup(self, sockets: Any = None) -> None:
            await super().startup(sockets)
            if self.started:
                print(ready, flush=True)

        async def shutdown(self, sockets: Any = None) -> None:
            await config.app.state.live.close()
            await super().shutdown(sockets)

    return Server(config)


def _is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def _name(directory: Path) -> str:
    """The project's agent is served by the project directory's name."""
    cleaned = "".join(c if c.isalnum() or c in "_.-" else "-" for c in directory.name)
    return cleaned.strip("-._")[:64] or "project"


def _imported(target: str, directory: Path) -> Any:
    """The agents `module:attribute` names (an Agent, or a mapping of names to agents),
    the module looked for in the project first."""
    module_name, _, attribute = target.partition(":")
    if not module_name or not attribute:
        raise ConfigurationError(f"APP is module:attribute (such as agents:served), got {target!r}")
    sys.path.insert(0, str(directory))
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        raise ConfigurationError(f"cannot import {module_name!r}: {exc}") from None
    try:
        return getattr(module, attribute)
    except AttributeError:
        raise ConfigurationError(f"module {module_name!r} has no {attribute!r}") from None
