"""--sandbox: every command confined by the operating system.

As Codex CLI and Claude Code do on Linux, with bubblewrap: the whole file system read-only but the
workspace, a private /tmp, no network, the agent's .env and transcripts hidden, a new PID namespace
and session. Inside the workspace, what git and the agent obey later stays read-only (.git, .env,
what git's configuration names: realworld/protected.py), and what a command makes of it is moved
aside when it ends, never deleted. The agent's own code is outside the workspace
(realworld/own.py), read-only with the rest. A seccomp filter closes Unix sockets, through which a
process outside (D-Bus, Docker, ssh-agent) would act for the command. bubblewrap itself is found
once, outside the workspace. macOS has sandbox-exec, with a profile to the same effect. What it
does not stop is in docs/safety.md (The sandbox).
"""

import contextlib
import functools
import os
import platform
import struct
import subprocess
import sys
import tempfile
from pathlib import Path

import config
from realworld import own, processes
from realworld.guards import Pattern, say
from realworld.protected import (
    GIT_DIR_PIECES,
    GIT_SECONDS,
    MAX_FOLDERS,
    MAX_NAMED,
    MAX_PLACES,
    configuration_in,
    git_named,
    identities,
    is_git_dir,
    made_by_command,
    made_there,
    move_aside,
    moved_aside,
)

NETWORK_FAILED = Pattern(
    r"Network is unreachable|Temporary failure in name resolution|Could not resolve host|"
    r"Name or service not known|Connection refused|No route to host"
)


def start(
    command: str, workdir: Path, options: dict, launch_from: Path | None = None
) -> tuple[subprocess.Popen, dict]:
    """Start command in the sandbox (subprocess.Popen with options); also return the record of the
    workspace taken before it, for finish(). launch_from: the workspace whose bubblewrap to use, if
    not workdir (problem() tries the sandbox in an empty folder)."""
    root = Path(workdir).resolve()
    before = record(root)
    before["children"] = processes.children(os.getpid())  # for finish()
    if not before["complete"]:
        raise PermissionError(
            f"the workspace has more than {MAX_FOLDERS:,} folders (or one the agent cannot list): "
            "the sandbox cannot keep what git obeys later read-only; use a smaller --workdir"
        )
    if not before["answered"]:
        raise PermissionError(
            "git's configuration here is more than the sandbox reads (git's answer within "
            f"{GIT_SECONDS} s and 1 MiB a repository, {MAX_PLACES} repositories, "
            f"{MAX_NAMED:,} paths it names): it cannot keep them read-only; use a smaller "
            "--workdir, or see git config --list --show-origin"
        )
    if sys.platform == "darwin":
        argv = ["/usr/bin/sandbox-exec", "-p", seatbelt_profile(str(root), hidden_files(root))]
        return subprocess.Popen([*argv, "/bin/sh", "-c", command], **options), before
    read_end, write_end = os.pipe()  # bubblewrap reads the seccomp filter from a descriptor
    try:
        os.write(write_end, seccomp_filter())
        os.close(write_end)
        bwrap = launcher(str(Path(launch_from or root).resolve()))
        if not bwrap:
            raise PermissionError("no bubblewrap outside the workspace: --sandbox cannot run it")
        kept = set(before["read_only"])
        argv = [bwrap, *bwrap_options(command, root, kept, read_end)]
        return subprocess.Popen(argv, pass_fds=(read_end,), **options), before
    finally:
        os.close(read_end)


def record(root: Path) -> dict:
    """What the workspace holds before a command: the configuration to keep read-only, and every
    entry that bears its names, path: identity, which finish() holds what the command left
    against."""
    found, seen, complete = configuration_in(root)
    planted = moved_aside(root)
    git = program("git", str(root))
    named, answered = git_named(git, root, found, planted) if git else ({}, True)
    kept = [*found, *named, *planted]
    persons = {p: i for p, i in found.items() if not any(p.is_relative_to(q) for q in planted)}
    return {
        "read_only": [p for p in kept if bindable(p, root)],
        # the person's own configuration, which a command may move but not make
        "protected": persons,
        "seen": seen,
        # what git's configuration names, with what stood on the way to it
        "named": named,
        "complete": complete,
        "answered": answered,
    }


def bindable(path: Path, root: Path) -> bool:
    """Whether bubblewrap can keep path read-only: a link only where it leads to something inside
    the workspace (bubblewrap binds what it leads to); one that leads outside (read-only anyway)
    or nowhere would make every command fail."""
    if ".." in path.parts:  # a path kept as written (protected.resolved()): watched, not bound
        return False
    if not path.is_symlink():
        return path.exists()  # a folder Python would import from once made is not there yet
    try:
        return path.resolve(strict=True).is_relative_to(root)
    except (OSError, RuntimeError):
        return False


def bwrap_options(command: str, root: Path, read_only: set[Path], seccomp_fd: int) -> list[str]:
    """bubblewrap's options that run command in the sandbox, in the workspace."""
    hidden = []
    for path in hidden_files(root):
        hidden += ["--tmpfs", str(path)] if path.is_dir() else ["--ro-bind", "/dev/null", str(path)]
    # The private /tmp would hide a virtual environment or a PATH folder that lives there:
    # they stay, read-only.
    kept = {sys.prefix, *os.environ.get("PATH", "").split(os.pathsep)}
    kept = [p for p in sorted(kept) if p.startswith("/tmp/") and os.path.isdir(p)]
    # Bound after the workspace, so that they win; a symlink is bound as the link it is.
    protected = [arg for path in sorted(read_only) for arg in ("--ro-bind", str(path), str(path))]
    network = ["--share-net"] if config.SANDBOX_NETWORK else []
    return [
        *("--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc", "--tmpfs", "/tmp"),
        *[arg for path in kept for arg in ("--ro-bind", path, path)],
        *("--bind", str(root), str(root)),
        *protected,
        *hidden,
        "--unshare-all",
        *network,
        # No capabilities, also for root: with them a command could unmount what is read-only.
        *("--cap-drop", "ALL", "--die-with-parent", "--new-session", "--seccomp", str(seccomp_fd)),
        *("--chdir", str(root), "--", "/bin/sh", "-c", command),
    ]


def hidden_files(root: Path) -> list[Path]:
    """The agent's own .env, every copy of it beside it (each file of its folder whose name begins
    with .env: .env.local, an editor's .env~ or .env.swp, a .env.bak) and its transcripts, outside
    the workspace (realworld/own.py): hidden from every command, each where its path leads (a .env
    that is a link hides the file it names, which a read of either name reaches)."""
    names = [config.HERE / ".env", config.RUNS]
    with contextlib.suppress(OSError):
        beside = [e for e in os.scandir(config.HERE) if e.name.startswith(".env")]
        names += [config.HERE / e.name for e in beside if not e.is_dir()]
    found = {own.resolved(path) for path in names}
    return sorted(path for path in found if path.exists())


def finish(workdir: Path, before: dict) -> str:
    """After a sandboxed command: move aside what it made in the workspace that git or the agent
    would obey outside the sandbox (a .git, a repository's pieces, a .env), and say where it went.
    Made is judged against the record taken before the command (record()): what stood at its path
    then, as that same file or folder, was the person's and stays; what the command only moved of
    the person's configuration stays where it went, and is said. Nothing is deleted, and no path
    the command wrote (hooksPath, a gitdir: file, a link) is followed: what git's configuration
    names is read before the command, from git."""
    # bubblewrap exits as soon as the command has, while the kernel still ends the sandbox's other
    # processes: its first one, left to the agent, ends last. Once reaped, none is left.
    processes.wait_ended(processes.children(os.getpid()) - before.get("children", set()))
    root = Path(workdir).resolve()
    after, _seen, complete = configuration_in(root, limit=10 * MAX_FOLDERS)
    planted = moved_aside(root)  # already moved aside: left there
    made = made_by_command(before["seen"], after)
    made += [m for p, seen in before.get("named", {}).items() if (m := made_there(root, p, seen))]
    made = [p for p in set(made) if not any(p.is_relative_to(q) for q in planted)]
    made = sorted(p for p in made if not any(p != q and p.is_relative_to(q) for q in made))
    # moved, not made: the same file or folder, by device and inode (a piece the person had is
    # bound read-only, so only what holds it can move)
    kept = set(before["protected"].values())
    moved_by_command = [p for p in made if after.get(p) in kept]
    # what git's configuration names, or a folder on the way to it, is never left as theirs: a
    # hook the command wrote into the person's old hooks/, renamed to where hooksPath points
    named = before.get("named", {})
    inert = [
        p
        for p in made
        if p not in moved_by_command
        and not any(n.is_relative_to(p) or p.is_relative_to(n) for n in named)
    ]
    moved_by_command += persons_moved(made, inert, before)
    made = [p for p in made if p not in moved_by_command]
    where, failed = move_aside(root, made)
    notes = []
    if len(failed) < len(made):
        notes.append(
            f"the sandbox moved {names([p for p in made if p not in failed], root)}, which this "
            f"command made, into {where.relative_to(root)}/: git or the agent would obey it "
            "outside the sandbox (mv it back to undo)"
        )
    if failed:
        notes.append(
            f"the sandbox could not move {names(failed, root)}, which this command made: check it"
        )
    if moved_by_command:
        notes.append(f"this command moved configuration to {names(moved_by_command, root)}")
    if not complete:
        notes.append(
            f"the command left more than {10 * MAX_FOLDERS:,} folders (or one it cannot list) in "
            "the workspace: the sandbox could not check them all for a .git or .env it made"
        )
    for note in notes:
        say(f"agent: {note}")
    return "".join(f"\n[{note}]" for note in notes)


def persons_moved(made: list[Path], candidates: list[Path], before: dict) -> list[Path]:
    """Of candidates (made, named by no value of git's), what the person had: an entry of theirs
    named like a piece (config/, hooks/), by device and inode, that the command renamed to a
    piece's name (not .git or .env, whose role it would change), in another folder or not (a
    hard link leaves it at its old path too, and is made). It stays where it went, unless that
    folder would still be a repository once what the command made is moved aside."""
    was = {identity: path for path, identity in before["seen"].items()}
    theirs = []
    for path in candidates:
        now = identities([path]).get(path)
        old = was.get(now)
        if old and path.name.lower() in GIT_DIR_PIECES and identities([old]).get(old) != now:
            theirs.append(path)
    going = {p.parent: set() for p in theirs}
    for path in made:
        if path not in theirs and path.parent in going:
            going[path.parent].add(path.name.lower())
    stay = []
    for folder, leaving in going.items():
        try:
            left = {entry.name.lower() for entry in os.scandir(folder)} - leaving
        except OSError:
            continue
        if not is_git_dir(left):
            stay += [p for p in theirs if p.parent == folder]
    return stay


def names(paths: list[Path], root: Path) -> str:
    return ", ".join(str(p.relative_to(root)) for p in paths)


def launcher(root: str) -> str | None:
    """The bubblewrap to run: the first on PATH in an absolute folder outside the workspace. A
    relative PATH entry (".", "node_modules/.bin", an empty one) could name a bwrap that a
    sandboxed command wrote, which would then run every later command unsandboxed."""
    return program("bwrap", root)


@functools.cache  # once, before the first command: a command cannot put another one in its place
def program(name: str, root: str) -> str | None:
    """The first program name on an absolute PATH entry outside the workspace root (launcher())."""
    for folder in os.environ.get("PATH", "").split(os.pathsep):
        path = Path(folder, name)
        try:
            if not os.path.isabs(folder) or path.resolve().is_relative_to(root):
                continue
            if path.is_file() and os.access(path, os.X_OK):
                return str(path)
        except OSError:  # a folder on PATH this user cannot read
            continue
    return None


# --- The seccomp filter: no Unix sockets, no io_uring ---------------------------------------------
# A classic BPF program over struct seccomp_data (linux/seccomp.h): nr at offset 0, arch at 4, the
# arguments from 16, 8 bytes each (their low half first on these little-endian machines). Unix
# sockets a process outside listens on (D-Bus: systemd-run; Docker; ssh-agent) would act for the
# command; the network namespace closes only the abstract ones. io_uring makes sockets without
# the socket() call (Codex denies it too). A socketpair is harmless, but not a datagram one:
# sendto() reaches any listening datagram socket by its path.

ARCHES = {  # machine: (AUDIT_ARCH_*, socket, socketpair, io_uring_setup, _enter, _register)
    "x86_64": (0xC000003E, 41, 53, 425, 426, 427),
    "aarch64": (0xC00000B7, 198, 199, 425, 426, 427),
}
ALLOW, DENY, KILL = 0x7FFF0000, 0x00050000 | 1, 0x80000000  # DENY: the call fails with EPERM
AF_UNIX, AF_VSOCK, SOCK_STREAM, SOCK_SEQPACKET, X32_BIT = 1, 40, 1, 5, 0x40000000


def seccomp_filter() -> bytes:
    """The filter bubblewrap installs before it runs the command (its --seccomp). AF_VSOCK goes
    too: on a virtual machine it reaches the host, whatever the network namespace."""
    arch, socket, socketpair, *uring = ARCHES[machine()]
    program = [
        ("ld", 4),
        ("jeq", arch, "nr", "kill"),
        ("kill:ret", KILL),  # another architecture's calls (32-bit int 0x80) have other numbers
        ("nr:ld", 0),
        ("jge", X32_BIT, "deny", "uring"),  # x86_64's x32 calls: the same calls, other numbers
        ("uring:jeq", uring[0], "deny", "next"),
        ("jeq", uring[1], "deny", "next"),
        ("jeq", uring[2], "deny", "next"),
        ("jeq", socketpair, "pair", "socket"),
        ("pair:ld", 16),  # the family
        ("jeq", AF_UNIX, "type", "allow"),
        ("type:ld", 24),
        ("and", 0xF),  # the type, without SOCK_NONBLOCK and SOCK_CLOEXEC
        ("jeq", SOCK_STREAM, "allow", "next"),  # connected for good: they reach nothing else
        ("jeq", SOCK_SEQPACKET, "allow", "deny"),  # a datagram one: sendto() reaches any path
        ("socket:jeq", socket, "family", "allow"),
        ("family:ld", 16),
        ("jeq", AF_UNIX, "deny", "next"),
        ("jeq", AF_VSOCK, "deny", "allow"),
        ("allow:ret", ALLOW),
        ("deny:ret", DENY),
    ]
    return assemble(program)


def assemble(program: list[tuple]) -> bytes:
    """Classic BPF from (["label:"]op, k, [if true, if false]) steps; a jump names a label, or
    "next" for the step after. Each step is struct sock_filter: code, jt, jf, k."""
    labels = {step[0].split(":")[0]: at for at, step in enumerate(program) if ":" in step[0]}
    codes = {"ld": 0x20, "jeq": 0x15, "jge": 0x35, "and": 0x54, "ret": 0x06}  # BPF_W|BPF_ABS, ...
    out = b""
    for at, (op, k, *jumps) in enumerate(program):
        offsets = [0 if j == "next" else labels[j] - at - 1 for j in jumps] or [0, 0]
        out += struct.pack("=HBBI", codes[op.split(":")[-1]], *offsets, k)
    return out


def machine() -> str:
    """The machine's architecture by its Linux name."""
    return {"amd64": "x86_64", "arm64": "aarch64"}.get(
        platform.machine().lower(), platform.machine()
    )


# --- Whether it can work, and what it tells -------------------------------------------------------


def seatbelt_profile(root: str, hidden: list[Path]) -> str:
    """macOS: a sandbox-exec profile to the same effect (untested here: no macOS in CI)."""
    denied = " ".join(f'({"subpath" if p.is_dir() else "literal"} "{p}")' for p in hidden)
    network = "(allow network*)" if config.SANDBOX_NETWORK else "(deny network*)"
    return (
        f'(version 1)(allow default)(deny file-write*)(allow file-write* (subpath "{root}") '
        '(subpath "/private/tmp") (subpath "/private/var/folders") (literal "/dev/null")) '
        f"{network}" + (f"(deny file-read* {denied})" if denied else "")
    )


def problem(workdir: Path | None = None) -> str | None:
    """Why --sandbox cannot work on this machine, in one line that says how to fix it; None if it
    can. On Linux it also finds the bubblewrap every command of this workspace will use."""
    if sys.platform == "darwin":
        found = os.path.exists("/usr/bin/sandbox-exec")
        return None if found else "--sandbox needs /usr/bin/sandbox-exec (macOS)"
    if not sys.platform.startswith("linux"):
        return (
            f"--sandbox is not available on {sys.platform}: it needs Linux (bubblewrap) or "
            "macOS (sandbox-exec)"
        )
    if machine() not in ARCHES:
        return f"--sandbox's seccomp filter knows x86_64 and aarch64, not {machine()}"
    root = Path(workdir or config.WORKDIR).resolve()
    if not launcher(str(root)):
        return (
            "--sandbox needs bubblewrap, which is not installed (or only inside the workspace, "
            "or on a relative PATH entry): sudo apt-get install bubblewrap (Fedora: sudo dnf "
            "install bubblewrap)"
        )
    with tempfile.TemporaryDirectory() as empty:
        tried, before = start("true", Path(empty), QUIET, launch_from=root)
        tried.wait()
        error = tried.stderr.read().decode(errors="replace").strip() if tried.stderr else ""
        tried.stderr and tried.stderr.close()
        finish(Path(empty), before)
    if tried.returncode:
        return (
            f"--sandbox: bubblewrap cannot make a sandbox here ({error[:200]}); user namespaces "
            "may be disabled: sudo sysctl -w kernel.unprivileged_userns_clone=1, or on Ubuntu "
            "24.04 kernel.apparmor_restrict_unprivileged_userns=0"
        )
    return None


QUIET = {"stdin": subprocess.DEVNULL, "stdout": subprocess.DEVNULL, "stderr": subprocess.PIPE}


def mode() -> str:
    """How commands run, for the line the agent starts with: "" when not sandboxed."""
    network = "" if config.SANDBOX_NETWORK else " with no network"
    return f"; commands run in a sandbox{network}" * config.SANDBOX


def hint(output: str) -> str:
    """For a sandboxed command that failed: what the sandbox refused, so the model need not
    guess."""
    if not config.SANDBOX:
        return ""
    hints = []
    if "Read-only file system" in output:
        hints.append(
            "outside the workspace the file system is read-only, and inside it .git and .env "
            "files are, and what git's configuration names (sandbox)"
        )
    if "Operation not permitted" in output:
        hints.append("the sandbox refuses Unix sockets and io_uring (Operation not permitted)")
    if not config.SANDBOX_NETWORK and NETWORK_FAILED.search(output):
        hints.append(
            "there is no network in the sandbox; the user can allow it with AGENT_SANDBOX_NETWORK=1"
        )
    return "".join(f"\n[{hint}]" for hint in hints)
