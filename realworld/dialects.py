# ruff: noqa: RUF003 -- markup and words in other scripts: fullwidth colons, DeepSeek bars
"""How model families write tool calls and thinking as text, and how the agent reads them back.

When a server has no parser for a model (vLLM without --tool-call-parser, llama.cpp without --jinja,
a model newer than the Ollama or LM Studio build), the model's tool calls and its thinking arrive
as plain text in content. Both are read by what they say, not by a list of wrappers: thinking by
markers that name it, a call by a payload that names one of the agent's tools with arguments that
fit, a mention by where it stands. FAMILIES records which family writes what, and where its shape
comes from. docs/servers.md (rules 10 and 12) gives the rules and the server settings that avoid
the leak.
"""

import ast
import bisect
import collections
import functools
import html
import itertools
import json
import re
import sys
import unicodedata

from realworld.guards import Pattern, clean_text, shorten, visible

# --- Arguments as models write them --------------------------------------------------------------

INFO_STRING = Pattern(r"[\w-]*\s*")  # what may follow the opening ``` of a fence: json


def unfenced(text: str) -> str | None:
    """What a ```json ... ``` fence around the whole text holds, or None. Read with str methods:
    a regular expression for it backtracked for minutes on a fence followed by newlines."""
    text = text.strip()
    info, newline, rest = text[3:].partition("\n")
    if not (text.startswith("```") and newline and rest.endswith("```")):
        return None
    return rest[:-3].rstrip() if INFO_STRING.fullmatch(info) else None


def clean_arguments(raw) -> tuple[str, str | None]:
    """A tool call's arguments as valid JSON text to send back, and what was repaired
    (None if nothing).

    Valid JSON is kept byte for byte, so that every later request begins with the same bytes
    (rule 7). Arguments a model wrote sloppily but unambiguously are re-encoded once, here. What
    cannot be read is kept as a JSON string, for llama.cpp's --jinja server parses earlier calls'
    arguments and answers 500 on invalid JSON; tools.check_args() then tells the model what it
    sent."""
    if isinstance(raw, (dict, list)):  # some servers send an object, not a string
        try:
            raw = json.dumps(raw, ensure_ascii=False)
        except RecursionError:
            raw = "[nested too deep]"
    raw = clean_text(raw)
    if not raw.strip() or raw.strip() == "null":  # null: a call with no arguments
        return "{}", None
    try:
        value = json.loads(raw)
    except (ValueError, RecursionError):  # RecursionError: nested thousands deep
        args, how = parse_sloppy(raw)
        return (
            (json.dumps(args, ensure_ascii=False), how)
            if args is not None
            else (json.dumps(raw), None)
        )
    # encoded twice: a JSON string holding the object, or holding anything
    if isinstance(value, str):
        args, _ = parse_sloppy(value)
        return (
            (json.dumps(args, ensure_ascii=False), "arguments encoded twice")
            if args is not None
            else (raw, None)
        )
    return raw, None


def parse_sloppy(text: str) -> tuple[dict | None, str | None]:
    """A JSON object as small models write it, and how it was read; (None, None) if it
    is not one."""
    fenced = unfenced(text)
    attempts = [
        (text, True, None),
        (text, False, "raw control characters (a newline or tab) inside a JSON string"),
    ]
    if fenced is not None:
        attempts += [
            (fenced, strict, "arguments wrapped in a Markdown code fence")
            for strict in (True, False)
        ]
    for candidate, strict, how in attempts:
        try:
            value = json.loads(candidate, strict=strict)
        except (ValueError, RecursionError):
            continue
        if isinstance(value, dict):
            return value, how
    return None, None


# --- Thinking written as text --------------------------------------------------------------------
# Thinking is recognised by what its markers say: a tag or token that names thinking (think,
# thought, reasoning) opens it, the same with /, end or close closes it. This covers the families
# of vLLM's reasoning parsers (vllm/reasoning/, llama.cpp common/chat-parser.cpp) without a row
# each: <think> (DeepSeek-R1, Qwen3, GLM, Kimi, MiniMax, OLMo 3, ...), <think:HASH> (Hunyuan),
# <seed:think>, <mm:think>, <longcat_think>, <ifm|think_fast>, <thinking> (Apriel 1.5), [THINK]
# (Magistral), <|START_THINKING|> (Command A), <|think:start|> (Solar Open 2),
# <|plamo:begin_think:plamo|>, <|open|>think<|sep|> (Kimi K3), and Apertus' <|inner_prefix|>.
# A closing marker that no opening marker opened ends thinking too: the template put the opening
# in the prompt (vLLM's deepseek_r1 reasoning parser). Granite writes headers instead: "Here is my
# thought process:" ... "Here is my response:". What wraps the answer after thinking (Hunyuan's
# <answer>, ERNIE's <response>, Command A's <|START_RESPONSE|>, Apriel's [BEGIN FINAL RESPONSE],
# Kimi K3's <|open|>response<|sep|>) is never printed.
THINK_MARK = Pattern(
    r"<\|?/?[\w:|.-]{0,30}?(?:think|thought|reasoning)[\w:|.-]{0,30}?(?:\s[^<>]{0,100})?\|?>"
    r"|\[/?(?:THINK|THOUGHT|REASONING)\]|<\|(?:open|close)\|>think<\|sep\|>|<\|inner_(?:prefix|suffix)\|>"
    r"|<\|channel\|>analysis"
    # the name after the token: Gemma 4's <|channel>thought ... <channel|> (vLLM
    # reasoning/gemma4_reasoning_parser.py), closed by the token's mirror
    r"|<\|\w{1,20}>(?:thought|thinking|think|reasoning|analysis)\b|<channel\|>",
    re.I,
)
CLOSING = Pattern(r"/|end|close|suffix|^<\w+\|>$", re.I)
# Granite's and Apriel's headers: the thinking runs to a line break before the response's
THINK_HEADER = Pattern(r"\s*Here(?: is|'s| are) my (?:thought process|reasoning steps?):\s*", re.I)
RESPONSE_HEADER = Pattern(r"Here(?: is|'s) my response:|\[BEGIN FINAL RESPONSE\]", re.I)


def headed_thinking(content: str, at: int) -> tuple[str, str]:
    """(the thinking after a header that ends at content[at], the rest from the response's header,
    or "" where none follows after a line break). The headers are found by what they say, and the
    blank before one is looked at once: a pattern that tried each line break of a long run of
    them read the run again at each."""
    for mark in RESPONSE_HEADER.finditer(content, at):
        kept = mark.start()  # the blank before the header, read back once
        while kept > at and content[kept - 1].isspace():
            kept -= 1
        blank = content[kept : mark.start()]
        if "\n" in blank:
            return content[at:kept] + blank[: blank.index("\n")], content[mark.start() :]
    thinking = content[at:]
    return (thinking[:-1], "\n") if thinking.endswith("\n") else (thinking, "")


ANSWER_OPEN = Pattern(
    r"\s*(?:<(?:answer|response|final)>|<\|START_RESPONSE\|>|\[BEGIN FINAL RESPONSE\]"
    r"|<\|open\|>response<\|sep\|>|Here(?: is|'s) my response:)\s*",
    re.I,
)
ANSWER_CLOSE = Pattern(
    r"\s*(?:</(?:answer|response|final)>|<\|END_RESPONSE\|>|\[END FINAL RESPONSE\]"
    r"|<\|close\|>response<\|sep\|>)(?:\s|<\|[^|<>\s]{1,30}\|>)*\Z",
    re.I,
)
# gpt-oss's harmony format: the analysis channel is thinking, the final channel the answer
# (openai/harmony docs/format.md; llama.cpp common/chat-parser.cpp common_chat_parse_gpt_oss). With
# special tokens stripped (a server that decodes with skip_special_tokens) the words run together:
# "analysis...assistantfinal...".
HARMONY_ANALYSIS = Pattern(
    r"\s*(?:<\|start\|>assistant)?<\|channel\|>analysis<\|message\|>(.*?)(?:<\|end\|>|$)", re.S
)
HARMONY_FINAL = Pattern(
    r"\s*(?:<\|start\|>assistant)?<\|channel\|>(?:final|commentary)(?: ?<\|constrain\|>\w+)?"
    r"<\|message\|>(.*)",  # its end token is cut off after: (.*?) then an optional one backtracked
    re.S,
)
HARMONY_GLUED = Pattern(r"\s*analysis(.*?)assistant(?:final|(?=commentary to=))(.*)$", re.S)


def split_thinking(content: str) -> tuple[str, str]:
    """(thinking, the rest) of a reply's text; ("", content) when there is no thinking. Unclosed
    thinking is all thinking: the rest is ""."""
    pieces, at = [], 0  # one pass over the analysis blocks, joined once
    while analysis := HARMONY_ANALYSIS.match(content, at):
        if analysis.end() == at:
            break
        pieces.append(analysis.group(1))
        at = analysis.end()
    thinking, rest = "".join(pieces), content[at:]
    final = HARMONY_FINAL.match(rest) if thinking or rest.lstrip().startswith("<|") else None
    glued = HARMONY_GLUED.match(rest) if not thinking else None
    if final and "to=" not in rest[: rest.find("<|message|>")]:
        answer = final.group(1).rstrip()
        return thinking, answer.removesuffix("<|return|>").removesuffix("<|end|>")
    if glued:
        return glued.group(1), glued.group(2)
    if thinking:
        return thinking, rest
    return marked_thinking(content)


def marked_thinking(content: str) -> tuple[str, str]:
    """Thinking between markers that name it, or under Granite's headers; blocks one after
    another are all thinking."""
    thinking, answer = one_thinking(content)
    pieces = [thinking]
    # each block reads the rest again: past MOST_BLOCKS (no model writes so many), the rest is
    # the answer, so that a reply of thousands of closing marks is read in bounded time
    while thinking and len(pieces) < MOST_BLOCKS and (more := one_thinking(answer))[0]:
        pieces.append(more[0])
        answer = more[1]
    return "\n".join(pieces), answer


MOST_BLOCKS = 64


def one_thinking(content: str) -> tuple[str, str]:
    """The first thinking of content and the rest."""
    header = THINK_HEADER.match(content)
    if header:
        thinking, rest = headed_thinking(content, header.end())
        return thinking, response(rest)
    outside, read_to = None, 0  # found when a closing mark first needs it, for the text up to it
    for mark in THINK_MARK.finditer(content):
        closing = bool(CLOSING.search(mark.group()))
        if not closing and not content[: mark.start()].strip(BLANK):  # thinking opens the reply
            close = next(
                (m for m in THINK_MARK.finditer(content, mark.end()) if CLOSING.search(m.group())),
                None,
            )
            if close is None:
                return content[mark.end() :], ""
            return content[mark.end() : close.start()], response(content[close.end() :])
        if closing and mark.end() > read_to:
            # whether a place is code depends on the text up to its line's end only: read to a
            # line's end at least twice as far each time, so that thousands of marks are one pass
            read_to = content.find("\n", max(mark.end(), 2 * read_to)) % (len(content) + 1)
            outside = outside_code(content[:read_to])
        if closing and ends_thinking(content, mark.start(), len(mark.group()), outside):
            return content[: mark.start()], response(content[mark.end() :])
        if not closing:
            break  # thinking opened after some text: quoted, and so is what follows
    opener = ANSWER_AFTER_THINKING.search(content)  # the template opened the thinking (Apriel)
    if opener and content[: opener.start()].strip() and outside_code(content)(opener.start()):
        return content[: opener.start()], response(content[opener.start() :])
    return "", response(content) if ANSWER_OPEN.match(content) else content


BLANK = " \t\r\n\ufeff"  # and a byte-order mark
ANSWER_AFTER_THINKING = Pattern(
    r"^[ \t]*(?:\[BEGIN FINAL RESPONSE\]|<\|START_RESPONSE\|>|Here(?: is|'s) my response:)", re.M
)


def ends_thinking(text: str, at: int, length: int, outside) -> bool:
    """Whether a closing tag that no opening tag opened, at text[at], ends thinking rather than
    being quoted. It does outside code (fenced, `inline` or indented: outside, from
    outside_code(text)) where it starts its line or ends a sentence ("Done.</think>Hi"), or where
    it ends its line or a tool call follows it (GLM-4.7) and no word and space lead into it
    ("the tag is </think>" quotes it)."""
    line_start = text.rfind("\n", max(0, at - 200), at) + 1
    before = text[max(line_start, at - 200) : at]
    line = text[at + length : at + length + 200].split("\n", 1)[0]  # bounded: a mark a line
    after_a_sentence = ends_a_sentence(before)
    ends = (not line.strip() or line.lstrip().startswith(("<", "["))) and not before.endswith(" ")
    return (after_a_sentence or ends) and outside(at)


def response(text: str) -> str:
    """The answer after thinking, without the markers that wrap it."""
    opening = ANSWER_OPEN.match(text)
    if not opening:
        return text
    answer = text[opening.end() :]
    closing = ANSWER_CLOSE.search(answer[-200:])
    return answer[: len(answer) - len(closing.group())] if closing else answer


def no_answer(msg, thinking: str) -> str:
    """Why an empty reply is no answer, with the end of the model's reasoning if it sent any."""
    refusal = msg.get("refusal") if isinstance(msg, dict) else getattr(msg, "refusal", None)
    if isinstance(refusal, str) and refusal.strip():
        return f"the model refused: {shorten(refusal, 300)}"
    reasoning = (reasoning_of(msg) or thinking).strip()
    why = "the model ended without an answer (no text and no tool calls)"
    return f"{why}; its reasoning ended: …{shorten(reasoning[-300:], 300)}" if reasoning else why


def reasoning_of(message) -> str:
    """The reasoning a server sent in a field of its own: DeepSeek's reasoning_content, or reasoning
    (vLLM, Ollama, OpenRouter). message: the SDK's message, or a message as sent back."""
    for field in ("reasoning_content", "reasoning"):
        value = message.get(field) if isinstance(message, dict) else getattr(message, field, None)
        if isinstance(value, str) and value.strip():
            return value
    return ""


# --- Tool calls written as text ------------------------------------------------------------------
# A call is recognised by what it says, not by the markup around it: a PAYLOAD that names one of
# the agent's tools and gives arguments that fit that tool's parameters, in one of the shapes
# models write (a JSON object or list with the name and the arguments; NAME then a JSON object;
# XML-like parameters; a Python call). The markup around payloads (special tokens, bare tags,
# bracket tokens, separators) is read past and never printed, and the text around them stays the
# content. A payload is a mention, never run, where its place says it is quoted (mention(),
# below). FAMILIES records which model writes what; no row reads anything itself, so a family
# that wraps a known payload in new markup needs no new code.

B = "[\uff5c|]"  # DeepSeek's bars: the fullwidth U+FF5C, or an ASCII | as models also write it

# The names of the tags formats wrap calls in (<tool_call>, <minimax:tool_call>, <TOOLCALL>,
# <invoke>, <parameter>, <arg_key>, <function_calls>, <start_function_call>): any other tag (<p>,
# <reply>, <li>) is the text's own, neither read past nor taken out of the content.
# A name is made of the formats' words, each part of it one or two of them (TOOLCALL), joined by
# _ . or -, after a namespace (minimax:, seed:); one of them names a call. So <Callout>, <tooltip>
# and <recall> are the text's own. Each name reads one way only: a name that could be split at
# several places made "<callcallcall>" * 12 take seconds to refuse.
CALL_WORD = (
    r"(?:tool|call|func(?:tion)?|invoke|param(?:eter)?|arg"
    r"|key|value|start|end|begin|section|name)s?"
)
CALL_TAG = Pattern(
    r"(?=[\w.:-]{0,64}?(?i:tool|func|call|invoke|param|arg))(?:[A-Za-z]\w{0,30}:)?"
    rf"(?i:{CALL_WORD}(?:{CALL_WORD})?(?:[_.-]{CALL_WORD}(?:{CALL_WORD})?)*)(?![\w:])"
)

# Markup around and between payloads. SPECIAL is what no prose writes: special tokens (<|...|>,
# DeepSeek's <｜...｜>), the tags CALL_TAG names, without attributes (<tool_call>, </invoke>,
# <｜DSML｜function_calls>), the generic format's {"tool_calls": and Qwen-Agent's ✿FUNCTION✿.
SPECIAL = (
    rf"<{B}[^<>\n]{{0,64}}?{B}>"
    rf"|</?(?:{B}[^<>\s]{{1,16}}?{B})?(?:{CALL_TAG.pattern})>"
    r"|\{\s*\"(?:tool_calls?|function_calls?)\"\s*:|Action:\s*```(?:json)?"  # Command R
    r"|\u273f[A-Z_]{1,30}\u273f:?|<\|[\w:.-]{1,40}>|<[\w:.-]{1,40}\|>"
)
# Word-shaped markup, which prose writes too (Mistral's [TOOL_CALLS] beside [WIP], Gemma's call:,
# Functionary's >>>, the words harmony's and DeepSeek V3's stripped tokens leave): markup only
# glued to the call it opens, on its line (\Z: the end of the text read before a payload).
GLUED = (
    r"\[/?[A-Z][A-Z_]{2,30}\](?=[ \t]*(?:\S|\Z))|>>>(?=\S|\Z)|\bcall:(?=\S|\Z)"
    r"|(?:assistant|commentary|analysis|function|functools)(?=[<\[]| to=)"
    r"|function call(?=<\|role_sep)"  # GigaChat 3's (vLLM gigachat3_tool_parser.py)
    r"|\bto=(?=\S|\Z)"  # the blank before it is blank, read once
)
TOKEN = rf"{SPECIAL}|{GLUED}"
# after a call: a fence it opened, brackets (not the [ of the next call's [TOOL_CALLS])
MARKUP = Pattern(rf"(?:{SPECIAL}|\[(?!/?[A-Z][A-Z_]{{2,30}}\])|[\s,;\]}}]|```)+")
MARKUP_AT_END = Pattern(rf"(?:{TOKEN}|[\s,;\[\]])+\Z")
SPECIAL_AT_END = Pattern(rf"(?:{SPECIAL}|\s)+\Z")
OPENING = Pattern(TOKEN)  # a call that opens with its format's markup

# Between a tool's name and its JSON arguments: DeepSeek's separator and ```json fence, Kimi's
# :0 and argument token, Mistral's [CALL_ID]id[ARGS], harmony's <|constrain|>json<|message|>.
# One item at a time (glue()): as one pattern of 40 optional items, a name followed by 42
# backticks took seconds to refuse, each split of them tried.
GLUE_ITEM = Pattern(rf"```(?:json)?|\s+|:\d+|[\"'`>]|\[CALL_ID\]\w{{0,64}}|{TOKEN}|json|commentary")


def glue(text: str, at: int) -> int | None:
    """Where the arguments after a name begin ({, or "{ for ones encoded as a string), past at
    most 40 items of glue; None if no object follows."""
    for _ in range(41):
        if text.startswith(("{", '"{'), at):
            return at
        item = GLUE_ITEM.match(text, at)
        if not item or not item.group():
            return None
        at = item.end()
    return None


NAME_KEYS = ("name", "function", "tool", "tool_name", "function_name")
ARGUMENT_KEYS = ("arguments", "parameters", "args", "input", "params", "kwargs")
OTHER_KEYS = {"type", "id", "index", "call_id", "tool_call_id"}


@functools.lru_cache(maxsize=1024)  # many names inside one long value read it from one start
def json_at(text: str, at: int):
    """(the JSON value that starts at text[at], where it ends), or None; None too when an object
    gives one key twice (which value is meant is a guess). Read in a window that grows while the
    value runs past it: json's error counts the lines before it, which is the whole text once a
    reply holds thousands of names. The value is shared: no caller changes it."""
    size = 4096
    while True:
        piece, cut = text[at : at + size], at + size < len(text)
        try:
            value, end = DECODER.raw_decode(piece)
        except json.JSONDecodeError as error:
            inside = error.pos < len(piece) - 64 and not error.msg.startswith("Unterminated")
            if not cut or inside:
                return None
        except (ValueError, RecursionError):
            return None
        else:
            if not cut or end < len(piece):
                return value, at + end
        size *= 4


def python_at(text: str, at: int, limit: int = 100_000):
    """(the Python literal that starts at text[at], where it ends), or None: a call payload in
    single quotes, with True, False, None or a trailing comma, read with ast as NousResearch's
    Hermes parser falls back to ast.literal_eval (utils.py); each key once, as json_at()."""

    end = closing_paren(text, at, limit) if text.startswith(("{", "["), at) else None
    try:
        return (python_value(ast.parse(text[at:end], mode="eval").body), end) if end else None
    except (ValueError, TypeError, SyntaxError, RecursionError, MemoryError):
        return None


def python_value(node):
    """A Python literal's value as JSON's: objects with each key once, lists, plain values."""

    if isinstance(node, ast.Dict):
        keys = [python_value(k) if k is not None else {} for k in node.keys]  # {}: **spread
        return once(list(zip(keys, map(python_value, node.values), strict=True)))
    if isinstance(node, (ast.List, ast.Tuple)):
        return [python_value(item) for item in node.elts]
    value = literal(node)
    if not isinstance(value, (str, int, float, bool, type(None))):
        raise ValueError("not a JSON value")  # a set, bytes, a complex number
    return value


def once(pairs: list) -> dict:
    """A JSON object whose keys are each given once."""
    value = dict(pairs)
    if len(value) != len(pairs):
        raise ValueError("a key given twice")
    return value


DECODER = json.JSONDecoder(strict=False, object_pairs_hook=once)


def arguments_of(value) -> dict | None:
    """Arguments as a dict: an object, or a string holding one (encoded once or twice)."""
    if isinstance(value, str):
        held = value.strip()
        if held and held[0] + held[-1] not in ("{}", '""', "``"):  # holds no object
            return None
        try:  # one key twice, even encoded in a string, is a guess: no arguments
            value = DECODER.decode(clean_arguments(value)[0]) if held else {}
        except ValueError:
            return None
    return value if isinstance(value, dict) else None


def named(value) -> tuple[str, dict] | None:
    """(name, arguments) of a JSON call object: {"name", "arguments"} under the names models use
    for both (Hermes, Llama, Mistral, xLAM, Granite...), or OpenAI's {"type", "function": {...}}."""
    if not isinstance(value, dict):
        return None
    if isinstance(value.get("function"), dict) and set(value) <= {"function", *OTHER_KEYS}:
        return named(value["function"])
    names = [k for k in NAME_KEYS if isinstance(value.get(k), str)]
    found = [k for k in ARGUMENT_KEYS if k in value]
    if len(names) != 1 or len(found) != 1 or set(value) - {*names, *found, *OTHER_KEYS}:
        return None
    arguments = arguments_of(value[found[0]])
    return (value[names[0]], arguments) if arguments is not None else None


def keyed(value) -> tuple[str, dict] | None:
    """Apertus' {"NAME": {arguments}}: one key, the tool's name (vLLM apertus_tool_parser.py)."""
    if isinstance(value, dict) and len(value) == 1:
        ((name, arguments),) = value.items()
        return (name, arguments) if isinstance(arguments, dict) else None
    return None


def object_around(text: str, name: re.Match, _wanted=None, decode=None):
    """A JSON call object that holds the name as its name, the outermost of up to three that
    start shortly before it (OpenAI's {"type", "function": {...}} holds one), or the object that
    opens its line or follows a tag, whatever its keys' order: (arguments, start, end)."""
    decode, best = decode or json_at, None
    for start in starts_before(text, name.start()):
        found = decode(text, start)
        call = named(found[0]) or keyed(found[0]) if found and found[1] > name.end() else None
        if call and tool_name(call[0], [name.group("name")]) == name.group("name"):
            best = call[1], start, found[1]
    return best


FAR = 20_000  # how far before its name an object that opens a line may begin ("arguments" first)


def starts_before(text: str, at: int) -> list[int]:
    """Where a call object holding text[at] may begin: up to three { shortly before it, and the
    last { that opens a line or follows a tag (LINE_OBJECT); nearest first."""
    starts, start = [], at
    for _ in range(3):
        start = text.rfind("{", max(0, at - 300), start)
        if start < 0:
            break
        starts.append(start)
    lines = line_objects(text)  # found once for the text: each name looks them up by bisection
    index = bisect.bisect_left(lines, at) - 1
    opens = lines[index] if index >= 0 and lines[index] >= at - FAR else -1
    if opens >= 0 and (not starts or opens < starts[-1]):
        starts.append(opens)
    return starts


@functools.lru_cache(maxsize=8)
def line_objects(text: str) -> list[int]:
    """Where each { that opens a line or follows a tag stands, in order."""
    return [m.end() - 1 for m in LINE_OBJECT.finditer(text)]


LINE_OBJECT = Pattern(r"(?<=[\n>]) ?\{")  # Hermes' <tool_call>\n{...}, the name anywhere in it


def object_after(text: str, name: re.Match, _wanted=None, decode=None):
    """NAME, markup, then its arguments as a JSON object: (arguments, start, end)."""
    begins, decode = glue(text, name.end()), decode or json_at
    found = (decode(text, begins) or gemma_object(text, begins)) if begins is not None else None
    arguments = arguments_of(found[0]) if found else None
    if arguments is None:
        return None
    end = found[1]
    if "```" in text[name.end() : begins]:  # DeepSeek V3 closes the fence it opened
        close = FENCE_CLOSE.match(text, end)
        end = close.end() if close else end
    return arguments, head(text, name), end


FENCE_CLOSE = Pattern(r"\s*```")


def head(text: str, name: re.Match) -> int:
    """Where the opening tag a name stands in begins (<function=, <invoke name=", <read_file), or
    the name itself."""
    opening = text.rfind("<", max(0, name.start() - 40), name.start() + 1)
    between = text[opening : name.start()] if opening >= 0 else ""
    return opening if HEAD.fullmatch(between) else name.start()


HEAD = Pattern(rf"<(?:{B}DSML{B})?(?:[\w:.-]{{1,30}}(?:=|\s+name=)[\"']?)?")


# FunctionGemma's and Gemma 4's {key:<escape>value<escape>, n:42}: keys bare, strings between
# escape tokens (vLLM functiongemma_tool_parser.py, gemma4_tool_parser.py).
GEMMA_PAIR = Pattern(
    r"\s*(\w{1,64}):(?:<escape>((?:(?!<escape>).)*)<escape>|<\|\"\|>((?:(?!<\|\"\|>).)*)<\|\"\|>"
    r"|(\"(?:[^\"\\]|\\.)*\")"
    r"|([^,{}<]*))",
    re.S,
)


def gemma_object(text: str, at: int):
    """(the arguments of a Gemma call object at text[at], where it ends), or None. Read pair by
    pair: as one pattern of optional pairs, "{a:b a:b ..." took minutes to refuse."""
    if not text.startswith("{", at):
        return None
    arguments, at = {}, at + 1
    while p := GEMMA_PAIR.match(text, at):
        if p.group(1) in arguments:
            return None  # a key given twice: which value is meant is a guess (as once() says)
        quoted = p.group(4) and json_at(p.group(4), 0)  # "g4q.txt": the value without quotes
        arguments[p.group(1)] = (
            quoted[0] if quoted else next(v for v in p.groups()[1:] if v is not None)
        )
        at = GEMMA_COMMA.match(text, p.end()).end()
    if not arguments or not text.startswith("}", at):
        return None
    return {k: v.strip() if isinstance(v, str) else v for k, v in arguments.items()}, at + 1


GEMMA_COMMA = Pattern(r"\s*,?\s*")


@functools.cache
def parameter_pattern(wanted: tuple[str, ...]) -> re.Pattern:
    """One parameter of a tool in the XML-like forms: <parameter=K>V</parameter> (Qwen3-Coder, which
    may leave the closing tag out), <parameter name="K">V</parameter> (MiniMax, DeepSeek's DSML,
    Step3's steptml:), GLM's <arg_key>K</arg_key><arg_value>V</arg_value>, and <K>V</K> for the
    tool's own parameter names. Each value stops at the next opening of its kind."""
    own = "|".join(re.escape(w) for w in wanted)
    return re.compile(
        r"\s*(?:<parameter=(?P<key>[^<>\n]{1,256})>\n?"
        r"(?P<value>(?:(?!<parameter=|</function>).)*?)\n?(?:</parameter>|(?=<parameter=|</function>)|$)"
        rf"|<(?P<tag>(?:{B}DSML{B}|\w{{1,20}}:)?(?:parameter|param|argument|arg))\s+name=[\"']?"
        r"(?P<named>[^\"'<>\n]{1,256}?)[\"']?(?P<attrs>\s[^<>]{0,200})?>"
        r"(?P<named_value>(?:(?!<(?P=tag)[\s>]).)*?)</(?P=tag)>"
        r"|(?:\\n)*<arg_key>(?P<glm_key>[^<]{1,256})</arg_key>(?:\s|\\n)*"
        r"<arg_value>(?P<glm_value>(?:(?!<arg_key>).)*?)</arg_value>"
        rf"|<(?P<own>{own})>(?P<own_value>(?:(?!<(?P=own)>).)*?)</(?P=own)>)",
        re.S,
    )


TAG_REST = Pattern(r"[\"']?\s*>?(?:\\n|\s|<tool_sep>)*")  # HY-V3 puts <tool_sep> after the name


def parameters_after(text: str, name: re.Match, wanted: list[str]):
    """NAME at the head of an XML-like call, then its parameters: (arguments, start, end)."""
    at, arguments = TAG_REST.match(text, name.end()).end(), {}
    parameter = parameter_pattern(tuple(wanted))
    while len(arguments) < len(wanted) and (p := parameter.match(text, at)):
        key = p.group("key") or p.group("named") or p.group("glm_key") or p.group("own")
        value = next(
            (v for v in p.group("value", "named_value", "glm_value", "own_value") if v is not None),
            None,
        )
        if not key or key.strip() not in wanted or value is None:
            break
        if key.strip() in arguments:
            return None  # a key given twice: which value is meant is a guess (as once() says)
        value, at = true_end(text, p, wanted) or (value, p.end())
        if 'string="false"' in (p.group("attrs") or ""):  # DSML marks a value that is not text
            value = (json_at(value.strip(), 0) or [value])[0]
        arguments[key.strip()] = value
    if LEFT_OVER.match(text, at):  # a closing tag no parameter opened: a value held a parameter's
        return None  # opening tag, and which of its text is value and which is markup is a guess
    return (arguments, head(text, name), at) if arguments else None


# A parameter's closing tag after the last parameter read: no parameter is open there
LEFT_OVER = Pattern(r"(?:\s|\\n)*</(?:[^<>\s]{0,40}?)(?:parameter|param|argument|arg|arg_value)>")


def true_end(text: str, p: re.Match, wanted: list[str]):
    """(value, end) when the closing tag that ended a parameter is text inside its value, as a
    Qwen3-Coder value that holds "</parameter>" (vLLM qwen3coder_tool_parser.py reads it so, in
    _find_true_param_end); None when the first closing tag is the end."""
    group = next(g for g in VALUE_GROUPS if p.group(g) is not None)
    tag = {"value": "parameter", "named_value": p.group("tag"), "glm_value": "arg_value"}
    closing = f"</{tag.get(group, p.group('own'))}>"
    after, first = structure(tuple(wanted)), p.end(group) + text.startswith("\n", p.end(group))
    closed = text.startswith(closing, first)
    if after.match(text, first + len(closing) if closed else p.end(group)):
        return None  # the first closing tag ends it, or the next parameter (Qwen3-Coder may
        # leave its closing tag out); not one that opens inside the value, with a name not wanted
    opening = "<parameter=" if group == "value" else closing.replace("/", "", 1)[:-1]
    close = structural_close(text, p.end(group), closing, opening, wanted)
    if close is None:
        return None
    value = text[p.start(group) : close]
    return value.removesuffix("\n") if group == "value" else value, close + len(closing)


VALUE_GROUPS = ("value", "named_value", "glm_value", "own_value")


def structural_close(text: str, at: int, closing: str, opening: str, wanted, limit=200_000):
    """Where the first closing tag from text[at] that structure follows stands (openings of its
    kind nest, each closed by one), within limit characters and 256 tags; None if none does."""
    depth, stop = 0, min(len(text), at + limit)
    outer, inner = tags_at(closing, opening, tuple(wanted))
    for _ in range(256):  # a value holds a few nested tags: thousands are a loop, not a value
        if not (found := (inner if depth else outer).search(text, at, stop)):
            break
        if found.group() == opening:
            depth += 1
        elif not depth:
            return found.start()
        else:
            depth -= 1
        at = found.end()
    return None


@functools.cache
def tags_at(closing: str, opening: str, wanted: tuple[str, ...]) -> tuple[re.Pattern, ...]:
    """What structural_close() looks for: outside any nested opening, an opening or a closing
    that structure follows; inside one, an opening or any closing."""
    tags = f"{re.escape(opening)}|{re.escape(closing)}"
    return re.compile(
        f"{re.escape(opening)}|{re.escape(closing)}(?={structure(wanted).pattern})"
    ), re.compile(tags)


@functools.cache
def structure(wanted: tuple[str, ...]) -> re.Pattern:
    """What follows a parameter's true closing tag: the next parameter of the call (in any of
    parameter_pattern()'s forms, naming one of wanted), a closing tag, a special token, the end."""
    own = "|".join(re.escape(w) for w in wanted)
    return re.compile(
        rf"(?:\s|\\n)*(?:<parameter=(?:{own})>|<(?:{B}DSML{B}|\w{{1,20}}:)?(?:parameter|param|argument"
        rf"|arg)\s+name=[\"']?(?:{own})[\"'\s>]|<arg_key>|<(?:{own})>|</[^<>\s]{{1,80}}>"
        rf"|<{B}[^<>\n]{{0,64}}?{B}>|<\|[^<>\n]{{0,40}}\|>|\Z)"
    )


def python_call(text: str, name: re.Match, wanted: list[str]):
    """NAME(k="v", ...) with literal values, true, false and null as JSON's (Llama 3.2 and 4,
    OLMo 3, LFM2; Llama 3.1's NAME.call(...)): (arguments, start, end)."""

    at = name.end() + 5 * text.startswith(".call(", name.end())
    end = closing_paren(text, at) if text.startswith("(", at) else None
    try:
        call = ast.parse("f" + text[at:end], mode="eval").body if end else None
        keys = [k.arg for k in call.keywords] if isinstance(call, ast.Call) else []
        # a key given twice (by place and by name, or twice by name) or **{...}: Python refuses
        # the first, and which value is meant is a guess
        if (
            not isinstance(call, ast.Call)
            or len(call.args) > len(wanted)
            or None in keys
            or len(set(keys) | set(wanted[: len(call.args)])) < len(keys) + len(call.args)
        ):
            return None
        arguments = dict(zip(wanted, map(literal, call.args), strict=False))
        arguments |= {k.arg: literal(k.value) for k in call.keywords}
    except (ValueError, TypeError, SyntaxError, RecursionError, MemoryError):
        return None
    return arguments, name.start(), end


BRACKETS = Pattern(r"\'{3}|\"{3}|[()\[\]{}\"'\\]")  # Python's triple quotes as one mark


def closing_paren(text: str, at: int, limit: int = 200_000) -> int | None:
    """Where the bracket opened at text[at] closes, quotes respected, within limit characters;
    None if it does not."""
    depth, quote, escaped = 0, "", -1
    for mark in BRACKETS.finditer(text, at, min(len(text), at + limit)):
        c, i = mark.group(), mark.start()
        if i == escaped:
            continue
        if c == "\\":
            escaped = i + 1
        elif quote:  # three quotes close a one-quote string, then open and close an empty one
            quote = "" if c == quote or (len(quote) == 1 and c == quote * 3) else quote
        elif c[0] in "\"'":
            quote = c
        elif c in "([{":
            depth += 1
        else:
            depth -= 1
            if depth == 0:
                return i + 1
    return None


def literal(node):
    """A Python literal's value; true, false and null as JSON's (OLMo 3 writes them so)."""

    json_names = {"true": True, "false": False, "null": None}
    if isinstance(node, ast.Name) and node.id in json_names:
        return json_names[node.id]
    return ast.literal_eval(node)


def fits(arguments: dict, wanted: list[str]) -> bool:
    """Whether arguments are the tool's parameters, each required one given (wanted.optional may
    be left out, or null: calls.Parameters), none more, each a plain value (the tools take
    strings; a number or a truth value is the model's meaning too)."""
    optional = getattr(wanted, "optional", ())
    needed = {w for w in wanted if w not in optional}
    return needed <= set(arguments) <= set(wanted) and all(
        isinstance(v, (str, int, float, bool)) or (v is None and k in optional)  # null: not given
        for k, v in arguments.items()
    )


def python_around(text: str, name: re.Match, _wanted=None):
    """A call object written as a Python literal that holds the name: (arguments, start, end)."""
    return object_around(text, name, decode=python_at)


def python_after(text: str, name: re.Match, _wanted=None):
    """NAME, markup, then its arguments as a Python literal: (arguments, start, end)."""
    return object_after(text, name, decode=python_at)


def python_like(text: str, name: re.Match, read) -> bool:
    """Whether a reader that failed looked for a closing bracket: python_call after NAME( ."""
    return read is not python_call or text.startswith(("(", ".call("), name.end())


# JSON first, as NousResearch's parser prefers json.loads; a Python literal where JSON fails
READERS = (object_around, object_after, parameters_after, python_call, python_around, python_after)
BRACKETED = (python_call, python_around, python_after)


def payloads(text: str, known: dict[str, list[str]]) -> list[tuple]:
    """Every payload in text that names a known tool with arguments that fit: (name, arguments,
    start, end), in order, none overlapping. Each name is read once, and each reader is bounded:
    the reading stays linear in the text."""
    if not known:
        return []
    names = re.compile(
        # functions.NAME (Kimi, harmony), functionNAME (DeepSeek V3 with its tokens stripped)
        r"(?<![\w-])(?:(?:functions?|tools?)\.|function)?(?P<name>"
        + "|".join(re.escape(n) for n in sorted(known, key=len, reverse=True))
        + r")(?![\w-])"
    )
    found, end, unclosed = [], 0, 0
    for name in names.finditer(text):
        if name.start() < end:
            continue  # inside the payload before
        wanted = known[name.group("name")]
        for read in READERS:
            if read in BRACKETED and unclosed > 16:
                continue  # each looks for its closing bracket (100,000 characters or more)
            got = read(text, name, wanted)
            unclosed += read in BRACKETED and not got and python_like(text, name, read)
            if got and fits(got[0], wanted) and got[1] >= end:
                found.append((name.group("name"), got[0], got[1], got[2]))
                end = got[2]
                break
    return found


# --- Calls and mentions --------------------------------------------------------------------------
# A payload is a call only where it stands as one, by structure alone (no words are read): a reply
# that calls a tool ends with its call, since the model waits for the result. So only the last run
# of calls after the thinking can be calls, with nothing after it but markup, and none of them
# inside something that holds it (contained()): code (but a fence that is the whole reply or says
# it is a call), a quotation, a list item, a table row or a definition, a block indented under a
# line, a diff line, a triple-quoted string, an element, comment or environment left open,
# brackets its markup did not open, or a line it goes on (a comment's marks, a sentence). Nor is a
# call one that copies a call of the person's message or of a tool result (echoes()). What this
# costs: an example standing alone at the end of a reply is read as a call, and waits for a yes.

# What opens a block that holds the rest of its line: a list item (a bullet, or an ordinal: a
# number in any script's digits, a Roman or CJK numeral, one letter of any script; then . or ) and
# a blank, or the CJK 、 and fullwidth . and ), or wrapped in brackets as in (a) and its fullwidth
# form), a table row, a definition (PHP Markdown Extra's and Pandoc's ": "), a link reference
# definition or footnote (CommonMark 4.7, GFM's [^1]:)
ORDINAL = r"(?:\d{1,3}|[ivxlcIVXLC]{1,7}|[一二三四五六七八九十百千〇]{1,4}|[^\W\d_])"
WRAPPED = rf"[(\uff08]{ORDINAL}[)\uff09]"
ITEM = Pattern(
    rf"[ \t]*(?:(?:[-*+•·‣◦▪●■\u2013]|{ORDINAL}[.)]|{WRAPPED}|\||:|\[[^\]\n]{{1,200}}\]:)"
    rf"[ \t\u3000]|{ORDINAL}[、\uff0e\uff09]|{WRAPPED})"
)
# GFM's table delimiter row (GFM spec 4.10): cells of hyphens, colons at their edges, one pipe at
# least; the lines after it in its paragraph are the table's rows, with or without a leading pipe
DELIMITER_ROW = Pattern(r"[ \t]*(?=[^\n]*\|)\|?(?:[ \t]*:?-+:?[ \t]*\|)*[ \t]*:?-+:?[ \t]*\|?\s*")
DIFF_HUNK = Pattern(r"^(?:@@ -\d|--- \S|\+\+\+ \S)", re.M)  # a unified diff's headers
# an opening tag not glued to a word (List<T> is a type), a closing tag anywhere (<b>a.txt</b>)
ELEMENT = Pattern(r"(?:(?<!\w)<|<(?=/))(/?)([A-Za-z][\w:.-]{0,64})(?:\s[^<>]{0,2000})?(/?)>")
# HTML's void elements, which hold nothing (WHATWG HTML, 13.1.2 Elements)
VOID = {"area", "base", "br", "col", "embed", "hr", "img", "input", "link", "meta", "source"}
VOID |= {"track", "wbr"}


def contained(text: str, run: list[tuple], outside, prose: str) -> bool:
    """Whether the run of calls (last_run()) stands inside something that holds it. prose: the
    text with its code blanked (without_code()): what a closed code block or span holds (a tag,
    a quotation mark, a table row, a hunk header) opens nothing around the call."""
    start = run[0][0]
    line_start = text.rfind("\n", 0, start) + 1
    return (
        not outside(start)
        or closes_unopened(text, run)
        or in_list(prose, line_start)
        or indented_under(text, line_start)
        or in_diff(prose, line_start, start)
        or in_quotation(prose, line_start, start)
        or in_element(prose, start)
        or in_environment(prose, start)
        or in_bracket_pair(text, run)
        or goes_on_its_line(text, line_start, start)
        # thinking it did not start with: the reply explains thinking
        or bool(THINK_MARK.search(prose, max(0, start - 100_000), start))
    )


def without_code(text: str, calls=()) -> str:
    """text with what its fenced blocks (but the fences in calls) and `inline` spans hold blanked,
    its line breaks kept: every place stays where it was."""
    blocks, spans = code_of(text, tuple(calls))
    pieces, at = [], 0
    for start, end in sorted(blocks + spans):
        if end > at:
            start = max(start, at)
            pieces += [text[at:start], re.sub(r"[^\n]", " ", text[start:end])]
            at = end
    return "".join(pieces) + text[at:]


def in_bracket_pair(text: str, run: list[tuple]) -> bool:
    """Whether bracket tokens wrap the run, as [EXAMPLE] CALL [/EXAMPLE]: one closed after it that
    opened before it."""
    after, before = text[run[-1][1] :], text[: run[0][2][0][2]]  # the first payload's start
    return any(f"[{closed}]" in before for closed in re.findall(r"\[/([A-Z][A-Z_]{2,30})\]", after))


def closes_unopened(text: str, run: list[tuple]) -> bool:
    """Whether the run's markup closes a bracket it did not open ({"example": CALL} holds it), or
    leaves one open that it opened (EXAMPLES = [ CALL holds it too)."""
    at, depth = run[0][0], 0
    pieces = [(p[2], p[3]) for _start, _end, unit in run for p in unit] + [(run[-1][1], None)]
    for payload_start, payload_end in pieces:
        for bracket in BRACKET.findall(re.sub(BRACKET_TOKEN, "", text[at:payload_start])):
            depth += 1 if bracket in "[{" else -1
            if depth < 0:
                return True
        at = payload_end
    return depth > 0


BRACKET = Pattern(r"[\[\]{}]")
BRACKET_TOKEN = r"\[/?[A-Z][A-Z_]{2,30}\]"  # Mistral's, which open nothing


def in_list(text: str, line_start: int) -> bool:
    """Whether the call's line is a list item, a table row or a definition."""
    paragraph = text[max(0, line_start - 20_000) : line_start].rsplit("\n\n", 1)[-1]
    table = any(DELIMITER_ROW.fullmatch(line) for line in paragraph.split("\n"))
    return table or bool(ITEM.match(text, line_start))


def indented_under(text: str, line_start: int) -> bool:
    """Whether the call's line is indented deeper than a line above it, which holds it as its
    block (a list item's, YAML's key: |, reStructuredText's code-block::, a Python body)."""
    indent = indent_of(text[line_start : line_start + 1000])
    above = text[max(0, line_start - 100_000) : line_start].split("\n")
    return indent > 0 and any(line.strip() and indent_of(line) < indent for line in above)


def indent_of(line: str) -> int:
    """The columns of blank a line starts with, a tab to the next multiple of 4."""
    return len(line[: len(line) - len(line.lstrip(" \t"))].expandtabs(4))


def goes_on_its_line(text: str, line_start: int, start: int) -> bool:
    """Whether the call goes on what its line starts with: marks with no letter (a comment's #,
    //, --; a heading), or, for a bare payload that no markup of its format opens, prose ending
    with a letter or a digit, in any script."""
    before = text[line_start:start].strip()
    if before and not any(unicodedata.category(c).startswith("L") for c in before):
        return True
    if OPENING.match(text, start):
        return False
    # a bare payload at the head of its line goes on a line that an operator or a comma ends
    above = text[max(0, line_start - 200) : max(0, line_start - 1)].rpartition("\n")[2]
    return continues(above) if not before else not ends_a_sentence(before)


def ends_a_sentence(before: str) -> bool:
    """Whether text ends where a sentence may: nothing, or a mark that is no letter, digit or
    opening quotation (Unicode's categories: every script's full stop, and emoji, count), nor a
    math symbol (x = CALL) or a comma (a, CALL: a list or a row goes on)."""
    last = before.rstrip()[-1:]
    if continues(before):
        return False
    return not last or not (unicodedata.category(last)[0] in "LNM" or quotes(last))


def continues(line: str) -> bool:
    """Whether a line ends with an operator or a comma, which what follows goes on (x =, a,):
    a math sign or ASCII's - and ^, and * after a blank (x *, not Markdown's **Call:**), but a
    tag's < > and an arrow (→)."""
    text = line.rstrip()
    last = text[-1:]
    if text.endswith((" *", "\t*")) or (last and last in COMMAS + "-^"):
        return True
    arrow = "\u2190" <= last <= "\u21ff"
    return bool(last) and unicodedata.category(last) == "Sm" and last not in "<>" and not arrow


COMMAS = ",\u3001\uff0c\u060c\ufe50"  # and the ideographic, fullwidth, Arabic and small ones


def in_diff(text: str, line_start: int, start: int) -> bool:
    """Whether the line is an added, removed or context line of a diff."""
    prefix = text[line_start:start]
    if prefix[:1] in ("+", "-") and not prefix[1:].strip():
        return True
    return prefix[:1] == " " and bool(DIFF_HUNK.search(text, 0, line_start))


def in_quotation(text: str, line_start: int, start: int) -> bool:
    """Whether a quotation is open before the call: a mark on its line or in its paragraph, a
    triple-quoted string (a docstring), or a blockquote that the line goes on."""
    before = text[max(0, start - 100_000) : start]
    if (before.count('"""') + before.count("'''")) % 2 or quotes(text[line_start:start]):
        return True
    above = text[max(0, line_start - 2000) : max(0, line_start - 1)].rsplit("\n", 1)[-1]
    paragraph = before[-2000:].rsplit("\n\n", 1)[-1].split("\n")[:-1]
    # a blockquote goes on, lazily, to its paragraph's end (CommonMark 5.1)
    lazy = any(
        line.lstrip().startswith(">") and not line.lstrip().startswith(">>>") for line in paragraph
    )
    return opened_above(above) or lazy or open_quotation(before[-2000:])


def in_element(text: str, start: int) -> bool:
    """Whether an element that is not call markup is open where the call starts: one closed after
    it; or one never closed (HTML leaves </li> and </p> out) that holds raw text (<pre>,
    <script>), or that opens a block, its tag alone at the head or the end of its line, with no
    blank line after it (CommonMark 4.6: an HTML block ends at one). A void element (<br>) holds
    nothing, nor a tag in the middle of prose (read <path> now, (e.g. <path>))."""
    begin = max(0, start - 100_000)
    blank_lines = [m.start() for m in BLANK_LINE.finditer(text, begin, start)]
    marks = []
    for tag in ELEMENT.finditer(text, begin, start):
        closing, name, empty = tag.groups()
        name = name.lower()
        if not (CALL_TAG.fullmatch(name) or empty or name in VOID):
            released = bisect.bisect_left(blank_lines, tag.end()) < len(blank_lines)
            marks.append((not closing, name, opens_a_block(text, tag) and not released))
    closed_after = {m.group(1).lower() for m in CLOSING_TAG.finditer(text, start)}
    return any(
        block or name in RAW_TEXT or name in closed_after for name, block in left_open(marks)
    )


CLOSING_TAG = Pattern(r"</([A-Za-z][\w:.-]{0,64})\s*>")


BLANK_LINE = Pattern(r"\n[ \t]*\n")
RAW_TEXT = {"pre", "script", "style", "textarea", "xmp", "listing", "plaintext"}  # CommonMark 4.6


def opens_a_block(text: str, tag: re.Match) -> bool:
    """Whether a tag opens its line (read within 200 characters), as an HTML block's does
    (CommonMark 4.6): not one in the middle or at the end of prose (read <path>, as: <path>)."""
    before = text[max(0, tag.start() - 200) : tag.start()].rpartition("\n")
    return bool(before[1] or tag.start() <= 200) and not before[2].strip()


def left_open(marks) -> list[tuple]:
    """What marks, (whether it opens, name, what to keep of it) in order, leave open, as (name,
    what was kept): a close closes the last open of its name and all opened after it (HTML's
    implied end tags); one that closes nothing open is ignored. Each is pushed and popped once."""
    stack, counts = [], collections.Counter()
    for opens, name, *kept in marks:
        if opens:
            stack.append((name, *kept))
            counts[name] += 1
        elif counts[name]:
            while (top := stack.pop())[0] != name:
                counts[top[0]] -= 1
            counts[name] -= 1
    return stack


# What else holds the text up to its close: a LaTeX environment, an Org block, a block comment
# (HTML's <!-- -->, C's /* */, OCaml's (* *), Haskell's {- -}, Julia's #= =#, Jinja's {# #}), a
# Pandoc fenced div (::: name ... :::, Docusaurus' and Quarto's too), Perl's POD and Ruby's
# =begin (to =cut, =end), LaTeX's \iffalse (to \fi), a here-document
ENVIRONMENT = Pattern(
    r"\\(begin|end)\{([^{}\n]{1,40})\}|^[ \t]*#\+(begin|end)_(\w+)"
    r"|(<!--|(?<![\w/.*~])/\*|\(\*(?=\s)|\{-(?=[\s#|])|^[ \t]*#=(?=\s)|^[ \t]*\{#(?=[\s-])"
    r"|^:{3,}(?=[ \t]*[{\w])"
    r"|^=(?:begin|pod|head\d|over|item|for)\b|\\iffalse\b)"
    r"|(-->|\*/|\*\)|-\}|=#|#\}|^:{3,}[ \t]*$|^=(?:cut|end)\b|\\fi\b)",
    re.M | re.I,
)
COMMENT_CLOSES = {"<!--": "-->", "/*": "*/", "(*": "*)", "{-": "-}", "#=": "=#", "{#": "#}"}
COMMENT_CLOSES |= {"\\iffalse": "\\fi"}
# Bash's here-document: <<WORD or <<-WORD (the word quoted or not) holds the lines up to one that
# is the word alone, after tabs for <<- (Bash manual, 3.6.6 Here Documents)
# (and Ruby's <<~WORD): only where the line ends after it or goes on to a redirection or a pipe,
# as a command's does; C++'s cout << x; and a shift x <<MASK; are no here-documents
HEREDOC = Pattern(r"<<([-~]?)[ \t]?(['\"]?)([A-Za-z_]\w{0,30})\2(?=[ \t]*(?:\r?$|\d*[|<>&]))", re.M)


def in_environment(prose: str, start: int) -> bool:
    """Whether a LaTeX environment, an Org block, a block comment, a fenced div, a POD block or a
    here-document is open at the call (prose: the text without its code, whose marks are the
    code's)."""
    marks, begin = [], max(0, start - 100_000)
    for mark in ENVIRONMENT.finditer(prose, begin, start):
        word = (mark.group(1) or mark.group(3) or "").lower()
        name = (mark.group(2) or mark.group(4) or "").lower()
        if mark.group(5) or word == "begin":
            marks.append((True, environment_close(mark.group(5)) or name))
        else:
            marks.append((False, name or environment_close(mark.group(6))))
    return bool(left_open(marks)) or any(
        not closes_heredoc(prose, doc, start) for doc in HEREDOC.finditer(prose, begin, start)
    )


def environment_close(mark: str | None) -> str | None:
    """The mark that closes a block comment, div or POD block opened or closed by mark, as one
    name for both."""
    if not mark:
        return None
    if mark.startswith(":::"):
        return ":::"
    if mark.startswith("="):
        return "=pod"
    mark = mark.strip().lower()
    return COMMENT_CLOSES.get(mark, mark)


def closes_heredoc(text: str, doc: re.Match, start: int) -> bool:
    """Whether a line that is the here-document's word alone stands between it and the call."""
    tabs = "\t*" if doc.group(1) else ""
    line = re.compile(rf"^{tabs}{re.escape(doc.group(3))}\r?$", re.M)
    return text.find("\n", doc.end(), start) >= 0 and bool(line.search(text, doc.end(), start))


# The families of quotation marks (Unicode's Pi and Pf, CJK's brackets): a language opens and
# closes with either of its family (“…”, „…“, ”…” in Swedish, «…», »…« in Danish), so an odd count
# leaves one open. Single marks are left out: ’ is an apostrophe too.
QUOTATION_FAMILIES = (
    '"\uff02',
    "\u201c\u201d\u201e\u201f",
    "«»",
    "\u2039\u203a",
    "「」",
    "『』",
    "〝〞〟",
)


def open_quotation(before: str) -> bool:
    """Whether the paragraph before a call leaves a quotation open: an odd count of one family's
    marks."""
    paragraph = before.rsplit("\n\n", 1)[-1]
    paragraph = INCHES.sub("", paragraph)  # 15" is a unit, no quotation
    return any(sum(map(paragraph.count, marks)) % 2 for marks in QUOTATION_FAMILIES)


INCHES = Pattern(r'(?<=\d)"')


def opened_above(line: str) -> bool:
    """Whether the line above a call opens a quotation around it: it ends with a quotation mark or
    bracket, or it is a blockquote that a lazy continuation line extends (>>> is Functionary's)."""
    stripped = line.lstrip()
    if FENCE_LINE.fullmatch(stripped):
        return False
    line = line.rstrip("\r")
    joined = line.endswith("\\")  # a line joined to the next: Python's and the shell's \\
    return quotes(line) or joined or (stripped.startswith(">") and not stripped.startswith(">>>"))


def quotes(before: str) -> bool:
    """Whether text ends with an open quotation mark or bracket: “, 「, (, \", ''' and the like.
    A mark that opens and closes alike (" ' `) opens only where the text holds an odd count of
    it ("a.txt" is closed), and ' after a letter or digit is an apostrophe (the users')."""
    text = before.rstrip()
    last = text[-1:]
    if not last or unicodedata.category(last) in ("Pi", "Ps"):
        return bool(last)
    if last not in "\"'`" or (last == "'" and text[-2:-1].isalnum()):
        return False
    return text.count(last) % 2 == 1


def flat(text: str) -> str:
    """Text compared for quoting: HTML's and JSON's escapes undone (&quot;, \\u00c9), no
    whitespace, no backslashes, one kind of quote (a call shown inside JSON, HTML or a Python repr
    is still that call)."""
    text = re.sub(r"\\u([0-9a-fA-F]{4})", lambda m: chr(int(m.group(1), 16)), html.unescape(text))
    return re.sub(r"[\s\\]+", "", text).replace("'", '"')


def quoted_calls(quoted_in, known) -> tuple[list[str], set[str]]:
    """What a reply may quote: each source flattened, and the calls readable in them."""
    tools = tuple((name, tuple(params)) for name, params in known.items())
    read = [calls_in(s, tools) for s in quoted_in if any(n in s for n in known)]
    return [source for source, _ in read], set().union(*(said for _, said in read))


@functools.lru_cache(maxsize=256)
def calls_in(source: str, tools: tuple) -> tuple[str, frozenset]:
    """A source flattened, and the calls readable in it: read once for the conversation, as each
    reply after it asks again."""
    said = {json.dumps([n, a], sort_keys=True) for n, a, *_ in payloads(source, dict(tools))}
    return flat(source), frozenset(said)


def echoes(payload: str, name: str, arguments: dict, quoted) -> bool:
    """Whether a payload copies a tool result or the person's message: the same text, or the same
    call (quoted: from quoted_calls())."""
    sources, said = quoted
    call = json.dumps([name, arguments], sort_keys=True)
    return call in said or any(flat(payload) in source for source in sources)


def units(text: str, found: list[tuple]) -> list[tuple[int, int, list]]:
    """Payloads with the markup around them, adjacent ones joined: (start, end, payloads)."""
    joined = []
    for payload in found:
        start, end = payload[2], payload[3]
        gap_start = joined[-1][1] if joined else 0
        before = MARKUP_AT_END.search(text[max(gap_start, start - 300) : start])
        start -= len(before.group()) if before else 0
        # no blank, separator or closing bracket at its head: those end what stands before it
        start = payload[2] - len(text[start : payload[2]].lstrip(" \t\r\n,;]"))
        if joined and not text[gap_start:start].strip(" \t\n,;[]"):
            joined[-1][2].append(payload)  # in place: a copy for each was quadratic
            joined[-1] = (joined[-1][0], end, joined[-1][2])
        else:
            joined.append((start, end, [payload]))
        after = MARKUP.match(text, joined[-1][1])
        if after:  # the markup after it, up to its last token
            run = after.group()
            line_end = text.find("\n", after.end(), after.end() + 10_000)
            if "\n" in run and text[after.end() : line_end if line_end >= 0 else None].strip():
                run = run[: run.rfind("\n")]  # markup that opens a line of prose is that line's
            end = after.start() + len(run.rstrip())
            joined[-1] = (joined[-1][0], max(end, joined[-1][1]), joined[-1][2])
    return joined


def recover_tool_calls(content: str, known, quoted_in=()) -> tuple[list, str, list[str]]:
    """Tool calls a model wrote as text in content, when the server sent no tool_calls.

    known: each tool's parameter names. quoted_in: the texts of the conversation a reply may
    quote (the person's messages, tool results). Returns (calls, the content without them and
    their markup, what happened); ([], content, []) when there are none."""
    if not any(name in content for name in known):  # a call written as text names its tool
        return [], content, []
    rest = split_thinking(content)[1]
    if len(rest) > MOST_READ:
        return [], content, [f"a reply of more than {MOST_READ:,} characters is not read for calls"]
    # where it stands: at the end, or inside a wrapper it came out of (<answer>...</answer>)
    offset = content.rfind(rest) if rest.strip() else -1
    if offset < 0:  # nothing after thinking, or harmony's final channel: no calls in it
        return [], content, []
    found = payloads(rest, known)
    fences = call_fences(rest, found)  # a fence that says it is a call is no code
    run = last_run(rest, in_fences(units(rest, found), fences))
    if not run or contained(rest, run, outside_code(rest, fences), without_code(rest, fences)):
        return [], content, []
    quoted = quoted_calls(quoted_in, known)
    found = [payload for _start, _end, unit in run for payload in unit]
    if any(echoes(rest[s:e], n, a, quoted) for n, a, s, e in found):
        return [], content, []
    calls = [text_call(name, arguments) for name, arguments, _s, _e in found]
    text = unwrapped(rest[: run[0][0]])
    return (
        calls,
        (content[:offset] + text + content[offset + len(rest) :]).rstrip(),
        [happened(rest, calls)],
    )


MOST_READ = 2**20  # a reply longer than this after its thinking is answer text: bounds every reader


def last_run(text: str, found_units: list[tuple]) -> list[tuple]:
    """The units at the end of text with nothing between them and after them but call markup:
    the run of calls a reply ends with, or [] when the reply goes on after its last one."""
    run, after = [], len(text)
    for unit in reversed(found_units):
        piece = text[unit[1] : after]
        if not (only_markup(piece) or (after == len(text) and ends_turn(piece))):
            break
        run.insert(0, unit)
        after = unit[0]
    return run


def only_markup(piece: str) -> bool:
    """Whether a piece of text between or after calls is call markup and blanks only."""
    return not piece.strip() or bool(MARKUP.fullmatch(piece))


INVISIBLE = "\u200b-\u200d\u2060\ufeff"  # zero-width spaces and joiners, a byte-order mark


def ends_turn(piece: str) -> bool:
    """Whether what follows the last call is markup and tokens that end a turn, as a server
    that shows special tokens leaves them: <|im_end|>, </s>, <end_of_turn>, <eos>, [EOS]. An
    element that opened before the call still holds it (in_element())."""
    return bool(TURN_END.fullmatch(piece))


TURN_END = Pattern(  # each piece read one way only: a tag SPECIAL reads is not a bare tag too
    rf"(?:{SPECIAL}|(?!{SPECIAL})</?[\w:.-]{{1,40}}>|\[/?[A-Z][A-Z_]{{2,30}}\]|\[e~\["
    rf"|[\s\]}}{INVISIBLE}]"
    r"|```)*"
)


def happened(rest: str, calls: list[dict]) -> str:
    """The line that says the model wrote calls as text, and how to make the server send them."""
    family = family_of(rest)
    names = ", ".join(c["function"]["name"] for c in calls)
    return (
        f"the model wrote {len(calls)} tool call(s) as {family} text ({names}): read as calls, "
        "and each that could change anything waits for your yes (AGENT_TEXT_CALLS); "
        + ("DeepSeek's API sometimes does this, nothing to set" if "DSML" in family else SERVER_FIX)
    )


def unwrapped(piece: str) -> str:
    """Text between calls without the tokens at its edges (harmony's <|channel|>commentary
    <|message|> before it, an end-of-turn token after it); the blank it starts with is the text's
    own (the lines after </think>), unless tokens lead it."""
    head = SPECIAL_RUN.match(piece)
    piece = piece[head.end() :] if head and head.group().strip() else piece
    tail = SPECIAL_AT_END.search(piece[-200:])
    return (piece[: len(piece) - len(tail.group())] if tail else piece).rstrip()


SPECIAL_RUN = Pattern(rf"(?:{SPECIAL}|\s)+")


def text_call(name: str, arguments: dict) -> dict:
    """A recovered call shaped as a server sends one (replies.tool_call() gives it an id)."""
    return {
        "type": "function",
        "function": {"name": name, "arguments": json.dumps(arguments, ensure_ascii=False)},
    }


SERVER_FIX = (
    "the server did not parse them: start llama.cpp with --jinja, vLLM with "
    "--enable-auto-tool-choice --tool-call-parser for the model (docs/servers.md)"
)

# Which model writes what (family, where its shape comes from, a pattern of its markup): the record
# of the families, and the name the step's line gives a recovered call. Reading needs no row: the
# payload readers above read every family's payload, whatever wraps it.
FAMILIES = [
    (
        "DeepSeek V3.2 DSML",
        "DeepSeek's API; vLLM tool_parsers/deepseekv32_tool_parser.py",
        rf"<{B}DSML{B}(?:function_calls|tool_calls|invoke)",
    ),
    ("MiniMax-M2", "vLLM tool_parsers/minimax_m2_tool_parser.py", r"<minimax:tool_call>"),
    (
        "Qwen3-Coder, Seed-OSS, Step-3.5 (XML parameters)",
        "vLLM tool_parsers/qwen3coder_tool_parser.py, seed_oss_tool_parser.py",
        r"<function=|<parameter=",
    ),
    (
        "GLM-4.5, 4.6, 4.7 (arg_key)",
        "vLLM tool_parsers/glm4_moe_tool_parser.py, glm47_moe_tool_parser.py",
        r"<arg_key>",
    ),
    (
        "Hermes, Qwen2.5, Qwen3, ERNIE 4.5, Granite 4 (JSON in <tool_call>)",
        "vLLM tool_parsers/hermes_tool_parser.py, ernie45_tool_parser.py, granite4_tool_parser.py",
        r"<tool_call>",
    ),
    (
        "Kimi K2",
        "vLLM tool_parsers/kimi_k2_tool_parser.py; MoonshotAI/Kimi-K2 docs/tool_call_guidance.md",
        r"<\|tool_calls?_section_begin\|>|<\|tool_call_begin\|>",
    ),
    (
        "Gemma 4",
        "vLLM tool_parsers/gemma4_tool_parser.py, reasoning/gemma4_reasoning_parser.py",
        r"<\|tool_call>|<\|channel>",
    ),
    ("FunctionGemma", "vLLM tool_parsers/functiongemma_tool_parser.py", r"<start_function_call>"),
    (
        "Gemma 3 (a ```tool_code fence)",
        "Google's Gemma function-calling guide (its API docs); google-gemma/cookbook",
        r"```tool_code",
    ),
    (
        "GigaChat 3",
        "vLLM tool_parsers/gigachat3_tool_parser.py",
        r"function call<\|role_sep\|>|<\|function_call\|>",
    ),
    (
        "DeepSeek V3, R1 and V3.1",
        "vLLM tool_parsers/deepseekv3_tool_parser.py, deepseekv31_tool_parser.py; "
        "llama.cpp common/chat-parser.cpp common_chat_parse_deepseek_r1",
        rf"<{B}tool\u2581call|<\uff5c",  # DeepSeek's ▁ and fullwidth bars
    ),
    (
        "Mistral, Mixtral, Nemo, Small, Magistral, Devstral, Ministral 3",
        "vLLM tool_parsers/mistral_tool_parser.py; mistral-common tokens/tokenizers/instruct.py",
        r"\[TOOL_CALLS\]",
    ),
    (
        "gpt-oss (harmony)",
        "openai/harmony docs/format.md; llama.cpp common_chat_parse_gpt_oss",
        r"to=functions\.",
    ),
    (
        "Llama 3.2 and 4 pythonic, OLMo 3, LFM2",
        "vLLM tool_parsers/pythonic_tool_parser.py, llama4_pythonic_tool_parser.py, "
        "olmo3_tool_parser.py",
        r"<\|python_start\|>|<function_calls>|<\|tool_call_start\|>|\w\(",
    ),
    (
        "Qwen2.5-Coder, xLAM (JSON in a fence that is the whole reply)",
        "vLLM tool_parsers/qwen2_5_coder_tool_parser.py, xlam_tool_parser.py",
        r"\A\s*```(?:json)?\s*[\[{]",
    ),
    (
        "Llama 3.x JSON, Granite 3, Phi-4-mini, xLAM, Jamba, Nemotron, FireFunction, Apertus",
        "vLLM tool_parsers/llama_tool_parser.py, granite_tool_parser.py, phi4mini_tool_parser.py, "
        "xlam_tool_parser.py, jamba_tool_parser.py, apertus_tool_parser.py",
        r"<\|python_tag\|>|<\|tool_call\|>|functools|<tool_calls>|<TOOLCALL>|\{",
    ),
]


def family_of(text: str) -> str:
    """The first family in FAMILIES whose markup the text holds."""
    return next((family for family, _source, markup in FAMILIES if re.search(markup, text)), "JSON")


def first_opening(text: str, known=()) -> int | None:
    """Where the first possible call markup stands outside code: a token, a tag, or a tool's
    name; or a fence that may say it is a call (call_fences()). Text before it can be printed
    while a reply streams."""
    names = "|".join(re.escape(n) for n in known)
    pattern = re.compile(rf"{TOKEN}|^[ \t]*[\[{{]" + (rf"|\b(?:{names})\b" if names else ""), re.M)
    outside = outside_code(text)
    markup = next((m.start() for m in pattern.finditer(text) if outside(m.start())), None)
    fence = CALL_FENCE_OPENING.search(text)
    return min((at for at in (markup, fence and fence.start()) if at is not None), default=None)


def outside_code(text: str, calls=()):
    """A test of a position in text: whether it is outside fenced blocks (``` or ~~~; but the
    fences in calls, from call_fences()), `inline` code, and lines indented as code or quoted with
    >. The fences, spans and line starts are found once, and each position is looked up in them by
    bisection: a reply of thousands of spans or openers is read in one pass."""
    blocks, spans = code_of(text, tuple(calls))
    block_starts = [start for start, _end in blocks]
    starts = [start for start, _end in spans]
    newlines = [m.start() for m in NEWLINE.finditer(text)]

    def outside(at: int) -> bool:
        span = bisect.bisect(starts, at) - 1
        line = (
            newlines[bisect.bisect_left(newlines, at) - 1] + 1
            if newlines and newlines[0] < at
            else 0
        )
        block = bisect.bisect(block_starts, at) - 1
        return (
            not (block >= 0 and at < blocks[block][1])
            and not INDENTED.match(text, line)
            and not (span >= 0 and at < spans[span][1])
        )

    return outside


@functools.lru_cache(maxsize=4)  # outside_code() and without_code() read one text's code
def code_of(text: str, calls: tuple) -> tuple[list, list]:
    """The fenced blocks of text but those in calls (call_fences()), and its `inline` spans; each
    in order, never overlapping."""
    called = set(calls)
    blocks = [block for block in fenced_blocks(text) if block not in called]
    return blocks, [m.span() for m in INLINE_CODE.finditer(text)]


FENCE_LINE = Pattern(r"^[ \t]{0,3}(`{3,}|~{3,})([^\n]*)", re.M)


@functools.lru_cache(maxsize=4)  # call_fences() and code_of() read one text's fences
def fenced_blocks(text: str) -> list[tuple[int, int]]:
    """The fenced code blocks of text, as CommonMark closes them: a fence ends its block only with
    the same character, at least as long, and nothing after it on its line (but tokens); an
    unclosed block runs to the end."""
    blocks, opened = [], None
    for fence in FENCE_LINE.finditer(text):
        mark, rest = fence.group(1), fence.group(2)
        if opened is None:
            opened = (mark[0], len(mark), fence.start())
        # nothing after a closing fence but markup: DeepSeek V3 ends its fence with its end token
        elif mark[0] == opened[0] and len(mark) >= opened[1] and not unwrapped(rest):
            blocks.append((opened[2], fence.end()))
            opened = None
    return blocks + ([(opened[2], len(text))] if opened else [])


# What a fence's label says when the fence holds a call: Gemma 3's ```tool_code (Google's Gemma
# function-calling guide, google-gemma/cookbook), and the names chat templates give calls
CALL_LABEL = Pattern(
    r"(?:tool|function|func)[_ -]?(?:code|calls?|use|request)|tool|function|call|action", re.I
)


# A fence that opens the reply (it may hold only calls), or one labelled as a call
CALL_FENCE_OPENING = Pattern(
    rf"\A\s*(?:```|~~~)|^[ \t]{{0,3}}(?:```|~~~)[ \t]*(?:{CALL_LABEL.pattern})[ \t]*$", re.M | re.I
)


def call_fences(text: str, found: list[tuple]) -> list[tuple[int, int]]:
    """The fences that are calls by what they say: one labelled as a call (```tool_code), or one
    that is the whole text and holds only payloads (Qwen2.5-Coder's and xLAM's ```json reply on a
    server without a tool parser). found: payloads() of text."""
    fences, starts = [], [p[2] for p in found]
    for start, end in fenced_blocks(text):
        label = FENCE_LINE.match(text, start).group(2).strip()
        first = bisect.bisect_right(starts, start)  # found is in order: those after the fence opens
        inside = list(itertools.takewhile(lambda p, end=end: p[3] <= end, found[first:]))
        if not inside:
            continue
        if CALL_LABEL.fullmatch(label) or (
            label.lower() in JSON_LABELS
            and not text[:start].strip()
            and ends_turn(text[end:])
            and only_payloads(text, start, end, inside)
        ):
            fences.append((start, end))
    return fences


JSON_LABELS = ("", "json", "jsonc", "json5")  # a fence of JSON calls, as a coder model writes


def only_payloads(text: str, start: int, end: int, inside: list[tuple]) -> bool:
    """Whether a fence holds nothing but payloads, and list punctuation between them: a model
    fences its own JSON call so, while a fence around markup (<tool_call>) shows a format."""
    at, close = text.find("\n", start) + 1, text.rfind("\n", start, end)
    between = []
    for _name, _arguments, p_start, p_end in inside:
        between.append(text[at:p_start])
        at = p_end
    between.append(text[at:close])
    return all(LIST_PUNCTUATION.fullmatch(piece) for piece in between)


LIST_PUNCTUATION = Pattern(r"[\s,;\[\]]*")


def in_fences(found_units: list[tuple], fences: list[tuple[int, int]]) -> list[tuple]:
    """Units with those inside one call fence joined into one unit that spans the fence."""
    joined, opens = [], [a for a, _ in fences]  # in order, never overlapping
    for start, end, found in found_units:
        i = bisect.bisect_right(opens, start) - 1
        fence = fences[i] if i >= 0 and start < fences[i][1] else None
        if fence and joined and joined[-1][0] == fence[0]:
            joined[-1][2].extend(found)
            joined[-1] = (fence[0], fence[1], joined[-1][2])
        elif fence:
            joined.append((fence[0], fence[1], list(found)))
        else:
            joined.append((start, end, list(found)))
    return joined


INLINE_CODE = Pattern(r"`[^`\n]+`")
NEWLINE = Pattern("\n")
INDENTED = Pattern(r"    |\t|[ \t]*>(?!>>)")  # a Markdown code block's indent, or a quote


def tool_name(name: str, known) -> str:
    """The tool a name names: markup and whitespace around a known tool's name are dropped when that
    leaves exactly one (Kimi's functions.read_file:0, gpt-oss's read_file<|channel|>commentary)."""
    name = name.strip()
    if name in known:
        return name
    bare = re.sub(r"^(?:<\|[^|]*\|>|[\s\"'`])+", "", name)
    bare = re.sub(r"^(?:functions?|tools?)\.", "", bare)
    bare = re.split(r"<|\s", bare, maxsplit=1)[0]
    bare = re.sub(r"(?::\d+|\(\)|[\"'`])+$", "", bare)
    return bare if bare in known else name


# --- --stream on a terminal ----------------------------------------------------------------------


class Printer:
    """A streamed reply's text printed as it comes, line by line, without its thinking or tool-call
    markup: on a terminal only (a pipe gets the answer at the end, as without --stream). A model
    whose template opened the thinking in the prompt shows it before its </think> arrives: that much
    cannot be known while it streams."""

    def __init__(self, known, quoting=()):
        self.known, self.quoting = known, quoting  # what recover_tool_calls() reads beside it
        self.pieces, self.size, self.read, self.shown = [], 0, 0, ""
        self.live = sys.stdout.isatty()

    def add(self, piece) -> None:
        if isinstance(piece, str) and self.live:
            self.pieces.append(piece)
            self.size += len(piece)
            # Lines are printed whole, and the text is read again only once it has grown by a
            # quarter since the last time: each reading costs the whole text, so a long reply
            # is printed in longer runs of lines, and read in linear time.
            if "\n" not in piece or self.size - self.read < max(200, self.read // 4):
                return
            self.read, text = self.size, "".join(self.pieces)
            self.pieces = [text]
            rest = split_thinking(text)[1]  # "" while thinking is still open
            opening = first_opening(rest, self.known)
            self.show(rest[: rest.rfind("\n", 0, len(rest) if opening is None else opening) + 1])

    def end(self, content: str) -> None:
        if self.live:
            calls, before, _ = recover_tool_calls(content, self.known, self.quoting)
            self.show(split_thinking(before if calls else content)[1].rstrip() + "\n")

    def show(self, text: str) -> None:
        if text.startswith(self.shown) and len(text) > len(self.shown):
            print(visible(clean_text(text[len(self.shown) :])), end="", flush=True)
            self.shown = text
