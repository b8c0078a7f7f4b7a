"""The three tools: what the model is shown (TOOLS) and what Python runs (TOOL_MAP).

Each tool does its one thing in a few lines; what guards it is one named call into realworld/:
workspace.py keeps the file tools inside the workspace, commands.py runs a command with bounds,
consent.py asks the person's yes. run_call() takes one call from its name and arguments to the
text the model reads back; every failure is a message for the model. What the model asks for is
not trusted (a file it read may have told it what to do): docs/safety.md says what these limits
protect, and what they do not.
"""

import json
import time
from collections.abc import Callable
from pathlib import Path
from typing import NamedTuple

from realworld import commands, transcripts, workspace
from realworld.calls import ToolError, in_flight, parameters, required, taken_by
from realworld.consent import ask, asks, terminal
from realworld.guards import MAX_DEPTH, arguments_line, clip, nested_deeper, say, shorten


def _function(name: str, description: str, optional: tuple = (), **parameters: str) -> dict:
    """One entry of TOOLS: a function whose parameters are strings, required but the optional."""
    properties = {p: {"type": "string", "description": d} for p, d in parameters.items()}
    required = [p for p in parameters if p not in optional]
    schema = {"type": "object", "properties": properties, "required": required}
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
        "Create or overwrite a text file in the workspace. Missing folders are created. For a "
        "small change to a file, prefer an edit: give old, the exact text to change, which must "
        "stand in one place in the file, and content replaces just that text.",
        optional=("old",),
        path="File path, relative to the workspace.",
        content="The whole new content of the file; with old, the text that replaces old.",
        old="The exact text in the file to replace with content. Leave it out to write it whole.",
    ),
    _function(
        "run_shell",
        "Run a shell command in the workspace folder and return its output (stdout and stderr "
        "together) and exit status. Input is closed; long-running commands are killed after a "
        "timeout. The user may decline to run it.",
        command="The command line to run.",
    ),
]


def read_file(path: str, *, workdir: Path) -> str:
    """Return the text of a UTF-8 file in the workspace (the head and tail of a long one)."""
    target = workspace.resolve(path, workdir)
    # a folder, a FIFO or a device is refused; at most MAX_OUTPUT characters: its head and its tail
    with workspace.open_regular(path, target, workdir) as f:
        return workspace.read_text(path, f)


def write_file(path: str, content: str, old: str | None = None, *, workdir: Path) -> str:
    """Write content to a file in the workspace, replacing it whole; given old, replace the one
    place where old stands in the file with content (an edit)."""
    text, target = workspace.as_text(content), workspace.resolve(path, workdir)
    workspace.refuse_protected(path, target, workdir)  # configuration: docs/safety.md
    if old is not None:  # the file as it is, old's one place replaced: nowhere or twice refuses
        text = workspace.edited(path, target, workdir, old, text)
    # a new file beside the old one, renamed over it once whole, with the old one's owner and rights
    with workspace.replacing(path, target, workdir) as f:
        f.write(text)
    return f"wrote {len(text)} characters to {path}"


def run_shell(command: str, *, workdir: Path, timeout: float | None = None) -> str:
    """Run a shell command in the workspace; return its output and exit status. It runs without
    asking: run_call() asks the person first."""
    return commands.run(command, workdir, timeout)  # none given: AGENT_SHELL_TIMEOUT


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
    expected, needed = parameters(tools)[name], required(tools)[name]
    missing = [p for p in needed if p not in args]
    unexpected = [p for p in args if p not in expected]
    if missing or unexpected:
        takes = [p if p in needed else f"{p} (optional)" for p in expected]
        raise ToolError(
            f"{name} takes {', '.join(takes) or 'no arguments'}; missing: "
            f"{', '.join(missing) or 'none'}; unexpected: {', '.join(unexpected) or 'none'}"
        )
    return args
