"""What no tool call may change in the workspace: configuration that runs code or redirects the key.

A .env file (AGENT_BASE_URL sends the key to whatever server it names on the next run), a .envrc
(direnv runs it), and anything git obeys: a .git folder or file, and a folder that git takes for a
repository (its config's core.fsmonitor runs a command whenever anyone runs git there). write_file
refuses to write them (tools.py); the sandbox makes those it finds read-only and removes those a
command makes (sandbox.py).
"""

import os
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


def configuration_in(root: Path) -> tuple[set[Path], bool]:
    """Every piece of configuration in the workspace: each .git folder or file, each folder git
    takes for a repository, each .env or .envrc file, and a core.hooksPath inside the workspace
    that a repository's config names. Symlinks are not followed. Second: whether the scan read
    the whole workspace (at most MAX_FOLDERS folders)."""
    found, todo, read = set(), [root], 0
    while todo:
        folder = todo.pop()
        read += 1
        if read > MAX_FOLDERS:
            return found, False
        try:
            entries = list(os.scandir(folder))
        except OSError:
            continue
        names = {entry.name.lower() for entry in entries}
        if folder != root and is_git_dir(names):
            found |= {Path(folder), *hooks_path(root, Path(folder), Path(folder))}
            continue
        for entry in entries:
            path = Path(entry.path)
            if entry.name.lower() == ".git":
                found |= {path, *hooks_path(root, path, Path(folder))}
            elif is_env_file(entry.name) and not entry.is_dir(follow_symlinks=False):
                found.add(path)
            elif entry.is_dir(follow_symlinks=False):
                todo.append(path)
    return found, True


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
