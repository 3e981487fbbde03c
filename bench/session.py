"""What a whole session costs: the same scripted 200-step coding session through tether's
and deepagents' default agents, every request each sends to its model recorded and priced.

    .venv/bin/python bench/session.py [OUTPUT]     # writes bench/session.json by default

The session (bench/session_script.py) works on a toy repository of 41 files, one of them
3,000 lines, through each harness's own file tools over a directory: reads (some again
after an edit), edits, greps in content and files mode, globs, ls, todo updates, the
3,000-line read, three `task` subagents of five steps each, and steps with parallel
calls. The scripted model picks each step by its number alone, so both harnesses walk the
same trajectory; each side checks that every edit landed and every read showed its text.

Each side sends its requests through its own Anthropic conversion with a 200k window:
tether's `AnthropicModel.params`, deepagents' `ChatAnthropic._get_request_payload` after
its prompt-caching middleware. Tokens are estimated as characters ÷ 4 over the text of
every tool definition, system block and message block of that body (keys and strings,
no JSON punctuation); cached cost applies Anthropic's prompt caching at the breakpoints
each body carries (`session_script.Ledger`), in units of one uncached input token.
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
SIDES = {
    "tether": (sys.executable, HERE / "session_tether.py"),
    "deepagents": (
        str(HERE / ".venv-deepagents" / "bin" / "python"),
        HERE / "session_deepagents.py",
    ),
}


def run_side(side: str) -> dict[str, Any]:
    python, script = SIDES[side]
    with tempfile.TemporaryDirectory() as tmp:
        output = Path(tmp) / "side.json"
        done = subprocess.run(
            [python, str(script), str(output)],
            capture_output=True,
            text=True,
            cwd=HERE,
            check=False,
        )
        if done.returncode != 0:
            raise SystemExit(f"the {side} session failed:\n{done.stderr[-3000:]}")
        found: dict[str, Any] = json.loads(output.read_text())
    if found["problems"]:
        shown = "\n".join(found["problems"][:20])
        raise SystemExit(f"the {side} session went wrong ({len(found['problems'])}):\n{shown}")
    return found


def totals(rows: list[dict[str, Any]]) -> dict[str, Any]:
    parts: dict[str, int] = {}
    for row in rows:
        for part, tokens in row["parts"].items():
            parts[part] = parts.get(part, 0) + tokens
    tokens = sum(row["tokens"] for row in rows)
    results = sum(v for k, v in parts.items() if k.startswith("tool results"))
    return {
        "requests": len(rows),
        "input_tokens": tokens,
        "cached_cost": round(sum(row["cost"] for row in rows)),
        "cache_read_tokens": sum(row["cache_read"] for row in rows),
        "cache_write_tokens": sum(row["cache_write"] for row in rows),
        "tool_results_share": round(results / tokens, 3) if tokens else None,
        "parts": dict(sorted(parts.items(), key=lambda item: -item[1])),
    }


def summarize(side: dict[str, Any], cutoff: int | None) -> dict[str, Any]:
    """One side's totals: the whole session, and its requests up to main step `cutoff`
    (the last step before either harness first compacted)."""
    rows = side["requests"]
    steps = [r for r in rows if r["kind"] == "step"]
    early = [r for r in steps if cutoff is None or r["main_step"] <= cutoff]
    first = next(r for r in rows if r["agent"] == "main")
    return {
        "whole": totals(rows),
        "before_compaction": totals(early),
        "first_request_tokens": first["tokens"],
        "largest_request_tokens": max(r["tokens"] for r in rows),
        "main_requests": sum(1 for r in steps if r["agent"] == "main"),
        "subagent_requests": sum(1 for r in steps if r["agent"] != "main"),
        "summary_requests": sum(1 for r in rows if r["kind"] == "summary"),
        "compacted_after_steps": side["compactions"],
        "stop_reason": side["stop_reason"],
    }


def measure() -> dict[str, Any]:
    sides = {}
    for side in SIDES:
        print(f"  session on {side}", file=sys.stderr, flush=True)
        sides[side] = run_side(side)
    first = [s["compactions"][0] for s in sides.values() if s["compactions"]]
    cutoff = min(first) if first else None
    out: dict[str, Any] = {"window": 200_000, "main_steps": 200, "before_compaction_steps": cutoff}
    for name, side in sides.items():
        out[name] = summarize(side, cutoff)
        out[name]["per_request"] = [
            {k: r[k] for k in ("agent", "kind", "step", "tokens", "cost")} for r in side["requests"]
        ]
    ours, theirs = out["tether"], out["deepagents"]
    out["ratios"] = {
        "input_tokens": ratio(ours["whole"]["input_tokens"], theirs["whole"]["input_tokens"]),
        "cached_cost": ratio(ours["whole"]["cached_cost"], theirs["whole"]["cached_cost"]),
        "first_request": ratio(ours["first_request_tokens"], theirs["first_request_tokens"]),
        "input_tokens_before_compaction": ratio(
            ours["before_compaction"]["input_tokens"], theirs["before_compaction"]["input_tokens"]
        ),
        "cached_cost_before_compaction": ratio(
            ours["before_compaction"]["cached_cost"], theirs["before_compaction"]["cached_cost"]
        ),
    }
    return out


def ratio(a: float, b: float) -> float | None:
    return round(a / b, 3) if b else None


def table(result: dict[str, Any]) -> list[str]:
    """The Markdown report of a session.json."""
    ours, theirs, ratios = result["tether"], result["deepagents"], result["ratios"]
    cutoff = result.get("before_compaction_steps")

    def row(label: str, a: float | None, b: float | None, r: float | None = None) -> str:
        r = r if r is not None else (ratio(a, b) if a is not None and b else None)
        return f"| {label} | {_n(a)} | {_n(b)} | {'' if r is None else f'{r:.2f}x'} |"

    lines = [
        f"A whole session: the same scripted {result['main_steps']}-step coding session "
        "(bench/session_script.py: reads, re-reads after edits, edits, greps, globs, todos, "
        "a 3,000-line read, three subagents, parallel calls) through both harnesses' default "
        f"agents on Claude's Anthropic API with a {result['window']:,}-token window, every "
        "request body each would send recorded. Tokens are characters ÷ 4; the cached cost "
        "applies Anthropic prompt caching (a prefix written costs 1.25x, read 0.1x) at the "
        "breakpoints each harness sets, in uncached input tokens. Lower is better; the "
        "ratio is tether ÷ deepagents.",
        "",
        "| measure | tether | deepagents | tether ÷ deepagents |",
        "|---|--:|--:|--:|",
        row(
            "input tokens sent, whole session",
            ours["whole"]["input_tokens"],
            theirs["whole"]["input_tokens"],
            ratios["input_tokens"],
        ),
        row(
            "cost with prompt caching, whole session",
            ours["whole"]["cached_cost"],
            theirs["whole"]["cached_cost"],
            ratios["cached_cost"],
        ),
        row(
            f"input tokens, first {cutoff} steps (before either compacts)",
            ours["before_compaction"]["input_tokens"],
            theirs["before_compaction"]["input_tokens"],
            ratios["input_tokens_before_compaction"],
        ),
        row(
            f"cost with caching, first {cutoff} steps",
            ours["before_compaction"]["cached_cost"],
            theirs["before_compaction"]["cached_cost"],
            ratios["cached_cost_before_compaction"],
        ),
        row(
            "first request (tokens)",
            ours["first_request_tokens"],
            theirs["first_request_tokens"],
            ratios["first_request"],
        ),
        row(
            "largest request (tokens)",
            ours["largest_request_tokens"],
            theirs["largest_request_tokens"],
        ),
        "| requests: main / subagents / summaries | "
        + " | ".join(
            f"{s['main_requests']} / {s['subagent_requests']} / {s['summary_requests']}"
            for s in (ours, theirs)
        )
        + " | |",
        "| tool results' share of all input | "
        + " | ".join(f"{s['whole']['tool_results_share']:.0%}" for s in (ours, theirs))
        + " | |",
        "",
        f"Where the input tokens go, in the whole session and in its first {cutoff} steps:",
        "",
        "| part | tether | deepagents | tether ÷ deepagents "
        f"| tether, {cutoff} steps | deepagents, {cutoff} steps | tether ÷ deepagents |",
        "|---|--:|--:|--:|--:|--:|--:|",
    ]
    a, b = ours["whole"]["parts"], theirs["whole"]["parts"]
    early_a = ours["before_compaction"]["parts"]
    early_b = theirs["before_compaction"]["parts"]
    for part in sorted(set(a) | set(b), key=lambda p: -(a.get(p, 0) + b.get(p, 0))):
        early = row("", early_a.get(part), early_b.get(part)).removeprefix("|  |")
        lines.append(row(part, a.get(part), b.get(part)) + early)
    lines += [
        "",
        f"Compaction came after main step {_steps(ours)} on tether and "
        f"{_steps(theirs)} on deepagents.",
    ]
    return lines


def _steps(side: dict[str, Any]) -> str:
    return ", ".join(str(s) for s in side["compacted_after_steps"]) or "none"


def _n(value: float | None) -> str:
    return "—" if value is None else f"{value:,.0f}"


def main() -> None:
    output = Path(sys.argv[1]) if len(sys.argv) > 1 else HERE / "session.json"
    if not Path(SIDES["deepagents"][0]).exists():
        raise SystemExit("bench/.venv-deepagents is missing: run `make bench`")
    result = measure()
    output.write_text(json.dumps(result, indent=2) + "\n")
    print("\n".join(table(result)))


if __name__ == "__main__":
    main()
