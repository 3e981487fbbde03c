"""tether's side of the session benchmark (`bench/session.py`). Runs in the project's .venv.

.venv/bin/python bench/session_tether.py OUTPUT.json

tether's default agent, with its file tools over a `FilesystemBackend` of the toy
repository, runs the scripted session. The model is tether's own `AnthropicModel`
with a 200k window whose one network call is replaced: each request body it would send
(`AnthropicModel.params`, cache breakpoints included) is recorded and priced, and the
scripted reply comes back instead.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import sys
import tempfile
from collections.abc import AsyncGenerator
from pathlib import Path
from typing import Any

import session_script as script

from tether import Limits, create_agent
from tether.backends import FilesystemBackend
from tether.messages import AssistantMessage, TextPart, ToolCall, Usage
from tether.models import ModelResponse
from tether.models.anthropic import AnthropicModel
from tether.models.base import ModelRequest, StreamItem
from tether.models.profiles import profile_for


class RecordedClaude(AnthropicModel):
    """Claude as tether sends to it, answered by the script instead of the network."""

    def __init__(self, session: script.Script) -> None:
        profile = dataclasses.replace(
            profile_for("anthropic", script.MODEL), max_input_tokens=script.WINDOW
        )
        super().__init__(script.MODEL, client=object(), profile=profile)
        self.session = session

    async def _attempt(self, request: ModelRequest) -> AsyncGenerator[StreamItem, None]:
        payload = self.params(request)
        payload.pop("timeout", None)
        reply = self.session.reply(json.loads(json.dumps(payload)))
        parts: list[Any] = [TextPart(reply.text)]
        parts += [ToolCall(call.tool, dict(call.args), cid) for cid, call in reply.calls]
        usage = Usage(
            input_tokens=self.session.ledger.rows[-1]["tokens"],
            output_tokens=max(1, len(json.dumps([c.args for _, c in reply.calls])) // 4),
            requests=1,
        )
        message = AssistantMessage(tuple(parts), model_name=script.MODEL, usage=usage)
        yield ModelResponse(message, "tool_calls" if reply.calls else "stop")


def main() -> None:
    output = Path(sys.argv[1])
    session = script.Script()
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        script.build_repo(root)
        agent = create_agent(
            RecordedClaude(session),
            backend=FilesystemBackend(root),
            limits=Limits(max_steps=None),  # the session is 200 steps: no wrap-up nudge
            checkpointer=None,
        )
        result = asyncio.run(agent.arun(script.TASK))
        found = session.result(root)
    found["stop_reason"] = result.stop_reason
    found["answer"] = str(result.output)
    output.write_text(json.dumps(found))


if __name__ == "__main__":
    main()
