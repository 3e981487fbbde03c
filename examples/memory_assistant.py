"""An assistant with long-term memory: what it learns in one conversation is in its
memory file in the next one, kept in SQLite under /memories/."""

from __future__ import annotations

import tempfile
from pathlib import Path

from _model import pick

from tether import Agent, RunResult, create_agent
from tether.backends import CompositeBackend, StateBackend, StoreBackend
from tether.messages import ToolCall
from tether.stores import SqliteStore


def assistant(home: Path, turns: list[object]) -> Agent[str]:
    backend = CompositeBackend(
        default=StateBackend(),
        routes={"/memories/": StoreBackend(SqliteStore(home / "memory.db"), namespace="me")},
    )
    return create_agent(
        pick(turns),  # type: ignore[arg-type]
        backend=backend,
        memory=["/memories/AGENTS.md"],
        checkpointer=f"sqlite:///{home}/runs.db",
    )


def main() -> tuple[Agent[str], RunResult[str]]:
    home = Path(tempfile.mkdtemp())
    note = "- Prefers answers in bullet points.\n"
    monday = assistant(
        home,
        [
            [ToolCall("write_file", {"file_path": "/memories/AGENTS.md", "content": note})],
            "Noted: bullet points from now on.",
        ],
    )
    monday.run("Please always answer in bullet points.", thread_id="monday")
    tuesday = assistant(home, ["- Tabs.\n- Four wide."])
    result = tuesday.run("Tabs or spaces?", thread_id="tuesday")
    print(result.output)
    return tuesday, result


if __name__ == "__main__":
    main()
