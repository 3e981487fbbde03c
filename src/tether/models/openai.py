"""OpenAI's models, and any server that speaks its API, through the official `openai` SDK.

```python
from tether.models.openai import OpenAIModel
OpenAIModel("gpt-5.2")                                         # Responses API, OPENAI_API_KEY
OpenAIModel("qwen3", base_url="http://localhost:8000/v1")       # Chat Completions
```

With no `base_url` (and no `OPENAI_BASE_URL`) the model talks to OpenAI through the
Responses API. With one, it speaks Chat Completions, which vLLM, Ollama, llama.cpp's
server, LiteLLM and OpenRouter all serve; `api=` picks either explicitly.
"""

from __future__ import annotations

import base64
import json
import os
from collections.abc import AsyncGenerator, Iterable
from dataclasses import dataclass, field
from typing import Any, Literal

from tether.errors import ConfigurationError, ModelError
from tether.messages import (
    AssistantMessage,
    AssistantPart,
    BinaryPart,
    ContentPart,
    Message,
    TextPart,
    ThinkingPart,
    ToolCall,
    ToolResultMessage,
    Usage,
)
from tether.models import _sdk
from tether.models._chat_stream import ChatReader, decode_arguments, stream_error
from tether.models.base import (
    ModelRequest,
    ModelResponse,
    StreamDelta,
    StreamItem,
    ToolSpec,
)
from tether.models.profiles import ModelProfile

__all__ = ["AZURE_API_VERSION", "OpenAIModel", "azure_model"]

PROVIDER = "openai"
_NO_KEY = "not-needed"  # compatible servers usually ignore the key, but the SDK wants one


class OpenAIModel(_sdk.HTTPAdapter):
    """A model behind the OpenAI API or a compatible server.

    `client` takes a ready `openai.AsyncOpenAI` (Azure, a proxy); otherwise one is made
    per event loop from `api_key` (default: `OPENAI_API_KEY`, optional with a
    `base_url`), `base_url` (default: `OPENAI_BASE_URL`) and `http_client`. tether
    retries rate limits, server errors and dropped connections `max_retries` times (see
    `tether.models` for how). `provider` names who serves the model, for prices and
    profiles: "openai" without a `base_url`, unknown with one. `api_version` makes it an
    Azure OpenAI model (see `azure_model`).

    Over Chat Completions, streams are read as the servers that copy the API really send
    them (names repeated, calls without an index, usage missing: see
    `tether.models._chat_stream`). Usage is asked for in streams; a server that refuses
    `stream_options` is asked without it from then on, and a reply without usage is
    estimated by the loop (with a `UsageEstimatedWarning`).
    """

    key_hint = "OPENAI_API_KEY (and OPENAI_BASE_URL for other servers)"

    def __init__(
        self,
        name: str,
        *,
        api_key: str | None = None,
        base_url: str | None = None,
        api: Literal["chat", "responses"] | None = None,
        client: Any = None,
        http_client: Any = None,
        max_retries: int = _sdk.DEFAULT_MAX_RETRIES,
        timeout_seconds: float = _sdk.DEFAULT_TIMEOUT_SECONDS,
        provider: str | None = None,
        profile: ModelProfile | None = None,
        api_version: str | None = None,
    ) -> None:
        base_url = base_url or os.environ.get("OPENAI_BASE_URL") or None
        compatible = base_url is not None
        if provider is None and not compatible:
            provider = PROVIDER
        super().__init__(name, provider, profile, max_retries)
        self._sdk = _sdk.require("openai", "openai")
        self._api = api or ("chat" if compatible else "responses")
        self._api_version = api_version
        self._timeout = timeout_seconds
        self._usage_in_streams = True  # until the server refuses `stream_options`
        if client is None and compatible:
            api_key = api_key or os.environ.get("OPENAI_API_KEY") or _NO_KEY
        elif client is None:
            api_key = _sdk.env_key(api_key, "OPENAI_API_KEY", provider=PROVIDER)
        if api_version is None:
            make = lambda **options: self._sdk().AsyncOpenAI(**options)  # noqa: E731
        else:  # Azure's client: deployments in the path, the version in the query
            make = lambda **options: self._sdk().AsyncAzureOpenAI(  # noqa: E731
                api_version=api_version, **options
            )
        self._clients = _sdk.LoopClients(
            make,
            client,
            api_key=api_key,
            base_url=base_url,
            timeout=timeout_seconds,
            http_client=http_client,
        )

    @property
    def api(self) -> Literal["chat", "responses"]:
        """Which OpenAI API this model speaks."""
        return "chat" if self._api == "chat" else "responses"

    def __repr__(self) -> str:
        return f"OpenAIModel({self._name!r}, api={self.api!r}, provider={self._provider!r})"

    def _where(self) -> str:
        path = "chat/completions" if self.api == "chat" else "responses"
        if self._api_version is not None:  # Azure: as its client writes the URL
            path = f"deployments/{self._name}/{path}?api-version={self._api_version}"
        return _sdk.endpoint(self._clients, path)

    @property
    def server_url(self) -> str:
        """The URL requests go to."""
        return self._where()

    async def _attempt(self, request: ModelRequest) -> AsyncGenerator[StreamItem, None]:
        client = self._clients.get()
        if self.api == "chat":
            events = await self._chat_stream(client, request)
            reader: ChatReader | _ResponsesReader = ChatReader(self._name)
        else:
            events = await client.responses.create(**self.responses_params(request))
            reader = _ResponsesReader(self._name)
        async with events:  # closes the response if the caller stops early
            await _sdk.check_event_stream(events.response, self._provider or "the server")
            async for event in events:
                error = stream_error(event) if self.api == "chat" else None
                if error is not None:  # vLLM's: raised as the SDK raises `{"error": ...}`
                    raise self._stream_error(error, events.response)
                for delta in reader.read(event):
                    yield delta
        yield reader.response()

    def _stream_error(self, body: dict[str, Any], response: Any) -> Exception:
        """vLLM's error chunk as the SDK's error for an error event, so the two are
        retried (or not) alike."""
        message = body.get("message")
        if not isinstance(message, str) or not message:
            message = "An error occurred during streaming"
        error: Exception = self._sdk().APIError(message, response.request, body=body)
        return error

    # -- Chat Completions --------------------------------------------------------

    async def _chat_stream(self, client: Any, request: ModelRequest) -> Any:
        params = self.chat_params(request)
        try:
            return await client.chat.completions.create(**params)
        except Exception as exc:
            if "stream_options" not in params or not _refuses_stream_options(exc):
                raise
        # Servers that refuse the option (Azure before 2024-09, strict validators) stream
        # without usage, which the loop then estimates; they are not asked again.
        self._usage_in_streams = False
        return await client.chat.completions.create(**self.chat_params(request))

    def chat_params(self, request: ModelRequest) -> dict[str, Any]:
        """The keyword arguments of `chat.completions.create` for `request`."""
        settings = request.settings
        messages: list[dict[str, Any]] = []
        if request.system_prompt:
            messages.append({"role": "system", "content": request.system_prompt})
        messages += _chat_messages(request.messages)
        params: dict[str, Any] = {
            "model": self._name,
            "messages": messages,
            "stream": True,
            "timeout": settings.timeout_seconds or self._timeout,
        }
        if self._usage_in_streams:
            params["stream_options"] = {"include_usage": True}
        if request.tools:
            params["tools"] = [_chat_tool(t) for t in request.tools]
        if settings.max_tokens is not None:
            # OpenAI's reasoning models only take the new name; other servers know the old.
            key = "max_completion_tokens" if self._provider == PROVIDER else "max_tokens"
            params[key] = settings.max_tokens
        if settings.temperature is not None:
            params["temperature"] = settings.temperature
        output = request.output_spec
        if request.force_output and output is not None:
            if self.profile.supports_structured_output:
                params["response_format"] = {
                    "type": "json_schema",
                    "json_schema": {
                        "name": _sdk.schema_name(output.name),
                        "schema": dict(output.parameters),
                    },
                }
                params["tool_choice"] = "none"
            else:
                params["tool_choice"] = {"type": "function", "function": {"name": output.name}}
        if settings.extra:
            params["extra_body"] = dict(settings.extra)
        return params

    # -- Responses ---------------------------------------------------------------

    def responses_params(self, request: ModelRequest) -> dict[str, Any]:
        """The keyword arguments of `responses.create` for `request`."""
        settings = request.settings
        params: dict[str, Any] = {
            "model": self._name,
            "input": _responses_input(request.messages),
            "stream": True,
            "store": False,
            "timeout": settings.timeout_seconds or self._timeout,
        }
        if request.system_prompt:
            params["instructions"] = request.system_prompt
        if self.profile.supports_thinking:
            # Stateless turns: reasoning comes back encrypted and is sent with the next turn.
            params["include"] = ["reasoning.encrypted_content"]
        if request.tools:
            params["tools"] = [
                {
                    "type": "function",
                    "name": t.name,
                    "description": t.description,
                    "parameters": dict(t.parameters),
                    "strict": False,
                }
                for t in request.tools
            ]
        if settings.max_tokens is not None:
            params["max_output_tokens"] = settings.max_tokens
        if settings.temperature is not None:
            params["temperature"] = settings.temperature
        output = request.output_spec
        if request.force_output and output is not None:
            params["text"] = {
                "format": {
                    "type": "json_schema",
                    "name": _sdk.schema_name(output.name),
                    "schema": dict(output.parameters),
                    "strict": False,
                }
            }
            params["tool_choice"] = "none"
        if settings.extra:
            params["extra_body"] = dict(settings.extra)
        return params


# -- reading Responses streams -----------------------------------------------------


@dataclass
class _ResponsesReader:
    """Forwards deltas from Responses stream events and keeps the final response."""

    model: str
    call_ids: dict[str, str] = field(default_factory=dict)
    call_names: dict[str, str] = field(default_factory=dict)
    call_positions: dict[str, int] = field(default_factory=dict)
    final: Any = None
    cut: str | None = None  # why a response said it was incomplete, kept once said

    def read(self, event: Any) -> list[StreamDelta]:
        delta = self._delta(event)
        if delta is None or not isinstance(delta.delta, str) or not delta.delta:
            return []  # a null or odd piece from a server copying the API says nothing
        return [delta]

    def _delta(self, event: Any) -> StreamDelta | None:
        kind = event.type
        if kind == "response.output_text.delta":
            return StreamDelta("text", event.delta)
        if kind in ("response.reasoning_summary_text.delta", "response.reasoning_text.delta"):
            return StreamDelta("thinking", event.delta)
        if kind == "response.output_item.added" and event.item.type == "function_call":
            item = event.item.id or ""
            self.call_ids[item] = event.item.call_id
            self.call_names[item] = event.item.name
            self.call_positions.setdefault(item, len(self.call_positions))
        elif kind == "response.function_call_arguments.delta":
            item = event.item_id
            call_id, tool = self.call_ids.get(item), self.call_names.get(item)
            position = self.call_positions.get(item)
            return StreamDelta("tool_call", event.delta, call_id, tool, position)
        elif kind in ("response.completed", "response.incomplete"):
            self.final = event.response
            reason = _incomplete_reason(event.response)
            if reason is not None and self.cut != "content_filter":  # a filter's is final
                self.cut = reason
        elif kind == "response.failed":
            error = event.response.error
            raise ModelError(f"{PROVIDER} failed the response: {getattr(error, 'message', error)}")
        elif kind == "error":
            raise ModelError(f"{PROVIDER} stream error: {event.message}")
        return None

    def response(self) -> ModelResponse:
        final = self.final
        if final is None:
            raise ModelError("the stream ended before the reply was complete")
        # A later `response.completed` does not undo an earlier incomplete one.
        reason = self.cut
        finish = {"max_output_tokens": "length", "content_filter": "content_filter"}.get(
            str(reason), reason
        )
        parts = _responses_parts(final.output, cut=finish == "length")
        if finish is None:
            finish = "tool_calls" if any(isinstance(p, ToolCall) for p in parts) else "stop"
        message = AssistantMessage(
            tuple(parts), final.model or self.model, _responses_usage(final.usage)
        )
        return ModelResponse(message, finish, getattr(final, "id", None))


def _incomplete_reason(response: Any) -> str | None:
    """Why a final response says it is incomplete, or None when it does not."""
    reason = getattr(getattr(response, "incomplete_details", None), "reason", None)
    if reason is None:
        return None
    return reason if isinstance(reason, str) and reason else "unknown"


def _responses_usage(usage: Any) -> Usage:
    """A Responses usage object's counts; any of it may be missing (servers that speak
    the API are not all OpenAI's)."""
    details = getattr(usage, "input_tokens_details", None)
    return Usage(
        input_tokens=_sdk.usage_int(getattr(usage, "input_tokens", None)),
        output_tokens=_sdk.usage_int(getattr(usage, "output_tokens", None)),
        cache_read_tokens=_sdk.usage_int(getattr(details, "cached_tokens", None)),
        cache_write_tokens=_sdk.usage_int(getattr(details, "cache_write_tokens", None)),
        requests=1,
    )


def _responses_parts(output: Iterable[Any], *, cut: bool) -> list[AssistantPart]:
    items = list(output)
    parts: list[AssistantPart] = []
    for n, item in enumerate(items):
        if item.type == "message":
            text = "".join(
                getattr(c, "text", None) or getattr(c, "refusal", None) or "" for c in item.content
            )
            if text:
                parts.append(TextPart(text))
        elif item.type == "reasoning":
            summary = "\n\n".join(s.text for s in item.summary)
            parts.append(ThinkingPart(summary, item.encrypted_content, PROVIDER, item.id))
        elif item.type == "function_call":
            name, call_id = _call_field(item, "name"), _call_field(item, "call_id")
            arguments = getattr(item, "arguments", None)
            if not isinstance(arguments, str):  # never guessed, not even as {}
                raise ModelError(
                    f"the server sent a function call ({name}) whose arguments are "
                    f"{arguments!r:.80}, not text"
                )
            truncated = cut and n == len(items) - 1
            args = arguments if truncated else decode_arguments(arguments)
            parts.append(ToolCall(name, args, call_id))
    return parts


def _call_field(item: Any, key: str) -> str:
    """A function call's `name` or `call_id`, which must be text: the server's own error
    otherwise, never a crash of the loop."""
    value = getattr(item, key, None)
    if not isinstance(value, str) or not value:
        raise ModelError(f"the server sent a function call whose {key} is {value!r:.80}, not text")
    return value


# -- writing requests --------------------------------------------------------------


def _encode(args: dict[str, Any] | str) -> str:
    """Arguments for the wire: never broken JSON, even for a call that was cut off."""
    return json.dumps(args) if isinstance(args, dict) else "{}"


def _refuses_stream_options(exc: Exception) -> bool:
    """Whether an error is a server refusing the `stream_options` parameter."""
    status = getattr(exc, "status_code", None)
    said = f"{getattr(exc, 'body', None)} {exc}"
    return status in (400, 422) and "stream_options" in said


def _chat_tool(spec: ToolSpec) -> dict[str, Any]:
    return {
        "type": "function",
        "function": {
            "name": spec.name,
            "description": spec.description,
            "parameters": dict(spec.parameters),
        },
    }


def _chat_messages(messages: Iterable[Message]) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for message in messages:
        if isinstance(message, AssistantMessage):
            calls = message.tool_calls
            # Never null, nor left out, beside tool calls: OpenAI takes both, but servers
            # that render the turn with the model's chat template (llama.cpp's Python
            # server, LM Studio) fail on them; every server takes an empty string.
            entry: dict[str, Any] = {"role": "assistant", "content": message.text}
            if calls:
                entry["tool_calls"] = [
                    {
                        "id": c.id,
                        "type": "function",
                        "function": {"name": c.name, "arguments": _encode(c.args)},
                    }
                    for c in calls
                ]
            out.append(entry)
        elif isinstance(message, ToolResultMessage):
            media: list[ContentPart] = []
            for result in message.results:
                binary = [p for p in result.content if isinstance(p, BinaryPart)]
                note = "\n(attached below)" if binary else ""
                out.append(
                    {"role": "tool", "tool_call_id": result.call_id, "content": result.text + note}
                )
                media += binary
            if media:  # tool messages carry text only; media follows as a user turn
                out.append({"role": "user", "content": _chat_content(media)})
        else:
            out.append({"role": "user", "content": _chat_content(message.content)})
    return out


def _chat_content(parts: Iterable[ContentPart]) -> str | list[dict[str, Any]]:
    parts = tuple(parts)
    if all(isinstance(p, TextPart) for p in parts):
        return "\n".join(p.text for p in parts if isinstance(p, TextPart))
    blocks: list[dict[str, Any]] = []
    for part in parts:
        if isinstance(part, TextPart):
            blocks.append({"type": "text", "text": part.text})
        elif part.category == "image":
            blocks.append({"type": "image_url", "image_url": {"url": _data_url(part)}})
        elif part.media_type in ("audio/wav", "audio/x-wav", "audio/mpeg", "audio/mp3"):
            audio_format = "wav" if "wav" in part.media_type else "mp3"
            data = base64.b64encode(part.data).decode()
            blocks.append(
                {"type": "input_audio", "input_audio": {"data": data, "format": audio_format}}
            )
        elif part.media_type == "application/pdf":
            file = {"filename": "document.pdf", "file_data": _data_url(part)}
            blocks.append({"type": "file", "file": file})
        else:
            blocks.append({"type": "text", "text": _sdk.omitted(part, "this model")})
    return blocks


def _responses_input(messages: Iterable[Message]) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = []
    for message in messages:
        if isinstance(message, AssistantMessage):
            items += _responses_assistant(message)
        elif isinstance(message, ToolResultMessage):
            items += [
                {
                    "type": "function_call_output",
                    "call_id": r.call_id,
                    "output": r.text
                    if all(isinstance(p, TextPart) for p in r.content)
                    else _responses_content(r.content),
                }
                for r in message.results
            ]
        else:
            items.append({"role": "user", "content": _responses_content(message.content)})
    return items


def _responses_assistant(message: AssistantMessage) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = []
    for part in message.parts:
        if isinstance(part, TextPart):
            if part.text:
                items.append({"role": "assistant", "content": part.text})
        elif isinstance(part, ThinkingPart):
            if part.provider == PROVIDER and part.id and part.signature:
                summary = [{"type": "summary_text", "text": part.text}] if part.text else []
                items.append(
                    {
                        "type": "reasoning",
                        "id": part.id,
                        "summary": summary,
                        "encrypted_content": part.signature,
                    }
                )
        else:
            items.append(
                {
                    "type": "function_call",
                    "call_id": part.id,
                    "name": part.name,
                    "arguments": _encode(part.args),
                }
            )
    return items


def _responses_content(parts: Iterable[ContentPart]) -> list[dict[str, Any]]:
    blocks: list[dict[str, Any]] = []
    for part in parts:
        if isinstance(part, TextPart):
            blocks.append({"type": "input_text", "text": part.text})
        elif part.category == "image":
            blocks.append({"type": "input_image", "image_url": _data_url(part), "detail": "auto"})
        elif part.media_type == "application/pdf":
            blocks.append(
                {"type": "input_file", "filename": "document.pdf", "file_data": _data_url(part)}
            )
        else:
            blocks.append({"type": "input_text", "text": _sdk.omitted(part, "this model")})
    return blocks


def _data_url(part: BinaryPart) -> str:
    return f"data:{part.media_type};base64,{base64.b64encode(part.data).decode()}"


AZURE_API_VERSION = "2024-10-21"
"""The Azure OpenAI API version used unless `OPENAI_API_VERSION` or `api_version` says."""


def azure_model(
    deployment: str,
    *,
    endpoint: str | None = None,
    api_key: str | None = None,
    api_version: str | None = None,
    api: Literal["chat", "responses"] = "chat",
    **options: Any,
) -> OpenAIModel:
    """A deployment on Azure OpenAI ("azure:DEPLOYMENT"). `endpoint` defaults to
    `AZURE_OPENAI_ENDPOINT` (https://RESOURCE.openai.azure.com) and `api_key` to
    `AZURE_OPENAI_API_KEY`.

    Over Chat Completions (the default) it speaks with the `openai` SDK's Azure client,
    the deployment in the path and `api_version` (default `OPENAI_API_VERSION` or
    `AZURE_API_VERSION`) in the query. `api="responses"` uses the Responses API on
    Azure's v1 API (`/openai/v1`, no version), where the deployment is the model. Cost is
    priced from the model Azure reports answering, as the "azure" provider; `options` go
    to `OpenAIModel`.
    """
    endpoint = endpoint or os.environ.get("AZURE_OPENAI_ENDPOINT")
    if not endpoint:
        raise ConfigurationError(
            "Azure OpenAI models need an endpoint: set AZURE_OPENAI_ENDPOINT "
            "(https://RESOURCE.openai.azure.com) or pass endpoint="
        )
    key = _sdk.env_key(api_key, "AZURE_OPENAI_API_KEY", provider="azure")
    if api == "responses":
        if api_version is not None:
            raise ConfigurationError(
                "Azure's Responses API is its v1 API, which takes no api_version"
            )
        model = OpenAIModel(
            deployment,
            api="responses",
            base_url=f"{endpoint.rstrip('/')}/openai/v1",
            api_key=key,
            provider="azure",
            **options,
        )
        model.key_hint = "AZURE_OPENAI_API_KEY (and AZURE_OPENAI_ENDPOINT)"
        return model
    version = api_version or os.environ.get("OPENAI_API_VERSION") or AZURE_API_VERSION
    model = OpenAIModel(
        deployment,
        api="chat",
        base_url=f"{endpoint.rstrip('/')}/openai",
        api_key=key,
        provider="azure",
        api_version=version,
        **options,
    )
    model.key_hint = "AZURE_OPENAI_API_KEY (and AZURE_OPENAI_ENDPOINT)"  # said on a 401
    return model
