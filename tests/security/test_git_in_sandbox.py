"""Every `.git` and git directory in the workspace, at any depth, is out of a sandboxed
command's reach: the ones there are read-only to it, and the ones it makes (however it
makes them) are disabled when it ends, also when tether is killed in the middle. Git on
the host, run as root, keeps working and never runs what a command planted."""

from __future__ import annotations

import asyncio
import os
import shutil
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from tests.cli.test_cli import environment, scripted
from tether.backends.sandbox import LocalSandbox
from tether.backends.sandbox.gitdirs import is_git_directory

pytestmark = pytest.mark.skipif(
    shutil.which("bwrap") is None or shutil.which("git") is None, reason="needs bwrap and git"
)
GIT = ["git", "-c", "user.email=t@t", "-c", "user.name=t", "-c", "protocol.file.allow=always"]


def git(where: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*GIT, *args], cwd=where, capture_output=True, text=True, check=False, timeout=60
    )


@pytest.fixture
def repository(tmp_path: Path) -> Path:
    """A real repository with a submodule that is not checked out: git status enters a
    submodule as soon as its directory holds a .git."""
    root = tmp_path / "project"
    root.mkdir()
    assert git(root, "init", "-q").returncode == 0
    (root / "README.md").write_text("# Project\n")
    git(root, "add", "README.md")
    git(root, "commit", "-q", "-m", "first")
    head = git(root, "rev-parse", "HEAD").stdout.strip()
    git(root, "update-index", "--add", "--cacheinfo", f"160000,{head},sub")
    (root / ".gitmodules").write_text('[submodule "sub"]\n\tpath = sub\n\turl = ./none\n')
    git(root, "add", ".gitmodules")
    git(root, "commit", "-q", "-m", "a submodule")
    (root / "sub").mkdir()
    (root / ".tether").mkdir()
    return root


def fsmonitor(marker: Path) -> str:
    return f"[core]\n\tfsmonitor = touch {marker}; false\n"


def planted_git_dir(path: str, marker: Path) -> str:
    """Shell that makes a git directory at `path` whose config runs `touch marker`."""
    return (
        (
            f"mkdir -p {path}/objects {path}/refs/heads && "
            f"echo 'ref: refs/heads/main' > {path}/HEAD && "
            f"printf '{fsmonitor(marker)}' > {path}/config"
        )
        .replace("\n", "\\n")
        .replace("\t", "\\t")
    )


def git_entries(root: Path) -> set[str]:
    """Every `.git` entry and git directory under `root` (not in .tether), by path."""
    found = set()
    for directory, names, files in os.walk(root):
        relative = os.path.relpath(directory, root)
        if relative.split(os.sep)[0] == ".tether":
            continue
        entries = set(names) | set(files)
        if relative != "." and is_git_directory(entries):
            found.add(relative)
        found |= {os.path.join(relative, n) for n in entries if n.casefold() == ".git"}
    return found


async def test_every_git_entry_at_any_depth_is_read_only(repository: Path, tmp_path: Path) -> None:
    root = repository
    (root / ".git" / "modules" / "sub").mkdir(parents=True)
    for name in ("objects", "refs"):
        (root / ".git" / "modules" / "sub" / name).mkdir()
    (root / ".git" / "modules" / "sub" / "HEAD").write_text("ref: refs/heads/main\n")
    (root / ".git" / "modules" / "sub" / "config").write_text("[core]\n")
    (root / "sub" / ".git").write_text("gitdir: ../.git/modules/sub\n")
    nested = root / "vendor" / "lib" / ".git"
    nested.mkdir(parents=True)
    (nested / "config").write_text("[core]\n")
    bare = root / "fixtures" / "bare.git"
    for name in ("objects", "refs"):
        (bare / name).mkdir(parents=True)
    (bare / "HEAD").write_text("ref: refs/heads/main\n")
    (bare / "config").write_text("[core]\n")
    (root / "Upper" / ".GIT").mkdir(parents=True)
    before = git_entries(root)
    evil = fsmonitor(tmp_path / "pwned").replace("\n", "\\n").replace("\t", "\\t")
    sandbox = LocalSandbox(root)
    done = await sandbox.execute(
        f"printf '{evil}' >> .git/config; printf '{evil}' >> .git/modules/sub/config; "
        "echo 'gitdir: /tmp/elsewhere' > sub/.git; rm -f sub/.git; "
        f"printf '{evil}' >> vendor/lib/.git/config; mv vendor/lib/.git vendor/lib/old; "
        f"printf '{evil}' >> fixtures/bare.git/config; rm -rf fixtures/bare.git; "
        f"mv fixtures moved && printf '{evil}' >> moved/bare.git/config; "
        "touch Upper/.GIT/config; echo done"
    )
    assert done.output.endswith("done\n"), done.output
    assert done.output.count("Read-only file system") >= 5, done.output
    assert (root / "sub" / ".git").read_text() == "gitdir: ../.git/modules/sub\n"
    assert (nested / "config").read_text() == "[core]\n"
    assert (root / "moved" / "bare.git" / "config").read_text() == "[core]\n"  # moved whole
    assert (root / ".git" / "modules" / "sub" / "config").read_text() == "[core]\n"
    assert "fsmonitor" not in (root / ".git" / "config").read_text()
    assert not (root / "Upper" / ".GIT" / "config").exists()
    assert git_entries(root) == {p.replace("fixtures", "moved", 1) for p in before}


ATTACKS = {
    "a new .git directory": "{made:made/.git}",
    "a gitdir file pointing at a git directory it made": "{made:gd}; mkdir -p p; "
    "echo 'gitdir: ../gd' > p/.git",
    "a git directory renamed into place": "{made:staging}; mkdir -p r; mv staging r/.git",
    "a symlink named .git": "{made:gd}; mkdir -p l; ln -s ../gd l/.git",
    "a hard link named .git": "echo 'gitdir: ../gd' > f; {made:gd}; mkdir -p h; ln f h/.git",
    "another case": "{made:c/.GIT}",
    "a bare repository": "{made:bare}",
    "a directory made one": "{made:docs}",
    "one inside another": "{made:n/.git}; {made:n/.git/inner/.git}",
    "the submodule's": "{made:.git/../sub/.git}",
    "the submodule's, through a file": "{made:gd}; echo 'gitdir: ../gd' > sub/.git",
}


@pytest.mark.parametrize("attack", ATTACKS.values(), ids=list(ATTACKS))
async def test_a_git_directory_a_command_makes_is_disabled(
    repository: Path, tmp_path: Path, attack: str
) -> None:
    root = repository
    (root / "docs").mkdir()
    (root / "docs" / "guide.md").write_text("keep me\n")
    marker = tmp_path / "pwned"
    before = git_entries(root)
    command = attack
    while "{made:" in command:
        start = command.index("{made:")
        end = command.index("}", start)
        command = (
            command[:start] + planted_git_dir(command[start + 6 : end], marker) + command[end + 1 :]
        )
    done = await LocalSandbox(root).execute(command + " && echo planted")
    assert "planted" in done.output, done.output
    for where in _directories(root):  # git on the host, wherever it is run
        git(where, "status")
    assert not marker.exists()
    assert git(root, "status").returncode == 0
    assert "tether renamed what git would have taken for a repository" in done.output
    assert git_entries(root) == before
    assert (root / "docs" / "guide.md").read_text() == "keep me\n"


async def test_a_git_directory_made_deeper_than_any_fd_budget_is_disabled(
    repository: Path, tmp_path: Path
) -> None:
    """3,000 levels down, past PATH_MAX: the search holds one directory open at a time."""
    deep = "import os\nfor _ in range(3000):\n    os.mkdir('d')\n    os.chdir('d')\n"
    plant = "os.makedirs('.git/objects'); os.makedirs('.git/refs'); open('.git/HEAD', 'w')"
    sandbox = LocalSandbox(repository)
    try:
        made = await sandbox.execute(f'python3 -c "{deep}{plant}" && echo planted')
        assert "planted" in made.output, made.output
        assert "/.git -> " in made.output
        look = "import os\nwhile os.path.isdir('d'): os.chdir('d')\nprint(sorted(os.listdir()))"
        looked = await sandbox.execute(f'python3 -c "{look}"')
        assert ".git.disabled-by-tether-" in looked.output, looked.output
        assert "'.git'" not in looked.output
    finally:  # too deep for pytest's own clean-up (shutil.rmtree recurses)
        await sandbox.execute("rm -rf d")


async def test_a_git_directory_in_a_tether_directory_a_command_made_is_disabled(
    tmp_path: Path,
) -> None:
    """.tether is left alone only when it was there, hidden, before the command."""
    sandbox = LocalSandbox(tmp_path / "ws")
    done = await sandbox.execute(planted_git_dir(".tether/x/.git", tmp_path / "pwned"))
    assert "/.tether/x/.git -> /.tether/x/.git.disabled-by-tether-" in done.output


async def test_commands_in_one_workspace_run_one_at_a_time(repository: Path) -> None:
    """So that none can move what another's mounts protect while they are made."""
    sandbox = LocalSandbox(repository)
    overlap = "[ -e running ] && echo overlap; touch running; sleep 0.5; rm running"
    done = await asyncio.gather(*(sandbox.execute(overlap) for _ in range(3)))
    assert [d.output for d in done] == ["", "", ""]


def test_the_submodule_attack_works_without_the_sandbox(repository: Path, tmp_path: Path) -> None:
    """The attack the test above stops, made by hand: host git status runs it."""
    marker = tmp_path / "pwned"
    subprocess.run(["sh", "-c", planted_git_dir("sub/.git", marker)], cwd=repository, check=True)
    git(repository, "status")
    assert marker.exists()


async def test_a_git_symlink_is_refused_before_the_command_runs(repository: Path) -> None:
    (repository / "elsewhere").mkdir()
    (repository / "sub" / ".git").symlink_to("../elsewhere")
    sandbox = LocalSandbox(repository, timeout_seconds=30)
    done = await sandbox.execute("touch ran")
    assert done.exit_code is None
    assert "[not run: tether keeps every .git in the workspace read-only" in done.output
    assert "/sub/.git is a symbolic link" in done.output
    assert not (repository / "ran").exists()
    (repository / "sub" / ".git").unlink()
    again = await sandbox.execute("touch ran")  # the refusal held nothing back
    assert again.exit_code == 0, again.output


def test_what_a_killed_tethers_command_made_is_disabled_by_the_next(
    repository: Path, tmp_path: Path
) -> None:
    marker = tmp_path / "pwned"
    started = repository / "started"
    script = textwrap.dedent(
        f"""
        import asyncio
        from tether.backends.sandbox import LocalSandbox
        command = {planted_git_dir("sub/.git", marker) + " && touch started && sleep 100"!r}
        asyncio.run(LocalSandbox({str(repository)!r}).execute(command))
        """
    )
    child = subprocess.Popen([sys.executable, "-c", script])
    try:
        _wait_for(started.exists, "the command to start")
    finally:
        child.send_signal(signal.SIGKILL)
        child.wait()
    assert (repository / "sub" / ".git" / "config").exists()  # left behind by the kill
    records = Path(os.environ["XDG_STATE_HOME"], "tether", "sandbox")
    assert list(records.glob("*/*.json"))  # with its record, outside the workspace
    sandbox = LocalSandbox(repository)
    assert not (repository / "sub" / ".git").exists()
    assert not list(records.glob("*/*.json"))
    assert any("/sub/.git -> /sub/.git.disabled-by-tether-" in n for n in sandbox.recovered)
    git(repository, "status")
    assert not marker.exists()


@pytest.mark.skipif(os.geteuid() != 0, reason="git's ownership check matters under root")
def test_git_works_during_and_after_a_sandboxed_session_as_root(
    repository: Path, tmp_path: Path
) -> None:
    command = (
        "echo made > made.txt; touch started; "
        "i=0; while [ ! -e go ] && [ $i -lt 900 ]; do sleep 0.1; i=$((i+1)); done; "
        "git status --short; echo in-sandbox-done"
    )
    model = scripted(
        repository, "exec.json", [[{"tool": "execute", "args": {"command": command}}], "done"]
    )
    session = _tether(repository, "run", "--yes", "--sandbox", "--json", "--model", model, "go")
    try:
        _wait_for((repository / "started").exists, "the command to start")
        during = git(repository, "status", "--porcelain")
        assert during.returncode == 0, during.stderr  # no "dubious ownership"
        assert "?? made.txt" in during.stdout
        assert _owners(repository) == {0}
        (repository / "go").touch()
        out, err = session.communicate(timeout=120)
    finally:
        session.kill()
    assert session.returncode == 0, err
    assert "?? made.txt" in out  # git in the sandbox read the repository too
    assert "in-sandbox-done" in out
    after = git(repository, "status", "--porcelain")
    assert after.returncode == 0, after.stderr
    assert _owners(repository) == {0}


@pytest.mark.skipif(os.geteuid() != 0, reason="git's ownership check matters under root")
def test_a_tether_killed_mid_command_leaves_nothing_for_the_next_start(
    repository: Path, tmp_path: Path
) -> None:
    marker = tmp_path / "pwned"
    plant = planted_git_dir("sub/.git", marker) + " && touch started && sleep 100"
    first = scripted(repository, "plant.json", [[{"tool": "execute", "args": {"command": plant}}]])
    session = _tether(repository, "run", "--yes", "--sandbox", "--model", first, "go")
    try:
        _wait_for((repository / "started").exists, "the command to start")
    finally:
        session.send_signal(signal.SIGKILL)
        session.communicate(timeout=60)
    assert (repository / "sub" / ".git").exists()
    second = scripted(
        repository, "next.json", [[{"tool": "execute", "args": {"command": "echo next"}}], "ok"]
    )
    later = _tether(repository, "run", "--yes", "--sandbox", "--json", "--model", second, "go")
    out, err = later.communicate(timeout=120)
    assert later.returncode == 0, err
    assert "never finished (the process was killed)" in out
    assert not (repository / "sub" / ".git").exists()
    assert git(repository, "status").returncode == 0
    assert not marker.exists()
    assert _owners(repository) == {0}
    dead = str(session.pid)
    assert not [
        d
        for parent in ("/sys/fs/cgroup/pids", "/sys/fs/cgroup/memory")
        for d, _, _ in os.walk(parent)
        if os.path.basename(d).startswith(f"tether-{dead}-")
    ]


def _tether(project: Path, *args: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "tether.cli", *args],
        cwd=project,
        env=environment(XDG_CONFIG_HOME=str(project.parent / "config")),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        stdin=subprocess.DEVNULL,
        text=True,
    )


def _wait_for(condition: object, what: str, seconds: float = 90) -> None:
    assert callable(condition)
    deadline = time.monotonic() + seconds
    while not condition():
        assert time.monotonic() < deadline, f"waited {seconds} s for {what}"
        time.sleep(0.05)


def _directories(root: Path) -> list[Path]:
    """Every directory of the project but .tether's, and git's own (by name)."""
    found = []
    for directory, names, _ in os.walk(root):
        names[:] = [n for n in names if n not in (".tether", ".git")]
        found.append(Path(directory))
    return found


def _owners(root: Path) -> set[int]:
    return {p.lstat().st_uid for p in [root, *root.rglob("*")]}


async def test_a_hard_link_into_a_git_directory_is_read_only_too(repository: Path) -> None:
    """A name elsewhere in the workspace for a file git reads (made on the host: a
    command cannot link across its mounts) is kept read-only like the file's own."""
    os.link(repository / ".git" / "config", repository / "config-copy")
    (repository / "sub" / ".git").write_text("gitdir: ../.git\n")
    os.link(repository / "sub" / ".git", repository / "pointer-copy")
    before = (repository / ".git" / "config").read_text()
    done = await LocalSandbox(repository).execute(
        "echo '[core] fsmonitor = evil' >> config-copy; echo 'gitdir: /x' > pointer-copy; "
        "rm -f config-copy pointer-copy; ln .git/HEAD head-copy; echo done"
    )
    assert done.output.count("Read-only file system") == 2, done.output
    assert "Device or resource busy" in done.output  # a mount point cannot be removed
    assert "Invalid cross-device link" in done.output  # nor a new link made
    assert (repository / ".git" / "config").read_text() == before
    assert (repository / "sub" / ".git").read_text() == "gitdir: ../.git\n"


def test_a_record_in_the_workspace_is_not_taken_for_one_of_tethers(repository: Path) -> None:
    """A repository can ship `.tether/sandbox/*.json` (and a command can make it): the
    records are kept outside every workspace, so a forged one disables nothing."""
    forged = '{"pid": 999999, "started": null, "workspace": "%s", "known": [], "hidden": []}'
    (repository / ".tether" / "sandbox").mkdir(parents=True)
    (repository / ".tether" / "sandbox" / "1-aa.json").write_text(forged % repository)
    sandbox = LocalSandbox(repository)
    assert sandbox.recovered == []
    assert (repository / ".git" / "HEAD").exists()
    assert git(repository, "status").returncode == 0


def test_a_record_of_another_workspace_that_had_this_inode_is_ignored(repository: Path) -> None:
    records = Path(os.environ["XDG_STATE_HOME"], "tether", "sandbox")
    st = repository.stat()
    (records / f"{st.st_dev}-{st.st_ino}").mkdir(parents=True)
    old = '{"pid": 999999, "started": null, "workspace": "/gone", "known": [], "hidden": []}'
    (records / f"{st.st_dev}-{st.st_ino}" / "1-aa.json").write_text(old)
    assert LocalSandbox(repository).recovered == []
    assert (repository / ".git" / "HEAD").exists()
