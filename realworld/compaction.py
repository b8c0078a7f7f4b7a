"""A conversation that outlasts the model's context window (lesson 10).

Before each request, agent.make_room() estimates what the conversation takes; past LIMIT of the
window, compact() makes room, each stage only if the one before was not enough:

1. the tool results of earlier turns become a placeholder that says what was there (tool,
   arguments, size) and where the whole text is (the transcript, by the call's id);
2. the earliest turns (everything between the system prompt and the current task) become a
   summary the model writes of them: a user message that holds it and a short assistant reply,
   so that roles still alternate as strict chat templates (Gemma, Mistral) require;
3. the current turn's results, but the last reply's, become placeholders too.

The system prompt and the current task stay word for word; every call keeps its answer (a
placeholder is one), so a server accepts the history; and everything before the first message a
stage changes stays byte for byte as it was, so a provider's prompt cache keeps hitting for it.
Each compaction is one line for the person and a context/compacted event in the transcript (what
was replaced, the summary); realworld/runs.py applies it again where it happened, so --resume goes
on from the compacted history and the page shows what each request sent, and the summary's own
request is recorded as a conversation of its own, so --replay answers it.

The window: the server's, once an error has said it (replies.ContextFull); else the setting
AGENT_CONTEXT_WINDOW; else the model family's, below; else DEFAULT_WINDOW.
"""

import uuid

import config
from realworld import dialects, replies, transcripts
from realworld.guards import joined, say, shorten

# A model family's context window in tokens, by the first name its model id contains: each
# provider's model pages (DeepSeek's API docs, OpenAI's and Anthropic's model lists, Qwen's and
# Meta's model cards). Where a server is set up smaller (Ollama's num_ctx), set
# AGENT_CONTEXT_WINDOW.
WINDOWS = (
    ("deepseek", 128_000),
    ("gpt-4.1", 1_000_000),
    ("gpt-5", 400_000),
    ("gpt-4o", 128_000),
    ("o3", 200_000),
    ("o4", 200_000),
    ("claude", 200_000),
    ("gemini", 1_000_000),
    ("qwen3", 40_960),
    ("qwen2.5", 32_768),
    ("llama3", 128_000),
    ("llama-3", 128_000),
    ("mistral", 32_768),
    ("gemma3", 128_000),
    ("gemma", 8_192),
    ("phi-4", 16_384),
    ("smollm", 8_192),
    ("granite", 128_000),
    ("kimi", 128_000),
    ("glm", 128_000),
)
DEFAULT_WINDOW = 32_768
LIMIT = 0.75  # of the window: the rest is for the reply, and for the estimate's error
KEEP = 300  # characters: a shorter tool result is kept as it is

SUMMARY_PROMPT = (
    "You summarize a conversation between a user and an assistant that works in a folder with "
    "tools, for the assistant who will go on with it. Say what the user asked for, what was done "
    "and decided, which files and commands were involved and what they showed, and what is still "
    "open. Plain text, at most 200 words. Do not call tools."
)
SUMMARY_HEAD = "[The conversation before this point was compacted to fit the context window. "
SUMMARY_HEAD += "A summary of it, written by the model:]\n"
SUMMARY_REPLY = "Understood: I will go on from that summary."
SUMMARY_INPUT = 2_000  # characters of each earlier message the summary is written from


def window(model: str, client) -> int:
    """The model's context window in tokens: the smaller of what the server said and the setting,
    else the family's."""
    known = [n for n in (getattr(client, "window", None), config.CONTEXT_WINDOW) if n]
    if known:
        return min(known)
    name = model.lower()
    return next((size for family, size in WINDOWS if family in name), DEFAULT_WINDOW)


def tokens(messages: list[dict], tools: list[dict], client) -> int:
    """The tokens a request takes: the estimate, scaled up where the server has counted more
    (digits, emoji and code take a token for every byte or two in many tokenizers)."""
    return round(replies.estimate(messages, tools) * max(1.0, getattr(client, "ratio", 1.0)))


def too_big(messages: list[dict], tools: list[dict], client, size: int) -> bool:
    """Whether a request of messages would pass LIMIT of a window of size tokens."""
    return tokens(messages, tools, client) > size * LIMIT


def compact(
    messages: list[dict],
    client,
    model: str,
    tools: list[dict],
    transcript,
    asked: bool = False,
    refused: bool = False,
) -> None:
    """Make room in messages, in place, stage by stage (see above). asked: /compact, between
    tasks: stages 1 and 2 whatever the size, every turn so far an earlier one. refused: the
    server refused the request as too long: every stage, whatever the estimate says. One line
    for the person, one event in the transcript."""
    size, before = window(model, client), tokens(messages, tools, client)
    current = len(messages) if asked else current_turn(messages)
    first = start_of(messages)
    replaced = placeholders(messages, first, current, transcript)
    summary = None
    earlier = messages[first:current]
    big = asked or refused or too_big(messages, tools, client, size)
    if big and not nothing_to_summarize(earlier):
        summary = summarize(messages, current, client, model, transcript)
    if refused or too_big(messages, tools, client, size):
        stage3 = placeholders(messages, current_turn(messages), last_reply(messages), transcript)
        replaced |= stage3
    after = tokens(messages, tools, client)
    if after > size and not asked:
        say(
            f"agent: the current task and its last results alone take about {after:,} tokens of "
            f"a window of {size:,}: lower AGENT_MAX_OUTPUT, or start a new conversation"
        )
    done = {"window": size, "before": before, "after": after}
    done |= {"placeholders": replaced, "summary": summary}
    done |= {"asked": True} if asked else {}  # /compact: a replay asks for it where it was
    if not replaced and not summary:
        if asked:  # recorded all the same, for a replay to type /compact here too
            say("compacted: nothing to compact")
            transcripts.record(transcript, "context/compacted", **done)
        return
    what = [f"{len(replaced)} old tool result(s) replaced by a placeholder"] if replaced else []
    what += [f"the first {summary['replaced']} message(s) replaced by a summary"] if summary else []
    where = "the whole text is in the transcript" if transcript else "no transcript keeps it"
    say(
        f"compacted: about {before:,} → {after:,} tokens (window {size:,}): "
        f"{', '.join(what)}; {where}"
    )
    transcripts.record(transcript, "context/compacted", **done)


def start_of(messages: list[dict]) -> int:
    """The index of the first message after the system prompt."""
    return 1 if messages and messages[0]["role"] == "system" else 0


def current_turn(messages: list[dict]) -> int:
    """The index of the current task's message (the last user message), or len(messages)."""
    users = [i for i, m in enumerate(messages) if m["role"] == "user" and i >= start_of(messages)]
    return users[-1] if users else len(messages)


def last_reply(messages: list[dict]) -> int:
    """The index of the last assistant message (its results are the ones the model reads next)."""
    replies_at = [i for i, m in enumerate(messages) if m["role"] == "assistant"]
    return replies_at[-1] if replies_at else len(messages)


class Compacted(str):
    """The text compaction put in a message's place (a placeholder, a summary), as it is sent;
    replaced: the texts it stands for, which the rules that read the conversation still read
    (a call a tool result held stays one the model repeats, not one it makes: replies.quoted_texts).
    within: the compacted texts among what it replaced, whose own it stands for too, read only
    when asked (a summary of a summary, each made with all the texts before, grew with the square
    of the compactions)."""

    def __new__(cls, text: str, replaced=(), within=()):
        made = super().__new__(cls, text)
        made.own, made.within = tuple(replaced), tuple(within)
        return made

    @property
    def replaced(self) -> tuple[str, ...]:
        if self.within:  # read once, in one pass, however deep the summaries of summaries go
            texts, waiting = list(self.own), list(reversed(self.within))
            while waiting:
                inner = waiting.pop()
                texts.append(inner)
                texts += inner.own
                waiting += reversed(inner.within)
            self.own, self.within = tuple(texts), ()
        return self.own


def standing(messages: list[dict]) -> tuple[list[str], list[Compacted]]:
    """What a summary of messages stands for: replies.quoted_texts() of them, the compacted texts
    among them left whole (within: their own texts read when asked)."""
    within, plain = [], []
    for message in messages:
        content = message.get("content")
        if isinstance(content, Compacted) and message.get("role") in ("user", "tool"):
            within.append(content)
            message = {**message, "content": str(content)}
        plain.append(message)
    return replies.quoted_texts(plain), within


def can_make_room(messages: list[dict]) -> bool:
    """Whether compact(refused=True) has anything to make smaller: turns before the current one to
    summarise, or a long tool result not yet a placeholder. A task too long on its own has not."""
    first = start_of(messages)
    earlier = messages[first : current_turn(messages)]
    return (
        not nothing_to_summarize(earlier)
        or any(  # stages 1 and 3: up to the last reply
            m["role"] == "tool"
            and len(m.get("content") or "") > KEEP
            and not is_placeholder(m.get("content") or "")
            for m in messages[first : last_reply(messages)]
        )
    )


def placeholders(messages: list[dict], start: int, end: int, transcript) -> dict:
    """Replace each long tool result in messages[start:end] by a placeholder, in place;
    {call id: placeholder}."""
    calls = {
        call["id"]: call["function"]
        for m in messages
        if m["role"] == "assistant"
        for call in m.get("tool_calls") or []
    }
    replaced = {}
    for message in messages[start:end]:
        content = message.get("content") or ""
        if message["role"] != "tool" or len(content) <= KEEP or is_placeholder(content):
            continue
        function = calls.get(message["tool_call_id"], {"name": "?", "arguments": ""})
        text = placeholder(function, message["tool_call_id"], content, bool(transcript))
        if len(text) < len(content):  # a placeholder never takes more room than what it replaces
            message["content"] = Compacted(text, replies.quoted_texts([message]))
            replaced[message["tool_call_id"]] = text
    return replaced


def placeholder(function: dict, call_id: str, content: str, kept: bool = True) -> str:
    """What stands for a tool result that was compacted: what it was, and where it is whole. No
    path: the same conversation compacts the same way wherever its transcript is."""
    where = (
        f"in the run's transcript, call id {call_id}" if kept else "kept nowhere (no transcript)"
    )
    return (
        f"[compacted: {function['name']}({shorten(function['arguments'], 120)}) returned "
        f"{len(content):,} characters here; the whole text is {where}. Run the tool again if you "
        "need it.]"
    )


def is_placeholder(content: str) -> bool:
    return content.startswith("[compacted: ")


def summarize(messages: list[dict], current: int, client, model: str, transcript) -> dict | None:
    """Replace messages[1:current] by the model's summary of them, in place; what was done, for
    the transcript, or None if the model could not write one (the turns are then kept)."""
    first = start_of(messages)
    text = "\n\n".join(rendered(m) for m in messages[first:current])
    if len(text) > 40_000:  # its beginning and its end
        text = joined(text[:20_000], f"{len(text) - 40_000} characters", text[-20_000:])
    under = transcripts.Nested(transcript, f"compaction-{uuid.uuid4().hex[:8]}")
    asked = transcripts.begin(under, SUMMARY_PROMPT, [])  # a conversation of its own, no tools
    asked.append({"role": "user", "content": text})
    transcripts.record_message(under, asked[1])
    try:
        resp = client.chat.completions.create(model=model, messages=asked)
    except replies.RequestFailed as e:
        say(f"compacting: the model could not write a summary ({shorten(str(e), 200)}); kept")
        size = {"window": window(model, client)} if isinstance(e, replies.ContextFull) else {}
        transcripts.record(under, "turn/end", status=e.status, error=str(e), **size)
        return None
    reply = resp.choices[0].message
    finish_reason = resp.choices[0].finish_reason
    usage = replies.usage_of(resp)
    message = reply.model_dump(exclude_unset=True)
    cost = {"cost": resp.cost} if resp.cost else {}  # counted in the total
    transcripts.record_message(under, message, usage=usage, finish_reason=finish_reason, **cost)
    # a request of its own, on a line of its own: the step lines add up to the total
    say(f"the summary's request: {replies.describe_tokens(replies.count_tokens(usage), resp.cost)}")
    summary = dialects.split_thinking(reply.content or "")[1].strip()
    if not summary or reply.tool_calls or finish_reason in ("length", "content_filter"):
        say("compacting: the model's reply was no summary (empty, cut off or a call); kept")
        transcripts.record(under, "turn/end", status="no_summary")
        return None
    summary = summary[:4_000]
    shorter = summary_messages(summary, *standing(messages[first:current]))
    if tokens(shorter, [], client) >= tokens(messages[first:current], [], client):
        say("compacting: the model's summary was no shorter than what it would replace; kept")
        transcripts.record(under, "turn/end", status="no_summary")
        return None
    messages[first:current] = shorter
    return {"replaced": current - first, "text": summary, "under": under.under}


def rendered(message: dict) -> str:
    """One message as the summary's input: its role, its text and its calls, shortened."""
    text = f"{message['role']}: {shorten(str(message.get('content') or ''), SUMMARY_INPUT)}"
    for call in message.get("tool_calls") or []:
        function = call["function"]
        text += f"\n  → {function['name']}({shorten(function['arguments'], 300)})"
    return text


def nothing_to_summarize(earlier: list[dict]) -> bool:
    """Whether the earlier turns are none, or only the summary of a compaction before."""
    first = str(earlier[0].get("content") or "") if earlier else SUMMARY_HEAD
    return len(earlier) <= 2 and first.startswith(SUMMARY_HEAD)


def summary_messages(summary: str, replaced=(), within=()) -> list[dict]:
    """The two messages that stand for the earliest turns (replaced: what they said; within: the
    compacted texts among them, Compacted)."""
    return [
        {"role": "user", "content": Compacted(SUMMARY_HEAD + summary, replaced, within)},
        {"role": "assistant", "content": SUMMARY_REPLY},
    ]


def recorded_placeholders(event: dict) -> dict:
    """{call id: placeholder} of a context/compacted event, what is text of it."""
    replaced = event.get("placeholders") if isinstance(event.get("placeholders"), dict) else {}
    return {k: v for k, v in replaced.items() if isinstance(v, str)}


def summary_span(roles, event: dict) -> tuple[int, int] | None:
    """Where a context/compacted event's summary goes in a conversation whose messages have roles
    (a sequence, read in place), or None: from after the system prompt to where a task begins, as
    summarize() makes it, never inside a turn."""
    summary = event.get("summary")
    if not isinstance(summary, dict) or not isinstance(summary.get("text"), str):
        return None
    count, first = summary.get("replaced"), 1 if len(roles) and roles[0] == "system" else 0
    if type(count) is not int or not 0 < count <= len(roles) - first:
        return None
    end = first + count
    return (first, end) if end == len(roles) or roles[end] == "user" else None
