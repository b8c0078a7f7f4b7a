"""The workspace the file tools stay in: a path resolved inside it, a file read with bounds, a file
written whole beside the old one and renamed over it with its owner, mode and access list, and
what no tool call may write (configuration, what git would obey).

resolve() follows every symlink, so the path it returns has none. Opening it one folder at a time
with O_NOFOLLOW, each relative to the folder before (dir_fd), fails if a symlink has been swapped
in since. Windows has no dir_fd: there the path is used whole, and the check and the use can race.
"""

import contextlib
import json
import os
import re
import stat
import uuid
from pathlib import Path

import config
from realworld import own, sandbox
from realworld.calls import ToolError
from realworld.guards import joined
from realworld.protected import is_configuration, makes_repository

# read once, at import, when nothing else runs: os.umask can only be read by setting it
UMASK = os.umask(0o022)
os.umask(UMASK)


def resolve(path: str, workdir: Path) -> Path:
    """The real path inside the workspace that path names; symlinks are followed first."""
    if not isinstance(path, str) or not path.strip() or "\0" in path:
        raise ToolError("path must be a non-empty string")
    if problem := own.overlap(workdir):  # the agent's code, runs/ and Python are never in reach
        raise ToolError(problem)
    root = Path(workdir).resolve()
    target = (root / path).resolve()
    if not target.is_relative_to(root):
        raise ToolError(f"{path} is outside the workspace ({root}); use a path inside it")
    return target


def as_text(content) -> str:
    """What write_file writes: content, or a JSON file a small model sent as an object or a list;
    ToolError for anything else."""
    if isinstance(content, (dict, list)):
        return json.dumps(content, indent=2, ensure_ascii=False)
    if not isinstance(content, str):
        raise ToolError(f"content must be a string, not {type(content).__name__}")
    return content


@contextlib.contextmanager
def open_regular(path: str, target: Path, workdir: Path):
    """The file read_file reads, open for reading: ToolError for a folder (with what it holds), a
    missing file, or what is not a regular file (a FIFO, socket or device is never waited on)."""
    if target.is_dir():
        names = sorted(p.name + "/" * p.is_dir() for p in target.iterdir())
        raise ToolError(
            f"{path} is a folder, not a file; it holds: {', '.join(names[:50]) or 'nothing'}"
        )
    if not target.exists():
        raise ToolError(f"{path} does not exist")
    # O_NONBLOCK: a FIFO opens at once instead of waiting for a writer; it is refused below.
    flags = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0)
    with os.fdopen(open_inside(workdir, target, flags), "rb") as f:
        if not stat.S_ISREG(os.fstat(f.fileno()).st_mode):
            raise ToolError(
                f"{path} is not a regular file (a FIFO, socket or device); it was not read"
            )
        yield f


def read_text(path: str, f) -> str:
    """An open file's text: whole, or of a long one its head and tail with the size between;
    ToolError for what is not UTF-8 text. No more is read than is kept."""
    size = os.fstat(f.fileno()).st_size
    # clip() keeps MAX_OUTPUT // 2 characters of each end, at most 4 bytes each in UTF-8: read no
    # more.
    limit = config.MAX_OUTPUT
    head, tail = f.read(2 * limit), b""
    if size > 4 * limit:
        f.seek(-2 * limit, os.SEEK_END)
        tail = f.read()
    else:
        head += f.read()
    if b"\0" not in head + tail:
        if tail:
            # the ends may cut a character
            start = head.decode("utf-8", errors="replace")[: limit // 2]
            end = tail.decode("utf-8", errors="replace")[-(limit // 2) :]
            return joined(start, f"{size - len(start.encode()) - len(end.encode())} bytes", end)
        with contextlib.suppress(UnicodeDecodeError):
            return head.decode("utf-8")
    raise ToolError(f"{path} is a binary file ({size} bytes), not UTF-8 text")


EDIT_MOST = 8 * 2**20  # bytes: a larger file is written whole, never read whole for an edit


def edited(path: str, target: Path, workdir: Path, old, new: str) -> str:
    """The file's text with the one place where old stands replaced by new (write_file's edit);
    ToolError, and nothing written, where old is empty, stands nowhere or in more than one
    place, or the file is no UTF-8 text. In a file of one kind of line end, the model's line
    ends are read as the file's (a model writes a Windows file's \\r\\n as \\n, and the
    reverse), in old and in new."""
    if not isinstance(old, str):
        raise ToolError(f"old must be a string, not {type(old).__name__}")
    if not old:
        raise ToolError(
            "old must be the exact text to replace, not empty; leave old out to write it whole"
        )
    if not target.exists():
        raise ToolError(f"{path} does not exist, so old stands nowhere; leave old out to create it")
    with open_regular(path, target, workdir) as f:
        data = f.read(EDIT_MOST + 1)
    if len(data) > EDIT_MOST:
        raise ToolError(f"{path} is larger than {EDIT_MOST // 2**20} MiB, too large for an edit")
    try:
        text = data.decode("utf-8") if b"\0" not in data else None
    except UnicodeDecodeError:
        text = None
    if text is None:
        raise ToolError(f"{path} is a binary file, not UTF-8 text; an edit needs text")
    if ends := line_ends(text):  # one kind throughout: the edit keeps it
        old = old if old in text else with_ends(old, ends)
        new = with_ends(new, ends)
    places = count_places(text, old)
    if places != 1:
        where = "nowhere" if not places else f"in {places} places"
        where = "in more than 100 places" if places > 100 else where
        hint = (
            "read the file and give its text exactly"
            if not places
            else "give more of the text around it, so that old stands in one place"
        )
        raise ToolError(f"old stands {where} in {path}; nothing was written: {hint}")
    return text.replace(old, new, 1)


def line_ends(text: str) -> str | None:
    """The file's line end where every line ends so: "\\r\\n" or "\\n"; None where it has
    both, or no line end."""
    lines, crlf = text.count("\n"), text.count("\r\n")
    return None if not lines or 0 < crlf < lines else "\r\n" if crlf else "\n"


def with_ends(text: str, ends: str) -> str:
    """text with each of its line ends as ends."""
    return text.replace("\r\n", "\n").replace("\n", ends)


def count_places(text: str, old: str, most: int = 100) -> int:
    """How many places old stands in text, overlapping ones too ("aa" twice in "aaa"), counted
    to most + 1."""
    places, at = 0, text.find(old)
    while at >= 0 and places <= most:
        places, at = places + 1, text.find(old, at + 1)
    return places


def refuse_protected(path: str, target: Path, workdir: Path) -> None:
    """ToolError for a file no tool call may write (realworld/protected.py): configuration (a .env,
    what is inside a .git folder), what would make a folder a repository, a folder."""
    root = Path(workdir).resolve()
    if is_configuration(target.relative_to(root)):
        raise ToolError(
            f"{path} is configuration "
            f"({'a .env file' if '.env' in target.name.lower() else 'inside a .git folder'}): "
            "not written, since it could send the key elsewhere or run commands later. Ask "
            "the user to edit it."
        )
    if makes_repository(root, target):
        raise ToolError(
            f"{path} would give its folder what git looks for in a repository "
            "(HEAD beside objects/ and refs/, or beside commondir): not written, since git would "
            "then obey that folder's config whenever anyone runs git there. Ask the user."
        )
    if target.is_dir():
        raise ToolError(f"{path} is a folder; give a file path")
    # what git runs or reads at the person's next git command, asked of git as the sandbox asks
    before = sandbox.record(root)
    if not (before["complete"] and before["answered"]):
        raise ToolError(
            f"{path} not written: the workspace is more than the agent reads to know what git's "
            "configuration names (see --sandbox in docs/safety.md). Ask the user."
        )
    if any(p in before["named"] for p in (target, *target.parents)):
        raise ToolError(
            f"{path} is named by git's configuration (a hook, a filter, a file it includes), or "
            "lies in a folder it names: not written, since git would run or read it whenever "
            "anyone runs git here. Ask the user to edit it."
        )


@contextlib.contextmanager
def replacing(path: str, target: Path, workdir: Path):
    """A new file to write target's text in, open: once written, it is renamed over target in one
    step (a reader never sees half a file), with the old file's owner, group, mode and access
    list, or ToolError and nothing written where those cannot be given."""
    folder = open_folder(workdir, target.parent)
    temporary, fd = at(folder, f".{target.name}.{uuid.uuid4().hex[:8]}.tmp")
    final, _ = at(folder, target.name)
    try:
        remove_temporaries(folder, target.name)
        try:
            old = os.stat(final, dir_fd=fd, follow_symlinks=False)
        except FileNotFoundError:
            old = None
        flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0)
        # Owner-only from the moment it exists: never more readable than the file it replaces,
        # while written.
        with open(
            os.open(temporary, flags, 0o600, dir_fd=fd), "w", encoding="utf-8", newline=""
        ) as f:
            yield f
        keep_owner(path, old, temporary, fd)
        os.chmod(temporary, stat.S_IMODE(old.st_mode) if old else 0o666 & ~UMASK, dir_fd=fd)
        if old and stat.S_ISREG(old.st_mode):  # after chmod, which would narrow an ACL's mask
            copy_attributes(path, fd, final, temporary)
        os.replace(temporary, final, src_dir_fd=fd, dst_dir_fd=fd)
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(temporary, dir_fd=fd)
        if fd is not None:
            os.close(fd)


def keep_owner(path: str, old, temporary: str, fd: int | None) -> None:
    """Give the new file the old one's owner and group; where this process may not give them, no
    other group (or owner) would get what was the old one's: ToolError, nothing written."""
    if not old or not hasattr(os, "chown"):
        return
    with contextlib.suppress(PermissionError):
        os.chown(temporary, old.st_uid, old.st_gid, dir_fd=fd, follow_symlinks=False)
    new = os.stat(temporary, dir_fd=fd, follow_symlinks=False)
    if (new.st_uid, new.st_gid) != (old.st_uid, old.st_gid):
        raise ToolError(
            f"{path} belongs to another owner or group, which a new file cannot be given "
            "here: not written, so that who may read it does not change. Ask the user."
        )


def copy_attributes(path: str, folder: int | None, source: str, target: str) -> None:
    """Give the new file the extended attributes of the file it replaces: its POSIX access list
    (system.posix_acl_access, which names who else may read it) and the rest, so that replacing a
    file never changes who may read it. ToolError where one cannot be given (a security.* one
    this process may not set): then nothing is written."""
    if not hasattr(os, "listxattr"):  # Linux only; macOS's ACLs are not read here
        return
    flags = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK
    old, new = os.open(source, flags, dir_fd=folder), os.open(target, flags, dir_fd=folder)
    try:
        try:
            names = os.listxattr(old)
        except OSError:  # a file system without extended attributes has none to keep
            return
        # What the new file got from its folder (a default access list) and the old one had not
        # goes, so that no one may read it who could not read the old one.
        inherited = [name for name in os.listxattr(new) if name not in names]
        for name in [*names, *inherited]:
            try:
                if name in inherited:
                    os.removexattr(new, name)
                    continue
                value = os.getxattr(old, name)
                if name not in os.listxattr(new) or os.getxattr(new, name) != value:
                    os.setxattr(new, name, value)
            except OSError as e:
                raise ToolError(
                    f"{path} has an extended attribute ({name}) that a new file cannot be given "
                    f"here ({e.strerror}): not written, so that who may read it does not change. "
                    "Ask the user to change it."
                ) from None
    finally:
        os.close(old)
        os.close(new)


def remove_temporaries(folder: int | Path, name: str) -> None:
    """Remove what killed writes of the file name left in its folder, so that they do
    not collect."""
    left = re.compile(rf"\.{re.escape(name)}\.[0-9a-f]{{8}}\.tmp")
    for entry in os.listdir(folder):
        if left.fullmatch(entry):
            path, fd = at(folder, entry)
            with contextlib.suppress(OSError):
                os.unlink(path, dir_fd=fd)


# os.replace is os.rename
DIR_FD = os.open in os.supports_dir_fd and os.rename in os.supports_dir_fd


def open_folder(workdir: Path, folder: Path) -> int | Path:
    """The folder, inside the workspace, opened without following symlinks and made if missing."""
    root = Path(workdir).resolve()
    if not DIR_FD:
        folder.mkdir(parents=True, exist_ok=True)
        return folder
    fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY)
    try:
        for part in folder.relative_to(root).parts:
            with contextlib.suppress(FileExistsError):
                os.mkdir(part, dir_fd=fd)
            inner = os.open(part, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW, dir_fd=fd)
            os.close(fd)
            fd = inner
    except OSError as e:
        os.close(fd)
        shown = folder.relative_to(root) if folder.is_relative_to(root) else folder
        raise ToolError(
            f"{shown} is not a folder inside the workspace, or changed while in use ({e.strerror})"
        ) from None
    return fd


def open_inside(workdir: Path, target: Path, flags: int) -> int:
    """os.open a file that resolve() found inside the workspace, refusing a symlink swapped
    in since."""
    folder = open_folder(workdir, target.parent)
    name, fd = at(folder, target.name)
    try:
        return os.open(name, flags | getattr(os, "O_NOFOLLOW", 0), dir_fd=fd)
    except OSError as e:
        raise ToolError(f"{target.name} could not be opened ({e.strerror})") from None
    finally:
        if fd is not None:
            os.close(fd)


def at(folder: int | Path, name: str) -> tuple[str, int | None]:
    """(path, dir_fd) for an os function: name inside an open folder, or the whole path where
    there is no dir_fd."""
    return (name, folder) if isinstance(folder, int) else (str(Path(folder) / name), None)
