"""A result that repeats the latest result's TEXT is replaced by "[Unchanged: ...]", even
when it also carries an image or a document the earlier one did not: the image is then
never sent. (`_result` compares `result.text`, which ignores binary parts; only the
held one is checked to be text only.)"""

from __future__ import annotations

from tether import create_agent, tool
from tether.messages import BinaryPart, TextPart, ToolCall, ToolResultMessage
from tether.models import FunctionModel, ModelRequest

PNG = b"\x89PNG\r\n\x1a\n" + b"\x00" * 64
CAPTION = "Dashboard for service checkout: latency, errors, saturation. " * 10
calls = {"n": 0}


@tool(read_only=True, idempotent=True)
def dashboard(service: str) -> list[TextPart | BinaryPart]:
    """The service's dashboard: a caption, and the chart once it has rendered."""
    calls["n"] += 1
    parts: list[TextPart | BinaryPart] = [TextPart(CAPTION)]
    if calls["n"] > 1:  # the chart was still rendering the first time
        parts.append(BinaryPart(PNG, "image/png"))
    return parts


def test_a_new_image_is_sent_even_when_the_text_repeats() -> None:
    sent: list[ModelRequest] = []

    def reply(request: ModelRequest) -> list[ToolCall] | str:
        sent.append(request)
        if len(sent) <= 2:
            return [ToolCall("dashboard", {"service": "checkout"})]
        return "done"

    result = create_agent(FunctionModel(reply), tools=[dashboard]).run("Show the chart.")
    second = [m for m in result.messages if isinstance(m, ToolResultMessage)][1].results[0]
    assert any(isinstance(p, BinaryPart) for p in second.content)  # the run has the image
    shown = [m for m in sent[-1].messages if isinstance(m, ToolResultMessage)][1].results[0]
    assert any(isinstance(p, BinaryPart) for p in shown.content), (
        f"the chart was never sent to the model; it got {shown.text!r} instead"
    )
