"""What needs the person's yes, and how it is asked: a command unless --yes, a call the model wrote
as text that could change anything; the question shows what would run, whole and escaped, on one
screen, and what the person answers is what the model reads.
"""

import json
import os
import re
import sys
import unicodedata

import config
from realworld.calls import ToolError
from realworld.guards import arguments_line, clip, nested_deeper, say, shorten, visible
from realworld.workspace import as_text


def terminal() -> bool:
    """Whether a person can be asked: standard input is a terminal (not a pipe, a file, or
    closed)."""
    return bool(sys.stdin) and sys.stdin.isatty()


def needs_yes(name: str, arguments: str, call_id=None) -> bool:
    """Whether a call may run only after the person's yes: a command whose arguments parse, and a
    call the model wrote as text that could change anything: any but read_file. Arguments that do
    not parse are refused without asking, so they are never approved blindly. Whether this run
    asks is asks()'s: --yes and AGENT_TEXT_CALLS=run ask less."""
    args = parsed(arguments)
    if args is None:
        return False
    if name == "run_shell":  # run_shell(command): tools.TOOLS
        return list(args) == ["command"] and is_command(args["command"])
    return written_as_text(call_id) and name not in READS


def parsed(arguments: str) -> dict | None:
    """A call's arguments as the object they parse to; None where they do not parse, are nested
    too deep, or are no object (a JSON string: what the model sent was not JSON)."""
    try:
        args = json.loads(arguments) if not nested_deeper(arguments) else None
    except (ValueError, TypeError, RecursionError):
        return None
    return args if isinstance(args, dict) else None


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


def declined_by_the_user(reason: str) -> str:
    """What the model reads of a command the person declined, with the reason they gave."""
    return f"declined by the user: {reason}" if reason else "declined by the user"


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
    if name == "write_file" and isinstance(args.get("path"), str) and args.get("old") is not None:
        old, new = (as_text_of(args[key]) for key in ("old", "content"))
        shown = [shown_text(old), shown_text(new)]
        answer(
            f"\nIn {visible(args['path'])}, replace these {len(old)} characters:\n{shown[0]}\n"
            f"with these {len(new)}:\n{shown[1]}\n\n{said}Make this edit? [y/N] "
        )
        return
    if name == "write_file" and isinstance(args.get("path"), str):
        text = as_text_of(args["content"])
        where = visible(args["path"])
        answer(
            f"\n{shown_text(text)}\n\n{said}Write these {len(text)} characters to {where}? [y/N] "
        )
        return
    arguments = json.dumps(args, indent=2, ensure_ascii=False)
    answer(
        f"\n{shown_command(arguments, *screen())}\n\n{said}Run {visible(name)} with these? [y/N] "
    )


def edit_shown(name: str, arguments: str) -> str | None:
    """A write_file call that edits, as the page shows it: its path, then each line of old with
    "- " before it and each of the new text with "+ "; None for any other call."""
    args = parsed(arguments)
    if name != "write_file" or args is None or args.get("old") is None:
        return None
    # every character a terminal or a page would draw as nothing, or over another, an escape
    old, new = (visible(as_text_of(args.get(key, ""))).split("\n") for key in ("old", "content"))
    lines = [f"- {line}" for line in old] + [f"+ {line}" for line in new]
    return f"edit {visible(str(args.get('path')))}:\n" + "\n".join(lines)


def shown_text(text: str) -> str:
    """A text a question shows, on one screen as a command is (shown_command())."""
    return shown_command(text, *screen()) if text else "    (nothing)"


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


RUN = re.compile(r"(.)\1{15,}", re.S)  # sixteen or more of one character

ESCAPE = re.compile(r"\\(?:x[0-9a-f]{2}|u[0-9a-f]{4}|U[0-9a-f]{8})")  # as visible() writes them
