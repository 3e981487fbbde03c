"""A scripted model that writes a long log, then reads it page by page: enough turns,
and enough old results, for masking to start."""

from __future__ import annotations

from tether.messages import ToolCall
from tether.models import FunctionModel, ModelRequest

_LOG = "".join(f"line {n} of the log with some words\n" for n in range(4000))


def paging_model(sent: list[ModelRequest]) -> FunctionModel:
    """Writes /log, reads it in pages of 150 lines until its 25th request, then answers
    "done"; every request it is sent goes into `sent`."""

    def reply(request: ModelRequest) -> list[ToolCall] | str:
        sent.append(request)
        step = len(sent)
        if step == 1:
            return [ToolCall("write_file", {"file_path": "/log", "content": _LOG})]
        if step < 25:
            return [
                ToolCall("read_file", {"file_path": "/log", "offset": step * 150, "limit": 150})
            ]
        return "done"

    return FunctionModel(reply)
