"""Running a coroutine from sync code, with or without an event loop already running."""

from __future__ import annotations

import asyncio
import concurrent.futures
from collections.abc import Callable, Coroutine
from typing import Any, TypeVar

__all__ = ["run_sync"]

T = TypeVar("T")


def run_sync(make: Callable[[], Coroutine[Any, Any, T]]) -> T:
    """Run a coroutine to completion from sync code, with or without a running loop."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(make())
    # A loop already runs in this thread (Jupyter, an async framework): blocking it on
    # itself would deadlock, so the run gets a fresh loop in a worker thread.
    with concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="tether-run") as pool:
        return pool.submit(lambda: asyncio.run(make())).result()
