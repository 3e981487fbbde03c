"""RemoteSandbox: a provider's three methods make a sandbox backend (its file tools are
tested with every backend's in test_tools.py), and sandboxes found by name, packages'
own through the `tether.sandboxes` entry point group."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from tests.conftest import by_server_id
from tests.sandboxes import DirectoryRemote
from tether import ConfigurationError, create_agent
from tether.backends.sandbox import LocalSandbox, RemoteSandbox, SandboxBackend
from tether.backends.sandbox.providers import ENTRY_POINT_GROUP, available, sandbox
from tether.messages import ToolCall
from tether.models import ScriptedModel


async def test_commands_run_in_the_workdir_with_exit_codes_and_limits(tmp_path: Path) -> None:
    remote = DirectoryRemote(tmp_path / "machine", timeout_seconds=2)
    assert isinstance(remote, SandboxBackend)
    await remote.write("/src/app.sh", b"echo from the workspace\n")
    done = await remote.execute("pwd; sh src/app.sh; exit 3")
    assert done.output == f"{tmp_path}/machine/workspace\nfrom the workspace\n"
    assert done.exit_code == 3
    slow = await remote.execute("sleep 10", timeout_seconds=3600)  # never longer
    assert slow.timed_out
    assert slow.exit_code is None


async def test_long_output_is_cut_and_kept_whole_in_the_sandbox(tmp_path: Path) -> None:
    remote = DirectoryRemote(tmp_path / "machine", max_output_chars=100)
    done = await remote.execute("seq 1 5000")
    assert done.truncated
    assert done.full_output is not None
    assert done.output.startswith("1\n2\n3\n")
    assert f"the full output is in {done.full_output}" in done.output
    kept = await remote.read(done.full_output)
    assert kept.splitlines()[-1] == b"5000"


async def test_names_with_tabs_and_links_are_listed_as_they_are(tmp_path: Path) -> None:
    remote = DirectoryRemote(tmp_path / "machine")
    await remote.execute("printf x > \"$(printf 'a\\tb.txt')\"; ln -s a.txt link; mkdir d")
    listed = {entry.path: entry for entry in await remote.ls("/")}
    assert set(listed) == {"/a\tb.txt", "/d", "/link"}
    assert listed["/link"].link == "a.txt"
    assert listed["/d"].is_dir
    assert listed["/a\tb.txt"].size == 1


def test_an_agent_works_in_a_remote_sandbox(tmp_path: Path) -> None:
    model = ScriptedModel(
        [
            [ToolCall("write_file", {"file_path": "/n.txt", "content": "6 * 7"}, id="w")],
            [ToolCall("execute", {"command": "echo $(( $(cat n.txt) ))"}, id="x")],
            [ToolCall("grep", {"pattern": r"\d \* \d"}, id="g")],
            "42",
        ]
    )
    result = create_agent(model, backend=DirectoryRemote(tmp_path / "machine")).run("go")
    answers = by_server_id(result.messages)
    assert answers["x"].text == "42\n[exit code 0]"
    assert "/n.txt" in answers["g"].text


def test_sandboxes_by_name(tmp_path: Path) -> None:
    assert {"local", "container"} <= set(available())
    made = sandbox("local", tmp_path / "ws")
    assert isinstance(made, LocalSandbox)
    with pytest.raises(ConfigurationError, match="no sandbox is named 'nope'; there are"):
        sandbox("nope")


def test_a_package_registers_a_sandbox_by_entry_point(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A real distribution on sys.path declares one, as a provider's package would."""
    package = tmp_path / "site"
    (package / "fake_provider").mkdir(parents=True)
    (package / "fake_provider" / "__init__.py").write_text(
        "from tests.sandboxes import DirectoryRemote\n"
        "def make(machine):\n    return DirectoryRemote(machine)\n"
        "def wrong(**options):\n    return object()\n"
    )
    info = package / "fake_provider-1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: fake-provider\nVersion: 1.0\n")
    (info / "entry_points.txt").write_text(
        f"[{ENTRY_POINT_GROUP}]\nfake = fake_provider:make\nbroken = fake_provider:wrong\n"
        "missing = not_installed_module:make\nlocal = fake_provider:make\n"
    )
    monkeypatch.syspath_prepend(str(package))
    assert available()["fake"] == "fake_provider:make"
    assert available()["local"] == "tether.backends.sandbox.local:LocalSandbox"  # not taken
    made = sandbox("fake", tmp_path / "machine")
    assert isinstance(made, RemoteSandbox)
    with pytest.raises(ConfigurationError, match="made a object, which is not a SandboxBackend"):
        sandbox("broken")
    with pytest.raises(ConfigurationError, match="which is not installed"):
        sandbox("missing")
    sys.modules.pop("fake_provider", None)
