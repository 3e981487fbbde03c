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
    FunctionCall,
    Interrupt,
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
from tether.tools.files import change_diff

__all__ = [
    "AguiUser",
    "Translator",
    "change_of",
    "interrupt",
    "interrupt_id",
    "messages",
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
    """An approval request as an AG-UI interrupt; `metadata` holds what a card shows."""
    shown: dict[str, Any] = {
        "tool": request.tool,
        "args": request.args,
        "allowed": list(request.allowed),
        "path": list(request.path),
    }
    return Interrupt(
        id=interrupt_id(request),
        reason="tool_approval",
        message=f"{request.tool} waits for a decision",
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


def _result_text(result: ToolResult) -> str:
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
                        content=_result_text(result),
                        error=_result_text(result) if result.is_error else None,
                    )
                )
    return out


class Translator:
    """Turns one run's tether events into AG-UI events, in order.

    `thread_id` and `run_id` are the AG-UI run's. Text, thinking and tool calls are
    numbered per run, so message ids never repeat within it.
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
        self._state: dict[str, Any] = {"todos": [], "steps": 0, "usage": {}, "cost_usd": 0.0}

    def _id(self, kind: str) -> str:
        self._count += 1
        return f"{self.run_id}.{kind}{self._count}"

    def translate(self, event: Event) -> list[BaseEvent]:
        """The AG-UI events `event` stands for: none for a main run's end in an error,
        which `failed` reports with the error's message."""
        handler: Callable[[Any], list[BaseEvent]] = getattr(self, "_on_" + event.kind)
        return handler(event)

    def _on_tool_call_started(self, event: ToolCallStarted) -> list[BaseEvent]:
        return [*self._close(event.path), *self._announce(event.call, event.path)]

    def _on_step_finished(self, event: StepFinished) -> list[BaseEvent]:
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
                mid = self._text[path] = self._id("text")
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
        if call_id is None or event.tool is None:
            return []
        sub = subagent_id(path)
        out: list[BaseEvent] = []
        if (path, call_id) not in self._announced:
            out += self._close(path)  # the text before it, and the call before it, are done
            self._announced.add((path, call_id))
            self._streaming.setdefault(path, []).append(call_id)
            out.append(
                ToolCallStartEvent(
                    tool_call_id=call_id, tool_call_name=event.tool, subagent_run_id=sub
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
        key = (path, call.id)
        if key in self._announced:
            return []
        self._announced.add(key)
        sub = subagent_id(path)
        return [
            ToolCallStartEvent(tool_call_id=call.id, tool_call_name=call.name, subagent_run_id=sub),
            ToolCallArgsEvent(tool_call_id=call.id, delta=_arguments(call), subagent_run_id=sub),
            ToolCallEndEvent(tool_call_id=call.id, subagent_run_id=sub),
        ]

    def _on_tool_call_finished(self, event: ToolCallFinished) -> list[BaseEvent]:
        result, sub = event.result, subagent_id(event.path)
        out = [*self._close(event.path), *self._announce(event.call, event.path)]
        facts: dict[str, Any] = {"is_error": result.is_error}
        if event.decided is not None:
            facts["decided"] = event.decided
        out.append(
            ToolCallResultEvent(
                message_id=self._id("result"),
                tool_call_id=event.call.id,
                content=_result_text(result),
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
            if result.stop_reason == "error":
                out.append(SubagentErrorEvent(subagent_run_id=sub, message="the subagent failed"))
                return out
            outcome: Any = SubagentFinishedSuccessOutcome()
            if result.stop_reason == "interrupted":
                ids = [interrupt_id(r) for r in result.interrupts]
                outcome = SubagentFinishedSuspendedOutcome(interrupt_ids=ids)
            out.append(SubagentFinishedEvent(subagent_run_id=sub, result=output, outcome=outcome))
            return out
        if result.stop_reason == "error":
            return out  # `failed` reports it, with the error's message
        end: Any = RunFinishedSuccessOutcome()
        if result.stop_reason == "interrupted" and result.interrupts:
            end = RunFinishedInterruptOutcome(interrupts=[interrupt(r) for r in result.interrupts])
        elif result.stop_reason == "cancelled":
            end = RunFinishedCancelledOutcome()
        facts = {
            "stop_reason": result.stop_reason,
            "steps": result.steps,
            "cost_usd": result.cost_usd,
            "tether_run_id": result.run_id,
        }
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
