"""Masking assumes `read_only and idempotent` means "a call gives the result again". But
tether documents `idempotent` as "safe to run twice" (agents.md, scale-out.md: it makes a
call run again after a crash), so a read-only tool whose answer changes (a search, a
price, a queue, the time) is naturally marked read_only+idempotent, and its old results
are then masked with "call it again to see it", which gives a different answer."""

from __future__ import annotations

import itertools

from tether import ToolContext, create_agent, tool
from tether.backends.base import update
from tether.messages import ToolCall, ToolResultMessage
from tether.models import FunctionModel, ModelRequest

_counter = itertools.count()


@tool(read_only=True, idempotent=True)  # "no side effects", "safe to run twice"
def next_ticket(queue: str) -> str:
    """Take a look at the next support ticket in a queue (the queue moves on its own)."""
    n = next(_counter)
    return f"Ticket #{n}: " + f"customer {n} reports that the export is broken. " * 12


def test_results_that_a_call_cannot_give_again_are_not_masked() -> None:
    sent: list[ModelRequest] = []

    def reply(request: ModelRequest) -> list[ToolCall] | str:
        sent.append(request)
        queue = ["billing", "export", "login", "mobile"][len(sent) % 4]
        return [ToolCall("next_ticket", {"queue": queue})] if len(sent) <= 40 else "done"

    result = create_agent(FunctionModel(reply), tools=[next_ticket]).run("Triage the queue.")
    whole = [r.text for m in result.messages if isinstance(m, ToolResultMessage) for r in m.results]
    shown = [
        r.text for m in sent[-1].messages if isinstance(m, ToolResultMessage) for r in m.results
    ]
    lost = [w.split(":")[0] for w, s in zip(whole, shown, strict=True) if w != s]
    assert not lost, (
        f"{len(lost)} tickets ({lost[:3]}...) were replaced by {shown[0]!r}; calling "
        "next_ticket again gives the next ticket, not these"
    )


def test_a_read_of_a_file_a_command_then_replaced_is_not_lost() -> None:
    """`read_file` is re-runnable only while the file stays as it was. A change the masker
    cannot see (a command, a subagent, a person, or a tool of yours without `path_param`)
    replaces the file; the old read is then masked with "call read_file again", which
    shows the new file: the log the model read is gone for good."""

    @tool
    async def rotate_logs(ctx: ToolContext) -> str:
        """Rotate the application log (starts a new, empty log)."""
        await update(ctx.backend, "/app.log", lambda old: b"log rotated\n")
        return "rotated"

    log = "".join(f"12:00:{n:02d} ERROR payment {n} declined: card expired\n" for n in range(60))
    sent: list[ModelRequest] = []

    def reply(request: ModelRequest) -> list[ToolCall] | str:
        sent.append(request)
        step = len(sent)
        if step == 1:
            return [ToolCall("write_file", {"file_path": "/app.log", "content": log})]
        if step == 2:
            return [ToolCall("read_file", {"file_path": "/app.log"})]
        if step == 3:
            return [ToolCall("rotate_logs", {})]
        if step <= 40:
            return [ToolCall("next_ticket", {"queue": f"q{step}"})]
        return "done"

    create_agent(FunctionModel(reply), tools=[next_ticket, rotate_logs]).run(
        "Why do payments fail?"
    )
    shown = [
        r.text for m in sent[-1].messages if isinstance(m, ToolResultMessage) for r in m.results
    ]
    assert any("card expired" in t for t in shown), (
        "the log the model read was masked ('call read_file again'), but the file now "
        "holds only 'log rotated': the errors are gone from everything the model can see"
    )
