"""What no tool call may change in the workspace: what runs code later or redirects the key.

Configuration: a .env file (AGENT_BASE_URL sends the key to whatever server it names on the next
run), a .envrc (direnv runs it), and anything git obeys: a .git folder or file, and a folder that
git takes for a repository (its config's core.fsmonitor runs a command whenever anyone runs git
there). And every file git's configuration reads and every workspace path one of its values names
(git_named()). write_file refuses all of these (workspace.refuse_protected()); the sandbox makes
what it finds read-only before a command and moves aside what the command made (sandbox.py). The
agent's own code is not in the workspace at all (realworld/own.py).

What a command leaves is evidence it controls: nothing here deletes, nothing follows a path or a
link a command wrote, and a file a command could have made is read with bounds (read_bounded()).
"""

import contextlib
import os
import re
import secrets
import select
import shlex
import stat
import subprocess
import time
from datetime import datetime, timezone
from pathlib import Path

MAX_FOLDERS = 10_000  # folders a scan of the workspace reads at the most
MAX_ENTRIES = 1_000_000  # entries (files, folders, links) a scan reads at the most
CONFIG_BYTES = 64 * 1024  # of a repository's config, read at the most
MOVED = ".agent-moved"  # where what a command planted is moved to, inside the workspace


def is_configuration(relative: Path) -> bool:
    """Whether a path inside the workspace is a .env file or inside a .git folder."""
    # .GIT is .git on a case-insensitive file system, and Windows drops a name's trailing
    # dots and spaces.
    parts = [part.lower().rstrip(". ") for part in relative.parts] or [""]
    return ".git" in parts or is_env_file(parts[-1])


def is_env_file(name: str) -> bool:
    """Whether a file name is .env, .env.something or .envrc."""
    name = name.lower().rstrip(". ")
    return name in (".env", ".envrc") or name.startswith(".env.")


def is_git_dir(names: set[str]) -> bool:
    """Whether a folder holding these names (lower case) is what git takes for a repository: HEAD,
    objects/ and refs/ side by side, or HEAD and a commondir file that names them (git's setup.c,
    is_git_directory())."""
    return {"head", "objects", "refs"} <= names or {"head", "commondir"} <= names


def makes_repository(root: Path, target: Path) -> bool:
    """Whether writing target would give a folder of the workspace what git takes for a
    repository. Git discovers such a folder as a bare repository and obeys its config."""
    child = target
    for folder in [target.parent, *target.parent.parents]:
        if not folder.is_relative_to(root):
            return False
        names = {entry.name.lower() for entry in folder.iterdir()} if folder.is_dir() else set()
        if is_git_dir(names | {child.name.lower()}):
            return True
        child = folder
    return False


GIT_DIR_PIECES = ("head", "objects", "refs", "commondir", "config", "hooks")


def configuration_in(root: Path, limit: int = MAX_FOLDERS) -> tuple[dict, dict, bool]:
    """Every piece of configuration in the workspace, path: identity (device, inode): each .git
    folder or file; the pieces of each folder git takes for a repository (HEAD, objects/, refs/,
    commondir, config, hooks/: not the folder, which may hold the person's files), the workspace
    itself included; each .env or .envrc file. Second: every entry anywhere that bears one of
    those names, a piece or not, path: identity: the record that after a command tells what the
    person had from what the command made. Third: whether the scan read the whole workspace (at
    most limit folders and MAX_ENTRIES entries; a folder it cannot list counts as not read, and
    the scan goes on past it). Symlinks are not followed, and no file is read."""
    found, seen, todo, complete, entries_read = {}, {}, [root], True, 0
    folders = 1
    while todo:
        folder = todo.pop()
        named, subfolders = [], []
        try:
            for entry in listing(folder):
                entries_read += 1
                lower = entry.name.lower()
                if lower in GIT_DIR_PIECES or lower == ".git" or is_env(entry):
                    named.append(entry)
                elif entry.is_dir(follow_symlinks=False):
                    subfolders.append(Path(entry.path))
        except FileNotFoundError:
            continue
        except OSError:  # unlistable, or its path too long: git can still enter it by name
            complete = False
            continue
        seen |= identities([Path(e.path) for e in named])
        names = {e.name.lower() for e in named}
        pieces = [Path(e.path) for e in named if e.name.lower() in GIT_DIR_PIECES]
        if is_git_dir(names):  # its other folders are read too: a .git or a .env may be there
            found |= identities(pieces)
        found |= identities([Path(e.path) for e in named if e.name.lower() == ".git" or is_env(e)])
        subfolders += [p for p in pieces if p not in found and p.is_dir() and not p.is_symlink()]
        folders += len(subfolders)
        if folders > limit or entries_read > MAX_ENTRIES:
            return found, seen, False
        todo += subfolders
    return found, seen, complete


def listing(folder: Path):
    """The entries of a folder, one at a time (a folder of a million files holds no memory); where
    a command took the owner's right to list it (chmod 300), that right is given back first."""
    try:
        entries = os.scandir(folder)
    except PermissionError:
        status = os.lstat(folder)
        if stat.S_ISLNK(status.st_mode):
            raise
        os.chmod(folder, stat.S_IMODE(status.st_mode) | stat.S_IRWXU)
        try:
            entries = os.scandir(folder)
        finally:  # an open folder stays readable: its mode is the person's again at once
            os.chmod(folder, stat.S_IMODE(status.st_mode))
    with entries:
        yield from entries


def is_env(entry: os.DirEntry) -> bool:
    """Whether a folder's entry is a .env or .envrc file (or a link in the place of one)."""
    return is_env_file(entry.name) and not entry.is_dir(follow_symlinks=False)


def identities(paths: list[Path]) -> dict[Path, tuple]:
    """Each path that exists with its identity (identity()), the link itself for a symlink."""
    found = {}
    for path in paths:
        try:
            found[path] = identity(path)
        except OSError:
            continue
    return found


def identity(path: Path) -> tuple:
    """What an entry is, never when it changed: (device, inode, kind), and a link's target. A
    write into a folder or a file changes its time of change, not what it is; a file made where
    one was deleted may get the freed inode back, and is then taken for the one before: it can
    complete no repository (every piece of one is read-only) and costs the person nothing."""
    status = path.lstat()
    target = os.readlink(path) if stat.S_ISLNK(status.st_mode) else None
    return (status.st_dev, status.st_ino, stat.S_IFMT(status.st_mode), target)


def moved_aside(root: Path) -> list[Path]:
    """The folders at the top of the workspace that things are moved aside into (.agent-moved,
    .agent-moved-TIME), real folders only: what lies in them was made by a command, never the
    person's, and they stay read-only in the sandbox."""
    found = []
    with contextlib.suppress(OSError):
        for entry in os.scandir(root):
            if entry.name.startswith(MOVED) and entry.is_dir(follow_symlinks=False):
                found.append(Path(entry.path))
    return found


def made_by_command(before: dict, after: dict) -> list[Path]:
    """What a command made, of the pieces after it (path: identity): each one that was not at its
    path, as that file or folder, in the record taken before the command (before: path:
    identity); the outermost only, since moving a folder moves what it holds."""
    made = sorted(path for path, identity in after.items() if before.get(path) != identity)
    return [p for p in made if not any(p != q and p.is_relative_to(q) for q in made)]


# --- What git's configuration names: every file it reads, every path a value names --------------
# git-config(1): the system, global (GIT_CONFIG_GLOBAL, else $XDG_CONFIG_HOME/git/config and
# ~/.gitconfig), local and worktree files, GIT_CONFIG_COUNT/KEY_n/VALUE_n, and every include.path
# and includeIf.<condition>.path, relative to the file that includes it. git itself is asked
# (config --list --show-origin) rather than its files re-read, and an include whose condition is
# false now (onbranch:, gitdir:, hasconfig:) is followed too: it may hold later.

GIT_OUTPUT = 1024 * 1024  # of what git says about one place's configuration, read at the most
GIT_SECONDS = 10  # for git to answer about the whole workspace, every repository in it
MAX_CONFIG_FILES = 100  # included files followed at the most
MAX_PLACES = 256  # repositories asked at the most: one git each, about 3 ms, before every command
MAX_NAMED = 10_000  # paths the configuration names, judged at the most
REPOSITORY_ENV = ("GIT_DIR", "GIT_WORK_TREE", "GIT_COMMON_DIR", "GIT_CEILING_DIRECTORIES")
WORD_ENDS = re.compile(r"[\s'\"=:;,|&()<>`$!]+")  # where a path in a shell command ends
PATH_ENDS = re.compile(r"[=:;,|&()<>`!]+")  # where one ends inside a word a shell has read


def git_named(git: str, root: Path, found: dict, planted: list[Path]) -> tuple[dict, bool]:
    """Every path inside the workspace that git's configuration names, for each repository found
    and the workspace itself: each config file git reads, and each path a value names, resolved
    as git resolves it (against the work tree, a bare repository's folder, or the including
    file's folder; ~ expanded). Path: identities of it and the folders above it (watch()). Not the
    workspace, a folder holding a repository, or what is already read-only. Second: whether git
    answered in full (in time, within bounds)."""
    places, kept = {root: None}, []
    for piece in found:
        if any(piece.is_relative_to(p) for p in planted):
            continue  # a config a command planted: not followed
        # a .git or a HEAD of the person's that is a link is obeyed as git obeys it (stat(2)
        # follows it; gitrepository-layout(5): HEAD "can also be a symbolic link"): asked too
        lower = piece.name.lower()
        if lower == ".git" or lower == "head":  # a work tree, or a bare repository's own folder
            places[piece.parent] = piece.parent
            if lower == ".git":
                kept += submodules(piece, piece.parent, MAX_PLACES + 1 - len(kept))
    if len(places) + len(kept) > MAX_PLACES:
        return {}, False
    held = {p for place in places for p in (place, *place.parents)}  # a repository's folders
    named, complete, deadline = set(), True, time.monotonic() + GIT_SECONDS
    for place, top in places.items():
        # where git resolves relative paths
        base = top or repository_top(git, place, deadline) or place
        entries, answered = git_config(git, place, base, ["--list"], deadline)
        paths, followed = names_in(git, entries, base, deadline)
        complete &= answered and followed
        named |= paths | config_files(base)
    for git_dir, tree in kept:  # asked as its own git dir; relative values from its work tree
        entries, answered = git_config(git, git_dir, git_dir, ["--list"], deadline, True)
        trees = [v for origin, key, v in entries if key == "core.worktree"]
        base = Path(os.path.normpath(git_dir / trees[-1])) if trees else tree
        paths, followed = names_in(git, entries, base, deadline)
        complete &= answered and followed
        named |= paths
    if len(named) > 10 * MAX_NAMED:
        return {}, False
    named |= {Path(os.path.realpath(p)) for p in named}  # a link leads on, from outside too
    inside = {p for p in named if p.is_relative_to(root) and p not in held}
    if len(inside) > MAX_NAMED:
        return {}, False
    judged = {}
    for path in inside:
        if not any(q in found or q in planted for q in (path, *path.parents)):
            judged[path] = watch(root, path)
    return judged, complete


def submodules(git_dir: Path, tree: Path, limit: int) -> list[tuple[Path, Path]]:
    """The repositories git keeps for submodules in the git dir of the work tree tree, at most
    limit: modules/<name>/ (a name may hold slashes) and theirs in turn, obeyed again whenever one
    is checked out, even where none is now (gitsubmodules(7), gitrepository-layout(5) "modules").
    Each with the work tree its name gives (where a deinit left no core.worktree). At most
    MAX_FOLDERS folders read; links not followed."""
    found, todo, read = [], [(git_dir / "modules", tree)], 0
    while todo and read < MAX_FOLDERS and len(found) < limit:
        (folder, at), read = todo.pop(), read + 1
        try:
            with os.scandir(folder) as listed:
                entries = [(e.name, e.is_dir(follow_symlinks=False)) for e in listed]
        except OSError:
            continue
        if is_git_dir({name.lower() for name, _ in entries}):
            found.append((folder, at))
            todo.append((folder / "modules", at))
        else:
            todo += [(folder / name, at / name) for name, is_folder in entries if is_folder]
    return found


def config_files(base: Path) -> set[Path]:
    """The global and system config files git reads where they exist (git-config(1) FILES), made
    or not: a command that makes one in the workspace would set any value."""
    home, env = Path(os.path.expanduser("~")), os.environ
    xdg = Path(env.get("XDG_CONFIG_HOME") or home / ".config", "git", "config")
    files = [env.get("GIT_CONFIG_GLOBAL") or xdg, home / ".gitconfig", env.get("GIT_CONFIG_SYSTEM")]
    return {Path(os.path.normpath(base / os.path.expanduser(f))) for f in files if f}


def names_in(git: str, entries: list, base: Path, deadline: float) -> tuple[set[Path], bool]:
    """The paths that config entries (origin, key, value) name, with the included files followed
    (at most MAX_CONFIG_FILES, each asked of git); base: where git resolves a relative value.
    Second: whether git answered about each in full."""
    named, read, todo, complete = set(), set(), list(entries), True
    while todo:
        origin, key, value = todo.pop()
        folders = [base] if origin is None else [base, origin.parent]
        if origin is not None:
            named.add(origin)
        paths = {
            r for w in words(value) for f in folders for r in resolved(f / os.path.expanduser(w))
        }
        named |= paths
        if key.startswith(("include.", "includeif.")) and key.endswith(".path"):
            for path in paths - read:
                read.add(path)
                if len(read) <= MAX_CONFIG_FILES and path.is_file():
                    asked = ["--file", str(path), "--includes", "--list"]
                    more, answered = git_config(git, path.parent, path.parent, asked, deadline)
                    todo += more
                    complete &= answered
    return named, complete


def resolved(path: Path) -> set[Path]:
    """Where the system takes path: a .. after a link leaves where the link leads, not the link's
    folder (path_resolution(7)), so a path with a .. is resolved through the links on its way,
    and kept as written too, to watch a link on its way that a command could turn."""
    return (
        {Path(os.path.realpath(path)), path}
        if ".." in path.parts
        else {Path(os.path.normpath(path))}
    )


def words(value: str) -> set[str]:
    """The value whole, and each piece of it a shell or git would take for a path (a word of a
    command, the part after an = or a :), split as text and as a shell reads it; ~ stays, for
    expanduser."""
    found = {value.strip(), *WORD_ENDS.split(value)}
    for word in shell_words(value):
        found |= {word, *PATH_ENDS.split(word)}
    return found - {""}


def shell_words(value: str) -> list[str]:
    """The words of a value as sh reads a command (git runs a command value, an alias's after its
    "!", with sh -c): quotes and backslashes taken away, so 'my tools/x.sh' is one path, and
    $VARIABLES expanded from this environment (POSIX sh 2.2 Quoting, 2.6.2 Parameter
    Expansion). [] where a quote is left open: sh would refuse it too."""
    try:
        return [os.path.expandvars(word) for word in shlex.split(value.lstrip("!"))]
    except ValueError:
        return []


def git_config(
    git: str, place: Path, base: Path, args: list[str], deadline: float, git_dir: bool = False
) -> tuple[list, bool]:
    """git config ARGS --show-origin -z, run in place, as entries (origin file, relative to base
    where relative, or None; key; value); and whether it answered in full, by the deadline and
    within GIT_OUTPUT, with no terminal; the repository is the one found there (GIT_DIR and the
    like unset), the system config read."""
    env = {k: v for k, v in os.environ.items() if k not in REPOSITORY_ENV}
    env.pop("GIT_CONFIG_NOSYSTEM", None)
    own = ["--git-dir=."] if git_dir else []  # a git dir of its own, whatever safe.bareRepository
    argv = [git, "-C", str(place), *own, "config", *args, "--show-origin", "-z"]
    answer, complete = bounded_output(argv, env, deadline)
    fields = answer.decode("utf-8", errors="surrogateescape").split("\0")
    entries = []
    for origin, pair in zip(fields[0::2], fields[1::2], strict=False):
        key, _newline, value = pair.partition("\n")
        file = Path(base, origin[5:]) if origin.startswith("file:") else None
        entries.append((file and Path(os.path.normpath(file)), key.lower(), value))
    return entries, complete


def repository_top(git: str, place: Path, deadline: float) -> Path | None:
    """The top of the work tree that holds place, outside the workspace perhaps; None if none."""
    argv = [git, "-C", str(place), "rev-parse", "--show-toplevel"]
    answer, _ = bounded_output(argv, None, deadline)
    top = answer.decode("utf-8", errors="surrogateescape").strip()
    return Path(top) if top else None


def bounded_output(argv: list[str], env: dict | None, deadline: float) -> tuple[bytes, bool]:
    """What argv prints, at most GIT_OUTPUT bytes, by the deadline (time.monotonic()); and whether
    it ended on its own, within both (b"" where it failed or is not there)."""
    try:
        process = subprocess.Popen(
            argv,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            env=env,
        )
    except OSError:
        return b"", True
    out = bytearray()
    waiting = select.poll()
    waiting.register(process.stdout, select.POLLIN)
    with process:
        while len(out) <= GIT_OUTPUT:
            left = deadline - time.monotonic()
            if left <= 0 or not waiting.poll(left * 1000):
                break
            chunk = os.read(process.stdout.fileno(), 65536)
            if not chunk:
                with contextlib.suppress(subprocess.TimeoutExpired):
                    process.wait(max(0.0, deadline - time.monotonic()))
                    return (bytes(out) if process.returncode == 0 else b""), True
                break
            out += chunk
        process.kill()
    return b"", False


def watch(root: Path, path: Path) -> dict:
    """The identities of path and of each folder above it inside root, down to the first that is
    missing or a link: what stood there before a command (made_there())."""
    seen, at = {}, root
    for part in path.relative_to(root).parts:
        at = at / part
        try:
            seen[at] = identity(at)
        except OSError:
            break
        if seen[at][2] == stat.S_IFLNK:
            break
    return seen


def made_there(root: Path, path: Path, before: dict) -> Path | None:
    """The outermost entry on the way to path that a command made: one that stands there now and
    did not then, as that same entry (before: watch(), taken before the command)."""
    at = root
    for part in path.relative_to(root).parts:
        at = at / part
        try:
            now = identity(at)
        except OSError:
            return None
        if before.get(at) != now:
            return at
        if now[2] == stat.S_IFLNK:
            return None
    return None


def is_real_folder(path: Path, root: Path) -> bool:
    """Whether path is a folder reached from root without passing a symlink (walk())."""
    fd = walk(os.open(root, os.O_RDONLY | os.O_DIRECTORY), list(path.relative_to(root).parts))
    if fd is not None:
        os.close(fd)
    return fd is not None


def read_bounded(path: Path, limit: int = CONFIG_BYTES) -> str:
    """The text of a file a command could have made, read so that it cannot hang or fill memory:
    a regular file only (not a FIFO, a device or a socket), never through a symlink, opened
    non-blocking, at most limit bytes. "" for anything else."""
    flags = os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0)
    try:
        fd = os.open(path, flags)
    except OSError:
        return ""
    with os.fdopen(fd, "rb") as f:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return ""
        return f.read(limit).decode("utf-8", errors="replace")


# --- Moving aside: what a command planted, made harmless and kept ---------------------------------


def move_aside(root: Path, paths: list[Path]) -> tuple[Path | None, list[Path]]:
    """Move each path (inside the workspace root) into one new folder, .agent-moved/TIME/, under
    its own relative path: a rename the person can undo with mv, never a deletion. Every step is
    taken from an open folder without following symlinks, so a link a command left cannot lead a
    move out of the workspace. The folder it used (None if none), and what could not be moved."""
    if not paths:
        return None, []
    try:
        top, where = new_folder(root)
    except OSError:
        return None, paths
    failed = []
    try:
        for path in paths:
            if not rename_into(root, top, path):
                failed.append(path)
    finally:
        os.close(top)
    return where, failed


def new_folder(root: Path) -> tuple[int, Path]:
    """A folder of the workspace that nothing else has held, opened: .agent-moved/TIME-RANDOM; or,
    where a command left something else as .agent-moved, .agent-moved-TIME-RANDOM."""
    # the time, and a random part a command cannot guess and take first
    stamp = f"{datetime.now(timezone.utc):%Y%m%dT%H%M%SZ}-{secrets.token_hex(4)}"
    base = os.open(root, os.O_RDONLY | os.O_DIRECTORY)
    try:
        with contextlib.suppress(FileExistsError):
            os.mkdir(MOVED, 0o700, dir_fd=base)
        try:
            folder = os.open(MOVED, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW, dir_fd=base)
            name, parent = f"{MOVED}/", folder
        except OSError:  # a link or a file a command put there
            name, parent, folder = f"{MOVED}-", base, None
        try:
            for tries in range(1, 100):
                made = stamp if tries == 1 else f"{stamp}{secrets.token_hex(4)}"
                try:
                    os.mkdir(made, 0o700, dir_fd=parent)
                except FileExistsError:
                    continue
                return os.open(made, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW, dir_fd=parent), (
                    root / f"{name}{made}"
                )
            raise FileExistsError(name)
        finally:
            if folder is not None:
                os.close(folder)
    finally:
        os.close(base)


def rename_into(root: Path, top: int, path: Path) -> bool:
    """Rename path (inside root) to the same relative path inside the open folder top; whether it
    moved. Where a command took the owner's write right from its folder, it is given back for the
    rename and taken again."""
    *parents, name = path.relative_to(root).parts
    source = walk(os.open(root, os.O_RDONLY | os.O_DIRECTORY), parents, make=False)
    if source is None:
        return False
    target = walk(os.dup(top), parents, make=True)
    try:
        if target is None:
            return False
        try:
            os.rename(name, name, src_dir_fd=source, dst_dir_fd=target)
        except PermissionError:
            mode = stat.S_IMODE(os.fstat(source).st_mode)
            by_fd = f"/proc/self/fd/{source}" if FOLDER != os.O_RDONLY else source
            os.chmod(by_fd, mode | stat.S_IRWXU)
            try:
                os.rename(name, name, src_dir_fd=source, dst_dir_fd=target)
            finally:
                os.chmod(by_fd, mode)
        return True
    except OSError:
        return False
    finally:
        os.close(source)
        if target is not None:
            os.close(target)


def walk(fd: int, parts: list[str], make: bool = False) -> int | None:
    """The folder parts below the open folder fd (which it closes), opened one at a time without
    following a symlink, made where missing if make; None if one is not a folder."""
    try:
        for part in parts:
            if make:
                with contextlib.suppress(FileExistsError):
                    os.mkdir(part, 0o700, dir_fd=fd)
            # O_PATH: a folder a command left with no read right (chmod 100) is still walked
            inner = os.open(part, FOLDER | os.O_DIRECTORY | os.O_NOFOLLOW, dir_fd=fd)
            os.close(fd)
            fd = inner
    except OSError:
        os.close(fd)
        return None
    return fd


FOLDER = getattr(os, "O_PATH", os.O_RDONLY)
