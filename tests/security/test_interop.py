"""Parts from elsewhere (MCP servers, LangChain tools) under tether's guarantees: a call
that may have run on a server is never sent again, and an argument the application
supplies is never the model's to set."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated

import pytest
from langchain_core.tools import InjectedToolArg
from langchain_core.tools import tool as lc_tool

from tests.conftest import by_server_id
from tests.models.test_langchain import ScriptedChat, call_reply, text_reply
from tests.test_mcp import SERVER, HTTPServer, killing
from tether import ConfigurationError, create_agent
from tether.mcp import MCPServer
from tether.messages import ToolCall
from tether.models.langchain import LangChainModel, tools_from_langchain


@pytest.mark.parametrize("transport", ["stdio", "http"])
def test_a_call_the_server_may_have_run_is_not_sent_again(transport: str, tmp_path: Path) -> None:
    """The server dies after the tool ran, before it answered: reconnecting may happen,
    but only for the next call; this one is an error, and ran once."""
    tally = tmp_path / "tally"
    http = HTTPServer()
    if transport == "http":
        http.start()
        server = MCPServer("demo", url=http.url, timeout_seconds=10)
    else:
        server = MCPServer("demo", command=sys.executable, args=[SERVER])
    turns: list[list[ToolCall] | str] = [
        [ToolCall("demo_tally_then_crash", {"path": str(tally)}, id="t")],
        [ToolCall("demo_add", {"a": 1, "b": 1}, id="next")],
        "done",
    ]

    def restart(texts: list[str]) -> None:  # the next call finds a new server
        if transport == "http":
            http.kill()
            http.start()

    try:
        result = create_agent(killing(turns, 1, restart), mcp_servers=[server]).run("Tally.")
    finally:
        http.kill()
    answers = by_server_id(result.messages)
    assert answers["t"].is_error
    assert tally.read_text() == "ran\n"  # once
    assert answers["next"].text == "2"  # the next call reconnected


async def test_injected_arguments_come_from_the_application_never_the_model() -> None:
    @lc_tool
    def orders(
        status: str,
        user_id: Annotated[str, InjectedToolArg],
        limit: Annotated[int, InjectedToolArg] = 3,
    ) -> str:
        """List the user's orders."""
        return f"{user_id}: {limit} {status} orders"

    with pytest.raises(ConfigurationError, match=r"'orders' needs user_id from the application"):
        tools_from_langchain([orders], inject={"limit": 1})
    (fixed,) = tools_from_langchain([orders], inject={"user_id": "u1"})
    assert set(fixed.parameters["properties"]) == {"status"}  # the model is not asked
    (per_run,) = tools_from_langchain(
        [orders], inject=lambda context: {"user_id": context.deps, "limit": 9}
    )
    forged = '{"status": "open", "user_id": "admin", "limit": 1000}'  # the model tries
    replies = [call_reply(("c1", "orders", forged)), text_reply("done")]
    first = create_agent(LangChainModel(ScriptedChat(replies=list(replies))), tools=[fixed])
    second = create_agent(LangChainModel(ScriptedChat(replies=list(replies))), tools=[per_run])
    texts = [
        (await agent.arun("Orders?", deps="u2")).messages[2].results[0].text  # type: ignore[union-attr]
        for agent in (first, second)
    ]
    assert texts == ["u1: 3 open orders", "u2: 9 open orders"]
