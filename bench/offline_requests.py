"""Plain requests for the offline model, as a new user would type them, and what counts
as doing each one.

Four kinds: write a given text to a named file, read a named file, list the files, and
requests it cannot do (it must decline them plainly and change nothing). Each kind has
phrasings of its own in two sets: "tuning", the ones the harness was shaped on, and
"held-out", never looked at while shaping it. The success rate that counts is the
held-out one.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

FILES = {
    "notes.txt": "buy milk and eggs\n",
    "todo.md": "call the bank\nwater the plants\n",
    "plan.txt": "ship it on Friday\n",
    "docs/readme.md": "# Demo\nA small project.\n",
}
"""The files every attempt starts with (a write goes to a name not among them)."""


@dataclass(frozen=True)
class Request:
    kind: str  # "write", "read", "list" or "decline"
    split: str  # "tuning" or "held-out"
    text: str
    path: str = ""  # the file written or read, as the backend names it
    content: str = ""  # what a write must leave in the file


WRITES = {
    "tuning": [
        "Save the text '{text}' in {name}",
        'Write "{text}" to {name}',
        "Create a file called {name} containing '{text}'",
        'Please put "{text}" into {name}.',
        "Store '{text}' in the file {name}",
    ],
    "held-out": [
        'Make {name} say "{text}"',
        "Add the line '{text}' to a new file {name}",
        'I need a file named {name} with the text "{text}" in it.',
        "Jot down '{text}' in {name}, please.",
        "New file {name}: {text}",
    ],
}
WRITE_VALUES = [
    ("reminder.txt", "call mom at six"),
    ("/motto.md", "Ship small, ship often"),
    ("greeting", "Hello, World!"),
]
READS = {
    "tuning": [
        "What does {name} say?",
        "Read {name} and tell me its first line",
        "Show me the contents of {name}",
        "Open {name}",
    ],
    "held-out": [
        "Can you tell me what's written in {name}?",
        "Print {name}.",
        "What is the first line of {name}?",
        "Display the file {name} for me",
    ],
}
READ_VALUES = [("notes.txt", "/notes.txt"), ("/todo.md", "/todo.md")]
LISTS = {
    "tuning": ["List the files", "Which files are there?", "What's in this folder?"],
    "held-out": ["Show me all the files in the project.", "ls", "What files do I have?"],
}
DECLINES = {
    "tuning": [
        "hi",
        "What does this project do? Answer in one sentence.",
        "Explain how the loop works",
    ],
    "held-out": [
        "Refactor the code to use async",
        "Why is the sky blue?",
        "Summarize the README in three bullet points.",
    ],
}


def requests() -> list[Request]:
    """Every request, tuning and held-out."""
    found: list[Request] = []
    for split, templates in WRITES.items():
        for template in templates:
            for given, content in WRITE_VALUES:
                bare = "." not in given and not re.search(r"(called|named) \{name\}", template)
                name = given + ".txt" if bare else given  # no extension only after "called"
                text = template.format(name=name, text=content)
                found.append(Request("write", split, text, "/" + name.lstrip("/"), content))
    for split, templates in READS.items():
        for template in templates:
            for name, path in READ_VALUES:
                found.append(Request("read", split, template.format(name=name), path))
    for split, texts in LISTS.items():
        found += [Request("list", split, text) for text in texts]
    for split, texts in DECLINES.items():
        found += [Request("decline", split, text) for text in texts]
    return found
