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
import tools
from realworld import replies
from realworld.guards import MAX_DEPTH, hide_secrets, nested_deeper, say, shorten, visible

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
    """The transcript of a run inside a tool call (a subagent's, subagent.py): its events go to the
    run's own transcript, each marked "under" the id of the call that started it, so that rebuild()
    leaves them out of the conversation and --show, --replay and the page find them."""

    def __init__(self, transcript, under: str):
        self.transcript, self.under = transcript, under


def write(transcript, event: dict) -> None:
    """Write one event as one line, and flush it."""
    if isinstance(transcript, Nested):
        event, transcript = {**event, "under": transcript.under}, transcript.transcript
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
    if repeated := repeated_id(events):
        raise ValueError(f"{path}: {repeated}")
    return events


def repeated_id(events: list[dict]) -> str | None:
    """What repeats a call id in the conversation a transcript rebuilds to, or None: two calls
    with one id (an approval of one would approve both), or two results for one call."""
    called, answered = set(), set()
    for message in rebuild(events):
        ids = [call["id"] for call in message.get("tool_calls") or []]
        if message["role"] == "tool":
            if message["tool_call_id"] in answered:
                shown = visible(message["tool_call_id"])
                return f"two results answer the call id '{shown}': refused"
            answered.add(message["tool_call_id"])
        for call_id in ids:
            if call_id in called:
                shown = visible(call_id)
                return f"two calls have the id '{shown}': a transcript that repeats it is refused"
            called.add(call_id)
    return None


def bad_field(event: dict) -> str | None:
    """The first needed field of an event that holds something else than the agent records
    there, or None."""
    if "under" in event and not isinstance(event["under"], str):
        return "under"
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
    """The messages a transcript records: its system prompt, then every message in order (a
    subagent's are its own conversation, not this one's)."""
    messages = []
    for event in events:
        if "under" in event:
            continue
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
        elif event["type"] == "context/compacted":
            from realworld import compaction

            compaction.apply(messages, event)
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
        self.steps, self.served = recorded_steps(events), 0
        # the window the run was recorded with, so that it compacts where the recording did
        start = next((e for e in events if e["type"] == "run/start"), {})
        size = start.get("context_window")
        self.window = size if isinstance(size, int) and size >= 256 else None
        # where the recorded run was refused as too long, the replay is refused too, so that it
        # compacts and goes on as the recording did
        self.refusals, self.refused = refusals(events), set()
        self.chat = SimpleNamespace(completions=SimpleNamespace(create=self.create))

    def create(self, model: str, messages: list[dict], **request):
        if self.served in self.refusals and self.served not in self.refused:
            self.refused.add(self.served)
            raise replies.ContextFull(*self.refusals[self.served])
        # The replies are given in the order they were recorded, whichever conversation asks:
        # a subagent's steps were recorded between its caller's.
        step, self.served = self.served, self.served + 1
        before = self.steps[step][2] if step < len(self.steps) else None
        if before is not None:
            self.compare(self.steps[before][1], messages, before + 1)
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

    def other_tools(self) -> list[str]:
        """The tools the recorded replies call that this agent does not have (a lesson made with
        subagent.py or handoff.py, replayed by agent.py)."""
        called = [
            call["function"]["name"]
            for event, _, _ in self.steps
            for call in event["message"].get("tool_calls") or []
        ]
        return sorted({name for name in called if name not in tools.TOOL_MAP})

    def other_task(self, task: str) -> str:
        """The recorded task, shortened, if it is not task ("" if it is): the recorded replies
        answer that one."""
        recorded_one = recorded_task(self.events)
        return "" if task == recorded_one else shorten(recorded_one, 100)


def recorded_steps(events: list[dict]) -> list[tuple[dict, list[dict], int | None]]:
    """Each recorded reply with the tool results recorded after it in its own conversation (a
    subagent's steps come between its caller's), and the index of the reply before it in that
    conversation (None for its first)."""
    steps, last = [], {}  # the last reply of each conversation: None, or a subagent's call id
    for event in events:
        under = event.get("under")
        if event["type"] == "assistant/message":
            steps.append((event, [], last.get(under)))
            last[under] = len(steps) - 1
        elif event["type"] == "tool/result" and under in last:
            steps[last[under]][1].append(event)
        elif event["type"] == "user/message" and under is not None:
            last.pop(under, None)  # a new subagent under the same call id starts afresh
    return steps


def refusals(events: list[dict]) -> dict:
    """{the number of replies recorded before it: (its words, the window it named)} for each
    request the recorded run had refused as longer than the context window."""
    found, served, last = {}, 0, None
    for event in events:
        if event["type"] == "assistant/message":
            served += 1
        elif event["type"] == "turn/end" and event.get("status") == "context_full":
            last = served
            found[served] = (str(event.get("error") or "the context window is full"), None)
        elif (
            event["type"] == "context/window" and last in found and type(event.get("window")) is int
        ):
            found[last] = (found[last][0], event["window"])
    return found


def recorded_task(events: list[dict]) -> str:
    """The first task a transcript records."""
    return next(iter(recorded_tasks(events)), "")


def recorded_tasks(events: list[dict]) -> list[str]:
    """Every task a transcript records, in order (not a subagent's)."""
    return [e["content"] for e in events if e["type"] == "user/message" and "under" not in e]


def show(events: list[dict], system_prompt: str) -> None:
    """Print a transcript as a conversation, without running anything."""
    from realworld import pauses

    for line in shown(events, system_prompt):
        # What a model or a tool wrote may hold escape sequences, and a transcript written by
        # another agent the key.
        print(visible(hide_secrets(line)))
    if pauses.last_end(events).get("status") == "paused" and not pauses.is_paused(events):
        print("[the calls this pause recorded no longer wait in it: it was changed, or went on]")


def shown(events: list[dict], system_prompt: str):
    """The lines --show prints; a system prompt other than system_prompt (the agent's own)
    in full."""
    used = []
    for event in events:
        for line in shown_event(event, system_prompt, used):
            if "under" in event:  # a subagent's steps, under the call that started them
                line = "\n".join(f"    {part}" if part else part for part in line.split("\n"))
            yield line
    yield f"[total: {replies.describe_tokens(replies.total_tokens(used))}]"


def shown_event(event: dict, system_prompt: str, used: list):
    """The lines --show prints for one event; used gathers each reply's tokens."""
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
        asker = "user" if "under" not in event else "subagent, asked"
        if str(event.get("under")).startswith("compaction-"):
            asker = "asked for a summary"
        content = shorten(event["content"], 300) if "under" in event else event["content"]
        yield f"\n{asker}: {content}"
    elif kind == "assistant/message":
        message = event["message"]
        if message.get("content"):
            yield f"\nassistant: {message['content']}"
        for call in message.get("tool_calls", []):
            yield f"  → {call['function']['name']}({shorten(call['function']['arguments'], 300)})"
        used.append(replies.count_tokens(event.get("usage")))
    elif kind == "tool/result":
        yield f"  {'←' if event.get('ok') else '✗'} {shorten(event['content'], 300)}"
    elif kind == "turn/end" and event["status"] == "paused":
        yield from shown_pause(event)
    elif kind == "turn/end":
        yield f"[turn ended: {event['status']}" + (
            f": {event['error']}]" if event.get("error") else "]"
        )
    elif kind == "context/compacted":
        summary = event.get("summary") if isinstance(event.get("summary"), dict) else {}
        replaced = event.get("placeholders") if isinstance(event.get("placeholders"), dict) else {}
        yield (
            f"[compacted: about {event.get('before')} → {event.get('after')} tokens (window "
            f"{event.get('window')}): {len(replaced)} tool result(s) replaced by a placeholder"
            + (
                f", {summary.get('replaced')} earlier message(s) by this summary:]"
                if summary
                else "]"
            )
        )
        if summary:
            yield f"  {summary.get('text')}"
    elif kind == "agent/handoff":
        yield (
            f"[handed off to {event.get('to')}: from here its system prompt and its tools "
            f"({', '.join(map(str, listed(event.get('tools'))))})]"
        )


def listed(value) -> list:
    """A field a transcript holds as a list, or [] for anything else (a transcript written by
    hand may hold anything)."""
    return value if isinstance(value, list) else []


def shown_pause(event: dict):
    """A pause, and each command it recorded as waiting for a yes, whole, with its code made of
    what is shown (pauses.code()): never the code a transcript says."""
    from realworld import pauses

    waiting = pauses.pending_calls(event)
    yield (
        f"[turn paused: {len(waiting)} command(s) waiting for a yes; go on with --resume and "
        "--approve [CODE ...] or --reject REASON]"
    )
    for call in waiting:
        function = call["function"]
        try:
            command = tools.shown_command(json.loads(function["arguments"])["command"])
        except (AttributeError, TypeError, ValueError, KeyError, RecursionError):
            command = f"    {function['arguments']}"
        name, call_id = pauses.one_line(function["name"]), pauses.one_line(call["id"])
        yield f"  ⏸ [{pauses.code(call)}] {name}, id {call_id}:\n{command}"
