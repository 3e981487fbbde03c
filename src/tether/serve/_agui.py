"""tether's events, messages and approvals in the AG-UI protocol's terms.

A run's events become AG-UI events: text and thinking stream as message and reasoning
events, tool calls as call start/args/end and their results, subagents as subagent
started/finished with every event of theirs attributed by `subagentRunId` (the agent
path below "main", joined by "/"), todos and spending as state snapshots, a changed
file as a `tether.file_changed` custom event, and calls waiting for a person as the
interrupts of the run's finished event.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from ag_ui.core import (
    AssistantMessage as AguiAssistant,
)
from ag_ui.core import (
    BaseEvent,
    CustomEvent,
    EventType,
    FunctionCall,
    Interrupt,
    MessagesSnapshotEvent,
    ReasoningEndEvent,
    ReasoningMessageContentEvent,
    ReasoningMessageEndEvent,
    ReasoningMessageStartEvent,
    ReasoningStartEvent,
    RunErrorEvent,
    RunFinishedCancelledOutcome,
    RunFinishedEvent,
    RunFinishedInterruptOutcome,
    RunFinishedSuccessOutcome,
    RunStartedEvent,
    StateSnapshotEvent,
    SubagentErrorEvent,
    SubagentFinishedEvent,
    SubagentFinishedSuccessOutcome,
    SubagentFinishedSuspendedOutcome,
    SubagentStartedEvent,
    TextMessageContentEvent,
    TextMessageEndEvent,
    TextMessageStartEvent,
    TokenUsage,
    ToolCallArgsEvent,
    ToolCallEndEvent,
    ToolCallResultEvent,
    ToolCallStartEvent,
    ToolMessage,
)
from ag_ui.core import (
    ToolCall as AguiToolCall,
)
from ag_ui.core import (
    UserMessage as AguiUser,
)
from pydantic_core import to_jsonable_python

from tether.approval import ApprovalRequest
from tether.events import (
    ApprovalRequested,
    Compacted,
    Event,
    ModelDelta,
    RunFinished,
    RunStarted,
    StepFinished,
    TodosUpdated,
    ToolCallFinished,
    ToolCallStarted,
    ToolProgress,
)
from tether.messages import (
    AssistantMessage,
    Message,
    ToolCall,
    ToolResult,
    ToolResultMessage,
    Usage,
    UserMessage,
)
from tether.serve import _sse
from tether.tools.files import change_diff

__all__ = [
    "AguiUser",
    "Translator",
    "answered_ids",
    "call_ids",
    "change_of",
    "corrected",
    "interrupt",
    "interrupt_id",
    "messages",
    "result_text",
    "subagent_id",
    "token_usage",
]


def subagent_id(path: Sequence[str]) -> str | None:
    """The `subagentRunId` of an agent path: None for the main agent."""
    return "/".join(path[1:]) or None


def interrupt_id(request: ApprovalRequest) -> str:
    """An interrupt's id: the call id, after the path of the agent that made the call
    (two subagents' calls can share an id; their interrupts cannot)."""
    return "/".join(request.path) + ":" + request.call_id


def interrupt(request: ApprovalRequest) -> Interrupt:
    """An approval request as an AG-UI interrupt; `metadata` holds what a card shows.
    (A frontend call is no interrupt of a run's: its id is in `pendingToolCallIds`. The
    page shows it as a card all the same, for a person to answer in the client's stead.)"""
    shown: dict[str, Any] = {
        "tool": request.tool,
        "args": request.args,
        "allowed": list(request.allowed),
        "path": list(request.path),
    }
    if request.question is not None:  # a server's question: its message and its form
        shown["question"] = to_jsonable_python(request.question)
    waits = "the client's result" if request.client_tool else "a decision"
    return Interrupt(
        id=interrupt_id(request),
        reason="frontend_tool" if request.client_tool else "tool_approval",
        message=f"{request.tool} waits for {waits}",
        tool_call_id=request.call_id,
        subagent_run_id=subagent_id(request.path),
        metadata=shown,
    )


def token_usage(usage: Usage, model: str | None = None) -> TokenUsage:
    return TokenUsage(
        model=model,
        input_tokens=usage.input_tokens,
        output_tokens=usage.output_tokens,
        total_tokens=usage.total_tokens,
        cached_input_tokens=usage.cache_read_tokens,
        cache_write_input_tokens=usage.cache_write_tokens,
    )


def change_of(call: ToolCall, before: str | None = None) -> dict[str, Any] | None:
    """What a write_file or edit_file call changes, as {path, tool, diff}, or None for
    any other call (see `change_diff` for `before`)."""
    diff = change_diff(call.name, call.args, before)
    if diff is None or not isinstance(call.args, Mapping):
        return None
    return {"path": call.args["file_path"], "tool": call.name, "diff": diff}


def result_text(result: ToolResult) -> str:
    """A result's text as the client is sent it."""
    return result.text or ("(binary content)" if result.content else "")


def _arguments(call: ToolCall) -> str:
    return call.args if isinstance(call.args, str) else json.dumps(call.args, ensure_ascii=False)


def messages(history: Sequence[Message], *, prefix: str = "m") -> list[Any]:
    """A recorded conversation as AG-UI messages (ids are positions in it)."""
    out: list[Any] = []
    for index, message in enumerate(history):
        mid = f"{prefix}{index}"
        if isinstance(message, UserMessage):
            out.append(AguiUser(id=mid, content=message.text))
        elif isinstance(message, AssistantMessage):
            calls = [
                AguiToolCall(id=c.id, function=FunctionCall(name=c.name, arguments=_arguments(c)))
                for c in message.tool_calls
            ]
            out.append(
                AguiAssistant(id=mid, content=message.text or None, tool_calls=calls or None)
            )
        elif isinstance(message, ToolResultMessage):
            for n, result in enumerate(message.results):
                out.append(
                    ToolMessage(
                        id=f"{mid}.{n}",
                        tool_call_id=result.call_id,
                        content=result_text(result),
                        error=result_text(result) if result.is_error else None,
                    )
                )
    return out


def call_ids(given: Sequence[Any]) -> set[str]:
    """The ids of the tool calls in AG-UI messages (those a client sent: what it holds)."""
    return {c.id for m in given if m.role == "assistant" for c in (m.tool_calls or ())}


def answered_ids(given: Sequence[Any]) -> set[str]:
    """The ids of the calls whose results AG-UI messages hold (as tool messages)."""
    return {m.tool_call_id for m in given if m.role == "tool"}


def corrected(given: Sequence[Any], args: Mapping[str, Any]) -> MessagesSnapshotEvent | None:
    """A snapshot of the client's own messages `given`, with the arguments of the calls
    in `args` (by call id; a decision changed them) as they are now; None when the client
    holds none of them with other arguments. The ids are the client's, so it keeps every
    message where it is and only those arguments change."""
    out: list[Any] = []
    changed = False
    for message in given:
        calls: list[Any] = (message.tool_calls if message.role == "assistant" else None) or []
        stale = [c for c in calls if c.id in args and not _same(c.function.arguments, args[c.id])]
        if stale:
            changed = True
            fixed = [_with_args(c, args[c.id]) if c in stale else c for c in calls]
            out.append(message.model_copy(update={"tool_calls": fixed}))
        else:
            out.append(message)
    return MessagesSnapshotEvent(messages=out) if changed else None


def _same(arguments: str, args: Any) -> bool:
    """Whether a client's `arguments` (JSON text) are `args`, compared as canonical JSON:
    `1`, `1.0` and `true` differ (Python's == holds them equal). Arguments that cannot be
    read (not JSON, nested too deep, a number too long) are not the same."""
    try:
        given = json.dumps(json.loads(arguments), sort_keys=True)
        return given == json.dumps(args, sort_keys=True)
    except (RecursionError, ValueError, TypeError):
        return False


def _with_args(call: AguiToolCall, args: Any) -> AguiToolCall:
    text = args if isinstance(args, str) else json.dumps(args, ensure_ascii=False)
    function = call.function.model_copy(update={"arguments": text})
    return call.model_copy(update={"function": function})


_FAILED = ("error", "content_filter")
"""How runs end that raise: the error's own RUN_ERROR reports them."""


class Translator:
    """Turns one run's tether events into AG-UI events, in order.

    `thread_id` and `run_id` are the AG-UI run's. Text, thinking and tool calls are
    numbered per run, so message ids never repeat within it. A model's reply is one
    assistant message: its text streams under the reply's id, and its calls name that
    id as their `parentMessageId`, so a client files them together. What one client
    already holds is left out per client, by `LiveRun.follow`, never here.
    """

    def __init__(self, thread_id: str, run_id: str) -> None:
        self.thread_id = thread_id
        self.run_id = run_id
        self._count = 0
        self._text: dict[tuple[str, ...], str] = {}
        self._thinking: dict[tuple[str, ...], str] = {}
        self._announced: set[tuple[tuple[str, ...], str]] = set()
        self._streaming: dict[tuple[str, ...], list[str]] = {}
        """By agent path: the calls whose arguments are streaming in, not ended yet."""
        self._reply: dict[tuple[str, ...], str] = {}
        """By agent path: the id of the reply the model is writing now."""
        self._last_reply: dict[tuple[str, ...], str] = {}
        self._answered: set[tuple[str, ...]] = set()
        """The paths whose last reply had a call answered: a call announced now is of a
        reply of its own."""
        self._parent: dict[str, str] = {}
        """The reply each call streamed in, by call id."""
        self._state: dict[str, Any] = {"todos": [], "steps": 0, "usage": {}, "cost_usd": 0.0}

    def _id(self, kind: str) -> str:
        self._count += 1
        return f"{self.run_id}.{kind}{self._count}"

    def _reply_id(self, path: tuple[str, ...]) -> str:
        """The id of the reply being written at `path`, made when it begins."""
        mid = self._reply.get(path)
        if mid is None:
            mid = self._reply[path] = self._last_reply[path] = self._id("reply")
            self._answered.discard(path)
        return mid

    def _parent_of(self, call_id: str, path: tuple[str, ...]) -> str:
        """The reply a call belongs to: the one it streamed in, else the reply at `path`
        (the last one, until one of its calls was answered)."""
        found = self._parent.get(call_id)
        if found is None:
            last = self._last_reply.get(path)
            if path in self._reply or last is None or path in self._answered:
                last = self._reply_id(path)
            found = self._parent[call_id] = last
        return found

    def translate(self, event: Event) -> list[BaseEvent]:
        """The AG-UI events `event` stands for: none for a main run's end in an error,
        which `failed` reports with the error's message."""
        handler: Callable[[Any], list[BaseEvent]] = getattr(self, "_on_" + event.kind)
        return handler(event)

    def piece(self, event: Event) -> tuple[EventType, str | None, str] | None:
        """When `event` is a piece of the text, thinking or arguments streaming now, the
        one content event `translate` would give for it, already encoded: its type, the
        call it is of (None for text and thinking) and the server-sent event. None for
        anything else, which `translate` tells. (A reply streams thousands of pieces;
        this path skips building each as a pydantic event.)"""
        if not isinstance(event, ModelDelta) or not event.delta:
            return None
        path, call_id = event.path, event.call_id
        if event.part == "tool_call":
            if (
                call_id is None
                or event.tool is None
                or path not in self._reply
                or call_id not in self._parent
                or (path, call_id) not in self._announced
                or call_id not in self._streaming.get(path, ())
            ):
                return None
            kind, of = EventType.TOOL_CALL_ARGS, call_id
        elif event.part == "text":
            if path in self._thinking or path not in self._text:
                return None
            kind, of, call_id = EventType.TEXT_MESSAGE_CONTENT, self._text[path], None
        else:
            if path in self._text or path not in self._thinking:
                return None
            kind, of, call_id = EventType.REASONING_MESSAGE_CONTENT, self._thinking[path], None
        return kind, call_id, _sse.content(kind, of, event.delta, subagent_id(path))

    def _on_tool_call_started(self, event: ToolCallStarted) -> list[BaseEvent]:
        return [*self._close(event.path), *self._announce(event.call, event.path)]

    def _on_step_finished(self, event: StepFinished) -> list[BaseEvent]:
        self._reply.pop(event.path, None)  # the reply is whole
        usage = to_jsonable_python(event.usage)
        self._state.update(steps=event.steps, usage=usage, cost_usd=event.cost_usd)
        return [*self._close(event.path), StateSnapshotEvent(snapshot=dict(self._state))]

    def _on_todos_updated(self, event: TodosUpdated) -> list[BaseEvent]:
        todos = to_jsonable_python(event.todos)
        sub = subagent_id(event.path)
        if sub is not None:
            return [CustomEvent(name="tether.todos", value=todos, subagent_run_id=sub)]
        self._state["todos"] = todos
        return [StateSnapshotEvent(snapshot=dict(self._state))]

    def _on_tool_progress(self, event: ToolProgress) -> list[BaseEvent]:
        value = {
            "call_id": event.call_id,
            "progress": event.progress,
            "total": event.total,
            "message": event.message,
        }
        sub = subagent_id(event.path)
        return [CustomEvent(name="tether.tool_progress", value=value, subagent_run_id=sub)]

    def _on_compacted(self, event: Compacted) -> list[BaseEvent]:
        value = {
            "how": event.how,
            "tokens_before": event.tokens_before,
            "tokens_after": event.tokens_after,
            "history_path": event.history_path,
        }
        sub = subagent_id(event.path)
        return [CustomEvent(name="tether.compacted", value=value, subagent_run_id=sub)]

    def _on_approval_requested(self, event: ApprovalRequested) -> list[BaseEvent]:
        out: list[BaseEvent] = []
        for request in event.requests:
            args = request.args if isinstance(request.args, str) else dict(request.args)
            out += self._announce(ToolCall(request.tool, args, request.call_id), request.path)
        return out

    def _on_run_started(self, event: RunStarted) -> list[BaseEvent]:
        sub = subagent_id(event.path)
        if sub is None:
            return [RunStartedEvent(thread_id=self.thread_id, run_id=self.run_id)]
        name = event.path[-1].removeprefix("task:").split("#")[0]
        parent = subagent_id(event.path[:-1])
        return [SubagentStartedEvent(subagent_run_id=sub, name=name, parent_subagent_run_id=parent)]

    def failed(self, error: BaseException) -> list[BaseEvent]:
        """The events that end a run that raised `error`."""
        code = type(error).__name__
        return [*self._close_all(), RunErrorEvent(message=str(error) or code, code=code)]

    def stopped(self) -> list[BaseEvent]:
        """The events that end a run stopped from outside (and abandoned)."""
        end = RunFinishedEvent(
            thread_id=self.thread_id,
            run_id=self.run_id,
            outcome=RunFinishedCancelledOutcome(),
            metadata={"stop_reason": "cancelled"},
        )
        return [*self._close_all(), end]

    def _on_model_delta(self, event: ModelDelta) -> list[BaseEvent]:
        path, sub = event.path, subagent_id(event.path)
        out: list[BaseEvent] = []
        if not event.delta:
            return out
        if event.part == "tool_call":
            return self._call_delta(event)
        if event.part == "text":
            if path in self._thinking:
                out += self._end_thinking(path)
            mid = self._text.get(path)
            if mid is None:
                mid = self._text[path] = self._reply_id(path)
                out.append(
                    TextMessageStartEvent(message_id=mid, role="assistant", subagent_run_id=sub)
                )
            out.append(
                TextMessageContentEvent(message_id=mid, delta=event.delta, subagent_run_id=sub)
            )
            return out
        if path in self._text:
            out += self._end_text(path)
        mid = self._thinking.get(path)
        if mid is None:
            mid = self._thinking[path] = self._id("thinking")
            out.append(ReasoningStartEvent(message_id=mid, subagent_run_id=sub))
            out.append(ReasoningMessageStartEvent(message_id=mid, subagent_run_id=sub))
        out.append(
            ReasoningMessageContentEvent(message_id=mid, delta=event.delta, subagent_run_id=sub)
        )
        return out

    def _call_delta(self, event: ModelDelta) -> list[BaseEvent]:
        """A piece of a call's arguments. A call whose tool the provider does not name as
        it streams is announced whole instead, when it starts or waits."""
        path, call_id = event.path, event.call_id
        if call_id is None:
            return []
        self._parent.setdefault(call_id, self._reply_id(path))
        if event.tool is None:
            return []
        sub = subagent_id(path)
        out: list[BaseEvent] = []
        if (path, call_id) not in self._announced:
            out += self._close(path)  # the text before it, and the call before it, are done
            self._announced.add((path, call_id))
            self._streaming.setdefault(path, []).append(call_id)
            out.append(
                ToolCallStartEvent(
                    tool_call_id=call_id,
                    tool_call_name=event.tool,
                    parent_message_id=self._parent[call_id],
                    subagent_run_id=sub,
                )
            )
        elif call_id not in self._streaming.get(path, ()):
            return []
        out.append(ToolCallArgsEvent(tool_call_id=call_id, delta=event.delta, subagent_run_id=sub))
        return out

    def _end_text(self, path: tuple[str, ...]) -> list[BaseEvent]:
        mid = self._text.pop(path)
        return [TextMessageEndEvent(message_id=mid, subagent_run_id=subagent_id(path))]

    def _end_thinking(self, path: tuple[str, ...]) -> list[BaseEvent]:
        mid = self._thinking.pop(path)
        sub = subagent_id(path)
        return [
            ReasoningMessageEndEvent(message_id=mid, subagent_run_id=sub),
            ReasoningEndEvent(message_id=mid, subagent_run_id=sub),
        ]

    def _close(self, path: tuple[str, ...]) -> list[BaseEvent]:
        """End what is streaming at `path`: thinking, text, calls' arguments."""
        out: list[BaseEvent] = []
        if path in self._thinking:
            out += self._end_thinking(path)
        if path in self._text:
            out += self._end_text(path)
        sub = subagent_id(path)
        for call_id in self._streaming.pop(path, ()):
            out.append(ToolCallEndEvent(tool_call_id=call_id, subagent_run_id=sub))
        return out

    def _close_all(self) -> list[BaseEvent]:
        out: list[BaseEvent] = []
        for path in {*self._text, *self._thinking, *self._streaming}:
            out += self._close(path)
        return out

    def _announce(self, call: ToolCall, path: tuple[str, ...]) -> list[BaseEvent]:
        """A whole call, unless the client has it: from this run, or from its input."""
        key = (path, call.id)
        if key in self._announced:
            return []
        self._announced.add(key)
        sub = subagent_id(path)
        start = ToolCallStartEvent(
            tool_call_id=call.id,
            tool_call_name=call.name,
            parent_message_id=self._parent_of(call.id, path),
            subagent_run_id=sub,
        )
        return [
            start,
            ToolCallArgsEvent(tool_call_id=call.id, delta=_arguments(call), subagent_run_id=sub),
            ToolCallEndEvent(tool_call_id=call.id, subagent_run_id=sub),
        ]

    def _on_tool_call_finished(self, event: ToolCallFinished) -> list[BaseEvent]:
        result, sub = event.result, subagent_id(event.path)
        out = [*self._close(event.path), *self._announce(event.call, event.path)]
        self._reply.pop(event.path, None)  # calls are answered: what the model says next is new
        self._answered.add(event.path)
        facts: dict[str, Any] = {"is_error": result.is_error}
        if event.decided is not None:
            facts["decided"] = event.decided
        out.append(
            ToolCallResultEvent(
                message_id=self._id("result"),
                tool_call_id=event.call.id,
                content=result_text(result),
                role="tool",
                subagent_run_id=sub,
                metadata=facts,
            )
        )
        change = None if result.is_error or event.decided else change_of(event.call)
        if change is not None:
            change["call_id"] = event.call.id
            out.append(CustomEvent(name="tether.file_changed", value=change, subagent_run_id=sub))
        return out

    def _on_run_finished(self, event: RunFinished) -> list[BaseEvent]:
        result, sub = event.result, subagent_id(event.path)
        out = self._close(event.path)
        output = to_jsonable_python(result.output)
        if sub is not None:
            if result.stop_reason in _FAILED:
                out.append(SubagentErrorEvent(subagent_run_id=sub, message="the subagent failed"))
                return out
            outcome: Any = SubagentFinishedSuccessOutcome()
            if result.stop_reason == "interrupted":
                ids = [interrupt_id(r) for r in result.interrupts]
                outcome = SubagentFinishedSuspendedOutcome(interrupt_ids=ids)
            out.append(SubagentFinishedEvent(subagent_run_id=sub, result=output, outcome=outcome))
            return out
        if result.stop_reason in _FAILED:
            return out  # `failed` reports it, with the error's message
        asked = [r for r in result.interrupts if not r.client_tool]
        pending = [r.call_id for r in result.interrupts if r.client_tool]
        end: Any = RunFinishedSuccessOutcome()
        if result.stop_reason == "interrupted" and asked:
            end = RunFinishedInterruptOutcome(interrupts=[interrupt(r) for r in asked])
        elif result.stop_reason == "interrupted" and pending:  # the client's to answer
            end = RunFinishedSuccessOutcome(pending_tool_call_ids=pending)
        elif result.stop_reason == "cancelled":
            end = RunFinishedCancelledOutcome()
        facts: dict[str, Any] = {
            "stop_reason": result.stop_reason,
            "steps": result.steps,
            "cost_usd": result.cost_usd,
            "tether_run_id": result.run_id,
        }
        if pending:
            facts["pending_tool_call_ids"] = pending
        out.append(
            RunFinishedEvent(
                thread_id=self.thread_id,
                run_id=self.run_id,
                result=output,
                outcome=end,
                usage=[token_usage(result.usage)],
                metadata=facts,
            )
        )
        return out
