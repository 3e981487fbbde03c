"""Thread ids from outside: a thread started anywhere can be watched, stopped and deleted
everywhere. An id that would not be one path segment of a URL and one argument of a
command (`/`, `..`, `%2F`, a leading `-`, nothing, too long, invisible or non-ASCII
characters) is refused before any run starts on it: through the API, a real server
and the `tether` command.

Found in tether: a thread id containing `/` could be started from the server but not
viewed, stopped or deleted there.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import httpx
import pytest
from hypothesis import given
from hypothesis import strategies as st

from tests.serve.helpers import AUTH, TOKEN, events, run_input, served
from tether import ConfigurationError, create_agent
from tether.agent import checked_run_thread_id
from tether.models import ScriptedModel
from tether.serve import app

HOSTILE = [
    "a/b",
    "/",
    "..",
    ".",
    "../etc",
    "a%2Fb",
    "%2F",
    "-rf",
    " t",
    "t ",
    "x" * 129,
    "thread-é",
    "\uff54\uff11",  # fullwidth letters: look like t1, are not
    "t\u202e1",  # a bidi override
    "t\u200b1",  # a zero-width space
    "a\nb",
    "a\x00b",
    "a\x1b[31mb",
    "a?b",
    "a#b",
    "a\\b",
]
FINE = ["t", "T1", "thread_0123456789abcdef", "pr-42", "user:42@example.com", "a.b", "x" * 128]


@pytest.mark.parametrize("thread_id", HOSTILE)
def test_a_run_is_refused_on_an_id_no_url_or_command_can_name(
    tmp_path: Path, thread_id: str
) -> None:
    agent = create_agent(ScriptedModel(["hi"]), checkpointer=f"sqlite:///{tmp_path}/runs.db")
    with pytest.raises(ConfigurationError, match="a thread id is 1 to 128 letters"):
        agent.run("Hello.", thread_id=thread_id)
    assert agent.threads() == []  # nothing was recorded


@pytest.mark.parametrize("thread_id", FINE)
def test_a_run_starts_on_a_plain_id(tmp_path: Path, thread_id: str) -> None:
    agent = create_agent(ScriptedModel(["hi"]), checkpointer=f"sqlite:///{tmp_path}/runs.db")
    assert agent.run("Hello.", thread_id=thread_id).output == "hi"


@given(st.text(max_size=140))
def test_an_accepted_id_is_one_plain_path_segment(thread_id: str) -> None:
    try:
        checked_run_thread_id(thread_id)
    except ConfigurationError:
        return
    assert 1 <= len(thread_id) <= 128
    assert thread_id.isascii()
    assert thread_id.isprintable()
    assert "/" not in thread_id
    assert "%" not in thread_id
    assert thread_id not in (".", "..")
    assert not thread_id.startswith(("-", "."))
    assert httpx.URL(f"http://h/threads/{thread_id}").path == f"/threads/{thread_id}"


def test_the_server_refuses_such_an_id_and_serves_every_thread_it_started(
    tmp_path: Path,
) -> None:
    agent = create_agent(ScriptedModel(["hi"] * 8), checkpointer=f"sqlite:///{tmp_path}/runs.db")
    with (
        served(app({"a": agent}, token=TOKEN)) as url,
        httpx.Client(base_url=url, headers=AUTH, timeout=30) as c,
    ):
        for thread_id in HOSTILE:
            refused = c.post("/api/agents/a", json=run_input(thread_id, "Hello."))
            assert refused.status_code == 400, thread_id
            assert "a thread id is 1 to 128 letters" in refused.json()["error"]
        assert c.get("/api/agents/a/threads").json() == {"threads": []}
        for thread_id in FINE:  # each one started is viewed, stopped and deleted by its URL
            assert events(c.post("/api/agents/a", json=run_input(thread_id, "Hi.")).text)
            assert c.get(f"/api/agents/a/threads/{thread_id}").json()["thread_id"] == thread_id
            assert c.post(f"/api/agents/a/threads/{thread_id}/stop").status_code == 409
            assert c.delete(f"/api/agents/a/threads/{thread_id}").status_code == 200
        for path in ("a%2Fb", "..", "%2e%2e", "a/b/c"):  # no such thread, or no such route
            assert c.get(f"/api/agents/a/threads/{path}").status_code in (404, 405), path


def test_the_command_refuses_such_an_id(tmp_path: Path) -> None:
    project = tmp_path / "project"
    project.mkdir()
    (tmp_path / "script.json").write_text(json.dumps(["hi"]))
    model = f"test:{tmp_path / 'script.json'}"
    for thread_id in ("a/b", "..", "t\u202e1"):
        command = ["run", "--thread", thread_id, "-q", "--model", model, "--no-sandbox", "Hi."]
        done = subprocess.run(
            [sys.executable, "-m", "tether.cli", *command],
            cwd=project,
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
        assert done.returncode == 2, done.stderr
        assert "a thread id is 1 to 128 letters" in done.stderr
        assert "\u202e" not in done.stderr  # shown escaped, never as itself
