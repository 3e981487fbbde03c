"""Models on Amazon Bedrock through the Converse API of the official `boto3` SDK (extra
`tether[bedrock]`).

    BedrockModel("us.anthropic.claude-sonnet-4-5-20250929-v1:0")   # AWS credentials, region
    BedrockModel("amazon.nova-pro-v1:0", region="eu-west-1")

The Converse API speaks to every model Bedrock serves (Claude, Nova, Llama, Mistral,
...), with one message format and one stream; Anthropic's own Bedrock client would
reach Claude alone. boto3 is synchronous, so each request's stream is read in a thread
of its own and handed to the event loop as it arrives; a run that stops early (its
time limit, a cancel) shuts that request's socket, so a read blocked in the thread
returns at once and the thread ends; nothing waits for it on the event loop.
Credentials and region come from boto3's usual places (`AWS_PROFILE`, the
`AWS_ACCESS_KEY_ID` pair, `AWS_BEARER_TOKEN_BEDROCK`, `AWS_REGION`, instance roles)
unless given. tether retries as it does for every provider; boto3's own retries are off.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
import os
import re
import socket
import threading
import urllib.parse
from collections.abc import AsyncGenerator, Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

from tether.errors import ConfigurationError, ModelError, ProviderBlockedError
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
from tether.models.base import ModelRequest, ModelResponse, StreamDelta, StreamItem
from tether.models.profiles import ModelProfile

__all__ = ["BedrockModel"]

PROVIDER = "bedrock"
_CACHE_POINT = {"cachePoint": {"type": "default"}}
_FINISH = {
    "end_turn": "stop",
    "stop_sequence": "stop",
    "tool_use": "tool_calls",
    "max_tokens": "length",
    "model_context_window_exceeded": "length",
    "guardrail_intervened": "content_filter",
    "content_filtered": "content_filter",
    # The model's tool call was broken: the loop tells it so and asks again.
    "malformed_tool_use": "malformed_call",
    "malformed_model_output": "malformed_call",
}
# Stops that say the reply is not whole: a later ordinary stop does not undo them.
_KEPT = frozenset({"content_filter", "length", "malformed_call"})
# What an error event inside the stream is, in the terms tether's retries read.
_STREAM_ERRORS = {
    "throttlingException": "rate_limit_error",
    "serviceUnavailableException": "overloaded_error",
    "internalServerException": "api_error",
    "modelStreamErrorException": "api_error",
}
_IMAGES = {"image/png": "png", "image/jpeg": "jpeg", "image/gif": "gif", "image/webp": "webp"}
_DOCUMENTS = {
    "application/pdf": "pdf",
    "text/csv": "csv",
    "text/html": "html",
    "text/plain": "txt",
    "text/markdown": "md",
}
_END = object()


class _APIStatus(Exception):
    """An error boto3 raised, in the shape tether's retry code reads (`status_code`,
    `body`, `response` with its headers and the request's URL, `request_id`)."""

    def __init__(self, status: int, code: str, message: str, url: str, meta: Any) -> None:
        super().__init__(message or code)
        self.status_code = status
        self.type = _STREAM_ERRORS.get(code, code)
        self.body = {"error": {"type": code, "message": message or code}}
        headers = dict((meta or {}).get("HTTPHeaders") or {})
        self.request_id = (meta or {}).get("RequestId") or headers.get("x-amzn-requestid")
        self.response = _Seen(headers, url)


@dataclass
class _Seen:
    """What tether's error messages read off a response: its headers and its URL."""

    headers: dict[str, str]
    url: str

    @property
    def request(self) -> Any:
        return self


class _Broken(OSError):
    """The connection failed (refused, reset, cut in the middle of the reply)."""


class _Slow(TimeoutError):
    """No data came within the model's timeout."""


class BedrockModel(_sdk.HTTPAdapter):
    """A model on Amazon Bedrock, by its model id or inference profile id (such as
    "us.anthropic.claude-sonnet-4-5-20250929-v1:0").

    `region`, `aws_profile` and the key arguments pick the account (default: boto3's
    usual places); `base_url` points it elsewhere (a VPC endpoint, a proxy, a test
    server); `client` takes a ready `bedrock-runtime` client (its new connections are
    then watched as tether's own are, so that a stopped run can shut its socket; other
    threads' requests are untouched). `cache=False` leaves out the prompt-cache points
    (placed after the system prompt, the tools and the latest turn, for the models that
    take them).
    """

    key_hint = (
        "the AWS credentials (AWS_PROFILE, AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, or "
        "AWS_BEARER_TOKEN_BEDROCK) and that the model is enabled in the region"
    )

    def __init__(
        self,
        name: str,
        *,
        region: str | None = None,
        aws_profile: str | None = None,
        aws_access_key_id: str | None = None,
        aws_secret_access_key: str | None = None,
        aws_session_token: str | None = None,
        base_url: str | None = None,
        client: Any = None,
        max_retries: int = _sdk.DEFAULT_MAX_RETRIES,
        timeout_seconds: float = _sdk.DEFAULT_TIMEOUT_SECONDS,
        cache: bool = True,
        profile: ModelProfile | None = None,
    ) -> None:
        super().__init__(name, PROVIDER, profile, max_retries)
        self._boto3 = _sdk.require("boto3", "bedrock")
        self._given = client
        self._options = {
            "region_name": region,
            "profile_name": aws_profile,
            "aws_access_key_id": aws_access_key_id,
            "aws_secret_access_key": aws_secret_access_key,
            "aws_session_token": aws_session_token,
        }
        self._base_url = base_url.rstrip("/") if base_url else None
        self._timeout = timeout_seconds
        self._cache = cache
        self._client: Any = client
        self._watching = False
        self._lock = threading.Lock()

    @property
    def family(self) -> str | None:
        """Who made the model ("anthropic", "amazon", "meta", ...), from its id: the
        harness profile that fits it is that maker's."""
        match = re.match(r"(?:[a-z]{2,6}\.)?([a-z0-9-]+)\.", self._name)
        return match.group(1) if match else None

    def _endpoint(self) -> str:
        if self._base_url:
            return self._base_url
        if self._client is not None:
            return str(self._client.meta.endpoint_url)
        region = self._options["region_name"] or os.environ.get("AWS_REGION")
        region = region or os.environ.get("AWS_DEFAULT_REGION") or "us-east-1"
        return f"https://bedrock-runtime.{region}.amazonaws.com"

    def _where(self) -> str:
        model = urllib.parse.quote(self._name, safe="")
        return f"{self._endpoint()}/model/{model}/converse-stream"

    @property
    def server_url(self) -> str:
        """The URL requests go to."""
        return self._where()

    def _bedrock(self) -> Any:
        """The boto3 client, made once (it is safe to share between threads)."""
        with self._lock:
            if self._client is None:
                if _sdk.blocked_reason is not None and not _sdk.on_this_machine(self._base_url):
                    raise ProviderBlockedError(_sdk.blocked_reason)
                boto3 = self._boto3()
                config = boto3.session.Config(
                    read_timeout=self._timeout,
                    connect_timeout=min(self._timeout, 60.0),
                    retries={"total_max_attempts": 1, "mode": "standard"},  # tether retries
                )
                options = {k: v for k, v in self._options.items() if v is not None}
                profile = options.pop("profile_name", None)
                session = boto3.session.Session(profile_name=profile)
                try:
                    self._client = session.client(
                        "bedrock-runtime", endpoint_url=self._base_url, config=config, **options
                    )
                except Exception as exc:  # no region, an unknown profile
                    raise ConfigurationError(
                        f"cannot make a Bedrock client for {self._name!r}: {exc}"
                    ) from exc
            if not self._watching:
                _watch_connections(self._client)
                self._watching = True
            return self._client

    async def _attempt(self, request: ModelRequest) -> AsyncGenerator[StreamItem, None]:
        if self._client is None and self._given is None:
            await asyncio.to_thread(self._bedrock)  # boto3's import and setup take a while
        params = self.params(request)
        reader = _Reader()
        with _Feed(asyncio.get_running_loop(), self, params) as feed:
            while (event := await feed.next()) is not _END:
                delta = reader.read(event)
                if delta is not None:
                    yield delta
            reader.request_id = feed.request_id
        yield reader.response(self._name)

    def params(self, request: ModelRequest) -> dict[str, Any]:
        """The keyword arguments of `converse_stream` for `request`."""
        settings = request.settings
        cache = self._cache and self.profile.supports_caching
        params: dict[str, Any] = {
            "modelId": self._name,
            "messages": _messages(request.messages, cache=cache),
        }
        if request.system_prompt:
            params["system"] = [{"text": request.system_prompt}, *([_CACHE_POINT] * cache)]
        if request.tools:
            tools: list[dict[str, Any]] = [
                {
                    "toolSpec": {
                        "name": t.name,
                        "description": t.description or t.name,
                        "inputSchema": {"json": dict(t.parameters)},
                    }
                }
                for t in request.tools
            ]
            params["toolConfig"] = {"tools": [*tools, *([_CACHE_POINT] * cache)]}
            if request.force_output and request.output_tool is not None:
                params["toolConfig"]["toolChoice"] = {"tool": {"name": request.output_tool}}
        inference: dict[str, Any] = {}
        if settings.max_tokens or self.profile.max_output_tokens:
            inference["maxTokens"] = settings.max_tokens or self.profile.max_output_tokens
        if settings.temperature is not None:
            inference["temperature"] = settings.temperature
        if inference:
            params["inferenceConfig"] = inference
        if settings.extra:  # the model's own fields, such as Claude's "thinking"
            params["additionalModelRequestFields"] = dict(settings.extra)
        return params


class _Feed:
    """One request's stream, read by a thread of its own and handed to the event loop.

    Leaving the block never waits: it marks the feed closed and shuts the socket of the
    request's connection (caught as it connected, or the response's own), so a read or
    a send blocked in the thread returns at once; the thread then closes the stream
    itself and ends. A stream that was read to its end is left alone (its connection
    may be back in boto3's pool)."""

    def __init__(self, loop: asyncio.AbstractEventLoop, model: BedrockModel, params: Any) -> None:
        self._loop = loop
        self._model = model
        self._params = params
        self._queue: asyncio.Queue[Any] = asyncio.Queue()
        self._lock = threading.Lock()
        self._closed = False
        self._done = False
        self._stops: list[Callable[[], object]] = []
        self.request_id: str | None = None

    def __enter__(self) -> _Feed:
        threading.Thread(target=self._read, name="tether-bedrock", daemon=True).start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        with self._lock:
            self._closed = True
            stops, self._stops = self._stops, []
            if self._done:
                return
        for stop in stops:
            with contextlib.suppress(Exception):
                stop()

    def on_close(self, stop: Callable[[], object] | None) -> None:
        """Call `stop` (which unblocks the thread's read) when the feed closes early, or
        now if it already has."""
        if stop is None:
            return
        with self._lock:
            if not self._closed:
                if not self._done:
                    self._stops.append(stop)
                return
        with contextlib.suppress(Exception):
            stop()

    async def next(self) -> Any:
        item = await self._queue.get()
        if isinstance(item, BaseException):
            raise item
        return item

    def _put(self, item: Any, *, last: bool = False) -> None:
        with self._lock:
            if last:
                self._done, self._stops = True, []
            if self._closed:
                return
        with contextlib.suppress(RuntimeError):  # the loop is gone
            self._loop.call_soon_threadsafe(self._queue.put_nowait, item)

    def _read(self) -> None:
        _current.feed = self
        stream: Any = None
        try:
            if self._closed:
                return
            response = self._model._bedrock().converse_stream(**self._params)
            meta = response.get("ResponseMetadata") or {}
            self.request_id = meta.get("RequestId")
            stream = response["stream"]
            self.on_close(getattr(getattr(stream, "_raw_stream", None), "shutdown", None))
            _check_event_stream(stream, meta, self.request_id)
            for event in stream:
                if self._closed:
                    return
                self._put(event)
            self._put(_END, last=True)
        except Exception as exc:
            if not self._closed:
                self._put(_translated(exc, self._model._where()), last=True)
        finally:
            _current.feed = None
            if stream is not None:
                with contextlib.suppress(Exception):
                    stream.close()


_current = threading.local()
"""`feed`: the `_Feed` whose request this thread sends, if any."""


def _watch(sock: Any) -> None:
    """Tell the feed this thread reads for (if any) which socket its request uses."""
    feed = getattr(_current, "feed", None)
    if feed is not None and isinstance(sock, socket.socket):
        feed.on_close(lambda: _shut(sock))


def _shut(sock: socket.socket) -> None:
    """Shut both ways, which makes a read or send blocked in another thread return. The
    plain socket's call, also under TLS: the thread reading keeps its TLS state."""
    socket.socket.shutdown(sock, socket.SHUT_RDWR)


def _watch_connections(client: Any) -> None:
    """Make `client`'s new HTTP connections report their sockets to the feed of the
    thread that uses them (when the client is boto3's usual urllib3 one; otherwise a
    stopped run still shuts the response's socket once the headers came)."""
    session = getattr(getattr(client, "_endpoint", None), "http_session", None)
    pools = getattr(session, "_pool_classes_by_scheme", None)
    if not isinstance(pools, dict):
        return
    for scheme, pool in list(pools.items()):
        connection = getattr(pool, "ConnectionCls", None)
        if connection is None or getattr(pool, "_tether_watched", False):
            continue
        watched = {"ConnectionCls": _watched(connection), "_tether_watched": True}
        # the same dict object is the pool managers' own: new pools use these
        pools[scheme] = type(pool.__name__, (pool,), watched)


def _watched(connection: Any) -> Any:
    """`connection` (a urllib3 connection class) that reports its socket to `_watch`."""

    def connect(self: Any) -> None:
        connection.connect(self)
        _watch(self.sock)

    def request(self: Any, *args: Any, **kwargs: Any) -> Any:
        _watch(self.sock)  # a connection kept from an earlier request
        return connection.request(self, *args, **kwargs)

    return type(connection.__name__, (connection,), {"connect": connect, "request": request})


def _check_event_stream(stream: Any, meta: Any, request_id: str | None) -> None:
    """A `ModelError` unless the reply is an event stream: a proxy's HTML page where the
    stream should be is named for what it is, not read as broken frames."""
    kind = str((meta.get("HTTPHeaders") or {}).get("content-type", ""))
    if not kind or "eventstream" in kind or "event-stream" in kind:
        return
    start = stream._raw_stream.read(300)
    shown = start.decode("utf-8", errors="replace")
    raise ModelError(
        f"{PROVIDER} answered HTTP {meta.get('HTTPStatusCode')} with {kind}, not an event "
        f"stream (a proxy or the wrong base URL?); it began: {shown!r}",
        request_id=request_id,
    )


def _translated(exc: Exception, url: str) -> Exception:
    """A boto3 exception as tether's retry code reads it."""
    names = {c.__name__ for c in type(exc).__mro__}
    response = getattr(exc, "response", None)
    if isinstance(response, dict) and "Error" in response:  # ClientError, EventStreamError
        error = response.get("Error") or {}
        meta = response.get("ResponseMetadata") or {}
        code, message = str(error.get("Code", "")), str(error.get("Message", ""))
        # An error event inside the stream has no status of its own: it came in a 200.
        status = 200 if "EventStreamError" in names else int(meta.get("HTTPStatusCode") or 500)
        translated: Exception = _APIStatus(status, code, message, url, meta)
    elif names & {"ReadTimeoutError", "ConnectTimeoutError"}:
        translated = _Slow(str(exc))
    elif names & {"NoCredentialsError", "PartialCredentialsError", "NoAuthTokenError"}:
        return ModelError(f"{PROVIDER} has no credentials to sign with: {exc}")
    elif names & {"HTTPClientError", "ConnectionError", "ResponseStreamingError", "ProtocolError"}:
        # botocore's, or urllib3's own while the stream is read
        translated = _Broken(str(exc))
    else:
        return exc
    translated.__cause__ = exc
    return translated


@dataclass
class _Block:
    kind: str = "text"
    text: list[str] = field(default_factory=list)
    signature: list[str] = field(default_factory=list)
    redacted: list[bytes] = field(default_factory=list)
    call_id: str = ""
    name: str = ""
    position: int = 0
    """A call's place among the reply's tool calls."""


@dataclass
class _Reader:
    """Turns the Converse stream's events into deltas, and its blocks into a response.

    Blocks are kept in the order they arrived, which is the order the streamed calls
    were numbered in: each call keeps its own id and arguments, whatever the indexes."""

    blocks: dict[int, _Block] = field(default_factory=dict)
    calls: int = 0
    stop_reason: str | None = None
    usage: dict[str, Any] = field(default_factory=dict)
    request_id: str | None = None

    def read(self, event: dict[str, Any]) -> StreamDelta | None:
        if "contentBlockStart" in event:
            start = event["contentBlockStart"]
            call = (start.get("start") or {}).get("toolUse")
            if call is not None:
                index = start.get("contentBlockIndex", 0)
                block = _Block("tool_use", call_id=call.get("toolUseId", ""))
                block.name, block.position = call.get("name", ""), self.calls
                self.blocks[index] = block
                self.calls += 1
        elif "contentBlockDelta" in event:
            found = event["contentBlockDelta"]
            return self._delta(found.get("contentBlockIndex", 0), found.get("delta") or {})
        elif "messageStop" in event:
            said = _FINISH.get(self.stop_reason or "")
            if said not in _KEPT:  # a filter's or a cut's word stands
                self.stop_reason = event["messageStop"].get("stopReason") or "end_turn"
        elif "metadata" in event:
            self.usage.update(event["metadata"].get("usage") or {})
        return None

    def _new_call(self, index: int) -> _Block:
        """A call whose start was not seen."""
        block = self.blocks[index] = _Block("tool_use", position=self.calls)
        self.calls += 1
        return block

    def _delta(self, index: int, delta: dict[str, Any]) -> StreamDelta | None:
        if "toolUse" in delta:
            block = self.blocks.get(index) or self._new_call(index)
            piece = str(delta["toolUse"].get("input", ""))
            block.text.append(piece)
            name = block.name or None
            return StreamDelta("tool_call", piece, block.call_id or None, name, block.position)
        if "reasoningContent" in delta:
            block = self.blocks.setdefault(index, _Block("thinking"))
            reasoning = delta["reasoningContent"]
            if reasoning.get("signature"):
                block.signature.append(reasoning["signature"])
            if reasoning.get("redactedContent"):
                block.redacted.append(reasoning["redactedContent"])
            if reasoning.get("text"):
                block.text.append(reasoning["text"])
                return StreamDelta("thinking", reasoning["text"])
            return None
        if "text" in delta:
            block = self.blocks.setdefault(index, _Block("text"))
            block.text.append(delta["text"])
            return StreamDelta("text", delta["text"])
        return None

    def response(self, name: str) -> ModelResponse:
        if self.stop_reason is None:
            raise ModelError(f"the {PROVIDER} stream ended before the reply was complete")
        parts: list[AssistantPart] = []
        for block in self.blocks.values():
            text = "".join(block.text)
            if block.kind == "tool_use":
                parts.append(ToolCall(block.name, _arguments(text), block.call_id))
            elif block.kind == "thinking" and block.redacted:
                signature = b"".join(block.redacted).hex()
                parts.append(ThinkingPart("", signature, PROVIDER, redacted=True))
            elif block.kind == "thinking":
                parts.append(ThinkingPart(text, "".join(block.signature) or None, PROVIDER))
            elif text:
                parts.append(TextPart(text))
        cache_read = _sdk.usage_int(self.usage.get("cacheReadInputTokens"))
        cache_write = _sdk.usage_int(self.usage.get("cacheWriteInputTokens"))
        usage = Usage(
            input_tokens=_sdk.usage_int(self.usage.get("inputTokens")) + cache_read + cache_write,
            output_tokens=_sdk.usage_int(self.usage.get("outputTokens")),
            cache_read_tokens=cache_read,
            cache_write_tokens=cache_write,
            requests=1,
        )
        message = AssistantMessage(tuple(parts), name, usage)
        finish = _FINISH.get(self.stop_reason, self.stop_reason)
        return ModelResponse(message, finish, self.request_id)


def _arguments(streamed: str) -> dict[str, Any] | str:
    """A call's arguments: an object, or the raw text when it is not one (the loop turns
    that into an error the model reads, never a guess)."""
    if not streamed.strip():
        return {}
    try:
        value = json.loads(streamed)
    except ValueError:
        return streamed
    return value if isinstance(value, dict) else streamed


def _messages(messages: Iterable[Message], *, cache: bool) -> list[dict[str, Any]]:
    """Converse messages: tool results go in user turns; turns of one role are merged.
    Documents are numbered across the whole request: Bedrock refuses two of one name."""
    out: list[dict[str, Any]] = []
    documents = itertools.count(1)
    for message in messages:
        if isinstance(message, AssistantMessage):
            role, blocks = "assistant", _assistant_blocks(message)
        elif isinstance(message, ToolResultMessage):
            role = "user"
            blocks = [
                {
                    "toolResult": {
                        "toolUseId": r.call_id,
                        "content": _content(r.content, documents) or [{"text": "(empty)"}],
                        "status": "error" if r.is_error else "success",
                    }
                }
                for r in message.results
            ]
        else:
            role, blocks = "user", _content(message.content, documents)
        if out and out[-1]["role"] == role:
            out[-1]["content"].extend(blocks)
        else:
            out.append({"role": role, "content": blocks})
    for entry in out:
        if not entry["content"]:
            entry["content"] = [{"text": "(empty)"}]
    if cache and out:
        out[-1]["content"].append(_CACHE_POINT)
    return out


def _assistant_blocks(message: AssistantMessage) -> list[dict[str, Any]]:
    blocks: list[dict[str, Any]] = []
    for part in message.parts:
        if isinstance(part, TextPart):
            if part.text:
                blocks.append({"text": part.text})
        elif isinstance(part, ThinkingPart):
            if part.provider != PROVIDER or part.signature is None:
                continue  # verified by its signature: another provider's cannot pass
            if part.redacted:
                blocks.append(
                    {"reasoningContent": {"redactedContent": bytes.fromhex(part.signature)}}
                )
            else:
                text = {"text": part.text, "signature": part.signature}
                blocks.append({"reasoningContent": {"reasoningText": text}})
        else:
            args = part.args if isinstance(part.args, dict) else {}
            blocks.append({"toolUse": {"toolUseId": part.id, "name": part.name, "input": args}})
    return blocks


def _content(parts: Iterable[ContentPart], documents: Iterator[int]) -> list[dict[str, Any]]:
    blocks: list[dict[str, Any]] = []
    for part in parts:
        if isinstance(part, TextPart):
            if part.text:
                blocks.append({"text": part.text})
        else:
            blocks.append(_binary(part, documents))
    return blocks


def _binary(part: BinaryPart, documents: Iterator[int]) -> dict[str, Any]:
    if part.media_type in _IMAGES:
        return {"image": {"format": _IMAGES[part.media_type], "source": {"bytes": part.data}}}
    kind = _DOCUMENTS.get(part.media_type)
    if kind is not None:  # a document needs a name of letters, digits and spaces
        name = f"document {next(documents)}"
        document = {"format": kind, "name": name, "source": {"bytes": part.data}}
        return {"document": document}
    return {"text": _sdk.omitted(part, "this Bedrock model")}
