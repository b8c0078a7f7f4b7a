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

import contextlib
import hashlib
import hmac
import json
import os
import secrets
import shlex
import subprocess
import sys
from pathlib import Path

import config
import tools
from realworld.guards import hide_secrets, say, shown_url, visible


class NotApproved(ValueError):
    """--approve or --reject cannot be carried out; the message says why, in one line."""


def is_paused(events: list[dict]) -> bool:
    """Whether a transcript's last turn paused and calls still wait for a yes in it."""
    from realworld import transcripts

    return bool(still_waiting(events, transcripts.rebuild(events)))


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
    """The calls that began to run after the last pause (agent.go_on() records each first): if
    the agent was killed then, they may or may not have run, and are never run again."""
    ends = [i for i, e in enumerate(events) if e["type"] == "turn/end" and "under" not in e]
    after = events[ends[-1] + 1 :] if ends else events
    return {e.get("call_id") for e in after if e["type"] == "tool/started" and "under" not in e}


def last_end(events: list[dict]) -> dict:
    """The last turn/end of the conversation (not of a subagent's), or {}."""
    ends = [e for e in events if e["type"] == "turn/end" and "under" not in e]
    return ends[-1] if ends else {}


def decision(value):
    """An approval as run(approvals=...) takes it: True, "y", "yes", "true", "ok" or "approve"
    approve; False, "", "n", "no" or "false" decline; any other text declines with it as the reason
    the model reads. None: not decided."""
    if value is None or isinstance(value, bool):
        return value
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


def waiting(messages: list[dict], begun: set = frozenset()) -> list[dict]:
    """The open calls that wait for the person's yes (the others run without one), but those
    that began to run (started())."""
    calls = [c for c in open_calls(messages) if c["id"] not in begun]
    return [c for c in calls if tools.needs_yes(c["function"]["name"], c["function"]["arguments"])]


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


def seal(messages: list[dict], pending: list[dict], settings: dict) -> str | None:
    """A keyed digest of the whole conversation up to a pause (the task, every message, every
    result: not the system prompt, which a resumed run replaces by its own), what the pause
    recorded and the settings it ran with, with a key only this machine's runs/ holds: a bare
    --approve goes on only from a pause it finds sealed, so an edit of the transcript anywhere,
    or a transcript from elsewhere, needs the codes --show prints."""
    try:
        config.RUNS.mkdir(mode=0o700, exist_ok=True)
        key_file = config.RUNS / ".pause-key"
        with contextlib.suppress(FileExistsError):  # made once, by the first pause
            fd = os.open(key_file, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            with os.fdopen(fd, "wb") as f:
                f.write(secrets.token_bytes(32))
        key = key_file.read_bytes()
    except OSError:
        return None
    conversation = messages[1:] if messages and messages[0].get("role") == "system" else messages
    # as the transcript holds it: the key hidden, what JSON cannot tell apart the same
    made_of = json.dumps([conversation, pending, settings], sort_keys=True, ensure_ascii=False)
    text = hide_secrets(made_of).encode("utf-8", "surrogatepass")
    return hmac.new(key, text, hashlib.sha256).hexdigest()


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
    """The command a run_shell call would run, whole (its arguments parse: tools.needs_yes())."""
    return json.loads(arguments)["command"]


def explain(messages: list[dict]) -> str:
    """Outcome.text of a pause: what waits, and how a caller of run() goes on."""
    calls = waiting(messages)
    ids = ", ".join(c["id"] for c in calls)
    return (
        f"{len(calls)} command(s) wait for a yes (ids {ids}): approve or decline each by id, "
        "then run(None, messages, approvals={id: True, or the reason to decline}) goes on"
    )


def how_to_go_on(events_path, count: int, settings: dict, replayed: bool = False) -> str:
    """The line the command line prints when a run pauses: the way on, with the settings the run
    had (they came from the person), so that pasted as it is it goes on as the run would have."""
    if replayed:
        return (
            f"paused: {count} command(s) wait for your yes, and a replay has no one to ask: "
            "replay it at a terminal, or with --yes"
        )
    program = quoted(sys.argv[0]) if sys.argv[0].endswith(".py") else "agent.py"
    path = quoted(str(events_path))
    return (
        f"paused: {count} command(s) wait for your yes; go on with: {as_options(settings)}"
        f"python {program} --resume {path} --approve{as_flags(settings)} (all, or the codes "
        f"shown), or --reject 'why'; --show {path} shows them again"
    )


def as_flags(settings: dict) -> str:
    """The command-line options that give these settings (a server address with a password in
    it is left to the person's own setting: it is never printed)."""
    flags = f" --workdir {quoted(settings['workspace'])}"
    if "***@" not in settings["base_url"]:
        flags += f" --base-url {quoted(settings['base_url'])}"
    flags += f" --model {quoted(settings['model'])}" + " --sandbox" * settings["sandbox"]
    return flags


def as_options(settings: dict) -> str:
    """The environment a setting without a flag needs, before the command."""
    return "AGENT_SANDBOX_NETWORK=1 " if settings.get("sandbox_network") else ""


def other_settings(recorded, now: dict) -> str | None:
    """What a run going on from a pause must add to have the settings the pause had, in one
    line; None when they are the same."""
    if not isinstance(recorded, dict) or recorded == now:
        return None if recorded == now else "the pause recorded no settings"
    differ = [key for key in now if recorded.get(key) != now[key]]
    shown = {k: v for k, v in recorded.items() if isinstance(v, (str, bool))}
    wanted = as_flags({**now, **shown}) if all(k in shown for k in now) else ""
    extra = as_options({**now, **shown})
    return (
        f"this pause ran with other settings ({', '.join(differ)}): go on with the same, "
        f"{extra}--resume ... --approve{wanted}"
    )


def quoted(text: str) -> str:
    """text as one word for the person's shell: cmd.exe on Windows, a POSIX shell elsewhere."""
    return subprocess.list2cmdline([text]) if os.name == "nt" else shlex.quote(text)


def show_waiting(messages: list[dict]) -> None:
    """Print each call that waits, whole, as the consent prompt would show it, with its code."""
    for call in waiting(messages):
        shown = tools.shown_command(command_of(call["function"]["arguments"]))
        say(f"  ⏸ [{code(call)}] run_shell, id {one_line(call['id'])}:\n{shown}")


def decisions(
    events: list[dict], approve: list[str] | None, reject: str | None, settings: dict
) -> dict:
    """What --approve [CODE ...] and --reject REASON say of a paused transcript's waiting calls:
    {call id: True, or the reason to decline it}. NotApproved, in one line, when the transcript is
    not paused, when its waiting calls are not among those its pause recorded (it changed since),
    when a bare --approve finds the pause not sealed here (the whole conversation, and nothing
    after the pause), when a pause sealed here ran with other settings than these (settings:
    settings_of() for this run), or when a code names none of them."""
    from realworld import transcripts

    pause, messages = last_end(events), transcripts.rebuild(events)
    calls = still_waiting(events, messages)
    if not calls:
        raise NotApproved("the transcript is not paused: no call in it waits for a yes")
    if not is_part_of(recorded_of(calls), recorded_as_shown(pause)):
        raise NotApproved(
            "the transcript changed since it paused: the calls waiting in it are not those its "
            "pause recorded; nothing was run (--show prints what it holds now)"
        )
    sealed = sealed_here(events)
    if approve == [] and not sealed:
        raise NotApproved(
            (
                "this pause could not be sealed (runs/ could not keep the key)"
                if pause.get("seal", "") is None
                else "this pause was not recorded by this agent here, or was changed since"
            )
            + ": approve the calls by the codes --show prints (--approve CODE ...)"
        )
    if sealed and (other := other_settings(pause.get("settings"), settings)):
        raise NotApproved(other)
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
        chosen.update({i: reject or False for i in codes.values() if i not in approved})
    return chosen


def sealed_here(events: list[dict]) -> bool:
    """Whether the last pause of a transcript is sealed by this agent here, over the whole
    conversation before it, and nothing but a --resume's start has been recorded since (a
    result recorded after it, forged or of a killed run, is not covered by the seal)."""
    from realworld import transcripts

    ends = [i for i, e in enumerate(events) if e["type"] == "turn/end" and "under" not in e]
    if not ends or not isinstance(events[ends[-1]].get("seal"), str):
        return False
    pause = events[ends[-1]]
    if any(e["type"] != "run/resume" for e in events[ends[-1] + 1 :]):
        return False
    before = transcripts.rebuild(events[: ends[-1]])
    made = seal(before, pause.get("pending"), pause.get("settings"))
    given = pause["seal"].encode("utf-8", "surrogatepass")
    return made is not None and hmac.compare_digest(given, made.encode())


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
    from realworld import transcripts

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
