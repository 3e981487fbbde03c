"""Plain requests for the offline model, as a new user would type them, and what counts
as doing each one.

Six kinds: write a given text to a named file, read a named file, list the files,
replace a text in a named file, add a line at the end of one, and requests it cannot do
(it must decline them plainly and change nothing). Each kind has
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
    "pets.txt": "a cat named Tom\nthe category: pets\n",
    "list.txt": "milk\nbread\n",
}
"""The files every attempt starts with (a write goes to a name not among them)."""


@dataclass(frozen=True)
class Request:
    kind: str  # "write", "read", "list", "replace", "append" or "decline"
    split: str  # "tuning" or "held-out"
    text: str
    path: str = ""  # the file written, read or edited, as the backend names it
    content: str = ""  # what a write must leave in the file (an edit: the whole file)


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
REPLACES = {
    "tuning": [
        "Replace '{old}' with '{new}' in {name}",
        'Change "{old}" to "{new}" in {name}',
        "Change the word {old} in {name} to {new}",
        "{name}: change {old} to {new}",
    ],
    "held-out": [
        "in {name}, change {old} to {new}",
        "replace {old} with {new} in {name}",
        "Could you swap '{old}' for '{new}' in {name}?",
        'In {name}, please replace "{old}" with "{new}".',
    ],
}
REPLACE_VALUES = [  # (file, old, new, the file afterwards); "cat" is also in "category"
    ("pets.txt", "cat", "dog", "a dog named Tom\nthe category: pets\n"),
    ("/plan.txt", "Friday", "Monday", "ship it on Monday\n"),
    ("todo.md", "the bank", "the dentist", "call the dentist\nwater the plants\n"),
]
APPENDS = {
    "tuning": [
        "Add the line '{text}' at the end of {name}",
        'Append "{text}" to {name}',
        "Add {text} to the bottom of {name}",
    ],
    "held-out": [
        "add a line '{text}' at the end of {name}",
        "Append {text} to {name}.",
        'Put "{text}" on a new line at the end of {name}',
        "Could you add a new line saying {text} at the bottom of {name}?",
    ],
}
APPEND_VALUES = [
    ("list.txt", "eggs", "milk\nbread\neggs\n"),
    ("/todo.md", "feed the cat", "call the bank\nwater the plants\nfeed the cat\n"),
]
DECLINES = {
    "tuning": [
        "hi",
        "What does this project do? Answer in one sentence.",
        "Explain how the loop works",
        "Delete the file plan.txt",
        "Move notes.txt into docs",
        "Replace every tab in notes.txt with a comma",
        "Add a period at the end of notes.txt",
    ],
    "held-out": [
        "Refactor the code to use async",
        "Why is the sky blue?",
        "Summarize the README in three bullet points.",
        "delete old.txt",
        "Rename plan.txt to schedule.txt",
        "Remove the second line of todo.md",
        "Replace the first word of notes.txt with Hello",
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
    found += _edits()
    for split, texts in DECLINES.items():
        found += [Request("decline", split, text) for text in texts]
    return found


def _edits() -> list[Request]:
    found: list[Request] = []
    for split, templates in REPLACES.items():
        for template in templates:
            for name, old, new, after in REPLACE_VALUES:
                text = template.format(name=name, old=old, new=new)
                found.append(Request("replace", split, text, "/" + name.lstrip("/"), after))
    for split, templates in APPENDS.items():
        for template in templates:
            for name, line, after in APPEND_VALUES:
                text = template.format(name=name, text=line)
                found.append(Request("append", split, text, "/" + name.lstrip("/"), after))
    return found
