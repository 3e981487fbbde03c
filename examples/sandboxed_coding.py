"""A coding task in a sandbox: the agent writes a module and its test, then runs the test
with `execute` inside bubblewrap (no network, read-only system, bounded resources)."""

from __future__ import annotations

import tempfile

from _model import pick

from tether import RunResult, create_agent
from tether.backends.sandbox import LocalSandbox
from tether.capabilities.sandbox import CommandPolicy
from tether.messages import ToolCall

CODE = "def slug(text):\n    return '-'.join(text.lower().split())\n"
TEST = "from slug import slug\n\nassert slug('Hello World') == 'hello-world'\nprint('ok')\n"


def main() -> RunResult[str]:
    model = pick(
        [
            [
                ToolCall("write_file", {"file_path": "/slug.py", "content": CODE}),
                ToolCall("write_file", {"file_path": "/test_slug.py", "content": TEST}),
            ],
            [ToolCall("execute", {"command": "python3 test_slug.py"})],
            "slug() is written and its test passes.",
        ]
    )
    agent = create_agent(
        model,
        backend=LocalSandbox(tempfile.mkdtemp(), timeout_seconds=60),
        command_policy=CommandPolicy(deny=[r"\bpip\b", r"\bcurl\b"]),
    )
    result = agent.run("Write slug(text) in slug.py with a test, and run the test.")
    assert result.output is not None, result.stop_reason
    print(result.output)
    return result


if __name__ == "__main__":
    main()
