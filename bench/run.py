"""`make bench`: tether, deepagents and a bare loop, side by side, in one run.

Every scenario runs in fresh processes: tether's side in the project's .venv,
deepagents' side in bench/.venv-deepagents (which `make bench` installs from
bench/requirements-deepagents.txt), the bare loop next to tether. Writes
bench/results.json and bench/RESULTS.md.

    .venv/bin/python bench/run.py [--quick] [--only search|prompt|checkpoint] ...

`--only PART` measures that part again and keeps the rest of results.json; the report
says when each part was measured.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import scenarios
import session

import sandboxes

HERE = Path(__file__).resolve().parent
SIDES = {
    "tether": (sys.executable, HERE / "tether_side.py"),
    "deepagents": (str(HERE / ".venv-deepagents" / "bin" / "python"), HERE / "deepagents_side.py"),
    "bare": (sys.executable, HERE / "scenarios.py"),
}


def scenario(side: str, name: str, **args: object) -> dict[str, Any]:
    python, script = SIDES[side]
    command = [python, str(script), name, *(f"{k}={v}" for k, v in args.items())]
    done = subprocess.run(command, capture_output=True, text=True, cwd=HERE, check=False)
    if done.returncode != 0:
        raise SystemExit(f"{side} {name} failed:\n{done.stderr}")
    result: dict[str, Any] = json.loads(done.stdout.splitlines()[-1])
    return result


def both(name: str, floor: bool = False, **args: object) -> dict[str, Any]:
    sides = ("tether", "deepagents", "bare") if floor else ("tether", "deepagents")
    results = {}
    for side in sides:
        print(f"  {name} {args or ''} on {side}", file=sys.stderr, flush=True)
        results[side] = scenario(side, name, **args)
    return results


def cold_import(runs: int) -> dict[str, Any]:
    out = {}
    for side in ("tether", "deepagents"):
        samples = [scenario(side, "import")["ms"] for _ in range(runs)]
        out[side] = {"ms": statistics.median(samples), "samples": samples}
    return out


def command_start(runs: int) -> dict[str, Any]:
    """Wall time of `tether --help` in a fresh process, against a fresh process that
    only imports deepagents (what any deepagents program pays before its first line)."""
    commands = {
        "tether": [str(Path(sys.executable).parent / "tether"), "--help"],
        "deepagents": [SIDES["deepagents"][0], "-c", "import deepagents"],
    }
    out = {}
    for side, command in commands.items():
        samples = []
        for _ in range(runs + 1):
            started = time.perf_counter()
            subprocess.run(command, capture_output=True, check=True)
            samples.append(time.perf_counter() - started)
        out[side] = {"ms": scenarios.median_ms(samples[1:])}
    return out


def direct_rg(tree: Path, args: list[str], repeat: int) -> float:
    rg = shutil.which("rg")
    if rg is None:
        raise SystemExit("ripgrep is needed for the search scenario (make system-deps)")
    times = []
    for _ in range(repeat + 1):
        started = time.perf_counter()
        # stdin closed and the tree named: rg searches its stdin when that is a pipe
        subprocess.run(
            [rg, *args, "."], cwd=tree, stdin=subprocess.DEVNULL, capture_output=True, check=True
        )
        times.append(time.perf_counter() - started)
    return scenarios.median_ms(times[1:])


def search(files: int, repeat: int) -> dict[str, Any]:
    with tempfile.TemporaryDirectory() as tmp:
        tree = Path(tmp)
        expected = scenarios.build_tree(tree, files)
        out: dict[str, Any] = {}
        for kind, pattern, rg_args in (
            ("glob", scenarios.GLOB_PATTERN, ["--files", "--glob", scenarios.GLOB_PATTERN]),
            ("grep", scenarios.GREP_PATTERN, ["-l", "-F", scenarios.GREP_PATTERN]),
        ):
            row = both(
                "search",
                tree=tree,
                expected=expected[kind],
                repeat=repeat,
                task=f"{kind} {pattern}",
            )
            row["rg"] = {"ms": direct_rg(tree, rg_args, repeat)}
            out[kind] = row
        return out


def checkpoints(steps: int, repeat: int) -> dict[str, Any]:
    """tether's own cost of recording every step, in SQLite and (when a server is set up
    by scripts/postgres-for-tests.sh) in Postgres."""
    out = {"sqlite": scenario("tether", "checkpoint", steps=steps, repeat=repeat, url="sqlite")}
    found = subprocess.run(
        [str(HERE.parent / "scripts" / "postgres-for-tests.sh")],
        capture_output=True,
        text=True,
        check=False,
    )
    if found.returncode == 0:
        url = found.stdout.strip().splitlines()[-1]
        out["postgres"] = scenario("tether", "checkpoint", steps=steps, repeat=repeat, url=url)
    else:
        out["postgres"] = {"unavailable": f"no Postgres server: {found.stderr.strip()[-200:]}"}
    return out


def versions() -> dict[str, str]:
    probe = (
        "import importlib.metadata as m, json, sys; "
        "print(json.dumps({n: m.version(n) for n in sys.argv[1:]}))"
    )
    found: dict[str, str] = {}
    for python, names in (
        (sys.executable, ["tether", "pydantic"]),
        (SIDES["deepagents"][0], ["deepagents", "langchain", "langgraph"]),
    ):
        done = subprocess.run(
            [python, "-c", probe, *names], capture_output=True, text=True, check=True
        )
        found.update(json.loads(done.stdout))
    return found


def machine() -> dict[str, Any]:
    cpu = platform.processor() or platform.machine()
    cpuinfo = Path("/proc/cpuinfo")
    if cpuinfo.exists():
        for line in cpuinfo.read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    return {
        "cpu": cpu,
        "cores": os.cpu_count(),
        "system": f"{platform.system()} {platform.release()} {platform.machine()}",
        "python": platform.python_version(),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--quick", action="store_true", help="fewer repeats, smaller sizes")
    parser.add_argument(
        "--only",
        choices=["search", "prompt", "checkpoint"],
        action="append",
        help="measure this part again, keep the rest of the results (repeatable)",
    )
    parser.add_argument(
        "--report",
        action="store_true",
        help="measure nothing: write RESULTS.md again from the JSON files in bench/",
    )
    options = parser.parse_args()
    if options.report:
        rewrite()
        return
    if not Path(SIDES["deepagents"][0]).exists():
        raise SystemExit("bench/.venv-deepagents is missing: run `make bench`")
    if options.only:
        again(options.only)
        return
    quick = options.quick
    step_sizes = {10: 5, 100: 5, 1000: 3} if not quick else {10: 2, 100: 1, 200: 1}
    started = time.perf_counter()
    results: dict[str, Any] = {
        "when": datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "machine": machine(),
        "versions": versions(),
        "quick": quick,
    }
    runs: dict[str, Any] = {}
    print("cold import", file=sys.stderr, flush=True)
    runs["import"] = cold_import(3 if quick else 9)
    runs["command"] = command_start(3 if quick else 9)
    runs["construction"] = both("construction", repeat=20)
    runs["prompt"] = both("prompt")
    runs["steps"] = {
        str(size): both("steps", floor=True, steps=size, repeat=repeat)
        for size, repeat in step_sizes.items()
    }
    big = max(step_sizes)
    runs["memory"] = both("memory", floor=True, steps=big)
    agents = 100 if quick else 1000
    runs["concurrency"] = both("concurrency", floor=True, agents=agents, steps=5)
    runs["task"] = both("task", repeat=5)
    runs["search"] = search(2_000 if quick else 20_000, 3)
    runs["checkpoint"] = checkpoints(100 if quick else 500, 2 if quick else 5)
    results["runs"] = runs
    results["seconds"] = round(time.perf_counter() - started, 1)
    (HERE / "results.json").write_text(json.dumps(results, indent=2) + "\n")
    (HERE / "RESULTS.md").write_text(report(results, big, agents))
    print((HERE / "RESULTS.md").read_text())


def again(parts: list[str]) -> None:
    """Measure some parts again (at full size) and rewrite the report."""
    results = json.loads((HERE / "results.json").read_text())
    if results.get("quick"):
        raise SystemExit("results.json is a quick run: run the whole bench first")
    when = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M UTC")
    for part in parts:
        print(part, file=sys.stderr, flush=True)
        if part == "search":
            results["runs"][part] = search(20_000, 3)
        elif part == "checkpoint":
            results["runs"][part] = checkpoints(500, 5)
        else:
            results["runs"][part] = both("prompt")
        results.setdefault("again", {})[part] = when
    (HERE / "results.json").write_text(json.dumps(results, indent=2) + "\n")
    big = max(int(size) for size in results["runs"]["steps"])
    (HERE / "RESULTS.md").write_text(report(results, big, agents=1000))
    print((HERE / "RESULTS.md").read_text())


def report(results: dict[str, Any], big: int, agents: int) -> str:
    """The Markdown table: one row per measure, ratios against tether and the floor."""
    runs = results["runs"]
    rows: list[tuple[str, dict[str, Any], str, str]] = [
        ("cold `import` (ms, median of fresh processes)", runs["import"], "ms", ""),
        (
            "`tether --help` vs `python -c 'import deepagents'`, wall (ms)",
            runs["command"],
            "ms",
            "",
        ),
        ("first agent construction in a process (ms)", runs["construction"], "first_ms", ""),
        ("agent construction, warm (ms)", runs["construction"], "ms", ""),
    ]
    for size, row in runs["steps"].items():
        rows.append((f"harness time per step, {size}-step run (µs)", row, "us_per_step", ""))
    rows.append(
        (
            f"last 100 / first 100 steps of a {big}-step run",
            runs["steps"][str(big)],
            "last_100_over_first_100",
            "x",
        )
    )
    rows += [
        (f"peak RSS of a {big}-step run (MB)", runs["memory"], "peak_rss_mb", ""),
        (
            f"Python heap allocated by a {big}-step run, peak (MB)",
            runs["memory"],
            "peak_heap_mb",
            "",
        ),
        (f"{agents} concurrent runs of 5 steps, wall (ms)", runs["concurrency"], "wall_ms", ""),
        (f"{agents} concurrent runs, peak RSS (MB)", runs["concurrency"], "peak_rss_mb", ""),
        ("`task` subagent round trip, harness time (ms)", runs["task"], "ms", ""),
        ("glob `**/*25.py` over 20,000 files (ms)", runs["search"]["glob"], "ms", ""),
        ("grep `needle_` over 20,000 files (ms)", runs["search"]["grep"], "ms", ""),
    ]
    machine = results["machine"]
    versions = ", ".join(f"{k} {v}" for k, v in results["versions"].items())
    lines = [
        "# tether against deepagents",
        "",
        f"Measured {results['when']} by `make bench` ({results['seconds']:.0f} s) on "
        f"{machine['cpu']}, {machine['cores']} cores, {machine['system']}, "
        f"Python {machine['python']}. Versions: {versions}."
        + (" **Quick run: smaller sizes, fewer repeats.**" if results["quick"] else "")
        + "".join(
            f" The {part} rows were measured again on {when} (`bench/run.py --only {part}`)."
            for part, when in results.get("again", {}).items()
        ),
        "",
        "Both harnesses run the same scripted model (no network, no real model), so only "
        "harness cost counts. Model time is subtracted from every per-step time. "
        "Each harness runs its own default agent plus one async `add` tool: tether's has "
        "`write_todos`, the file tools and `task`; deepagents' has the file tools, `delete` "
        "and `task`. Lower is better; "
        "the ratio is deepagents ÷ tether. The floor is a bare loop over plain dicts "
        "(model call, tool call, append), the least any harness can cost.",
        "",
        "| measure | tether | deepagents | ratio | floor | tether ÷ floor |",
        "|---|--:|--:|--:|--:|--:|",
    ]
    missing = []
    for label, row, key, unit in rows:
        ours, theirs, floor = (
            row.get(side, {}).get(key) for side in ("tether", "deepagents", "bare")
        )
        for side in ("tether", "deepagents"):
            if "unavailable" in row.get(side, {}):
                missing.append(f"{label}, {side}: {row[side]['unavailable']}.")
        if "rg" in row:
            floor = row["rg"]["ms"]
        ratios = unit != "x"  # a growth ratio is itself the result; no ratio of ratios
        ratio = f"{theirs / ours:.1f}x" if ratios and ours and theirs else ""
        over = f"{ours / floor:.1f}x" if ratios and ours and floor else ""
        lines.append(
            f"| {label} | {fmt(ours, unit)} | {fmt(theirs, unit)} | {ratio} "
            f"| {fmt(floor, unit)} | {over} |"
        )
    if missing:
        lines += ["", "Not measured (—): " + " ".join(missing)]
    lines += ["", *checkpoint_table(runs.get("checkpoint", {}))]
    lines += ["", *goals_table(results)]
    if (HERE / "session.json").exists():
        lines += ["", *session.table(json.loads((HERE / "session.json").read_text()))]
    if (HERE / "sandboxes.json").exists():
        lines += ["", *sandboxes.table(json.loads((HERE / "sandboxes.json").read_text()))]
    prompt = runs["prompt"]
    lines += ["", *prompt_table(prompt), ""]
    lines += [
        "The floor of the two search rows is `rg` run directly on the same tree. "
        "Regenerate this file with `make bench`; the raw numbers are in bench/results.json.",
        "",
    ]
    return "\n".join(lines)


def rewrite() -> None:
    """RESULTS.md from results.json and the other parts' JSON files, measuring nothing."""
    results = json.loads((HERE / "results.json").read_text())
    big = max(int(size) for size in results["runs"]["steps"])
    agents = 100 if results.get("quick") else 1000
    (HERE / "RESULTS.md").write_text(report(results, big, agents))
    print((HERE / "RESULTS.md").read_text())


def _part(name: str) -> dict[str, Any]:
    path = HERE / name
    return json.loads(path.read_text()) if path.exists() else {}


def _dig(data: Any, *keys: str) -> Any:
    for key in keys:
        if not isinstance(data, dict) or key not in data:
            return None
        data = data[key]
    return data


def goals_table(results: dict[str, Any]) -> list[str]:
    """Issue 41's rows, each with its goal and what was measured (results.json,
    serve.json, local_model.json, session.json)."""
    runs = results["runs"]
    serve, local, spent = _part("serve.json"), _part("local_model.json"), _part("session.json")

    def recording(name: str) -> str | None:
        row = _dig(runs, "checkpoint", name)
        if not row or "us_per_step" not in row:
            return None
        return f"{row['us_per_step'] - row['plain_us_per_step']:,.0f} µs"

    grep = _dig(runs, "search", "grep") or {}
    ours, theirs, rg = (_dig(grep, side, "ms") for side in ("tether", "deepagents", "rg"))
    imports = [_dig(runs, "import", side, "ms") for side in ("tether", "deepagents")]
    rate, added = _dig(serve, "served_over_in_process_rate"), _dig(serve, "ms_added_a_step")
    first = _dig(local, "first_request_seconds")
    cached = _dig(spent, "ratios", "cached_cost")
    rows = [
        ("recording cost per step, SQLite thread", recording("sqlite"), "≤ 100 µs"),
        ("recording cost per step, Postgres thread", recording("postgres"), "≤ 500 µs"),
        (
            "grep `needle_` over 20,000 files vs deepagents",
            f"{theirs / ours:.2f}x as fast as deepagents, {ours / rg:.1f}x the `rg` floor"
            if ours and theirs and rg
            else None,
            "≥ 2x faster than deepagents, ≤ 1.3x `rg`",
        ),
        (
            "cold `from tether import create_agent` vs deepagents' factory",
            f"{imports[0] / imports[1]:.2f}x" if all(imports) else None,
            "≤ 0.1x",
        ),
        (
            "served events a second vs in process",
            f"{rate:.2f}x, +{added:.2f} ms a step" if rate and added is not None else None,
            "≥ 0.5x, ≤ +0.2 ms",
        ),
        (
            "offline model, first request in a process",
            f"{first:.1f} s" if first is not None else None,
            "≤ 5 s on an idle machine",
        ),
        (
            "a 200-step session's input cost with prompt caching, vs deepagents",
            f"{cached:.2f}x ({_dig(spent, 'ratios', 'input_tokens'):.2f}x uncached; "
            f"{_dig(spent, 'ratios', 'cached_cost_before_compaction'):.2f}x before either "
            "compacts)"
            if cached
            else None,
            "≤ 0.5x (stretch 0.4x)",
        ),
    ]
    lines = ["The goals of issue 41 and where they stand:", "", "| measure | now | goal |"]
    lines.append("|---|--:|--:|")
    lines += [f"| {label} | {now or 'not measured'} | {goal} |" for label, now, goal in rows]
    return lines


def prompt_table(prompt: dict[str, Any]) -> list[str]:
    """First-call prompt size by part, in characters of JSON as a provider would see it."""
    ours, theirs = prompt["tether"], prompt["deepagents"]
    names = sorted((set(ours["tool_chars"]) | set(theirs["tool_chars"])) - {"add"})
    lines = [
        "First-call prompt, characters (system prompt plus each tool's name, description "
        "and JSON schema), with todos, files and subagents on: deepagents 0.7 has no "
        "`write_todos` by default, so for this table it gets langchain's "
        "`TodoListMiddleware`, the middleware its own harness profiles add for that tool:",
        "",
        "| part | tether | deepagents |",
        "|---|--:|--:|",
        f"| system prompt | {ours['system_chars']:,} | {theirs['system_chars']:,} |",
    ]
    for name in names:
        a, b = ours["tool_chars"].get(name), theirs["tool_chars"].get(name)
        lines.append(f"| `{name}` | {fmt(a, '')} | {fmt(b, '')} |")
    shared = [n for n in names if n in ours["tool_chars"] and n in theirs["tool_chars"]]
    total_ours = ours["system_chars"] + sum(ours["tool_chars"][n] for n in shared)
    total_theirs = theirs["system_chars"] + sum(theirs["tool_chars"][n] for n in shared)
    lines.append(
        f"| **system prompt + tools both have** | **{total_ours:,}** | **{total_theirs:,}** |"
    )
    lines.append(
        f"| estimated tokens (characters ÷ 4) | {total_ours / 4:,.0f} | {total_theirs / 4:,.0f} |"
    )
    lines.append(f"| deepagents ÷ tether | | {total_theirs / total_ours:.1f}x |")
    return lines


def checkpoint_table(rows: dict[str, Any]) -> list[str]:
    """What recording every step in a thread costs tether, per step and as a share, and
    what the thread's lease adds to it (one writer per thread)."""
    lines = [
        "tether's crash-safe threads: harness time per step of a run recorded in a thread "
        "(with its lease: one writer per thread), the same run recorded without the lease, "
        "and unrecorded, measured in the same process, the recorded runs in turns:",
        "",
        "| checkpointer | recorded (µs/step) | without the lease | unrecorded "
        "| recording cost per step | lease's share of it |",
        "|---|--:|--:|--:|--:|--:|",
    ]
    for name, row in rows.items():
        if "unavailable" in row:
            lines.append(f"| {name} | — | — | — | — | {row['unavailable']} |")
            continue
        ours, plain = row["us_per_step"], row["plain_us_per_step"]
        unleased = row.get("unleased_us_per_step")
        share = "—" if unleased is None else f"{(ours - unleased) / (ours - plain):+.0%}"
        lines.append(
            f"| {name} | {fmt(ours, '')} | {fmt(unleased, '')} | {fmt(plain, '')} "
            f"| {fmt(ours - plain, '')} µs | {share} |"
        )
    return lines


def fmt(value: float | None, unit: str) -> str:
    if value is None:
        return "—"
    if unit == "x":
        return f"{value:.2f}"
    return f"{value:,.0f}" if value >= 100 else f"{value:.1f}"


if __name__ == "__main__":
    main()
