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
from tether.backends.errors import BackendError
from tether.backends.sandbox import LocalSandbox, RemoteSandbox, SandboxBackend
from tether.backends.sandbox.providers import ENTRY_POINT_GROUP, available, sandbox
from tether.messages import ToolCall
from tether.models import ScriptedModel


async def test_commands_run_in_the_workdir_with_exit_codes_and_limits(tmp_path: Path) -> None:
    remote = DirectoryRemote(tmp_path / "machine", timeout_seconds=1)
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


async def test_links_on_the_remote_machine_are_never_followed(tmp_path: Path) -> None:
    """A repository can ship links out of the workspace: the file tools refuse a path
    with one on the way (or at its end), as they do on this machine."""
    remote = DirectoryRemote(tmp_path / "machine")
    outside = tmp_path / "machine" / "outside"
    outside.mkdir(parents=True)
    (outside / "secret.txt").write_text("the secret")
    await remote.execute("ln -s ../outside docs; ln -s ../outside/secret.txt name.txt")
    with pytest.raises(BackendError, match="/docs is a symbolic link"):
        await remote.read("/docs/secret.txt")
    with pytest.raises(BackendError, match=r"/name\.txt is a symbolic link to"):
        await remote.read("/name.txt")
    with pytest.raises(BackendError, match="/docs is a symbolic link"):
        await remote.write("/docs/planted.txt", b"x")
    with pytest.raises(BackendError, match="is a symbolic link"):
        await remote.write("/name.txt", b"x")
    assert await remote.grep("secret", "/name.txt") == []
    assert "the secret" not in str(await remote.grep("secret", "/"))
    assert not (outside / "planted.txt").exists()
    assert (outside / "secret.txt").read_text() == "the secret"


class _BrokenFind(DirectoryRemote):
    """A machine whose find prints part of a listing and fails."""

    async def run(self, command: str, timeout_seconds: float) -> tuple[str, int | None]:
        fake = self.machine / "bin"
        fake.mkdir(exist_ok=True)
        (fake / "find").write_text("#!/bin/sh\nprintf 'f\\t1\\t1.0\\tpartial\\0\\0'\nexit 1\n")
        (fake / "find").chmod(0o755)
        return await super().run(f"PATH={fake}:$PATH; {command}", timeout_seconds)


class _SlowMachine(DirectoryRemote):
    async def run(self, command: str, timeout_seconds: float) -> tuple[str, int | None]:
        return ("", None) if "find" in command else await super().run(command, timeout_seconds)


@pytest.mark.parametrize("machine", [_BrokenFind, _SlowMachine])
async def test_a_listing_that_failed_is_an_error_not_an_empty_answer(
    machine: type[DirectoryRemote], tmp_path: Path
) -> None:
    remote = machine(tmp_path / "machine")
    await remote.execute("mkdir -p src && echo needle > src/a.txt")
    for call in (
        remote.ls("/src"),
        remote.files("/"),
        remote.grep("needle", "/"),
        remote.read("/src/a.txt"),
    ):
        with pytest.raises(BackendError, match=r"failed in the sandbox|took longer than"):
            await call


async def test_output_that_cannot_be_kept_still_comes_back_with_its_exit_code(
    tmp_path: Path,
) -> None:
    """The command ran: what it printed and how it ended are the model's, saved or not."""
    remote = DirectoryRemote(tmp_path / "machine", max_output_chars=100)
    await remote.execute("touch large_tool_results")  # in the way of the saved output
    done = await remote.execute("echo charged >> ledger; seq 1 500; exit 4")
    assert done.exit_code == 4
    assert done.output.startswith("1\n2\n")
    assert "the rest could not be saved" in done.output
    assert done.full_output is None


async def test_grep_and_glob_skip_git_directories(tmp_path: Path) -> None:
    remote = DirectoryRemote(tmp_path / "machine")
    await remote.execute(
        "mkdir -p .git/logs src && echo needle > .git/COMMIT_EDITMSG && "
        "echo needle > .git/logs/HEAD && echo needle > src/a.txt"
    )
    assert [hit.path for hit in await remote.grep("needle", "/")] == ["/src/a.txt"]
    assert [entry.path for entry in await remote.files("/")] == ["/src/a.txt"]
