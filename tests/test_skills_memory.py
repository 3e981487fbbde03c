"""Skills (progressive disclosure, bad skills isolated) and memory files."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from tether import ConfigurationError, create_agent
from tether.backends import CompositeBackend, FilesystemBackend, StateBackend, StoreBackend
from tether.capabilities.memory import MemoryWarning
from tether.capabilities.skills import SkillWarning, parse_skill
from tether.messages import ToolCall, ToolResultMessage
from tether.models import ScriptedModel
from tether.stores import InMemoryStore, SqliteStore


def skill(name: str, description: str, body: str = "Do the thing.", **extra: str) -> str:
    fields = "".join(f"{k}: {v}\n" for k, v in extra.items())
    return f"---\nname: {name}\ndescription: {description}\n{fields}---\n\n{body}\n"


def write(root: Path, path: str, text: str) -> None:
    target = root / path.lstrip("/")
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(text)


@pytest.fixture
def project(tmp_path: Path) -> Path:
    root = tmp_path / "project"
    write(
        root,
        "/skills/pdf-forms/SKILL.md",
        skill("pdf-forms", "Fill in PDF forms.", "Run scripts/fill.py.", license="MIT"),
    )
    write(root, "/skills/pdf-forms/scripts/fill.py", "print('filled')\n")
    write(root, "/skills/changelog/SKILL.md", skill("changelog", "Write a changelog entry."))
    write(root, "/skills/no-manual/README.md", "nothing here")
    write(root, "/skills/Bad_Name/SKILL.md", skill("Bad_Name", "Breaks the naming rule."))
    write(root, "/skills/broken/SKILL.md", "---\nname: [unclosed\n---\nbody\n")
    write(root, "/skills/mismatch/SKILL.md", skill("other-name", "Name and folder differ."))
    write(root, "/team-skills/changelog/SKILL.md", skill("changelog", "Team changelog rules."))
    return root


def test_only_frontmatter_is_in_the_prompt_and_bad_skills_are_isolated(project: Path) -> None:
    model = ScriptedModel(
        [[ToolCall("read_file", {"file_path": "/skills/pdf-forms/SKILL.md"})], "done"]
    )
    agent = create_agent(
        model,
        backend=FilesystemBackend(project),
        skills=["/skills/", "/team-skills/"],
    )
    with pytest.warns(SkillWarning) as caught:
        result = agent.run("Fill in the form.")
    messages = sorted(str(w.message) for w in caught)
    assert any("/skills/no-manual has no SKILL.md" in m for m in messages)
    assert any("Bad_Name" in m and "lowercase" in m for m in messages)
    assert any(
        "/skills/broken/SKILL.md skipped: the frontmatter is not valid YAML" in m for m in messages
    )
    assert any("must match its directory name 'mismatch'" in m for m in messages)
    assert any("'changelog' in /skills/changelog/SKILL.md is replaced" in m for m in messages)

    prompt = model.requests[0].system_prompt
    assert "- pdf-forms: Fill in PDF forms. (/skills/pdf-forms/SKILL.md)" in prompt
    assert "- changelog: Team changelog rules. (/team-skills/changelog/SKILL.md)" in prompt
    assert "Run scripts/fill.py." not in prompt  # the body waits until the agent reads it
    assert "Bad_Name" not in prompt
    assert prompt.index("## Skills") < prompt.index("## Files")
    (read,) = [
        r.text for m in result.messages if isinstance(m, ToolResultMessage) for r in m.results
    ]
    assert "Run scripts/fill.py." in read


def test_skills_come_from_several_backends(tmp_path: Path, project: Path) -> None:
    stored = StoreBackend(InMemoryStore(), namespace="skills")
    backend = CompositeBackend(default=FilesystemBackend(project), routes={"/mem/": stored})
    store_skill = skill("from-store", "Lives in a key-value store.")

    async def seed() -> None:
        await backend.write("/mem/skills/from-store/SKILL.md", store_skill.encode())

    asyncio.run(seed())
    model = ScriptedModel(["ok"])
    with pytest.warns(SkillWarning):
        create_agent(model, backend=backend, skills=["/skills/", "/mem/skills/"]).run("x")
    prompt = model.requests[0].system_prompt
    assert "- from-store: Lives in a key-value store." in prompt
    assert "- pdf-forms:" in prompt


def test_the_frontmatter_rules() -> None:
    ok = parse_skill(
        "/s/tidy/SKILL.md",
        skill("tidy", "Tidy  up\n  code.", **{"allowed-tools": "read_file edit_file"}),
    )
    assert ok.description == "Tidy up code."
    assert ok.allowed_tools == ("read_file", "edit_file")
    for bad, why in [
        ("no frontmatter", "must start with YAML frontmatter"),
        ("---\nname: tidy\n", "no closing"),
        (skill("tidy", "x", color="red"), "unknown frontmatter fields \\['color'\\]"),
        (skill("-tidy", "x"), "lowercase letters"),
        (skill("ti--dy", "x"), "lowercase letters"),
        ("---\nname: tidy\n---\n", "description must be"),
    ]:
        with pytest.raises(ValueError, match=why):
            parse_skill("/s/tidy/SKILL.md", bad)


def test_memory_is_loaded_every_run_updated_and_seen_in_a_new_thread(tmp_path: Path) -> None:
    store = SqliteStore(tmp_path / "store.db")

    def agent(turns: list[object]) -> object:
        backend = CompositeBackend(
            default=StateBackend(),
            routes={"/memories/": StoreBackend(store, namespace="assistant")},
        )
        return create_agent(
            ScriptedModel(turns),  # type: ignore[arg-type]
            backend=backend,
            memory=["/memories/AGENTS.md", "/memories/team.md"],
            checkpointer=f"sqlite:///{tmp_path}/runs.db",
        )

    first = agent(
        [
            [
                ToolCall(
                    "write_file", {"file_path": "/memories/AGENTS.md", "content": "- Use tabs."}
                )
            ],
            "Noted.",
        ]
    )
    first.run("Always use tabs.", thread_id="one")  # type: ignore[attr-defined]
    before = first._plan.system_prompt  # type: ignore[attr-defined]
    assert "Use tabs" not in before

    later_model = ScriptedModel(["Tabs it is."])
    later = create_agent(
        later_model,
        backend=CompositeBackend(
            default=StateBackend(),
            routes={"/memories/": StoreBackend(store, namespace="assistant")},
        ),
        memory=["/memories/AGENTS.md", "/memories/team.md"],
    )
    later.run("Format this file.")
    prompt = later_model.requests[0].system_prompt
    assert "### /memories/AGENTS.md\n- Use tabs." in prompt
    assert "### /memories/team.md\n(does not exist yet)" in prompt
    assert prompt.index("## Memory") < prompt.index("## Files")


def test_memory_over_the_cap_is_cut_in_the_prompt_with_a_warning(tmp_path: Path) -> None:
    from tether.capabilities.memory import Memory

    root = tmp_path / "p"
    write(root, "/AGENTS.md", "x" * 500)
    model = ScriptedModel(["ok"])
    agent = create_agent(
        model, backend=FilesystemBackend(root), capabilities=[Memory(["/AGENTS.md"], max_chars=100)]
    )
    with pytest.warns(MemoryWarning, match="over 100 characters"):
        agent.run("hi")
    prompt = model.requests[0].system_prompt
    assert "x" * 100 + "\n[... cut: 400 more characters in /AGENTS.md]" in prompt
    assert (root / "AGENTS.md").read_text() == "x" * 500  # never cut on disk


def test_skills_and_memory_need_the_file_tools_and_lists() -> None:
    with pytest.raises(ConfigurationError, match="filesystem=True"):
        create_agent(ScriptedModel(["x"]), filesystem=False, memory=["/AGENTS.md"])
    with pytest.raises(ConfigurationError, match="list of directories"):
        create_agent(ScriptedModel(["x"]), skills="/skills/")  # type: ignore[arg-type]
    with pytest.raises(ConfigurationError, match="bad memory path"):
        create_agent(ScriptedModel(["x"]), memory=["/../etc/passwd"])
