"""Durable runs: an append-only log of records per thread, in SQLite or Postgres.

`open_checkpointer("sqlite:///.tether/runs.db")` gives the embedded default. What is
recorded, and how a run is rebuilt from it, is `tether.checkpoint.journal`; how one run
at a time holds a thread, `tether.checkpoint.lease`.
"""

from __future__ import annotations

from tether.checkpoint.base import Checkpointer, Record, ThreadInfo, open_checkpointer
from tether.checkpoint.lease import Holder, Lease

__all__ = ["Checkpointer", "Holder", "Lease", "Record", "ThreadInfo", "open_checkpointer"]
