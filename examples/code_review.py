"""Code review with a structured answer: the agent reads a diff and submits a review
whose shape pydantic checks, or the run retries until it fits."""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Literal

from _model import pick
from pydantic import BaseModel

from tether import create_agent
from tether.backends import FilesystemBackend
from tether.messages import ToolCall

DIFF = """\
--- a/billing.py
+++ b/billing.py
@@ def total(items):
-    return sum(i.price for i in items)
+    return sum(i.price * i.quantity for i in items) / len(items)
"""


class Finding(BaseModel):
    file: str
    line: int
    severity: Literal["bug", "risk", "style"]
    message: str


class Review(BaseModel):
    verdict: Literal["approve", "request_changes"]
    findings: list[Finding]


def main() -> Review:
    workspace = Path(tempfile.mkdtemp())
    (workspace / "change.diff").write_text(DIFF)
    model = pick(
        [
            [ToolCall("read_file", {"file_path": "/change.diff"})],
            [
                ToolCall(
                    "final_result",
                    {
                        "verdict": "request_changes",
                        "findings": [
                            {
                                "file": "billing.py",
                                "line": 2,
                                "severity": "bug",
                                "message": "Divides the total by the number of items, and "
                                "fails with ZeroDivisionError on an empty list.",
                            }
                        ],
                    },
                )
            ],
        ]
    )
    agent = create_agent(
        model,
        output_type=Review,
        backend=FilesystemBackend(workspace),
        system_prompt="You review code changes. Report real bugs first; be specific.",
    )
    result = agent.run("Review the change in /change.diff.")
    assert result.output is not None, result.stop_reason
    for finding in result.output.findings:
        print(f"{finding.severity}: {finding.file}:{finding.line} {finding.message}")
    print(f"verdict: {result.output.verdict}")
    return result.output


if __name__ == "__main__":
    main()
