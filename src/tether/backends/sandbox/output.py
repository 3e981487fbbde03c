"""What a command printed: the start for the model, all of it saved when it is long."""

from __future__ import annotations

import os
import uuid
from typing import BinaryIO

from tether.backends.hostfs import Root

__all__ = ["OUTPUT_DIR", "Output"]

OUTPUT_DIR = "/large_tool_results"
_SAVED_OUTPUT_LIMIT = 50 * 1024 * 1024  # the full-output file stops growing here


class Output:
    """A command's output: the start kept for the model; once it passes `limit`, all of
    it (up to 50 MB) also goes to a new file in the workspace."""

    def __init__(self, host: Root, limit: int) -> None:
        self.host, self.limit = host, limit
        self.head = bytearray()
        self.saved = 0
        self.file: BinaryIO | None = None
        self.virtual_path: str | None = None
        self.unsaved: str | None = None  # why the full output could not be saved

    @property
    def truncated(self) -> bool:
        return self.file is not None or self.unsaved is not None

    def add(self, chunk: bytes) -> None:
        if self.file is not None:
            self._save(chunk)
            return
        if self.unsaved is not None:
            return
        self.head += chunk
        if len(self.head) <= self.limit:  # bytes: never fewer than characters
            return
        path = f"{OUTPUT_DIR}/execute-{uuid.uuid4().hex[:12]}.txt"
        try:
            self.file = os.fdopen(self.host.create(path), "wb")
        except OSError as exc:  # a command put something in the way (a symlink, a file)
            self.unsaved = f"{OUTPUT_DIR} is not a plain directory ({exc.strerror})"
        else:
            self.virtual_path = path
            self._save(bytes(self.head))
        del self.head[self.limit * 4 :]  # enough bytes for `limit` characters

    def _save(self, data: bytes) -> None:
        room = _SAVED_OUTPUT_LIMIT - self.saved
        if room > 0 and self.file is not None:
            self.file.write(data[:room])
            self.saved += min(room, len(data))

    def text(self) -> str:
        text = self.head.decode("utf-8", errors="replace")
        if not self.truncated:
            return text
        if self.unsaved is not None:
            where = f"the rest could not be saved: {self.unsaved}"
        else:
            where = (
                f"the full output is in {self.virtual_path}: read it in parts with read_file "
                "or search it with grep"
            )
        return f"{text[: self.limit]}\n[output cut at {self.limit} characters; {where}]"

    def close(self) -> None:
        if self.file is not None:
            self.file.close()
