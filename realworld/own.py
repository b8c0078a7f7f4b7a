"""What the agent keeps for itself, out of every tool's reach: its folder, its runs/, its Python.

Its folder holds its code and everything Python or the person runs as the agent (the modules,
examples/, bench/, tests/, pyproject.toml, a .pdbrc that `python -m pdb agent.py` reads) and its
.env; runs/ holds the transcripts, the pause key and the pauses gone on from; and Python imports
its code at the next start from the folders on sys.path. A workspace that holds one of them, or
lies inside one (but the agent's playground/), is refused: so no tool, and no sandboxed command,
reaches them (docs/safety.md, "The agent's own things").
"""

import contextlib
import os
import secrets
import site
import stat
import sys
from pathlib import Path

import config

KEY = ".pause-key"  # in runs/: what pauses are sealed with (realworld/pauses.py)
SPENT = ".pauses-done"  # in runs/: the seals of pauses gone on from
SPENT_BYTES = 16 * 1024 * 1024  # of SPENT, read at the most: a quarter of a million seals
PTH_BYTES = 1024 * 1024  # of one .pth file, read at the most
NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
NONBLOCK = getattr(os, "O_NONBLOCK", 0)
POSIX = os.name == "posix"  # elsewhere (Windows) owners and modes are access lists, not read here


def places() -> dict[Path, str]:
    """The agent's own places, each with what it is: its folder, its runs/, the Python environment
    it runs in, and every folder Python imports from at its start (the person's own site-packages
    too, which Python adds once it exists)."""
    found = {config.HERE: "the agent's own folder (its code, lessons and .env)"}
    found[config.RUNS] = "the agent's runs/ (its transcripts and the pause key)"
    if sys.prefix != sys.base_prefix:  # a virtual environment: its python runs the agent
        found[Path(sys.prefix)] = "the Python environment the agent runs in"
    # but the running program's own folder: for python agent.py, the agent's, above; for a
    # person's program that imports the agent, theirs
    main = getattr(sys.modules.get("__main__"), "__file__", None)
    program = resolved(Path(main).parent) if main else None
    for entry in import_folders():
        if entry and resolved(Path(entry)) != program:
            found.setdefault(Path(entry), "a folder Python imports the agent's code from")
    return {resolved(path): what for path, what in found.items()}


def import_folders() -> list[str]:
    """Every folder Python imports from at the agent's next start, whether it exists yet or not:
    sys.path (PYTHONPATH's folders are there even while missing), the person's own site-packages,
    and each folder a .pth file in a site-packages folder names, which site.py adds once it
    exists. A folder made later is imported from as one that stood there."""
    user = [site.getusersitepackages()] if site.ENABLE_USER_SITE else []
    folders = [*sys.path, *user]
    for sitedir in [*site.getsitepackages(), *user]:
        folders += pth_folders(sitedir)
    return folders


def pth_folders(sitedir: str) -> list[str]:
    """The folders the .pth files of sitedir name, as site.addpackage() reads them: a line that
    is no comment, no blank and no `import`, joined to sitedir."""
    found = []
    with contextlib.suppress(OSError):
        names = sorted(n for n in os.listdir(sitedir) if n.endswith(".pth") and n[0] != ".")
        for name in names:
            with contextlib.suppress(OSError, UnicodeDecodeError):
                with open(os.path.join(sitedir, name), encoding="locale") as f:
                    lines = f.read(PTH_BYTES).splitlines()
                found += [
                    os.path.join(sitedir, line.rstrip())
                    for line in lines
                    if line.strip() and not line.startswith(("#", "import ", "import\t"))
                ]
    return found


def resolved(path: Path) -> Path:
    with contextlib.suppress(OSError, RuntimeError):
        return Path(path).resolve()
    return Path(os.path.abspath(path))


def chain(path: Path) -> set[tuple[int, int]]:
    """The identities (device, inode) of path and of every folder above it that exists: a folder
    reached by another name (a bind mount, a case-insensitive file system) is the same folder."""
    found = set()
    for folder in [path, *path.parents]:
        with contextlib.suppress(OSError):
            status = os.stat(folder)
            found.add((status.st_dev, status.st_ino))
    return found


def within(inner: Path, outer: Path) -> bool:
    """Whether inner is outer or lies inside it, by name or by identity."""
    if inner.is_relative_to(outer):
        return True
    with contextlib.suppress(OSError):
        status = os.stat(outer)
        return (status.st_dev, status.st_ino) in chain(inner)
    return False


def overlap(workdir) -> str | None:
    """Why workdir cannot be the workspace (it holds one of the agent's places, or lies inside
    one but the playground/), in one line; None where it can."""
    root = resolved(Path(workdir))
    here, playground = resolved(config.HERE), resolved(config.HERE / "playground")
    for place, what in places().items():
        if within(place, root):
            how = "is" if place == root else "holds"
        elif within(root, place) and not (place == here and within(root, playground)):
            how = "is inside"
        else:
            continue
        return (
            f"the workspace {root} {how} {place}, {what}: a command or a file tool there could "
            f"change what the agent runs or keeps. Give a --workdir that neither holds nor lies "
            f"in it: a project folder, or the agent's playground/ ({playground})"
        )
    return None


def in_workspace(path: Path | None, workdir) -> bool:
    """Whether a file the agent keeps (the transcript it writes) lies in the workspace, where a tool
    could rewrite it between its lines, and a pause's seal is read back from it: by its path, or by
    where a link at its path leads (the file a write through it changes)."""
    if path is None:
        return False
    root, path = resolved(Path(workdir)), Path(path)
    return within(resolved(path.parent) / path.name, root) or within(resolved(path), root)


def other_names(path: Path) -> bool:
    """Whether the file at path has other names (hard links, link(2)): where they are cannot be
    known without a search, and one in the workspace is the same file."""
    with contextlib.suppress(OSError):
        status = os.stat(path)
        return stat.S_ISREG(status.st_mode) and status.st_nlink > 1
    return False


# --- runs/: the agent's before anything runs ------------------------------------------------------


def make_runs() -> str | None:
    """Make runs/ (owner-only) and its pause key where they do not exist yet, before any command
    can; then why they are not the agent's own, in one line, or None."""
    with contextlib.suppress(OSError):
        config.RUNS.parent.mkdir(parents=True, exist_ok=True)
        os.mkdir(config.RUNS, 0o700)
        os.chmod(config.RUNS, 0o700, follow_symlinks=False)  # whatever the umask
    if not POSIX:
        return None
    if problem := runs_problem():
        return problem
    with contextlib.suppress(FileExistsError, OSError), opened(os.O_RDONLY | os.O_DIRECTORY) as fd:
        flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | NOFOLLOW
        key = os.open(KEY, flags, 0o600, dir_fd=fd)
        with os.fdopen(key, "wb") as f:
            os.fchmod(key, 0o600)
            f.write(secrets.token_bytes(32))
    return None if pause_key() else f"{config.RUNS / KEY} is not the agent's own: {key_problem()}"


def runs_problem() -> str | None:
    """Why runs/ is not the agent's own (not a real folder of this user's, mode 0700), or None."""
    try:
        status = os.lstat(config.RUNS)
    except OSError as e:
        return f"{config.RUNS} cannot be made ({e.strerror}): no pause is sealed"
    why = not_owned(status, stat.S_ISDIR, 0o700, "folder")
    if not why:
        return None
    return (
        f"{config.RUNS} is not the agent's own ({why}): no pause is sealed and no transcript kept "
        "there; move it aside (the agent makes a new one at its next start)"
    )


def not_owned(status: os.stat_result, kind, mode: int, name: str) -> str | None:
    """What makes a file not the agent's own: another kind, another owner, another mode."""
    if not kind(status.st_mode):
        return f"not a real {name}" + (" but a link" if stat.S_ISLNK(status.st_mode) else "")
    if not POSIX:
        return None
    if status.st_uid != os.geteuid():
        return f"owned by user {status.st_uid}"
    if stat.S_IMODE(status.st_mode) != mode:
        return f"mode {stat.S_IMODE(status.st_mode):04o}, not {mode:04o}"
    return None


@contextlib.contextmanager
def opened(flags: int):
    """runs/ open, as the folder it was checked to be (no link followed). Not on Windows, whose
    access lists are not read here: nothing is sealed there, and a pause is approved by codes."""
    if not POSIX:
        raise PermissionError("not on this system")
    fd = os.open(config.RUNS, flags | NOFOLLOW)
    try:
        if runs_problem() or not_owned(os.fstat(fd), stat.S_ISDIR, 0o700, "folder"):
            raise PermissionError(f"{config.RUNS} is not the agent's own")
        yield fd
    finally:
        os.close(fd)


def pause_key() -> bytes | None:
    """The key pauses are sealed with, where runs/ and the key are the agent's own; else None."""
    with contextlib.suppress(OSError), opened(os.O_RDONLY | os.O_DIRECTORY) as folder:
        fd = os.open(KEY, os.O_RDONLY | NOFOLLOW | NONBLOCK, dir_fd=folder)
        with os.fdopen(fd, "rb") as f:
            if not not_owned(os.fstat(fd), stat.S_ISREG, 0o600, "file"):
                key = f.read(33)
                return key if len(key) == 32 else None
    return None


def key_problem() -> str:
    try:
        status = os.lstat(config.RUNS / KEY)
    except OSError as e:
        return e.strerror or "missing"
    return not_owned(status, stat.S_ISREG, 0o600, "file") or "not 32 bytes"


def spent() -> set[str] | None:
    """The seals of pauses already gone on from, read with bounds (a FIFO or a link planted there
    is no hang and no answer); None where they cannot be known, and then no seal is taken."""
    try:
        with opened(os.O_RDONLY | os.O_DIRECTORY) as folder:
            flags = os.O_RDONLY | NOFOLLOW | NONBLOCK
            fd = os.open(SPENT, flags, dir_fd=folder)
            with os.fdopen(fd, "rb") as f:
                if not_owned(os.fstat(fd), stat.S_ISREG, 0o600, "file"):
                    return None
                text = f.read(SPENT_BYTES + 1)
    except FileNotFoundError:
        return set()
    except OSError:
        return None
    return set(text.decode("ascii", "replace").split()) if len(text) <= SPENT_BYTES else None


def spend(pause_seal: str) -> None:
    """Record that a sealed pause has been gone on from (in runs/, appended, never followed)."""
    with contextlib.suppress(OSError), opened(os.O_RDONLY | os.O_DIRECTORY) as folder:
        flags = os.O_WRONLY | os.O_CREAT | os.O_APPEND | NOFOLLOW | NONBLOCK
        fd = os.open(SPENT, flags, 0o600, dir_fd=folder)
        with os.fdopen(fd, "a", encoding="ascii") as f:
            if stat.S_ISREG(os.fstat(fd).st_mode):
                f.write(pause_seal + "\n")
