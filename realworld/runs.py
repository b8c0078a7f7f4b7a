"""A run read the one way the loop ran it: what each request sent, from the run's transcript.

transcripts.py writes a run's events as they happen. walk() below reads them once, in their order,
as the loop went: each conversation (the run's own; a helper's, under the call that started it; a
summary's, under its compaction) with the messages and the tools it held before each request. The
reply is the message as the client made it (a recovered call keeps the id its result carries), the
agent's own answer where no reply came (is_no_reply()) is a message but no request's reply, a
compaction replaces what it replaced from the next request on, a handoff's system prompt and tools
too, and a step is numbered as the terminal numbers it: from 1 at each run() (a task, a going on
after a pause or a refusal).

Every view of a run reads it here: --resume goes on from conversation(), --show and the page show
requests(), a replay compares the results it gets with those recorded (realworld/replay.py), the
pauses read what waits (realworld/pauses.py).
"""

from pathlib import Path
from typing import NamedTuple

from realworld import compaction, transcripts
from realworld.guards import clean_text, visible


class Request(NamedTuple):
    """One request the loop sent. under: its conversation (None: the run's own; else the id it
    ran under: a helper's call, or compaction-… for a summary). step: its number as the terminal
    printed it. messages: what it sent, in order. tools: the tools it offered, as the model saw
    them (None where the transcript does not say). reply: the assistant/message event that
    answered it. results: the tool/result events recorded for the reply's calls. system: the
    system message it sent in the place of history[0] (None: history[0] itself): a run/resume or a
    handoff changes the system prompt of a list that goes on, never copying it."""

    under: str | None
    step: int
    history: list[dict]  # the conversation's list of messages; this request sent the first count
    count: int
    tools: list[dict] | None
    reply: dict
    results: list[dict]
    system: dict | None = None

    @property
    def messages(self) -> list[dict]:
        return sent(self.history, self.system, self.count)

    @property
    def calls(self) -> list[dict]:
        """The calls of the reply that answered it."""
        return self.reply["message"].get("tool_calls") or []


class Conversation:
    """One conversation as walk() has read it so far: its list of messages (a new list where a
    compaction replaced one: what an earlier request sent stays as it was), the system message in
    the place of the list's first (None: the first itself), the tools it offers, its step, and
    the agent it was last handed to (None: the program's own)."""

    def __init__(self):
        self.history, self.system, self.tools, self.step = [], None, None, 0
        self.last, self.agent = None, None

    @property
    def messages(self) -> list[dict]:
        """What it holds now, in order (the list itself, or a new one where its system prompt
        changed)."""
        return self.history if self.system is None else sent(self.history, self.system, None)


def sent(history: list[dict], system: dict | None, count: int | None) -> list[dict]:
    """The first count messages of history, with system in the place of the first."""
    return history[:count] if system is None else [system, *history[1:count]]


def walk(events: list[dict]) -> tuple[list[Request], dict[str | None, Conversation]]:
    """Every request a transcript records, in the order they were sent, and each conversation as
    it stood at the end (by its under, None the run's own)."""
    requests, conversations = [], {}
    for event in events:
        under = event.get("under")
        here = conversations.setdefault(under, Conversation())
        kind = event["type"]
        if kind == "run/start" and (under is not None or not here.history):
            # a helper's run starts its own conversation; the run's own starts once, with the
            # messages it was given where run() went on with a conversation from Python
            here.history = [{"role": "system", "content": event["system_prompt"]}]
            here.history += [dict(m) for m in event.get("messages") or []]
            here.system, here.tools, here.step = None, offered(event.get("tools")), 0
        elif kind in ("run/resume", "agent/handoff"):
            changed(here, event.get("system_prompt"))
            here.tools = offered(event.get("tools"), here.tools)
            here.agent = event.get("to") if kind == "agent/handoff" else event.get("agent")
            if kind == "run/resume":  # a new run(), even where the one before was killed
                here.step = 0
        elif kind == "user/message":
            here.history.append({"role": "user", "content": event["content"]})
        elif is_no_reply(event):  # in the conversation from here on; no request got it
            here.history.append(event["message"])
        elif kind == "assistant/message":
            here.step += 1
            here.last = Request(
                under,
                here.step,
                here.history,
                len(here.history),
                here.tools,
                event,
                [],
                here.system,
            )
            requests.append(here.last)
            here.history.append(event["message"])
        elif kind == "tool/result":
            message = {
                "role": "tool",
                "tool_call_id": event["call_id"],
                "content": event["content"],
            }
            here.history.append(message)
            if here.last is not None:
                here.last.results.append(event)
        elif kind == "context/compacted":
            # the system prompt is none of what a compaction replaces: it stays as it is
            here.history = compaction.applied(here.history, event)
        elif kind == "turn/end":  # run() ended: the next one numbers its steps from 1
            here.step = 0
    return requests, conversations


def requests(events: list[dict]) -> list[Request]:
    """What each request of a run sent, in order (walk())."""
    return walk(events)[0]


def conversation(events: list[dict]) -> list[dict]:
    """The run's own conversation as it stands at the end of its transcript: what a --resume goes
    on from (its messages are copies: going on changes none of the events)."""
    here = walk(events)[1].get(None)
    return [dict(m) for m in here.messages] if here else []


def offered(tools, before=None) -> list[dict] | None:
    """The tools an event records as offered: their schemas; before where it records none. An
    old transcript's list of names gives each name alone."""
    if not isinstance(tools, list):
        return before
    return [
        t if isinstance(t, dict) else {"type": "function", "function": {"name": str(t)}}
        for t in tools
    ]


def changed(here: Conversation, prompt) -> None:
    """A conversation given prompt as its system prompt from here on: the same list, its first
    message replaced for the requests to come (copied per event, the lists of a transcript whose
    events alternate two prompts grew with the square of its length: 3.3 MB took 3.9 GB)."""
    if not isinstance(prompt, str):
        return
    system = {"role": "system", "content": prompt}
    if here.history and here.history[0]["role"] == "system":
        now = here.system or here.history[0]
        if now != system:
            here.system = None if here.history[0] == system else system
    else:  # no system prompt yet: it is put first, once
        here.history, here.system = [system, *here.history], None


def with_system_prompt(messages: list[dict], prompt) -> list[dict]:
    """messages with prompt as their system prompt, a new list (messages itself where prompt is
    none, or is the system prompt they have)."""
    if not isinstance(prompt, str):
        return messages
    if messages and messages[0] == {"role": "system", "content": prompt}:
        return messages
    system = {"role": "system", "content": prompt}
    rest = messages[1:] if messages and messages[0]["role"] == "system" else messages
    return [system, *rest]


def names(tools: list[dict] | None) -> list[str]:
    """The names of the tools a request offered (a transcript written by hand may hold anything
    in their place: its text)."""
    function = [t.get("function") if isinstance(t, dict) else t for t in tools or []]
    return [str(f.get("name") if isinstance(f, dict) else f) for f in function]


def read(path: Path) -> list[dict]:
    """The events of a transcript file (transcripts.read()), refused with ValueError where the
    conversation they make repeats a call id."""
    events = transcripts.read(path)
    if repeated := repeated_id(events):
        raise ValueError(f"{path}: {repeated}")
    return events


def repeated_id(events: list[dict]) -> str | None:
    """What repeats a call id in the run's own conversation, or None: two calls with one id (an
    approval of one would approve both), or two results for one call."""
    called, answered = set(), set()
    for message in conversation(events):
        if message["role"] == "tool":
            if message["tool_call_id"] in answered:
                shown = visible(message["tool_call_id"])
                return f"two results answer the call id '{shown}': refused"
            answered.add(message["tool_call_id"])
        for call in message.get("tool_calls") or []:
            if call["id"] in called:
                shown = visible(call["id"])
                return f"two calls have the id '{shown}': a transcript that repeats it is refused"
            called.add(call["id"])
    return None


def is_no_reply(event: dict) -> bool:
    """Whether an event is the assistant message the agent wrote where no reply came to a task
    (pauses.close_open_task()), not a server's reply: its no_reply says why."""
    return event["type"] == "assistant/message" and isinstance(event.get("no_reply"), str)


def is_summary(under) -> bool:
    """Whether a conversation is a summary's (realworld/compaction.py records it under
    compaction-…), not the run's own nor a helper's."""
    return str(under).startswith("compaction-")


def recorded_model(events: list[dict]) -> str:
    """The model a run recorded at its start, as a name (a label and a price: a replay sends
    nothing to it); "" if none."""
    start = next((e for e in events if e["type"] == "run/start" and "under" not in e), {})
    model = clean_text(start.get("model"))
    return model if 0 < len(model) <= 200 and model.isprintable() else ""


def recorded_tasks(events: list[dict]) -> list[str]:
    """Every task a transcript records, in order (not a helper's)."""
    return [e["content"] for e in events if e["type"] == "user/message" and "under" not in e]


def recorded_inputs(events: list[dict]) -> list[str]:
    """What the person gave the run's own conversation, in order: each task, and /compact where
    it compacted the conversation (what a replay gives again)."""
    return [
        e["content"] if e["type"] == "user/message" else "/compact"
        for e in events
        if "under" not in e
        and (e["type"] == "user/message" or (e["type"] == "context/compacted" and e.get("asked")))
    ]


def recorded_task(events: list[dict]) -> str:
    """The first task a transcript records."""
    return next(iter(recorded_tasks(events)), "")


def agent_at_end(events: list[dict]):
    """The agent the run's own conversation was left with: the name of the one it was last handed
    to, or None for the program's own (a --resume records which it went on with)."""
    here = walk(events)[1].get(None)
    return here.agent if here else None
