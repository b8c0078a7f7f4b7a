"""The transcript: every run written down as it happens, and read back to show, replay or resume it.

A transcript is a JSONL file, one event a line, flushed as it is written, so a crash loses
nothing before it. docs/transcripts.md lists the events. The system prompt of the
first run/start event, followed by the messages of the user/message, assistant/message and
tool/result events, rebuilds the conversation exactly: --resume continues it, --replay answers
with its recorded replies, --show prints it.
"""

import json
import os
from datetime import datetime, timezone
from pathlib import Path
from types import SimpleNamespace

import config
from realworld import replies
from realworld.guards import hide_secrets, say, shorten, visible

# The fields each event needs for --show, --replay and --resume.
EVENT_FIELDS = {
    "run/start": ("system_prompt",),
    "user/message": ("content",),
    "assistant/message": ("message",),
    "tool/result": ("call_id", "name", "content"),
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


def write(transcript, event: dict) -> None:
    """Write one event as one line, and flush it."""
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
    """Record a message the conversation gained, as the event that rebuild() reads back."""
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
        config.RUNS.mkdir(mode=0o700, exist_ok=True)
        config.RUNS.chmod(0o700)
        path = config.RUNS / f"{datetime.now(timezone.utc):%Y%m%dT%H%M%S%fZ}.jsonl"
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    flags = os.O_WRONLY | os.O_APPEND | (os.O_CREAT | os.O_EXCL if mode == "x" else 0)
    fd = os.open(path, flags, 0o600)
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


def open_run(path: Path | None, resume: Path | None, recorded: list[dict]):
    """The transcript this run writes: the one it resumes, appended to, or a new one (at path,
    or in runs/). A lesson in examples/ is never changed: resuming one starts a new transcript that
    begins with its events."""
    if resume and not resume.resolve().is_relative_to(config.HERE / "examples"):
        return open_file(resume, "a")
    transcript = open_file(path, "x")
    if resume:
        say(
            f"agent: {resume} is a lesson and stays as it is; this conversation goes on in "
            f"{transcript.name}"
        )
        for event in recorded:
            write(transcript, event)
    return transcript


def lock(fd: int) -> None:
    """Lock an open file for this process alone, or raise OSError at once if another holds it
    (POSIX flock; Windows has no flock, and there two agents can still write one transcript)."""
    try:
        import fcntl
    except ImportError:  # pragma: no cover
        return
    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)


def start(
    recorded: list[dict] | None, settings: dict, system_prompt: str, transcript
) -> list[dict]:
    """The messages to start from: a new conversation's, or those of a recorded one to resume.
    A resumed conversation gets this agent's system prompt: a shared transcript may carry
    other instructions."""
    if recorded is None:
        record(transcript, "run/start", **settings, system_prompt=system_prompt)
        return [{"role": "system", "content": system_prompt}]
    record(transcript, "run/resume", **settings)
    messages = rebuild(recorded)
    # a transcript written by hand may have no run/start
    if not messages or messages[0]["role"] != "system":
        messages.insert(0, {"role": "system", "content": system_prompt})
    elif messages[0]["content"] != system_prompt:
        say(
            "agent: the transcript's system prompt is not this agent's own (--show prints it); "
            "the conversation goes on with this agent's"
        )
        messages[0] = {"role": "system", "content": system_prompt}
    return messages


def read(path: Path) -> list[dict]:
    """The events of a transcript file. A last line cut off by a crash is skipped with a warning;
    any other line that is not an event raises ValueError naming its line number."""
    with open(path, encoding="utf-8") as f:
        lines = [(number, line) for number, line in enumerate(f, 1) if line.strip()]
    events = []
    for number, line in lines:
        try:
            event = json.loads(line)
        except (ValueError, RecursionError):
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
    if event["type"] != "assistant/message":
        return next(
            (f for f in EVENT_FIELDS.get(event["type"], ()) if not isinstance(event[f], str)), None
        )
    message = event["message"]
    if (
        not isinstance(message, dict)
        or message.get("role") != "assistant"
        or not isinstance(message.get("content", ""), str)
    ):
        return "message"
    calls = message.get("tool_calls", [])
    if not isinstance(calls, list) or not all(is_call(call) for call in calls):
        return "message.tool_calls"
    return None


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


def rebuild(events: list[dict]) -> list[dict]:
    """The messages a transcript records: its system prompt, then every message in order."""
    messages = []
    for event in events:
        if event["type"] == "run/start" and not messages:
            messages.append({"role": "system", "content": event["system_prompt"]})
        elif event["type"] == "user/message":
            messages.append({"role": "user", "content": event["content"]})
        elif event["type"] == "assistant/message":
            messages.append(event["message"])
        elif event["type"] == "tool/result":
            messages.append(
                {"role": "tool", "tool_call_id": event["call_id"], "content": event["content"]}
            )
    return messages


# What a call of a killed run that was never answered gets, when the run is resumed.
UNANSWERED = (
    "unknown: the earlier run ended before this call was answered; it may or may not have run, "
    "so check before repeating it"
)


class ReplayEnded(replies.RequestFailed):
    """The run asked for more replies than the transcript recorded."""

    status = "replay_ended"


class Replay:
    """A stand-in for the OpenAI client that answers with a transcript's recorded replies, in order.

    Each reply is built as the SDK builds a live one, so resp, msg and msg.tool_calls look as in a
    live run. Before each reply it compares the tool results the run produced with those recorded at
    that point: a recorded reply that follows other results may say what no tool said, so the person
    is told at that step, and diverged lists each result that differed."""

    def __init__(self, events: list[dict], path: Path):
        self.events, self.base_url, self.diverged = events, f"replay of {path}", []
        self.replaying = True  # the Client shows no server time for a recorded reply
        self.steps = recorded_steps(events)
        self.chat = SimpleNamespace(completions=SimpleNamespace(create=self.create))

    def create(self, model: str, messages: list[dict], **request):
        # replies given so far in this run
        step = len([m for m in messages if m["role"] == "assistant"])
        if 0 < step <= len(self.steps):
            self.compare(self.steps[step - 1][1], messages, step)
        if step >= len(self.steps):
            raise ReplayEnded(
                "the transcript has no more recorded replies; this run needs more steps than "
                "were recorded"
            )
        event = self.steps[step][0]
        return replies.completion(
            event["message"], event.get("finish_reason"), event.get("usage"), model
        )

    def compare(self, recorded: list[dict], messages: list[dict], step: int) -> None:
        """Say which tool results of this step differ from the recording, and keep them
        in diverged."""
        last = max(i for i, m in enumerate(messages) if m["role"] == "assistant")
        now = [m["content"] for m in messages[last + 1 :] if m["role"] == "tool"]
        for event, content in zip(recorded, now, strict=False):
            if content != event["content"]:
                shown = f"recorded: {shorten(event['content'], 80)!r}, now {shorten(content, 80)!r}"
                say(f"replay: step {step}: {event['name']} gave another result than {shown}")
                self.diverged.append(
                    {
                        "step": step,
                        "call_id": event["call_id"],
                        "recorded": event["content"],
                        "now": content,
                    }
                )

    def report(self, transcript) -> None:
        """At the end: record each result that differed, and say after which step the replies
        no longer fit."""
        for divergence in self.diverged:
            record(transcript, "replay/diverged", **divergence)
        if self.diverged:
            step = self.diverged[0]["step"]
            say(
                f"replay: the recorded replies after step {step} were written for other "
                "tool results"
            )

    def other_task(self, task: str) -> str:
        """The recorded task, shortened, if it is not task ("" if it is): the recorded replies
        answer that one."""
        recorded_one = recorded_task(self.events)
        return "" if task == recorded_one else shorten(recorded_one, 100)


def recorded_steps(events: list[dict]) -> list[tuple[dict, list[dict]]]:
    """Each recorded reply with the tool results recorded after it."""
    steps = []
    for event in events:
        if event["type"] == "assistant/message":
            steps.append((event, []))
        elif event["type"] == "tool/result" and steps:
            steps[-1][1].append(event)
    return steps


def recorded_task(events: list[dict]) -> str:
    """The first task a transcript records."""
    return next((e["content"] for e in events if e["type"] == "user/message"), "")


def show(events: list[dict], system_prompt: str) -> None:
    """Print a transcript as a conversation, without running anything."""
    for line in shown(events, system_prompt):
        # What a model or a tool wrote may hold escape sequences, and a transcript written by
        # another agent the key.
        print(visible(hide_secrets(line)))


def shown(events: list[dict], system_prompt: str):
    """The lines --show prints; a system prompt other than system_prompt (the agent's own)
    in full."""
    used = []
    for event in events:
        kind = event["type"]
        if kind == "run/start":
            yield (
                f"[{event.get('model')} at {event.get('base_url')}, working in "
                f"{event.get('workspace')}]"
            )
            if event["system_prompt"] != system_prompt:
                yield (
                    f"[system prompt, not this agent's own:]\n{event['system_prompt']}\n"
                    "[end of system prompt]"
                )
        elif kind == "user/message":
            yield f"\nuser: {event['content']}"
        elif kind == "assistant/message":
            message = event["message"]
            if message.get("content"):
                yield f"\nassistant: {message['content']}"
            for call in message.get("tool_calls", []):
                yield (
                    f"  → {call['function']['name']}({shorten(call['function']['arguments'], 300)})"
                )
            used.append(replies.count_tokens(event.get("usage")))
        elif kind == "tool/result":
            yield f"  {'←' if event.get('ok') else '✗'} {shorten(event['content'], 300)}"
        elif kind == "turn/end":
            yield f"[turn ended: {event['status']}" + (
                f": {event['error']}]" if event.get("error") else "]"
            )
    yield f"[total: {replies.describe_tokens(replies.total_tokens(used))}]"
