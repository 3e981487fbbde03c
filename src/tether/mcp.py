"""Tools from MCP servers (extra `tether[mcp]`, the official `mcp` SDK, version 2).

    agent = create_agent(model, mcp_servers=[
        MCPServer("files", command="python", args=["my_server.py"]),     # stdio
        MCPServer("search", url="http://127.0.0.1:8000/mcp"),            # streamable HTTP
    ])

`create_agent` lists each server's tools once, so the model sees them from the first
request; their names get the server's prefix ("files_read"). A run connects to a server
at its first call and disconnects when it ends; inside `async with agent:` runs share
the block's connections instead. A call that times out, fails, or finds the server gone
is a tool error; the run goes on. A connection found gone is made again, and a call the
server refused unseen is sent once more (a restarted HTTP server answering the old session
with 404, or 400 about the session, as several do, refused it unseen).

Nothing waits on a server for ever: each request gets `timeout_seconds`, and starting
it (up to its answer to `initialize`) `start_timeout_seconds`. A call waiting while
another call connects takes that attempt's outcome instead of trying again, so calls
queued behind a server that never answers do not wait one start each.

The servers' resources and prompts are for the user's code: `MCPServer.read_resource`,
`get_prompt` and their listings. A resource of a text type sent as bytes (text/plain,
JSON, XML, ...) is read as text, for the model and for the user's code alike.

Servers are told the agent's roots (the host directories of its file backend that it
may list; see `tether._mcp_client`), and a server's progress notifications during a call
become `ToolProgress` events of that call, at most ten a second.

During a tool call a server may ask for a reply from the agent's model (sampling: that
agent's model answers, counted in the run's usage, cost and budget and refused once it is
spent; `MCPServer(sampling=False)` refuses it) or ask the person a question (elicitation:
the run stops with the question in `RunResult.interrupts`, and once it is answered with
`Answer(...)` on `resume` the call is made again and the server's same question gets the
answer; a run without a thread declines the question and tells the model).
`MCPServer(elicitation=False)` declares no questions; a function answers them in-process
instead. See `tether._mcp_asks` for the bounds.

This module is the capability, `MCPTools`; `MCPServer` lives in `tether._mcp_server`,
the connections tool calls share in `tether._mcp_link`, and the reading of what servers
send in `tether._mcp_content`.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Sequence
from typing import Any

import pydantic

from tether._mcp_asks import Running
from tether._mcp_client import Progress, Root
from tether._mcp_content import tool_result_parts
from tether._mcp_link import Link, call_tool
from tether._mcp_server import MCPServer
from tether.capabilities.base import Capability
from tether.errors import ConfigurationError, MCPServerError, ToolError
from tether.messages import TextPart
from tether.state import RunState, ToolContext
from tether.tools.tool import OPEN_CONTEXT, Tool

__all__ = ["MCPServer", "MCPTools"]

_SESSIONS = "mcp_sessions"


class _Arguments(pydantic.BaseModel):
    """Any JSON object: the MCP server checks its own arguments."""

    model_config = pydantic.ConfigDict(extra="allow")


class MCPTools(Capability):
    """The tools of `servers`, listed once. A run connects at its first call to a server and
    disconnects when it ends, unless an `async with agent:` block holds the connections.
    `roots` are the directories the servers are told the agent works in."""

    def __init__(self, servers: Sequence[MCPServer], *, roots: Sequence[Root] = ()) -> None:
        self.servers = {s.name: s for s in servers}
        self.roots = tuple(roots)
        self._held: dict[str, Link] | None = None
        self._held_loop: asyncio.AbstractEventLoop | None = None
        self._holders = 0
        if len(self.servers) != len(servers):
            raise ConfigurationError("two MCP servers have the same name")
        from tether._sync import run_sync

        self._tools: list[Tool] = []
        for server in servers:
            try:
                listed = run_sync(server.list_tools)
            except MCPServerError as exc:
                raise ConfigurationError(str(exc)) from exc
            # A tool that must run as a task (MCP's "taskSupport": "required") cannot be
            # called plainly, and tether does not run MCP tasks: it is left out.
            self._tools += [self._tool(server, t) for t in listed if not _task_only(t)]

    def tools(self) -> Sequence[Tool]:
        return self._tools

    async def on_agent_open(self) -> None:
        if self._held is None:
            self._held = {name: Link(s, self.roots) for name, s in self.servers.items()}
            self._held_loop = asyncio.get_running_loop()
        self._holders += 1

    async def on_agent_close(self) -> None:
        self._holders -= 1
        if self._holders == 0 and self._held is not None:
            held, self._held = self._held, None
            for link in held.values():
                await link.close()

    async def on_run_start(self, state: RunState) -> None:
        if self._held is not None and self._held_loop is asyncio.get_running_loop():
            state.data[_SESSIONS] = self._held  # the agent's, kept when the run ends
        else:
            state.data[_SESSIONS] = {n: Link(s, self.roots) for n, s in self.servers.items()}

    async def on_run_end(self, state: RunState) -> None:
        links = state.data.pop(_SESSIONS, {})
        if links is not self._held:  # the run's own (closing twice does nothing)
            for link in links.values():
                await link.close()

    def _tool(self, server: MCPServer, spec: Any) -> Tool:
        remote = spec.name

        async def call(**arguments: Any) -> Any:
            context: ToolContext = arguments.pop(OPEN_CONTEXT)
            link: Link | None = context.state.data.get(_SESSIONS, {}).get(server.name)
            if link is None:
                raise ToolError(f"MCP server {server.name!r} is not available: closed")
            progress = Progress(context)
            running = Running(context)
            try:
                result = await call_tool(link, remote, arguments, progress, running)
            except ToolError as exc:  # what tether declined is told all the same
                raise ToolError(" ".join([str(exc), *running.notes])) from exc
            finally:
                progress.close()  # its last word goes out before the call's end
                await running.end()  # no sample runs past it, nor is charged after
            parts = await tool_result_parts(getattr(result, "content", None) or [])
            notes = [TextPart(note) for note in running.notes]  # what tether declined
            if getattr(result, "is_error", False):
                raise ToolError(
                    " ".join(p.text for p in [*parts, *notes] if isinstance(p, TextPart))
                    or "failed"
                )
            return [*parts, *notes] or "(no output)"

        name = re.sub(r"[^A-Za-z0-9_-]", "_", server.tool_prefix + remote)[:64]
        schema = dict(spec.input_schema or {"type": "object"})
        schema.pop("title", None)
        return Tool(
            name=name,
            description=spec.description or remote,
            args_model=_Arguments,
            function=call,
            context_param=OPEN_CONTEXT,
            parameters=schema,
        )


def _task_only(spec: Any) -> bool:
    execution = getattr(spec, "execution", None)
    return getattr(execution, "task_support", None) == "required"
