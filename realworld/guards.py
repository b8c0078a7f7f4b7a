"""Text for the person and for the model: one way to print progress, and the guards
every text passes.

What the model and the tools write is not trusted. say() is how every line for the person reaches
stderr, with control characters shown as escapes. clip() is how every tool result reaches the model,
with the key blanked out and its length bounded.
"""

import contextlib
import contextvars
import functools
import json
import re
import sys
from urllib.parse import quote, urlsplit

import config

# Letters and symbols that Unicode counts as visible but that a terminal draws as nothing:
# the Hangul fillers and the braille blank. Everything else invisible is found by its Unicode
# category (see visible()).
EMPTY_GLYPHS = "\u115f\u1160\u3164\uffa0\u2800"


def say(text: str, end: str = "\n") -> None:
    """A line for the person: on stderr, so that stdout holds only the answer. What the model or
    a tool wrote may be in it, so control characters are shown as escapes: an escape sequence
    could redraw the screen. Inside indented(), each line begins with its prefix."""
    text, prefix = visible(hide_secrets(text)), INDENT.get()
    text = prefix + text.replace("\n", "\n" + prefix) if prefix else text
    print(text, end=end, file=sys.stderr, flush=True)


# what say() puts before each line: a helper's steps are shown inside the caller's (lesson 08)
INDENT = contextvars.ContextVar("indent", default="")


@contextlib.contextmanager
def indented(prefix: str, heading: str):
    """Say heading, then prefix every line said inside the block (a helper's loop, whose steps are
    numbered from 1 too, inside the caller's step)."""
    say(heading)
    token = INDENT.set(INDENT.get() + prefix)
    try:
        yield
    finally:
        INDENT.reset(token)


def visible(text: str) -> str:
    """text with every character a terminal would obey or draw as nothing written as an escape
    (\\x1b, \\r, \\u202e, \\xa0, \\u200b): by Unicode category, the controls, format characters
    (zero-width, bidi), separators but the ASCII space (no-break and ideographic spaces),
    private-use, unassigned and surrogate code points, which are what str.isprintable() refuses;
    and EMPTY_GLYPHS. Newlines and tabs stay."""
    if text.replace("\n", "").replace("\t", "").isprintable() and not any(
        c in text for c in EMPTY_GLYPHS
    ):
        return text
    return "".join(
        c if c in "\n\t" or (c.isprintable() and c not in EMPTY_GLYPHS) else escape(c) for c in text
    )


def escape(character: str) -> str:
    return character.encode("unicode_escape", "backslashreplace").decode("ascii")


def shorten(text: str, limit: int) -> str:
    """One line of at most limit characters. Only ASCII blanks are joined: any other is shown
    by visible()."""
    text = re.sub(r"[ \t\r\n\f\v]+", " ", str(text)).strip()
    return text if len(text) <= limit else text[: limit - 1] + "…"


def arguments_line(arguments: str, limit: int) -> str:
    """A call's arguments on one line of at most limit characters, every blank kept as sent: a
    line break or a tab as \\n or \\t (issue #46: collapsed, "    return" read " return")."""
    text = str(arguments).replace("\r", "\\r").replace("\n", "\\n").replace("\t", "\\t")
    return text if len(text) <= limit else text[: limit - 1] + "…"


def clean_text(value) -> str:
    """A string the server sent as valid Unicode ("" for anything else): a surrogate pair split
    across two stream chunks is joined, a lone surrogate becomes U+FFFD. Neither can be written as
    UTF-8. Content sent as a list of parts (OpenAI's content array) is their text, joined."""
    if isinstance(value, list):
        value = "".join(
            p["text"] for p in value if isinstance(p, dict) and isinstance(p.get("text"), str)
        )
    if not isinstance(value, str):
        return ""
    return value.encode("utf-16", "surrogatepass").decode("utf-16", "replace")


def hide_secrets(text: str) -> str:
    """text with the key and every other credential the person gave (a password in the server's
    address) replaced by ***, also where JSON escaped them: a file, a command or a server may
    show them. say(), the transcript, --show and the printed answer all pass here."""
    for secret in credentials():  # as it is, JSON-escaped, and percent-encoded
        for form in (secret, json.dumps(secret)[1:-1], quote(secret, safe="")):
            text = text.replace(form, "***")
    return text


def credentials() -> list[str]:
    """What the person gave that no one may see: the key, and passwords in the server's address."""
    return [secret for secret in (config.HIDDEN_KEY, *config.HIDDEN_PASSWORDS) if secret]


def shown_url(url: str) -> str:
    """A server's address as it is shown and recorded: a password in it as ***, whatever its
    length."""
    try:
        parts = urlsplit(url)
        if parts.password is None:
            return url
    except ValueError:
        return url
    userinfo, _, host = parts.netloc.rpartition("@")
    return parts._replace(netloc=f"{userinfo.split(':', 1)[0]}:***@{host}").geturl()


def clip(text: str, limit: int | None = None) -> str:
    """What the model gets of a tool result: the key blanked out, then at most limit
    (AGENT_MAX_OUTPUT) characters, the head and the tail, with a line that says how much
    was left out."""
    # valid Unicode: a file name that is not UTF-8 comes as lone surrogates, which no request can
    # carry as UTF-8
    text, limit = hide_secrets(clean_text(text)), limit or config.MAX_OUTPUT
    if len(text) <= limit:
        return text
    return joined(
        text[: limit // 2], f"{len(text) - 2 * (limit // 2)} characters", text[-(limit // 2) :]
    )


def joined(head: str, left_out: str, tail: str) -> str:
    """Head and tail with the line between them. Where the cut went through the key, its half
    is blanked too."""
    # 8 characters or more of it
    key, lengths = config.HIDDEN_KEY, range(len(config.HIDDEN_KEY) - 1, 7, -1)
    cut = next((n for n in lengths if head.endswith(key[:n])), 0)
    head = head[:-cut] + "***" if cut else head
    cut = next((n for n in lengths if tail.startswith(key[-n:])), 0)
    tail = "***" + tail[cut:] if cut else tail
    return f"{hide_secrets(head)}\n[... {left_out} left out ...]\n{hide_secrets(tail)}"


# --- One bound on nesting, for everything read ---------------------------------------------------
# A reply, a transcript line and a call's arguments are read by recursive code (json, pydantic, the
# page): one nested a thousand deep raises RecursionError wherever it goes next. Each is refused
# where it is read, at one bound, in words: real replies and events are under 10 deep, and a JSON
# file a model writes is under 30.
MAX_DEPTH = 100


def too_deep(value, limit: int = MAX_DEPTH) -> bool:
    """Whether value holds containers (dicts, lists, a pydantic model's fields and extras) nested
    more than limit deep; found without recursion."""
    todo = [(value, 1)]
    while todo:
        item, depth = todo.pop()
        if isinstance(item, dict):
            children = list(item.values())
        elif isinstance(item, (list, tuple)):
            children = list(item)
        elif hasattr(item, "__pydantic_fields__"):  # the SDK's reply objects
            extra = getattr(item, "__pydantic_extra__", None) or {}
            children = [*vars(item).values(), *extra.values()]
        else:
            continue
        if depth > limit:
            return True
        # a leaf is never asked for __pydantic_fields__: a failed hasattr() is slow
        todo += [(child, depth + 1) for child in children if not isinstance(child, LEAVES)]
    return False


LEAVES = (str, int, float, type(None))  # what a reply holds that holds nothing (bool is an int)


class Pattern:
    """A regular expression compiled the first time it is used, not at import: a run that never
    meets a dialect's markup never pays for its pattern, and `agent.py --help` starts fast.
    pattern and flags are re.compile()'s; search, sub, finditer and the rest are the compiled
    pattern's."""

    def __init__(self, pattern: str, flags: int = 0):
        self.pattern, self.flags = pattern, flags

    @functools.cached_property
    def compiled(self) -> re.Pattern:
        return re.compile(self.pattern, self.flags)

    def __getattr__(self, name: str):
        if name.startswith("__") or "pattern" not in self.__dict__:  # copy, pickle: not a pattern's
            raise AttributeError(name)
        return getattr(self.compiled, name)


# One token of JSON's structure: a string, whole (one that never closes runs to the end, where
# json.loads stops too), or a bracket. Each character is read once: a string's pattern that must
# find its closing quote is tried again from every later quote where none comes, which is
# quadratic on an unterminated string (a 300 KB line took minutes).
STRUCTURE = Pattern(r'"(?:[^"\\]+|\\.)*"?|[\[\]{}]', re.S)


def nested_deeper(text: str, limit: int = MAX_DEPTH) -> bool:
    """Whether JSON text opens more than limit brackets deep (outside its strings): asked before
    json.loads, which would recurse that deep. One pass over text."""
    depth = 0
    for token in STRUCTURE.findall(text):
        if token in ("[", "{"):
            depth += 1
            if depth > limit:
                return True
        elif token in ("]", "}"):
            depth -= 1
    return False
