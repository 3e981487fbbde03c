"""Two processes appending to one SQLite file while both run background checkpoints:
no append fails with SQLITE_BUSY, and every record lands once, in order."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from tether.checkpoint.sqlite import SqliteCheckpointer

SCRIPT = """
import asyncio, sys
from tether.checkpoint.sqlite import SqliteCheckpointer
path, who = sys.argv[1:]
async def main():
    cp = SqliteCheckpointer(path)
    for n in range(1500):
        await cp.append("t-" + who, [{"t": "sync", "n": n, "pad": "x" * 2000}, {"t": "x"}])
    await cp.close()
asyncio.run(main())
"""


async def test_two_processes_with_background_checkpoints(tmp_path: Path) -> None:
    path = tmp_path / "runs.db"
    first = SqliteCheckpointer(path)
    await first.append("t-0", [{"t": "run"}])
    await first.close()
    procs = [
        subprocess.Popen(  # noqa: ASYNC220
            [sys.executable, "-c", SCRIPT, str(path), str(i)], stderr=subprocess.PIPE
        )
        for i in range(3)
    ]
    errors = [p.communicate(timeout=300)[1].decode() for p in procs]
    assert [p.returncode for p in procs] == [0, 0, 0], errors
    cp = SqliteCheckpointer(path)
    for i in range(3):
        records = await cp.load(f"t-{i}")
        assert [r["n"] for r in records if r["t"] == "sync"] == list(range(1500))
    await cp.close()
