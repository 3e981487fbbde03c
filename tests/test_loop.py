"""The run loop, driven end to end through create_agent with test models."""

from __future__ import annotations

import asyncio
import warnings

import pytest

from tether import (
    Capability,
    Limits,
    Price,
    RunError,
    ScriptExhaustedError,
    ToolContext,
    ToolFatalError,
    create_agent,
    tool,
)
from tether.errors import CostUnknownWarning
from tether.messages import (
    AssistantMessage,
    TextPart,
    ToolCall,
    ToolResult,
    ToolResultMessage,
    Usage,
    UserMessage,
)
from tether.models import FunctionModel, ModelRequest, ModelResponse, ScriptedModel


@tool
async def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


@tool
async def hang() -> str:
    """Hang."""
    await asyncio.sleep(60)
    return "never"


def results_of(message: object) -> list[str]:
    assert isinstance(message, ToolResultMessage)
    return [r.text for r in message.results]


def test_a_tool_turn_then_a_text_answer() -> None:
    model = ScriptedModel([[ToolCall("add", {"a": 2, "b": 3})], "It is 5."])
    result = create_agent(model, tools=[add]).run("What is 2 + 3?")
    assert result.output == "It is 5."
    assert result.stop_reason == "completed"
    assert result.steps == 2
    assert results_of(result.messages[2]) == ["5"]
    assert result.usage.requests == 2
    assert result.cost_usd == 0


def test_the_request_holds_the_system_prompt_history_and_tool_specs() -> None:
    model = ScriptedModel(["ok"])
    create_agent(model, tools=[add], system_prompt="You are terse.").run("hi")
    sent = model.requests[0]
    assert sent.system_prompt.startswith("You are terse.\n\n")
    assert sent.messages == (UserMessage.of("hi"),)
    # The user's tools first, then the ones every agent has by default.
    assert [t.name for t in sent.tools] == [
        "add",
        "write_todos",
        "ls",
        "read_file",
        "write_file",
        "edit_file",
        "glob",
        "grep",
        "task",
    ]
    assert sent.output_tool is None


def test_plain_functions_are_accepted_as_tools() -> None:
    def multiply(a: int, b: int) -> int:
        """Multiply."""
        return a * b

    model = ScriptedModel([[ToolCall("multiply", {"a": 6, "b": 7})], "42"])
    result = create_agent(model, tools=[multiply]).run("6*7?")
    assert results_of(result.messages[2]) == ["42"]


async def test_parallel_calls_run_concurrently_and_keep_call_order() -> None:
    # Each tool waits until both have started: run one after the other, they would hang.
    started = 0
    both_started = asyncio.Event()

    @tool
    async def wait_for_peer(name: str) -> str:
        """Wait."""
        nonlocal started
        started += 1
        if started == 2:
            both_started.set()
        await asyncio.wait_for(both_started.wait(), timeout=5)
        return name

    calls = [ToolCall("wait_for_peer", {"name": n}) for n in ("first", "second")]
    agent = create_agent(ScriptedModel([calls, "done"]), tools=[wait_for_peer])
    result = await agent.arun("go")
    assert results_of(result.messages[2]) == ["first", "second"]


def test_an_unknown_tool_is_reported_to_the_model_which_can_recover() -> None:
    model = ScriptedModel(
        [[ToolCall("subtract", {"a": 1})], [ToolCall("add", {"a": 1, "b": 1})], "2"]
    )
    result = create_agent(model, tools=[add]).run("go")
    assert results_of(result.messages[2]) == [
        "There is no tool named 'subtract'. Available tools: "
        "add, edit_file, glob, grep, ls, read_file, task, write_file, write_todos."
    ]
    assert result.output == "2"


def test_malformed_json_and_wrong_types_go_back_to_the_model() -> None:
    model = ScriptedModel(
        [[ToolCall("add", '{"a": 1,'), ToolCall("add", {"a": "x", "b": 2})], "gave up"]
    )
    result = create_agent(model, tools=[add]).run("go")
    bad_json, bad_type = results_of(result.messages[2])
    assert "not valid JSON" in bad_json
    assert "- a: Input should be a valid integer" in bad_type
    assert result.stop_reason == "completed"


def test_a_tool_that_raises_does_not_stop_the_run() -> None:
    @tool
    def explode() -> str:
        """Explode."""
        raise RuntimeError("boom")

    result = create_agent(ScriptedModel([[ToolCall("explode")], "sorry"]), tools=[explode]).run(
        "go"
    )
    assert results_of(result.messages[2]) == ["Tool 'explode' failed: RuntimeError: boom"]
    assert result.output == "sorry"


def test_a_hanging_tool_times_out_and_the_run_continues() -> None:
    agent = create_agent(
        ScriptedModel([[ToolCall("hang")], "moving on"]),
        tools=[hang],
        limits=Limits(tool_timeout_seconds=0.05),
    )
    result = agent.run("go")
    assert results_of(result.messages[2]) == [
        "Tool 'hang' timed out after 0.05 s. "
        "It may have taken effect: check before calling it again."
    ]
    assert result.output == "moving on"


def test_tool_fatal_error_stops_the_run_and_keeps_the_partial_result() -> None:
    @tool
    async def fatal() -> str:
        """Fatal."""
        raise ToolFatalError("credentials revoked")

    @tool
    async def slow() -> str:
        """Slow."""
        await asyncio.sleep(60)
        return "never"

    agent = create_agent(
        ScriptedModel([[ToolCall("slow"), ToolCall("fatal")], "unreached"]), tools=[fatal, slow]
    )
    with pytest.raises(ToolFatalError, match="credentials revoked") as caught:
        agent.run("go")
    result = caught.value.result
    assert result is not None
    assert result.stop_reason == "error"
    assert results_of(result.messages[-1]) == [
        "Cancelled: the run stopped before this call finished.",
        "Tool 'fatal' stopped the run: credentials revoked",
    ]


def test_a_model_error_is_raised_with_the_partial_result() -> None:
    model = ScriptedModel([[ToolCall("add", {"a": 1, "b": 2})], ConnectionError("provider down")])
    with pytest.raises(RunError, match="ConnectionError: provider down") as caught:
        create_agent(model, tools=[add]).run("go")
    assert isinstance(caught.value.__cause__, ConnectionError)
    result = caught.value.result
    assert result is not None
    assert result.steps == 1
    assert results_of(result.messages[2]) == ["3"]


def test_running_past_the_script_raises_with_the_partial_result() -> None:
    model = ScriptedModel([[ToolCall("add", {"a": 1, "b": 2})]])
    with pytest.raises(ScriptExhaustedError) as caught:
        create_agent(model, tools=[add]).run("go")
    assert caught.value.result is not None
    assert len(caught.value.result.messages) == 3


def test_an_empty_reply_is_retried() -> None:
    result = create_agent(ScriptedModel(["", "now an answer"])).run("go")
    assert result.output == "now an answer"
    assert result.messages[2] == UserMessage.of(
        "Your reply was empty. Continue the task, or give your final answer."
    )


def test_message_history_continues_a_conversation() -> None:
    first = create_agent(ScriptedModel(["Hello, Ada."])).run("I am Ada.")
    model = ScriptedModel(["Your name is Ada."])
    second = create_agent(model).run("What is my name?", message_history=first.messages)
    assert model.requests[0].messages[:2] == first.messages
    assert second.new_messages() == (
        UserMessage.of("What is my name?"),
        second.messages[-1],
    )


def test_dangling_calls_in_the_history_get_a_cancelled_result() -> None:
    call = ToolCall("add", {"a": 1, "b": 2}, id="c1")
    history = [UserMessage.of("go"), AssistantMessage((call,))]
    model = ScriptedModel(["ok"])
    create_agent(model, tools=[add]).run("still there?", message_history=history)
    sent = model.requests[0].messages
    assert isinstance(sent[2], ToolResultMessage)
    assert sent[2].results[0].call_id == "c1"
    assert sent[2].results[0].is_error
    assert sent[3] == UserMessage.of("still there?")


# -- limits --------------------------------------------------------------------


def test_limits_of_zero_stop_before_any_model_call() -> None:
    model = ScriptedModel(["never"])
    result = create_agent(model, limits=Limits(max_steps=0)).run("go")
    assert result.stop_reason == "budget"
    assert result.output is None
    assert model.requests == []
    assert result.messages == (UserMessage.of("go"),)


def endless_adder(n: int) -> ScriptedModel:
    return ScriptedModel([[ToolCall("add", {"a": i, "b": 1})] for i in range(n)])


def test_the_step_limit_stops_the_run_and_keeps_everything() -> None:
    result = create_agent(endless_adder(50), tools=[add], limits=Limits(max_steps=10)).run("go")
    assert result.stop_reason == "budget"
    assert result.steps == 10
    assert sum(isinstance(m, ToolResultMessage) for m in result.messages) == 10


def test_the_model_is_told_to_wrap_up_at_ninety_percent() -> None:
    model = endless_adder(50)
    create_agent(model, tools=[add], limits=Limits(max_steps=10)).run("go")
    warned = [
        i
        for i, r in enumerate(model.requests)
        if any("Start no new work" in getattr(m, "text", "") for m in r.messages)
    ]
    assert warned[0] == 9
    last = model.requests[9].messages[-1]
    assert isinstance(last, UserMessage)
    assert last.text == (
        "You have used 90% of your step budget. Start no new work: "
        "give your best final answer now, with what you have."
    )


def test_the_token_limit_stops_the_run() -> None:
    def reply(request: ModelRequest) -> ModelResponse:
        call = ToolCall("add", {"a": len(request.messages), "b": 0})
        return ModelResponse(AssistantMessage((call,), usage=Usage(100, 50, requests=1)))

    agent = create_agent(FunctionModel(reply), tools=[add], limits=Limits(max_total_tokens=600))
    result = agent.run("go")
    assert result.stop_reason == "budget"
    assert result.usage.total_tokens == 600
    assert result.steps == 4


def test_the_cost_limit_uses_the_price_table() -> None:
    def reply(request: ModelRequest) -> ModelResponse:
        call = ToolCall("add", {"a": len(request.messages), "b": 0})
        usage = Usage(1_000_000, 1_000, requests=1)  # (a reply of 0 tokens would be estimated)
        return ModelResponse(AssistantMessage((call,), model_name="house-model", usage=usage))

    agent = create_agent(
        FunctionModel(reply),
        tools=[add],
        limits=Limits(max_cost_usd=5),
        prices={"house-model": Price(input_per_mtok=2, output_per_mtok=8)},
    )
    result = agent.run("go")
    assert result.stop_reason == "budget"
    assert result.cost_usd == pytest.approx(3 * (2 + 0.008))


def test_a_cost_limit_on_an_unpriced_model_warns_once() -> None:
    model = ScriptedModel([[ToolCall("add", {"a": 1, "b": 1})], "done"], name="mystery-model")
    agent = create_agent(model, tools=[add], limits=Limits(max_cost_usd=1))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        result = agent.run("go")
    unknown = [w for w in caught if issubclass(w.category, CostUnknownWarning)]
    assert len(unknown) == 1
    assert "mystery-model" in str(unknown[0].message)
    assert result.cost_usd is None


def test_the_run_timeout_stops_a_hanging_tool_and_keeps_the_history() -> None:
    agent = create_agent(
        ScriptedModel([[ToolCall("add", {"a": 1, "b": 1})], [ToolCall("hang")], "unreached"]),
        tools=[add, hang],
        limits=Limits(timeout_seconds=2.0),  # room for the two steps on a loaded machine
    )
    result = agent.run("go")
    assert result.stop_reason == "timeout"
    assert result.steps == 2
    assert results_of(result.messages[-1]) == [
        "Cancelled: the run stopped before this call finished."
    ]


def test_a_slow_model_is_stopped_by_the_run_timeout() -> None:
    async def slow(request: ModelRequest) -> str:
        await asyncio.sleep(60)
        return "never"

    result = create_agent(FunctionModel(slow), limits=Limits(timeout_seconds=0.1)).run("go")
    assert result.stop_reason == "timeout"
    assert result.messages == (UserMessage.of("go"),)


def test_a_repeated_call_gets_a_nudge_then_stops_the_run() -> None:
    same = [ToolCall("add", {"a": 1, "b": 1}) for _ in range(10)]
    model = ScriptedModel([[call] for call in same])
    result = create_agent(model, tools=[add]).run("go")
    assert result.stop_reason == "loop"
    assert result.steps == 5
    nudges = [
        m for m in result.messages if isinstance(m, UserMessage) and "same arguments" in m.text
    ]
    assert [n.text.split(" times")[0][-1] for n in nudges] == ["3", "4"]


def test_loop_detection_is_configurable() -> None:
    same = [[ToolCall("add", {"a": 1, "b": 1})] for _ in range(8)]
    limits = Limits(loop_nudge_after=None, loop_stop_after=None, max_steps=6)
    result = create_agent(ScriptedModel(same), tools=[add], limits=limits).run("go")
    assert result.stop_reason == "budget"


def test_a_thousand_steps_complete_without_a_step_limit() -> None:
    turns: list[object] = [[ToolCall("add", {"a": i, "b": 1})] for i in range(999)]
    turns.append("done")
    agent = create_agent(ScriptedModel(turns), tools=[add], limits=Limits(max_steps=None))  # type: ignore[arg-type]
    result = agent.run("count")
    assert result.stop_reason == "completed"
    assert result.steps == 1000
    assert results_of(result.messages[-2]) == ["999"]


# -- capabilities ----------------------------------------------------------------


def test_capability_hooks_see_and_shape_each_step() -> None:
    seen: list[str] = []

    class Audit(Capability):
        def prompt(self) -> str:
            return "Audit section."

        def tools(self) -> list[object]:
            @tool
            def ping() -> str:
                """Ping."""
                return "pong"

            return [ping]

        async def on_run_start(self, state):  # type: ignore[no-untyped-def]
            seen.append(f"start {len(state.messages)}")

        async def before_model(self, state, request):  # type: ignore[no-untyped-def]
            seen.append("before")
            return request

        async def after_model(self, state, response):  # type: ignore[no-untyped-def]
            seen.append("after")
            return response

        async def around_tool(self, call, context, proceed):  # type: ignore[no-untyped-def]
            result = await proceed(call, context)
            return ToolResult(result.call_id, result.name, (TextPart(result.text.upper()),))

    model = ScriptedModel([[ToolCall("ping")], "done"])
    result = create_agent(model, capabilities=[Audit()]).run("go")  # type: ignore[list-item]
    assert seen == ["start 1", "before", "after", "before", "after"]
    assert model.requests[0].system_prompt.endswith("Audit section.")
    assert "ping" in [t.name for t in model.requests[0].tools]
    assert results_of(result.messages[2]) == ["PONG"]


def test_around_tool_hooks_nest_first_outermost() -> None:
    order: list[str] = []

    class Mark(Capability):
        def __init__(self, name: str) -> None:
            self.name = name

        async def around_tool(self, call, context: ToolContext, proceed):  # type: ignore[no-untyped-def]
            order.append(f"{self.name}>")
            result = await proceed(call, context)
            order.append(f"<{self.name}")
            return result

    model = ScriptedModel([[ToolCall("add", {"a": 1, "b": 1})], "done"])
    create_agent(model, tools=[add], capabilities=[Mark("a"), Mark("b")]).run("go")
    assert order == ["a>", "b>", "<b", "<a"]


def test_a_zero_timeout_stops_before_any_model_call() -> None:
    model = ScriptedModel(["never"])
    result = create_agent(model, limits=Limits(timeout_seconds=0)).run("go")
    assert result.stop_reason == "timeout"
    assert model.requests == []


def test_a_capability_that_raises_ends_the_run_with_every_call_answered() -> None:
    class Broken(Capability):
        async def around_tool(self, call, context, proceed):  # type: ignore[no-untyped-def]
            raise KeyError("policy table missing")

    model = ScriptedModel([[ToolCall("add", {"a": 1, "b": 1})], "unreached"])
    with pytest.raises(RunError, match="KeyError") as caught:
        create_agent(model, tools=[add], capabilities=[Broken()]).run("go")
    result = caught.value.result
    assert result is not None
    assert results_of(result.messages[-1]) == ["Tool 'add' stopped the run: 'policy table missing'"]


def test_a_call_cut_off_by_the_output_limit_is_answered_not_run() -> None:
    cut = AssistantMessage((ToolCall("add", '{"a": 1, "b"', "c1"),))
    model = ScriptedModel([ModelResponse(cut, finish_reason="length"), "ok"])
    result = create_agent(model, tools=[add]).run("go")
    (feedback,) = results_of(result.messages[2])
    assert feedback.startswith("Your call to `add` was cut off")
    assert result.messages[2].results[0].is_error  # type: ignore[union-attr]


def test_broken_json_without_a_cut_off_is_an_argument_error() -> None:
    model = ScriptedModel([[ToolCall("add", '{"a": 1, "b"', "c1")], "ok"])
    result = create_agent(model, tools=[add]).run("go")
    (feedback,) = results_of(result.messages[2])
    assert "cut off" not in feedback
    assert "JSON" in feedback


def test_structured_output_is_forced_after_a_failed_answer() -> None:
    model = ScriptedModel(["I think 3", [ToolCall("final_result", {"result": 3})]])
    result = create_agent(model, output_type=int).run("1+2?")
    assert result.output == 3
    assert [r.force_output for r in model.requests] == [False, True]
    assert model.requests[1].output_spec is not None
    assert model.requests[1].output_spec.name == "final_result"


def test_structured_output_is_forced_once_the_budget_is_nearly_spent() -> None:
    turns: list[object] = [[ToolCall("add", {"a": i, "b": 1})] for i in range(9)]
    model = ScriptedModel([*turns, [ToolCall("final_result", {"result": 9})]])  # type: ignore[list-item]
    result = create_agent(model, tools=[add], output_type=int, limits=Limits(max_steps=10)).run(
        "go"
    )
    assert result.output == 9
    assert [r.force_output for r in model.requests] == [False] * 9 + [True]


def test_text_answers_never_force_output() -> None:
    model = ScriptedModel(["", "done"])
    create_agent(model).run("go")
    assert [r.force_output for r in model.requests] == [False, False]


def test_model_settings_must_be_a_model_settings() -> None:
    from tether import ConfigurationError

    with pytest.raises(ConfigurationError, match="model_settings must be"):
        create_agent(ScriptedModel(["x"]), model_settings={"max_tokens": 5})  # type: ignore[arg-type]
