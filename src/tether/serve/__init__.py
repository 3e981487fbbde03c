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
  answer the interrupts a run stopped at (`payload` is a decision,
  `{"kind": "approve" | "edit" | "reject" | "respond", "args"?, "message"?}`); tool
  messages at the end of `messages` give the results of the frontend calls it stopped
  at; with none of these, the thread's unfinished run goes on from its last step. A run
  goes on when its client leaves. `tools` are frontend tools: the model may call them
  beside the agent's own, and the client runs them (see `_tools`). A resumed run does
  not announce again the calls the client's `messages` hold; when a decision changed
  one's arguments, a MESSAGES_SNAPSHOT of the client's own messages, with them put
  right, follows RUN_STARTED.
- `GET /threads`, `GET|DELETE /threads/{id}`: the threads, one in full, deleting one.
- `GET /threads/{id}/events`: the live run of the thread, from its first event.
- `POST /threads/{id}/stop`: end the thread's run where it stands (live or waiting).
"""

from __future__ import annotations

import asyncio
import contextlib
import hmac
import os
import re
import secrets
import sys
import uuid
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from importlib import resources
from typing import TYPE_CHECKING, Any

from pydantic import ValidationError
from pydantic_core import to_jsonable_python

from tether.agent import Agent, checked_run_thread_id
from tether.approval import ApprovalRequest, Decision, Edit
from tether.errors import AlreadyDecidedError, ConfigurationError, TetherError, ThreadBusyError
from tether.serve import _agui, _tools
from tether.serve._decisions import OneAtATime, decisions_of
from tether.serve._live import LiveRuns

if TYPE_CHECKING:
    from starlette.applications import Starlette
    from starlette.requests import Request
    from starlette.responses import Response

    from tether.checkpoint.journal import Thread
    from tether.durable.dbos import DurableAgent
    from tether.events import Event
    from tether.models.base import ToolSpec

__all__ = ["TOKEN_VARIABLE", "app", "new_token"]

TOKEN_VARIABLE = "TETHER_SERVE_TOKEN"
LOOPBACK_HOSTS = ("127.0.0.1", "localhost", "::1", "[::1]")
_ABANDON_WAIT = 30.0  # seconds a stopped durable run's worker has to finish its step
_DECIDE_WAIT = 10.0  # seconds a decision waits for the one before it, or for the lease
_MOST_BODY = 8 * 1024 * 1024  # bytes of a run request (a chat's history and tools fit)
_BODY_SECONDS = 30.0  # seconds a run request's body may take to arrive
_PARSED_ON_LOOP = 256 * 1024  # bytes of a run request read on the event loop; more, off it
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,63}")
_RUN_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.:@-]{0,127}")
"""A client's `runId` (it is part of every event id streamed and kept): as a thread id."""
_PAGE_POLICY = (
    "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; "
    "img-src 'self' data:; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
)


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
    server = _Server(served)
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
    middleware.append(Middleware(_TokenGuard, token=secret))
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
        exception_handlers={_NotFound: _not_found, TetherError: _refused},
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


class _TokenGuard:
    """Refuses requests without the bearer token (compared in constant time), but for
    the page and its static files, which hold nothing of the agents'."""

    def __init__(self, app: Any, *, token: str) -> None:
        self.app = app
        self.expected = f"Bearer {token}".encode()

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] == "websocket":  # none is served: refused before anything reads it
            await send({"type": "websocket.close", "code": 1008})
            return
        if scope["type"] == "http" and self._refused(scope):
            from starlette.responses import JSONResponse

            response = JSONResponse(
                {"error": "a valid token is needed: Authorization: Bearer <token>"},
                status_code=401,
                headers={"WWW-Authenticate": "Bearer"},
            )
            await response(scope, receive, send)
            return
        await self.app(scope, receive, send)

    def _refused(self, scope: Any) -> bool:
        if scope["path"] == "/" or scope["path"].startswith("/static/"):
            return False  # the page and its files hold nothing of the agents'
        return scope["method"] != "OPTIONS" and not self._allowed(scope)

    def _allowed(self, scope: Any) -> bool:
        given = b""
        for name, value in scope["headers"]:
            if name == b"authorization":
                given = value
        return hmac.compare_digest(given, self.expected)


def _error(status: int, message: str) -> Response:
    from starlette.responses import JSONResponse

    return JSONResponse({"error": message}, status_code=status)


def _refusal(exc: Exception) -> Response:
    """An error that stopped a request, as its HTTP answer."""
    if isinstance(exc, ThreadBusyError | AlreadyDecidedError):
        return _error(409, str(exc))
    if isinstance(exc, ConfigurationError):
        return _error(400, str(exc))
    return _error(500, f"{type(exc).__name__}: {exc}")


class _NotFound(LookupError):
    """Answered 404 with its message."""


async def _not_found(request: Request, exc: Exception) -> Response:
    return _error(404, str(exc))


async def _refused(request: Request, exc: Exception) -> Response:
    """A tether error no route turned into an answer (a database that cannot be read)."""
    return _refusal(exc)


class _Server:
    def __init__(self, agents: Mapping[str, Agent[Any] | DurableAgent[Any]]) -> None:
        self.agents_by_name: dict[str, Agent[Any]] = {}
        self.durables: dict[str, DurableAgent[Any]] = {}
        for name, agent in agents.items():
            if isinstance(agent, Agent):
                self.agents_by_name[name] = agent
            else:  # its runs happen on DBOS workers; its threads are read as any others
                self.agents_by_name[name] = agent.agent
                self.durables[name] = agent
        self.live = LiveRuns()
        self.deciding = OneAtATime()

    def _agent(self, request: Request) -> tuple[str, Agent[Any]]:
        name = request.path_params["agent"]
        agent = self.agents_by_name.get(name)
        if agent is None:
            raise _NotFound(f"no agent {name!r} is served here")
        return name, agent

    async def page(self, request: Request) -> Response:
        from starlette.responses import HTMLResponse

        html = (resources.files("tether.serve") / "static" / "index.html").read_text()
        return HTMLResponse(html, headers={"Content-Security-Policy": _PAGE_POLICY})

    async def agents(self, request: Request) -> Response:
        from starlette.responses import JSONResponse

        listed = [
            {"name": name, "model": agent.model.name, "running": sorted(self.live.running(name))}
            for name, agent in self.agents_by_name.items()
        ]
        return JSONResponse({"agents": listed})

    async def threads(self, request: Request) -> Response:
        from starlette.responses import JSONResponse

        from tether.checkpoint.journal import read_thread

        name, agent = self._agent(request)
        running = self.live.running(name)
        checkpointer = agent._checkpointer()
        rows = []
        for info in (await checkpointer.threads())[:200]:
            thread = await read_thread(checkpointer, info.thread_id)
            rows.append(
                {
                    "thread_id": info.thread_id,
                    "created": info.created,
                    "updated": info.updated,
                    "status": _status(thread, info.thread_id in running),
                    "task": _first_prompt(thread),
                    "cost_usd": thread.total_cost_usd,
                }
            )
        return JSONResponse({"threads": rows})

    async def thread(self, request: Request) -> Response:
        from starlette.responses import JSONResponse

        from tether.checkpoint.journal import read_thread

        name, agent = self._agent(request)
        thread_id = request.path_params["thread"]
        thread = await read_thread(agent._checkpointer(), thread_id)
        if not thread.exists:
            return _error(404, f"there is no thread {thread_id!r}")
        live = self.live.get(name, thread_id) is not None
        return JSONResponse(await _thread_json(agent, thread, live))

    async def delete_thread(self, request: Request) -> Response:
        from starlette.responses import JSONResponse

        name, agent = self._agent(request)
        thread_id = request.path_params["thread"]
        if self.live.get(name, thread_id) is not None:
            return _error(409, f"thread {thread_id!r} has a run going on; stop it first")
        try:
            existed = await agent.adelete_thread(thread_id)
        except TetherError as exc:
            return _refusal(exc)
        if not existed:
            return _error(404, f"there is no thread {thread_id!r}")
        return JSONResponse({"deleted": thread_id})

    async def events(self, request: Request) -> Response:
        name, agent = self._agent(request)
        thread_id = request.path_params["thread"]
        live = self.live.get(name, thread_id)
        durable = self.durables.get(name)
        if live is None and durable is not None:  # a worker's run, enqueued anywhere
            with contextlib.suppress(TetherError):
                events = await _durable_following(durable, thread_id)
                before = _agui.messages(await agent.ahistory(thread_id))
                watch = _agui.Translator(thread_id, f"watch_{uuid.uuid4().hex[:12]}")
                live = await self.live.start(
                    name, agent, thread_id, watch, events=events, before=before
                )
        if live is None:
            return _error(404, f"thread {thread_id!r} has no run going on here")
        return _stream(live.follow(history=True))

    async def stop(self, request: Request) -> Response:
        from starlette.responses import JSONResponse

        name, agent = self._agent(request)
        thread_id = request.path_params["thread"]
        durable = self.durables.get(name)
        if durable is not None:
            try:
                await _cancel_durable(durable, thread_id)
            except TetherError as exc:
                return _refusal(exc)
        live = self.live.get(name, thread_id)
        if live is not None:
            await live.stop()
            return JSONResponse({"stopped": thread_id})
        try:  # a worker ends the step it is in before letting the thread go
            abandoned = await agent.aabandon(thread_id, wait=_ABANDON_WAIT if durable else 0)
        except TetherError as exc:
            return _refusal(exc)
        if not abandoned:
            return _error(409, f"thread {thread_id!r} has no run to stop")
        return JSONResponse({"stopped": thread_id})

    async def run(self, request: Request) -> Response:
        from starlette.responses import Response

        name, agent = self._agent(request)
        given = await _run_input(request)
        if isinstance(given, Response):  # refused
            return given
        try:
            tools = _tools.client_tools(given.tools or ())
            if tools and name in self.durables:
                raise ConfigurationError(
                    "frontend tools are not taken by a durable agent: its runs go on in "
                    "workers that cannot reach the client; send the run without `tools`"
                )
        except ConfigurationError as exc:
            return _refusal(exc)
        if given.resume or _tools.trailing(given.messages):
            # one decision at a time here, each reading what the last left
            async with self.deciding.turn(name, given.thread_id):
                live = self.live.get(name, given.thread_id)
                if live is not None:  # the stream of the decision before this one
                    try:  # what is not waiting is refused at once, without waiting
                        decided = _decisions(await _thread(agent, given.thread_id), given)
                    except TetherError as exc:
                        return _refusal(exc)
                    if decided:  # at once, unless that decision was the last
                        await live.ended(_DECIDE_WAIT)
                return await self._start(name, agent, given, tools)
        if _prompt(given) is not None:
            try:
                checked_run_thread_id(given.thread_id)
            except ConfigurationError as exc:
                return _refusal(exc)
        return await self._start(name, agent, given, tools)

    async def _start(
        self, name: str, agent: Agent[Any], given: Any, tools: tuple[ToolSpec, ...]
    ) -> Response:
        """Start what `given` asks on its thread as the thread's live run, and stream it."""
        thread_id = given.thread_id
        run_id = given.run_id or f"run_{uuid.uuid4().hex[:16]}"
        if self.live.get(name, thread_id) is not None:
            return _error(409, f"thread {thread_id!r} has a run going on; watch it or stop it")
        durable = self.durables.get(name)
        try:
            thread = await _thread(agent, thread_id)
            before = _agui.messages(thread.messages)
            if durable is not None:
                work = await _durable_events(durable, given)
            else:
                work = _run_events(agent, thread, given, tools)
            recorded = _agui.corrected(before, work.edits) if work.edits else None
            if recorded is not None:  # a watcher sees the calls as decisions changed them
                before = list(recorded.messages)
            prompt = _prompt(given)
            if prompt is not None:  # a watcher sees the message the run answers
                before.append(_agui.AguiUser(id=f"m{len(before)}", content=prompt))
            snapshot = _agui.corrected(given.messages, work.edits) if work.edits else None
            translator = _agui.Translator(thread_id, run_id)  # what every follower sees
            live = await self.live.start(
                name, agent, thread_id, translator, events=work.events, before=before
            )
        except (TetherError, ValueError) as exc:
            return _refusal(exc)
        # what this client holds shapes its own stream only: followers get the record's
        return _stream(
            live.follow(
                known_calls=_agui.call_ids(given.messages),
                known_results=_agui.answered_ids(given.messages),
                opening=[snapshot] if snapshot is not None else [],
            )
        )


async def _run_input(request: Request) -> Any:
    """The request's AG-UI RunAgentInput, or the answer (a Response) refusing it: too
    long, too slow to arrive, not one, or with a `runId` that is no short safe name.
    A long one is read off the event loop."""
    from ag_ui.core import RunAgentInput

    declared = request.headers.get("content-length", "")
    too_long = _error(413, f"a run request is {_MOST_BODY} bytes at most")
    if declared.isdigit() and int(declared) > _MOST_BODY:
        return too_long
    body = bytearray()
    try:
        async with asyncio.timeout(_BODY_SECONDS):  # a body trickling in holds nothing open
            async for chunk in request.stream():
                body += chunk
                if len(body) > _MOST_BODY:
                    return too_long
    except TimeoutError:
        return _error(408, f"a run request's body must arrive within {_BODY_SECONDS:g} seconds")
    try:
        if len(body) > _PARSED_ON_LOOP:
            given = await asyncio.to_thread(RunAgentInput.model_validate_json, bytes(body))
        else:
            given = RunAgentInput.model_validate_json(bytes(body))
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"])
        return _error(400, f"not an AG-UI RunAgentInput: {where}: {first['msg']}")
    if given.run_id and not _RUN_ID.fullmatch(given.run_id):  # none: tether makes one
        shown = repr(given.run_id[:80]) + ("..." if len(given.run_id) > 80 else "")
        return _error(
            400,
            "a runId is 1 to 128 letters (a-z, A-Z), digits and '_', '.', ':', '@', '-', "
            f"starting with a letter or digit; got {shown} ({len(given.run_id)} characters)",
        )
    return given


def _stream(chunks: AsyncIterator[str]) -> Response:
    from starlette.responses import StreamingResponse

    headers = {"Cache-Control": "no-store", "X-Accel-Buffering": "no"}
    return StreamingResponse(chunks, media_type="text/event-stream", headers=headers)


async def _thread(agent: Agent[Any], thread_id: str) -> Thread:
    from tether.checkpoint.journal import read_thread

    return await read_thread(agent._checkpointer(), thread_id)


@dataclass(frozen=True)
class _Work:
    """What a run request starts: a function giving the run's tether events, and the
    arguments of the calls a decision changed, by call id (the client holds others)."""

    events: Callable[[], AsyncIterator[Event]]
    edits: dict[str, Any] = field(default_factory=dict)


def _decisions(thread: Thread, given: Any) -> dict[str, Decision]:
    """The decisions a run request gives by call id: its resume entries' and the results
    its tool messages give frontend calls."""
    chosen = decisions_of(thread, given.resume) if given.resume else {}
    for call_id, answer in _tools.answers(thread, given.messages).items():
        if call_id in chosen:
            raise ConfigurationError(
                f"call {call_id!r} is answered by a resume entry and a tool message"
            )
        chosen[call_id] = answer
    return chosen


def _edits(thread: Thread, decisions: Mapping[str, Decision]) -> dict[str, Any]:
    """The arguments decisions changed, these and those the thread holds already."""
    edits = {k: d["args"] for k, d in thread.decisions.items() if d.get("kind") == "edit"}
    edits.update((k, dict(d.args)) for k, d in decisions.items() if isinstance(d, Edit))
    return edits


def _run_events(
    agent: Agent[Any], thread: Thread, given: Any, tools: tuple[ToolSpec, ...]
) -> _Work:
    """What to run for an AG-UI input on `thread` (as it is now)."""
    thread_id = given.thread_id
    decisions = _decisions(thread, given)
    if decisions:
        return _Work(
            lambda: agent.stream_resume(
                thread_id, decisions=decisions, wait=_DECIDE_WAIT, client_tools=tools
            ),
            _edits(thread, decisions),
        )
    prompt = _prompt(given)
    if prompt is not None:
        _refuse_while_waiting(thread)
        return _Work(lambda: agent.stream(prompt, thread_id=thread_id, client_tools=tools))
    return _Work(lambda: agent.stream_resume(thread_id, client_tools=tools))


def _refuse_while_waiting(thread: Thread) -> None:
    """A new message on a thread whose run waits is refused, saying what it waits for."""
    waiting = thread.requests
    if not waiting:
        return
    pending = [r.call_id for r in waiting if r.client_tool]
    asked = [_agui.interrupt_id(r) for r in waiting if not r.client_tool]
    needs = []
    if pending:
        needs.append(f"tool messages with the results of frontend calls {pending}")
    if asked:
        needs.append(f"resume entries deciding interrupts {asked}")
    raise ConfigurationError(
        f"thread {thread.thread_id!r} waits for {' and '.join(needs)}; send those, or stop "
        "the thread's run (POST .../stop) before a new message"
    )


def _prompt(given: Any) -> str | None:
    """The text of the input's last message when it is the user's (a new run's prompt)."""
    last = given.messages[-1] if given.messages and not given.resume else None
    if last is None or last.role != "user":
        return None
    return _text_of(last.content)


async def _durable_events(durable: DurableAgent[Any], given: Any) -> _Work:
    """For a durable agent: queue the run (or send the decisions) for a worker, and a
    function giving its events, read from the thread as the worker records it."""
    from tether.serve._durable import Cursor, followed

    thread_id = given.thread_id
    thread = await durable._client.thread(thread_id)
    cursor = Cursor.at(thread)
    decisions = _decisions(thread, given)
    if decisions:
        handle = await asyncio.to_thread(durable.handle, thread_id)
        await handle.adecide(decisions)
    else:
        prompt = _prompt(given)
        if prompt is None:
            raise ConfigurationError(
                "a durable run that was cut short goes on by itself when its worker restarts; "
                "send a message or decisions"
            )
        handle = await durable.aenqueue(prompt, thread_id=thread_id)
    return _Work(lambda: followed(durable, handle, cursor), _edits(thread, decisions))


async def _durable_following(durable: DurableAgent[Any], thread_id: str) -> Any:
    """The events of the thread's durable run from now on, if it is queued or running."""
    from tether.serve._durable import Cursor, followed

    handle = await asyncio.to_thread(durable.handle, thread_id)
    status = await handle.astatus()
    if status.state not in ("queued", "running"):
        raise ConfigurationError(f"the run of thread {thread_id!r} is {status.state}")
    cursor = Cursor.at(await durable._client.thread(thread_id))
    return lambda: followed(durable, handle, cursor)


async def _cancel_durable(durable: DurableAgent[Any], thread_id: str) -> None:
    """Cancel the thread's DBOS workflow, so no worker takes the run on again."""
    handle = await asyncio.to_thread(durable.handle, thread_id)
    client = durable._client.client
    await asyncio.to_thread(client.cancel_workflow, handle.workflow_id)


def _text_of(content: Any) -> str:
    if isinstance(content, str):
        text = content
    else:
        kinds = {getattr(part, "type", None) for part in content}
        if kinds - {"text"}:
            raise ConfigurationError("only text is taken in a user message here")
        text = "\n".join(part.text for part in content)
    if not text.strip():
        raise ConfigurationError("the user message is empty")
    return text


def _status(thread: Thread, live: bool) -> str:
    if live:
        return "running"
    if thread.interrupts and all(r.client_tool for r in thread.requests):
        return "waiting for tool results"
    if thread.interrupts:
        return "waiting for approval"
    if thread.stop_reason is None:
        return "stopped (resumable)"
    return thread.stop_reason


def _first_prompt(thread: Thread) -> str:
    from tether.messages import UserMessage

    first = next((m.text for m in thread.messages if isinstance(m, UserMessage)), "")
    return " ".join(first.split())[:200]


async def _thread_json(agent: Agent[Any], thread: Thread, live: bool) -> dict[str, Any]:
    """A thread as the page shows it."""
    waiting, decided = await _cards(agent, thread)
    return {
        "thread_id": thread.thread_id,
        "status": _status(thread, live),
        "running": live,
        "messages": _dumped(_agui.messages(thread.messages)),
        "todos": to_jsonable_python(thread.todos),
        "usage": to_jsonable_python(thread.total_usage),
        "cost_usd": thread.total_cost_usd,
        "output": to_jsonable_python(thread.output),
        "metadata": thread.metadata,
        "interrupts": waiting,
        "decided": decided,
        "files": _changes(agent, thread),
        "subagents": _subagents(thread),
    }


async def _cards(agent: Agent[Any], thread: Thread) -> tuple[list[Any], list[Any]]:
    """The approval cards of the calls the thread's run stopped at, each with its place
    among them (`metadata.position`): those still waiting, and those decided already
    (with their `decision`), which run once every one is decided."""
    waiting: list[Any] = []
    decided: list[Any] = []
    open_ids = {r.call_id for r in thread.requests}
    for position, request in enumerate(thread.asked_requests if open_ids else ()):
        shown = _agui.interrupt(request).model_dump(by_alias=True, mode="json")
        shown["metadata"]["diff"] = await _pending_diff(agent, thread, request)
        shown["metadata"]["position"] = position
        if request.call_id in open_ids:
            waiting.append(shown)
        elif request.call_id in thread.decisions:
            decided.append({**shown, "decision": thread.decisions[request.call_id]["kind"]})
    return waiting, decided


def _dumped(models: Sequence[Any]) -> list[Any]:
    return [m.model_dump(by_alias=True, mode="json") for m in models]


def _subagents(thread: Thread) -> list[dict[str, Any]]:
    """The subagent runs of the thread's last run, by the `task` call that made each."""
    return [
        {
            "call_id": call_id,
            "subagent_run_id": _agui.subagent_id(sub.path),
            "status": _status(sub, False),
            "messages": _dumped(_agui.messages(sub.messages)),
            "subagents": _subagents(sub),
        }
        for call_id, sub in thread.subagents.items()
    ]


def _changes(agent: Agent[Any], thread: Thread) -> list[dict[str, Any]]:
    """The files the thread's file calls changed (subagents' included), oldest first.
    A main-agent call is one of the agent's own file tools only when the agent has that
    tool: else it was a frontend tool of that name (the client ran it, nothing here)."""
    from tether.messages import AssistantMessage, ToolResultMessage

    own = set(agent._plan.tools)
    done: dict[str, bool] = {}
    calls = []
    for source in [thread, *_all_subagents(thread)]:
        for message in source.messages:
            if isinstance(message, ToolResultMessage):
                done.update((r.call_id, not r.is_error) for r in message.results)
            elif isinstance(message, AssistantMessage):  # frontend tools are the main run's
                calls += [c for c in message.tool_calls if source is not thread or c.name in own]
    changes = []
    for call in calls:
        change = _agui.change_of(call) if done.get(call.id) else None
        if change is not None:
            changes.append({**change, "call_id": call.id})
    return changes


def _all_subagents(thread: Thread) -> list[Thread]:
    found = []
    for sub in thread.subagents.values():
        found += [sub, *_all_subagents(sub)]
    return found


async def _pending_diff(agent: Agent[Any], thread: Thread, request: ApprovalRequest) -> str | None:
    """The change a waiting file call would make, the file read as the agent that asked
    would read it (its rules, and those of every agent above it): from the thread's own
    files, else through its backend. Nothing is shown of a file it may not read."""
    from tether.backends.errors import BackendError
    from tether.backends.permissions import PermissionedBackend
    from tether.backends.state import StateBackend
    from tether.capabilities.subagents import files_of
    from tether.tools.files import change_diff

    if request.client_tool:  # the client's own tool, whatever its name: no file of ours
        return None
    args = request.args
    view = files_of(agent, request.path)
    if view is None or not isinstance(args, Mapping) or not isinstance(args.get("file_path"), str):
        return None
    path = args["file_path"]
    try:
        inner = view
        while isinstance(inner, PermissionedBackend):  # the rules, whatever holds the file
            inner.check("read", path)
            inner = inner.backend
        if path in thread.files:
            before = thread.files[path][0].decode("utf-8", "replace")
        elif isinstance(inner, StateBackend) or await view.stat(path) is None:
            before = ""
        else:
            before = (await view.read(path)).decode("utf-8", "replace")
    except (BackendError, OSError):
        return None
    return await asyncio.to_thread(change_diff, request.tool, args, before)
