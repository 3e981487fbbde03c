"""The routes' handlers: each request read, checked and answered, its run started or
followed. Starlette (the serve extra) is imported inside the handlers, as in `app()`:
importing `tether.serve` needs only the AG-UI protocol's package."""

from __future__ import annotations

import asyncio
import contextlib
import re
import uuid
from collections.abc import AsyncIterator, Mapping
from importlib import resources
from typing import TYPE_CHECKING, Any

from ag_ui.core import RunAgentInput
from pydantic import ValidationError

from tether.agent import Agent, checked_run_thread_id
from tether.checkpoint.journal import read_thread
from tether.errors import AlreadyDecidedError, ConfigurationError, TetherError, ThreadBusyError
from tether.serve import _agui, _tools
from tether.serve._decisions import OneAtATime
from tether.serve._live import LiveRuns
from tether.serve._runs import (
    DECIDE_WAIT,
    cancel_durable,
    durable_events,
    durable_following,
    given_decisions,
    prompt_of,
    run_events,
)
from tether.serve._views import first_prompt, thread_json, thread_status

if TYPE_CHECKING:
    from starlette.requests import Request
    from starlette.responses import Response

    from tether.checkpoint.journal import Thread
    from tether.durable.dbos import DurableAgent
    from tether.models.base import ToolSpec

__all__ = ["NotFound", "Server", "not_found", "refused"]

_ABANDON_WAIT = 30.0  # seconds a stopped durable run's worker has to finish its step
_MOST_BODY = 8 * 1024 * 1024  # bytes of a run request (a chat's history and tools fit)
_BODY_SECONDS = 30.0  # seconds a run request's body may take to arrive
_PARSED_ON_LOOP = 256 * 1024  # bytes of a run request read on the event loop; more, off it
_RUN_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.:@-]{0,127}")
"""A client's `runId` (it is part of every event id streamed and kept): as a thread id."""
_PAGE_POLICY = (
    "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; "
    "img-src 'self' data:; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
)


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


class NotFound(LookupError):
    """Answered 404 with its message."""


async def not_found(request: Request, exc: Exception) -> Response:
    """A `NotFound` as its 404 answer."""
    return _error(404, str(exc))


async def refused(request: Request, exc: Exception) -> Response:
    """A tether error no route turned into an answer (a database that cannot be read)."""
    return _refusal(exc)


class Server:
    """The routes' handlers, over the agents served by name, their live runs, and one
    decision at a time per thread."""

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
            raise NotFound(f"no agent {name!r} is served here")
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
                    "status": thread_status(thread, info.thread_id in running),
                    "task": first_prompt(thread),
                    "cost_usd": thread.total_cost_usd,
                }
            )
        return JSONResponse({"threads": rows})

    async def thread(self, request: Request) -> Response:
        from starlette.responses import JSONResponse

        name, agent = self._agent(request)
        thread_id = request.path_params["thread"]
        thread = await read_thread(agent._checkpointer(), thread_id)
        if not thread.exists:
            return _error(404, f"there is no thread {thread_id!r}")
        live = self.live.get(name, thread_id) is not None
        return JSONResponse(await thread_json(agent, thread, live))

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
                events = await durable_following(durable, thread_id)
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
                await cancel_durable(durable, thread_id)
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
                        decided = given_decisions(await _thread(agent, given.thread_id), given)
                    except TetherError as exc:
                        return _refusal(exc)
                    if decided:  # at once, unless that decision was the last
                        await live.ended(DECIDE_WAIT)
                return await self._start(name, agent, given, tools)
        if prompt_of(given) is not None:
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
                work = await durable_events(durable, given)
            else:
                work = run_events(agent, thread, given, tools)
            recorded = _agui.corrected(before, work.edits) if work.edits else None
            if recorded is not None:  # a watcher sees the calls as decisions changed them
                before = list(recorded.messages)
            prompt = prompt_of(given)
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

    return await read_thread(agent._checkpointer(), thread_id)
