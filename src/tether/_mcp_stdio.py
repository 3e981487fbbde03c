"""The stdio transport tether's MCP connections use: a server's lines read once, to a
bound, and big ones parsed off the event loop.

The SDK's reader joins each chunk of output to all the output before it that had no
newline yet, and parses every line on the event loop: a server answering `initialize`
with one line of 64 MB kept the loop copying for 30 s, then held it 0.37 s while the
line was parsed. Here the output is scanned once, a line over `MAX_LINE_BYTES` ends
the connection (the error says why), and a line over `OFF_LOOP_BYTES` is parsed in a
worker thread. Like the SDK's, the server runs in a session of its own, and is
stopped at the end in bounded steps: its pipes closed, then, if it has not ended,
killed with its whole process group.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import AsyncIterator, Mapping, Sequence
from typing import TextIO

import anyio
import anyio.to_thread
import mcp_types
from anyio.abc import ByteReceiveStream, ByteSendStream, Process
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream
from mcp.client.stdio import get_default_environment
from mcp.os.posix.utilities import terminate_posix_process_tree
from mcp.shared.message import SessionMessage

__all__ = [
    "MAX_LINE_BYTES",
    "MAX_PARTS",
    "MOST_SAMPLED_BLOCKS",
    "LineTooLong",
    "fewer_blocks",
    "fewer_parts",
    "stdio_transport",
]

MAX_LINE_BYTES = 16 * 1024 * 1024
"""The longest line (one message) read from an MCP server over stdio."""
OFF_LOOP_BYTES = 256 * 1024
"""Lines longer than this are parsed in a worker thread."""
_EXIT_WAIT = 2.0

Incoming = SessionMessage | Exception


class LineTooLong(Exception):
    """A server sent a line longer than tether reads."""


@contextlib.asynccontextmanager
async def stdio_transport(
    command: str,
    args: Sequence[str],
    *,
    env: Mapping[str, str] | None,
    cwd: str | None,
    errors: TextIO,
) -> AsyncIterator[
    tuple[MemoryObjectReceiveStream[Incoming], MemoryObjectSendStream[SessionMessage]]
]:
    """Start the server; the streams a `ClientSession` reads from and writes to."""
    process = await anyio.open_process(
        [command, *args],
        env={**get_default_environment(), **(env or {})},
        stderr=errors,
        cwd=cwd,
        start_new_session=True,
    )
    to_session, from_server = anyio.create_memory_object_stream[Incoming](0)
    to_server, from_session = anyio.create_memory_object_stream[SessionMessage](0)
    assert process.stdin is not None
    assert process.stdout is not None
    try:
        async with anyio.create_task_group() as tasks:
            tasks.start_soon(_read, process.stdout, to_session)
            tasks.start_soon(_write, process.stdin, from_session, to_session)
            try:
                yield from_server, to_server
            finally:
                tasks.cancel_scope.cancel()
    finally:
        with anyio.CancelScope(shield=True):
            await _stop(process)
            for stream in (from_server, to_server, to_session, from_session):
                await stream.aclose()


async def _read(stdout: ByteReceiveStream, sink: MemoryObjectSendStream[Incoming]) -> None:
    """Each line of the server's output, parsed, to `sink`, which the end of the output
    closes. A line too long raises, ending the connection with the reason. The buffer
    holds what follows the last newline, and is searched only where it grew."""
    buffer = bytearray()
    gone = (anyio.EndOfStream, anyio.ClosedResourceError, anyio.BrokenResourceError, OSError)
    with contextlib.suppress(*gone):
        async for chunk in stdout:
            searched = len(buffer)
            buffer += chunk
            start = 0
            lines = []
            while (end := buffer.find(b"\n", searched)) >= 0:
                lines.append(bytes(buffer[start:end]))
                start = searched = end + 1
            del buffer[:start]
            for line in lines:
                _check(line)
                await sink.send(await _parsed(line))
            _check(buffer)
    await sink.aclose()


def _check(line: bytes | bytearray) -> None:
    if len(line) > MAX_LINE_BYTES:
        raise LineTooLong(f"the server sent a line over {MAX_LINE_BYTES:,} bytes")


async def _parsed(line: bytes) -> Incoming:
    """A message, or the error that says why the line is not one (the session logs it)."""
    if len(line) > OFF_LOOP_BYTES:
        return await anyio.to_thread.run_sync(_parse, line)
    return _parse(line)


def _parse(line: bytes) -> Incoming:
    adapter = mcp_types.jsonrpc_message_adapter
    try:
        if len(line) <= OFF_LOOP_BYTES:
            return SessionMessage(adapter.validate_json(line, by_name=False))
        # A long line: read as plain JSON (several times faster than validating it, and
        # this thread holds the GIL either way), cut, and only then validated.
        data = json.loads(line)
        fewer_parts(data.get("result") if isinstance(data, dict) else None)
        fewer_blocks(data)
        return SessionMessage(adapter.validate_python(data, by_name=False))
    except (ValueError, RecursionError) as exc:
        return ValueError(str(exc)) if isinstance(exc, RecursionError) else exc


MAX_PARTS = 1_000
"""The most content parts of one reply tether reads: the SDK checks each on the event
loop, so 300,000 tiny ones (10 MB) held it for seconds."""


def fewer_parts(result: object) -> bool:
    """Cut a result's `content` to `MAX_PARTS`, with a last part saying how many were
    left out; whether it was cut."""
    content = result.get("content") if isinstance(result, dict) else None
    if not isinstance(content, list) or len(content) <= MAX_PARTS:
        return False
    left_out = len(content) - MAX_PARTS + 1
    note = {"type": "text", "text": f"[{left_out:,} more content parts left out]"}
    result["content"] = [*content[: MAX_PARTS - 1], note]  # type: ignore[index]
    return True


MOST_SAMPLED_BLOCKS = 200
"""The most content blocks, in all its messages, of a sampling request tether answers."""


def fewer_blocks(message: object) -> bool:
    """Cut the messages of a long sampling request to one block more than
    `MOST_SAMPLED_BLOCKS` in all, before the SDK checks each on the event loop: it is
    refused either way; whether it was cut."""
    if not isinstance(message, dict) or message.get("method") != "sampling/createMessage":
        return False
    params = message.get("params")
    messages = params.get("messages") if isinstance(params, dict) else None
    if not isinstance(messages, list):
        return False
    left, cut = MOST_SAMPLED_BLOCKS + 1, False
    for index, item in enumerate(messages):
        content = item.get("content") if isinstance(item, dict) else None
        if left <= 0:
            del messages[index:]
            return True
        if isinstance(content, list):
            if len(content) > left:
                item["content"], cut = content[:left], True
            left -= len(item["content"])
        else:
            left -= 1
    return cut


async def _write(
    stdin: ByteSendStream,
    source: MemoryObjectReceiveStream[SessionMessage],
    sink: MemoryObjectSendStream[Incoming],
) -> None:
    """What the session sends, a line each, to the server; if the server stops
    reading its input for good, the session is told the connection closed."""
    try:
        async with source:
            async for message in source:
                text = message.message.model_dump_json(by_alias=True, exclude_unset=True)
                await stdin.send(text.encode() + b"\n")
    except (anyio.ClosedResourceError, anyio.BrokenResourceError, OSError):
        await sink.aclose()


async def _stop(process: Process) -> None:
    """Close the server's input and output (it reads an end, or dies writing) and give
    it a moment to end; then stop its whole process group."""
    with anyio.move_on_after(_EXIT_WAIT) as waited:
        await process.aclose()  # once cancelled, this kills the process and reaps it
    if waited.cancelled_caught:
        await terminate_posix_process_tree(process, _EXIT_WAIT)
