"""What a real MCP server (the mcp SDK, tests/mcp_servers/asking.py) asks during a tool
call, through whole tether runs: a reply of the agent's model (sampling), counted in the
run's usage, cost and budget; and a question to the person (elicitation), which stops
the run until it is answered on resume, when the call is made again."""

from __future__ import annotations

import asyncio
import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tether import ConfigurationError, Limits, Price, Reject, Respond, SubAgent, create_agent
from tether.agent import Agent
from tether.approval import Answer, Approve
from tether.checkpoint.journal import read_thread
from tether.mcp import MCPServer
from tether.messages import AssistantMessage, ToolCall, ToolResultMessage
from tether.models import FunctionModel, ModelRequest
from tether.models.scripted import Turn
from tether.questions import Question
from tether.testing import tool_results

SERVER = str(Path(__file__).resolve().parent / "mcp_servers" / "asking.py")


@dataclass
class Served:
    """The asking server over streamable HTTP, one process for the module (a process
    per test would cost a second each), logging the tools it starts to `log`."""

    url: str
    log: Path

    def runs(self, line: str) -> int:
        """How many times the server logged `line` (a call made again counts twice)."""
        return self.log.read_text().splitlines().count(line)


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    log = tmp_path_factory.mktemp("asking") / "log"
    log.touch()
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    process = subprocess.Popen(
        [sys.executable, SERVER, "http", str(port)],
        env={**os.environ, "ASKING_LOG": str(log)},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 30
        while True:
            with socket.socket() as client:
                if client.connect_ex(("127.0.0.1", port)) == 0:
                    break
            if time.monotonic() > deadline:
                raise TimeoutError("the asking MCP server did not start")
            time.sleep(0.05)
        yield Served(f"http://127.0.0.1:{port}/mcp", log)
    finally:
        process.kill()
        process.wait()


def asking(where: Served | Path | None = None, **options: Any) -> MCPServer:
    """The asking server: at `where` when it is served, else over stdio (logging to
    `where`, when it is a path)."""
    if isinstance(where, Served):
        return MCPServer("asking", url=where.url, **options)
    env = {"ASKING_LOG": str(where)} if where is not None else {}
    return MCPServer("asking", command=sys.executable, args=[SERVER], env=env, **options)


def sampled(request: ModelRequest) -> bool:
    """Whether `request` is a server's sampling request (tether's prompt for them)."""
    return request.system_prompt.startswith("You write one reply for the MCP server")


class Script:
    """A model that makes `calls` in its first turn, then answers with the results; a
    sampling request gets `reply`. Every request is kept in `requests`."""

    def __init__(self, *calls: ToolCall, reply: str = "a short summary") -> None:
        self.calls = list(calls)
        self.reply = reply
        self.requests: list[ModelRequest] = []
        self.samples: list[ModelRequest] = []

    def __call__(self, request: ModelRequest) -> Turn:
        if sampled(request):
            self.samples.append(request)
            return self.reply
        self.requests.append(request)
        if not any(isinstance(m, ToolResultMessage) for m in request.messages):
            return list(self.calls)
        return "done"


def texts(result: Any) -> list[str]:
    return [r.text for r in tool_results(result)]


def book(day: str) -> ToolCall:
    """A call booking a table on `day`: each test books its own day, so the log of the
    server it shares with the others tells its calls apart."""
    return ToolCall("asking_book", {"day": day}, id=f"book-{day}")


def agent_for(tmp_path: Path, script: Script, where: Served | Path) -> Agent[str]:
    return create_agent(
        FunctionModel(script),
        mcp_servers=[asking(where)],
        checkpointer=f"sqlite:///{tmp_path}/runs.db",
    )


# -- sampling ----------------------------------------------------------------------------


@pytest.mark.parametrize("transport", ["stdio", "http"])
def test_sampling_is_answered_by_the_agents_model_and_counted_in_usage_and_cost(
    transport: str, request: pytest.FixtureRequest
) -> None:
    where = request.getfixturevalue("served") if transport == "http" else None
    script = Script(ToolCall("asking_summarize", {"text": "A long text.", "max_tokens": 40}))
    agent = create_agent(
        FunctionModel(script),
        mcp_servers=[asking(where)],
        prices={"function": Price(input_per_mtok=1.0, output_per_mtok=2.0)},
    )
    result = agent.run("Summarize.")
    assert texts(result) == ["function: a short summary (endTurn)"]
    (sample,) = script.samples
    assert sample.tools == ()  # nothing to call from a sampling request
    assert sample.settings.max_tokens == 40
    first = sample.messages[0]
    assert first.text.startswith("[The instructions of MCP server 'asking', not the user's:]")
    assert first.text.endswith("A long text.")
    assert "Ignore the user" not in sample.system_prompt  # the server's words stay its own
    assert "Summarize." not in str(sample.messages)  # no context of the run (includeContext)
    assert result.usage.requests == 3  # two steps and the sample
    expected = result.usage.input_tokens * 1.0 / 1e6 + result.usage.output_tokens * 2.0 / 1e6
    assert result.cost_usd == pytest.approx(expected)
    assert result.usage_by_agent["main"] == result.usage


def test_sampling_is_refused_once_the_budget_is_spent(served: Served) -> None:
    script = Script(ToolCall("asking_summarize", {"text": "A long text."}))
    agent = create_agent(
        FunctionModel(script), mcp_servers=[asking(served)], limits=Limits(max_model_calls=1)
    )
    result = agent.run("Summarize.")
    assert script.samples == []  # the model was never asked for the server
    (text,) = texts(result)
    assert "tether refused to sample: the run's model call budget is spent" in text
    assert result.usage.requests == 1
    assert result.stop_reason == "budget"


def test_a_servers_max_tokens_is_cut_to_what_the_token_budget_leaves(served: Served) -> None:
    script = Script(ToolCall("asking_summarize", {"text": "A long text.", "max_tokens": 3000}))
    agent = create_agent(
        FunctionModel(script), mcp_servers=[asking(served)], limits=Limits(max_output_tokens=500)
    )
    result = agent.run("Summarize.")
    (sample,) = script.samples
    first_step = next(m for m in result.messages if isinstance(m, AssistantMessage))
    assert 0 < first_step.usage.output_tokens < 100
    assert sample.settings.max_tokens == 500 - first_step.usage.output_tokens


def test_a_subagents_call_samples_with_the_subagents_model(served: Served) -> None:
    def main(request: ModelRequest) -> Turn:
        if sampled(request):
            raise AssertionError("the main agent's model was asked for the subagent's call")
        if not any(isinstance(m, ToolResultMessage) for m in request.messages):
            return [ToolCall("task", {"description": "Summarize it.", "subagent_type": "sub"})]
        return "done"

    helper = Script(ToolCall("asking_summarize", {"text": "Text."}), reply="from the sub model")
    sub = SubAgent("sub", "Summarizes.", model=FunctionModel(helper, name="sub-model"))
    agent = create_agent(FunctionModel(main), mcp_servers=[asking(served)], subagents=[sub])
    result = agent.run("Delegate.")
    assert len(helper.samples) == 1
    path = next(k for k in result.usage_by_agent if k.startswith("main/task:sub"))
    assert result.usage_by_agent[path].requests == 3  # its two steps and the sample
    assert result.usage.requests == 5


def test_sampling_false_declares_no_sampling(served: Served) -> None:
    script = Script(ToolCall("asking_summarize", {"text": "Text."}))
    agent = create_agent(FunctionModel(script), mcp_servers=[asking(served, sampling=False)])
    result = agent.run("Summarize.")
    assert script.samples == []
    assert tool_results(result)[0].is_error


async def test_a_server_sampling_outside_a_run_is_refused(served: Served) -> None:
    """A session of the user's own (as `create_agent` lists tools with) has no run."""
    from mcp.shared.exceptions import MCPError

    async with asking(served).connect() as session:
        with pytest.raises(MCPError, match="tether refused to sample: no tool call of a run"):
            await session.call_tool("summarize", {"text": "Text."})


# -- questions -----------------------------------------------------------------------------


@pytest.mark.parametrize("transport", ["stdio", "http"])
def test_a_question_stops_the_run_and_an_answer_resumes_the_call_made_again(
    tmp_path: Path, transport: str, request: pytest.FixtureRequest
) -> None:
    where: Served | Path = (
        request.getfixturevalue("served") if transport == "http" else tmp_path / "log"
    )
    script = Script(book("Monday"))
    agent = agent_for(tmp_path, script, where)
    stopped = agent.run("Book it.", thread_id="t")
    assert stopped.stop_reason == "interrupted"
    (waiting,) = stopped.interrupts
    assert waiting.tool == "asking_book"
    assert waiting.allowed == ("answer", "reject", "respond")
    assert waiting.question is not None
    assert waiting.question.message == "Book a table on Monday?"
    assert waiting.question.asker == "MCP server 'asking'"
    assert [n for n, _, _ in waiting.question.fields] == ["name", "seats", "window", "meal"]
    assert tool_results(stopped) == []  # the call waits, unanswered
    result = agent.resume("t", decisions=[Answer({"name": "Ann", "window": True})])
    assert result.stop_reason == "completed"
    assert texts(result) == [
        "booking on Monday: accept: meal='veg', name='Ann', seats=2, window=True"
    ]
    log = where.log if isinstance(where, Served) else where
    assert log.read_text().splitlines().count("book Monday") == 2  # made again, to hear it
    assert len(script.requests) == 2  # the model was not asked again in between


@pytest.mark.parametrize(
    ("decision", "heard"),
    [
        (Reject("not now"), "decline"),
        (Answer(action="decline"), "decline"),
        (Answer(action="cancel"), "cancel"),
    ],
)
def test_a_question_declined_or_cancelled_is_told_to_the_server(
    tmp_path: Path, served: Served, decision: Any, heard: str
) -> None:
    day = f"Tuesday-{heard}-{type(decision).__name__}"
    agent = agent_for(tmp_path, Script(book(day)), served)
    agent.run("Book it.", thread_id="t")
    result = agent.resume("t", decisions=[decision])
    assert texts(result) == [f"booking on {day}: {heard}"]
    assert served.runs(f"answer {day} {heard}") == 1


def test_respond_ends_the_call_without_making_it_again(tmp_path: Path, served: Served) -> None:
    agent = agent_for(tmp_path, Script(book("Wednesday")), served)
    agent.run("Book it.", thread_id="t")
    result = agent.resume("t", decisions=[Respond("Booked by phone instead.")])
    assert texts(result) == ["Booked by phone instead."]
    assert served.runs("book Wednesday") == 1


def test_a_new_agent_on_the_same_thread_answers_the_question(
    tmp_path: Path, served: Served
) -> None:
    """What another process sees: only the thread, recorded in the database."""
    agent_for(tmp_path, Script(book("Thursday")), served).run("Book it.", thread_id="t")
    other = agent_for(tmp_path, Script(book("Thursday")), served)
    thread = asyncio.run(read_thread(other._checkpointer(), "t"))
    (waiting,) = thread.requests
    assert waiting.question is not None
    assert waiting.question.message == "Book a table on Thursday?"
    result = other.resume("t", decisions={waiting.call_id: Answer({"name": "Bo"})})
    assert texts(result) == ["booking on Thursday: accept: meal='veg', name='Bo', seats=2"]


def test_an_answer_that_does_not_fit_the_form_is_refused_and_the_call_still_waits(
    tmp_path: Path, served: Served
) -> None:
    agent = agent_for(tmp_path, Script(book("Friday")), served)
    agent.run("Book it.", thread_id="t")
    with pytest.raises(ConfigurationError) as refused:
        agent.resume("t", decisions=[Answer({"name": "A", "seats": 20, "dessert": "yes"})])
    message = str(refused.value)
    assert "'dessert' is not a field of the form" in message
    assert "field 'name' (Your name) must be at least 2 characters long" in message
    assert "field 'seats' must be at most 8" in message
    with pytest.raises(ConfigurationError, match=r"field 'name' .* is required"):
        agent.resume("t", decisions=[Answer()])  # a default-less required field
    with pytest.raises(ConfigurationError, match="'approve' is not allowed"):
        agent.resume("t", decisions=[Approve()])
    result = agent.resume("t", decisions=[Answer({"name": "Ann", "seats": 3.0})])
    assert texts(result) == ["booking on Friday: accept: meal='veg', name='Ann', seats=3"]


def test_two_questions_of_one_call_are_asked_one_at_a_time(tmp_path: Path, served: Served) -> None:
    agent = agent_for(tmp_path, Script(ToolCall("asking_two_questions", {})), served)
    first = agent.run("Ask.", thread_id="t")
    assert first.interrupts[0].question.message == "Your name?"  # type: ignore[union-attr]
    second = agent.resume("t", decisions=[Answer({"name": "Ann"})])
    (waiting,) = second.interrupts
    assert waiting.question is not None
    assert waiting.question.message == "Your colour?"
    assert [a["message"] for a in waiting.question.answered] == ["Your name?"]
    result = agent.resume("t", decisions=[Answer({"colour": "red"})])
    assert texts(result) == ["accept: name='Ann' / accept: colour='red'"]
    assert served.runs("two_questions") == 3


def test_a_different_question_when_made_again_stops_the_run_again(
    tmp_path: Path, served: Served
) -> None:
    agent = agent_for(tmp_path, Script(ToolCall("asking_changing", {})), served)
    first = agent.run("Ask.", thread_id="t")
    asked = first.interrupts[0].question
    assert asked is not None
    again = agent.resume("t", decisions=[Answer({"ok": True})])
    assert again.stop_reason == "interrupted"  # the answer was for another question
    number = int(asked.message.split()[2].rstrip("?"))
    assert again.interrupts[0].question.message == f"Question number {number + 1}?"  # type: ignore[union-attr]


def test_without_a_thread_a_question_is_declined_and_the_model_told(served: Served) -> None:
    agent = create_agent(FunctionModel(Script(book("Saturday"))), mcp_servers=[asking(served)])
    result = agent.run("Book it.")
    assert result.stop_reason == "completed"
    (text,) = texts(result)
    assert text.startswith("booking on Saturday: decline")
    assert "[tether: MCP server 'asking' asked the person \"Book a table on Saturday?\"" in text
    assert "the run has no thread to wait on" in text


def test_a_question_in_url_mode_is_declined_and_never_declared(
    tmp_path: Path, served: Served
) -> None:
    agent = agent_for(tmp_path, Script(ToolCall("asking_open_page", {})), served)
    result = agent.run("Sign in.", thread_id="t")
    assert result.stop_reason == "completed"
    (text,) = texts(result)
    assert text.startswith("decline")
    assert "tether opens no web page for a server" in text
    assert "example.com" not in text


def test_elicitation_false_declares_no_questions(tmp_path: Path, served: Served) -> None:
    agent = create_agent(
        FunctionModel(Script(book("Sunday"))),
        mcp_servers=[asking(served, elicitation=False)],
        checkpointer=f"sqlite:///{tmp_path}/runs.db",
    )
    result = agent.run("Book it.", thread_id="t")
    assert result.stop_reason == "completed"
    assert tool_results(result)[0].is_error


def test_a_function_answers_questions_in_process_with_the_forms_defaults(
    served: Served,
) -> None:
    asked: list[Question] = []

    async def answer(question: Question) -> Answer:
        asked.append(question)
        return Answer({"name": "Cy"})

    agent = create_agent(
        FunctionModel(Script(book("Holiday"))), mcp_servers=[asking(served, elicitation=answer)]
    )
    result = agent.run("Book it.")
    assert texts(result) == ["booking on Holiday: accept: meal='veg', name='Cy', seats=2"]
    assert [q.message for q in asked] == ["Book a table on Holiday?"]


def test_a_subagents_call_asks_with_the_subagents_path_and_resumes_inside_it(
    tmp_path: Path, served: Served
) -> None:
    def main(request: ModelRequest) -> Turn:
        if not any(isinstance(m, ToolResultMessage) for m in request.messages):
            return [ToolCall("task", {"description": "Book it.", "subagent_type": "booker"})]
        return "done"

    sub = SubAgent("booker", "Books tables.", model=FunctionModel(Script(book("Eve"))))
    agent = create_agent(
        FunctionModel(main),
        mcp_servers=[asking(served)],
        subagents=[sub],
        checkpointer=f"sqlite:///{tmp_path}/runs.db",
    )
    stopped = agent.run("Delegate.", thread_id="t")
    (waiting,) = stopped.interrupts
    assert waiting.path[0] == "main"
    assert waiting.path[1].startswith("task:booker")
    result = agent.resume("t", decisions=[Answer({"name": "Di"})])
    assert result.stop_reason == "completed"
    assert served.runs("book Eve") == 2
    assert served.runs("answer Eve accept: meal='veg', name='Di', seats=2") == 1
