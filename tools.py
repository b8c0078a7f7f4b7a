"""The three tools: what the model is shown (TOOLS) and what Python runs (TOOL_MAP).

Each tool does its one thing in its first lines; what guards it is one named call below it. A run
offers DEFAULT_TOOLS, these three as Tool pairs, unless it is given others (agent.run(tools=...)).
run_call() takes one call from its name and arguments to the text the model reads back: the
arguments checked against the schema of a tool the run offers, the person's yes before a command,
every failure a message for the model. Every path is taken relative to the workspace and must
stay inside it. What the model asks for is not trusted (a file it read may have told it what to
do): docs/safety.md says what these limits protect, and what they do not.
"""

import contextlib
import inspect
import json
import os
import re
import stat
import subprocess
import sys
import time
import unicodedata
import uuid
import weakref
from collections.abc import Callable
from pathlib import Path
from typing import NamedTuple

import config
from realworld import own, processes, sandbox, transcripts
from realworld.guards import (
    MAX_DEPTH,
    arguments_line,
    clip,
    joined,
    nested_deeper,
    say,
    shorten,
    visible,
)
from realworld.protected import is_configuration, makes_repository


def _function(name: str, description: str, **parameters: str) -> dict:
    """One entry of TOOLS: a function whose parameters are all required strings."""
    properties = {p: {"type": "string", "description": d} for p, d in parameters.items()}
    schema = {"type": "object", "properties": properties, "required": list(parameters)}
    return {
        "type": "function",
        "function": {"name": name, "description": description, "parameters": schema},
    }


TOOLS = [
    _function(
        "read_file",
        "Read a UTF-8 text file in the workspace.",
        path="File path, relative to the workspace.",
    ),
    _function(
        "write_file",
        "Create or overwrite a text file in the workspace. Missing folders are created.",
        path="File path, relative to the workspace.",
        content="The whole new content of the file.",
    ),
    _function(
        "run_shell",
        "Run a shell command in the workspace folder and return its output (stdout and stderr "
        "together) and exit status. Input is closed; long-running commands are killed after a "
        "timeout. The user may decline to run it.",
        command="The command line to run.",
    ),
]
# read once, at import, when nothing else runs: os.umask can only be read by setting it
UMASK = os.umask(0o022)
os.umask(UMASK)
RUN = re.compile(r"(.)\1{15,}", re.S)  # sixteen or more of one character
ESCAPE = re.compile(r"\\(?:x[0-9a-f]{2}|u[0-9a-f]{4}|U[0-9a-f]{8})")  # as visible() writes them


class ToolError(Exception):
    """A refusal or failure, told to the model as it is."""


def read_file(path: str, *, workdir: Path) -> str:
    """Return the text of a UTF-8 file in the workspace (the head and tail of a long one)."""
    target = resolve(path, workdir)
    with open_regular(path, target, workdir) as f:  # a folder, a FIFO or a device is refused
        return read_text(path, f)  # at most MAX_OUTPUT characters: its head and its tail


def write_file(path: str, content: str, *, workdir: Path) -> str:
    """Write content to a file in the workspace, replacing it whole."""
    text, target = as_text(content), resolve(path, workdir)
    refuse_protected(path, target, workdir)  # configuration: docs/safety.md
    # a new file beside the old one, renamed over it once whole, with the old one's owner and rights
    with replacing(path, target, workdir) as f:
        f.write(text)
    return f"wrote {len(text)} characters to {path}"


def as_text(content) -> str:
    """What write_file writes: content, or a JSON file a small model sent as an object or a list;
    ToolError for anything else."""
    if isinstance(content, (dict, list)):
        return json.dumps(content, indent=2, ensure_ascii=False)
    if not isinstance(content, str):
        raise ToolError(f"content must be a string, not {type(content).__name__}")
    return content


def run_shell(command: str, *, workdir: Path, timeout: float | None = None) -> str:
    """Run a shell command in the workspace; return its output and exit status.

    It runs without asking: the agent asks the person first (consent() below). The output is
    read as it comes and only its head and tail are kept, so a command that prints without end
    cannot fill memory."""
    if not is_command(command):
        raise ToolError(
            "command must be one non-empty string, the command line as typed in a shell"
        )
    if problem := own.overlap(workdir):
        raise ToolError(problem)
    processes.adopt_orphans()
    before, process, configuration = processes.children(os.getpid()), None, None
    # Less than MAX_OUTPUT, leaving room for the timeout message and the exit status: clip()
    # then keeps it whole.
    output = processes.Capture(config.MAX_OUTPUT - 200)
    timeout = timeout or config.SHELL_TIMEOUT
    options = {
        "cwd": workdir,
        "env": processes.shell_env(),
        "stdin": subprocess.DEVNULL,  # a command that reads input gets end-of-file, not a hang
        "stdout": subprocess.PIPE,
        "stderr": subprocess.STDOUT,
        **processes.NEW_PROCESS_GROUP,
    }
    try:
        if config.SANDBOX:  # what sandbox.finish() compares with
            process, configuration = sandbox.start(command, workdir, options)
        else:
            process = subprocess.Popen(command, shell=True, **options)
        # its output read as it comes; TimeoutExpired if it has not ended within timeout
        processes.read_while_running(process, output, timeout)
    except subprocess.TimeoutExpired:
        processes.stop_command(process, before)
        processes.read_rest(process, output)
        cleaned = sandbox.finish(workdir, configuration) if configuration is not None else ""
        raise ToolError(
            f"timed out after {timeout:g} seconds and was killed; output so far:\n{output.text()}"
            + cleaned
        ) from None
    except BaseException:  # Ctrl-C, SIGTERM, SIGHUP: the command must not outlive the agent
        if process:
            processes.stop_command(process, before)
        if configuration is not None:
            sandbox.finish(workdir, configuration)
        raise
    # a process it started in the background may hold the output open
    processes.read_rest(process, output)
    text = output.text()
    if process.returncode:
        text += f"\n[exit status {process.returncode}]{sandbox.hint(text)}"
    if configuration is not None:
        text += sandbox.finish(workdir, configuration)
    return text or "(no output)"


TOOL_MAP = {"read_file": read_file, "write_file": write_file, "run_shell": run_shell}


class Tool(NamedTuple):
    """One tool a run offers (agent.run(tools=...)): its schema, what the model is shown, with the
    function Python runs for it, since a schema alone cannot run. A program's own tool (lesson 08's
    ask_helper) is one more Tool; TOOLS and TOOL_MAP stay as they are."""

    schema: dict
    function: Callable[..., str]


# What a run offers when it is given nothing else: the three tools above. A tuple, which nothing
# changes: a run offers a list of its own (list(DEFAULT_TOOLS)), which a handoff may change.
DEFAULT_TOOLS = tuple(Tool(schema, TOOL_MAP[schema["function"]["name"]]) for schema in TOOLS)


def schemas(tools: list[Tool]) -> list[dict]:
    """What a request shows the model of the tools a run offers: TOOLS, for the three."""
    return [tool.schema for tool in tools]


def functions(tools: list[Tool]) -> dict:
    """What Python runs for the tools a run offers, by name: TOOL_MAP, for the three."""
    return {tool.schema["function"]["name"]: tool.function for tool in tools}


def run_call(
    name: str, arguments: str, tools: list[Tool], given: dict, pause: bool = False
) -> tuple[str | None, bool]:
    """Run one tool call, from its name and arguments (a JSON string) to the text the model reads
    back. Return (result, ok); every failure is a result the model can read. The call and its result
    are shown to the person on stderr. A command that needs a yes nobody can give now (no terminal,
    or pause) is not run: (None, False), and the run pauses (agent.py).

    tools: what the run offers; only those run. given: what the run gives a tool that names it as
    a keyword-only parameter (workdir for the three; a program's own tool may name the rest of the
    run: messages, tools, client, model, yes, transcript); yes: run a command without asking."""
    say(f"  → {name}({arguments_line(arguments, 120)})")
    # What a call returned is kept the moment it returns, in the same statement (run()'s "ran",
    # by the call's id): q in pdb, Ctrl-C or a signal after it cannot make it a call not run.
    ran, key = given.get("ran", {}), in_flight(given.get("messages"), name, arguments)
    ran.clear()  # the call before has its tool message by now: one result kept, not every one
    began = None  # when the tool began, once it has (after any question)
    try:
        args = check_args(name, arguments, tools)
        if asks(name, arguments, key, given):
            if pause or not terminal():
                say("  ⏸ waits for your yes")
                return None, False
            ask(name, args, key)  # the person says yes or no at the terminal; no raises ToolError
        tool_map = functions(tools)  # the run's TOOL_MAP: tools.TOOL_MAP when it offers the three
        kwargs = taken_by(tool_map[name], given)  # what it names of the run: workdir, ...
        # recorded as begun (a --resume after a kill knows it may have run; the page times it)
        transcripts.record(given.get("transcript") if key else None, "tool/started", call_id=key)
        ran[key] = None  # begun: stopped from here on, it may have done some of its work
        began = time.monotonic()
        result, ok = ran[key] = tool_map[name](**args, **kwargs), True
    except ToolError as e:
        result, ok = ran[key] = f"error: {e}", False
    except Exception as e:  # a bug or an OS error in a tool is news for the model, not a crash
        # q in pdb: the person leaves the debugger; a transcript that cannot be written ends the run
        if type(e).__module__ == "bdb" or isinstance(e, transcripts.TranscriptError):
            raise
        result, ok = ran[key] = f"error: {type(e).__name__}: {e}", False
    # the key hidden (a file or a command may show it), at most MAX_OUTPUT long
    result = clip(result)
    took = f" · {round((time.monotonic() - began) * 1000)} ms" if began else ""
    say(f"  {'←' if ok else '✗'} {shorten(result, 160)}{took}")
    return result, ok


def in_flight(messages: list[dict] | None, name: str, arguments: str) -> str | None:
    """The id of the call run_call() runs: the first call of the last reply that has no tool
    message yet (run() answers a reply's calls in their order), where it is this name and these
    arguments; None otherwise (run_call() called on its own)."""
    try:
        last = next(i for i in reversed(range(len(messages))) if messages[i]["role"] != "tool")
        answered = {m["tool_call_id"] for m in messages[last + 1 :]}
        calls = [c for c in messages[last]["tool_calls"] or [] if c["id"] not in answered]
        function = calls[0]["function"]
        same = (function["name"], function["arguments"]) == (name, arguments)
    except (IndexError, KeyError, StopIteration, TypeError):
        return None  # no open call (or no conversation of run()'s: a program's own list)
    return calls[0]["id"] if same else None


def taken_by(function: Callable, given: dict) -> dict:
    """What of given a tool's function names among its keyword-only parameters."""
    return {name: given[name] for name in keyword_only(function) if name in given}


def check_args(name: str, arguments: str, tools: list[Tool] = DEFAULT_TOOLS) -> dict:
    """The call's arguments, checked against the schema of the tool it names among tools (what
    the run offers); ToolError says what is wrong."""
    offered = [t.schema["function"]["name"] for t in tools]  # a subagent's may be fewer
    if name not in offered:
        raise ToolError(f"unknown tool {name!r}; the tools are {', '.join(offered)}")
    # Valid JSON: the client made it so (replies.tool_call()); what the model wrote may be a string.
    if nested_deeper(arguments):  # json.loads would recurse that deep
        raise ToolError(f"arguments are nested more than {MAX_DEPTH} deep")
    args = json.loads(arguments)
    if isinstance(args, str):  # what the model sent was not JSON; it was kept as a JSON string
        raise ToolError(f"arguments are not valid JSON: {shorten(args, 200)}")
    if not isinstance(args, dict):
        raise ToolError(f"arguments must be a JSON object, not {type(args).__name__}")
    expected = parameters(tools)[name]
    missing = [p for p in expected if p not in args]
    unexpected = [p for p in args if p not in expected]
    if missing or unexpected:
        raise ToolError(
            f"{name} takes {', '.join(expected) or 'no arguments'}; missing: "
            f"{', '.join(missing) or 'none'}; unexpected: {', '.join(unexpected) or 'none'}"
        )
    return args


def parameters(tools: list[Tool] | list[dict]) -> dict[str, list[str]]:
    """{tool name: its parameter names} of what tools show the model (Tools or their schemas)."""
    shown = [t.schema if isinstance(t, Tool) else t for t in tools]
    return {
        s["function"]["name"]: list(s["function"].get("parameters", {}).get("properties", {}))
        for s in shown
    }


def terminal() -> bool:
    """Whether a person can be asked: standard input is a terminal (not a pipe, a file, or
    closed)."""
    return bool(sys.stdin) and sys.stdin.isatty()


def needs_yes(name: str, arguments: str, call_id=None) -> bool:
    """Whether a call may run only after the person's yes: a command whose arguments parse, and a
    call the model wrote as text (written_as_text()) that could change anything: any but
    read_file. Arguments that do not parse are refused without asking, so they are never approved
    blindly. Whether this run asks is asks()'s: --yes and AGENT_TEXT_CALLS=run ask less."""
    try:
        if name == "run_shell" or name in TOOL_MAP:
            args = check_args(name, arguments)
        else:  # a program's own tool: its schema is the run's, not known here
            args = json.loads(arguments) if not nested_deeper(arguments) else None
    except (ToolError, ValueError, TypeError, RecursionError):
        return False
    if not isinstance(args, dict) or (name == "run_shell" and not is_command(args["command"])):
        return False
    return name == "run_shell" or (written_as_text(call_id) and name not in READS)


def asks(name: str, arguments: str, call_id, given: dict) -> bool:
    """Whether this run asks the person before the call runs: a command, unless --yes; a call
    the model wrote as text that could change anything, --yes or not, unless AGENT_TEXT_CALLS=run
    (then as a tool call). An approved call (given["approved"], after a pause) asks nothing."""
    if given.get("approved") is True or not needs_yes(name, arguments, call_id):
        return False
    if written_as_text(call_id) and config.TEXT_CALLS != "run":  # "off" read none: a replay's
        return True
    return name == "run_shell" and not given["yes"]


# A call the server did not send as a call, read by the client from the model's text
# (realworld/replies.py): its id, made by the client, begins with this, so that every reader of the
# call (the loop, a pause, --resume, --replay, --show, the page) knows it the one way, from the
# call itself. A server's own call with such an id (none makes one) is asked about as one written
# as text: the mark errs towards asking, never away from it.
TEXT_ID = "call_text_"
READS = {"read_file"}  # the tools whose call changes nothing: one written as text runs unasked


def written_as_text(call_id) -> bool:
    """Whether the call of this id was written by the model as text, not sent as a tool call."""
    return isinstance(call_id, str) and call_id.startswith(TEXT_ID)


def ask(name: str, args: dict, call_id) -> None:
    """Ask the person before the call runs: a command as consent() shows it, any other call as
    ask_before() does, saying so where the model wrote it as text. No raises ToolError."""
    if name == "run_shell":
        consent(args["command"], written_as_text(call_id))
    else:
        ask_before(name, args, written_as_text(call_id))


def declined(name: str, arguments: str, reason: str) -> str:
    """The result of a call the person declined before it could run (after a pause), as
    consent() words it; shown as run_call() shows a call."""
    result = f"error: {declined_by_the_user(reason)}"
    say(f"  → {name}({arguments_line(arguments, 120)})")
    say(f"  ✗ {shorten(result, 160)}")
    return clip(result)


def is_command(command) -> bool:
    """Whether command is one command line: a list would run only its first word under
    shell=True."""
    return isinstance(command, str) and bool(command.strip())


def consent(command: str, from_text: bool = False) -> None:
    """Ask the person before a command runs. Yes returns; anything else raises ToolError
    saying why not. from_text: the model wrote the call as text, and the question says so.

    The whole command is shown, every line, with control characters as escapes: a \\r or an escape
    sequence in it could otherwise draw a harmless line over the one that runs."""
    if not is_command(command):
        return  # run_shell refuses it without running anything
    lines = command.split("\n")
    shown = shown_command(command, *screen())
    count = f"The command above has {len(lines)} lines. " if len(lines) > 1 else ""
    where = " in the sandbox (writes only in the workspace" + (
        ")" if config.SANDBOX_NETWORK else ", no network)"
    )
    said = AS_TEXT if from_text else ""
    answer(f"\n{shown}\n\n{count}{said}Run this command{where if config.SANDBOX else ''}? [y/N] ")


# What the question says of a call the server did not send as a call.
AS_TEXT = "The model wrote this call as text, not as a tool call. "


def ask_before(name: str, args: dict, from_text: bool) -> None:
    """Ask the person before a call that is no command runs (asks()): a file written, or a
    program's own tool, shown whole as consent() shows a command. Yes returns; anything else
    raises ToolError."""
    said = AS_TEXT if from_text else ""
    if name == "write_file" and isinstance(args.get("path"), str):
        text = as_text_of(args["content"])
        shown = shown_command(text, *screen()) if text else "    (nothing)"
        where = visible(args["path"])
        answer(f"\n{shown}\n\n{said}Write these {len(text)} characters to {where}? [y/N] ")
        return
    arguments = json.dumps(args, indent=2, ensure_ascii=False)
    answer(
        f"\n{shown_command(arguments, *screen())}\n\n{said}Run {visible(name)} with these? [y/N] "
    )


def as_text_of(content) -> str:
    """What write_file would write of content, for the question; as it is if it writes nothing."""
    try:
        return as_text(content)
    except ToolError:
        return str(content)


def answer(question: str) -> None:
    """Put the question to the person; yes returns, anything else raises ToolError saying why
    not, with the reason they gave."""
    say(question, end="")
    typed = sys.stdin.readline().strip()
    if typed.lower() in ("y", "yes"):
        return
    first, _, rest = typed.partition(" ")
    # "n use ls -la instead"
    reason = rest.strip() if first.lower().rstrip(",.:;") in ("n", "no") else typed
    raise ToolError(declined_by_the_user(reason))


def declined_by_the_user(reason: str) -> str:
    """What the model reads of a command the person declined, with the reason they gave."""
    return f"declined by the user: {reason}" if reason else "declined by the user"


def shown_command(command: str, columns: int = 80, rows: int = 24) -> str:
    """The command as the consent prompt shows it, on one screen of columns x rows: every invisible
    character an escape (a tab too), a run of one character as its count, and, of a command too
    long for the screen, its first and last lines and the start and end of a long line, with what
    lies between said: how many lines and characters, and which invisible ones. What runs first
    and what runs last are both in sight when the person answers."""
    # A line may take two rows; the indent, the blank lines and the question take the rest.
    width, most = 2 * max(40, columns) - 5, max(6, (rows - 6) // 2)
    lines = command.split("\n")
    if len(lines) > most:
        head, tail = lines[: most - most // 3 - 1], lines[len(lines) - most // 3 :]
        hidden = "\n".join(lines[len(head) : len(lines) - len(tail)])
        lines = [*head, left_out(hidden, f"{hidden.count(chr(10)) + 1} lines, "), *tail]
    return "\n".join("    " + shown_line(line, width) for line in lines)


def shown_line(line: str, width: int) -> str:
    """One line of the command, escaped, its runs counted, at most width characters."""
    if line.startswith("[...") and line.endswith("...]"):  # left_out()'s own line
        return line
    text = visible(RUN.sub(run_length, line)).replace("\t", "\\t")
    if columns(text) <= width:
        return text
    keep = max(10, width - 60)
    head = fitting(text, keep * 2 // 3)
    tail = fitting(text[::-1], keep // 3)[::-1]
    return head + left_out(text[len(head) : len(text) - len(tail)], "") + tail


def columns(text: str) -> int:
    """The terminal columns text takes: a wide or full-width character (CJK) takes two."""
    return sum(2 if unicodedata.east_asian_width(c) in "WF" else 1 for c in text)


def fitting(text: str, width: int) -> str:
    """The longest start of text that takes at most width columns."""
    used = 0
    for at, character in enumerate(text):
        used += 2 if unicodedata.east_asian_width(character) in "WF" else 1
        if used > width:
            return text[:at]
    return text


def left_out(hidden: str, lines: str) -> str:
    """What stands for a part of the command not shown: its size, and the invisible characters
    in it, as escapes."""
    escapes = sorted(set(ESCAPE.findall(hidden)) | {visible(c) for c in hidden if visible(c) != c})
    among = f"; among them {', '.join(escapes[:24])}" if escapes else ""
    among += f" and {len(escapes) - 24} more" if len(escapes) > 24 else ""
    return f"[... {lines}{len(hidden)} characters left out{among} ...]"


def run_length(match: re.Match) -> str:
    """A run of one character, as its count: it could push what follows off the screen."""
    character = match.group(1)
    shown = "spaces" if character == " " else f"times {visible(character)!r}".replace("\\\\", "\\")
    return f"[{len(match.group())} {shown}]"


def screen() -> tuple[int, int]:
    """The columns and rows of the terminal the person answers at (80 x 24 if it says none)."""
    try:
        size = os.get_terminal_size(sys.stdin.fileno())
    except OSError:
        return 80, 24
    return size.columns or 80, size.lines or 24


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


# --- What the tools do around their one line: the checks and the care -----------------------------


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


# --- Files: opened so that a symlink swapped in after resolve() cannot lead out -------------------
# resolve() follows every symlink, so the path it returns has none. Opening it one folder at a time
# with O_NOFOLLOW, each relative to the folder before (dir_fd), fails if a symlink has been swapped
# in since. Windows has no dir_fd: there the path is used whole, and the check and the use can race.

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


def keyword_only(function: Callable) -> tuple[str, ...]:
    """The names of a function's keyword-only parameters, found once a tool (inspect.signature()
    is slow); a callable that cannot be a weak key is asked every time."""
    with contextlib.suppress(KeyError, TypeError):
        return KEYWORD_ONLY[function]
    named = inspect.signature(function).parameters.values()
    found = tuple(p.name for p in named if p.kind is p.KEYWORD_ONLY)
    with contextlib.suppress(TypeError):
        KEYWORD_ONLY[function] = found
    return found


KEYWORD_ONLY = weakref.WeakKeyDictionary()  # a tool's function: its keyword-only parameters
