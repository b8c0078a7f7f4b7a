"""The three tools: what the model is shown (TOOLS) and what Python runs (TOOL_MAP).

Every path is taken relative to the workspace and must stay inside it. A tool
that cannot do what was asked raises ToolError; its message goes to the model.
"""

import contextlib
import json
import os
import signal
import stat
import subprocess
import sys
import uuid
from pathlib import Path

import config

WORKDIR = config.WORKDIR  # the default workspace; --workdir gives another, passed in as workdir=
SHELL_TIMEOUT = config.SHELL_TIMEOUT
KILL_GRACE = 5  # seconds to collect the output of a killed command
MAX_OUTPUT = config.MAX_OUTPUT
SECRET_NAMES = ("AGENT_API_KEY", "DEEPSEEK_API_KEY", "OPENAI_API_KEY")


class ToolError(Exception):
    """A refusal or failure, told to the model as it is."""


def read_file(path: str, *, workdir: Path = WORKDIR) -> str:
    """Return the text of a UTF-8 file in the workspace."""
    target = resolve(path, workdir)
    if target.is_dir():
        names = sorted(p.name + "/" * p.is_dir() for p in target.iterdir())
        raise ToolError(f"{path} is a folder, not a file; it holds: {', '.join(names[:50]) or 'nothing'}")
    if not target.exists():
        raise ToolError(f"{path} does not exist")
    data = target.read_bytes()
    if b"\0" not in data:
        with contextlib.suppress(UnicodeDecodeError):
            return data.decode("utf-8")
    raise ToolError(f"{path} is a binary file ({len(data)} bytes), not UTF-8 text")


def write_file(path: str, content: str, *, workdir: Path = WORKDIR) -> str:
    """Write content to a file in the workspace, replacing it whole."""
    if isinstance(content, (dict, list)):  # a small model's way of writing a JSON file
        content = json.dumps(content, indent=2, ensure_ascii=False)
    if not isinstance(content, str):
        raise ToolError(f"content must be a string, not {type(content).__name__}")
    target = resolve(path, workdir)
    if target.is_dir():
        raise ToolError(f"{path} is a folder; give a file path")
    target.parent.mkdir(parents=True, exist_ok=True)
    # A temporary file beside the target, then one rename: a reader never sees half a file.
    temporary = target.with_name(f".{target.name}.{uuid.uuid4().hex[:8]}.tmp")
    try:
        with open(temporary, "x", encoding="utf-8", newline="") as f:
            f.write(content)
        if target.exists():
            os.chmod(temporary, stat.S_IMODE(target.stat().st_mode))
        os.replace(temporary, target)
    finally:
        temporary.unlink(missing_ok=True)
    return f"wrote {len(content)} characters to {path}"


def run_shell(command: str, *, workdir: Path = WORKDIR, timeout: float = SHELL_TIMEOUT) -> str:
    """Run a shell command in the workspace; return its output and exit status.

    It runs without asking: the agent asks the person first (consent() below)."""
    if not is_command(command):
        raise ToolError("command must be one non-empty string, the command line as typed in a shell")
    process = subprocess.Popen(
        command,
        shell=True,
        cwd=workdir,
        env=shell_env(),
        stdin=subprocess.DEVNULL,  # a command that reads input gets end-of-file, not a hang
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        **NEW_PROCESS_GROUP,
    )
    try:
        output, _ = process.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        kill_tree(process)
        try:
            output, _ = process.communicate(timeout=KILL_GRACE)
        except subprocess.TimeoutExpired as e:  # a process that left the group (setsid) holds the output open
            output = e.output or b""
        raise ToolError(
            f"timed out after {timeout:g} seconds and was killed; output so far:\n{decode(output)}"
        ) from None
    except BaseException:  # Ctrl-C: the command must not outlive the agent
        kill_tree(process)
        process.wait()
        raise
    text = decode(output)
    if process.returncode:
        text += f"\n[exit status {process.returncode}]"
    return text or "(no output)"


def is_command(command) -> bool:
    """Whether command is one command line: a list would run only its first word under shell=True."""
    return isinstance(command, str) and bool(command.strip())


def consent(command: str) -> str | None:
    """Ask the person before a command runs. None means yes; otherwise why not, for the model."""
    if not sys.stdin.isatty():  # nobody to ask: decline at once rather than wait on a pipe
        print("agent: declined a shell command: nobody could be asked; pass --yes to allow them", file=sys.stderr)
        return "declined: the user could not be asked (no terminal) and did not start the agent with --yes"
    sys.stderr.write(f"\n    {command}\n\nRun this command? [y/N] ")
    sys.stderr.flush()
    answer = sys.stdin.readline().strip()
    if answer.lower() in ("y", "yes"):
        return None
    first, _, rest = answer.partition(" ")
    reason = rest.strip() if first.lower().rstrip(",.:;") in ("n", "no") else answer  # "n use ls -la instead"
    return f"declined by the user: {reason}" if reason else "declined by the user"


def resolve(path: str, workdir: Path) -> Path:
    """The real path inside the workspace that path names; symlinks are followed first."""
    if not isinstance(path, str) or not path.strip():
        raise ToolError("path must be a non-empty string")
    root = Path(workdir).resolve()
    target = (root / path).resolve()
    if not target.is_relative_to(root):
        raise ToolError(f"{path} is outside the workspace ({root}); use a path inside it")
    return target


def shell_env() -> dict[str, str]:
    """The environment minus the API key, so that `env` cannot show it to the model."""
    key = config.API_KEY
    return {k: v for k, v in os.environ.items() if k not in SECRET_NAMES and not (key and v == key)}


def decode(output: bytes) -> str:
    """Command output as text, whatever its encoding."""
    return output.decode("utf-8", errors="replace")


if os.name == "nt":
    NEW_PROCESS_GROUP = {"creationflags": subprocess.CREATE_NEW_PROCESS_GROUP}

    def kill_tree(process: subprocess.Popen) -> None:
        """End the command and every process it started (Windows has no killpg)."""
        subprocess.run(["taskkill", "/F", "/T", "/PID", str(process.pid)], capture_output=True)

else:
    NEW_PROCESS_GROUP = {"start_new_session": True}

    def kill_tree(process: subprocess.Popen) -> None:
        """End the command and every process it started: its whole process group."""
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGKILL)


def clip(text: str, limit: int = MAX_OUTPUT) -> str:
    """Keep at most limit characters: the head and the tail, and say what was left out."""
    if len(text) <= limit:
        return text
    head, tail = text[: limit // 2], text[-(limit // 2) :]
    return f"{head}\n[... {len(text) - len(head) - len(tail)} characters left out ...]\n{tail}"


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
