"""The MCP client the official conformance suite (`@modelcontextprotocol/conformance`)
drives: a tether agent using the server at the URL it is given, as a user would build one.

    conformance_client.py URL        (the suite sets MCP_CONFORMANCE_SCENARIO)

The agent's model (a script: no provider here) calls every tool the server offers once,
each with arguments made from its input schema, then answers. A question the server asks
during a call is accepted as its form's defaults (what a person pressing "OK" on the form
would send). The suite's server checks what it received; this program prints each result
and exits 0 when the run completed, 1 when it did not (a tool's failure is the model's to
read, not the program's).
"""

from __future__ import annotations

import sys
from typing import Any

from tether import create_agent
from tether.approval import Answer
from tether.mcp import MCPServer
from tether.messages import AssistantMessage, ToolCall, ToolResultMessage
from tether.models import FunctionModel, ModelRequest
from tether.questions import Question

EXAMPLES: dict[str, Any] = {
    "number": 2,
    "integer": 3,
    "string": "tether",
    "boolean": True,
    "array": [],
    "object": {},
}


def arguments(schema: dict[str, Any]) -> dict[str, Any]:
    """A value for each property of a tool's input schema, by its type."""
    properties = schema.get("properties") or {}
    return {name: EXAMPLES.get(spec.get("type"), "tether") for name, spec in properties.items()}


async def accept_defaults(question: Question) -> Answer:
    """The person's answer: the form as it is offered, its defaults kept."""
    print(f"asked: {question.message}")
    return Answer()


def main(url: str) -> int:
    server = MCPServer("conformance", url=url, timeout_seconds=20, elicitation=accept_defaults)

    def reply(request: ModelRequest) -> list[ToolCall] | str:
        if any(isinstance(m, AssistantMessage) for m in request.messages):
            return "done"
        offered = [t for t in request.tools if t.name.startswith(server.tool_prefix)]
        return [ToolCall(t.name, arguments(t.parameters)) for t in offered] or "no tools"

    agent = create_agent(FunctionModel(reply), mcp_servers=[server], filesystem=False)
    result = agent.run("Use each of the server's tools once.")
    for message in result.messages:
        if isinstance(message, ToolResultMessage):
            for answer in message.results:
                print(f"{answer.name}: {'error: ' if answer.is_error else ''}{answer.text}")
    print(f"stop reason: {result.stop_reason}")
    return 0 if result.stop_reason == "completed" else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[-1]))
