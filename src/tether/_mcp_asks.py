"""What an MCP server may ask of tether while one of its tools runs: a reply from the
agent's model (`sampling/createMessage`) and an answer from the person
(`elicitation/create`).

Both are answered only for a tool call in progress, on the connection that call went out
on, as the run making that call: sampling goes to that agent's model (a subagent's own,
for a subagent's call) and is counted in the run's usage, cost and budget; a question
stops the run for the person, with that agent's path, and the call is made again once
they answer (see `tether.approval`). A server asking at any other time (while tether
lists its tools, after its call ended, or while two calls to it run at once, when tether
cannot tell which call asks) is refused with an MCP error.

The server is not trusted: what it sends is bounded and checked (`tether.questions` for
a question's form; the messages, images and token count of a sampling request here), its
`systemPrompt` is shown to the model as the server's words, never as tether's, no tool
is offered to a sampling request and no context of the run is added to it. A question in
URL mode is declined: tether opens no web page for a server.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import contextlib
import logging
from collections.abc import Awaitable, Callable, Iterator, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, Any, TypeVar

from tether import prompts
from tether.approval import (
    ANSWERS,
    CAN_ASK,
    QUESTION_DECISIONS,
    Answer,
    ApprovalRequest,
    Decision,
    Reject,
    WaitsForAnswer,
)
from tether.errors import ConfigurationError, TetherError, describe
from tether.messages import AssistantMessage, BinaryPart, Message, TextPart, UserMessage
from tether.models.base import ModelRequest, ModelResponse, ModelSettings
from tether.questions import MOST_ANSWERED, Question, QuestionError, answer_of, question_of
from tether.state import SAMPLE, ToolContext

if TYPE_CHECKING:
    from mcp import types
    from mcp.client.session import ClientRequestContext

    from tether.mcp import MCPServer

__all__ = ["MOST_SAMPLED_TOKENS", "Calls", "Running", "declare_form_only", "session_options"]

logger = logging.getLogger(__name__)
_T = TypeVar("_T")

MOST_SAMPLED_TOKENS = 4_096
"""The most tokens one sampling request may have the model write (its `maxTokens` is cut
to this, and to what the run's token limits leave)."""
_MOST_SAMPLES = 10
"""Sampling requests answered during one tool call; later ones are refused."""
_MOST_MESSAGES = 50
_MOST_TEXT = 100_000
"""Characters of text in one sampling request, its system prompt included."""
_MOST_IMAGES = 8
_MOST_IMAGE_BYTES = 5_000_000
_NOTE_CHARS = 300
"""How much of a server's question the model is shown when tether declined it."""
_MOST_NOTES = 8
"""Declined questions told to the model with one call's result; the rest are counted."""


class Running:
    """One tool call in progress on a server, as what the server asks during it sees it:
    the answers recorded for it (it may be made again after the person answered) and what
    tether declined on its behalf, told to the model with the call's result."""

    def __init__(self, context: ToolContext) -> None:
        self.context = context
        recorded = context.state.data.get(ANSWERS, {}).get(context.call.id, ())
        self.recorded: tuple[dict[str, Any], ...] = tuple(recorded)
        self.used: list[int] = []
        """Which recorded answers this attempt of the call has given, in order."""
        self.samples = 0
        self.notes: list[str] = []
        self._left_out = 0
        self.ended = False
        """Whether the call ended: a sample asked for it after that is refused."""
        self._sampling: set[asyncio.Future[Any]] = set()
        self._asked: asyncio.Future[ApprovalRequest] = asyncio.get_running_loop().create_future()

    @property
    def waiting(self) -> bool:
        """Whether the call stopped to wait for the person's answer."""
        return self._asked.done()

    def wait_for_person(self, request: ApprovalRequest) -> None:
        """Stop the call: the run waits for the person to decide `request`."""
        if not self._asked.done():
            self._asked.set_result(request)

    async def sampled(self, sample: Awaitable[_T]) -> _T:
        """`sample`, made for this call: cancelled when the call ends first (then
        `asyncio.CancelledError` is raised here)."""
        task = asyncio.ensure_future(sample)
        self._sampling.add(task)
        try:
            return await asyncio.shield(task)
        except asyncio.CancelledError:
            task.cancel()
            raise
        finally:
            self._sampling.discard(task)

    async def end(self) -> None:
        """The call ended: no sample starts for it any more, and those still running are
        cancelled and waited for, so none is charged to the run after the call's result."""
        self.ended = True
        running = tuple(self._sampling)
        for task in running:
            task.cancel()
        if running:
            await asyncio.wait(running, timeout=5)

    def note(self, asker: str, message: str, why: str) -> None:
        """Tell the model, with the call's result, that tether declined a question."""
        if len(self.notes) >= _MOST_NOTES:  # the rest are counted, in a last note
            self._left_out += 1
            more = f"[and {self._left_out} more questions tether declined in this call]"
            self.notes[_MOST_NOTES:] = [more]
            return
        shown = message if len(message) <= _NOTE_CHARS else message[:_NOTE_CHARS] + "…"
        self.notes.append(prompts.render("question_declined", asker=asker, message=shown, why=why))

    async def until_asked(self, answer: Awaitable[_T]) -> _T:
        """`answer` (the call's), unless the server asks the person a question first: the
        call is then cancelled (the server is told) and `WaitsForAnswer` raised."""
        call = asyncio.ensure_future(answer)
        try:
            await asyncio.wait((call, self._asked), return_when=asyncio.FIRST_COMPLETED)
        except BaseException:  # the run is stopped: so is the call
            call.cancel()
            await asyncio.wait((call,), timeout=5)
            raise
        if not self._asked.done():
            return call.result()
        if call.done():
            if not call.cancelled():
                call.exception()  # seen: the question wins
        else:
            call.cancel()
            await asyncio.wait((call,), timeout=5)
        raise WaitsForAnswer(self._asked.result())


class Calls:
    """The tool calls in progress on one connection to a server."""

    def __init__(self) -> None:
        self._running: list[Running] = []

    @contextlib.contextmanager
    def holding(self, running: Running) -> Iterator[None]:
        """`running` is in progress on this connection for the block."""
        self._running.append(running)
        try:
            yield
        finally:
            self._running.remove(running)

    def sole(self) -> Running | str:
        """The one call in progress, or why a server's request cannot be put to one."""
        if not self._running:
            return "no tool call of a run is in progress on this connection to ask for"
        if len(self._running) > 1:
            return (
                f"{len(self._running)} tool calls are in progress on this connection at once, "
                "and tether cannot tell which one asks"
            )
        return self._running[0]

    def of_one_run(self) -> Running | str:
        """A call in progress, when all in progress belong to one run (and one agent):
        the one that sampled least, as a sample cannot be told to be any one's."""
        if len(self._running) > 1:
            first = self._running[0].context.state
            if any(r.context.state is not first for r in self._running):
                return "calls of several runs are in progress on this connection at once"
            return min(self._running, key=lambda running: running.samples)
        return self.sole()


def session_options(server: MCPServer, calls: Calls) -> dict[str, Any]:
    """The callbacks a session to `server` answers sampling and questions with, for what
    `server` allows; a callback left out is a capability the session does not declare."""
    options: dict[str, Any] = {}
    if server.sampling:

        async def sampling(
            context: ClientRequestContext, params: types.CreateMessageRequestParams
        ) -> types.CreateMessageResult | types.ErrorData:
            return await _sample(server, calls, params)

        options["sampling_callback"] = sampling
    if server.elicitation is not False:

        async def elicitation(
            context: ClientRequestContext, params: types.ElicitRequestParams
        ) -> types.ElicitResult | types.ErrorData:
            return await _elicit(server, calls, params)

        options["elicitation_callback"] = elicitation
    return options


def declare_form_only(session: Any) -> None:
    """Make `session` declare form-mode elicitation only: the SDK declares URL mode too
    when it has a callback, and tether opens no web page for a server (a server that
    asks in URL mode anyway is declined)."""
    build = getattr(session, "_build_capabilities", None)
    if build is None:  # another SDK: URL questions are still declined
        return
    from mcp import types

    def built(version: str) -> Any:
        capabilities = build(version)
        if capabilities.elicitation is None:
            return capabilities
        form = types.ElicitationCapability(form=types.FormElicitationCapability())
        return capabilities.model_copy(update={"elicitation": form})

    session._build_capabilities = built


def _error(code: int, message: str) -> types.ErrorData:
    from mcp import types

    return types.ErrorData(code=code, message=message)


# -- sampling --------------------------------------------------------------------------


async def _sample(
    server: MCPServer, calls: Calls, params: types.CreateMessageRequestParams
) -> types.CreateMessageResult | types.ErrorData:
    from mcp import types

    found = calls.of_one_run()
    if isinstance(found, str):
        return _error(types.INVALID_REQUEST, f"tether refused to sample: {found}")
    sample: Callable[[ModelRequest], Awaitable[ModelResponse]] | None
    sample = found.context.state.data.get(SAMPLE)
    try:
        if sample is None:
            raise ValueError("this run has no model to sample")
        if found.samples >= _MOST_SAMPLES:
            raise ValueError(f"{_MOST_SAMPLES} requests during one tool call at most")
        request = await _request_of(server.name, params)
        if found.ended:  # before, or while the request was read
            raise ValueError("the tool call ended")
    except ValueError as exc:
        return _error(types.INVALID_PARAMS, f"tether refused to sample: {exc}")
    found.samples += 1
    try:
        response = await _reply(found, sample(request), server.timeout_seconds)
    except TimeoutError as exc:
        return _error(types.INTERNAL_ERROR, str(exc) or "the model did not answer in time")
    except asyncio.CancelledError:
        task = asyncio.current_task()
        if not found.ended or (task is not None and task.cancelling()):
            raise  # the session itself is stopped
        return _error(types.INVALID_REQUEST, "tether refused to sample: the tool call ended")
    except TetherError as exc:
        return _error(types.INVALID_REQUEST, f"tether refused to sample: {exc}")
    stop = {"stop": "endTurn", "length": "maxTokens"}.get(response.finish_reason or "")
    return types.CreateMessageResult(
        role="assistant",
        content=types.TextContent(type="text", text=response.message.text),
        model=response.model_name or "unknown",
        stop_reason=stop or response.finish_reason,
    )


async def _reply(
    running: Running, sample: Awaitable[ModelResponse], seconds: float
) -> ModelResponse:
    """The model's reply to a sample for `running`, within `seconds`; `TimeoutError`
    when it took longer or a content filter stopped it."""
    async with asyncio.timeout(seconds):
        response = await running.sampled(sample)
    if response.finish_reason == "content_filter":
        raise TimeoutError("the provider's content filter stopped the reply")
    return response


async def _request_of(server: str, params: types.CreateMessageRequestParams) -> ModelRequest:
    """A server's sampling request as a request to the model: its messages (text and
    images), its system prompt as its own words in the first user turn, no tools, and
    its `maxTokens` cut to `MOST_SAMPLED_TOKENS`. Raises `ValueError` saying what is wrong.
    Its `includeContext`, `temperature`, `stopSequences`, `modelPreferences` and
    `metadata` are advice tether does not take: the run's model and settings answer."""
    from tether._mcp_stdio import MOST_SAMPLED_BLOCKS, OFF_LOOP_BYTES

    if params.tools or params.tool_choice is not None:
        raise ValueError("tether offers no tools to a sampling request")
    if not params.messages or len(params.messages) > _MOST_MESSAGES:
        raise ValueError(f"a request holds 1 to {_MOST_MESSAGES} messages")
    if isinstance(params.max_tokens, bool) or params.max_tokens < 1:
        raise ValueError(f"maxTokens must be a positive number, got {params.max_tokens!r}")
    blocks = [(m.role, m.content_as_list) for m in params.messages]
    if sum(len(content) for _, content in blocks) > MOST_SAMPLED_BLOCKS:
        raise ValueError(f"a request holds at most {MOST_SAMPLED_BLOCKS} content blocks")
    system = params.system_prompt or ""
    text = sum(len(getattr(b, "text", "") or "") for _, content in blocks for b in content)
    if text + len(system) > _MOST_TEXT:
        raise ValueError(f"a request holds at most {_MOST_TEXT:,} characters of text")
    weight = sum(len(getattr(b, "data", "") or "") for _, content in blocks for b in content)
    if weight > OFF_LOOP_BYTES:  # megabytes of base64: decoded off the event loop
        messages = await asyncio.to_thread(_messages, blocks)
    else:
        messages = _messages(blocks)
    if system:
        said = TextPart(f"[The instructions of MCP server '{server}', not the user's:]\n{system}")
        first = messages[0]
        if isinstance(first, UserMessage):
            messages[0] = UserMessage((said, *first.content))
        else:
            messages.insert(0, UserMessage((said,)))
    return ModelRequest(
        system_prompt=prompts.render("mcp_sampling", server=server),
        messages=tuple(messages),
        settings=ModelSettings(max_tokens=min(params.max_tokens, MOST_SAMPLED_TOKENS)),
    )


def _messages(blocks: Sequence[tuple[str, Sequence[Any]]]) -> list[Message]:
    images = 0
    messages: list[Message] = []
    for role, content in blocks:
        parts: list[TextPart | BinaryPart] = []
        for block in content:
            kind = getattr(block, "type", None)
            if kind == "text":
                parts.append(TextPart(block.text))
            elif kind == "image":
                images += 1
                if images > _MOST_IMAGES:
                    raise ValueError(f"a request holds at most {_MOST_IMAGES} images")
                parts.append(_image(block.data, block.mime_type, role))
            elif kind == "audio":
                parts.append(TextPart(f"[{block.mime_type} audio, not heard]"))
            else:
                raise ValueError(f"content of type {kind!r} is not sampled (no tools are offered)")
        if role == "user":
            messages.append(UserMessage(tuple(parts)))
        else:
            messages.append(AssistantMessage(tuple(p for p in parts if isinstance(p, TextPart))))
    return messages


def _image(data: str, mime: str, role: str) -> TextPart | BinaryPart:
    if not mime.startswith("image/"):
        raise ValueError(f"an image has media type {mime!r}")
    if len(data) * 3 // 4 > _MOST_IMAGE_BYTES:
        raise ValueError(f"an image is over {_MOST_IMAGE_BYTES:,} bytes")
    try:
        decoded = base64.b64decode(data, validate=True)
    except (binascii.Error, ValueError):
        raise ValueError("an image's data is not base64") from None
    if role != "user":  # a model's own turn holds text only
        return TextPart(f"[{mime} image]")
    return BinaryPart(decoded, mime)


# -- questions -------------------------------------------------------------------------


async def _elicit(
    server: MCPServer, calls: Calls, params: types.ElicitRequestParams
) -> types.ElicitResult | types.ErrorData:
    from mcp import types

    found = calls.sole()
    if isinstance(found, str):
        return _error(types.INVALID_REQUEST, f"tether did not ask the person: {found}")
    running = found
    asker = f"MCP server {server.name!r}"
    message = params.message if isinstance(params.message, str) else ""
    if getattr(params, "mode", "form") == "url":
        running.note(asker, message, "tether opens no web page for a server")
        return types.ElicitResult(action="decline")
    try:
        question = question_of(message, getattr(params, "requested_schema", None), asker=asker)
    except QuestionError as exc:
        running.note(asker, message, f"its form is not one tether asks ({exc})")
        return _error(types.INVALID_PARAMS, f"tether did not ask the person: {exc}")
    if running.waiting:
        return _error(types.INVALID_REQUEST, "tether did not ask: the call already waits")
    if callable(server.elicitation):
        return await _answer_here(server, question, running)
    return _recorded_or_wait(question, running)


def _recorded_or_wait(question: Question, running: Running) -> types.ElicitResult | types.ErrorData:
    """The person's recorded answer to `question` in this call, or the run stops for it."""
    from mcp import types

    from tether.questions import recorded_answer

    index = recorded_answer(running.recorded, question, running.used)
    if index is not None:
        running.used.append(index)
        return _result(running.recorded[index]["answer"])
    state, call = running.context.state, running.context.call
    if len(running.used) >= MOST_ANSWERED:
        why = f"one call may ask at most {MOST_ANSWERED} questions"
        running.note(question.asker, question.message, why)
        return types.ElicitResult(action="decline")
    if not state.data.get(CAN_ASK, False):
        why = (
            "the run has no thread to wait on (give it a thread_id to be asked)"
            if state.thread_id is None
            else "a subagent in the background cannot wait for a person"
        )
        running.note(question.asker, question.message, why)
        return types.ElicitResult(action="decline")
    answered = tuple(running.recorded[i] for i in running.used)
    asked = replace(question, answered=answered)
    running.wait_for_person(
        ApprovalRequest(
            call.id, call.name, call.args, QUESTION_DECISIONS, state.path, question=asked
        )
    )
    return _error(
        types.INVALID_REQUEST,
        "tether stopped this call to ask the person; it makes the call again once they answer",
    )


def _result(answer: dict[str, Any]) -> types.ElicitResult:
    from mcp import types

    action = answer["action"]
    content = answer.get("content") if action == "accept" else None
    return types.ElicitResult(action=action, content=content)


async def _answer_here(
    server: MCPServer, question: Question, running: Running
) -> types.ElicitResult | types.ErrorData:
    """The answer of `server.elicitation` (the caller's own function) to `question`."""
    from mcp import types

    answerer = server.elicitation
    assert callable(answerer)
    try:
        async with asyncio.timeout(server.timeout_seconds):
            decision: Decision = await answerer(question)
        if isinstance(decision, Reject):
            decision = Answer(action="decline")
        if not isinstance(decision, Answer):
            raise ConfigurationError(f"answered with {decision!r:.100}, not Answer or Reject")
        content = answer_of(question, decision.content) if decision.action == "accept" else None
    except TimeoutError:
        running.note(question.asker, question.message, "nobody answered in time")
        return types.ElicitResult(action="cancel")
    except Exception as exc:
        logger.warning(
            "the elicitation function of MCP server %r failed", server.name, exc_info=True
        )
        return _error(types.INTERNAL_ERROR, f"the client failed to answer: {describe(exc)}")
    return types.ElicitResult(action=decision.action, content=content)
