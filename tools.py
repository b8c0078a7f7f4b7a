"""The three tools: what the model is shown (TOOLS) and what Python runs (TOOL_MAP).

Every path is taken relative to the workspace and must stay inside it. A tool that
cannot do what was asked raises ToolError; its message goes to the model. What the
model asks for is not trusted (a file it read may have told it what to do): the
docs/safety.md says what these limits protect, and what they do not.
"""

import codecs
import contextlib
import functools
import json
import os
import re
import shutil
import signal
import stat
import subprocess
import sys
import tempfile
import threading
import uuid
from pathlib import Path

import config
from text import clip, joined, say, shorten, visible

KILL_GRACE = 5  # seconds to collect the output of a killed command
UMASK = os.umask(0o022)  # read once, at import, when nothing else runs: os.umask can only be read by setting it
os.umask(UMASK)
SECRET_NAMES = ("AGENT_API_KEY", "DEEPSEEK_API_KEY", "OPENAI_API_KEY")
SPACES = re.compile(r" {16,}")


class ToolError(Exception):
    """A refusal or failure, told to the model as it is."""


def run_call(name: str, arguments: str, workdir: Path, yes: bool) -> tuple[str, bool]:
    """Run one tool call, from its name and arguments (a JSON string) to the text the model reads back.
    Return (result, ok); every failure is a result the model can read."""
    try:
        args = check_args(name, arguments)
        if name == "run_shell" and not yes:
            consent(args["command"])  # the person says yes or no at the terminal; no raises ToolError
        result, ok = TOOL_MAP[name](**args, workdir=workdir), True
    except ToolError as e:
        result, ok = f"error: {e}", False
    except Exception as e:  # a bug or an OS error in a tool is news for the model, not a crash
        if type(e).__module__ == "bdb":  # q in pdb: the person leaves the debugger; no tool failed
            raise
        result, ok = f"error: {type(e).__name__}: {e}", False
    return clip(result), ok  # the key blanked out (a file or a command may show it), at most MAX_OUTPUT long


def check_args(name: str, arguments: str) -> dict:
    """The call's arguments, checked against what TOOLS shows the model; ToolError says what is wrong."""
    if name not in TOOL_MAP:
        raise ToolError(f"unknown tool {name!r}; the tools are {', '.join(TOOL_MAP)}")
    args = json.loads(arguments)  # valid JSON: servers.reply_message() made it so
    if isinstance(args, str):  # what the model sent was not JSON; it was kept as a JSON string
        raise ToolError(f"arguments are not valid JSON: {shorten(args, 200)}")
    if not isinstance(args, dict):
        raise ToolError(f"arguments must be a JSON object, not {type(args).__name__}")
    expected = parameters(name)
    missing = [p for p in expected if p not in args]
    unexpected = [p for p in args if p not in expected]
    if missing or unexpected:
        raise ToolError(
            f"{name} takes {', '.join(expected)}; "
            f"missing: {', '.join(missing) or 'none'}; unexpected: {', '.join(unexpected) or 'none'}"
        )
    return args


def read_file(path: str, *, workdir: Path) -> str:
    """Return the text of a UTF-8 file in the workspace (the head and tail of a long one)."""
    target = resolve(path, workdir)
    if target.is_dir():
        names = sorted(p.name + "/" * p.is_dir() for p in target.iterdir())
        raise ToolError(f"{path} is a folder, not a file; it holds: {', '.join(names[:50]) or 'nothing'}")
    if not target.exists():
        raise ToolError(f"{path} does not exist")
    # O_NONBLOCK: a FIFO opens at once instead of waiting for a writer; it is refused below.
    with os.fdopen(open_inside(workdir, target, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0)), "rb") as f:
        size = os.fstat(f.fileno())
        if not stat.S_ISREG(size.st_mode):
            raise ToolError(f"{path} is not a regular file (a FIFO, socket or device); it was not read")
        # clip() keeps MAX_OUTPUT // 2 characters of each end, at most 4 bytes each in UTF-8: read no more.
        limit = config.MAX_OUTPUT
        head, tail = f.read(2 * limit), b""
        if size.st_size > 4 * limit:
            f.seek(-2 * limit, os.SEEK_END)
            tail = f.read()
        else:
            head += f.read()
    if b"\0" not in head + tail:
        if tail:
            start = head.decode("utf-8", errors="replace")[: limit // 2]  # the ends may cut a character
            end = tail.decode("utf-8", errors="replace")[-(limit // 2) :]
            return joined(start, f"{size.st_size - len(start.encode()) - len(end.encode())} bytes", end)
        with contextlib.suppress(UnicodeDecodeError):
            return head.decode("utf-8")
    raise ToolError(f"{path} is a binary file ({size.st_size} bytes), not UTF-8 text")


def write_file(path: str, content: str, *, workdir: Path) -> str:
    """Write content to a file in the workspace, replacing it whole."""
    if isinstance(content, (dict, list)):  # a small model's way of writing a JSON file
        content = json.dumps(content, indent=2, ensure_ascii=False)
    if not isinstance(content, str):
        raise ToolError(f"content must be a string, not {type(content).__name__}")
    target = resolve(path, workdir)
    if is_configuration(target.relative_to(Path(workdir).resolve())):
        raise ToolError(
            f"{path} is configuration ({'a .env file' if '.env' in target.name.lower() else 'inside a .git folder'}): "
            "not written, since it could send the key elsewhere or run commands later. Ask the user to edit it."
        )
    if makes_repository(Path(workdir).resolve(), target):
        raise ToolError(
            f"{path} would give its folder what git looks for in a repository (HEAD beside objects/ and refs/, or "
            "beside commondir): not written, since git would then obey that folder's config whenever anyone runs "
            "git there. Ask the user."
        )
    if target.is_dir():
        raise ToolError(f"{path} is a folder; give a file path")
    folder = open_folder(workdir, target.parent)
    # A temporary file beside the target, then one rename: a reader never sees half a file.
    temporary, fd = at(folder, f".{target.name}.{uuid.uuid4().hex[:8]}.tmp")
    final, _ = at(folder, target.name)
    try:
        remove_temporaries(folder, target.name)
        try:
            old = os.stat(final, dir_fd=fd, follow_symlinks=False)
        except FileNotFoundError:
            old = None
        flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0)
        # Owner-only from the moment it exists: never more readable than the file it replaces, while written.
        with open(os.open(temporary, flags, 0o600, dir_fd=fd), "w", encoding="utf-8", newline="") as f:
            f.write(content)
        if old and hasattr(os, "chown"):  # the old file's owner and group, where this process may give them
            with contextlib.suppress(PermissionError):
                os.chown(temporary, old.st_uid, old.st_gid, dir_fd=fd, follow_symlinks=False)
        os.chmod(temporary, stat.S_IMODE(old.st_mode) if old else 0o666 & ~UMASK, dir_fd=fd)
        os.replace(temporary, final, src_dir_fd=fd, dst_dir_fd=fd)
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(temporary, dir_fd=fd)
        if fd is not None:
            os.close(fd)
    return f"wrote {len(content)} characters to {path}"


def remove_temporaries(folder: int | Path, name: str) -> None:
    """Remove what killed writes of the file name left in its folder, so that they do not collect."""
    left = re.compile(rf"\.{re.escape(name)}\.[0-9a-f]{{8}}\.tmp")
    for entry in os.listdir(folder):
        if left.fullmatch(entry):
            path, fd = at(folder, entry)
            with contextlib.suppress(OSError):
                os.unlink(path, dir_fd=fd)


def makes_repository(root: Path, target: Path) -> bool:
    """Whether writing target would give a folder of the workspace what git takes for a repository: HEAD,
    objects/ and refs/ side by side, or HEAD and a commondir file that names them (git's setup.c,
    is_git_directory()). Git discovers such a folder as a bare repository and obeys its config (core.fsmonitor
    runs a command) whenever anyone runs git in it."""
    child = target
    for folder in [target.parent, *target.parent.parents]:
        if not folder.is_relative_to(root):
            return False
        names = {entry.name.lower() for entry in folder.iterdir()} if folder.is_dir() else set()
        names.add(child.name.lower())
        if {"head", "objects", "refs"} <= names or {"head", "commondir"} <= names:  # commondir names the rest
            return True
        child = folder
    return False


def is_configuration(relative: Path) -> bool:
    """Whether a path inside the workspace is a .env file or inside a .git folder: the agent's and git's
    configuration. A model that could write them could send the key to its own server on the next run
    (AGENT_BASE_URL in .env) or run a command when git next runs (core.fsmonitor in .git/config), or when
    direnv next enters the folder (.envrc)."""
    # .GIT is .git on a case-insensitive file system, and Windows drops a name's trailing dots and spaces.
    parts = [part.lower().rstrip(". ") for part in relative.parts] or [""]
    return ".git" in parts or parts[-1] in (".env", ".envrc") or parts[-1].startswith(".env.")


def run_shell(command: str, *, workdir: Path, timeout: float | None = None) -> str:
    """Run a shell command in the workspace; return its output and exit status.

    It runs without asking: the agent asks the person first (consent() below). The output is read as it
    comes and only its head and tail are kept, so a command that prints without end cannot fill memory."""
    if not is_command(command):
        raise ToolError("command must be one non-empty string, the command line as typed in a shell")
    adopt_orphans()
    # Less than MAX_OUTPUT, leaving room for the timeout message and the exit status: clip() then keeps it whole.
    before, process, output = children(os.getpid()), None, Capture(config.MAX_OUTPUT - 200)
    timeout = timeout or config.SHELL_TIMEOUT
    try:
        process = subprocess.Popen(
            sandboxed(command, workdir) if config.SANDBOX else command,
            shell=not config.SANDBOX,
            cwd=workdir,
            env=shell_env(),
            stdin=subprocess.DEVNULL,  # a command that reads input gets end-of-file, not a hang
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            **NEW_PROCESS_GROUP,
        )
        reader = threading.Thread(target=output.read_all, args=(process.stdout,), daemon=True)
        reader.start()
        process.wait(timeout)
    except subprocess.TimeoutExpired:
        end_command(process, before)
        reader.join(KILL_GRACE)
        raise ToolError(
            f"timed out after {timeout:g} seconds and was killed; output so far:\n{output.text()}"
        ) from None
    except BaseException:  # Ctrl-C, SIGTERM, SIGHUP: the command must not outlive the agent
        if process:
            end_command(process, before)
        raise
    reader.join(KILL_GRACE)  # a process it started in the background may hold the output open
    text = output.text()
    if process.returncode:
        text += f"\n[exit status {process.returncode}]{sandbox_hint(text)}"
    return text or "(no output)"


class Capture:
    """A command's output as it comes: its first and last characters, and how many there were in all."""

    def __init__(self, limit: int):
        self.limit, self.head, self.tail, self.count = limit, "", "", 0
        self.decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")  # output may be in any encoding

    def read_all(self, pipe) -> None:
        for chunk in iter(lambda: pipe.read1(65536), b""):
            self.add(self.decoder.decode(chunk))
        self.add(self.decoder.decode(b"", final=True))

    def add(self, text: str) -> None:
        self.count += len(text)
        if len(self.head) < self.limit:
            self.head += text[: self.limit - len(self.head)]
        self.tail = (self.tail + text)[-self.limit :]

    def text(self) -> str:
        """All of it, or its head and tail as clip() keeps them."""
        if self.count <= self.limit:
            return self.head
        half = self.limit // 2
        return joined(self.head[:half], f"{self.count - 2 * half} characters", self.tail[-half:])


def is_command(command) -> bool:
    """Whether command is one command line: a list would run only its first word under shell=True."""
    return isinstance(command, str) and bool(command.strip())


def consent(command: str) -> None:
    """Ask the person before a command runs. Yes returns; anything else raises ToolError saying why not.

    The whole command is shown, every line, with control characters as escapes: a \\r or an escape
    sequence in it could otherwise draw a harmless line over the one that runs."""
    if not is_command(command):
        return  # run_shell refuses it without running anything
    if not sys.stdin.isatty():  # nobody to ask: decline at once rather than wait on a pipe
        say("agent: declined a shell command: nobody could be asked; pass --yes to allow them")
        raise ToolError("declined: the user could not be asked (no terminal) and did not start the agent with --yes")
    lines = command.split("\n")
    # Every invisible character is an escape (a tab too), and a long run of spaces, which could push the start
    # of a line off the screen, is shown as its length: the person reads what runs.
    shown = "\n".join(
        "    " + SPACES.sub(lambda m: f"[{len(m.group())} spaces]", visible(line)).replace("\t", "\\t")
        for line in lines
    )
    count = f"The command above has {len(lines)} lines. " if len(lines) > 1 else ""
    where = " in the sandbox (writes only in the workspace" + (")" if config.SANDBOX_NETWORK else ", no network)")
    say(f"\n{shown}\n\n{count}Run this command{where if config.SANDBOX else ''}? [y/N] ", end="")
    answer = sys.stdin.readline().strip()
    if answer.lower() in ("y", "yes"):
        return
    first, _, rest = answer.partition(" ")
    reason = rest.strip() if first.lower().rstrip(",.:;") in ("n", "no") else answer  # "n use ls -la instead"
    raise ToolError(f"declined by the user: {reason}" if reason else "declined by the user")


def resolve(path: str, workdir: Path) -> Path:
    """The real path inside the workspace that path names; symlinks are followed first."""
    if not isinstance(path, str) or not path.strip() or "\0" in path:
        raise ToolError("path must be a non-empty string")
    root = Path(workdir).resolve()
    target = (root / path).resolve()
    if not target.is_relative_to(root):
        raise ToolError(f"{path} is outside the workspace ({root}); use a path inside it")
    return target


# --- The sandbox: --sandbox confines every command with the operating system -----------------------
# As Codex CLI and Claude Code do on Linux, with bubblewrap: the whole file system read-only but the workspace,
# a private /tmp, no network, the agent's .env and transcripts hidden, a new PID namespace and session. What it
# does not stop is in docs/safety.md (The sandbox). macOS has sandbox-exec, with a profile to the same effect.

NETWORK_FAILED = re.compile(r"Network is unreachable|Temporary failure in name resolution|Could not resolve host|"
                            r"Name or service not known|Connection refused|No route to host")  # fmt: skip


def sandboxed(command: str, workdir: Path) -> list[str]:
    """The command line that runs command in the sandbox, in the workspace."""
    root = str(Path(workdir).resolve())
    secrets = [path for path in (config.HERE / ".env", config.RUNS) if path.exists() and root != str(path)]
    if sys.platform == "darwin":
        return ["sandbox-exec", "-p", seatbelt_profile(root, secrets), "/bin/sh", "-c", command]
    hidden = [arg for path in secrets for arg in (("--tmpfs", str(path)) if path.is_dir() else
                                                    ("--ro-bind", "/dev/null", str(path)))]  # fmt: skip
    # The private /tmp would hide a virtual environment or a PATH folder that lives there: they stay, read-only.
    kept = {sys.prefix, *os.environ.get("PATH", "").split(os.pathsep)}
    kept = [arg for path in sorted(kept) if path.startswith("/tmp/") and os.path.isdir(path)
            for arg in ("--ro-bind", path, path)]  # fmt: skip
    network = ["--share-net"] if config.SANDBOX_NETWORK else []
    return ["bwrap", "--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc", "--tmpfs", "/tmp", *kept,
            "--bind", root, root, *hidden, "--unshare-all", *network, "--die-with-parent", "--new-session",
            "--chdir", root, "--", "/bin/sh", "-c", command]  # fmt: skip


def seatbelt_profile(root: str, secrets: list[Path]) -> str:
    """macOS: a sandbox-exec profile to the same effect (untested here: no macOS in CI)."""
    denied = " ".join(f'({"subpath" if p.is_dir() else "literal"} "{p}")' for p in secrets)
    network = "(allow network*)" if config.SANDBOX_NETWORK else "(deny network*)"
    return (f'(version 1)(allow default)(deny file-write*)(allow file-write* (subpath "{root}") '
            f'(subpath "/private/tmp") (subpath "/private/var/folders") (literal "/dev/null")) {network}'
            + (f"(deny file-read* {denied})" if denied else ""))  # fmt: skip


def sandbox_problem() -> str | None:
    """Why --sandbox cannot work on this machine, in one line that says how to fix it; None if it can."""
    if sys.platform == "darwin":
        return None if os.path.exists("/usr/bin/sandbox-exec") else "--sandbox needs /usr/bin/sandbox-exec (macOS)"
    if not sys.platform.startswith("linux"):
        return f"--sandbox is not available on {sys.platform}: it needs Linux (bubblewrap) or macOS (sandbox-exec)"
    if not shutil.which("bwrap"):
        return ("--sandbox needs bubblewrap, which is not installed: sudo apt-get install bubblewrap "
                "(Fedora: sudo dnf install bubblewrap)")  # fmt: skip
    tried = subprocess.run(sandboxed("true", Path(tempfile.gettempdir())), capture_output=True, text=True)
    if tried.returncode:
        return (f"--sandbox: bubblewrap cannot make a sandbox here ({tried.stderr.strip()[:200]}); user namespaces "
                "may be disabled: sudo sysctl -w kernel.unprivileged_userns_clone=1, or on Ubuntu 24.04 "
                "kernel.apparmor_restrict_unprivileged_userns=0")  # fmt: skip
    return None


def sandbox_mode() -> str:
    """How commands run, for the line the agent starts with: "" when not sandboxed."""
    return ("; commands run in a sandbox" + ("" if config.SANDBOX_NETWORK else " with no network")) * config.SANDBOX


def sandbox_hint(output: str) -> str:
    """For a sandboxed command that failed: what the sandbox refused, so the model need not guess."""
    if not config.SANDBOX:
        return ""
    hints = (
        ["outside the workspace the file system is read-only (sandbox)"] if "Read-only file system" in output else []
    )
    if not config.SANDBOX_NETWORK and NETWORK_FAILED.search(output):
        hints.append("there is no network in the sandbox; the user can allow it with AGENT_SANDBOX_NETWORK=1")
    return "".join(f"\n[{hint}]" for hint in hints)


# --- Files: opened so that a symlink swapped in after resolve() cannot lead out -------------------
# resolve() follows every symlink, so the path it returns has none. Opening it one folder at a time with
# O_NOFOLLOW, each relative to the folder before (dir_fd), fails if a symlink has been swapped in since.
# Windows has no dir_fd: there the path is used whole, and the check and the use can race.

DIR_FD = os.open in os.supports_dir_fd and os.rename in os.supports_dir_fd  # os.replace is os.rename


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
    """os.open a file that resolve() found inside the workspace, refusing a symlink swapped in since."""
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
    """(path, dir_fd) for an os function: name inside an open folder, or the whole path where there is no dir_fd."""
    return (name, folder) if isinstance(folder, int) else (str(Path(folder) / name), None)


# --- Processes: no command outlives its limits -----------------------------------------------------


def shell_env() -> dict[str, str]:
    """The environment minus the API key (no variable named for a key, and none whose value holds it), plus a git
    setting that ignores a bare repository git was not pointed to (safe.bareRepository, git 2.38 and later)."""
    key = config.HIDDEN_KEY
    env = {k: v for k, v in os.environ.items() if k not in SECRET_NAMES and not (key and key in v)}
    count = int(env["GIT_CONFIG_COUNT"]) if env.get("GIT_CONFIG_COUNT", "").isdigit() else 0
    env.update({"GIT_CONFIG_COUNT": str(count + 1), f"GIT_CONFIG_KEY_{count}": "safe.bareRepository",
                f"GIT_CONFIG_VALUE_{count}": "explicit"})  # fmt: skip
    return env


@functools.cache  # once is enough: the setting lasts as long as the process
def adopt_orphans() -> None:
    """On Linux, make the agent the parent of every orphan its commands leave (a child subreaper), so that
    one started with setsid or nohup, or by a shell that has exited, can still be found and ended."""
    if sys.platform.startswith("linux"):
        import ctypes

        ctypes.CDLL(None, use_errno=True).prctl(36, 1, 0, 0, 0)  # PR_SET_CHILD_SUBREAPER


def children(pid: int) -> set[int]:
    """The processes whose parent is pid (Linux's /proc; elsewhere none are known)."""
    found = set()
    for task in Path(f"/proc/{pid}/task").glob("*/children"):
        with contextlib.suppress(OSError):
            found |= {int(child) for child in task.read_text().split()}
    return found


def descendants(pid: int) -> set[int]:
    """pid's children, their children, and so on."""
    found, todo = set(), [pid]
    while todo:
        for child in children(todo.pop()) - found:
            found.add(child)
            todo.append(child)
    return found


def end_command(process: subprocess.Popen, before: set[int]) -> None:
    """End the command, every process it started, also those that left its process group (setsid), and
    every orphan it left to the agent since it started (those in before were there already)."""
    end_processes(lambda: descendants(process.pid) | (children(os.getpid()) - before - {process.pid}), process)
    process.wait()


def end_all() -> None:
    """At exit: end every process a command started that is still running (on Linux, where they are known)."""
    end_processes(lambda: descendants(os.getpid()))


def end_processes(find, command: subprocess.Popen | None = None) -> None:
    """Kill what find() returns (and the command's process group), round after round until nothing is
    left: each round ends what the round before could not see; a fork bomb stops at the tenth."""
    for _ in range(10):
        alive = find()
        if command:
            kill_tree(command)
        for pid in alive:
            kill(pid)
        if not alive:
            return


def kill(pid: int) -> None:
    """SIGKILL one process and its process group, if it still exists; then reap it if it was the agent's."""
    for end in (os.kill, getattr(os, "killpg", None)):
        with contextlib.suppress(OSError, TypeError):
            end(pid, getattr(signal, "SIGKILL", signal.SIGTERM))
    with contextlib.suppress(OSError, AttributeError):
        os.waitpid(pid, os.WNOHANG)


if os.name == "nt":
    NEW_PROCESS_GROUP = {"creationflags": subprocess.CREATE_NEW_PROCESS_GROUP}

    def kill_tree(process: subprocess.Popen) -> None:
        """End the command and every process it started (Windows has no killpg)."""
        subprocess.run(["taskkill", "/F", "/T", "/PID", str(process.pid)], capture_output=True)

else:
    NEW_PROCESS_GROUP = {"start_new_session": True}

    def kill_tree(process: subprocess.Popen) -> None:
        """End the command and every process it started: its whole process group."""
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(process.pid, signal.SIGKILL)


def _function(name: str, description: str, **parameters: str) -> dict:
    """One entry of TOOLS: a function whose parameters are all required strings."""
    properties = {p: {"type": "string", "description": d} for p, d in parameters.items()}
    schema = {"type": "object", "properties": properties, "required": list(parameters)}
    return {"type": "function", "function": {"name": name, "description": description, "parameters": schema}}


TOOLS = [
    _function("read_file", "Read a UTF-8 text file in the workspace.", path="File path, relative to the workspace."),
    _function(
        "write_file",
        "Create or overwrite a text file in the workspace. Missing folders are created.",
        path="File path, relative to the workspace.",
        content="The whole new content of the file.",
    ),
    _function(
        "run_shell",
        "Run a shell command in the workspace folder and return its output (stdout and stderr together) "
        "and exit status. Input is closed; long-running commands are killed after a timeout. "
        "The user may decline to run it.",
        command="The command line to run.",
    ),
]


def parameters(name: str) -> list[str]:
    """The parameter names TOOLS shows the model for one tool."""
    return next(list(t["function"]["parameters"]["properties"]) for t in TOOLS if t["function"]["name"] == name)


TOOL_MAP = {"read_file": read_file, "write_file": write_file, "run_shell": run_shell}
