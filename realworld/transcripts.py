"""The transcript: every run written down as it happens, one event a line, and its events read back.

A transcript is a JSONL file, flushed as each event is written, so a crash loses nothing before
it. docs/transcripts.md lists the events. read() gives them back, each checked for the fields the
readers need; realworld/runs.py reads them as the loop ran: what each request sent.
"""

import json
import os
from datetime import datetime, timezone
from pathlib import Path

try:  # POSIX only: Windows has no flock
    import fcntl
except ImportError:  # pragma: no cover
    fcntl = None

import config
from realworld import own
from realworld.guards import MAX_DEPTH, hide_secrets, nested_deeper, say

# The fields each event needs for --show, --replay and --resume.
EVENT_FIELDS = {
    "run/start": ("system_prompt",),
    "user/message": ("content",),
    "assistant/message": ("message",),
    "tool/result": ("call_id", "name", "content"),
    "tool/started": ("call_id",),
    "turn/end": ("status",),
}


class TranscriptError(Exception):
    """The transcript cannot be written (a full disk, a removed folder) or is in use; the
    message says which."""


def record(transcript, event: str, **fields) -> None:
    """Append one event to the transcript (an open file, or None for none) and flush it."""
    if transcript:
        write(
            transcript,
            {
                "type": event,
                "time": datetime.now(timezone.utc).isoformat(timespec="milliseconds"),
                **fields,
            },
        )


class Nested:
    """The transcript of a conversation inside another (a helper's, examples/subagent.py; a
    summary's, realworld/compaction.py): its events go to the run's own transcript, each marked
    "under" the id of the call (or compaction) that started it, so that realworld/runs.py reads
    them as a conversation of their own."""

    def __init__(self, transcript, under: str):
        self.transcript, self.under = transcript, under


def is_empty(transcript) -> bool:
    """Whether transcript is a file that holds nothing yet (not a helper's, which is inside
    another's, nor none)."""
    try:
        return (
            not isinstance(transcript, Nested) and transcript is not None and not transcript.tell()
        )
    except (AttributeError, OSError, ValueError):
        return False


def write(transcript, event: dict) -> None:
    """Write one event as one line, and flush it."""
    if isinstance(transcript, Nested):  # under the innermost call: a helper's helper's too
        event = {**event, "under": transcript.under}
        while isinstance(transcript, Nested):
            transcript = transcript.transcript
        if transcript is None:
            return
    try:
        # The key and passwords never reach a file someone may share, whichever field a server
        # or a tool put them in.
        transcript.write(hide_secrets(json.dumps(event, ensure_ascii=False)) + "\n")
        transcript.flush()
    except OSError as e:
        raise TranscriptError(
            f"cannot write the transcript {transcript.name}: {e.strerror}"
        ) from None


def record_message(transcript, message: dict, **details) -> None:
    """Record a message the conversation gained, as the event that realworld/runs.py reads back."""
    if message["role"] == "user":
        record(transcript, "user/message", content=message["content"], **details)
    elif message["role"] == "assistant":
        record(transcript, "assistant/message", message=message, **details)
    else:
        record(
            transcript,
            "tool/result",
            call_id=message["tool_call_id"],
            content=message["content"],
            **details,
        )


def open_file(path: Path | None, mode: str = "x"):
    """The transcript file: new ("x": an existing file is never overwritten), or appended to ("a").
    It holds all the agent read, so it is readable by its owner only, as shell history is, and so is
    the runs/ folder. It is locked while in use: TranscriptError if another agent is writing it."""
    if path is None:
        if own.make_runs():  # the command line said why, at start
            raise TranscriptError("no transcript is kept there: give --transcript FILE elsewhere")
        path = config.RUNS / f"{datetime.now(timezone.utc):%Y%m%dT%H%M%S%fZ}.jsonl"
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    fd = create(path) if mode == "x" else os.open(path, os.O_WRONLY | os.O_APPEND)
    try:
        lock(fd)
    except OSError:
        os.close(fd)
        raise TranscriptError(
            f"{path} is in use by another agent; wait until it ends, or resume a copy"
        ) from None
    # backslashreplace: a lone surrogate (a task typed with invalid bytes) is
    # written as a JSON escape.
    # .name: the path
    return open(path, "a", encoding="utf-8", errors="backslashreplace", opener=lambda *_: fd)


def create(path: Path) -> int:
    """A new file at path, owner-only, open for writing: every file the agent writes as its own
    output (a transcript, an --html page) is made here. Nothing that stands at path is replaced
    or opened: a file, a directory, a FIFO (no wait for a reader), a hard link, a symlink whether
    its target exists or not (O_EXCL: the link is never followed, its target never made); each is
    FileExistsError, which refused() words."""
    flags = os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0)
    return os.open(path, flags | getattr(os, "O_CLOEXEC", 0), 0o600)


def refused(e: OSError) -> str:
    """What the agent says when it cannot make or open a file of its own output: one line."""
    if isinstance(e, FileExistsError):
        return f"{e.filename} exists already: the agent never replaces a file; give a new name"
    return f"{e.strerror}: {e.filename}"


def open_run(path: Path | None, resume: Path | None, recorded: list[dict], workdir: Path):
    """The transcript this run writes: the one it resumes, appended to, or a new one (at path,
    or in runs/). A lesson in examples/, or a transcript a tool could rewrite (in the workspace,
    by a link into it, or with another name: kept_apart()), is never written to: resuming one
    starts a new transcript that begins with the events read from it."""
    why = resume and kept_apart(resume, workdir)
    if resume and not why:
        return open_file(resume, "a")
    transcript = open_file(path, "x")
    if resume:
        goes_on = f"this conversation goes on in {transcript.name}"
        say(f"agent: {resume} {why} and stays as it is; {goes_on}")
        for event in recorded:
            write(transcript, event)
    return transcript


def kept_apart(resume: Path, workdir: Path) -> str | None:
    """Why a resumed transcript is not written to, or None: a lesson, a file in the workspace (by
    its path or a link's), or one with other names, any of which may be in it."""
    if resume.resolve().is_relative_to(config.HERE / "examples"):
        return "is a lesson"
    if own.in_workspace(resume, workdir):
        return "is in the workspace, where a command could change it,"
    if own.other_names(resume):
        return "has other names (hard links), where a command could change it,"
    return None


def as_it_is(path: Path | None) -> tuple | None:
    """A file's size and time of change (None for none): a resumed transcript that another agent
    wrote to between this agent's reading it and locking it is not gone on from."""
    try:
        status = os.stat(path) if path else None
    except OSError:
        return None
    return status and (status.st_size, status.st_mtime_ns)


def lock(fd: int) -> None:
    """Lock an open file for this process alone, or raise OSError at once if another holds it
    (POSIX flock; Windows has no flock, and there two agents can still write one transcript)."""
    if fcntl is None:  # pragma: no cover
        return
    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)


def begin(transcript, system_prompt: str, tools: list[dict], **settings) -> list[dict]:
    """A new conversation: its messages, the system prompt alone, and its run/start event, which
    records the system prompt and the tools (their schemas) it offers, and settings."""
    record(transcript, "run/start", **settings, system_prompt=system_prompt, tools=tools)
    return [{"role": "system", "content": system_prompt}]


def read(path: Path) -> list[dict]:
    """The events of a transcript file. A last line cut off by a crash is skipped with a warning;
    any other line that is not an event raises ValueError naming its line number."""
    with open(path, encoding="utf-8") as f:
        lines = [(number, line) for number, line in enumerate(f, 1) if line.strip()]
    events = []
    for number, line in lines:
        if nested_deeper(line):  # every reader after this one is recursive: the page, --show
            raise ValueError(f"{path}, line {number}: nested more than {MAX_DEPTH} deep")
        try:
            event = json.loads(line)
        except ValueError:
            # a run killed while writing its last line
            if number == lines[-1][0] and not line.endswith("\n"):
                say(f"agent: {path}, line {number}: cut off, skipped")
                continue
            raise ValueError(f"{path}, line {number}: not JSON") from None
        kind = event.get("type") if isinstance(event, dict) else None
        needed = EVENT_FIELDS.get(kind, ()) if isinstance(kind, str) else None
        if needed is None or any(field not in event for field in needed):
            raise ValueError(
                f"{path}, line {number}: not a transcript event with "
                f"{', '.join(needed or ['type'])}"
            )
        if bad_field(event):
            raise ValueError(
                f"{path}, line {number}: {bad_field(event)} is not of the form a transcript records"
            )
        events.append(event)
    return events


def bad_field(event: dict) -> str | None:
    """The first needed field of an event that holds something else than the agent records
    there, or None."""
    if "under" in event and not isinstance(event["under"], str):
        return "under"
    if event["type"] == "run/start" and "messages" in event:  # the conversation it began with
        carried = event["messages"]
        if not isinstance(carried, list) or not all(is_message(m) for m in carried):
            return "messages"
    if event["type"] != "assistant/message":
        return next(
            (f for f in EVENT_FIELDS.get(event["type"], ()) if not isinstance(event[f], str)), None
        )
    if not is_message(event["message"]) or event["message"].get("role") != "assistant":
        return "message"
    return None


def is_message(message) -> bool:
    """Whether message is one as the loop appends it: a user's or a tool's text, or an
    assistant's text and calls (each an id, a name and arguments, all text)."""
    if not isinstance(message, dict):
        return False
    role = message.get("role")
    if role == "tool":
        return isinstance(message.get("tool_call_id"), str) and isinstance(
            message.get("content"), str
        )
    if role == "user":
        return isinstance(message.get("content"), str)
    calls = message.get("tool_calls", []) if role == "assistant" else None
    return (
        isinstance(message.get("content", ""), str)
        and isinstance(calls, list)
        and all(is_call(call) for call in calls)
    )


def is_call(call) -> bool:
    """Whether call is a tool call as the agent sends it back: an id, a function name and
    arguments, all text."""
    function = call.get("function") if isinstance(call, dict) else None
    strings = (
        [call.get("id"), function.get("name"), function.get("arguments")]
        if isinstance(function, dict)
        else []
    )
    return bool(strings) and all(isinstance(value, str) for value in strings)
