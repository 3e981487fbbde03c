"""Edits the offline model can make exactly: a text replaced by another, and a line
added at the end of a file.

Only a request that says so in a shape read here without guessing becomes an edit
("in pets.txt, change cat to dog", "replace 'a' with 'b' in f.txt", "add a line 'eggs'
at the end of list.txt"). The file is read first, and the edit is worked out from what
the read showed: a replacement touches whole words only, once unless the request says
"every", and a line goes after the file's last one, in the file's own line endings.
Whatever cannot be done exactly (a word found twice, inside another word, or not at
all; a file shown only in part) is declined with the reason, and nothing is written.
`edit_file` then refuses the edit if the file changed since that read.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass

from tether.messages import ToolCall

__all__ = ["Edit", "after_read", "done", "edit_of"]

READ, EDIT = "read_file", "edit_file"

_SLOT = "\x00{}\x00"
_SLOTTED = re.compile(r"\x00(\d+)\x00")
_POLITE = re.compile(
    r"^(?:(?:please|pls|kindly)\s*,?\s+|(?:can|could|would|will)\s+you\s+(?:please\s+)?)",
    re.IGNORECASE,
)
_PLEASE_AFTER = re.compile(r",?\s+(?:please|thanks|thank you)$", re.IGNORECASE)
# Replacement: the verb, who many ("every"), what to find, the joining word, what to put.
# Which joining words go with a verb is fixed, so "change A with B" is no edit.
_JOINS = {"change": "to|into", "replace": "with|by", "swap": "for|with", "switch": "to|for"}
_REPLACE = re.compile(
    r"^(?P<verb>change|replace|swap(?:\s+out)?|switch)\s+"
    r"(?P<every>(?:every|all(?:\s+the)?|each)\s+(?:(?:occurrence|instance)s?\s+of\s+)?)?"
    r"(?:the\s+(?:word|text|phrase|string|name)\s+)?"
    r"(?P<old>.+?)\s+(?P<join>to|into|with|by|for)\s+(?P<new>.+)$",
    re.IGNORECASE,
)
# A file named before the change ("in pets.txt, ...", "pets.txt: ...") or after it
# ("... in pets.txt"); elsewhere it is no edit read here.
_FILE_FIRST = re.compile(
    r"^(?:(?:in|inside|within)\s+(?:the\s+)?(?:file\s+)?(?P<a>\x00\d+\x00|\S+?)\s*[,:]?"
    r"|(?P<b>\x00\d+\x00|\S+?)\s*:)\s+",
    re.IGNORECASE,
)
_FILE_LAST = re.compile(
    r"\s+(?:in|inside|within)\s+(?:the\s+)?(?:file\s+)?(?P<f>\x00\d+\x00|\S+?)(?:\s|$)",
    re.IGNORECASE,
)
_APPEND = re.compile(
    r"^(?:(?P<add>add|put|write|insert|type)|(?P<append>append))\s+"
    r"(?:(?P<line>(?:a|the|one)\s+(?:new\s+)?line|(?:new\s+)?line)\s*"
    r"(?::|saying|that\s+says|reading|with\s+the\s+text|with)?\s+)?"
    r"(?P<text>.+?)"
    r"(?:\s+(?:as|on)\s+(?:a|the)\s+(?:new|last|final)\s+line)?"
    r"(?P<where>\s+(?:at|to|on)\s+the\s+(?:very\s+)?(?:end|bottom)\s+of|\s+to)"
    r"\s+(?:the\s+)?(?:file\s+)?(?P<f>\x00\d+\x00|\S+)$",
    re.IGNORECASE,
)
# Unquoted words that name a character or a kind of line rather than being the text
# ("replace tabs with commas", "add a newline"): no edit is guessed from them.
_DESCRIBING_WORDS = (
    "newline newlines blank empty space spaces tab tabs comma commas period periods dot "
    "dots semicolon semicolons colon colons dash dashes hyphen hyphens underscore "
    "underscores quote quotes bracket brackets parenthesis parentheses nothing "
    "whitespace line lines word words it them this that"
)
_DESCRIBING = frozenset(_DESCRIBING_WORDS.split())
_MAX_UNQUOTED_WORDS = 4


@dataclass(frozen=True)
class Edit:
    """An edit a request asks for: `old` replaced by `new` in `path` (every time it
    occurs when `every`), or, when `old` is None, the line `new` added at the end."""

    path: str
    old: str | None
    new: str
    every: bool = False

    @property
    def action(self) -> str:
        """The action the model is offered for it."""
        return "append" if self.old is None else "replace"


def edit_of(request: str, is_path: re.Pattern[str], quoted: re.Pattern[str]) -> Edit | None:
    """The edit `request` asks for, when it asks for one in a shape read here exactly;
    None otherwise (and a request that asks to change a file is then declined)."""
    texts: list[str] = []

    def slot(match: re.Match[str]) -> str:
        texts.append(next(g for g in match.groups() if g))
        return _SLOT.format(len(texts) - 1)

    words = " ".join(quoted.sub(slot, request).split()).rstrip(" .!?")
    words = _PLEASE_AFTER.sub("", _POLITE.sub("", words))
    if any("\n" in t or "\x00" in t for t in texts) or not words:
        return None
    return _append_of(words, texts, is_path) or _replacement_of(words, texts, is_path)


def _replacement_of(words: str, texts: list[str], is_path: re.Pattern[str]) -> Edit | None:
    found, path = None, None
    first, last = _FILE_FIRST.match(words), _FILE_LAST.search(words)
    if first is not None:
        path = _path(first.group("a") or first.group("b"), texts, is_path)
        found = _REPLACE.match(re.sub(r"^please\s+", "", words[first.end() :], flags=re.I))
    if (path is None or found is None) and last is not None:  # "... in f.txt [to b]"
        path = _path(last.group("f"), texts, is_path)
        found = _REPLACE.match(f"{words[: last.start()]} {words[last.end() :]}".strip())
    if path is None or found is None:
        return None
    verb = found.group("verb").split()[0].lower()
    if not re.fullmatch(_JOINS[verb], found.group("join"), re.IGNORECASE):
        return None
    if re.search(rf"\s(?:{_JOINS[verb]})\s", found.group("old") + " " + found.group("new")):
        return None  # "change go to bed to sleep": which "to" splits it is a guess
    old, new = _text(found.group("old"), texts, is_path), _text(found.group("new"), texts, is_path)
    if old is None or new is None or old == new or not old.strip():
        return None
    return Edit(path, old, new, every=found.group("every") is not None)


def _append_of(words: str, texts: list[str], is_path: re.Pattern[str]) -> Edit | None:
    found = _APPEND.match(words)
    if found is None:
        return None
    at_end = found.group("where").strip().lower() != "to"
    # "add 'x' to f.txt" adds at the end only said with a line or by "append"; put or
    # write to a file is a new file's content (and write_file refuses an existing one)
    if not at_end and found.group("append") is None and found.group("line") is None:
        return None
    if not at_end and found.group("add") is not None and found.group("add").lower() != "add":
        return None
    path = _path(found.group("f"), texts, is_path)
    line = _text(found.group("text"), texts, is_path)
    if path is None or line is None or not line.strip():
        return None
    return Edit(path, None, line)


def _path(name: str, texts: list[str], is_path: re.Pattern[str]) -> str | None:
    """The file `name` names (quoted or not), if it is a file name."""
    slotted = _SLOTTED.fullmatch(name)
    name = texts[int(slotted.group(1))] if slotted else name
    name = name.strip().rstrip(",:")
    return "/" + name.lstrip("/") if is_path.fullmatch(name) else None


def _text(words: str, texts: list[str], is_path: re.Pattern[str]) -> str | None:
    """The text `words` gives: a quoted text exactly, or a few plain words that do not
    describe a character or a line ("a comma", "tabs")."""
    words = words.strip()
    slotted = _SLOTTED.fullmatch(words)
    if slotted:
        return texts[int(slotted.group(1))]
    if "\x00" in words or any(c in words for c in "\"'\u201c\u201d\u2018\u2019,;"):
        return None
    parts = words.split()
    if not parts or len(parts) > _MAX_UNQUOTED_WORDS or parts[0].lower() in {"a", "an"}:
        return None
    if any(p.lower().strip(".:!?") in _DESCRIBING for p in parts) or " and " in words:
        return None
    if any(is_path.fullmatch(p) for p in parts):  # "... with dog in b.txt"
        return None
    return words


def after_read(edit: Edit, shown: str, call_id: str) -> ToolCall | str:
    """The `edit_file` call that makes `edit` on the file `read_file` showed as `shown`,
    or why it cannot be made exactly."""
    lines = _lines(shown)
    if lines is None:
        if shown.rstrip().endswith("is empty."):
            lines = []
        else:
            return f"{edit.path} was not shown whole (too long, or not text)"
    text = "\n".join(lines)
    if edit.old is None:
        return _append(edit, lines, text, call_id)
    return _replace(edit, lines, text, call_id)


def _lines(shown: str) -> list[str] | None:
    """The file's lines from a read's numbered lines; None unless every line was shown
    (a read cut short ends in a note that is not a numbered line)."""
    lines = []
    for number, row in enumerate(shown.split("\n"), start=1):
        match = re.match(r" *(\d+)\t", row)
        if match is None or int(match.group(1)) != number or "... [line cut: " in row:
            return None
        lines.append(row[match.end() :])
    return lines


def _append(edit: Edit, lines: list[str], text: str, call_id: str) -> ToolCall | str:
    # the last lines, enough of them to occur only once and hold more than blanks, with
    # the new line after them (the file's final newline, if any, stays after it)
    for count in range(1, len(lines) + 1):
        tail = "\n".join(lines[-count:])
        if tail.strip() and text.count(tail) == 1:
            ending = "\r" if lines[-1].endswith("\r") else ""  # CRLF lines stay CRLF
            new = f"{tail}\n{edit.new}{ending}"
            return ToolCall(
                EDIT, {"file_path": edit.path, "old_string": tail, "new_string": new}, call_id
            )
    return f"{edit.path} holds no line to add one after"


def _replace(edit: Edit, lines: list[str], text: str, call_id: str) -> ToolCall | str:
    old, new = edit.old or "", edit.new
    quoted = _quote(old)
    whole = re.compile(
        (r"(?<!\w)" if old[0].isalnum() or old[0] == "_" else "")
        + re.escape(old)
        + (r"(?!\w)" if old[-1].isalnum() or old[-1] == "_" else "")
    )
    words = len(whole.findall(text))
    found = text.count(old)
    if words == 0:
        part = " (only inside other words)" if found else ""
        return f"{quoted} is not in {edit.path}{part}"
    if words > 1 and not edit.every:
        return (
            f"{quoted} occurs {words} times in {edit.path}; to change them all, ask to "
            f"change every {quoted}"
        )
    if found == words:  # every occurrence is a whole word: edit_file's own match
        args = {"file_path": edit.path, "old_string": old, "new_string": new}
        if words > 1:
            args["replace_all"] = True  # type: ignore[assignment]
        return ToolCall(EDIT, args, call_id)
    if words > 1:
        return f"{quoted} is also part of other words in {edit.path}"
    # once as a word, elsewhere inside words: replace it within the line that holds it
    line = next(line for line in lines if whole.search(line))
    if text.count(line) != 1:
        return f"{quoted} is also part of other words in {edit.path}"
    return ToolCall(
        EDIT,
        {
            "file_path": edit.path,
            "old_string": line,
            "new_string": whole.sub(lambda _: new, line, count=1),
        },
        call_id,
    )


def done(edit: Edit) -> str:
    """The answer once `edit_file` made `edit`."""
    if edit.old is None:
        return f"Added the line {_quote(edit.new)} at the end of {edit.path}."
    every = "every " if edit.every else ""
    return f"Changed {every}{_quote(edit.old)} to {_quote(edit.new)} in {edit.path}."


def _quote(text: str) -> str:
    return json.dumps(text, ensure_ascii=False)
