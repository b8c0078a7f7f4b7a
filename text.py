"""Text for the person and for the model: one way to print progress, and the guards every text passes.

What the model and the tools write is not trusted. say() is how every line for the person reaches
stderr, with control characters shown as escapes. clip() is how every tool result reaches the model,
with the key blanked out and its length bounded.
"""

import re
import sys

import config

# Shown to a terminal as escapes, never interpreted: C0 and C1 controls but newline and tab, and bidi overrides.
CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]")


def say(text: str, end: str = "\n") -> None:
    """A line for the person: on stderr, so that stdout holds only the answer. What the model or a tool wrote
    may be in it, so control characters are shown as escapes: an escape sequence could redraw the screen."""
    print(visible(text), end=end, file=sys.stderr, flush=True)


def visible(text: str) -> str:
    """text with control characters and bidi overrides written as escapes (\\x1b, \\r, \\u202e), so that a
    terminal shows them instead of obeying them. Newlines and tabs stay."""
    return CONTROL.sub(lambda m: m.group().encode("unicode_escape").decode("ascii"), text)


def shorten(text: str, limit: int) -> str:
    """One line of at most limit characters."""
    text = " ".join(str(text).split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def clean_text(value) -> str:
    """A string the server sent as valid Unicode ("" for anything else): a surrogate pair split across two
    stream chunks is joined, a lone surrogate becomes U+FFFD. Neither can be written as UTF-8. Content sent
    as a list of parts (OpenAI's content array) is their text, joined."""
    if isinstance(value, list):
        value = "".join(p["text"] for p in value if isinstance(p, dict) and isinstance(p.get("text"), str))
    if not isinstance(value, str):
        return ""
    return value.encode("utf-16", "surrogatepass").decode("utf-16", "replace")


def blank(text: str) -> str:
    """text with the key replaced by ***: a file, a command or a server may show it."""
    return text.replace(config.HIDDEN_KEY, "***") if config.HIDDEN_KEY else text


def clip(text: str, limit: int | None = None) -> str:
    """What the model gets of a tool result: the key blanked out, then at most limit (AGENT_MAX_OUTPUT)
    characters, the head and the tail, with a line that says how much was left out."""
    text, limit = blank(text), limit or config.MAX_OUTPUT
    if len(text) <= limit:
        return text
    return joined(text[: limit // 2], f"{len(text) - 2 * (limit // 2)} characters", text[-(limit // 2) :])


def joined(head: str, left_out: str, tail: str) -> str:
    """Head and tail with the line between them. Where the cut went through the key, its half is blanked too."""
    key, lengths = config.HIDDEN_KEY, range(len(config.HIDDEN_KEY) - 1, 7, -1)  # 8 characters or more of it
    cut = next((n for n in lengths if head.endswith(key[:n])), 0)
    head = head[:-cut] + "***" if cut else head
    cut = next((n for n in lengths if tail.startswith(key[-n:])), 0)
    tail = "***" + tail[cut:] if cut else tail
    return f"{blank(head)}\n[... {left_out} left out ...]\n{blank(tail)}"
