"""The `task` tool: isolation, parallelism, one budget for the tree, depth, permissions."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from pathlib import Path

import pytest
from pydantic import BaseModel

from tests.conftest import own_id
from tether import ConfigurationError, Limits, Price, SubAgent, ToolContext, create_agent, tool
from tether.backends import Rule, StateBackend
from tether.events import RunFinished, RunStarted, ToolCallFinished
from tether.messages import AssistantMessage, Message, ToolCall, ToolResultMessage, Usage
from tether.models import FunctionModel, ModelRequest, ScriptedModel
from tether.models.scripted import Turn
from tether.testing import tool_results


def by_task(scripts: dict[str, Sequence[Turn]]) -> FunctionModel:
    """One script per conversation, chosen by its first message: the parent's prompt or
    a subagent's task. Stateless, so parallel subagents can share it."""

    def reply(request: ModelRequest) -> Turn:
        first = request.messages[0]
        assert not isinstance(first, ToolResultMessage | AssistantMessage)
        done = sum(isinstance(m, AssistantMessage) for m in request.messages)
        return scripts[first.text][done]

    return FunctionModel(reply)


def delegate(task: str, subagent: str = "general-purpose", call_id: str = "t1") -> ToolCall:
    return ToolCall("task", {"description": task, "subagent_type": subagent}, id=call_id)


def tool_texts(messages: Sequence[Message]) -> list[str]:
    return [r.text for r in tool_results(messages)]


def test_a_subagent_sees_only_its_task_and_only_its_report_comes_back() -> None:
    model = by_task(
        {
            "Review the repo.": [[delegate("Count the TODOs in /src.")], "There are 3."],
            "Count the TODOs in /src.": [[ToolCall("ls", {"path": "/"})], "3 TODOs found."],
        }
    )
    result = create_agent(model, system_prompt="You lead.").run("Review the repo.")

    assert result.output == "There are 3."
    sub_requests = [r for r in model.requests if r.messages[0].text.startswith("Count")]
    first = sub_requests[0]
    assert [m.text for m in first.messages] == ["Count the TODOs in /src."]
    assert "You lead." not in first.system_prompt
    assert first.system_prompt.startswith("You are a subagent")
    assert "task" not in {t.name for t in first.tools}  # general-purpose cannot recurse
    # The parent's conversation holds the report, not the subagent's steps.
    assert tool_texts(result.messages) == ["3 TODOs found."]
    assert len(result.messages) == 4


def test_the_parent_usage_includes_its_subagents_with_a_breakdown() -> None:
    model = by_task(
        {
            "go": [[delegate("sub job")], "done"],
            "sub job": [[ToolCall("ls", {"path": "/"})], "sub done"],
        }
    )
    one_dollar_a_token = Price(input_per_mtok=1_000_000, output_per_mtok=0)
    result = create_agent(model, prices={"function": one_dollar_a_token}).run("go")

    assert set(result.usage_by_agent) == {"main", "main/task:general-purpose#1"}
    assert result.usage_by_agent["main"].requests == 2
    assert result.usage_by_agent["main/task:general-purpose#1"].requests == 2
    assert result.usage == sum(result.usage_by_agent.values(), Usage())
    assert result.cost_usd == pytest.approx(result.usage.input_tokens)
    assert result.steps == 2  # this agent's own model calls


async def test_task_calls_in_one_turn_run_concurrently() -> None:
    arrived: dict[str, asyncio.Event] = {"a": asyncio.Event(), "b": asyncio.Event()}

    @tool
    async def meet(me: str, other: str) -> str:
        """Wait at the meeting point for the other subagent."""
        arrived[me].set()
        await asyncio.wait_for(arrived[other].wait(), timeout=5)
        return f"{me} met {other}"

    model = by_task(
        {
            "both": [[delegate("job a", call_id="1"), delegate("job b", call_id="2")], "ok"],
            "job a": [[ToolCall("meet", {"me": "a", "other": "b"})], "a done"],
            "job b": [[ToolCall("meet", {"me": "b", "other": "a"})], "b done"],
        }
    )
    # Run one after the other, each subagent would wait for the other until it timed out.
    result = await create_agent(model, tools=[meet]).arun("both")
    assert tool_texts(result.messages) == ["a done", "b done"]
    assert result.output == "ok"


def test_subagent_steps_count_against_the_parent_budget() -> None:
    model = by_task(
        {
            "go": [[delegate("long job")], "finished"],
            "long job": [[ToolCall("ls", {"path": "/"})]] * 10 + ["never reached"],
        }
    )
    result = create_agent(model, limits=Limits(max_steps=5)).run("go")

    assert result.stop_reason == "budget"
    total = sum(u.requests for u in result.usage_by_agent.values())
    assert total == 5  # the parent's first step and four of the subagent's
    (report,) = tool_texts(result.messages)
    assert report.startswith("[The subagent stopped before finishing: it ran out of budget.")


def test_a_subagent_limit_of_its_own_ends_it_with_a_partial_report() -> None:
    looper = SubAgent(
        name="looper",
        description="Lists files for ever.",
        limits=Limits(max_steps=3),
    )
    model = by_task(
        {
            "go": [[delegate("list", "looper")], "the parent carries on"],
            "list": [["Listing now.", ToolCall("ls", {"path": "/"})]] * 10,
        }
    )
    result = create_agent(model, subagents=[looper]).run("go")

    assert result.stop_reason == "completed"
    assert result.output == "the parent carries on"
    (report,) = tool_texts(result.messages)
    assert "it ran out of budget" in report
    assert report.endswith("Listing now.")
    assert result.usage_by_agent["main/task:looper#1"].requests == 3


def test_nesting_stops_at_the_depth_limit() -> None:
    inner = SubAgent(name="inner", description="Goes deeper.")
    for _ in range(2):  # three levels, each able to start the next
        inner = SubAgent(name="inner", description="Goes deeper.", subagents=[inner])
    model = by_task(
        {
            "go": [[delegate("level 1", "inner")], "top done"],
            "level 1": [[delegate("level 2", "inner")], "level 1 done"],
            "level 2": [[delegate("level 3", "inner")], "level 2 done"],
            "level 3": ["never run"],
        }
    )
    result = create_agent(model, subagents=[inner], limits=Limits(max_subagent_depth=2)).run("go")

    assert result.output == "top done"
    refusals = [
        r.text
        for req in model.requests
        for m in req.messages
        if isinstance(m, ToolResultMessage)
        for r in m.results
        if r.is_error
    ]
    assert refusals[0].startswith("Subagents may nest at most 2 deep")
    assert not any(r.messages[0].text == "level 3" for r in model.requests)


def test_an_unknown_subagent_is_a_tool_error_listing_the_valid_names() -> None:
    model = by_task({"go": [[delegate("x", "researcher")], "ok"]})
    reviewer = SubAgent(name="code-reviewer", description="Reviews diffs.")
    result = create_agent(model, subagents=[reviewer]).run("go")
    assert tool_texts(result.messages) == [
        "There is no subagent type 'researcher'. Choose one of: general-purpose, code-reviewer."
    ]


def test_a_subagent_that_fails_is_a_tool_error_and_the_parent_goes_on() -> None:
    model = by_task(
        {
            "go": [[delegate("explode")], "recovered"],
            "explode": [RuntimeError("provider fell over")],
        }
    )
    result = create_agent(model).run("go")
    assert result.output == "recovered"
    assert tool_texts(result.messages) == [
        "The subagent 'general-purpose' failed: the run failed: RuntimeError: provider fell over"
    ]


async def test_subagent_permissions_are_narrower_never_wider() -> None:
    backend = StateBackend()
    careful = SubAgent(
        name="careful",
        description="May not touch /src.",
        permissions=[
            Rule({"write"}, ["/locked/**"], "allow"),  # cannot widen the parent's rules
            Rule({"write"}, ["/src/**"], "deny"),
        ],
    )
    model = by_task(
        {
            "go": [[delegate("write things", "careful")], "ok"],
            "write things": [
                [
                    ToolCall("write_file", {"file_path": "/src/a.py", "content": "x"}, id="w1"),
                    ToolCall("write_file", {"file_path": "/locked/b", "content": "x"}, id="w2"),
                    ToolCall("write_file", {"file_path": "/notes.md", "content": "x"}, id="w3"),
                ],
                "wrote what I could",
            ],
        }
    )
    agent = create_agent(
        model,
        backend=backend,
        permissions=[Rule({"write"}, ["/locked/**"], "deny")],
        subagents=[careful],
    )
    result = await agent.arun("go")
    sub_results = [
        r
        for req in model.requests
        if req.messages[0].text == "write things"
        for m in req.messages
        if isinstance(m, ToolResultMessage)
        for r in m.results
    ]
    assert [r.is_error for r in sub_results] == [True, True, False]
    assert "Permission denied" in sub_results[0].text
    assert "Permission denied" in sub_results[1].text
    assert result.files == {"/notes.md": b"x"}  # the subagent wrote into the parent's files


async def test_subagent_events_stream_through_the_parent_with_their_path() -> None:
    model = by_task(
        {
            "go": [[delegate("sub")], "done"],
            "sub": [[ToolCall("ls", {"path": "/"})], "sub done"],
        }
    )
    events = [e async for e in create_agent(model).stream("go")]
    sub = ("main", "task:general-purpose#1")
    assert [type(e).__name__ for e in events if e.path == sub][:1] == ["RunStarted"]
    assert any(isinstance(e, ToolCallFinished) and e.path == sub for e in events)
    assert any(isinstance(e, RunFinished) and e.path == sub for e in events)
    assert isinstance(events[0], RunStarted)
    assert events[0].path == ("main",)
    assert isinstance(events[-1], RunFinished)
    assert events[-1].path == ("main",)


def test_a_long_report_is_evicted_to_a_file() -> None:
    long_report = "line of findings\n" * 30
    model = by_task(
        {
            "go": [[delegate("research")], "read it"],
            "research": [long_report],
        }
    )
    result = create_agent(model, tool_token_limit_before_evict=50).run("go")
    (text,) = tool_texts(result.messages)
    path = f"/large_tool_results/{own_id(result.messages, 't1')}"  # by tether's id
    assert f"saved to {path}" in text
    assert result.files[path] == long_report.encode()


def test_custom_subagents_have_their_own_prompt_tools_and_model() -> None:
    @tool
    def lint(code: str) -> str:
        """Lint some code."""
        return "clean"

    reviewer_model = ScriptedModel([[ToolCall("lint", {"code": "x = 1"})], "LGTM"])
    reviewer = SubAgent(
        name="code-reviewer",
        description="Reviews a diff for bugs.",
        system_prompt="You review code.",
        tools=[lint],
        model=reviewer_model,
    )
    parent = ScriptedModel([[delegate("Review this diff.", "code-reviewer")], "merged"])
    result = create_agent(parent, subagents=[reviewer]).run("Ship it.")

    assert result.output == "merged"
    assert tool_texts(result.messages) == ["LGTM"]
    sent = reviewer_model.requests[0]
    assert sent.system_prompt.startswith("You review code.\n\nYou are a subagent")
    assert sent.tools[0].name == "lint"
    task_spec = next(t for t in parent.requests[0].tools if t.name == "task")
    assert "- code-reviewer: Reviews a diff for bugs." in task_spec.description
    assert "- general-purpose:" in task_spec.description


def test_the_general_purpose_subagent_can_be_replaced_or_removed() -> None:
    plain = create_agent(ScriptedModel(["x"]), general_purpose_subagent=False)
    assert "task" not in {t.name for t in plain._plan.tool_specs}
    assert "## Subagents" not in plain._plan.system_prompt

    mine = SubAgent(name="general-purpose", description="My own helper.")
    replaced = create_agent(ScriptedModel(["x"]), subagents=[mine])
    task_spec = next(t for t in replaced._plan.tool_specs if t.name == "task")
    assert task_spec.description.count("- ") == 1
    assert "- general-purpose: My own helper." in task_spec.description


def test_bad_subagent_configuration_is_a_configuration_error() -> None:
    with pytest.raises(ConfigurationError, match="description"):
        SubAgent(name="x", description=" ")
    with pytest.raises(ConfigurationError, match="letters, digits"):
        SubAgent(name="code reviewer", description="Reviews.")
    twin = SubAgent(name="twin", description="One of two.")
    with pytest.raises(ConfigurationError, match="two subagents are named 'twin'"):
        create_agent(ScriptedModel(["x"]), subagents=[twin, twin])
    with pytest.raises(ConfigurationError, match="SubAgent"):
        create_agent(ScriptedModel(["x"]), subagents=["reviewer"])  # type: ignore[list-item]


def test_a_subagent_shares_the_parents_deps() -> None:
    @tool
    def whoami(context: ToolContext) -> str:
        """Say who the caller is."""
        return str(context.deps["user"])

    model = by_task(
        {
            "go": [[delegate("ask")], "done"],
            "ask": [[ToolCall("whoami", {})], "asked"],
        }
    )
    create_agent(model, tools=[whoami]).run("go", deps={"user": "ada"})
    sub_results = [
        r.text
        for req in model.requests
        if req.messages[0].text == "ask"
        for m in req.messages
        if isinstance(m, ToolResultMessage)
        for r in m.results
    ]
    assert sub_results == ["ada"]


def test_a_subagent_can_be_given_tools_by_name() -> None:
    @tool
    def lint(path: str) -> str:
        """Lint a file."""
        return f"{path}: clean"

    reader_model = ScriptedModel(["nothing to change"])
    reader = SubAgent(
        "reader", "Reads and reports.", tools=["read_file", "grep", "lint"], model=reader_model
    )
    parent = create_agent(
        ScriptedModel([[delegate("look", "reader")], "ok"]), tools=[lint], subagents=[reader]
    )
    assert parent.run("go").output == "ok"
    offered = {t.name for t in reader_model.requests[0].tools}
    assert offered == {"read_file", "grep", "lint"}  # no writes, no todos, nothing else

    wrong = SubAgent("wrong", "Cannot.", tools=["read_file", "teleport"])
    with pytest.raises(ConfigurationError, match=r"subagent 'wrong' names tools .*'teleport'"):
        create_agent(ScriptedModel(["x"]), subagents=[wrong])


def test_the_general_purpose_subagent_has_the_parents_capability_tools() -> None:
    from tether.capabilities.base import Capability

    @tool
    def stamp() -> str:
        """Stamp the report."""
        return "stamped"

    class Stamping(Capability):
        def tools(self) -> Sequence[object]:
            return [stamp]

    model = by_task(
        {
            "go": [[delegate("stamp it")], "done"],
            "stamp it": [[ToolCall("stamp", {}, id="s")], "stamped it"],
        }
    )
    create_agent(model, capabilities=[Stamping()]).run("go")
    (after,) = [
        r for r in model.requests if r.messages[0].text == "stamp it" and len(r.messages) > 1
    ]
    assert tool_texts(after.messages) == ["stamped"]  # the subagent's own call ran


class Verdict(BaseModel):
    ok: bool
    reason: str


def analyst(answers: list[Turn]) -> FunctionModel:
    """The main agent asks the analyst once and reports what came back; the analyst plays
    `answers`, one a turn."""

    def turn(request: ModelRequest) -> Turn:
        done = sum(isinstance(m, AssistantMessage) for m in request.messages)
        if request.messages[0].text == "Judge it.":  # type: ignore[union-attr]
            return answers[done]
        if done:
            return f"got: {tool_results(request.messages)[-1].text}"
        return [ToolCall("task", {"subagent_type": "analyst", "description": "Judge it."})]

    return FunctionModel(turn)


def test_a_subagent_with_an_output_type_answers_with_a_validated_object() -> None:
    answers: list[Turn] = [
        "It looks fine.",  # text instead of the answer tool: told to use it
        [ToolCall("final_result", {"ok": "perhaps"})],  # invalid: told why
        [ToolCall("final_result", {"ok": True, "reason": "tests pass"})],
    ]
    spec = SubAgent("analyst", "Judges.", output_type=Verdict)
    result = create_agent(analyst(answers), subagents=[spec]).run("Is it ok?")
    assert result.output == 'got: {"ok":true,"reason":"tests pass"}'
    assert Verdict.model_validate_json(result.output.removeprefix("got: ")).ok


def test_a_subagent_that_never_gives_a_valid_answer_is_a_tool_error() -> None:
    spec = SubAgent("analyst", "Judges.", output_type=Verdict)
    result = create_agent(analyst(["No."] * 10), subagents=[spec]).run("Is it ok?")
    assert result.output.startswith("got: The subagent 'analyst' failed: ")
    assert "final answer" in result.output  # the OutputError says what went wrong


def test_a_subagent_output_type_pydantic_cannot_take_is_refused_when_built() -> None:
    with pytest.raises(ConfigurationError, match=r"^subagent 'a': output_type <object object"):
        create_agent(ScriptedModel(["x"]), subagents=[SubAgent("a", "A.", output_type=object())])


def test_skills_and_memory_are_inherited_unless_the_subagent_sets_its_own(tmp_path: Path) -> None:
    from tether.backends import FilesystemBackend

    (tmp_path / "skills" / "notes").mkdir(parents=True)
    (tmp_path / "skills" / "notes" / "SKILL.md").write_text(
        "---\nname: notes\ndescription: Take notes.\n---\n\nBody.\n"
    )
    (tmp_path / "AGENTS.md").write_text("The parent's memory.\n")
    (tmp_path / "SUB.md").write_text("The subagent's memory.\n")
    model = by_task(
        {
            "go": [[delegate("a", "plain", "t1"), delegate("b", "bare", "t2")], "done"],
            "a": ["did a"],
            "b": ["did b"],
        }
    )
    plain = SubAgent("plain", "Inherits.")
    bare = SubAgent("bare", "Has its own.", skills=[], memory=["/SUB.md"])
    create_agent(
        model,
        backend=FilesystemBackend(tmp_path),
        skills=["/skills/"],
        memory=["/AGENTS.md"],
        subagents=[plain, bare],
    ).run("go")
    prompts = {r.messages[0].text: r.system_prompt for r in model.requests}
    assert "- notes: Take notes." in prompts["a"]
    assert "The parent's memory." in prompts["a"]
    assert "- notes: Take notes." not in prompts["b"]
    assert "The subagent's memory." in prompts["b"]
    assert "The parent's memory." not in prompts["b"]


def test_a_subagents_own_mcp_servers_are_its_alone() -> None:
    import sys

    from tether.mcp import MCPServer

    from .test_mcp import SERVER

    server = MCPServer("demo", command=sys.executable, args=[SERVER])
    model = by_task(
        {
            "go": [[delegate("add", "adder")], "done"],
            "add": [[ToolCall("demo_add", {"a": 2, "b": 3}, id="a")], "5"],
        }
    )
    adder = SubAgent("adder", "Adds.", mcp_servers=[server])
    result = create_agent(model, subagents=[adder]).run("go")
    assert tool_texts(result.messages) == ["5"]
    tools = {r.messages[0].text: {t.name for t in r.tools} for r in model.requests}
    assert "demo_add" in tools["add"]
    assert "demo_add" not in tools["go"]


def test_an_agent_built_elsewhere_serves_as_a_subagent() -> None:
    @tool
    def lookup(term: str) -> str:
        """Look a term up."""
        return f"{term}: found"

    researcher = create_agent(
        ScriptedModel([[ToolCall("lookup", {"term": "tether"}, id="l")], "tether: found"]),
        tools=[lookup],
        system_prompt="You research.",
        checkpointer=None,
    )
    lead_model = ScriptedModel([[delegate("Research tether.", "researcher")], "Done."])
    lead = create_agent(
        lead_model, subagents=[SubAgent("researcher", "Researches.", agent=researcher)]
    )
    events = list_events(lead, "Go.")
    result = events[-1].result  # type: ignore[attr-defined]
    assert tool_texts(result.messages) == ["tether: found"]
    assert set(result.usage_by_agent) == {"main", "main/task:researcher#1"}  # one budget
    paths = {e.path for e in events if isinstance(e, ToolCallFinished)}
    assert ("main", "task:researcher#1") in paths  # its events stream through the lead
    with pytest.raises(ConfigurationError, match="set tools, model on that agent instead"):
        SubAgent("r", "R.", agent=researcher, tools=[], model="test")
    with pytest.raises(ConfigurationError, match="agent must be made by create_agent"):
        create_agent(lead_model, subagents=[SubAgent("r", "R.", agent="an agent")])  # type: ignore[arg-type]


def list_events(agent: object, prompt: str) -> list[object]:
    async def collect() -> list[object]:
        return [e async for e in agent.stream(prompt)]  # type: ignore[attr-defined]

    return asyncio.run(collect())


def test_the_general_purpose_profile_can_add_tools() -> None:
    from tether.profiles import GeneralPurposeProfile, HarnessProfile

    def stamp() -> str:
        """Stamp the report."""
        return "stamped"

    model = by_task(
        {"go": [[delegate("stamp it")], "done"], "stamp it": [[ToolCall("stamp", {})], "ok"]}
    )
    profile = HarnessProfile(general_purpose_subagent=GeneralPurposeProfile(tools=(stamp,)))
    result = create_agent(model, profile=profile).run("go")
    assert tool_texts(result.messages) == ["ok"]
    tools = {r.messages[0].text: {t.name for t in r.tools} for r in model.requests}
    assert {"stamp", "read_file"} <= tools["stamp it"]  # the parent's tools, and the added one
    assert "stamp" not in tools["go"]
