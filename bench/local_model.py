"""The offline model on plain requests: how often it does what a new user asked.

Each request of `offline_requests` runs on a fresh agent on `local:smollm2` (SmolLM2-135M
on the CPU), in a fresh folder holding `offline_requests.FILES`. It succeeds when:
- write: the run completed, the named file holds the given text, nothing else changed,
  and the answer names the file;
- read: the run completed, the answer holds the file's first line, nothing changed;
- list: the run completed, the answer names everything in the top folder, nothing
  changed;
- replace, append: the run completed, the named file holds exactly what the edit makes
  of it, nothing else changed, and the answer names the file without declining;
- decline: the answer says plainly that the offline model cannot do it, and nothing
  changed.
The rate that counts is on the held-out phrasings, with its 95 % Wilson interval.
Decoding is greedy, so a request always gives the same attempt. With `all`, it also
measures the first request of a fresh process (`local_first`, the median of three) and
writes bench/local_model.json.

    .venv/bin/python bench/local_model.py [tuning|held-out|all]
"""

from __future__ import annotations

import asyncio
import json
import math
import sys
import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path

from local_first import measure
from offline_requests import FILES, Request, requests

from tether import Limits, create_agent
from tether.backends import FilesystemBackend
from tether.models.local import CANNOT_DO

HERE = Path(__file__).resolve().parent
Files = dict[str, str]


@dataclass(frozen=True)
class Attempt:
    kind: str
    split: str
    request: str
    ok: bool
    why: str
    stop_reason: str
    steps: int
    seconds: float
    answer: str


def _files(root: Path) -> dict[str, str]:
    return {
        "/" + str(p.relative_to(root)): p.read_text(errors="replace")
        for p in sorted(root.rglob("*"))
        if p.is_file()
    }


def verdict(request: Request, stop: str, answer: str, before: Files, after: Files) -> str:
    """Why the attempt failed, or "" when it did what was asked."""
    changed = {p for p in after if before.get(p) != after[p]} | (before.keys() - after.keys())
    if request.kind == "decline":
        said = answer.startswith(CANNOT_DO)
        return "did not decline" if not said else "changed files" if changed else ""
    if stop != "completed":
        return f"stopped: {stop}"
    return _CHECKS[request.kind](request, answer, before, after, changed)


def _wrote(request: Request, answer: str, before: Files, after: Files, changed: set[str]) -> str:
    if after.get(request.path, "").strip() != request.content:
        return f"{request.path} holds {after.get(request.path)!r}"
    if changed != {request.path}:
        return f"changed {sorted(changed)}"
    return "" if request.path in answer else "the answer does not name the file"


def _read(request: Request, answer: str, before: Files, after: Files, changed: set[str]) -> str:
    if changed:
        return f"changed {sorted(changed)}"
    first = before[request.path].splitlines()[0]
    return "" if first in answer else "the answer lacks the file's first line"


def _listed(request: Request, answer: str, before: Files, after: Files, changed: set[str]) -> str:
    if changed:
        return f"changed {sorted(changed)}"
    entries = {p.split("/")[1] for p in before}  # what the top folder holds
    missing = sorted(e for e in entries if e not in answer)
    return f"the answer misses {missing}" if missing else ""


def _edited(request: Request, answer: str, before: Files, after: Files, changed: set[str]) -> str:
    if after.get(request.path) != request.content:
        return f"{request.path} holds {after.get(request.path)!r}"
    if changed != {request.path}:
        return f"changed {sorted(changed)}"
    if answer.startswith(CANNOT_DO):
        return "declined, yet changed the file"
    return "" if request.path in answer else "the answer does not name the file"


_CHECKS = {
    "write": _wrote,
    "read": _read,
    "list": _listed,
    "replace": _edited,
    "append": _edited,
}


async def attempt(request: Request) -> Attempt:
    """One request on a fresh agent and folder."""
    with tempfile.TemporaryDirectory() as scratch:
        root = Path(scratch)
        for name, text in FILES.items():
            (root / name).parent.mkdir(parents=True, exist_ok=True)
            (root / name).write_text(text)
        before = _files(root)
        agent = create_agent(
            "local:smollm2",
            backend=FilesystemBackend(root),
            limits=Limits(max_steps=4),
            checkpointer=None,
        )
        started = time.perf_counter()
        result = await agent.arun(request.text)
        seconds = time.perf_counter() - started
        answer = result.output if isinstance(result.output, str) else ""
        why = verdict(request, result.stop_reason, answer, before, _files(root))
    return Attempt(
        request.kind,
        request.split,
        request.text,
        not why,
        why,
        result.stop_reason,
        result.steps,
        round(seconds, 2),
        answer,
    )


def wilson(successes: int, total: int, z: float = 1.96) -> tuple[float, float]:
    """The 95 % Wilson score interval of a success rate."""
    if total == 0:
        return (0.0, 0.0)
    rate = successes / total
    centre = (rate + z * z / (2 * total)) / (1 + z * z / total)
    half = z * math.sqrt(rate * (1 - rate) / total + z * z / (4 * total * total))
    half /= 1 + z * z / total
    return (max(centre - half, 0.0), min(centre + half, 1.0))


def summary(done: list[Attempt], split: str) -> dict[str, object]:
    chosen = [a for a in done if a.split == split]
    ok = sum(a.ok for a in chosen)
    low, high = wilson(ok, len(chosen))
    kinds = {
        kind: f"{sum(a.ok for a in chosen if a.kind == kind)}/"
        f"{sum(1 for a in chosen if a.kind == kind)}"
        for kind in ("write", "read", "list", "replace", "append", "decline")
    }
    return {
        "requests": len(chosen),
        "succeeded": ok,
        "rate": round(ok / max(len(chosen), 1), 3),
        "interval_95": [round(low, 3), round(high, 3)],
        "by_kind": kinds,
    }


def main() -> None:
    which = sys.argv[1] if len(sys.argv) > 1 else "all"
    chosen = [r for r in requests() if which in ("all", r.split)]
    done: list[Attempt] = []
    for request in chosen:  # each printed as it ends: a whole run takes minutes
        done.append(a := asyncio.run(attempt(request)))
        mark = "ok  " if a.ok else "FAIL"
        print(
            f"{mark} {a.split:8} {a.kind:7} {a.request!r} {a.why} ({a.seconds} s)",
            file=sys.stderr,
            flush=True,
        )
    steps = sum(a.steps for a in done)
    result = {
        split: summary(done, split)
        for split in ("held-out", "tuning")
        if any(a.split == split for a in done)
    }
    result["seconds_per_step"] = round(sum(a.seconds for a in done) / max(steps, 1), 2)
    result["runs"] = [asdict(a) for a in done]  # type: ignore[assignment]
    if which == "all":  # the first request of a fresh process, as `tether` meets it
        first = measure(3)
        result["first_request_seconds"] = first["first_request_seconds"]
        result["first_request_runs"] = first["runs"]
        print(f"offline model, first request in a process: {first['first_request_seconds']} s")
        (HERE / "local_model.json").write_text(json.dumps(result, indent=2) + "\n")
    for split in ("held-out", "tuning"):
        if split in result:
            s = result[split]
            low, high = s["interval_95"]  # type: ignore[index]
            print(
                f"offline model (local:smollm2), {split} plain requests: {s['succeeded']}/"  # type: ignore[index]
                f"{s['requests']} ({s['rate']:.0%}; 95% interval {low:.0%}-{high:.0%}), "  # type: ignore[index]
                f"by kind {s['by_kind']}"  # type: ignore[index]
            )


if __name__ == "__main__":
    main()
