"""Loopback servers for the LangChain tests: the real `ChatAnthropic` and `ChatOpenAI`
speak HTTP to them, and they answer in the APIs' own wire format.

`Loopback` is a plain HTTP server on 127.0.0.1 whose answers come from a function of
each request, so a test can check what the client sent the way the provider does (a
Messages API request with thinking on, say, is refused as Anthropic refuses it).
"""

from __future__ import annotations

import contextlib
import json
import threading
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

CLAUDE = "claude-sonnet-4-6"


@dataclass
class Answer:
    """One HTTP answer: a status, a body and its content type."""

    body: bytes
    status: int = 200
    content_type: str = "text/event-stream"


def error_answer(status: int, kind: str, message: str) -> Answer:
    """An error body in the shape Anthropic's API sends (OpenAI's has the same keys)."""
    body = {"type": "error", "error": {"type": kind, "message": message}}
    return Answer(json.dumps(body).encode(), status, "application/json")


@dataclass
class Loopback:
    """An HTTP server on the loopback interface, in a thread of its own, answering each
    POST with `answer(path, body)`; it keeps the JSON bodies it was sent."""

    answer: Callable[[str, dict[str, Any]], Answer]
    requests: list[dict[str, Any]] = field(default_factory=list)
    _server: ThreadingHTTPServer | None = None

    @property
    def url(self) -> str:
        assert self._server is not None
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    def __enter__(self) -> Loopback:
        owner = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                length = int(self.headers.get("content-length") or 0)
                body = json.loads(self.rfile.read(length) or b"{}")
                owner.requests.append(body)
                try:
                    answer = owner.answer(self.path, body)
                except Exception as exc:  # a failed check in the test's own answer
                    answer = error_answer(500, "api_error", f"test server: {exc!r}")
                self.send_response(answer.status)
                self.send_header("content-type", answer.content_type)
                self.send_header("content-length", str(len(answer.body)))
                self.send_header("request-id", f"req_{len(owner.requests)}")
                self.send_header("connection", "close")
                self.end_headers()
                self.wfile.write(answer.body)

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        threading.Thread(target=self._server.serve_forever, args=(0.02,), daemon=True).start()
        return self

    def __exit__(self, *exc: object) -> None:
        assert self._server is not None
        self._server.shutdown()
        self._server.server_close()


def scripted(answers: Iterable[Answer]) -> Callable[[str, dict[str, Any]], Answer]:
    """An `answer` function giving `answers` in order, whatever was asked."""
    queue = list(answers)

    def answer(path: str, body: dict[str, Any]) -> Answer:
        return queue.pop(0) if queue else error_answer(500, "api_error", "no answer scripted")

    return answer


@contextlib.contextmanager
def serving(answers: Iterable[Answer]) -> Iterator[Loopback]:
    """A `Loopback` giving `answers` in order."""
    with Loopback(scripted(answers)) as server:
        yield server


def sse(events: Iterable[tuple[str | None, Any]]) -> bytes:
    """A server-sent-events body: an `event:` line when named, then the JSON data."""
    out = []
    for name, data in events:
        head = f"event: {name}\n" if name else ""
        out.append(f"{head}data: {data if isinstance(data, str) else json.dumps(data)}\n\n")
    return "".join(out).encode()


# Anthropic's Messages API -----------------------------------------------------------


def claude_events(
    blocks: list[dict[str, Any]],
    *,
    stop_reason: str | None = "end_turn",
    input_tokens: int = 30,
    output_tokens: int = 12,
) -> list[tuple[str, Any]]:
    """The events the Messages API streams for the content `blocks` (as its docs and the
    SDK's stream accumulator show them): a text or thinking block arrives in deltas, a
    thinking block's signature last; a redacted_thinking block whole, in its start event;
    a tool_use block's input as `json` text, in pieces (a cut-off one stays cut)."""
    events: list[tuple[str, Any]] = [
        (
            "message_start",
            {
                "type": "message_start",
                "message": {
                    "id": "msg_01LoopbackReply",
                    "type": "message",
                    "role": "assistant",
                    "content": [],
                    "model": CLAUDE,
                    "stop_reason": None,
                    "stop_sequence": None,
                    "usage": {"input_tokens": input_tokens, "output_tokens": 1},
                },
            },
        ),
        ("ping", {"type": "ping"}),
    ]
    for index, block in enumerate(blocks):
        deltas: list[dict[str, Any]]
        if block["type"] == "text":
            start: dict[str, Any] = {"type": "text", "text": ""}
            deltas = [{"type": "text_delta", "text": p} for p in _pieces(block["text"])]
        elif block["type"] == "thinking":
            start = {"type": "thinking", "thinking": "", "signature": ""}
            deltas = [{"type": "thinking_delta", "thinking": p} for p in _pieces(block["thinking"])]
            deltas.append({"type": "signature_delta", "signature": block["signature"]})
        elif block["type"] == "redacted_thinking":
            start, deltas = dict(block), []
        else:
            start = {"type": "tool_use", "id": block["id"], "name": block["name"], "input": {}}
            deltas = [
                {"type": "input_json_delta", "partial_json": p}
                for p in ["", *_pieces(block["json"])]
            ]
        events.append(
            (
                "content_block_start",
                {"type": "content_block_start", "index": index, "content_block": start},
            )
        )
        events += [
            ("content_block_delta", {"type": "content_block_delta", "index": index, "delta": d})
            for d in deltas
        ]
        events.append(("content_block_stop", {"type": "content_block_stop", "index": index}))
    events += [
        (
            "message_delta",
            {
                "type": "message_delta",
                "delta": {"stop_reason": stop_reason, "stop_sequence": None},
                # Cumulative, as the API now sends it: the input counted too.
                "usage": {"input_tokens": input_tokens, "output_tokens": output_tokens},
            },
        ),
        ("message_stop", {"type": "message_stop"}),
    ]
    return events


def claude_stream(blocks: list[dict[str, Any]], **options: Any) -> Answer:
    """`claude_events` as an HTTP answer."""
    return Answer(sse(claude_events(blocks, **options)))


def claude_error_event(kind: str, message: str) -> tuple[str, Any]:
    """The `error` event the Messages API sends inside a 200 stream (overloaded_error, ...)."""
    return ("error", {"type": "error", "error": {"type": kind, "message": message}})


def _pieces(text: str) -> list[str]:
    """`text` in the two or three deltas a server would send it in."""
    third = max(len(text) // 3, 1)
    return [p for p in (text[:third], text[third : 2 * third], text[2 * third :]) if p]


@dataclass
class ClaudeWithThinking:
    """A Messages API that, like Anthropic's, checks thinking sent back on a request with
    thinking on: every thinking block must come back unchanged with the signature it was
    sent with (and every redacted_thinking block with its data), and an assistant turn
    with tool calls that a tool result answers must start with its thinking. Anything
    else is HTTP 400 invalid_request_error."""

    replies: list[list[dict[str, Any]]]
    issued: dict[str, list[dict[str, Any]]] = field(default_factory=dict)

    def __call__(self, path: str, body: dict[str, Any]) -> Answer:
        if (body.get("thinking") or {}).get("type") in ("enabled", "adaptive"):
            refusal = self._check(body["messages"])
            if refusal is not None:
                return error_answer(400, "invalid_request_error", refusal)
        blocks = self.replies.pop(0)
        tool_ids = [b["id"] for b in blocks if b["type"] == "tool_use"]
        if tool_ids:  # what this reply's turn must carry when it comes back
            self.issued[tool_ids[0]] = [b for b in blocks if "thinking" in b["type"]]
        stop = "tool_use" if tool_ids else "end_turn"
        return claude_stream(blocks, stop_reason=stop)

    def _check(self, messages: list[dict[str, Any]]) -> str | None:
        for n, message in enumerate(messages):
            content = message["content"]
            if message["role"] != "assistant" or isinstance(content, str):
                continue
            uses = [b["id"] for b in content if b["type"] == "tool_use"]
            if not uses or uses[0] not in self.issued:
                continue
            if content[0]["type"] not in ("thinking", "redacted_thinking"):
                return (
                    f"messages.{n}.content.0.type: Expected `thinking` or `redacted_thinking`, "
                    f"but found `{content[0]['type']}`. When `thinking` is enabled, a final "
                    "`assistant` message must start with a thinking block (preceeding the "
                    "lastmost set of `tool_use` and `tool_result` blocks). We recommend you "
                    "include thinking blocks from previous turns. To avoid this requirement, "
                    "disable `thinking`."
                )
            sent = [_thinking_as_sent(b) for b in content if "thinking" in b["type"]]
            if sent != self.issued[uses[0]]:
                return f"messages.{n}.content: Invalid `signature` in `thinking` block"
        return None


def _thinking_as_sent(block: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in block.items() if k != "cache_control"}


# OpenAI --------------------------------------------------------------------------------


def responses_stream(
    reasoning: list[str],
    text: str,
    *,
    model: str = "gpt-5.2",
    reasoning_id: str = "rs_1",
    incomplete: str | None = None,
) -> Answer:
    """A Responses API stream: a reasoning item whose summary arrives in deltas, then a
    message with `text`, as the API streams them; with `incomplete` (the reason, such as
    "max_output_tokens"), the response ends incomplete."""
    seq = iter(range(1000))
    response = {
        "id": "resp_1",
        "object": "response",
        "created_at": 1741569952,
        "status": "in_progress",
        "model": model,
        "output": [],
        "parallel_tool_calls": True,
        "tool_choice": "auto",
        "tools": [],
    }
    events: list[tuple[str, Any]] = [
        ("response.created", {"type": "response.created", "response": response}),
    ]
    item = {"id": reasoning_id, "type": "reasoning", "summary": []}
    events.append(
        (
            "response.output_item.added",
            {"type": "response.output_item.added", "output_index": 0, "item": item},
        )
    )
    summary = []
    for i, part_text in enumerate(reasoning):
        part = {"type": "summary_text", "text": ""}
        common = {"item_id": reasoning_id, "output_index": 0, "summary_index": i}
        events.append(
            (
                "response.reasoning_summary_part.added",
                {"type": "response.reasoning_summary_part.added", **common, "part": part},
            )
        )
        for piece in _pieces(part_text):
            events.append(
                (
                    "response.reasoning_summary_text.delta",
                    {"type": "response.reasoning_summary_text.delta", **common, "delta": piece},
                )
            )
        events.append(
            (
                "response.reasoning_summary_text.done",
                {"type": "response.reasoning_summary_text.done", **common, "text": part_text},
            )
        )
        done_part = {"type": "summary_text", "text": part_text}
        events.append(
            (
                "response.reasoning_summary_part.done",
                {"type": "response.reasoning_summary_part.done", **common, "part": done_part},
            )
        )
        summary.append(done_part)
    reasoning_item = {"id": reasoning_id, "type": "reasoning", "summary": summary}
    events.append(
        (
            "response.output_item.done",
            {"type": "response.output_item.done", "output_index": 0, "item": reasoning_item},
        )
    )
    message = {
        "id": "msg_1",
        "type": "message",
        "role": "assistant",
        "status": "in_progress",
        "content": [],
    }
    events.append(
        (
            "response.output_item.added",
            {"type": "response.output_item.added", "output_index": 1, "item": message},
        )
    )
    text_part = {"type": "output_text", "text": "", "annotations": []}
    at = {"item_id": "msg_1", "output_index": 1, "content_index": 0}
    events.append(
        (
            "response.content_part.added",
            {"type": "response.content_part.added", **at, "part": text_part},
        )
    )
    for piece in _pieces(text):
        events.append(
            (
                "response.output_text.delta",
                {"type": "response.output_text.delta", **at, "delta": piece},
            )
        )
    events.append(
        ("response.output_text.done", {"type": "response.output_text.done", **at, "text": text})
    )
    done_text = {"type": "output_text", "text": text, "annotations": []}
    events.append(
        (
            "response.content_part.done",
            {"type": "response.content_part.done", **at, "part": done_text},
        )
    )
    done_message = {**message, "status": "completed", "content": [done_text]}
    events.append(
        (
            "response.output_item.done",
            {"type": "response.output_item.done", "output_index": 1, "item": done_message},
        )
    )
    usage = {
        "input_tokens": 40,
        "input_tokens_details": {"cached_tokens": 0},
        "output_tokens": 30,
        "output_tokens_details": {"reasoning_tokens": 20},
        "total_tokens": 70,
    }
    completed = {
        **response,
        "status": "completed",
        "output": [reasoning_item, done_message],
        "usage": usage,
    }
    if incomplete is not None:
        completed |= {"status": "incomplete", "incomplete_details": {"reason": incomplete}}
    end = "response.completed" if incomplete is None else "response.incomplete"
    events.append((end, {"type": end, "response": completed}))
    return Answer(sse((name, {**data, "sequence_number": next(seq)}) for name, data in events))


def chat_chunk(delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
    """One Chat Completions stream chunk."""
    return {
        "id": "chatcmpl-Loopback",
        "object": "chat.completion.chunk",
        "created": 1741569952,
        "model": "gpt-5.2",
        "choices": [{"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}],
    }


def chat_stream(
    text: str | None = None,
    calls: Iterable[tuple[str, str, str]] = (),
    *,
    finish: str | None = None,
    usage: bool = True,
    extra: Iterable[dict[str, Any]] = (),
) -> Answer:
    """A Chat Completions stream (`stream_options.include_usage` on) for `text` and tool
    `calls` (id, name, arguments JSON), as OpenAI sends it, ended by `data: [DONE]`;
    `extra` deltas (a server's own fields, `reasoning_content` say) come first."""
    chunks = [chat_chunk({"role": "assistant", "content": ""})]
    chunks += [chat_chunk(delta) for delta in extra]
    chunks += [chat_chunk({"content": piece}) for piece in _pieces(text or "")]
    calls = list(calls)
    for index, (call_id, name, args) in enumerate(calls):
        head = {"index": index, "id": call_id, "type": "function"}
        chunks.append(
            chat_chunk({"tool_calls": [{**head, "function": {"name": name, "arguments": ""}}]})
        )
        chunks += [
            chat_chunk({"tool_calls": [{"index": index, "function": {"arguments": piece}}]})
            for piece in _pieces(args)
        ]
    chunks.append(chat_chunk({}, finish or ("tool_calls" if calls else "stop")))
    if usage:
        counted = {"prompt_tokens": 40, "completion_tokens": 9, "total_tokens": 49}
        chunks.append({**chat_chunk({}), "choices": [], "usage": counted})
    return Answer(sse([*((None, c) for c in chunks), (None, "[DONE]")]))
