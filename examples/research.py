"""Research with parallel subagents: the lead agent hands two questions to subagents at
once, each works in its own context, and the lead writes the summary from their reports."""

from __future__ import annotations

from _model import pick

from tether import RunResult, SubAgent, create_agent
from tether.messages import ToolCall


def main() -> RunResult[str]:
    researcher = SubAgent(
        name="researcher",
        description="Answers one research question and reports its findings with sources.",
        system_prompt="You research one question. Report findings as short bullet points.",
        tools=[],
    )
    questions = [
        "What problems does SQLite's WAL mode solve?",
        "When is Postgres the better choice than SQLite?",
    ]
    model = pick(
        [
            [  # the lead starts both subagents in one turn: they run at the same time
                ToolCall("task", {"description": q, "subagent_type": "researcher"}, id=f"q{i}")
                for i, q in enumerate(questions)
            ],
            "- WAL lets readers and one writer work at once.",
            "- Postgres suits many writers and many machines.",
            "Use SQLite in one process or one machine; Postgres when many write at once.",
        ]
    )
    lead = create_agent(model, subagents=[researcher])
    result = lead.run("Compare SQLite and Postgres for storing agent checkpoints.")
    assert result.output is not None, result.stop_reason
    print(result.output)
    for agent_path, usage in result.usage_by_agent.items():
        print(f"{agent_path}: {usage.total_tokens} tokens")
    return result


if __name__ == "__main__":
    main()
