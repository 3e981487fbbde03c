"""Large tool results go to a file; the model gets the path and a preview."""

from __future__ import annotations

from tether.backends.base import create
from tether.backends.errors import BackendError
from tether.capabilities.base import Capability, ToolHandler
from tether.messages import TextPart, ToolCall, ToolResult
from tether.state import ToolContext
from tether.tools.files import FILE_TOOL_NAMES

__all__ = ["LargeResultEviction"]

CHARS_PER_TOKEN = 4
PREVIEW_LINES = 10
PREVIEW_LINE_CHARS = 300
EVICTION_DIR = "/large_tool_results"


class LargeResultEviction(Capability):
    """A text result over `token_limit` tokens is saved under /large_tool_results/.

    The file tools are left alone: they bound their own output, and evicting a
    `read_file` result would only send the model back to read the same file.
    """

    def __init__(self, token_limit: int = 20_000) -> None:
        self.token_limit = token_limit

    async def around_tool(
        self, call: ToolCall, context: ToolContext, proceed: ToolHandler
    ) -> ToolResult:
        if call.name in FILE_TOOL_NAMES:
            return await proceed(call, context)
        result = await proceed(call, context)
        text = result.text
        limit = self.token_limit * CHARS_PER_TOKEN
        if len(text) <= limit:
            return result
        path = f"{EVICTION_DIR}/{call.id}"
        try:
            await create(context.backend, path, text.encode())  # the call's own, new file
        except BackendError as exc:  # refused (a permission, a policy): cut it instead
            note = (
                f"{text[:limit]}\n\n[cut: {len(text) - limit} more characters not shown; "
                f"saving the whole result to {path} failed: {exc}]"
            )
        else:
            note = (
                f"The result was {len(text)} characters (about {len(text) // CHARS_PER_TOKEN} "
                f"tokens), too long to show, so it was saved to {path}. It begins:\n"
                f"{preview(text)}\n\nRead it in parts with read_file (offset, limit) or "
                "search it with grep."
            )
        kept = tuple(p for p in result.content if not isinstance(p, TextPart))
        return ToolResult(result.call_id, result.name, (TextPart(note), *kept), result.is_error)


def preview(text: str) -> str:
    """The first `PREVIEW_LINES` lines, each cut to `PREVIEW_LINE_CHARS` characters: a
    preview stays small however long the lines are."""
    head = text[: PREVIEW_LINES * (PREVIEW_LINE_CHARS + 1)].split("\n")[:PREVIEW_LINES]
    return "\n".join(
        line if len(line) <= PREVIEW_LINE_CHARS else f"{line[:PREVIEW_LINE_CHARS]}[... line cut]"
        for line in head
    )
