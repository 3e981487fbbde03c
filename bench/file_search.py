"""glob and grep over 20,000 files: tether's file tools against running `rg` directly.

Builds a tree of 20,000 small text files (200 directories of 100 files) in a temporary
directory, then times, in the same run:

- `rg --files` / `rg -l PATTERN` run directly (the floor: a process spawn and a walk);
- tether's `glob` and `grep` tools on a FilesystemBackend using ripgrep;
- the same tools on the pure-Python fallback (no ripgrep).

Each figure is the median of --repeat runs; ratios are against direct rg.

    .venv/bin/python bench/file_search.py [--repeat 5] [--files 20000]
"""

from __future__ import annotations

import argparse
import asyncio
import shutil
import statistics
import subprocess
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from tether.backends import FilesystemBackend
from tether.messages import ToolCall
from tether.state import RunState, ToolContext
from tether.tools.files import file_tools

PATTERN = "needle_[0-9]+"


def build_tree(root: Path, count: int) -> None:
    per_dir = 100
    for n in range(count):
        directory = root / f"pkg{n // per_dir:03d}"
        directory.mkdir(exist_ok=True)
        body = "".join(f"line {i} of file {n}: some ordinary text here\n" for i in range(20))
        if n % 50 == 0:
            body += f"needle_{n} = True\n"
        suffix = ".py" if n % 2 else ".txt"
        (directory / f"module{n}{suffix}").write_text(body)


def median_seconds(run: Callable[[], object], repeat: int) -> float:
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        run()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def tool_runner(backend: FilesystemBackend, name: str, **args: object) -> Callable[[], str]:
    tool = {t.name: t for t in file_tools()}[name]

    def run() -> str:
        call = ToolCall(name, dict(args))
        state = RunState(run_id="bench", path=("main",), messages=[], backend=backend)
        result = asyncio.run(tool.run(call, ToolContext(state, call)))
        assert not result.is_error, result.text
        return result.text

    return run


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--files", type=int, default=20_000)
    options = parser.parse_args()
    rg = shutil.which("rg")
    if rg is None:
        raise SystemExit("ripgrep is needed for this benchmark (apt-get install ripgrep)")
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        build_tree(root, options.files)
        fast, slow = (
            FilesystemBackend(root, use_ripgrep=True),
            FilesystemBackend(root, use_ripgrep=False),
        )

        def direct(*args: str) -> Callable[[], object]:
            return lambda: subprocess.run([rg, *args], cwd=root, capture_output=True, check=False)

        # Warm the page cache so every contender reads from memory.
        direct("--files")()
        rows = [
            (
                "glob **/*.py",
                direct("--files", "--glob", "*.py"),
                tool_runner(fast, "glob", pattern="**/*.py"),
                tool_runner(slow, "glob", pattern="**/*.py"),
            ),
            (
                "grep files_with_matches",
                direct("-l", PATTERN),
                tool_runner(fast, "grep", pattern=PATTERN),
                tool_runner(slow, "grep", pattern=PATTERN),
            ),
            (
                "grep content",
                direct("-n", PATTERN),
                tool_runner(fast, "grep", pattern=PATTERN, output_mode="content"),
                tool_runner(slow, "grep", pattern=PATTERN, output_mode="content"),
            ),
        ]
        assert (
            tool_runner(fast, "grep", pattern=PATTERN)()
            == tool_runner(slow, "grep", pattern=PATTERN)()
        )
        print(f"{options.files} files, median of {options.repeat} runs")
        head = ("rg direct", "tether+rg", "ratio", "tether py", "ratio")
        print(f"{'operation':<26}" + "".join(f"{h:>11}" for h in head))
        for label, base, with_rg, pure in rows:
            b = median_seconds(base, options.repeat)
            f = median_seconds(with_rg, options.repeat)
            p = median_seconds(pure, options.repeat)
            cells = (f"{b * 1000:.0f} ms", f"{f * 1000:.0f} ms", f"{f / b:.1f}x")
            cells += (f"{p * 1000:.0f} ms", f"{p / b:.1f}x")
            print(f"{label:<26}" + "".join(f"{c:>11}" for c in cells))


if __name__ == "__main__":
    main()
