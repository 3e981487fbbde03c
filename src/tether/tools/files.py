"""The file tools (ls, read_file, write_file, edit_file, glob, grep) over the run's backend.

Every path the model gives goes through `tether.backends.paths.clean`, and every
failure comes back to the model as an error it can act on.
"""

from __future__ import annotations

import asyncio
import functools
import hashlib
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Literal

from tether.backends.base import (
    DEFAULT_MAX_FILE_BYTES,
    OFF_LOOP_BYTES,
    Backend,
    FileInfo,
    GrepHit,
    create,
    update,
)
from tether.backends.errors import BackendError
from tether.backends.paths import clean
from tether.backends.search import glob_match, include_match, is_binary, shown, split_lines
from tether.messages import BinaryPart
from tether.state import FILES_SEEN, RunState, ToolContext
from tether.tools import diffs
from tether.tools.tool import Tool, tool

__all__ = ["FILE_TOOL_NAMES", "MEDIA_TYPES", "change_diff", "file_tools", "seen_files"]

FILE_TOOL_NAMES = ("ls", "read_file", "write_file", "edit_file", "glob", "grep")

DEFAULT_READ_LIMIT = 500
MAX_LINE_CHARS = 2_000
MAX_GLOB_RESULTS = 1_000
MAX_GREP_LINES = 500
MAX_READ_CHARS = 80_000  # about 20,000 tokens: one read never floods the context

MEDIA_TYPES = {
    ".png": "image/png",
    ".jpg": "image/jpeg",
    ".jpeg": "image/jpeg",
    ".gif": "image/gif",
    ".webp": "image/webp",
    ".heic": "image/heic",
    ".heif": "image/heif",
    ".mp4": "video/mp4",
    ".mpeg": "video/mpeg",
    ".mpg": "video/mpeg",
    ".mov": "video/quicktime",
    ".avi": "video/x-msvideo",
    ".flv": "video/x-flv",
    ".webm": "video/webm",
    ".wmv": "video/x-ms-wmv",
    ".3gpp": "video/3gpp",
    ".wav": "audio/wav",
    ".mp3": "audio/mpeg",
    ".aiff": "audio/aiff",
    ".aac": "audio/aac",
    ".ogg": "audio/ogg",
    ".flac": "audio/flac",
    ".pdf": "application/pdf",
    ".ppt": "application/vnd.ms-powerpoint",
    ".pptx": "application/vnd.openxmlformats-officedocument.presentationml.presentation",
}
"""Files read back as multimodal content, by extension."""


def _backend(context: ToolContext) -> Backend:
    backend = context.backend
    if backend is None:
        raise BackendError("This agent has no filesystem.")
    return backend  # type: ignore[no-any-return]


def _media_type(path: str) -> str | None:
    name = path.rsplit("/", 1)[-1].lower()
    dot = name.rfind(".")
    return MEDIA_TYPES.get(name[dot:]) if dot > 0 else None


def _stamp(info: FileInfo) -> str:
    if info.modified is None:
        return f"{info.size} bytes"
    when = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(info.modified))
    return f"{info.size} bytes, modified {when}"


async def ls(context: ToolContext, path: str = "/") -> str:
    """List a directory: each entry with its size and modification time; symbolic links
    with the path they name.

    Args:
        path: Absolute directory path.
    """
    entries = await _backend(context).ls(clean(path))
    if not entries:
        return f"{clean(path)} is empty."
    return "\n".join(_entry(e) for e in entries)


def _entry(info: FileInfo) -> str:
    if info.link is not None:
        return f"{info.path} -> {info.link} (a symbolic link; use the path it names)"
    return f"{info.path}/" if info.is_dir else f"{info.path} ({_stamp(info)})"


async def read_file(
    context: ToolContext, file_path: str, offset: int = 0, limit: int = DEFAULT_READ_LIMIT
) -> str | BinaryPart:
    """Read a file as numbered lines. Images, audio, video, PDF and PowerPoint files come
    back as content you can see.

    Args:
        file_path: Absolute file path.
        offset: Lines to skip from the start.
        limit: Most lines to return.
    """
    path = clean(file_path)
    if offset < 0 or limit < 1:
        raise BackendError("offset must be >= 0 and limit >= 1.")
    data = await _backend(context).read(path)
    _read_now(context, path, await _digest(data))
    media_type = _media_type(path)
    if media_type is not None:
        return BinaryPart(data, media_type)
    if is_binary(data):
        raise BackendError(
            f"{path} is a binary file ({len(data)} bytes) and cannot be shown as text."
        )
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        raise BackendError(
            f"{path} is not UTF-8 text ({len(data)} bytes) and cannot be shown."
        ) from None
    if not text:
        return f"{path} is empty."
    lines = split_lines(text)
    if offset >= len(lines):
        raise BackendError(f"{path} has {len(lines)} lines; offset {offset} is past the end.")
    numbered_lines: list[str] = []
    size = 0
    for n, line in enumerate(lines[offset : offset + limit], start=offset + 1):
        numbered_lines.append(f"{n}\t{_cut(line)}")
        size += len(numbered_lines[-1]) + 1
        if size > MAX_READ_CHARS:
            break
    numbered = "\n".join(numbered_lines)
    end = offset + len(numbered_lines)
    if end < len(lines):
        numbered += f"\n(lines {offset + 1}-{end} of {len(lines)}; read on with offset={end})"
    return numbered


def _cut(line: str) -> str:
    if len(line) <= MAX_LINE_CHARS:
        return line
    return f"{line[:MAX_LINE_CHARS]}... [line cut: {len(line) - MAX_LINE_CHARS} more characters]"


async def write_file(context: ToolContext, file_path: str, content: str) -> str:
    """Create a new file with the given content. Fails if the file exists: read it, then
    change it with edit_file.

    Args:
        file_path: Absolute path of the new file.
        content: The whole text of the file.
    """
    path = clean(file_path)
    backend = _backend(context)
    data = content.encode()
    taken = (
        f"{path} is a file that already exists. To change a file, read it with read_file "
        "and use edit_file."
    )
    await create(backend, path, data, taken=taken)
    _wrote(context, path, await _digest(data))
    return f"Wrote {len(data)} bytes to {path}."


async def edit_file(
    context: ToolContext,
    file_path: str,
    old_string: str,
    new_string: str,
    replace_all: bool = False,
) -> str:
    """Replace exact text in a file. `old_string` must occur exactly once unless
    `replace_all` is true; include surrounding lines to make it unique.

    Args:
        file_path: Absolute path of the file.
        old_string: The exact text to replace, whitespace included.
        new_string: The text to put in its place.
        replace_all: Replace every occurrence instead of exactly one.
    """
    path = clean(file_path)
    if old_string == new_string:
        raise BackendError("old_string and new_string are the same; nothing would change.")
    if not old_string:
        raise BackendError("old_string is empty; to create a file use write_file.")
    backend = _backend(context)
    limit = getattr(backend, "max_file_bytes", DEFAULT_MAX_FILE_BYTES)
    seen = _seen(context).get(path)
    replaced = 0

    def edit(current: bytes | None) -> bytes:
        nonlocal replaced
        if current is None:
            raise BackendError(f"No such file: {path}")
        if seen is not None and _digest_of(current) != seen:
            raise BackendError(
                f"{path} changed since this agent last read or wrote it (another agent, a "
                "command or a person changed it). Read it again, then make the edit."
            )
        try:
            text = current.decode("utf-8")
        except UnicodeDecodeError:
            raise BackendError(f"{path} is not UTF-8 text and cannot be edited.") from None
        replaced = _occurrences(text, path, old_string, replace_all)
        growth = replaced * (len(new_string.encode()) - len(old_string.encode()))
        if growth > 0 and len(current) + growth > limit:  # refused before it is built
            raise BackendError(
                f"The edit would make {path} {len(current) + growth} bytes, over the "
                f"{limit} byte limit."
            )
        return text.replace(old_string, new_string).encode()

    written = await update(backend, path, edit)
    _wrote(context, path, await _digest(written))
    return f"Replaced {replaced} occurrence(s) in {path}."


def _occurrences(text: str, path: str, old_string: str, replace_all: bool) -> int:
    """How often `old_string` occurs in `text`: a readable error unless once, or (with
    `replace_all`) at least once."""
    count = text.count(old_string)
    if count == 0:
        raise BackendError(
            f"old_string was not found in {path}. Read the file and copy the text exactly."
        )
    if count > 1 and not replace_all:
        raise BackendError(
            f"old_string occurs {count} times in {path}. Add surrounding lines to make it "
            "unique, or set replace_all to true."
        )
    return count


def seen_files(state: RunState) -> dict[str, str]:
    """What the model has seen of each file, as a digest: what it read in earlier turns
    (their results have reached it), and what it wrote. The filesystem capability calls
    it before each model call, so that the reads the model is about to see are counted
    (and recorded with the thread) before anything can pause the run."""
    data = state.data
    seen: dict[str, str] = data.setdefault(FILES_SEEN, {})
    read = data.get(_READ_NOW)
    if read is not None and read[0] is not _turn(state):
        seen.update(read[1])
        del data[_READ_NOW]
    return seen


def _seen(context: ToolContext) -> dict[str, str]:
    return seen_files(context.state)


def _read_now(context: ToolContext, path: str, digest: str) -> None:
    """A read of this turn: the model has not seen it yet, so it vouches only for the
    calls of its next turns (an edit sent beside it was written without it)."""
    _seen(context)
    entry = context.state.data.setdefault(_READ_NOW, (_turn(context.state), {}))
    entry[1][path] = digest


def _wrote(context: ToolContext, path: str, digest: str) -> None:
    _seen(context)[path] = digest
    read = context.state.data.get(_READ_NOW)
    if read is not None:
        read[1].pop(path, None)  # read before this write: that content is gone


def _turn(state: RunState) -> object:
    """The reply whose calls run now: the last message, while they run."""
    return state.messages[-1] if state.messages else None


_READ_NOW = "files_read_this_turn"
"""In RunState.data: (the turn, the digests of the files its calls read)."""


def _digest_of(data: bytes) -> str:
    return hashlib.blake2b(data, digest_size=16).hexdigest()


async def _digest(data: bytes) -> str:
    if len(data) > OFF_LOOP_BYTES:
        return await asyncio.to_thread(_digest_of, data)
    return _digest_of(data)


async def glob(context: ToolContext, pattern: str, path: str = "/") -> str:
    """Find files by name pattern, such as `**/*.py` or `src/*.{js,ts}`.

    Args:
        pattern: Glob pattern, relative to `path` (or absolute when it starts with `/`).
        path: Directory to search from.
    """
    directory = clean(path)
    files = await _backend(context).files(directory)
    matched = await asyncio.to_thread(glob_match, files, pattern, directory)
    if not matched:
        return f"No files match {shown(pattern)} under {directory}."
    lines = [f.path for f in matched[:MAX_GLOB_RESULTS]]
    if len(matched) > MAX_GLOB_RESULTS:
        lines.append(f"({len(matched) - MAX_GLOB_RESULTS} more; narrow the pattern)")
    return "\n".join(lines)


async def grep(
    context: ToolContext,
    pattern: str,
    *,
    path: str = "/",
    glob: str | None = None,
    output_mode: Literal["files_with_matches", "content", "count"] = "files_with_matches",
    context_lines: int = 0,
    literal: bool = False,
    ignore_case: bool = False,
) -> str:
    """Search file contents with a regular expression (or literal text).

    Args:
        pattern: Regular expression, or plain text when `literal` is true.
        path: Directory to search.
        glob: Only search files whose name or relative path matches, e.g. `*.py`.
        output_mode: `files_with_matches` (paths), `content` (matching lines under each
            file's path), or `count`.
        context_lines: Lines of context around each match, in `content` mode.
        literal: Treat the pattern as plain text.
        ignore_case: Match regardless of case.
    """
    directory = clean(path)
    if context_lines < 0:
        raise BackendError("context_lines must be >= 0.")
    backend = _backend(context)
    found = await backend.grep(pattern, directory, literal=literal, ignore_case=ignore_case)
    # Hits can number in the hundreds of thousands: sift them off the event loop.
    hits, lines = await asyncio.to_thread(_sift, found, directory, glob, output_mode)
    if not hits:
        return f"No matches for {shown(pattern)} under {directory}."
    if output_mode == "content":
        lines = await _content(backend, hits, context_lines)
    if len(lines) > MAX_GREP_LINES:
        rest = len(lines) - MAX_GREP_LINES
        lines = [*lines[:MAX_GREP_LINES], f"({rest} more lines; narrow the search)"]
    return "\n".join(lines)


def _sift(
    hits: Sequence[GrepHit], directory: str, include: str | None, mode: str
) -> tuple[Sequence[GrepHit], list[str]]:
    """The hits that pass the `include` glob, and the lines of the non-content modes."""
    if include:
        hits = [h for h in hits if include_match(h.path, directory, include)]
    if mode == "files_with_matches":
        return hits, list(dict.fromkeys(h.path for h in hits))
    if mode == "count":
        counts: dict[str, int] = {}
        for hit in hits:
            counts[hit.path] = counts.get(hit.path, 0) + 1
        return hits, [f"{p}:{n}" for p, n in counts.items()]
    return hits, []


async def _content(backend: Backend, hits: Sequence[GrepHit], around: int) -> list[str]:
    """Each file's path on a line of its own, then `N:text` for its matching lines and
    `N-text` for context lines, with `--` where lines are skipped: the path is said once
    per file, not on every line (the model reads these results again on every step)."""
    paths = list(dict.fromkeys(h.path for h in hits)) if around else []
    texts = {path: await backend.read(path) for path in paths}
    return await asyncio.to_thread(_content_lines, hits, texts, around)


def _content_lines(hits: Sequence[GrepHit], texts: dict[str, bytes], around: int) -> list[str]:
    by_file: dict[str, dict[int, str]] = {}
    for hit in hits:
        by_file.setdefault(hit.path, {})[hit.line] = hit.text
    out: list[str] = []
    for path, matched in by_file.items():
        out.append(path)
        if around == 0:
            out.extend(f"{n}:{_cut(text)}" for n, text in matched.items())
            continue
        text = split_lines(texts[path].decode("utf-8", errors="replace"))
        last = len(text)  # `around` comes from the model: never loop past the file
        shown = sorted(
            {n for m in matched for n in range(max(1, m - around), min(last, m + around) + 1)}
        )
        for i, n in enumerate(shown):
            if i and n != shown[i - 1] + 1:
                out.append("--")  # lines skipped
            mark = ":" if n in matched else "-"
            out.append(f"{n}{mark}{_cut(text[n - 1])}")
    return out


@functools.cache
def file_tools() -> tuple[Tool, ...]:
    """The six file tools, in the order the model sees them.

    Built on first use, not at import: reading their docstrings loads docstring-parser.
    """

    def reading(path_param: str) -> Callable[[Callable[..., Any]], Tool]:
        return tool(read_only=True, idempotent=True, path_param=path_param)

    return (
        reading("path")(ls),
        reading("file_path")(read_file),
        tool(path_param="file_path")(write_file),
        tool(path_param="file_path")(edit_file),
        reading("path")(glob),
        reading("path")(grep),
    )


def change_diff(tool: str, args: Mapping[str, Any] | str, before: str | None) -> str | None:
    """The change a `write_file` or `edit_file` call makes, as a unified diff; None for
    any other call. `before` is the file as it was: "" for a new file, None when not
    known, and then an edit's diff shows only the text it replaces. Linear in the size
    of the texts and bounded in what it shows (see `tether.tools.diffs`); for a big
    file, call it off the event loop."""
    if tool not in ("write_file", "edit_file") or not isinstance(args, Mapping):
        return None
    path = args.get("file_path")
    if not isinstance(path, str):
        return None
    if tool == "write_file":
        return diffs.text_diff(path, before or "", str(args.get("content", "")))
    find, put = str(args.get("old_string", "")), str(args.get("new_string", ""))
    if before is None:
        return diffs.text_diff(path, find, put)
    return diffs.edit_diff(path, before, find, put, replace_all=bool(args.get("replace_all")))
