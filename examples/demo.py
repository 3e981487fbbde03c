"""`make demo`: the `tether` command runs a real agent on a copy of this repository.

With ANTHROPIC_API_KEY or OPENAI_API_KEY set, Claude or GPT reads the repository and
writes NOTES.md summarizing its layout. With neither, the offline model (SmolLM2-135M on
the CPU, from the `local` extra) does the kind of request it can: writing a given line
to NOTES.md, asked in plain words. Writes to /NOTES.md need no approval (`--safe`);
anything else would ask.

    python examples/demo.py [folder]
"""

from __future__ import annotations

import shutil
import sys
import tempfile
from pathlib import Path

from tether.cli import main as tether
from tether.models import default_model

REPOSITORY = Path(__file__).resolve().parent.parent
CAPABLE_TASK = "Read this repository and write NOTES.md summarizing its layout."
OFFLINE_TASK = 'Write "Hello from tether" to NOTES.md'  # a plain request: it can do this
_SKIPPED = shutil.ignore_patterns(".*", "__pycache__", "*.whl", "*.db", "bench")


def demo(folder: Path) -> int:
    """Copy the repository into `folder`, run the task there; the command's exit code."""
    shutil.copytree(REPOSITORY, folder, ignore=_SKIPPED, dirs_exist_ok=True)
    offline = default_model().startswith("local:")
    task = OFFLINE_TASK if offline else CAPABLE_TASK
    print(f"$ tether run --safe /NOTES.md --max-steps 40 --max-cost 0.50 {task!r}", flush=True)
    code = tether(
        ["-C", str(folder), "run", "--safe", "/NOTES.md", "--max-steps", "40",
         "--max-cost", "0.50", task]
    )  # fmt: skip
    notes = folder / "NOTES.md"
    print(
        f"\n--- {notes}:\n{notes.read_text()}" if notes.exists() else f"\n{notes} was not written"
    )
    return code


def main() -> int:
    if len(sys.argv) > 1:
        folder = Path(sys.argv[1])
        folder.mkdir(parents=True, exist_ok=True)
        return demo(folder)
    with tempfile.TemporaryDirectory() as tmp:
        return demo(Path(tmp))


if __name__ == "__main__":
    sys.exit(main())
