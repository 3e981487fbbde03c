"""The benchmark's tether side and its checks, so `make bench` cannot rot unnoticed.

deepagents' side needs its own virtual environment and is exercised by `make bench`.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

BENCH = Path(__file__).resolve().parent.parent / "bench"
sys.path.insert(0, str(BENCH))

import scenarios  # noqa: E402


def side(script: str, name: str, **args: object) -> dict[str, Any]:
    command = [sys.executable, script, name, *(f"{k}={v}" for k, v in args.items())]
    done = subprocess.run(command, cwd=BENCH, capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr
    result: dict[str, Any] = json.loads(done.stdout)
    return result


def play(steps: int, tool_result: Any, *, writes: bool = True) -> scenarios.Run:
    """Runs the count script against a fake harness whose `add` gives `tool_result`
    and whose `write_file` stores the file only if `writes`."""
    clock, files, last, made = scenarios.ModelClock(), {}, None, 0
    while True:
        made += 1
        action = scenarios.next_action(f"count {steps}", last)
        if isinstance(action, scenarios.Answer):
            return scenarios.Run(0.0, clock, made, files.get(scenarios.RESULT_FILE), action.text)
        if action.name == "add":
            last = str(tool_result(**action.args))
        else:
            if writes:
                files[action.args["file_path"]] = action.args["content"]
            last = "Wrote the file."


def test_the_script_needs_every_tool_result() -> None:
    scenarios.check_count(play(10, lambda a, b: a + b), 10)
    with pytest.raises(SystemExit, match="model steps"):
        scenarios.check_count(play(10, lambda a, b: a + b + 1), 10)  # a wrong sum
    with pytest.raises(SystemExit, match=r"result\.txt"):
        scenarios.check_count(play(10, lambda a, b: a + b, writes=False), 10)
    with pytest.raises(SystemExit, match="model steps"):
        scenarios.check_count(play(10, lambda a, b: "error: no such tool"), 10)


def test_search_results_are_counted_in_either_format() -> None:
    listed = "/pkg000/module25.py\n/pkg001/module125.py"
    assert scenarios.count_paths(listed) == 2
    assert scenarios.count_paths(str(listed.splitlines())) == 2


def test_tether_side_runs_every_scenario(tmp_path: Path) -> None:
    steps = side("tether_side.py", "steps", steps=300, repeat=1)
    assert steps["us_per_step"] > 0
    assert steps["last_100_over_first_100"] > 0
    assert side("tether_side.py", "memory", steps=20)["peak_rss_mb"] > 0
    assert side("tether_side.py", "concurrency", agents=20, steps=5)["wall_ms"] > 0
    assert side("tether_side.py", "construction", repeat=2)["ms"] > 0
    assert side("tether_side.py", "import")["ms"] > 0
    prompt = side("tether_side.py", "prompt")
    assert {"read_file", "write_file", "edit_file", "glob", "grep", "ls", "add"} <= set(
        prompt["tool_chars"]
    )
    assert prompt["system_chars"] == len(prompt["system_prompt"]) > 0
    expected = scenarios.build_tree(tmp_path, 300)
    for kind, pattern in (("glob", scenarios.GLOB_PATTERN), ("grep", scenarios.GREP_PATTERN)):
        found = side(
            "tether_side.py",
            "search",
            tree=tmp_path,
            expected=expected[kind],
            repeat=1,
            task=f"{kind} {pattern}",
        )
        assert found["ms"] > 0


def test_a_wrong_search_count_fails_the_scenario(tmp_path: Path) -> None:
    scenarios.build_tree(tmp_path, 100)
    command = [sys.executable, "tether_side.py", "search", f"tree={tmp_path}", "expected=7"]
    command += ["repeat=1", f"task=glob {scenarios.GLOB_PATTERN}"]
    done = subprocess.run(command, cwd=BENCH, capture_output=True, text=True, check=False)
    assert done.returncode != 0
    assert "expected 7" in done.stderr


def test_bare_floor_runs() -> None:
    assert side("scenarios.py", "steps", steps=10, repeat=1)["us_per_step"] > 0
    assert side("scenarios.py", "concurrency", agents=10, steps=5)["wall_ms"] > 0


def test_the_server_bench_runs_and_reads_every_event(tmp_path: Path) -> None:
    output = tmp_path / "serve.json"
    command = [sys.executable, "serve.py", "1", str(output)]
    done = subprocess.run(command, cwd=BENCH, capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr
    result = json.loads(output.read_text())
    assert result["events_a_run"]["sse"] >= result["events_a_run"]["stream"]
    assert result["ms_a_step"]["served"] > 0


def test_the_sandbox_bench_times_each_backend_against_the_unsafe_shell() -> None:
    import asyncio

    import sandboxes

    first, later = asyncio.run(sandboxes.round_trips("unsafe", 2))
    assert later > 0
    assert first > 0
    result = {
        "commands": 2,
        "ms": {"unsafe": {"first": 2.0, "later": 1.0}, "local": {"first": 20.0, "later": 9.0}},
        "missing": {"docker": "needs docker"},
    }
    rows = sandboxes.table(result)
    assert "| LocalSandbox (bubblewrap) | 20.0 ms | 10x | 9.0 ms | 9x |" in rows
    assert any("not measured: needs docker" in row for row in rows)
