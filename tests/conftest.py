from __future__ import annotations

import pytest

from tether.messages import ToolCall
from tether.state import RunState, ToolContext


@pytest.fixture
def context() -> ToolContext:
    """A tool context outside any run."""
    return ToolContext(RunState(run_id="run_test", path=("main",), messages=[]), ToolCall("t"))
