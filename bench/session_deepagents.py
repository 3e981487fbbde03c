"""deepagents' side of the session benchmark (`bench/session.py`). Runs in
bench/.venv-deepagents.

bench/.venv-deepagents/bin/python bench/session_deepagents.py OUTPUT.json

deepagents' default agent (`create_deep_agent`) with its file tools over a
`FilesystemBackend(root_dir=..., virtual_mode=True)` of the toy repository, plus
langchain's `TodoListMiddleware` for `write_todos` (deepagents 0.7 leaves that tool out
by default; its own harness profiles add this middleware for it), runs the scripted
session. The model is langchain-anthropic's `ChatAnthropic` with a 200k window whose one
network call is replaced: each request body it would send (`_get_request_payload`, after
deepagents' `AnthropicPromptCachingMiddleware`) is recorded and priced, and the scripted
reply comes back as an Anthropic `Message` through ChatAnthropic's own output parsing.
"""

from __future__ import annotations

import asyncio
import json
import sys
import tempfile
from pathlib import Path
from typing import Any

import session_script as script
from anthropic.types import Message, TextBlock, ToolUseBlock, Usage
from deepagents import create_deep_agent
from deepagents.backends import FilesystemBackend
from langchain.agents.middleware import TodoListMiddleware
from langchain_anthropic import ChatAnthropic

SESSION = script.Script()


class _Raw:
    """Stands for the SDK's raw response: `parse()` gives the message."""

    def __init__(self, message: Message) -> None:
        self.message = message

    def parse(self) -> Message:
        return self.message


class RecordedChatAnthropic(ChatAnthropic):
    """ChatAnthropic whose request bodies go to the script instead of the network."""

    def _answer(self, payload: dict[str, Any]) -> _Raw:
        body = json.loads(json.dumps(payload, default=str))
        reply = SESSION.reply(body)
        content: list[Any] = [TextBlock(type="text", text=reply.text)]
        content += [
            ToolUseBlock(type="tool_use", id=cid, name=call.tool, input=dict(call.args))
            for cid, call in reply.calls
        ]
        usage = Usage(
            input_tokens=SESSION.ledger.rows[-1]["tokens"],
            output_tokens=max(1, len(json.dumps([c.args for _, c in reply.calls])) // 4),
        )
        message = Message(
            id=f"msg_{len(SESSION.ledger.rows)}",
            type="message",
            role="assistant",
            model=script.MODEL,
            content=content,
            stop_reason="tool_use" if reply.calls else "end_turn",
            stop_sequence=None,
            usage=usage,
        )
        return _Raw(message)

    def _create(self, payload: dict[str, Any]) -> Any:
        return self._answer(payload)

    async def _acreate(self, payload: dict[str, Any]) -> Any:
        return self._answer(payload)


def main() -> None:
    output = Path(sys.argv[1])
    model = RecordedChatAnthropic(model=script.MODEL, api_key="offline")  # type: ignore[call-arg]
    window = (model.profile or {}).get("max_input_tokens")
    if window != script.WINDOW:
        raise SystemExit(f"ChatAnthropic's profile gives a window of {window}, not {script.WINDOW}")
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        script.build_repo(root)
        agent = create_deep_agent(
            model,
            backend=FilesystemBackend(root_dir=root, virtual_mode=True),
            middleware=[TodoListMiddleware()],
        )
        state = asyncio.run(
            agent.ainvoke(
                {"messages": [{"role": "user", "content": script.TASK}]},
                {"recursion_limit": 10_000},
            )
        )
        found = SESSION.result(root)
    found["stop_reason"] = "completed"
    found["answer"] = str(state["messages"][-1].content)
    output.write_text(json.dumps(found))


if __name__ == "__main__":
    main()
