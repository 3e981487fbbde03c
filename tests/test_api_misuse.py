"""Misusing the public API gets a `ConfigurationError` that names the argument: never an
AttributeError or TypeError from deep inside, whatever the value."""

from __future__ import annotations

import inspect
import warnings
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tether import Approve, ConfigurationError, create_agent, tool
from tether.messages import ToolCall
from tether.models import ScriptedModel

ARGUMENTS = [name for name in inspect.signature(create_agent).parameters if name not in ("model",)]

junk = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(),
    st.floats(),
    st.text(max_size=20),
    st.binary(max_size=20),
    st.lists(st.one_of(st.none(), st.integers(), st.text(max_size=5)), max_size=3),
    st.dictionaries(st.text(max_size=5), st.one_of(st.none(), st.integers()), max_size=3),
    st.builds(object),
)


@pytest.mark.parametrize("argument", ARGUMENTS)
@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(value=junk)
def test_any_value_of_any_argument_is_taken_or_named(argument: str, value: Any) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            create_agent(ScriptedModel(["ok"]), **{argument: value})
        except ConfigurationError as exc:
            message = str(exc)
            named = argument in message or argument.rstrip("s") in message
            assert named, f"{argument}={value!r}: {message}"


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        ({"system_prompt": 123}, "system_prompt must be a string or None, got int 123"),
        ({"tools": [None]}, "tools[0] must be a Tool or a typed function, got NoneType"),
        ({"tools": print}, "tools takes a list of"),
        ({"skills": "/skills"}, "skills takes a list of directories, like ['/skills/'], got str"),
        (
            {"memory": [b"/AGENTS.md"]},
            "memory[0] must be file paths, like ['/AGENTS.md'], got bytes",
        ),
        ({"prices": {"m": 1}}, "prices['m'] must be a Price, got int 1"),
        ({"interrupt_on": ["execute"]}, "interrupt_on takes a dict of settings by tool name"),
        ({"todos": "yes"}, "todos must be True or False, got str 'yes'"),
        ({"output_type": {"a": 1}}, "output_type must be a type pydantic can validate"),
        ({"tool_token_limit_before_evict": "10"}, "tool_token_limit_before_evict must be"),
    ],
)
def test_the_message_names_the_argument_and_what_it_got(
    arguments: dict[str, Any], message: str
) -> None:
    with pytest.raises(ConfigurationError) as caught:
        create_agent(ScriptedModel(["ok"]), **arguments)
    assert message in str(caught.value)


def test_run_arguments(tmp_path: Path) -> None:
    agent = create_agent(ScriptedModel(["ok"] * 5), checkpointer=f"sqlite:///{tmp_path}/r.db")
    with pytest.raises(ConfigurationError, match=r"message_history\[0\] must be tether messages"):
        agent.run("hi", message_history=["earlier"])  # type: ignore[list-item]
    with pytest.raises(ConfigurationError, match="message_history takes a list"):
        agent.run("hi", message_history=5)  # type: ignore[arg-type]
    with pytest.raises(ConfigurationError, match="thread_id must be valid Unicode"):
        agent.run("hi", thread_id="t\ud800")
    with pytest.raises(ConfigurationError, match="thread_id must be a non-empty string"):
        agent.run("hi", thread_id=7)  # type: ignore[arg-type]


def test_decisions_of_the_wrong_shape(tmp_path: Path) -> None:
    @tool
    def send(to: str) -> str:
        """Send a message."""
        return "sent"

    model = ScriptedModel([[ToolCall("send", {"to": "ada"}, "c1")], "done"])
    agent = create_agent(
        model,
        tools=[send],
        interrupt_on={"send": True},
        checkpointer=f"sqlite:///{tmp_path}/r.db",
    )
    assert agent.run("go", thread_id="t").stop_reason == "interrupted"
    with pytest.raises(ConfigurationError, match=r"decisions takes a list of Approve\(\)"):
        agent.resume("t", decisions=5)  # type: ignore[arg-type]
    with pytest.raises(ConfigurationError, match=r"decisions\[0\] must be Approve\(\)"):
        agent.resume("t", decisions=["yes"])  # type: ignore[list-item]
    assert agent.resume("t", decisions=[Approve()]).output == "done"  # nothing was spent


def test_an_argument_error_keeps_its_cause(tmp_path: Path) -> None:
    with pytest.raises(ConfigurationError) as caught:
        create_agent(f"test:{tmp_path / 'missing.json'}")
    assert isinstance(caught.value.__cause__, FileNotFoundError)


@pytest.mark.parametrize("value", [[object()], [None], "server"])
def test_mcp_servers_must_be_mcp_servers(value: object) -> None:
    with pytest.raises(ConfigurationError, match="mcp_servers"):
        create_agent(ScriptedModel(["ok"]), mcp_servers=value)  # type: ignore[arg-type]
