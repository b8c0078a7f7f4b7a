"""--sandbox: every command confined by the operating system.

As Codex CLI and Claude Code do on Linux, with bubblewrap: the whole file system read-only but the
workspace, a private /tmp, no network, the agent's .env and transcripts hidden, a new PID namespace
and session. macOS has sandbox-exec, with a profile to the same effect. What it does not stop is in
docs/safety.md (The sandbox).
"""

import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import config

NETWORK_FAILED = re.compile(
    r"Network is unreachable|Temporary failure in name resolution|Could not resolve host|"
    r"Name or service not known|Connection refused|No route to host"
)


def command_line(command: str, workdir: Path) -> list[str]:
    """The command line that runs command in the sandbox, in the workspace."""
    root = str(Path(workdir).resolve())
    secrets = [
        path for path in (config.HERE / ".env", config.RUNS) if path.exists() and root != str(path)
    ]
    if sys.platform == "darwin":
        return ["sandbox-exec", "-p", seatbelt_profile(root, secrets), "/bin/sh", "-c", command]
    hidden = [
        arg
        for path in secrets
        for arg in (
            ("--tmpfs", str(path)) if path.is_dir() else ("--ro-bind", "/dev/null", str(path))
        )
    ]
    # The private /tmp would hide a virtual environment or a PATH folder that lives there:
    # they stay, read-only.
    kept = {sys.prefix, *os.environ.get("PATH", "").split(os.pathsep)}
    kept = [
        arg
        for path in sorted(kept)
        if path.startswith("/tmp/") and os.path.isdir(path)
        for arg in ("--ro-bind", path, path)
    ]
    network = ["--share-net"] if config.SANDBOX_NETWORK else []
    return [
        "bwrap",
        "--ro-bind",
        "/",
        "/",
        "--dev",
        "/dev",
        "--proc",
        "/proc",
        "--tmpfs",
        "/tmp",
        *kept,
        "--bind",
        root,
        root,
        *hidden,
        "--unshare-all",
        *network,
        "--die-with-parent",
        "--new-session",
        "--chdir",
        root,
        "--",
        "/bin/sh",
        "-c",
        command,
    ]


def seatbelt_profile(root: str, secrets: list[Path]) -> str:
    """macOS: a sandbox-exec profile to the same effect (untested here: no macOS in CI)."""
    denied = " ".join(f'({"subpath" if p.is_dir() else "literal"} "{p}")' for p in secrets)
    network = "(allow network*)" if config.SANDBOX_NETWORK else "(deny network*)"
    return (
        f'(version 1)(allow default)(deny file-write*)(allow file-write* (subpath "{root}") '
        '(subpath "/private/tmp") (subpath "/private/var/folders") (literal "/dev/null")) '
        f"{network}" + (f"(deny file-read* {denied})" if denied else "")
    )


def problem() -> str | None:
    """Why --sandbox cannot work on this machine, in one line that says how to fix it;
    None if it can."""
    if sys.platform == "darwin":
        return (
            None
            if os.path.exists("/usr/bin/sandbox-exec")
            else "--sandbox needs /usr/bin/sandbox-exec (macOS)"
        )
    if not sys.platform.startswith("linux"):
        return (
            f"--sandbox is not available on {sys.platform}: it needs Linux (bubblewrap) or "
            "macOS (sandbox-exec)"
        )
    if not shutil.which("bwrap"):
        return (
            "--sandbox needs bubblewrap, which is not installed: sudo apt-get install bubblewrap "
            "(Fedora: sudo dnf install bubblewrap)"
        )
    tried = subprocess.run(
        command_line("true", Path(tempfile.gettempdir())), capture_output=True, text=True
    )
    if tried.returncode:
        return (
            f"--sandbox: bubblewrap cannot make a sandbox here ({tried.stderr.strip()[:200]}); "
            "user namespaces may be disabled: sudo sysctl -w kernel.unprivileged_userns_clone=1, "
            "or on Ubuntu 24.04 kernel.apparmor_restrict_unprivileged_userns=0"
        )
    return None


def mode() -> str:
    """How commands run, for the line the agent starts with: "" when not sandboxed."""
    return (
        "; commands run in a sandbox" + ("" if config.SANDBOX_NETWORK else " with no network")
    ) * config.SANDBOX


def hint(output: str) -> str:
    """For a sandboxed command that failed: what the sandbox refused, so the model need
    not guess."""
    if not config.SANDBOX:
        return ""
    hints = (
        ["outside the workspace the file system is read-only (sandbox)"]
        if "Read-only file system" in output
        else []
    )
    if not config.SANDBOX_NETWORK and NETWORK_FAILED.search(output):
        hints.append(
            "there is no network in the sandbox; the user can allow it with AGENT_SANDBOX_NETWORK=1"
        )
    return "".join(f"\n[{hint}]" for hint in hints)
