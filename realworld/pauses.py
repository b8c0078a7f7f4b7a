"""A run that pauses for a yes, and goes on once the person has said it.

A command needs the person's yes. When nobody can be asked at that moment (no terminal, or run()
asked to pause), the run stops with status "paused": the call that waits, and the calls after it
in the same reply, stay open in `messages`, and the transcript's turn/end records which of them wait
for a yes. To go on, the person approves or declines each waiting call (by its code on the command
line, by its id from Python) and the run continues with the same messages: agent.go_on() answers
the open calls in their order, then the loop asks the model again.

The transcript is the state, and it may have been changed since the pause was shown: an approval
names the calls it approves by a code made of the call itself, and a transcript whose waiting calls
are not those its pause recorded is refused.
"""

import hashlib
import hmac
import json
import os
import shlex
import subprocess
import sys
from pathlib import Path

import config
from realworld import consent, own, runs, transcripts
from realworld.guards import arguments_line, say, shown_url, visible


class NotApproved(ValueError):
    """--approve or --reject cannot be carried out; the message says why, in one line."""


def is_paused(events: list[dict]) -> bool:
    """Whether a transcript's last turn paused and calls still wait for a yes in it."""
    return bool(still_waiting(events, runs.conversation(events)))


def still_waiting(events: list[dict], messages: list[dict]) -> list[dict]:
    """The calls of a paused transcript (messages: what it rebuilds to) that still wait for a yes:
    none unless its last turn paused and its last reply is followed by nothing but tool
    messages."""
    last = max((i for i, m in enumerate(messages) if m["role"] == "assistant"), default=None)
    if last_end(events).get("status") != "paused" or last is None:
        return []
    if any(m["role"] != "tool" for m in messages[last + 1 :]):
        return []
    return waiting(messages, started(events))


def started(events: list[dict]) -> set:
    """The calls that began to run after the last pause (tools.run_call() records each as it
    begins): if the agent was killed then, they may or may not have run, and are never run
    again."""
    ends = [i for i, e in enumerate(events) if e["type"] == "turn/end" and "under" not in e]
    after = events[ends[-1] + 1 :] if ends else events
    return {e.get("call_id") for e in after if e["type"] == "tool/started" and "under" not in e}


def last_end(events: list[dict]) -> dict:
    """The last turn/end of the conversation (not of a subagent's), or {}."""
    ends = [e for e in events if e["type"] == "turn/end" and "under" not in e]
    return ends[-1] if ends else {}


class Reason(str):
    """The reason a call is declined with, as --reject or a recording gives it: never read as a
    yes, whatever its words ("--reject ok" declines)."""


def decision(value):
    """An approval as run(approvals=...) takes it: True, "y", "yes", "true", "ok" or "approve"
    approve; False, "", "n", "no" or "false" decline; any other text (and any Reason) declines
    with it as the reason the model reads. None: not decided."""
    if value is None or isinstance(value, bool):
        return value
    if isinstance(value, Reason):
        return value.strip() or False
    answer = value.strip().lower()
    if answer in ("y", "yes", "true", "ok", "approve", "approved"):
        return True
    return False if answer in ("", "n", "no", "false") else value.strip()


def mistaken(approvals: dict, messages: list[dict]) -> str | None:
    """What is wrong with run(approvals=...), or None: an id that names no open call (a decision
    nobody would read), or a value that is neither True, False nor a reason."""
    unknown = set(approvals) - {c["id"] for c in open_calls(messages)}
    if unknown:
        return f"no open call has the id {sorted(map(str, unknown))[0]!r}: nothing was run"
    wrong = [v for v in approvals.values() if not isinstance(v, (bool, str))]
    if wrong:
        return f"an approval is True, False or a reason, not {wrong[0]!r}: nothing was run"
    return None


def open_calls(messages: list[dict]) -> list[dict]:
    """The calls of the last reply that have no tool message yet, in their order."""
    answered = {m.get("tool_call_id") for m in messages if m["role"] == "tool"}
    return [c for c in last_calls(messages) if c["id"] not in answered]


# What a call of a killed run that was never answered gets, when the run is resumed.
UNANSWERED = (
    "unknown: the earlier run ended before this call was answered; it may or may not have run, "
    "so check before repeating it"
)


# What a call stopped while its tool ran gets, after why the run stopped: unlike the calls after
# it, it began, and a command may have done part of its work or all of it.
WHILE_IT_RAN = (
    "while it ran: it may have done part or all of its work, so check before repeating it"
)


# What the task of a killed run gets, when the run is resumed, if no reply had come to it.
NO_ANSWER = "the earlier run ended before the model answered"


def close_open_calls(messages: list[dict], reason: str, transcript, only=None) -> None:
    """Answer each call of the last reply that has no tool message yet (or those of them whose
    ids are in only), with reason: every call gets one tool message, so a server accepts the
    history. All are appended before any is recorded: a transcript that cannot be written leaves
    none open."""
    still_open = [c for c in open_calls(messages) if only is None or c["id"] in only]
    closing = [{"role": "tool", "tool_call_id": c["id"], "content": reason} for c in still_open]
    messages.extend(closing)
    for call, tool_message in zip(still_open, closing, strict=True):
        name = call["function"]["name"]
        say(f"  ✗ {name}({arguments_line(call['function']['arguments'], 120)}): {reason}")
        transcripts.record_message(transcript, tool_message, name=name, ok=False)


def close_open_task(messages: list[dict], reason: str, transcript) -> None:
    """Where the conversation ends in the person's message and no reply came to it (the run was
    interrupted, or its request failed, before the model answered), answer it with an assistant
    message that says why: the next task then follows an answer. Strict chat templates (Mistral's,
    Gemma's) refuse two user messages in a row: "Conversation roles must alternate
    user/assistant/user/assistant/...". What the person typed stays as it was. The model reads
    the reason's first line (the rest is a hint for the person); the transcript records the
    message with no_reply, the whole reason: no request got it (realworld/runs.py)."""
    if messages and messages[-1]["role"] == "user":
        first_line = reason.partition("\n")[0]
        answer = {"role": "assistant", "content": f"(no answer: {first_line})"}
        messages.append(answer)
        transcripts.record_message(transcript, answer, no_reply=reason)


def waiting(messages: list[dict], begun: set = frozenset()) -> list[dict]:
    """The open calls that wait for the person's yes (the others run without one), but those
    that began to run (started())."""
    calls = [c for c in open_calls(messages) if c["id"] not in begun]
    return [
        c
        for c in calls
        if consent.needs_yes(c["function"]["name"], c["function"]["arguments"], c["id"])
    ]


def settings_of(model: str, workdir, base_url: str) -> dict:
    """The settings that decide what an approved command does and where: the workspace, the
    sandbox, the server and the model. A pause records them, sealed; going on needs the same."""
    return {
        "workspace": str(Path(workdir).resolve()),
        "sandbox": config.SANDBOX,
        "sandbox_network": config.SANDBOX and config.SANDBOX_NETWORK,
        "base_url": shown_url(str(base_url)).rstrip("/"),
        "model": model,
    }


def seal(path, pending: list[dict], settings: dict, before: bytes | None = None) -> str | None:
    """A keyed digest of a pause, with a key only this machine's runs/ holds: the transcript's path,
    every byte it holds before the pause (the task, every message, every result, a subagent's and
    a summary's requests: the whole run), what waits and the settings it ran with. A bare
    --approve goes on only from a pause it finds sealed, once: an edit of the transcript anywhere,
    a copy under another name, or a pause already gone on from needs the codes --show prints.
    before: the bytes to seal (else the file's, as it is now)."""
    try:
        if before is None:
            before = Path(path).read_bytes()
    except (OSError, TypeError):
        return None
    own.make_runs()  # run() from Python: runs/ may not be made yet
    if not (key := own.pause_key()):  # runs/ or its key is not the agent's own: no seal
        return None
    made_of = json.dumps([str(Path(path).resolve()), pending, settings], sort_keys=True)
    text = made_of.encode("utf-8", "surrogatepass") + b"\n" + before
    return hmac.new(key, text, hashlib.sha256).hexdigest()


def sealed_here(path, events: list[dict]) -> bool:
    """Whether the last pause of the transcript at path is sealed by this agent here, over the
    whole file before it, not gone on from already, and followed by nothing but a --resume's
    start (a result recorded after it, forged or of a killed run, is not covered)."""
    pause = last_end(events)
    ends = [i for i, e in enumerate(events) if e["type"] == "turn/end" and "under" not in e]
    spent = own.spent()  # None where it cannot be read: no seal is taken
    if not isinstance(pause.get("seal"), str) or spent is None or pause["seal"] in spent:
        return False
    if any(e["type"] != "run/resume" for e in events[ends[-1] + 1 :]):
        return False
    try:
        raw = Path(path).read_bytes()
    except OSError:
        return False
    before = bytes_before(raw, ends[-1])
    made = before is not None and seal(path, pause.get("pending"), pause.get("settings"), before)
    given = pause["seal"].encode("utf-8", "surrogatepass")
    return bool(made) and hmac.compare_digest(given, made.encode())


def bytes_before(raw: bytes, index: int) -> bytes | None:
    """A transcript's bytes before the line of its event number index, counted as
    transcripts.read() counts them (one event a line that is not blank; JSON holds no line
    break), so that the pause sealed is the pause read."""
    at, count = 0, 0
    for line in raw.splitlines(keepends=True):
        if line.decode("utf-8", errors="replace").strip():
            if count == index:
                return raw[:at]
            count += 1
        at += len(line)
    return None


def code(call: dict) -> str:
    """A short code for one call, made of its id, tool and arguments: a call that changed after it
    was shown has another code, so an approval of it names nothing."""
    function = call["function"]
    made_of = json.dumps([call["id"], function["name"], function["arguments"]])
    return hashlib.sha256(made_of.encode("utf-8", "surrogatepass")).hexdigest()[:8]


def recorded(messages: list[dict]) -> list[dict]:
    """What a pause's turn/end records of each call that waits: enough to show it and to check,
    on resuming, that it is still the call shown."""
    return [
        {
            "call_id": c["id"],
            "name": c["function"]["name"],
            "arguments": c["function"]["arguments"],
            "code": code(c),
        }
        for c in waiting(messages)
    ]


def command_of(arguments: str) -> str:
    """The command a run_shell call would run, whole (its arguments parse: consent.needs_yes())."""
    return json.loads(arguments)["command"]


def explain(messages: list[dict]) -> str:
    """Outcome.text of a pause: what waits, and how a caller of run() goes on."""
    calls = waiting(messages)
    ids = ", ".join(c["id"] for c in calls)
    return (
        f"{len(calls)} command(s) wait for a yes (ids {ids}): approve or decline each by id, "
        "then run(None, messages, approvals={id: True, or the reason to decline}) goes on"
    )


def how_to_go_on(events_path, calls: list[dict], settings: dict, replayed: bool = False) -> str:
    """What the command line prints when a run pauses: the way on on a line of its own, naming the
    codes of the calls shown and the settings the run had (they came from the person), so that
    the line pasted into a shell whole runs what was shown, where it would have run."""
    if replayed:
        return f"paused: {counted(calls)} wait for your yes, and {replay_has_no_one(calls)}"
    program = quoted(sys.argv[0]) if sys.argv[0].endswith(".py") else "agent.py"
    path = quoted(str(events_path))
    codes = "".join(f" {code(c)}" for c in calls)
    return (
        f"paused: {counted(calls)} wait for your yes; go on with:\n"
        f"{as_options(settings)}python {program} --resume {path} --approve{codes}"
        f"{as_flags(settings)}\n"
        f"(name fewer codes to approve fewer, or --reject 'why' in place of --approve to decline; "
        f"python {program} --show {path} shows them again)"
    )


def counted(calls: list[dict]) -> str:
    """How many calls wait, as "2 command(s)" where each is a command, else "2 call(s)"."""
    commands = all(c["function"]["name"] == "run_shell" for c in calls)
    return f"{len(calls)} {'command' if commands else 'call'}(s)"


def replay_has_no_one(calls: list[dict]) -> str:
    """What a replay that paused can do instead: be asked at a terminal, or run what waits."""
    runs_them = "--yes --text-calls=run" if any(map(is_text, calls)) else "--yes"
    return (
        f"a replay has no one to ask: replay it at a terminal, or with {runs_them} (where its "
        "recording paused, it pauses too)"
    )


def as_flags(settings: dict) -> str:
    """The command-line options that give these settings (a server address with a password in
    it is left to the person's own setting: it is never printed)."""
    # --flag=value: a value that starts with "-" is still its value
    flags = f" {quoted('--workdir=' + settings['workspace'])}"
    if "***@" not in settings["base_url"]:
        flags += f" {quoted('--base-url=' + settings['base_url'])}"
    flags += f" {quoted('--model=' + settings['model'])}" + " --sandbox" * settings["sandbox"]
    return flags


def as_options(settings: dict) -> str:
    """The environment a setting without a flag needs, before the command."""
    return "AGENT_SANDBOX_NETWORK=1 " if settings.get("sandbox_network") else ""


def how_to_give(key: str, value) -> str:
    """How the person gives one setting the value a pause recorded."""
    if key == "sandbox":
        return "--sandbox" if value else "no --sandbox and AGENT_SANDBOX unset"
    if key == "sandbox_network":
        return "AGENT_SANDBOX_NETWORK=1" if value else "AGENT_SANDBOX_NETWORK unset"
    flag = {"workspace": "--workdir", "base_url": "--base-url", "model": "--model"}[key]
    if key == "base_url" and "***@" in str(value):
        return f"your own setting for {one_line(value)}"
    return quoted(f"{flag}={one_line(value)}")


def other_settings(recorded, now: dict, sealed: bool) -> str | None:
    """Why a run cannot go on from a pause with settings now, in one line that says what to give:
    the pause recorded others (sealed: this agent recorded them; else the transcript says so,
    and only the person can choose to give them). None when they are the same, or a transcript
    written before pauses recorded settings says none."""
    if not isinstance(recorded, dict):
        if sealed:
            return "the pause recorded no settings: approve by the codes --show prints"
        return None
    differ = [key for key in now if recorded.get(key) != now[key]]
    if not differ:
        return None
    give = "; ".join(how_to_give(key, recorded.get(key)) for key in differ)
    whose = "this pause ran" if sealed else "the transcript says this pause ran"
    return f"{whose} with other settings ({', '.join(differ)}); nothing was run: give {give}"


def same_settings(path, events: list[dict], now: dict, sealed: bool | None = None) -> None:
    """NotApproved, in one line that says what to give, where the last pause of the transcript at
    path ran with other settings than now (settings_of() for this run): the one check every way
    on from a pause passes, with or without --approve. sealed: sealed_here(), if known."""
    sealed = sealed_here(path, events) if sealed is None else sealed
    if other := other_settings(last_end(events).get("settings"), now, sealed):
        raise NotApproved(other)


def quoted(text: str) -> str:
    """text as one word for the person's shell: cmd.exe on Windows, a POSIX shell elsewhere."""
    return subprocess.list2cmdline([text]) if os.name == "nt" else shlex.quote(text)


def show_waiting(messages: list[dict]) -> None:
    """Print each call that waits, whole, as the consent prompt would show it, with its code; one
    the model wrote as text says so."""
    for call in waiting(messages):
        name, arguments = call["function"]["name"], call["function"]["arguments"]
        whole = command_of(arguments) if name == "run_shell" else shown_arguments(arguments)
        whole = consent.edit_shown(name, arguments) or whole  # an edit: its old text and new
        as_text = " (the model wrote it as text, not as a tool call)" * is_text(call)
        say(
            f"  ⏸ [{code(call)}] {one_line(name)}, id {one_line(call['id'])}{as_text}:\n"
            + consent.shown_command(whole)
        )


def is_text(call: dict) -> bool:
    """Whether the model wrote the call as text (consent.written_as_text())."""
    return consent.written_as_text(call.get("id"))


def shown_arguments(arguments: str) -> str:
    """A call's arguments (they parse: consent.needs_yes()), one a line, as a question shows."""
    return json.dumps(json.loads(arguments), indent=2, ensure_ascii=False)


def decisions(
    path, events: list[dict], approve: list[str] | None, reject: str | None, settings: dict
) -> dict:
    """What --approve [CODE ...] and --reject REASON say of the waiting calls of the paused
    transcript at path: {call id: True, or the reason to decline it}. NotApproved, in one line,
    when the transcript is not paused, when its waiting calls are not among those its pause
    recorded (it changed since), when a bare --approve finds the pause not sealed here
    (sealed_here()), when the pause ran with other settings than these (settings: settings_of()
    for this run), or when a code names none of them. Nothing is spent here: spend() is, once the
    run goes on."""
    pause, messages = last_end(events), runs.conversation(events)
    calls = still_waiting(events, messages)
    if not calls:
        raise NotApproved("the transcript is not paused: no call in it waits for a yes")
    if not is_part_of(recorded_of(calls), recorded_as_shown(pause)):
        raise NotApproved(
            "the transcript changed since it paused: the calls waiting in it are not those its "
            "pause recorded; nothing was run (--show prints what it holds now)"
        )
    sealed = sealed_here(path, events)
    if approve == [] and not sealed:
        raise NotApproved(
            (
                "this pause could not be sealed (runs/ could not keep the key)"
                if pause.get("seal", "") is None
                else "this pause was not recorded by this agent here, or was changed since"
            )
            + ": approve the calls by the codes --show prints (--approve CODE ...)"
        )
    same_settings(path, events, settings, sealed)
    codes = {code(c): c["id"] for c in calls}
    answered = {code(c) for c in last_calls(messages)} - set(codes)
    for given in approve or []:
        if given in answered:
            raise NotApproved(f"the call with the code {given} has been answered already")
        if given not in codes:
            raise NotApproved(
                f"no call waiting in the transcript has the code {one_line(given)!r}: it changed "
                "since it was shown, or the code is mistyped (--show prints what waits; a new "
                'task goes before --approve: --resume RUN "task" --approve)'
            )
    if approve == [] and reject is not None:
        raise NotApproved(
            "--approve without codes approves every waiting call, and leaves none to --reject: "
            "name the ones to approve"
        )
    approved = set(codes.values()) if approve == [] else {codes[c] for c in approve or []}
    chosen = {i: True for i in approved}
    if reject is not None:
        chosen.update({i: Reason(reject) for i in codes.values() if i not in approved})
    return chosen


def spend(path, events: list[dict]) -> None:
    """Record the last pause of the transcript at path as gone on from, where it is sealed here:
    called once the run goes on (the transcript locked for it), so that a resume refused before
    that (another agent holds it, a bad setting) leaves its bare --approve to the next one."""
    if sealed_here(path, events):
        own.spend(last_end(events)["seal"])


def is_part_of(now: list, recorded: list) -> bool:
    """Whether the calls waiting now are the last of those the pause recorded, in order (the
    first may have been answered since, by a --resume that went on)."""
    return bool(now) and recorded[len(recorded) - len(now) :] == now


def last_calls(messages: list[dict]) -> list[dict]:
    """The calls of the last reply."""
    last = next((m for m in reversed(messages) if m["role"] == "assistant"), {})
    return last.get("tool_calls") or []


def one_line(text) -> str:
    """A field from a transcript on one line: its line breaks and invisible characters escaped."""
    return visible(str(text)).replace("\n", "\\n")


def as_call(recorded_call: dict) -> dict:
    """A call as a pause's turn/end records it (call_id, name, arguments), as a message holds it."""
    return {
        "id": recorded_call.get("call_id"),
        "function": {
            "name": recorded_call.get("name"),
            "arguments": recorded_call.get("arguments"),
        },
    }


def pending_calls(pause: dict) -> list[dict]:
    """The calls a pause's turn/end records as waiting, as a message holds them, leaving out what
    is no call (a transcript written by hand may hold anything): what --show and the page show."""
    pending = pause.get("pending") if isinstance(pause.get("pending"), list) else []
    calls = [as_call(c) for c in pending if isinstance(c, dict)]
    return [c for c in calls if transcripts.is_call(c)]


def recorded_as_shown(pause: dict) -> list:
    """The (id, tool, arguments) of each waiting call a pause's turn/end recorded."""
    shown = pause.get("pending")
    if not isinstance(shown, list) or not all(isinstance(c, dict) for c in shown):
        return []
    return [(c.get("call_id"), c.get("name"), c.get("arguments")) for c in shown]


def recorded_of(calls: list[dict]) -> list:
    """The (id, tool, arguments) of each call."""
    return [(c["id"], c["function"]["name"], c["function"]["arguments"]) for c in calls]
