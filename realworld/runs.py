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

from realworld import compaction, replies, transcripts
from realworld.guards import clean_text, visible


class Request(NamedTuple):
    """One request the loop sent. under: its conversation (None: the run's own; else the id it
    ran under: a helper's call, or compaction-… for a summary). step: its number as the terminal
    printed it. conversation, index: the conversation it was sent in, and which of its requests
    it was (from 0). count: how many messages it sent. tools: the tools it offered, as the model
    saw them (None where the transcript does not say). reply: the assistant/message event that
    answered it. results: the tool/result events recorded for the reply's calls."""

    under: str | None
    step: int
    conversation: "Conversation"
    index: int
    count: int
    tools: list[dict] | None
    reply: dict
    results: list[dict]

    @property
    def messages(self) -> list[dict]:
        """What it sent, in order (rebuilt from its conversation: nothing is copied per
        request)."""
        return self.conversation.sent(self.index)

    @property
    def calls(self) -> list[dict]:
        """The calls of the reply that answered it."""
        return self.reply["message"].get("tool_calls") or []


class Entry:
    """One message a conversation held, from its request born on (its index among the
    conversation's requests) to its request died (None: to the end), and the entry listed after
    it (the order of every message it ever held: a message that took another's place follows
    it)."""

    __slots__ = ("born", "died", "message", "next", "place", "slot")

    def __init__(self, message: dict, born: int):
        self.message, self.born, self.died, self.next, self.slot = message, born, None, None, 0
        self.place = 0

    def sent_by(self, index: int) -> bool:
        """Whether the conversation's request index sent it."""
        return self.born <= index and (self.died is None or index < self.died)


class Conversation:
    """One conversation as walk() has read it so far: every message it ever held, each once (a
    compaction or a new system prompt ends some and begins others, from the next request on: a
    list copied at each grew with the square of the events), the tools it offers, its step, and
    the agent it was last handed to (None: the program's own)."""

    def __init__(self):
        self.entries = []  # every Entry, in the order it came
        self.slots, self.lo = [], 0  # what it holds now: slots[lo:] (room before, for a summary)
        self.head = self.tail = None  # the first and last Entry listed
        self.marks = []  # len(entries) at each of its requests
        self.results = {}  # call id: the entries of results no placeholder stands for yet
        self.tools, self.step, self.last, self.agent, self.placed = None, 0, None, None, True

    def __len__(self) -> int:
        return len(self.slots) - self.lo

    def at(self, i: int) -> Entry:
        return self.slots[self.lo + i]

    @property
    def messages(self) -> list[dict]:
        """What it holds now, in order."""
        return [e.message for e in self.slots[self.lo :]]

    def listed(self):
        """Every entry it ever held, in the order a list of them reads (each request's, in the
        order it sent them)."""
        entry = self.head
        while entry is not None:
            yield entry
            entry = entry.next

    def sent(self, index: int) -> list[dict]:
        """What its request index sent, in order."""
        return [e.message for e in self.listed() if e.sent_by(index)]

    def made_for(self, index: int, since: int | None = None) -> list[Entry]:
        """The entries its request index sent that its request since (None: none) did not, in
        the order it sent them."""
        start = 0 if since is None else self.marks[since]
        made = [e for e in self.entries[start : self.marks[index]] if e.sent_by(index)]
        if not self.placed:  # each entry's place in the list, counted once walk() has read all
            for place, entry in enumerate(self.listed()):
                entry.place = place
            self.placed = True
        return sorted(made, key=lambda e: e.place)

    def made(self, message: dict, result: bool = True) -> Entry:
        """A new entry, from the next request on. result: a tool result a placeholder may stand
        for (what a compaction made never is one: each is compacted once, as by the loop)."""
        entry = Entry(message, len(self.marks))
        self.entries.append(entry)
        self.placed = False
        content, call_id = message.get("content"), message.get("tool_call_id")
        compacted = isinstance(content, str) and compaction.is_placeholder(content)
        if result and message.get("role") == "tool" and isinstance(call_id, str) and not compacted:
            self.results.setdefault(call_id, []).append(entry)
        return entry

    def append(self, message: dict) -> None:
        entry = self.made(message)
        entry.slot = len(self.slots)
        self.slots.append(entry)
        self.linked(self.tail, [entry])

    def linked(self, after: Entry | None, entries: list[Entry]) -> None:
        """entries listed right after after (None: first)."""
        if not entries:
            return
        following = after.next if after is not None else self.head
        for entry in reversed(entries):
            entry.next, following = following, entry
        if after is None:
            self.head = following
        else:
            after.next = following
        if after is self.tail or self.tail is None:
            self.tail = entries[-1]

    def put(self, old: Entry, message: dict) -> None:
        """message in old's place from the next request on."""
        entry = self.made(message, result=False)
        old.died, entry.slot = len(self.marks), old.slot
        self.slots[old.slot] = entry
        self.linked(old, [entry])

    def spliced(self, first: int, end: int, messages: list[dict]) -> None:
        """messages in the place of what it holds from first to end, from the next request on;
        only the first `first` stay before them."""
        gone = [self.at(i) for i in range(first, end)]
        kept = [self.at(i) for i in range(first)]
        new = [self.made(m, result=False) for m in messages]
        for entry in gone:
            entry.died = len(self.marks)
        self.linked(gone[-1] if gone else (kept[-1] if kept else None), new)
        top = self.lo + end - len(kept) - len(new)
        if top < 0:  # room before it, as much as it holds: made again as seldom as it doubles
            self.roomier(-top + len(self))
            top = self.lo + end - len(kept) - len(new)
        for place, entry in enumerate([*kept, *new], top):
            self.slots[place], entry.slot = entry, place
        self.lo = top

    def roomier(self, room: int) -> None:
        self.slots = [None] * room + self.slots
        self.lo += room
        for entry in self.slots[self.lo :]:
            entry.slot += room

    def compacted(self, event: dict) -> None:
        """A context/compacted event applied where it happened: each placeholder in the place of
        the results of its call that none stands for yet (the loop never compacts one twice), the
        summary in the place of the span it replaced (compaction.summary_span)."""
        span = compaction.summary_span(Roles(self), event)  # the placeholders keep every role
        for call_id, text in compaction.recorded_placeholders(event).items():
            for entry in self.results.pop(call_id, []):
                if entry.died is None:
                    message = entry.message
                    said = replies.quoted_texts([message])
                    self.put(entry, {**message, "content": compaction.Compacted(text, said)})
        if span:
            first, end = span
            gone = [self.at(i).message for i in range(first, end)]
            made = compaction.summary_messages(event["summary"]["text"], *compaction.standing(gone))
            self.spliced(first, end, made)


class Roles:
    """The role of each message a conversation holds now, read in place (never a copy)."""

    def __init__(self, conversation: Conversation):
        self.conversation = conversation

    def __len__(self) -> int:
        return len(self.conversation)

    def __getitem__(self, i: int):
        return self.conversation.at(i).message["role"]


def walk(events: list[dict]) -> tuple[list[Request], dict[str | None, Conversation]]:
    """Every request a transcript records, in the order they were sent, and each conversation as
    it stood at the end (by its under, None the run's own)."""
    requests, conversations = [], {}
    for event in events:
        under = event.get("under")
        here = conversations.setdefault(under, Conversation())
        kind = event["type"]
        if kind == "run/start" and (under is not None or not len(here)):
            # a helper's run starts its own conversation; the run's own starts once, with the
            # messages it was given where run() went on with a conversation from Python
            fresh = conversations[under] = Conversation()
            fresh.last, fresh.agent, here = here.last, here.agent, fresh
            here.append({"role": "system", "content": event["system_prompt"]})
            for message in event.get("messages") or []:
                here.append(dict(message))
            here.tools = offered(event.get("tools"))
        elif kind in ("run/resume", "agent/handoff"):
            changed(here, event.get("system_prompt"))
            here.tools = offered(event.get("tools"), here.tools)
            here.agent = event.get("to") if kind == "agent/handoff" else event.get("agent")
            if kind == "run/resume":  # a new run(), even where the one before was killed
                here.step = 0
        elif kind == "user/message":
            here.append({"role": "user", "content": event["content"]})
        elif is_no_reply(event):  # in the conversation from here on; no request got it
            here.append(event["message"])
        elif kind == "assistant/message":
            here.step += 1
            index = len(here.marks)
            here.marks.append(len(here.entries))
            here.last = Request(under, here.step, here, index, len(here), here.tools, event, [])
            requests.append(here.last)
            here.append(event["message"])
        elif kind == "tool/result":
            message = {
                "role": "tool",
                "tool_call_id": event["call_id"],
                "content": event["content"],
            }
            here.append(message)
            if here.last is not None:
                here.last.results.append(event)
        elif kind == "context/compacted":
            # the system prompt is none of what a compaction replaces: it stays as it is
            here.compacted(event)
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
    """A conversation given prompt as its system prompt from here on: its first message replaced
    for the requests to come, or put first where it has none."""
    if not isinstance(prompt, str):
        return
    system = {"role": "system", "content": prompt}
    if len(here) and here.at(0).message["role"] == "system":
        if here.at(0).message != system:
            here.put(here.at(0), system)
    else:  # no system prompt yet: it is put first, once
        here.spliced(0, 0, [system])


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


def window_of(event: dict, key: str = "window") -> int | None:
    """The context window an event records under key (a refusal's turn/end, a context/window
    event of an older transcript; a run/resume's context_window), or None."""
    size = event.get(key)
    return size if type(size) is int and size >= 256 else None


def windows_said(events: list[dict]) -> list[int]:
    """The windows a recorded run took from the server's refusals, in order: the last is the one
    it went on with."""
    ended = ("turn/end", "context/window")
    return [w for e in events if e["type"] in ended and (w := window_of(e))]


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


def recorded_task(events: list[dict]) -> str:
    """The first task a transcript records."""
    return next(iter(recorded_tasks(events)), "")


def agent_at_end(events: list[dict]):
    """The agent the run's own conversation was left with: the name of the one it was last handed
    to, or None for the program's own (a --resume records which it went on with)."""
    here = walk(events)[1].get(None)
    return here.agent if here else None
