"""Agents over HTTP: an ASGI app that runs them, streams their events in the AG-UI
protocol, keeps their threads, takes approvals, and serves a page to watch it all.

    from tether.serve import app
    application = app({"coder": coder, "writer": writer}, token=os.environ["TOKEN"])
    # uvicorn module:application --host 127.0.0.1

Every request but the page's needs `Authorization: Bearer <token>`. The page (`/`)
reads the token from the address's fragment (`/#token=...`, which no request carries)
and keeps it for the tab. Needs `tether[serve]`.

The API, under `/api/agents/{agent}`:

- `POST` (an AG-UI `RunAgentInput`): a run, streamed as server-sent AG-UI events. The
  last message, when it is the user's, starts a run on `threadId`; `resume` entries
  answer the interrupts a run stopped at (`"status": "resolved"` with a decision as
  `payload`, `{"kind": "approve" | "edit" | "reject" | "respond", "args"?, "message"?}`,
  or `"status": "cancelled"`, which rejects the call); tool messages at the end of
  `messages` give the results of the frontend calls it stopped at; with none of these,
  the thread's unfinished run goes on from its last step. A run goes on when its client
  leaves. `tools` are frontend tools: the model may call them beside the agent's own
  (never in place of one), the run stops at such a call, and the client runs it and
  sends its result as a tool message. A resumed run does not announce again the calls
  the client's `messages` hold; when a decision changed one's arguments, a
  MESSAGES_SNAPSHOT of the client's own messages, with them put right, follows
  RUN_STARTED.
- `GET /threads`, `GET|DELETE /threads/{id}`: the threads, one in full, deleting one.
- `GET /threads/{id}/events`: the live run of the thread, from its first event.
- `POST /threads/{id}/stop`: end the thread's run where it stands (live or waiting).
"""

from __future__ import annotations

import contextlib
import os
import re
import secrets
import sys
from collections.abc import AsyncIterator, Mapping, Sequence
from importlib import resources
from typing import TYPE_CHECKING, Any

from tether.agent import Agent
from tether.errors import ConfigurationError, TetherError
from tether.serve._guard import TokenGuard
from tether.serve._server import NotFound, Server, not_found, refused

if TYPE_CHECKING:
    from starlette.applications import Starlette

    from tether.durable.dbos import DurableAgent

__all__ = ["TOKEN_VARIABLE", "app", "new_token"]

TOKEN_VARIABLE = "TETHER_SERVE_TOKEN"
LOOPBACK_HOSTS = ("127.0.0.1", "localhost", "::1", "[::1]")
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,63}")


def new_token() -> str:
    """A fresh random token for `app(token=...)`."""
    return secrets.token_urlsafe(24)


def app(
    agents: Agent[Any] | DurableAgent[Any] | Mapping[str, Agent[Any] | DurableAgent[Any]],
    *,
    token: str | None = None,
    cors_origins: Sequence[str] = (),
    hosts: Sequence[str] | None = LOOPBACK_HOSTS,
) -> Starlette:
    """An ASGI app serving `agents` by name (one agent alone is served as "agent").

    A `DurableAgent`'s runs are queued for its DBOS workers; the server reads their
    events from the thread as the workers record them (a step at a time, not streamed).

    `token` is what every API request must carry (default: `$TETHER_SERVE_TOKEN`).
    `cors_origins` lets pages of those origins call the API (none by default).
    `hosts` are the Host headers answered (the loopback names by default, so a
    web page cannot reach the server by pointing a domain of its own at 127.0.0.1);
    None answers any.
    """
    try:
        from starlette.applications import Starlette
        from starlette.middleware import Middleware
        from starlette.middleware.cors import CORSMiddleware
        from starlette.middleware.trustedhost import TrustedHostMiddleware
        from starlette.routing import Mount, Route
        from starlette.staticfiles import StaticFiles
    except ImportError as exc:  # pragma: no cover - depends on the extras installed
        raise ConfigurationError(
            "serving agents needs starlette and uvicorn: pip install 'tether[serve]'"
        ) from exc

    served = _checked_agents(agents)
    secret = token if token is not None else os.environ.get(TOKEN_VARIABLE)
    if not secret or not isinstance(secret, str) or len(secret) < 16:
        raise ConfigurationError(
            f"serving agents needs a token of 16 characters or more: give token=... or set "
            f"${TOKEN_VARIABLE} (tether.serve.new_token() makes one)"
        )
    server = Server(served)
    middleware = []  # the first is the outermost
    if hosts is not None:
        middleware.append(Middleware(TrustedHostMiddleware, allowed_hosts=list(hosts)))
    if cors_origins:  # outside the token's guard: an allowed page can read a refusal too
        middleware.append(
            Middleware(
                CORSMiddleware,
                allow_origins=list(cors_origins),
                allow_methods=["GET", "POST", "DELETE"],
                allow_headers=["Authorization", "Content-Type"],
            )
        )
    middleware.append(Middleware(TokenGuard, token=secret))
    static = str(resources.files("tether.serve") / "static")
    routes = [
        Route("/", server.page),
        Mount("/static", StaticFiles(directory=static), name="static"),
        Route("/api/agents", server.agents),
        Route("/api/agents/{agent}", server.run, methods=["POST"]),
        Route("/api/agents/{agent}/threads", server.threads),
        Route("/api/agents/{agent}/threads/{thread}", server.thread),
        Route("/api/agents/{agent}/threads/{thread}", server.delete_thread, methods=["DELETE"]),
        Route("/api/agents/{agent}/threads/{thread}/events", server.events),
        Route("/api/agents/{agent}/threads/{thread}/stop", server.stop, methods=["POST"]),
    ]

    @contextlib.asynccontextmanager
    async def lifespan(_: Starlette) -> AsyncIterator[None]:
        try:
            yield
        finally:
            await server.live.close()

    application = Starlette(
        routes=routes,
        middleware=middleware,
        lifespan=lifespan,
        exception_handlers={NotFound: not_found, TetherError: refused},
    )
    application.state.agents = served
    application.state.live = server.live  # a server stopping: `await ....live.close()`
    return application


def _checked_agents(agents: object) -> dict[str, Agent[Any] | DurableAgent[Any]]:
    durable = _durable_type()
    if isinstance(agents, Agent) or (durable is not None and isinstance(agents, durable)):
        agents = {"agent": agents}
    if not isinstance(agents, Mapping) or not agents:
        raise ConfigurationError(
            f"app() serves an Agent or a mapping of names to agents, got {agents!r}"
        )
    served: dict[str, Agent[Any] | DurableAgent[Any]] = {}
    for name, agent in agents.items():
        if not isinstance(name, str) or not _NAME.fullmatch(name):
            raise ConfigurationError(
                f"an agent's name is letters, digits, '_', '.' and '-', got {name!r}"
            )
        if durable is not None and isinstance(agent, durable):
            served[name] = agent
            continue
        if not isinstance(agent, Agent):
            raise ConfigurationError(
                f"agents[{name!r}] must be an Agent or a DurableAgent, got {agent!r}"
            )
        if agent.checkpointer is None:
            raise ConfigurationError(
                f"agent {name!r} has no checkpointer: served runs live in threads, so create "
                "it with checkpointer=... (such as 'sqlite:///.tether/runs.db')"
            )
        served[name] = agent
    return served


def _durable_type() -> type[DurableAgent[Any]] | None:
    """DurableAgent, if its module was imported (as it is wherever one was made)."""
    module = sys.modules.get("tether.durable.dbos")
    return getattr(module, "DurableAgent", None)
