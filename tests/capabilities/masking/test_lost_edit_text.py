"""An edit's `old_string` is "offloaded" as `[N characters, saved to /f; read the file to
see them]` once it is keep_turns old. But the edit REMOVED that text from the file: the
pointer is false, and the read that showed the old text is masked too (superseded by the
edit). The model can no longer see what it replaced (e.g. to undo the edit)."""

from __future__ import annotations

from tether import create_agent
from tether.messages import AssistantMessage, ToolCall, ToolResultMessage
from tether.models import FunctionModel, ModelRequest

OLD = "".join(f"def old_helper_{n}(x):\n    return x * {n}\n" for n in range(20))  # ~700 chars
NEW = "def helper(x):\n    return x\n"


def _sent_text(request: ModelRequest) -> str:
    out = []
    for m in request.messages:
        if isinstance(m, AssistantMessage):
            out += [repr(c.args) for c in m.tool_calls]
        elif isinstance(m, ToolResultMessage):
            out += [r.text for r in m.results]
        else:
            out.append(repr(m))
    return "\n".join(out)


def test_replaced_text_of_an_edit_stays_visible_somewhere() -> None:
    sent: list[ModelRequest] = []

    def reply(request: ModelRequest) -> list[ToolCall] | str:
        sent.append(request)
        step = len(sent)
        if step == 1:
            big = "".join(
                f"row {n} of the data table, with some padding text\n" for n in range(3000)
            )
            return [
                ToolCall("write_file", {"file_path": "/m.py", "content": OLD}),
                ToolCall("write_file", {"file_path": "/data.txt", "content": big}),
            ]
        if step == 2:
            return [ToolCall("read_file", {"file_path": "/m.py"})]
        if step == 3:
            args = {"file_path": "/m.py", "old_string": OLD, "new_string": NEW}
            return [ToolCall("edit_file", args)]
        if step <= 14:  # other work: reads of other big files
            part = {"file_path": "/data.txt", "offset": step * 250, "limit": 250}
            return [ToolCall("read_file", part)]
        return "done"

    create_agent(FunctionModel(reply)).run("Refactor /m.py")
    last = _sent_text(sent[-1])
    # the history keeps OLD (RunResult), but the model is told it is "saved to /m.py",
    # which it is not: the file now holds NEW only.
    assert "old_helper_7" in last, (
        "the text the edit replaced is gone from every message the model is sent; the "
        "edit call says it is 'saved to /m.py', but /m.py no longer contains it:\n" + last[:1500]
    )
