"""Every git directory in a workspace, kept out of sandboxed commands' hands.

Git runs what a repository's files say (`core.fsmonitor`, `core.pager`, hooks) whenever
anyone uses the repository, and it finds one through any entry named `.git` (a
directory, or a file whose `gitdir:` line points anywhere) and in any directory that
holds `HEAD` beside `objects`, `refs` or `commondir` (a submodule's git directory, a
bare repository). So, around each command:

- `scan` finds every such entry in the workspace, at any depth, never through a
  symlink; each is mounted read-only for the command, and a mount point cannot be
  changed, removed or renamed from inside. A `.git` that is a symlink cannot be
  mounted over, so the command is refused until it is replaced.
- `disable_new` looks again once the command's last process is gone: a `.git` entry
  that was not there before (made, renamed into place, linked) is renamed
  `.git.disabled-by-tether-<hex>`, and a git directory that was not there before loses
  its `HEAD` (renamed the same way), so git no longer takes it for a repository. What
  was renamed is reported with the command's result.

Names are matched in any case, for file systems that fold case. Any depth is searched,
with one directory open at a time.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import stat
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from tether.backends.hostfs import Root
from tether.backends.paths import join

__all__ = ["GitScan", "disable_new", "notes", "scan"]

_MARKS = frozenset({"objects", "refs", "commondir"})
_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
DISABLED = ".disabled-by-tether-"
_LISTED = 20  # paths named in a note at most
MOVED = "the rest of the workspace (a directory moved while it was searched)"

Identity = tuple[int, int]


@dataclass(slots=True)
class GitScan:
    """What a scan found: what to keep read-only (path: identity, the device and inode
    it names), what cannot be, what could not be searched; and what `disable_new` renamed."""

    paths: dict[str, Identity] = field(default_factory=dict)
    unprotectable: list[str] = field(default_factory=list)
    unsearched: list[str] = field(default_factory=list)
    renamed: list[tuple[str, str]] = field(default_factory=list)

    @property
    def identities(self) -> set[Identity]:
        return set(self.paths.values())


def is_git_directory(names: Iterable[str]) -> bool:
    """Whether a directory holding `names` is a git directory to git (`HEAD` beside
    `objects`, `refs` or `commondir`, in any case)."""
    folded = {name.casefold() for name in names}
    return "head" in folded and not _MARKS.isdisjoint(folded)


def scan(host: Root, skip: frozenset[str]) -> GitScan:
    """Every `.git` entry and git directory below the root (not inside one another), and
    every other name of a file in them (a hard link from elsewhere in the workspace)."""
    found = GitScan()
    linked: dict[Identity, list[str]] = {}  # files with more than one name, by identity

    def visit(path: str, fd: int, entries: list[Entry]) -> list[Entry] | None:
        for name, is_dir in entries:
            if is_dir and name.casefold() != ".git":
                continue
            with contextlib.suppress(OSError):  # gone meanwhile: nothing to protect
                st = os.stat(name, dir_fd=fd, follow_symlinks=False)
                if name.casefold() == ".git":
                    if stat.S_ISLNK(st.st_mode):
                        found.unprotectable.append(f"{join(path, name)} is a symbolic link")
                    found.paths[join(path, name)] = identity(st)
                if stat.S_ISREG(st.st_mode) and st.st_nlink > 1:
                    linked.setdefault(identity(st), []).append(join(path, name))
        if not _is_git(path, entries):
            return entries
        if path == "/":
            found.unprotectable.append("the workspace itself is a git directory")
            return entries
        found.paths[path] = identity(os.fstat(fd))
        return None  # mounted read-only as a whole

    _walk(host, "/", skip, found.unsearched, visit)
    if linked:
        _add_other_names(host, found, linked)
    return found


def _add_other_names(host: Root, found: GitScan, linked: dict[Identity, list[str]]) -> None:
    """Keep read-only every name in the workspace of a file in a git directory: a
    write through a hard link elsewhere would change the file git reads."""
    inside: set[Identity] = {i for p, i in found.paths.items() if i in linked}  # .git files

    def visit(path: str, fd: int, entries: list[Entry]) -> list[Entry]:
        for name, is_dir in entries:
            if not is_dir:
                with contextlib.suppress(OSError):
                    st = os.stat(name, dir_fd=fd, follow_symlinks=False)
                    if identity(st) in linked:
                        inside.add(identity(st))
        return entries

    for path in list(found.paths):
        with contextlib.suppress(NotADirectoryError):  # a .git file: looked at above
            _walk(host, path, frozenset(), found.unsearched, visit)
    for shared in inside:
        for path in linked[shared]:
            found.paths.setdefault(path, shared)


def disable_new(host: Root, skip: frozenset[str], known: GitScan) -> GitScan:
    """Rename what makes a git directory of anything `known` does not hold."""
    done = GitScan()
    known_identities = known.identities

    def visit(path: str, fd: int, entries: list[Entry]) -> list[Entry] | None:
        if identity(os.fstat(fd)) in known_identities:
            return None  # it was read-only to the command
        git_directory = is_git_directory(name for name, _ in entries)
        kept = []
        for name, is_dir in entries:
            disable = (git_directory and name.casefold() == "head") or _new_git_entry(
                fd, name, known_identities
            )
            kept.append((_disable(fd, path, name, done) if disable else name, is_dir))
        return kept  # what is new may hold more

    _walk(host, "/", skip, done.unsearched, visit)
    return done


def notes(done: GitScan) -> list[str]:
    """What the model and the person are told of what `disable_new` did."""
    notes = []
    if done.renamed:
        renamed = ", ".join(
            f"{_shown(old)} -> {_shown(new)}" for old, new in done.renamed[:_LISTED]
        )
        if len(done.renamed) > _LISTED:
            renamed += f" and {len(done.renamed) - _LISTED} more"
        notes.append(
            "tether renamed what git would have taken for a repository, made while the "
            f"command ran: {renamed}. Git runs what a repository's config and hooks say, "
            "so one made in the sandbox is not left for git on the host; look at it "
            "before renaming it back"
        )
    if done.unsearched:
        notes.append(
            "tether could not search all of the workspace for git directories the command "
            f"made: {'; '.join(_shown(path) for path in done.unsearched[:_LISTED])}"
        )
    return notes


def _shown(path: str) -> str:
    """A path short enough to read (the start and the end of a long one)."""
    return path if len(path) <= 200 else f"{path[:60]}…{path[-120:]}"


def _new_git_entry(fd: int, name: str, known: set[Identity]) -> bool:
    if name.casefold() != ".git":
        return False
    try:
        return identity(os.stat(name, dir_fd=fd, follow_symlinks=False)) not in known
    except OSError:
        return False  # gone


def _is_git(path: str, entries: list[Entry]) -> bool:
    name = path.rsplit("/", 1)[-1]
    return name.casefold() == ".git" or is_git_directory([name for name, _ in entries])


def _disable(fd: int, directory: str, name: str, done: GitScan) -> str:
    """Rename `name` in `fd` (the directory at `directory`); its name now."""
    new = f"{name}{DISABLED}{secrets.token_hex(4)}"
    try:
        os.rename(name, new, src_dir_fd=fd, dst_dir_fd=fd)
    except OSError as exc:
        done.unsearched.append(f"{join(directory, name)} could not be renamed ({exc.strerror})")
        return name
    done.renamed.append((join(directory, name), join(directory, new)))
    return new


Entry = tuple[str, bool]  # a name in a directory, and whether it is a directory
Visit = Callable[[str, int, list[Entry]], "list[Entry] | None"]


class _Moved(Exception):
    """A directory moved while the walk was below it."""


def _walk(host: Root, top: str, skip: frozenset[str], unsearched: list[str], visit: Visit) -> None:
    """Call `visit(path, fd, entries)` for `top` and each directory below it, depth
    first and iteratively, never through a symlink; `visit` says which entries to go on
    with (None: the directory is not entered), and those in `skip` are not entered.
    One directory is open at a time, whatever the depth: the walk climbs back with `..`
    and checks it lands where it came from. What cannot be listed is added to
    `unsearched`."""
    current = host.open_dir(top)
    try:
        entries = visit(top, current, _list(current, top, unsearched))
        if entries is None:
            return
        stack = [(top, identity(os.fstat(current)), iter(entries))]
        while stack:
            path, _, pending = stack[-1]
            item = next(pending, None)
            if item is None:
                stack.pop()
                if stack:
                    current = _climb(current, stack[-1][1])
                continue
            name, is_dir = item
            child = join(path, name)
            if not is_dir or child in skip:
                continue
            below = _open_below(current, name, child, unsearched)
            if below is None:
                continue
            entries = visit(child, below, _list(below, child, unsearched))
            if entries is None:
                os.close(below)
                continue
            os.close(current)
            current = below
            stack.append((child, identity(os.fstat(below)), iter(entries)))
    except _Moved:
        unsearched.append(MOVED)
    finally:
        os.close(current)


def _climb(current: int, expected: Identity) -> int:
    """The parent of `current`, which must be the directory `expected`."""
    parent = os.open("..", _DIR_FLAGS, dir_fd=current)
    if identity(os.fstat(parent)) != expected:
        os.close(parent)
        raise _Moved
    os.close(current)
    return parent


def _open_below(fd: int, name: str, path: str, unsearched: list[str]) -> int | None:
    """The directory `name` in `fd`, opened to be listed. One a command made unreadable
    to this (non-root) process, which then owns it, is made readable again first."""
    for attempt in range(2):
        try:
            return os.open(name, _DIR_FLAGS, dir_fd=fd)
        except PermissionError as exc:
            if attempt or not _make_readable(fd, name):
                unsearched.append(f"{path} cannot be read ({exc.strerror})")
                return None
        except OSError as exc:
            unsearched.append(f"{path} cannot be opened ({exc.strerror})")
            return None
    return None


def _make_readable(fd: int, name: str) -> bool:
    try:
        handle = os.open(name, os.O_PATH | os.O_NOFOLLOW | os.O_DIRECTORY | os.O_CLOEXEC, dir_fd=fd)
    except OSError:
        return False
    try:
        st = os.fstat(handle)
        if st.st_uid != os.geteuid():
            return False
        os.chmod(f"/proc/self/fd/{handle}", stat.S_IMODE(st.st_mode) | 0o700)
        return True
    except OSError:
        return False
    finally:
        os.close(handle)


def _list(fd: int, path: str, unsearched: list[str]) -> list[Entry]:
    """The names in directory `fd`, each with whether it is a directory (asked now: a
    DirEntry asked later would look in whatever that fd number is by then)."""
    try:
        with os.scandir(fd) as entries:
            return [(entry.name, entry.is_dir(follow_symlinks=False)) for entry in entries]
    except OSError as exc:
        unsearched.append(f"{path} cannot be listed ({exc.strerror})")
        return []


def identity(st: os.stat_result) -> Identity:
    """What names a file whatever its path: its device and inode."""
    return (st.st_dev, st.st_ino)
