"""A LangChain tool's arguments reach it under their own names, whatever they are: no name
collides with one of tether's, and an argument the application supplies
(`InjectedToolArg`) stays the application's even when it has such a name and the model
sends a value for it."""

from __future__ import annotations

from typing import Annotated

from langchain_core.tools import InjectedToolArg
from langchain_core.tools import tool as lc_tool

from tests.models.test_langchain import ScriptedChat, call_reply, text_reply
from tether import create_agent
from tether.models.langchain import LangChainModel, tools_from_langchain


async def test_an_injected_argument_named_like_tethers_own_keeps_the_applications_value() -> None:
    @lc_tool
    def orders(
        status: str,
        inject: Annotated[str, InjectedToolArg],
        hidden: Annotated[int, InjectedToolArg],
        lc_tool: Annotated[str, InjectedToolArg],
    ) -> str:
        """Count the user's orders."""
        return f"{inject} ({lc_tool}): {hidden} {status} orders"

    (converted,) = tools_from_langchain(
        [orders], inject=lambda context: {"inject": context.deps, "hidden": 3, "lc_tool": "app"}
    )
    assert set(converted.parameters["properties"]) == {"status"}  # the model is not asked
    forged = '{"status": "open", "inject": "admin", "hidden": 1000, "lc_tool": "model"}'
    chat = ScriptedChat(replies=[call_reply(("c1", "orders", forged)), text_reply("done")])
    result = await create_agent(LangChainModel(chat), tools=[converted]).arun("Orders?", deps="u7")
    answer = result.messages[2].results[0]  # type: ignore[union-attr]
    assert not answer.is_error, answer.text
    assert answer.text == "u7 (app): 3 open orders"
