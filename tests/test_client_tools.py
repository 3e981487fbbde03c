"""Client tools: tools a run's caller runs itself (`client_tools=`), offered to the model
beside the agent's own; a call of one waits in the thread for the caller's result."""

from __future__ import annotations

from pathlib import Path

import pytest

from tether import ConfigurationError, create_agent, tool
from tether.approval import (
    Approve,
    Respond,
    decision_from_json,
    decision_to_json,
)
from tether.messages import ToolCall, ToolResultMessage
from tether.models import ScriptedModel
from tether.models.base import ToolSpec

PICK = ToolSpec("pick_color", "Let the person pick a color.", {"type": "object", "properties": {}})


@tool
def add(a: int, b: int) -> str:
    """Add two numbers."""
    return str(a + b)


def test_a_client_tool_call_waits_for_the_callers_result_and_the_run_goes_on(
    tmp_path: Path,
) -> None:
    model = ScriptedModel([[ToolCall("pick_color", {})], "You picked teal."])
    agent = create_agent(model, tools=[add], checkpointer=f"sqlite:///{tmp_path}/r.db")
    stopped = agent.run("Pick one.", thread_id="t", client_tools=[PICK])
    assert stopped.stop_reason == "interrupted"
    [request] = stopped.interrupts
    assert request.client_tool
    assert (request.tool, request.allowed) == ("pick_color", ("respond", "reject"))
    assert [t.name for t in model.requests[0].tools][-1] == "pick_color"
    assert "add" in [t.name for t in model.requests[0].tools]
    done = agent.resume("t", decisions={request.call_id: Respond("teal")})
    assert done.output == "You picked teal."
    told = model.requests[1].messages[-1]
    assert isinstance(told, ToolResultMessage)
    assert told.results[0].text == "teal"
    assert not told.results[0].is_error


def test_a_client_tools_result_may_say_it_failed(tmp_path: Path) -> None:
    model = ScriptedModel([[ToolCall("pick_color", {})], "Sorry."])
    agent = create_agent(model, checkpointer=f"sqlite:///{tmp_path}/r.db")
    [request] = agent.run("Pick.", thread_id="t", client_tools=[PICK]).interrupts
    agent.resume("t", decisions={request.call_id: Respond("the page closed", is_error=True)})
    told = model.requests[1].messages[-1]
    assert isinstance(told, ToolResultMessage)
    assert told.results[0].is_error
    assert decision_from_json(decision_to_json(Respond("x", is_error=True))) == Respond(
        "x", is_error=True
    )


def test_a_client_tools_call_is_never_run_here(tmp_path: Path) -> None:
    model = ScriptedModel([[ToolCall("pick_color", {})], "never"])
    agent = create_agent(model, checkpointer=f"sqlite:///{tmp_path}/r.db")
    [request] = agent.run("Pick.", thread_id="t", client_tools=[PICK]).interrupts
    with pytest.raises(ConfigurationError, match="'approve' is not allowed for pick_color"):
        agent.resume("t", decisions={request.call_id: Approve()})


@pytest.mark.parametrize("name", ["add", "Add", "final_result", "write_file", "task"])
def test_a_client_tool_never_replaces_one_of_the_agents_own(tmp_path: Path, name: str) -> None:
    model = ScriptedModel(["never"])
    agent = create_agent(model, tools=[add], checkpointer=f"sqlite:///{tmp_path}/r.db")
    shadow = ToolSpec(name, "Mine now.", {"type": "object"})
    with pytest.raises(ConfigurationError, match="has the name of one of the agent's own"):
        agent.run("Hi.", thread_id="t", client_tools=[shadow])
    with pytest.raises(ConfigurationError, match="is given twice"):
        agent.run("Hi.", thread_id="t", client_tools=[PICK, PICK])
    with pytest.raises(ConfigurationError, match=r"client_tools\[0\] must be ToolSpecs"):
        agent.run("Hi.", thread_id="t", client_tools=[{"name": "x"}])  # type: ignore[list-item]
    assert model.requests == []
