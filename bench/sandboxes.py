"""Sandboxes: what one `execute` round trip (`true`) costs in each sandbox backend, the
first command of a sandbox and the later ones, against `UnsafeLocalShell` (no
isolation: a plain /bin/sh) measured in the same run, in turns.

The container engines need what scripts/containers-for-tests.sh prepares (a root file
system in TETHER_TEST_ROOTFS for podman, a daemon in DOCKER_HOST with the image
tether-sandbox-test); one missing is left out and said so.

Usage: python bench/sandboxes.py [COMMANDS]; writes bench/sandboxes.json.
"""

from __future__ import annotations

import asyncio
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

from tests.sandboxes import make, unavailable  # noqa: E402

from tether.backends.sandbox import SandboxBackend, UnsafeLocalShell  # noqa: E402

KINDS = ("unsafe", "local", "podman", "docker")


def sandbox(kind: str, workspace: Path) -> SandboxBackend:
    return UnsafeLocalShell(workspace) if kind == "unsafe" else make(kind, workspace)


async def round_trips(kind: str, commands: int) -> tuple[float, float]:
    """Seconds of the first command of a new sandbox, and the median of the next ones."""
    with tempfile.TemporaryDirectory() as scratch:
        subject = sandbox(kind, Path(scratch) / "ws")
        try:
            start = time.perf_counter()
            assert (await subject.execute("true")).exit_code == 0
            first = time.perf_counter() - start
            later = []
            for _ in range(commands):
                start = time.perf_counter()
                assert (await subject.execute("true")).exit_code == 0
                later.append(time.perf_counter() - start)
        finally:
            close = getattr(subject, "close", None)
            if close is not None:
                await asyncio.to_thread(close)
    return first, statistics.median(later)


def main() -> None:
    commands = int(sys.argv[1]) if len(sys.argv) > 1 else 20
    missing = {kind: why for kind in KINDS[1:] if (why := unavailable(kind)) is not None}
    kinds = [kind for kind in KINDS if kind not in missing]
    first: dict[str, list[float]] = {k: [] for k in kinds}
    later: dict[str, list[float]] = {k: [] for k in kinds}
    for _ in range(5):  # in turns, so a noisy moment hits all
        for kind in kinds:
            one, rest = asyncio.run(round_trips(kind, commands))
            first[kind].append(one)
            later[kind].append(rest)
    ms: dict[str, dict[str, float]] = {
        kind: {
            "first": statistics.median(first[kind]) * 1000,
            "later": statistics.median(later[kind]) * 1000,
        }
        for kind in kinds
    }
    result: dict[str, Any] = {"commands": commands, "rounds": 5, "ms": ms, "missing": missing}
    (HERE / "sandboxes.json").write_text(json.dumps(result, indent=2) + "\n")
    print("\n".join(table(result)))


def table(result: dict[str, Any]) -> list[str]:
    """The report's rows: each sandbox's round trips, and how many times the unsafe
    shell's they are."""
    ms = result["ms"]
    base = ms["unsafe"]
    lines = [
        "### What an `execute` round trip costs in each sandbox",
        "",
        f"`true`, median of 5 rounds (a new sandbox's first command, then the median of "
        f"{result['commands']} more); x: how many times `UnsafeLocalShell`'s (no isolation).",
        "",
        "| sandbox | first command | x | later commands | x |",
        "|---|--:|--:|--:|--:|",
    ]
    names = {
        "unsafe": "UnsafeLocalShell",
        "local": "LocalSandbox (bubblewrap)",
        "podman": "ContainerSandbox, podman",
        "docker": "ContainerSandbox, docker",
    }
    for kind, row in ms.items():
        lines.append(
            f"| {names[kind]} | {row['first']:.1f} ms | {row['first'] / base['first']:.0f}x "
            f"| {row['later']:.1f} ms | {row['later'] / base['later']:.0f}x |"
        )
    for kind, why in result.get("missing", {}).items():
        lines.append(f"| {names[kind]} | — | | — | not measured: {why} |")
    return lines


if __name__ == "__main__":
    main()
