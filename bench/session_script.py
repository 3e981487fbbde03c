"""The scripted coding session both harnesses run for `bench/session.py`, and the cost model.

Standard library only: `session_tether.py` imports it in the project's .venv and
`session_deepagents.py` in bench/.venv-deepagents.

- `build_repo(root)` writes a toy repository: a README, a pyproject, 28 Python modules
  and a few tests, and `toy/engine.py` of exactly 3,000 lines.
- `main_plan()` and `sub_plan(k)` are the session: for each model request (a step) the
  calls the model makes, decided by the step number alone (never by what a tool
  returned), so both harnesses walk the same trajectory. Reads, re-reads of a file after
  editing it, edits, greps in content and files mode, globs, ls, todo updates, the
  3,000-line read, three `task` calls whose subagents take a few steps of their own, and
  some steps with parallel calls.
- `simulate()` plays the session on an in-memory copy of the repository: what each read
  must show, and what every file must hold at the end. A side checks both, so a harness
  whose edits did not apply, or whose reads came back empty, fails the benchmark.
- `Ledger` prices the requests a side sent under Anthropic prompt caching.

Calls are abstract (`Call(tool, args)`), with the argument names both harnesses share:
`ls(path)`, `read_file(file_path, offset, limit)`, `write_file(file_path, content)`,
`edit_file(file_path, old_string, new_string)`, `glob(pattern, path)`,
`grep(pattern, path, glob, output_mode)`, `write_todos(todos)`, `task(description,
subagent_type)`. Every read gives `offset` and `limit`, because the harnesses' default
limits differ (500 lines and 100): the model asks for the same lines on both sides.
Grep patterns are plain text without regular-expression characters: tether's grep takes
a regular expression, deepagents' a literal.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import os
import random
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

MODEL = "claude-sonnet-4-5"
WINDOW = 200_000  # the model's input window on both sides
MAIN_STEPS = 200
CHARS_PER_TOKEN = 4
TASK = (
    "You are working in the repository of the `toy` package. Review and tidy it: make "
    "every function of the modules you touch check its input, add tests for new "
    "behaviour, keep the todo list up to date, and delegate self-contained pieces to a "
    "subagent. Report what you changed at the end."
)
SUBTASK_MARK = "Subtask "  # a subagent's task starts with it: how the model tells them apart
WRITE, READ = 1.25, 0.1  # Anthropic's price of writing and of reading a cached prefix
MIN_CACHED_TOKENS = 1_024  # a shorter prefix is not cached (Sonnet)
LOOKBACK_BLOCKS = 20  # how far back from a breakpoint Anthropic looks for a cached prefix


@dataclass(frozen=True)
class Call:
    tool: str
    args: dict[str, Any]


@dataclass(frozen=True)
class Step:
    """One model reply: a short text and its calls, or (no calls) the final answer."""

    text: str
    calls: tuple[Call, ...] = ()


# --- the toy repository ---

AREAS = {
    "core": ["records", "schema", "registry", "pipeline", "events", "errors", "models"],
    "io": ["reader", "writer", "formats", "paths", "archive", "stream", "cache"],
    "util": ["text", "timing", "retry", "config", "logging_setup", "hashing", "dates"],
    "web": ["routes", "handlers", "auth", "session", "forms", "render", "client"],
}
VERBS = ["load", "parse", "check", "build", "merge", "render", "find", "update", "split"]
NOUNS = ["entry", "record", "field", "batch", "token", "header", "item", "window", "rule"]
TESTED = ["core/records", "core/schema", "io/reader", "util/text", "web/routes"]


def _function(rng: random.Random, module: str, index: int) -> list[str]:
    verb, noun = rng.choice(VERBS), rng.choice(NOUNS)
    name = f"{verb}_{noun}_{index}"
    lines = [
        f"def {name}(source: str, *, strict: bool = False, limit: int = {rng.randint(8, 400)}) "
        f"-> list[str]:",
        f'    """{verb.capitalize()} {noun} {index} of the {module} module from `source`."""',
        f'    options = settings.get("{module}.{name}", {{}})',
        "    found: list[str] = []",
        "    for raw in source.splitlines():",
        "        value = raw.strip()",
        '        if not value or value.startswith("#"):',
        "            continue",
    ]
    shape = rng.randrange(4)
    if shape == 0:
        lines += [
            '        if strict and len(value) > options.get("max_len", limit):',
            f'            raise ValueError(f"{noun} {index} is too long: {{value[:40]!r}}")',
            "        found.append(value.lower())",
        ]
    elif shape == 1:
        lines += [
            '        key, _, rest = value.partition("=")',
            "        if strict and not rest:",
            f'            raise KeyError(f"{noun} {index} needs a value: {{key}}")',
            '        found.append(f"{key.strip()}={rest.strip()}")',
            "        if len(found) >= limit:",
            "            break",
        ]
    elif shape == 2:
        lines += [
            "        parts = [p for p in value.split(',') if p]",
            "        if len(parts) < 2:",
            f'            logger.warning("{noun} {index}: short line %r", value)',
            "            continue",
            "        found.extend(p.strip() for p in parts[:limit])",
        ]
    else:
        lines += [
            "        if value in found:",
            "            continue",
            "        found.append(value)",
        ]
    if rng.random() < 0.3:
        lines.append(f"    # TODO(toy): cache the {noun} values of {module}")
    lines += [f'    logger.debug("{name}: %d values", len(found))', "    return found", "", ""]
    return lines


def _module(rng: random.Random, module: str, functions: int) -> str:
    lines = [
        f'"""The {module} module of the toy package."""',
        "",
        "from __future__ import annotations",
        "",
        "import logging",
        "",
        "from toy.util.config import settings",
        "",
        "logger = logging.getLogger(__name__)",
        "",
        "",
    ]
    for index in range(functions):
        lines += _function(rng, module, index)
    return "\n".join(lines).rstrip() + "\n"


def _engine(rng: random.Random) -> str:
    text = _module(rng, "engine", 200)
    lines = text.splitlines()[:2_999]
    lines.append("# end of the engine")
    return "\n".join(lines) + "\n"


def _test(module: str, names: list[str]) -> str:
    dotted = module.replace("/", ".")
    lines = [f'"""Tests of toy.{dotted}."""', "", f"from toy.{dotted} import {', '.join(names)}"]
    for name in names:
        lines += ["", "", f"def test_{name}_skips_comments() -> None:"]
        lines.append(f'    assert {name}("# a comment\\n") == []')
    return "\n".join(lines) + "\n"


def repo_files() -> dict[str, str]:
    """Every file of the toy repository, by virtual path."""
    rng = random.Random(41)
    files = {
        "/README.md": "# toy\n\nA small package the session benchmark works on.\n\n"
        + "".join(f"- `toy.{area}`: {', '.join(mods)}\n" for area, mods in AREAS.items()),
        "/pyproject.toml": '[project]\nname = "toy"\nversion = "0.1.0"\n'
        'requires-python = ">=3.11"\n\n[tool.pytest.ini_options]\ntestpaths = ["tests"]\n',
        "/toy/__init__.py": '"""The toy package."""\n',
    }
    for area, modules in AREAS.items():
        files[f"/toy/{area}/__init__.py"] = f'"""toy.{area}."""\n'
        for module in modules:
            files[f"/toy/{area}/{module}.py"] = _module(rng, module, rng.randint(5, 14))
    files["/toy/engine.py"] = _engine(rng)
    for module in TESTED:
        names = re.findall(r"^def (\w+)\(", files[f"/toy/{module}.py"], re.M)[:3]
        files[f"/tests/test_{module.split('/')[1]}.py"] = _test(module, names)
    return files


def build_repo(root: Path) -> None:
    """Write the toy repository under `root`."""
    for path, text in repo_files().items():
        target = root / path.lstrip("/")
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text)


# --- the session ---


def _docstrings(text: str) -> list[str]:
    return re.findall(r'^    """.*"""$', text, re.M)


def _edit(files: dict[str, str], path: str, which: int) -> Call:
    """An edit that adds an input check under the `which`-th docstring of `path`."""
    doc = _docstrings(files[path])[which]
    check = '    if not isinstance(source, str):\n        raise TypeError("source must be a str")'
    return Call(
        "edit_file", {"file_path": path, "old_string": doc, "new_string": f"{doc}\n{check}"}
    )


def _read(path: str, offset: int = 0, limit: int = 400) -> Call:
    return Call("read_file", {"file_path": path, "offset": offset, "limit": limit})


def _grep(pattern: str, mode: str, path: str = "/", glob: str | None = None) -> Call:
    args: dict[str, Any] = {"pattern": pattern, "path": path, "output_mode": mode}
    if glob is not None:
        args["glob"] = glob
    return Call("grep", args)


def _todos(done: int, names: list[str]) -> Call:
    todos = [
        {
            "content": name,
            "status": "completed" if i < done else "in_progress" if i == done else "pending",
        }
        for i, name in enumerate(names)
    ]
    return Call("write_todos", {"todos": todos})


def _new_test(module: str, number: int) -> Call:
    name = module.split("/")[1]
    body = (
        f'"""More tests of toy.{module.replace("/", ".")}."""\n\nimport pytest\n\n'
        f"from toy.{module.replace('/', '.')} import *  # noqa: F403\n\n\n"
        f"def test_checks_{number}() -> None:\n    with pytest.raises(TypeError):\n"
        f"        {name}_first(None)  # noqa: F405\n"
    )
    return Call(
        "write_file", {"file_path": f"/tests/test_{name}_checks_{number}.py", "content": body}
    )


WORK = [  # the modules the main agent works through, in order
    "core/records", "core/schema", "io/reader", "util/text", "web/routes", "core/pipeline",
    "io/formats", "util/config", "web/handlers", "core/events", "io/stream", "util/retry",
    "web/auth", "core/registry", "io/cache", "util/dates",
]  # fmt: skip
SUBTASKS = {  # main step -> (subtask number, the modules its subagent handles)
    46: (1, ["web/forms", "web/render"]),
    112: (2, ["io/writer", "io/archive"]),
    166: (3, ["util/hashing", "util/timing"]),
}
BIG_READ_STEP = 61
TODO_NAMES = [
    "Survey the repository",
    "Add input checks to core",
    "Add input checks to io",
    "Add input checks to util and web",
    "Delegate the remaining modules",
    "Review the engine",
    "Write the report",
]


def sub_plan(number: int) -> list[Step]:
    """The steps of subtask `number`'s subagent; the last one is its report."""
    modules = next(m for n, m in SUBTASKS.values() if n == number)
    files = repo_files()
    first, second = (f"/toy/{m}.py" for m in modules)
    area = modules[0].split("/")[0]
    return [
        Step("I will look at both modules first.", (_read(first), _read(second))),
        Step(
            "Where is the first function called?",
            (_grep("raise KeyError", "content", f"/toy/{area}"),),
        ),
        Step("Adding the checks.", (_edit(files, first, 0), _edit(files, second, 0))),
        Step("Checking the first edit.", (_read(first, 0, 40),)),
        Step(f"Subtask {number} done: both modules check their input now."),
    ]


def task_description(number: int) -> str:
    modules = next(m for n, m in SUBTASKS.values() if n == number)
    return (
        f"{SUBTASK_MARK}{number}: in the toy repository, add an input check (raise TypeError "
        f"unless `source` is a str) to the first function of toy/{modules[0]}.py and of "
        f"toy/{modules[1]}.py, then report what you changed in one sentence."
    )


def _module_work(
    files: dict[str, str], edits: dict[str, int], module: str, number: int
) -> list[Step]:
    """The steps of working on one module: read it (and find its test) at once, find its
    callers, two edits each followed by a re-read, a look at the engine, a new test.
    Applies the edits to `files`, so that later edits of the module find their text."""
    path, name = f"/toy/{module}.py", module.split("/")[1]
    out = [
        Step(
            "Reading the module and finding its test.",
            (_read(path), _grep(name, "files_with_matches", "/tests")),
        ),
        Step("Who uses it?", (_grep(name, "content", "/", "*.py"),)),
    ]
    for again in (False, True):
        which = edits.get(path, 0)
        if which >= len(_docstrings(files[path])):
            break
        edit = _edit(files, path, which)
        files[path] = files[path].replace(edit.args["old_string"], edit.args["new_string"])
        edits[path] = which + 1
        out.append(Step("Adding the check.", (edit,)))
        out.append(Step("Checking the edit.", (_read(path, 20, 60) if again else _read(path),)))
    engine = _read("/toy/engine.py", (number * 37) % 2_800, 120)
    glob = Call("glob", {"pattern": f"toy/{module.split('/', maxsplit=1)[0]}/*.py", "path": "/"})
    out.append(Step("Looking at the engine's part of it.", (engine, glob)))
    out.append(Step("Adding a test.", (_new_test(module, number),)))
    return out


def main_plan() -> list[Step]:
    """The main agent's 200 steps; the last one is the final answer."""
    files = repo_files()
    steps: list[Step] = [
        Step("I'll start with a plan.", (_todos(0, TODO_NAMES),)),
        Step("Let me look around.", (Call("ls", {"path": "/"}), Call("ls", {"path": "/toy"}))),
        Step("Which Python files are there?", (Call("glob", {"pattern": "**/*.py", "path": "/"}),)),
        Step(
            "Reading the README and project file.", (_read("/README.md"), _read("/pyproject.toml"))
        ),
        Step("Where are the open TODOs?", (_grep("TODO", "files_with_matches"),)),
        Step("How is the configuration read?", (_grep("settings", "content", "/toy/util"),)),
    ]
    done = 1
    edits: dict[str, int] = {}
    queue: list[Step] = []
    modules = itertools.cycle(WORK)
    while len(steps) < MAIN_STEPS - 1:
        number = len(steps) + 1
        if number in SUBTASKS:
            sub, _ = SUBTASKS[number]
            task = {"description": task_description(sub), "subagent_type": "general-purpose"}
            steps.append(Step("Delegating two modules.", (Call("task", task),)))
        elif number == BIG_READ_STEP:
            steps.append(Step("Now the engine, all of it.", (_read("/toy/engine.py", 0, 3_000),)))
        elif number % 12 == 0:
            done = min(done + 1, len(TODO_NAMES) - 1)
            steps.append(Step("Updating the plan.", (_todos(done, TODO_NAMES),)))
        else:
            if not queue:
                queue = _module_work(files, edits, next(modules), number)
            steps.append(queue.pop(0))
    steps.append(
        Step(
            "Done. I added input checks to the modules I reviewed, tests for them, and "
            "delegated six modules to subagents."
        )
    )
    return steps


def plan_for(agent: str) -> list[Step]:
    return main_plan() if agent == "main" else sub_plan(int(agent.removeprefix("sub")))


def agent_of(first_user_text: str) -> str:
    """Which agent a request comes from, by its first user message."""
    if first_user_text.startswith(SUBTASK_MARK):
        return "sub" + first_user_text[len(SUBTASK_MARK) :].split(":", 1)[0]
    return "main"


def call_id(agent: str, step: int, index: int) -> str:
    """A call id as long as Anthropic's, the same on both sides."""
    digest = hashlib.sha256(f"{agent}/{step}/{index}".encode()).hexdigest()[:24]
    return f"toolu_01{digest}"


SUMMARY = (
    "Summary of the session so far: the agent surveyed the toy repository, added input "
    "checks (raise TypeError unless `source` is a str) to several modules of core, io, "
    "util and web, wrote tests for them, delegated two modules at a time to subagents, "
    "and read toy/engine.py. The todo list tracks what is left."
)


# --- what the session must do ---


@dataclass
class Expected:
    """What the session must show: a text each read's result holds (by call id), and
    each file's text at the end."""

    reads: dict[str, str] = field(default_factory=dict)
    files: dict[str, str] = field(default_factory=dict)


def simulate() -> Expected:
    files = repo_files()
    expected = Expected()
    agents = [("main", main_plan())] + [(f"sub{n}", sub_plan(n)) for n, _ in SUBTASKS.values()]
    for agent, plan in agents:  # the subagents touch only their own modules
        for number, step in enumerate(plan, start=1):
            for index, call in enumerate(step.calls):
                args = call.args
                if call.tool == "read_file":
                    lines = files[args["file_path"]].splitlines()
                    window = [
                        line.strip()
                        for line in lines[args["offset"] : args["offset"] + args["limit"]]
                    ]
                    shown = [line for line in window[:40] if len(line) > 12]
                    expected.reads[call_id(agent, number, index)] = shown[len(shown) // 2]
                elif call.tool == "edit_file":
                    text = files[args["file_path"]]
                    if text.count(args["old_string"]) != 1:
                        raise SystemExit(f"the plan's edit {args} does not apply once")
                    files[args["file_path"]] = text.replace(args["old_string"], args["new_string"])
                elif call.tool == "write_file":
                    files[args["file_path"]] = args["content"]
    expected.files = files
    return expected


def check(root: Path, seen: dict[str, str]) -> list[str]:
    """What went wrong in a side's session: `seen` maps each read's call id to the text
    its result showed the model; the files are read back from `root`."""
    expected = simulate()
    problems = []
    for call, text in expected.reads.items():
        if call not in seen:
            problems.append(f"read {call} never came back")
        elif text not in seen[call]:
            problems.append(f"read {call} does not show {text!r}: {seen[call][:200]!r}")
    for path, text in expected.files.items():
        target = root / path.lstrip("/")
        if not target.is_file():
            problems.append(f"{path} is missing")
        elif target.read_text() != text:
            problems.append(f"{path} does not hold what the session wrote")
    return problems


# --- the cost of what was sent ---


def chars(value: Any) -> int:
    """Characters of the text in a JSON value: every key and string, numbers as written,
    no JSON punctuation or escapes (what a tokenizer reads, roughly)."""
    if isinstance(value, str):
        return len(value)
    if isinstance(value, dict):
        return sum(len(k) + chars(v) for k, v in value.items() if k != "cache_control")
    if isinstance(value, list):
        return sum(chars(v) for v in value)
    if value is None:
        return 0
    return len(json.dumps(value))


def _key(value: Any) -> str:
    if isinstance(value, dict):
        value = {k: v for k, v in value.items() if k != "cache_control"}
    return json.dumps(value, sort_keys=True, ensure_ascii=False)


@dataclass
class Block:
    """One block of a request in cache order (tools, system, messages)."""

    key: str
    tokens: float
    part: str
    breakpoint: bool


def request_blocks(payload: dict[str, Any], names: dict[str, str]) -> list[Block]:
    """The blocks of an Anthropic Messages request body, in the order the cache sees them;
    `names` maps tool-use ids to tool names (to count results by tool). A top-level
    `cache_control` (automatic caching) puts a breakpoint on the last block."""
    blocks: list[Block] = []
    for tool in payload.get("tools") or []:
        blocks.append(
            Block(_key(tool), chars(tool) / CHARS_PER_TOKEN, "tools", "cache_control" in tool)
        )
    system = payload.get("system")
    if isinstance(system, str):
        system = [{"type": "text", "text": system}]
    for block in system or []:
        blocks.append(
            Block(_key(block), chars(block) / CHARS_PER_TOKEN, "system", "cache_control" in block)
        )
    for number, message in enumerate(payload["messages"]):
        content = message["content"]
        if isinstance(content, str):
            content = [{"type": "text", "text": content}]
        for index, block in enumerate(content):
            # A block's place in its message is part of what is cached.
            key = f"{number}:{message['role']}:{index}:{_key(block)}"
            size = chars(block) / CHARS_PER_TOKEN + (1 if index == 0 else 0)
            blocks.append(
                Block(key, size, _part(message["role"], block, names), "cache_control" in block)
            )
    if payload.get("cache_control") and blocks:
        blocks[-1].breakpoint = True
    return blocks


def _part(role: str, block: dict[str, Any], names: dict[str, str]) -> str:
    kind = block.get("type")
    if kind == "tool_result":
        return f"tool results: {names.get(block.get('tool_use_id', ''), 'other')}"
    if kind == "tool_use":
        return "tool calls"
    return "assistant text" if role == "assistant" else "user text"


class Ledger:
    """Prices a side's requests, in order, with Anthropic prompt caching: a prefix that
    ends at a breakpoint is written to the cache (1.25x its tokens past what was read);
    a request reads the longest cached prefix that ends at or up to `LOOKBACK_BLOCKS`
    blocks before one of its breakpoints (0.1x); the rest costs 1x. Prefixes are
    compared block by block, `cache_control` left out. The cache is shared by the main
    agent and its subagents (one account), and entries never expire (5-minute TTL
    ignored: the scripted session takes seconds)."""

    def __init__(self) -> None:
        self.cached: set[str] = set()
        self.rows: list[dict[str, Any]] = []

    def add(self, agent: str, kind: str, step: int, blocks: list[Block]) -> dict[str, Any]:
        chain, prefix, total = [], hashlib.sha256(), 0.0
        sizes = []
        for block in blocks:
            prefix.update(block.key.encode())
            prefix.update(b"\x00")
            chain.append(prefix.hexdigest())
            total += block.tokens
            sizes.append(total)
        marks = [i for i, b in enumerate(blocks) if b.breakpoint]
        read_end = -1
        for mark in marks:
            for i in range(mark, max(mark - LOOKBACK_BLOCKS, -1), -1):
                if chain[i] in self.cached:
                    read_end = max(read_end, i)
                    break
        read = sizes[read_end] if read_end >= 0 else 0.0
        last = marks[-1] if marks else -1
        written = max(0.0, sizes[last] - read) if last >= 0 else 0.0
        for mark in marks:
            if sizes[mark] >= MIN_CACHED_TOKENS:
                self.cached.add(chain[mark])
        if last >= 0 and sizes[last] < MIN_CACHED_TOKENS:
            written = 0.0
        rest = total - read - written
        parts: dict[str, float] = {}
        for block in blocks:
            parts[block.part] = parts.get(block.part, 0.0) + block.tokens
        row = {
            "agent": agent,
            "kind": kind,
            "step": step,
            "tokens": round(total),
            "cache_read": round(read),
            "cache_write": round(written),
            "cost": round(READ * read + WRITE * written + rest, 1),
            "blocks": len(blocks),
            "breakpoints": len(marks),
            "parts": {k: round(v) for k, v in parts.items()},
        }
        self.rows.append(row)
        return row


# --- the scripted model, from the request body a side would send ---


def _text_of(content: Any) -> str:
    if isinstance(content, str):
        return content
    texts = []
    for block in content:
        if isinstance(block, dict):
            if block.get("type") == "text":
                texts.append(block.get("text", ""))
            elif block.get("type") == "tool_result":
                texts.append(_text_of(block.get("content") or ""))
        elif isinstance(block, str):
            texts.append(block)
    return "\n".join(texts)


DUMP = os.environ.get("SESSION_DUMP")  # a file to append every request body to, for a look
_SUBTASK = re.compile(re.escape(SUBTASK_MARK) + r"(\d+):")


@dataclass
class Reply:
    """What the scripted model answers: a summary (to a compaction request, which has no
    tools), or a step of the plan with the ids of its calls."""

    agent: str
    step: int
    text: str
    calls: list[tuple[str, Call]]


class Script:
    """The scripted model of one side's session: picks each reply by agent and step
    number, prices every request body with a `Ledger`, and keeps what each read showed."""

    def __init__(self) -> None:
        self.ledger = Ledger()
        self.plans = {"main": main_plan()} | {f"sub{n}": sub_plan(n) for n, _ in SUBTASKS.values()}
        self.steps: dict[str, int] = {}
        self.names: dict[str, str] = {}
        self.seen: dict[str, str] = {}
        self.summaries: list[int] = []  # the main step after which each compaction came

    def reply(self, payload: dict[str, Any]) -> Reply:
        """The reply to the Anthropic request body `payload`."""
        if DUMP:
            with open(DUMP, "a") as out:
                out.write(json.dumps(payload) + "\n")
        messages = payload["messages"]
        for message in messages:
            if message["role"] == "user" and not isinstance(message["content"], str):
                for block in message["content"]:
                    if isinstance(block, dict) and block.get("type") == "tool_result":
                        self.seen.setdefault(block["tool_use_id"], _text_of(block["content"]))
        blocks = request_blocks(payload, self.names)
        main_step = self.steps.get("main", 0)
        if not payload.get("tools"):
            self.summaries.append(main_step)
            self.ledger.add("summary", "summary", main_step, blocks)
            return Reply("summary", main_step, SUMMARY, [])
        first = next((m for m in messages if m["role"] == "user"), None)
        found = _SUBTASK.search(_text_of(first["content"])) if first else None
        agent = f"sub{found.group(1)}" if found else "main"
        number = self.steps[agent] = self.steps.get(agent, 0) + 1
        row = self.ledger.add(agent, "step", number, blocks)
        row["main_step"] = self.steps.get("main", 0)
        plan = self.plans[agent]
        if number > len(plan):
            raise SystemExit(f"{agent} asked for step {number} of {len(plan)}")
        step = plan[number - 1]
        calls = [(call_id(agent, number, i), call) for i, call in enumerate(step.calls)]
        self.names.update((cid, call.tool) for cid, call in calls)
        return Reply(agent, number, step.text, calls)

    def result(self, root: Path) -> dict[str, Any]:
        """Everything the side measured, and what went wrong in its session."""
        for row in self.ledger.rows:
            row.setdefault("main_step", row["step"])
        return {
            "requests": self.ledger.rows,
            "steps": self.steps,
            "compactions": self.summaries,
            "problems": check(root, self.seen),
        }
