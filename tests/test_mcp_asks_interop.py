"""server-everything (npm, the MCP reference server, under Node 22) asks tether during its
calls: `trigger-sampling-request` gets a reply of the agent's model, counted in the run;
`trigger-elicitation-request` asks its form of every field kind MCP allows, which stops the
run until the person answers; the call is made again with the answer. The tools needing
what tether does not declare (URL questions, task-augmented requests) are not offered."""

from __future__ import annotations

from pathlib import Path

from tether import create_agent
from tether.approval import Answer
from tether.mcp import MCPServer
from tether.messages import ToolCall, ToolResultMessage
from tether.models import FunctionModel, ModelRequest
from tether.models.scripted import Turn
from tether.testing import tool_results

from .interop import node, package
from .test_mcp_asks import sampled


def everything() -> MCPServer:
    script = package("@modelcontextprotocol/server-everything") / "dist" / "index.js"
    return MCPServer("everything", command=str(node()), args=[str(script)], timeout_seconds=30)


def test_server_everything_samples_and_asks_through_tether(tmp_path: Path) -> None:
    samples: list[ModelRequest] = []
    offered: list[str] = []

    def model(request: ModelRequest) -> Turn:
        if sampled(request):
            samples.append(request)
            return "Paris."
        offered[:] = [t.name for t in request.tools]
        done = sum(isinstance(m, ToolResultMessage) for m in request.messages)
        script: list[Turn] = [
            [
                ToolCall(
                    "everything_trigger-sampling-request",
                    {"prompt": "Capital of France?", "maxTokens": 20},
                )
            ],
            [ToolCall("everything_trigger-elicitation-request", {})],
            "done",
        ]
        return script[done]

    agent = create_agent(
        FunctionModel(model),
        mcp_servers=[everything()],
        checkpointer=f"sqlite:///{tmp_path}/runs.db",
    )
    stopped = agent.run("Try the server.", thread_id="t")

    sampling, *_ = tool_results(stopped)
    assert '"text": "Paris."' in sampling.text
    assert '"model": "function"' in sampling.text
    (sample,) = samples
    assert sample.settings.max_tokens == 20
    assert sample.messages[0].text.endswith("Capital of France?")
    assert stopped.usage.requests == 3  # two steps and the sample
    assert "everything_trigger-url-elicitation" not in offered  # URL mode is not declared
    assert not any(name.endswith("-async") for name in offered)  # nor tasks

    assert stopped.stop_reason == "interrupted"
    (waiting,) = stopped.interrupts
    question = waiting.question
    assert question is not None
    assert question.message == "Please provide inputs for the following fields:"
    kinds = {name: spec["type"] for name, spec, _ in question.fields}
    assert len(kinds) == 13
    assert set(kinds.values()) == {"string", "boolean", "integer", "number", "array"}
    assert [name for name, _, required in question.fields if required] == ["name"]

    result = agent.resume(
        "t",
        decisions=[Answer({"name": "Ann Example", "email": "ann@example.org", "check": True})],
    )
    assert result.stop_reason == "completed"
    answered = tool_results(result)[-1].text
    assert "User provided the requested information!" in answered
    assert "- Name: Ann Example" in answered
    assert "- Favorite Integer: 42" in answered  # the form's default, filled in by tether
    assert '"untitledMultipleSelectEnum": [\n      "Guitar"\n    ]' in answered
