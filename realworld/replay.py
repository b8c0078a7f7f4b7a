"""--replay: a stand-in for the OpenAI client that answers with a transcript's recorded replies.

Each reply is the one the server sent (the client repairs it again, as it did) and is built as the
SDK builds a live one, so resp, msg and msg.tool_calls look as in a live run. Before each reply,
the request the run makes now is held against the request the transcript records at that point
(realworld/runs.py): a recorded reply that follows other tool results may say what no tool said,
so the person is told at that step, and diverged lists each result that differed.
"""

import json
from pathlib import Path
from types import SimpleNamespace

from realworld import compaction, pauses, replies, runs, transcripts
from realworld.calls import ToolError, parameters
from realworld.consent import ask, asks, declined_by_the_user, needs_yes, terminal
from realworld.guards import say, shorten


class ReplayEnded(replies.RequestFailed):
    """The run asked for more replies than the transcript recorded, or for one the recording
    does not have at this point: from here on every request fails so."""

    status = "replay_ended"


class RecordingStopped(replies.RequestFailed):
    """The recorded run was stopped here (killed) and went on later from a --resume."""

    status = "recording_stopped"


class Replay:
    """client.chat.completions.create(...) answered from a transcript (see above)."""

    def __init__(self, events: list[dict], path: Path):
        self.events, self.base_url, self.diverged = events, f"replay of {path}", []
        self.told = False  # whether another task than the recorded one was said to be
        self.replaying = True  # the Client shows no server time for a recorded reply
        self.requests, self.served = runs.requests(events), 0
        # the request each recorded reply answered, by the message it became: which step a result
        # answers
        self.request_of = {id(r.reply["message"]): r for r in self.requests}
        # the window the run was recorded with, so that it compacts where the recording did
        start = next((e for e in events if e["type"] == "run/start"), {})
        size = start.get("context_window")
        self.window = size if isinstance(size, int) and size >= 256 else None
        # where a request of the recorded run failed (refused as too long: it compacted and went on;
        # an error), the replay's fails too, so that it goes on as the recording did
        # and where it went on in a new process (a --resume, a pause gone on from), which began
        # with the window it recorded and nothing counted
        (self.refusals, self.resumes), self.failed, self.ended = refusals(events), {}, None
        self.resumed = None  # the window of one just reached, for the Client to begin again with
        self.turns = turns(events)
        self.typed = typed(events)
        self.chat = SimpleNamespace(completions=SimpleNamespace(create=self.create))

    def create(self, model: str, messages: list[dict], tools=None, **request):
        if self.ended:  # a helper or a summary that swallowed it: the run's own request fails too
            raise ReplayEnded(self.ended)
        if failure := self.take_failure():  # failed where the recording failed, as many times
            status, text, window = failure
            if status == "context_full":
                raise replies.ContextFull(text, window)
            if status == "budget":  # the recording's budget stopped it here: nothing was sent
                raise replies.BudgetSpent(text)
            if status == "interrupted":
                say("replay: the recorded run got no reply here")
                raise RecordingStopped(text)
            raise replies.RequestFailed(text)
        # The replies are given in the order they were recorded, whichever conversation asks:
        # a helper's steps were recorded between its caller's.
        if self.served >= len(self.requests):
            self.end(
                "the transcript has no more recorded replies; this run needs more steps than "
                "were recorded"
            )
        recorded = self.requests[self.served]
        if runs.is_summary(recorded.under) != (
            system_prompt(messages) == compaction.SUMMARY_PROMPT
        ):
            what = (
                "a request for a summary, and the run asks for no summary"
                if runs.is_summary(recorded.under)
                else "no request for a summary, and the run asks for one"
            )
            self.end(
                f"the recorded reply {self.served + 1} answered {what}: it went another way than "
                "the recording"
            )
        self.served += 1
        self.resumed = self.resumes.get((self.served, 0))
        self.compare(recorded, messages)
        event = recorded.reply
        if self.repairs_to(event.get("sent"), event["message"], messages, tools):
            # as the server sent it: the client repairs it again, as it did
            return replies.completion(
                event["sent"], event.get("finish_reason"), event.get("usage"), model
            )
        # as it was recorded, already repaired: the client reads no call in its text again
        return replies.completion(
            event["message"],
            event.get("finish_reason"),
            event.get("usage"),
            model,
            as_recorded=True,
        )

    def budget_stopped(self) -> bool:
        """The replay's own budget stopped a request where the recording's stopped one too: that
        stop is passed, as if it were the recording's; whether there was one."""
        return self.take_failure("budget") is not None

    def take_failure(self, only: str | None = None) -> list | None:
        """The recording's next failure at this request ([status, words, window]), passed, and
        the resume that followed it, if any; None if it has none left here (or none of status
        only)."""
        failures, failed = self.refusals.get(self.served, []), self.failed.get(self.served, 0)
        if failed >= len(failures) or only not in (None, failures[failed][0]):
            return None
        self.failed[self.served] = failed + 1
        self.resumed = self.resumes.get((self.served, failed + 1))
        return failures[failed]

    def end(self, why: str) -> None:
        """Stop the replay: this request fails, and every one after it."""
        self.ended = why
        raise ReplayEnded(why)

    def repairs_to(self, sent, message: dict, messages: list[dict], tools) -> bool:
        """Whether the reply a transcript says the server sent is one the client repairs into the
        message it recorded (every field the same, call ids aside): only then is it the one to
        answer with; anything else in it is what no view of the run shows."""
        if not isinstance(sent, dict):
            return False
        try:
            made = replies.completion(sent, None, None, "replay").choices[0].message
            known, quoting = parameters(tools or []), replies.quoted_texts(messages)
            repaired, _ = replies.reply_message(made, messages, known, quoting)
        except (ValueError, TypeError, AttributeError, KeyError, RecursionError):
            return False
        return said(repaired) == said(message)  # every field, calls and all; ids aside

    def compare(self, recorded: runs.Request, messages: list[dict]) -> None:
        """Say which tool results this request sends that differ from those the recorded one
        sent, and keep them in diverged."""
        task, recorded_task = messages[-1], recorded.messages[-1] if recorded.messages else {}
        other = task.get("role") == recorded_task.get("role") == "user" and task != recorded_task
        if other and not self.told:  # run() from Python: nobody said so at the start
            say(
                f"replay: the task {shorten(str(task.get('content')), 60)!r} is not the recorded "
                f"one ({shorten(str(recorded_task.get('content')), 60)!r}): the recorded replies "
                "answer it all the same"
            )
        reply, before = last_results(recorded.messages)
        _, now = last_results(messages)
        # the step of the reply whose calls these results answer, as the terminal numbered it
        answered = self.request_of.get(id(reply), recorded)
        step, whose = answered.step, conversation_of(answered.under)
        for (name, message), (_, live) in zip(before, now, strict=False):
            if live["content"] != message["content"]:
                shown = (
                    f"recorded: {shorten(message['content'], 80)!r}, "
                    f"now {shorten(live['content'], 80)!r}"
                )
                say(f"replay: step {step}{whose}: {name} gave another result than {shown}")
                self.diverged.append(
                    {
                        "step": step,
                        "conversation": answered.under,
                        "call_id": message["tool_call_id"],
                        "recorded": message["content"],
                        "now": live["content"],
                    }
                )

    def report(self, transcript) -> None:
        """At the end: record each result that differed, and say after which step the replies
        no longer fit."""
        for divergence in self.diverged:
            transcripts.record(transcript, "replay/diverged", **divergence)
        if self.diverged:
            first = self.diverged[0]
            say(
                f"replay: the recorded replies after step {first['step']}"
                f"{conversation_of(first['conversation'])} were written for other tool results"
            )

    def consent(self, turn: dict, yes: bool) -> tuple[bool, bool]:
        """(yes, pause) for run() as it replays a recorded turn. Where the recording paused, the
        replay pauses too, at the call it paused at: with --yes only where the recording ran a
        command unasked in that turn (it had --yes), and pausing where a yes is needed."""
        if turn["paused_at"] is None:
            return yes, False
        return yes and turn["yes"], True

    def approvals(self, turn: dict, yes: bool, messages: list[dict]) -> dict | None:
        """What the replay decides for the calls a recorded pause left open, where the recording
        went on from it: a call it declined is declined again, with its reason; one it ran runs
        where this replay's own settings run it unasked (--yes), else is asked about at a
        terminal, else waits; one it left waiting waits. None where the recording did not go on
        here, or nothing is open."""
        open_calls = pauses.open_calls(messages)
        if turn["going_on"] is None or not open_calls:
            return None
        chosen = {}
        for call in open_calls:
            recorded = turn["going_on"].get(call["id"], WAITED)
            if recorded is True:  # it ran: the person's yes then, this person's now
                recorded = asked(call, yes)
            if recorded is not None and recorded is not WAITED:
                chosen[call["id"]] = recorded
        return chosen

    def paused_as_recorded(self, turn: dict, waiting: list[dict]) -> str | None:
        """Where the replay paused where its recording paused (in a turn that paused, at a call
        the recording did not run): what the recording did next, in a line; None elsewhere."""
        if not turn["paused_at"] or not waiting or waiting[0]["id"] in turn["ran"]:
            return None
        later = self.turns[self.turns.index(turn) + 1 :]
        if any(t["going_on"] is not None for t in later):
            return (
                "it went on later from a --resume, and so does this replay, as its settings let it"
            )
        return "it was not gone on from: nothing after it was recorded"

    def other_tools(self, offered: list[str]) -> list[str]:
        """The tools the recorded run offered and its replies call that are not among offered,
        this program's (a lesson made with examples/subagent.py, replayed by agent.py). A tool
        the recording did not offer either was made up by the model: answered "unknown tool" then,
        and so again."""
        other = set()
        for request in self.requests:
            had = runs.names(request.tools) if request.tools is not None else None
            called = {call["function"]["name"] for call in request.calls}
            other |= {n for n in called if n not in offered and (had is None or n in had)}
        return sorted(other)

    def other_task(self, task: str) -> str:
        """The recorded task, shortened, if it is not task ("" if it is): the recorded replies
        answer that one."""
        recorded_one = runs.recorded_task(self.events)
        self.told = task != recorded_one  # said at the start: not again at the request
        return "" if task == recorded_one else shorten(recorded_one, 100)


def last_results(messages: list[dict]) -> tuple[dict | None, list[tuple[str, dict]]]:
    """A request's last reply, and the tool messages after it, each with the name of the tool it
    answers."""
    last = max((i for i, m in enumerate(messages) if m["role"] == "assistant"), default=None)
    if last is None:
        return None, []
    calls = {c.get("id"): c["function"]["name"] for c in messages[last].get("tool_calls") or []}
    results = [
        (calls.get(m.get("tool_call_id"), "?"), m)
        for m in messages[last + 1 :]
        if m["role"] == "tool"
    ]
    return messages[last], results


def refusals(events: list[dict]) -> tuple[dict, dict]:
    """({the number of replies recorded before them: [[status, words, the window], ...]}, and
    {(replies, failures) recorded before it: its window} for each run/resume of the run's own)
    for the requests of the recorded run that got no reply, in order: refused as longer than the
    context window (context_full), an error (api_error), stopped by the budget before it was sent
    (budget), or a run stopped while it waited or
    before its next request (interrupted): by Ctrl-C, a signal or an error (its turn/end says so),
    or killed (its next event of the run's own is a run/resume, with no turn/end before it).
    Where the agent answered the task in the reply's place (runs.is_no_reply()), the words are the
    reason it gave, so that the replay's answer says the same."""
    found, resumes, served, ended = {}, {}, 0, True
    failure, reason = None, None  # the run's own turn: how its request failed, the reason given
    for event in events:
        kind, status, own = event["type"], event.get("status"), "under" not in event
        failed = None
        if runs.is_no_reply(event):
            reason = event["no_reply"] if own else reason
        elif kind == "assistant/message":
            served, ended = served + 1, ended and not own
        elif kind == "turn/end" and status in ("context_full", "api_error", "budget"):
            failed = [
                status,
                str(event.get("error") or "the request failed"),
                runs.window_of(event),
            ]
        elif (
            kind == "turn/end"
            and own
            and not failure
            and (reason or status in ("interrupted", "error"))
        ):
            failed = ["interrupted", "the recorded run was interrupted here", None]
        elif kind == "context/window" and served in found and runs.window_of(event):
            found[served][-1][2] = runs.window_of(event)  # as a transcript before 2026-12 says it
        elif kind == "run/resume" and own and not ended:
            words = "the recorded run was stopped here; it went on later from a --resume"
            failed = ["interrupted", words, None]
        if failed:
            found.setdefault(served, []).append(failed)
            failure = failed if own else failure
        if own and failure and reason:
            failure[1] = reason
        if own and kind == "run/resume":  # 0: it recorded no window
            size = runs.window_of(event, "context_window")
            resumes[(served, len(found.get(served, [])))] = size or 0
        if own and kind in ("turn/end", "run/resume"):
            ended = True
        elif own and kind == "user/message":
            ended, failure, reason = False, None, None
        elif own and kind == "tool/started":  # going on from a pause: a request would follow
            ended = False
    return found, resumes


def turns(events: list[dict]) -> list[dict]:
    """What the recorded run's own conversation was given, turn by turn, as the person gave it:
    {"task": a task, /compact or None; "paused_at": the first call a pause left waiting, or None;
    "ran": the ids of the calls that began in it; "yes": whether a command among them ran unasked
    (the run had --yes); "going_on": None, or for a process that went on from a pause, {call id:
    True for a call it ran, the Reason it declined one with (or False), None for one that failed
    before it ran}, where a call left out waited again}."""
    found, waiting, going_on, started, calls = [], set(), None, set(), {}
    for event in events:
        kind, call_id = event["type"], event.get("call_id")
        if "under" in event:
            continue
        if kind == "run/resume":  # killed before it: what began waits no more, what did not
            waiting = waiting - started  # begin waited there (as at a pause)
            left = waiting - set(going_on["going_on"]) if going_on else set()
            if left and not going_on["paused_at"]:
                first = next(i for i in calls if i in left)
                name, arguments = calls[first]
                function = {"name": name, "arguments": arguments}
                going_on["paused_at"] = {"id": first, "function": function}
            going_on = None
        if kind == "run/resume" and waiting:  # a process that went on from the pause
            going_on = {**TURN, "ran": set(), "going_on": {}}
            found.append(going_on)
        elif kind == "tool/started" and found:
            started.add(call_id)
            found[-1]["ran"].add(call_id)
            name, arguments = calls.get(call_id, (None, None))
            asked_then = name == "run_shell" and needs_yes(name, arguments, call_id)
            found[-1]["yes"] |= asked_then and call_id not in waiting
        elif kind == "tool/result" and going_on and call_id in waiting:
            going_on["going_on"][call_id] = True if call_id in started else declined(event)
        elif kind == "user/message" and going_on and going_on["task"] is None:
            going_on["task"] = event["content"]
        elif kind == "user/message" or (kind == "context/compacted" and event.get("asked")):
            task = event["content"] if kind == "user/message" else "/compact"
            found.append({**TURN, "task": task, "ran": set()})
        elif kind == "assistant/message":
            going_on = None
            for made in event["message"].get("tool_calls") or []:  # read() checked each
                calls[made["id"]] = (made["function"]["name"], made["function"]["arguments"])
        elif kind == "turn/end" and found:
            pending = pauses.pending_calls(event) if event.get("status") == "paused" else []
            found[-1]["paused_at"] = pending[0] if pending else None
            waiting, going_on = {c["id"] for c in pending}, None
    return found


def typed(events: list[dict]) -> str | None:
    """How the recorded process that ended it ended, where its tasks were typed at the prompt:
    "budget" where the budget ended the session, else "asked" (it exited 0); None where its
    task was given on the command line."""
    starts = [e for e in events if e["type"] in ("run/start", "run/resume") and "under" not in e]
    if not starts or starts[-1].get("typed") is not True:
        return None
    return "budget" if pauses.last_end(events).get("status") == "budget" else "asked"


TURN = {"task": None, "paused_at": None, "yes": False, "ran": None, "going_on": None}
WAITED = object()  # a call that a process which went on from a pause left waiting again


def declined(event: dict):
    """How a recorded call that never began was answered: the Reason it was declined with, False
    for none; None for any other answer (arguments that failed: the replay fails them again)."""
    content, said = str(event.get("content")), f"error: {declined_by_the_user('')}"
    if content == said:
        return False
    return (
        pauses.Reason(content.removeprefix(f"{said}: "))
        if content.startswith(f"{said}: ")
        else None
    )


def asked(call: dict, yes: bool):
    """A call the recording ran, as this replay decides it: True where its settings run it
    unasked; else the person's answer at a terminal (True, or the Reason they declined with);
    None with no terminal (it waits)."""
    function = call["function"]
    name, arguments = function["name"], function["arguments"]
    if not asks(name, arguments, call["id"], {"yes": yes}):
        return True
    if not terminal():
        return None
    try:
        ask(name, json.loads(arguments), call["id"])  # it ran then: its arguments parse
    except ToolError as e:  # declined: with the reason typed, if any
        return (
            pauses.Reason(str(e).removeprefix(declined_by_the_user("")).removeprefix(": ")) or False
        )
    return True


def system_prompt(messages: list[dict]):
    """The system prompt a request sent, or None."""
    return messages[0].get("content") if messages and messages[0].get("role") == "system" else None


def said(message: dict):
    """A reply as JSON, every field, its calls' ids aside."""
    shown = json.loads(json.dumps(message))
    for made in shown.get("tool_calls") or []:
        if isinstance(made, dict):
            made.pop("id", None)
    return shown


def conversation_of(under) -> str:
    """Whose step a replay names: "" for the run's own, else the helper's or the summary's."""
    if under is None:
        return ""
    if runs.is_summary(under):
        return " of a summary's request"
    return f" of the helper under call {under}"
