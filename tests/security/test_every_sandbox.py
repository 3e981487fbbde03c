"""The boundaries every sandbox backend must hold, run against each (see
tests/sandboxes.py): LocalSandbox, and ContainerSandbox on podman and on docker.

What a command may do: work in its workspace, with exit codes and output the file
tools see. What it may not: reach the network or the host's files and processes, keep
anything running after it ends or past its time, go over its memory or processes,
change or swap out `.git`, see `.tether`, hold a capability, make a setuid file, make
a user namespace, use the kernel's keyrings.
"""

from __future__ import annotations

import os
import socket
from pathlib import Path

import pytest

from tests.sandboxes import MakeSandbox


async def test_commands_run_in_the_workspace_with_exit_codes(
    make_sandbox: MakeSandbox, tmp_path: Path
) -> None:
    sandbox = make_sandbox(tmp_path / "ws", timeout_seconds=30)
    await sandbox.write("/src/app.py", b"print('hello from the workspace')\n")
    result = await sandbox.execute("pwd; python3 src/app.py; echo oops >&2; exit 3")
    assert result.output == "/workspace\nhello from the workspace\noops\n"
    assert result.exit_code == 3
    made = await sandbox.execute(
        "echo data > out.txt && chmod 600 out.txt && echo more >> src/app.py"
    )
    assert made.exit_code == 0, made
    assert await sandbox.read("/out.txt") == b"data\n"  # the file tools see what commands made
    assert (await sandbox.read("/src/app.py")).endswith(b"more\n")
    assert os.stat(tmp_path / "ws" / "out.txt").st_uid == os.stat(tmp_path / "ws").st_uid


async def test_no_network(make_sandbox: MakeSandbox, tmp_path: Path) -> None:
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen()
    port = server.getsockname()[1]
    # A listening socket completes connections into its backlog without accept().
    probe = (
        f"python3 -c \"import socket; socket.create_connection(('127.0.0.1', {port}), "
        "timeout=2); print('connected')\"; "
        "python3 -c \"import socket; socket.create_connection(('1.1.1.1', 53), timeout=2); "
        "print('connected')\""
    )
    result = await make_sandbox(tmp_path / "ws").execute(probe)
    assert "connected" not in result.output
    assert result.exit_code != 0
    server.close()


async def test_nothing_of_the_hosts_can_be_read_or_written(
    make_sandbox: MakeSandbox, tmp_path: Path
) -> None:
    secret = tmp_path / "secret.txt"
    secret.write_text("the host's secret")
    sandbox = make_sandbox(tmp_path / "ws")
    read = await sandbox.execute(f"cat {secret}; ls /root; cat /proc/{os.getpid()}/environ")
    assert "the host's secret" not in read.output
    assert read.exit_code != 0
    await sandbox.execute(
        "touch /usr/evil /etc/evil; echo ok > /tmp/private; ln -s / root-link; "
        f"echo x > root-link{tmp_path}/escaped"
    )
    for path in ("/usr/evil", "/etc/evil", str(tmp_path / "escaped")):
        assert not _host_has(path), path
    assert not _host_has("/tmp/private", "ok\n")  # its /tmp is its own


async def test_host_processes_are_invisible(make_sandbox: MakeSandbox, tmp_path: Path) -> None:
    result = await make_sandbox(tmp_path / "ws").execute(
        "ls /proc | grep -cE '^[0-9]+$'; cat /proc/1/cmdline"
    )
    count = int(result.output.split()[0])
    assert count < 10  # a handful of its own, not the host's
    assert str(os.getpid()) not in result.output.split()


async def test_a_timeout_kills_the_command_and_its_children(
    make_sandbox: MakeSandbox, tmp_path: Path
) -> None:
    sandbox = make_sandbox(tmp_path / "ws", timeout_seconds=30)
    result = await sandbox.execute("(sleep 30 &); sleep 30", timeout_seconds=1)
    assert result.timed_out
    assert result.exit_code is None
    assert "[killed: the command ran longer than 1 s]" in result.output
    after = await sandbox.execute("ls /proc | grep -cE '^[0-9]+$'; echo fine")
    assert after.output.endswith("fine\n")
    assert "sleep 30" not in after.output


async def test_nothing_a_command_started_outlives_it(
    make_sandbox: MakeSandbox, tmp_path: Path
) -> None:
    """Background work, a daemon that left its session, one that killed the shell that
    ran it: gone when the command is over, before the next starts."""
    sandbox = make_sandbox(tmp_path / "ws", timeout_seconds=30)
    first = await sandbox.execute(
        "(sleep 300 &) ; setsid sleep 301 & nohup sleep 302 >/dev/null 2>&1 & "
        "sh -c 'sleep 303 & kill -9 $$' ; echo started"
    )
    assert "started" in first.output
    after = await sandbox.execute(
        "for p in /proc/[0-9]*; do tr '\\0' ' ' < $p/cmdline; echo; done 2>/dev/null"
    )
    assert "sleep 30" not in after.output, after.output


async def test_binary_and_huge_output(make_sandbox: MakeSandbox, tmp_path: Path) -> None:
    sandbox = make_sandbox(tmp_path / "ws")
    binary = await sandbox.execute("printf 'a\\377\\000b'")
    assert binary.output == "a\ufffd\x00b"
    huge = await sandbox.execute("seq 1 200000")
    assert huge.truncated
    assert huge.full_output is not None
    assert huge.output.startswith("1\n2\n3\n")
    saved = await sandbox.read(huge.full_output)
    assert saved.splitlines()[-1] == b"200000"


async def test_memory_holds_for_the_whole_tree(make_sandbox: MakeSandbox, tmp_path: Path) -> None:
    """Children each below the limit, together far above it."""
    sandbox = make_sandbox(tmp_path / "ws", memory_mb=64, timeout_seconds=100)
    done = await sandbox.execute(
        'for i in $(seq 1 14); do python3 -c \'import time; b = b"x" * (30 << 20); '
        "time.sleep(120)' & done; wait; echo all-ended"
    )
    assert done.over_limit == "memory", done
    assert done.exit_code is None
    assert "all-ended" not in done.output
    assert "memory_mb (64 MB of memory)" in done.output


async def test_processes_hold_for_the_whole_tree(make_sandbox: MakeSandbox, tmp_path: Path) -> None:
    sandbox = make_sandbox(tmp_path / "ws", max_processes=20, timeout_seconds=60)
    done = await sandbox.execute(
        "python3 -c 'import os, time; time.sleep(3); "
        'print("running=%d" % sum(n.isdigit() for n in os.listdir("/proc")))\' & '
        "counter=$!; (for i in $(seq 1 60); do sleep 6 & done) 2>/dev/null; wait $counter"
    )
    running = int(done.output.split("running=")[1].split()[0])
    assert running <= 20 + 3, done.output


async def test_git_is_read_only_and_cannot_be_swapped_out(
    make_sandbox: MakeSandbox, project: Path
) -> None:
    sandbox = make_sandbox(project)
    done = await sandbox.execute(
        "echo '[core] fsmonitor = evil' >> .git/config; "
        "echo evil > .git/hooks/pre-commit; "
        "mv .git .git-old; rm -rf .git; "
        "cat .git/config; echo planted > src/app.py"
    )
    assert (project / ".git" / "config").read_text() == "[core]\n"
    assert not (project / ".git" / "hooks" / "pre-commit").exists()
    assert not (project / ".git-old").exists()
    assert "[core]" in done.output  # readable: git log, git diff work
    assert (project / "src" / "app.py").read_text() == "planted\n"  # the rest is writable


async def test_a_git_directory_a_command_makes_is_disabled(
    make_sandbox: MakeSandbox, project: Path
) -> None:
    sandbox = make_sandbox(project)
    done = await sandbox.execute(
        "mkdir -p sub/.git/hooks && echo 'ref: refs/heads/main' > sub/.git/HEAD && "
        "mkdir sub/.git/objects sub/.git/refs && echo evil > sub/.git/hooks/pre-commit"
    )
    assert "tether renamed" in done.output, done.output
    assert not (project / "sub" / ".git").exists()


async def test_tether_records_are_hidden_and_untouched(
    make_sandbox: MakeSandbox, project: Path
) -> None:
    sandbox = make_sandbox(project)
    done = await sandbox.execute(
        "echo seen=$(ls -A .tether); cat .tether/runs.db; echo forged > .tether/runs.db; "
        "mv .tether t; for fd in /proc/self/fd/* /proc/1/fd/*; do cat $fd/runs.db; "
        "echo forged > $fd/runs.db; done 2>/dev/null; true"
    )
    assert "seen=\n" in done.output  # an empty directory in its place
    assert "records" not in done.output
    assert (project / ".tether" / "runs.db").read_text() == "records"
    assert not (project / "t").exists()


async def test_no_capability_no_setuid_file_no_user_namespace_no_keyring(
    make_sandbox: MakeSandbox, project: Path
) -> None:
    sandbox = make_sandbox(project)
    done = await sandbox.execute(
        "grep -E '^Cap(Eff|Prm|Amb)' /proc/self/status; "
        "cp /bin/true rootshell && chmod u+s rootshell; chmod 4755 rootshell; "
        "chmod g+s rootshell; python3 -c 'import os; os.chmod(\"rootshell\", 0o6755)'; "
        'python3 -c \'import os; fd = os.open("made", os.O_CREAT | os.O_WRONLY, 0o6755); '
        'os.write(fd, open("/bin/true", "rb").read())\'; '
        "unshare --user true && echo made-a-namespace; unshare -Ur id && echo made-root; "
        "python3 -c 'import ctypes; l = ctypes.CDLL(None, use_errno=True); "
        'print("keyctl", l.syscall(250, 0, -4, 0, 0, 0), ctypes.get_errno())\'; '
        'python3 -c \'import threading; t = threading.Thread(target=print, args=("threads",));'
        " t.start(); t.join()'; "
        "python3 -c 'import os; os.open(\"empty\", os.O_CREAT | os.O_WRONLY, 0o4755)'; "
        "python3 -c 'import os; os.open(\".\", os.O_TMPFILE | os.O_WRONLY, 0o2755)' "
        "&& echo made-unnamed; "
        "python3 -c 'import socket; socket.socket(40, socket.SOCK_STREAM); print(\"vsock\")'; "
        "python3 -c 'import ctypes; l = ctypes.CDLL(None, use_errno=True); "
        'print("high-vsock", l.syscall(41, ctypes.c_long(40 | 1 << 32), 1, 0) >= 0)\'; '
        "echo done"
    )
    lines = done.output.splitlines()
    assert all(line.endswith("0000000000000000") for line in lines[:3]), done.output
    assert not (project / "rootshell").stat().st_mode & 0o6000
    for name in ("made", "empty"):  # made with those bits: refused
        assert not (project / name).exists(), name
    assert "made-unnamed" not in done.output
    assert "vsock\n" not in done.output  # a vsock reaches the hypervisor, whatever the network
    assert "high-vsock False" in done.output  # the family's high bits ignored, as the kernel does
    assert "made-" not in done.output
    assert "keyctl -1 1\n" in done.output  # EPERM
    assert "threads" in done.output  # clone3 refused so that clone is used: threads work
    assert done.output.endswith("done\n")


def _host_has(path: str, content: str | None = None) -> bool:
    """Whether the host has `path` (with `content`, when given)."""
    found = Path(path)
    if not found.exists():
        return False
    return content is None or found.read_text() == content


async def test_tethers_own_directories_in_the_workspace_are_hidden(
    make_sandbox: MakeSandbox, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A workspace that is the home directory holds tether's settings, trust answers,
    sandbox records and seccomp profile: commands must neither read nor change them."""
    home = tmp_path / "home"
    (home / ".config" / "tether").mkdir(parents=True)
    (home / ".config" / "tether" / "trusted.json").write_text("{}")
    monkeypatch.setenv("XDG_CONFIG_HOME", str(home / ".config"))
    monkeypatch.setenv("XDG_STATE_HOME", str(home / ".local" / "state"))
    sandbox = make_sandbox(home)
    await sandbox.execute("true")  # the records and the profile are made
    done = await sandbox.execute(
        "ls -A .config/tether .local/state/tether; "
        "echo '{\"x\": 1}' > .config/tether/trusted.json; "
        "for f in $(find .local/state/tether -type f); do echo forged > $f; done; echo done"
    )
    assert "trusted.json" not in done.output
    assert done.output.endswith("done\n")
    assert (home / ".config" / "tether" / "trusted.json").read_text() == "{}"
    state = home / ".local" / "state" / "tether"
    assert all(p.read_text() != "forged\n" for p in state.rglob("*") if p.is_file())
