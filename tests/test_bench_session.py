"""The session benchmark's script, cost model and tether side (bench/session*.py), so
`make bench` cannot rot unnoticed. deepagents' side is exercised by `make bench`."""

from __future__ import annotations

import json
import subprocess
import sys
from collections import Counter
from pathlib import Path

BENCH = Path(__file__).resolve().parent.parent / "bench"
sys.path.insert(0, str(BENCH))

import session_script as script  # noqa: E402


def test_the_session_walks_every_kind_of_step() -> None:
    plan = script.main_plan()
    assert len(plan) == script.MAIN_STEPS
    assert not plan[-1].calls
    calls = [call for step in plan for call in step.calls]
    tools = Counter(call.tool for call in calls)
    assert tools["task"] == 3
    assert tools["write_todos"] > 5
    assert tools["ls"]
    assert tools["glob"]
    modes = {call.args["output_mode"] for call in calls if call.tool == "grep"}
    assert modes == {"content", "files_with_matches"}
    assert any(c.tool == "read_file" and c.args["limit"] == 3_000 for c in calls)
    assert sum(len(step.calls) > 1 for step in plan) > 10
    for number, step in enumerate(plan[:-4]):  # an edit is read back within three steps
        for edit in (c for c in step.calls if c.tool == "edit_file"):
            after = [c for later in plan[number + 1 : number + 4] for c in later.calls]
            path = edit.args["file_path"]
            assert any(c.tool == "read_file" and c.args["file_path"] == path for c in after)
    assert len(script.repo_files()["/toy/engine.py"].splitlines()) == 3_000
    expected = script.simulate()  # raises when an edit would not apply exactly once
    subagents = [c for n in (1, 2, 3) for step in script.sub_plan(n) for c in step.calls]
    reads = [c for c in calls + subagents if c.tool == "read_file"]
    assert len(expected.reads) == len(reads)


def block(key: str, tokens: float, breakpoint: bool = False) -> script.Block:
    return script.Block(key, tokens, "user text", breakpoint)


def test_the_cache_reads_the_longest_cached_prefix_near_a_breakpoint() -> None:
    ledger = script.Ledger()
    first = [block("system", 2_000, True), block("a", 100, True)]
    assert ledger.add("main", "step", 1, first)["cost"] == 1.25 * 2_100
    grown = [block("system", 2_000, True), block("a", 100), block("b", 50, True)]
    row = ledger.add("main", "step", 2, grown)
    assert (row["cache_read"], row["cache_write"]) == (2_100, 50)
    assert row["cost"] == 0.1 * 2_100 + 1.25 * 50
    changed = [block("system", 2_000, True), block("A", 100), block("b", 50, True)]
    assert ledger.add("main", "step", 3, changed)["cache_read"] == 2_000
    far = [block("system", 2_000), *(block(str(i), 10) for i in range(30)), block("z", 1, True)]
    assert ledger.add("main", "step", 4, far)["cache_read"] == 0  # past the 20-block lookback
    small = script.Ledger()
    small.add("main", "step", 1, [block("s", 500, True)])
    assert small.add("main", "step", 2, [block("s", 500, True)])["cache_read"] == 0


def test_tether_walks_the_whole_session(tmp_path: Path) -> None:
    output = tmp_path / "tether.json"
    command = [sys.executable, "session_tether.py", str(output)]
    done = subprocess.run(command, cwd=BENCH, capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr
    found = json.loads(output.read_text())
    assert found["problems"] == []  # every read showed its text, every edit landed
    assert found["steps"] == {"main": 200, "sub1": 5, "sub2": 5, "sub3": 5}
    first = found["requests"][0]
    assert first["breakpoints"] > 0
    assert first["cache_write"] > 0
    assert sum(r["cache_read"] for r in found["requests"]) > 0
