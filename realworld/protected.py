"""What no tool call may change in the workspace: configuration that runs code or redirects the key.

A .env file (AGENT_BASE_URL sends the key to whatever server it names on the next run), a .envrc
(direnv runs it), and anything git obeys: a .git folder or file, and a folder that git takes for a
repository (its config's core.fsmonitor runs a command whenever anyone runs git there). write_file
refuses to write them (tools.py); the sandbox makes those it finds read-only and removes those a
command makes (sandbox.py).
"""

import contextlib
import os
import shutil
import sys
from pathlib import Path

MAX_FOLDERS = 10_000  # folders a scan of the workspace reads at the most


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


def configuration_in(root: Path, limit: int = MAX_FOLDERS) -> tuple[dict[Path, tuple], set, bool]:
    """Every piece of configuration in the workspace, each with its identity (device, inode): each
    .git folder or file; the pieces of each folder git takes for a repository (HEAD, objects/,
    refs/, commondir, config, hooks/: not the folder, which may hold the person's files), the
    workspace itself included; each .env or .envrc file; and a core.hooksPath inside the
    workspace that a repository's config names. Symlinks are not followed. Second: the identity
    of every HEAD, objects, refs and commondir anywhere, a repository's or not, so that a piece
    the person had is told from one a command made. Third: whether the scan read the whole
    workspace (at most limit folders; a folder it cannot list counts as not read)."""
    found, seen, todo, read = {}, set(), [root], 0
    while todo:
        folder = todo.pop()
        read += 1
        try:
            entries = list(os.scandir(folder))
        except FileNotFoundError:
            continue
        except OSError:  # unlistable (chmod 300), yet git can still enter it by name
            return found, seen, False
        if read > limit:
            return found, seen, False
        names = {entry.name.lower() for entry in entries}
        shape = [Path(e.path) for e in entries if e.name.lower() in GIT_DIR_PIECES[:4]]
        seen |= set(identities(shape).values())
        if is_git_dir(names):
            pieces = [e for e in entries if e.name.lower() in GIT_DIR_PIECES]
            found |= identities([Path(e.path) for e in pieces])
            found |= identities(hooks_path(root, Path(folder), Path(folder)))
            if folder != root:
                continue
        for entry in entries:
            path = Path(entry.path)
            if entry.name.lower() == ".git":
                found |= identities([path, *hooks_path(root, path, Path(folder))])
            elif is_env_file(entry.name) and not entry.is_dir(follow_symlinks=False):
                found |= identities([path])
            elif entry.is_dir(follow_symlinks=False) and path not in found:
                todo.append(path)
    return found, seen, True


def identities(paths: list[Path]) -> dict[Path, tuple]:
    """Each path that exists with its (device, inode), the link itself for a symlink: a piece that
    was moved keeps it, one that was made has a new one."""
    found = {}
    for path in paths:
        try:
            status = path.lstat()
        except OSError:
            continue
        found[path] = (status.st_dev, status.st_ino)
    return found


def remove(path: Path) -> bool:
    """Remove a file, a link or a whole folder, giving back the owner's write and search rights
    where a mode takes them away (chmod 555); whether it is gone."""

    def writable(function, failed, _error):
        with contextlib.suppress(OSError):
            os.chmod(os.path.dirname(failed), 0o700)
            if os.path.isdir(failed) and not os.path.islink(failed):
                os.chmod(failed, 0o700)
        function(failed)

    handler = {"onexc" if sys.version_info >= (3, 12) else "onerror": writable}
    with contextlib.suppress(OSError):
        if not os.access(path.parent, os.W_OK | os.X_OK):
            os.chmod(path.parent, 0o700)
        if path.is_dir() and not path.is_symlink():
            os.chmod(path, 0o700)
            shutil.rmtree(path, **handler)
        else:
            path.unlink()
    return not os.path.lexists(path)


def hooks_path(root: Path, git_dir: Path, worktree: Path) -> list[Path]:
    """The folder core.hooksPath names in a repository's config, where it lies inside the workspace
    (husky's .husky/): git runs the hooks in it. A simple read of the key; include.path is not
    followed."""
    try:
        lines = (git_dir / "config").read_text(encoding="utf-8", errors="replace").splitlines()
    except OSError:
        return []
    found = []
    for line in lines[:10_000]:
        key, equals, value = line.partition("=")
        if equals and key.strip().lower() == "hookspath":
            folder = (worktree / value.strip().strip('"')).resolve()
            if folder.is_relative_to(root) and folder.exists():
                found.append(folder)
    return found
