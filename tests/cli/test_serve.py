"""`tether serve` in a subprocess: the project's agent over HTTP with its approvals
(the project's own gates, answered over the API), and a clean stop on Ctrl-C."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from tests.cli.test_cli import environment, scripted
from tests.serve.helpers import AUTH, TOKEN, approve, events, free_port, run_input


@pytest.fixture
def project(tmp_path: Path) -> Path:
    root = tmp_path / "project"
    root.mkdir()
    return root


WRITE = {"tool": "write_file", "args": {"file_path": "/NOTES.md", "content": "# Notes\n"}}


def start(project: Path, *args: str) -> tuple[subprocess.Popen[str], str]:
    """`tether serve ARGS` in `project`; the process and its base URL, once it answers."""
    port = free_port()
    command = [sys.executable, "-m", "tether.cli", "serve", "--port", str(port), *args]
    env = environment(TETHER_SERVE_TOKEN=TOKEN)
    process = subprocess.Popen(
        command, cwd=project, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    assert process.stdout is not None
    first = process.stdout.readline()
    assert first == f"tether is serving at http://127.0.0.1:{port}/#token={TOKEN}\n", first + (
        process.stderr.read() if process.stderr else ""
    )
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 30
    while True:
        try:
            httpx.get(url, timeout=1)
            return process, url
        except httpx.TransportError:
            assert time.monotonic() < deadline, "the server did not answer"
            time.sleep(0.05)


def stop(process: subprocess.Popen[str]) -> str:
    process.send_signal(signal.SIGINT)
    _, err = process.communicate(timeout=30)
    assert process.returncode == 0, err
    return err


def test_the_project_agent_is_served_and_its_gates_answered_over_http(project: Path) -> None:
    model = scripted(project, "serve.json", [[WRITE], "Wrote NOTES.md."])
    process, url = start(project, "--model", model, "--no-sandbox")
    try:
        with httpx.Client(base_url=url, headers=AUTH, timeout=60) as c:
            [agent] = c.get("/api/agents").json()["agents"]
            assert agent["name"] == "project"  # the project directory's name
            first = events(c.post("/api/agents/project", json=run_input("t", "Notes.")).text)
            [interrupt] = first[-1]["outcome"]["interrupts"]
            assert interrupt["metadata"]["tool"] == "write_file"  # the default gate: ask
            second = c.post(
                "/api/agents/project", json=run_input("t", resume=approve(interrupt["id"]))
            )
            assert events(second.text)[-1]["result"] == "Wrote NOTES.md."
    finally:
        err = stop(process)
    assert (project / "NOTES.md").read_text() == "# Notes\n"
    assert "Traceback" not in err


def test_ctrl_c_ends_a_live_run_as_cancelled_and_stops_at_once(project: Path) -> None:
    model = scripted(project, "slow.json", [[{"pause": 60}, "too late"]])
    process, url = start(project, "--model", model, "--no-sandbox")
    with (
        httpx.Client(base_url=url, headers=AUTH, timeout=60) as c,
        c.stream("POST", "/api/agents/project", json=run_input("t", "Wait.")) as response,
    ):
        lines = response.iter_lines()
        assert "RUN_STARTED" in next(lines)
        started = time.monotonic()
        err = stop(process)
        rest = "\n".join(lines)
    assert time.monotonic() - started < 15
    assert '"outcome":{"type":"cancelled"}' in rest
    assert "Traceback" not in err
    shown = subprocess.run(
        [sys.executable, "-m", "tether.cli", "threads", "--json"],
        cwd=project,
        env=environment(),
        capture_output=True,
        text=True,
        check=True,
    )
    assert json.loads(shown.stdout)["status"] == "cancelled"
