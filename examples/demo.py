"""`make demo`: a real model drives a real agent through a small file task.

With ANTHROPIC_API_KEY or OPENAI_API_KEY set it uses Claude or GPT; with neither it
uses the offline model (SmolLM2-135M on the CPU, from the `local` extra), so it works on
a fresh machine with no key and no network. The agent writes into a temporary folder.

    python examples/demo.py [folder]
"""

from __future__ import annotations

import asyncio
import sys
import tempfile
from pathlib import Path

from tether import Limits, RunResult, create_agent
from tether.backends import FilesystemBackend
from tether.events import RunFinished, ToolCallFinished, ToolCallStarted
from tether.models import OFFLINE_NOTICE, default_model

TASK = 'Call write_file with file_path /hello.txt and content "Hello from tether", then finish.'


async def demo(folder: Path) -> RunResult:
    model = default_model()
    print(f"model: {model}" + (f" ({OFFLINE_NOTICE})" if model.startswith("local:") else ""))
    agent = create_agent(
        model,
        backend=FilesystemBackend(folder),
        limits=Limits(max_steps=8, max_cost_usd=0.10, timeout_seconds=300),
    )
    print(f"task: {TASK}")
    result: RunResult | None = None
    async for event in agent.stream(TASK):
        if isinstance(event, ToolCallStarted):
            print(f"  -> {event.call.name}({event.call.args})")
        elif isinstance(event, ToolCallFinished):
            print(f"  <- {event.result.text}")
        elif isinstance(event, RunFinished):
            result = event.result
    assert result is not None
    print(f"answer: {result.output}")
    print(f"stop reason: {result.stop_reason}, steps: {result.steps}")
    print(f"tokens: {result.usage.total_tokens}, cost: ${result.cost_usd:.4f}")
    written = folder / "hello.txt"
    print(f"{written}: {written.read_text()!r}" if written.exists() else f"{written} missing")
    return result


def main() -> None:
    if len(sys.argv) > 1:
        folder = Path(sys.argv[1])
        folder.mkdir(parents=True, exist_ok=True)
        asyncio.run(demo(folder))
        return
    with tempfile.TemporaryDirectory() as tmp:
        asyncio.run(demo(Path(tmp)))


if __name__ == "__main__":
    main()
