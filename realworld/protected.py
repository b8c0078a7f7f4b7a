"""What no tool call may change in the workspace: what runs code later or redirects the key.

Configuration: a .env file (AGENT_BASE_URL sends the key to whatever server it names on the next
run), a .envrc (direnv runs it), and anything git obeys: a .git folder or file, and a folder that
git takes for a repository (its config's core.fsmonitor runs a command whenever anyone runs git
there). write_file refuses to write it (tools.py); the sandbox makes what it finds read-only before
a command and moves aside what the command made (sandbox.py). The agent's own code is not in the
workspace at all (realworld/own.py).

What a command leaves is evidence it controls: nothing here deletes, nothing follows a path or a
link a command wrote, and a file a command could have made is read with bounds (read_bounded()).
"""

import contextlib
import os
import secrets
import stat
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


def hooks_folders(root: Path, found: dict, planted: list[Path]) -> list[Path]:
    """The folders core.hooksPath names in the configs of the repositories found (husky's
    .husky/), where they are folders strictly inside the workspace and hold no repository's work
    tree: git runs the hooks in them. Read before a command, to keep them read-only; never used
    to judge what a command made, and never read from a link or from what was moved aside
    (planted). A simple read of the key; include.path is not followed."""
    folders = []
    for piece in found:
        if piece.is_symlink() or any(piece.is_relative_to(p) for p in planted):
            continue  # a link, or a config a command planted: not followed
        # a .git folder's config, or the config piece of a folder git takes for a repository
        config_file = piece / "config" if piece.name.lower() == ".git" else piece
        if config_file.name.lower() != "config":
            continue
        worktree = piece.parent  # where git resolves a relative hooksPath (a bare one: itself)
        for line in read_bounded(config_file).splitlines()[:10_000]:
            key, equals, value = line.partition("=")
            if not equals or key.strip().lower() != "hookspath":
                continue
            folder = Path(os.path.normpath(worktree / value.strip().strip('"')))
            if (
                folder != root
                and folder.is_relative_to(root)
                and not worktree.is_relative_to(folder)
                and is_real_folder(folder, root)
            ):
                folders.append(folder)
    return folders


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
