"""Repeated synchronous runs leave nothing behind: no error printed, no connection open."""

from __future__ import annotations

import asyncio
import subprocess
import sys
from pathlib import Path
from typing import Any

import httpx2

from tether.models.anthropic import AnthropicModel
from tether.models.openai import OpenAIModel

ROOT = Path(__file__).parents[2]


def test_repeated_sync_runs_close_each_loops_client_quietly() -> None:
    done = subprocess.run(
        [sys.executable, "-W", "error", "-m", "tests.models.sync_runs"],
        check=False,
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert "Event loop is closed" not in done.stderr
    assert "never retrieved" not in done.stderr
    assert done.stderr == ""
    assert done.returncode == 0


def _client_of(model: Any) -> Any:
    async def made() -> Any:
        return model._clients.get()

    return asyncio.run(made())


def test_a_client_made_for_a_loop_is_closed_with_it() -> None:
    models = [
        OpenAIModel("gpt-5.2", api="chat", api_key="k", base_url="http://127.0.0.1:9/v1"),
        AnthropicModel("claude-sonnet-5-5", api_key="k", base_url="http://127.0.0.1:9"),
    ]
    for model in models:
        client = _client_of(model)
        assert client.is_closed()
        assert not model._clients._by_loop  # nor kept: a new loop gets a new client


def test_a_users_http_client_is_theirs_to_close() -> None:
    http = httpx2.AsyncClient()
    _client_of(OpenAIModel("gpt-5.2", api="chat", api_key="k", http_client=http))
    assert not http.is_closed
