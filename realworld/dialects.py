# ruff: noqa: RUF001, RUF003 -- markup and words in other scripts: fullwidth colons, DeepSeek bars
"""How model families write tool calls and thinking as text, and how the agent reads them back.

When a server has no parser for a model (vLLM without --tool-call-parser, llama.cpp without --jinja,
a model newer than the Ollama or LM Studio build), the model's tool calls and its thinking arrive
as plain text in content. Both are read by what they say, not by a list of wrappers: thinking by
markers that name it, a call by a payload that names one of the agent's tools with arguments that
fit, a mention by where it stands. FAMILIES records which family writes what, and where its shape
comes from. docs/servers.md (rules 10 and 12) gives the rules and the server settings that avoid
the leak.
"""

import bisect
import functools
import itertools
import json
import re
import sys
import unicodedata

from realworld.guards import clean_text, shorten, visible

# --- Arguments as models write them --------------------------------------------------------------

INFO_STRING = re.compile(r"[\w-]*\s*")  # what may follow the opening ``` of a fence: json


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
THINK_MARK = re.compile(
    r"<\|?/?[\w:|.-]{0,30}?(?:think|thought|reasoning)[\w:|.-]{0,30}?(?:\s[^<>]{0,100})?\|?>"
    r"|\[/?(?:THINK|THOUGHT|REASONING)\]|<\|(?:open|close)\|>think<\|sep\|>|<\|inner_(?:prefix|suffix)\|>"
    r"|<\|channel\|>analysis",
    re.I,
)
CLOSING = re.compile(r"/|end|close|suffix", re.I)
THINK_HEADER = re.compile(
    r"\s*Here(?: is|'s| are) my (?:thought process|reasoning steps?):\s*(.*?)"
    r"(?:\n\s*(?=Here(?: is|'s) my response:|\[BEGIN FINAL RESPONSE\])|$)",
    re.S | re.I,
)
ANSWER_OPEN = re.compile(
    r"\s*(?:<(?:answer|response|final)>|<\|START_RESPONSE\|>|\[BEGIN FINAL RESPONSE\]"
    r"|<\|open\|>response<\|sep\|>|Here(?: is|'s) my response:)\s*",
    re.I,
)
ANSWER_CLOSE = re.compile(
    r"\s*(?:</(?:answer|response|final)>|<\|END_RESPONSE\|>|\[END FINAL RESPONSE\]"
    r"|<\|close\|>response<\|sep\|>)(?:\s|<\|[^|<>\s]{1,30}\|>)*\Z",
    re.I,
)
# gpt-oss's harmony format: the analysis channel is thinking, the final channel the answer
# (openai/harmony docs/format.md; llama.cpp common/chat-parser.cpp common_chat_parse_gpt_oss). With
# special tokens stripped (a server that decodes with skip_special_tokens) the words run together:
# "analysis...assistantfinal...".
HARMONY_ANALYSIS = re.compile(
    r"\s*(?:<\|start\|>assistant)?<\|channel\|>analysis<\|message\|>(.*?)(?:<\|end\|>|$)", re.S
)
HARMONY_FINAL = re.compile(
    r"\s*(?:<\|start\|>assistant)?<\|channel\|>(?:final|commentary)(?: ?<\|constrain\|>\w+)?"
    r"<\|message\|>(.*)",  # its end token is cut off after: (.*?) then an optional one backtracked
    re.S,
)
HARMONY_GLUED = re.compile(r"\s*analysis(.*?)assistant(?:final|(?=commentary to=))(.*)$", re.S)


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
    while thinking and (more := one_thinking(answer))[0]:
        thinking, answer = thinking + "\n" + more[0], more[1]
    return thinking, answer


def one_thinking(content: str) -> tuple[str, str]:
    """The first thinking of content and the rest."""
    header = THINK_HEADER.match(content)
    if header:
        return header.group(1), response(content[header.end() :])
    outside = None  # found once, when a closing mark first needs it
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
        outside = outside or (outside_code(content) if closing else None)
        if closing and ends_thinking(content, mark.start(), len(mark.group()), outside):
            return content[: mark.start()], response(content[mark.end() :])
        if not closing:
            break  # thinking opened after some text: quoted, and so is what follows
    opener = ANSWER_AFTER_THINKING.search(content)  # the template opened the thinking (Apriel)
    if opener and content[: opener.start()].strip() and outside_code(content)(opener.start()):
        return content[: opener.start()], response(content[opener.start() :])
    return "", response(content) if ANSWER_OPEN.match(content) else content


BLANK = " \t\r\n\ufeff"  # and a byte-order mark
ANSWER_AFTER_THINKING = re.compile(
    r"^[ \t]*(?:\[BEGIN FINAL RESPONSE\]|<\|START_RESPONSE\|>|Here(?: is|'s) my response:)", re.M
)


def ends_thinking(text: str, at: int, length: int, outside) -> bool:
    """Whether a closing tag that no opening tag opened, at text[at], ends thinking rather than
    being quoted. It does outside code (fenced, `inline` or indented: outside, from
    outside_code(text)) where it starts its line or ends a sentence ("Done.</think>Hi"), or where
    it ends its line or a tool call follows it (GLM-4.7) and no word and space lead into it
    ("the tag is </think>" quotes it)."""
    line_start = text.rfind("\n", 0, at) + 1
    before = text[max(line_start, at - 200) : at]
    line = text[at + length : at + length + 200].split("\n", 1)[0]  # bounded: a mark a line
    after_a_sentence = not before.strip() or before.rstrip()[-1] in SENTENCE_END
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

# Markup around and between payloads: special tokens (<|...|>, DeepSeek's <｜...｜>), tags
# without attributes (<tool_call>, </invoke>, <minimax:tool_call>, <｜DSML｜function_calls>),
# Mistral's bracket tokens, list brackets and separators, and the words that special tokens
# leave behind when a server strips them (harmony's, DeepSeek V3's "function").
TOKEN = (
    rf"<{B}[^<>\n]{{0,64}}?{B}>"
    rf"|</?(?:{B}[^<>\s]{{1,16}}?{B})?[A-Za-z_][\w:.-]{{0,64}}>"
    r"|\{\s*\"(?:tool_calls?|function_calls?)\"\s*:|Action:\s*```(?:json)?"  # Command R
    r"|\[/?[A-Z][A-Z_]{2,30}\]|>>>|\bcall:|\u273f[A-Z_]{1,30}\u273f:?|<\|[\w:.-]{1,40}>|<[\w:.-]{1,40}\|>"
    r"|(?:assistant|commentary|analysis|function|functools)(?=[<\[]| to=)"
    r"|\s?to="
)
MARKUP = re.compile(rf"(?:{TOKEN}|[\s,;\[\]}}]|```)+")  # after a call: a fence it opened too
MARKUP_AT_END = re.compile(rf"(?:{TOKEN}|[\s,;\[\]])+\Z")
TOKENS_AT_END = re.compile(rf"(?:{TOKEN}|\s)+\Z")

# Between a tool's name and its JSON arguments: DeepSeek's separator and ```json fence, Kimi's
# :0 and argument token, Mistral's [CALL_ID]id[ARGS], harmony's <|constrain|>json<|message|>.
GLUE = re.compile(
    rf"(?:\s|:\d+|[\"'`>=]|{TOKEN}|\[CALL_ID\]\w{{0,64}}|json|commentary|```(?:json)?){{0,40}}?"
    r"(?=\{|\"\{)"
)
NAME_KEYS = ("name", "function", "tool", "tool_name", "function_name")
ARGUMENT_KEYS = ("arguments", "parameters", "args", "input", "params", "kwargs")
OTHER_KEYS = {"type", "id", "index", "call_id", "tool_call_id"}


def json_at(text: str, at: int):
    """(the JSON value that starts at text[at], where it ends), or None; None too when an object
    gives one key twice (which value is meant is a guess)."""
    try:
        return json.JSONDecoder(strict=False, object_pairs_hook=once).raw_decode(text, at)
    except (ValueError, RecursionError):
        return None


def once(pairs: list) -> dict:
    """A JSON object whose keys are each given once."""
    value = dict(pairs)
    if len(value) != len(pairs):
        raise ValueError("a key given twice")
    return value


def arguments_of(value) -> dict | None:
    """Arguments as a dict: an object, or a string holding one (encoded once or twice)."""
    if isinstance(value, str):
        value = json.loads(clean_arguments(value)[0]) if value.strip() else {}
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


def object_around(text: str, name: re.Match, _wanted=None):
    """A JSON call object that holds the name as its name, the outermost of up to three that
    start shortly before it (OpenAI's {"type", "function": {...}} holds one): (arguments, start,
    end)."""
    start, best = name.start(), None
    for _ in range(3):
        start = text.rfind("{", max(0, name.start() - 300), start)
        found = json_at(text, start) if start >= 0 else None
        call = named(found[0]) or keyed(found[0]) if found and found[1] > name.end() else None
        if call and tool_name(call[0], [name.group("name")]) == name.group("name"):
            best = call[1], start, found[1]
        if start < 0:
            break
    return best


def object_after(text: str, name: re.Match, _wanted=None):
    """NAME, markup, then its arguments as a JSON object: (arguments, start, end)."""
    glue = GLUE.match(text, name.end())
    found = (json_at(text, glue.end()) or gemma_object(text, glue.end())) if glue else None
    arguments = arguments_of(found[0]) if found else None
    if arguments is None:
        return None
    end = found[1]
    if "```" in glue.group():  # DeepSeek V3 closes the fence it opened
        close = FENCE_CLOSE.match(text, end)
        end = close.end() if close else end
    return arguments, head(text, name), end


FENCE_CLOSE = re.compile(r"\s*```")


def head(text: str, name: re.Match) -> int:
    """Where the opening tag a name stands in begins (<function=, <invoke name=", <read_file), or
    the name itself."""
    opening = text.rfind("<", max(0, name.start() - 40), name.start() + 1)
    between = text[opening : name.start()] if opening >= 0 else ""
    return opening if HEAD.fullmatch(between) else name.start()


HEAD = re.compile(rf"<(?:{B}DSML{B})?(?:[\w:.-]{{1,30}}(?:=|\s+name=)[\"']?)?")


# FunctionGemma's and Gemma 4's {key:<escape>value<escape>, n:42}: keys bare, strings between
# escape tokens (vLLM functiongemma_tool_parser.py, gemma4_tool_parser.py).
GEMMA_OBJECT = re.compile(
    r"\{((?:\s*\w{1,64}:(?:<escape>.*?<escape>|<\|\"\|>.*?<\|\"\|>|[^,{}<]{0,200})\s*,?)*)\}", re.S
)
GEMMA_PAIR = re.compile(
    r"\s*(\w{1,64}):(?:<escape>(.*?)<escape>|<\|\"\|>(.*?)<\|\"\|>|([^,{}<]*))", re.S
)


def gemma_object(text: str, at: int):
    """(the arguments of a Gemma call object at text[at], where it ends), or None."""
    found = GEMMA_OBJECT.match(text, at)
    if not found or not found.group(1).strip():
        return None
    pairs = GEMMA_PAIR.finditer(found.group(1))
    arguments = {p.group(1): next(v for v in p.groups()[1:] if v is not None) for p in pairs}
    return {k: v.strip() if isinstance(v, str) else v for k, v in arguments.items()}, found.end()


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


TAG_REST = re.compile(r"[\"']?\s*>?(?:\\n|\s|<tool_sep>)*")  # HY-V3 puts <tool_sep> after the name


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
        if 'string="false"' in (p.group("attrs") or ""):  # DSML marks a value that is not text
            value = (json_at(value.strip(), 0) or [value])[0]
        arguments[key.strip()] = value
        at = p.end()
    return (arguments, head(text, name), at) if arguments else None


def python_call(text: str, name: re.Match, wanted: list[str]):
    """NAME(k="v", ...) with literal values, true, false and null as JSON's (Llama 3.2 and 4,
    OLMo 3, LFM2; Llama 3.1's NAME.call(...)): (arguments, start, end)."""
    import ast

    at = name.end() + 5 * text.startswith(".call(", name.end())
    end = closing_paren(text, at) if text.startswith("(", at) else None
    try:
        call = ast.parse("f" + text[at:end], mode="eval").body if end else None
        keys = [k.arg for k in call.keywords] if isinstance(call, ast.Call) else []
        if (
            not isinstance(call, ast.Call)
            or len(call.args) > len(wanted)
            or len(set(keys)) < len(keys)
        ):
            return None
        arguments = dict(zip(wanted, map(literal, call.args), strict=False))
        arguments |= {k.arg: literal(k.value) for k in call.keywords if k.arg}
    except (ValueError, TypeError, SyntaxError, RecursionError, MemoryError):
        return None
    return arguments, name.start(), end


BRACKETS = re.compile(r"[()\[\]{}\"'\\]")


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
        elif quote:
            quote = "" if c == quote else quote
        elif c in "\"'":
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
    import ast

    json_names = {"true": True, "false": False, "null": None}
    if isinstance(node, ast.Name) and node.id in json_names:
        return json_names[node.id]
    return ast.literal_eval(node)


def fits(arguments: dict, wanted: list[str]) -> bool:
    """Whether arguments are the tool's parameters, each given, none more, each a plain value
    (the tools take strings; a number or a truth value is the model's meaning too)."""
    values = arguments.values()
    return set(arguments) == set(wanted) and all(
        isinstance(v, (str, int, float, bool)) for v in values
    )


def payloads(text: str, known: dict[str, list[str]], limit: int = 200) -> list[tuple]:
    """Every payload in text that names a known tool with arguments that fit: (name, arguments,
    start, end), in order, none overlapping. At most limit names are tried, each read once: the
    reading stays linear in the text."""
    if not known:
        return []
    names = re.compile(
        # functions.NAME (Kimi, harmony), functionNAME (DeepSeek V3 with its tokens stripped)
        r"(?<![\w-])(?:(?:functions?|tools?)\.|function)?(?P<name>"
        + "|".join(re.escape(n) for n in sorted(known, key=len, reverse=True))
        + r")(?![\w-])"
    )
    found, end, unclosed = [], 0, 0
    for name in itertools.islice(names.finditer(text), limit):
        if name.start() < end:
            continue  # inside the payload before
        wanted = known[name.group("name")]
        for read in (object_around, object_after, parameters_after, python_call):
            if read is python_call and text.startswith(("(", ".call("), name.end()):
                unclosed += 1  # each looks for its closing bracket (200,000 characters): 16 at most
                if unclosed > 16:
                    continue
            got = read(text, name, wanted)
            if got and fits(got[0], wanted) and got[1] >= end:
                found.append((name.group("name"), got[0], got[1], got[2]))
                end = got[2]
                break
    return found


# --- Calls and mentions --------------------------------------------------------------------------
# A payload is a call only where it stands as one (mention() says where it does not):
# - its place: outside code (fences, `inline`, indented, <pre>, <code>, rST blocks), quotations
#   (a quotation mark or bracket open before it, on its line or across lines; a blockquote), list
#   items and table rows, and not inside a sentence (prose before it on its line that ends no
#   sentence, or prose after it on its line); not after thinking it did not start with;
# - its introduction: nothing before it on its line or the line before but markup, a word or two
#   ("Sure.", "好的。"), a plan ("Here is my plan:" above a list), or a sentence that announces the
#   model's own next step ("Let me look:", "I'll read the file.", "让我看看：", "Now run it.");
#   never a sentence that names it an example, a format or a reference, presents or quotes it, or
#   heads a document section; between calls, any sentence but those;
# - what follows: when the reply goes on after its last call, it goes on with an announcement;
# - what it repeats: no call that a tool result or the person's message of the conversation holds,
#   and none at all when the person asked to see a call rather than to have it run.
# Where the rules leave a doubt, it is text: a mention not run costs the model a step, a mention
# run can destroy a file.
LIST_ITEM = re.compile(r"[ \t]*(?:[-*+•·]|\d{1,3}[.)、]|[A-Za-z][.)]|\|)[ \t]")
CODE_TAGS = re.compile(r"</?(?:pre|code|tt|samp|kbd|blockquote|q|example|quote)\b", re.I)
COLONS = ":\uff1a\ufe55\ufe13\u2236"  # ASCII, fullwidth, small, vertical, ratio
SENTENCE_END = ".!?\u3002\uff01\uff1f\u2026\u061f\u0964"  # and 。！？…؟।
# A sentence that announces the model's own next step, in the languages its users write
ANNOUNCES = re.compile(
    r"\b(?:let me|let's|let us|i'll|i will|i'm going to|i am going to|i need to|i shall|i'm now|"
    r"i should|i can|i'd be happy|happy to help|we need to|we'll|we will|we should|"
    r"now i|next,? i|first,? i|then i|this will|that will|"
    r"(?:reading|writing|running|checking|creating|looking|opening|listing|executing|searching|"
    r"saving|updating|editing|testing|installing|inspecting|calling|trying|starting|fixing|"
    r"reviewing|examining|verifying|viewing|loading|fetching|making|adding|removing|deleting)\b|"
    r"je vais|laissez-moi|laisse-moi|voyons|voy a|déjame|vamos a|ich werde|lass mich|"
    r"vou|deixe-me|vamos|lascia(?:temi)? che|ora|adesso|ik ga|laat me|ik zal|"
    r"давайте|сейчас|я (?:\w+у|\w+ю)|посмотрю|прочитаю|проверю|запущу|читаю|запускаю)\b"
    r"|^\W*(?:first|next|then|now|finally)\b"  # "Now run it.", "First, the file."
    r"|让我|我来|我将|我会|我先|我要|我需要|我看|我查|我读|我试|现在|接下来|下面|首先|然后|需要先|先看|先读"
    r"|这就|马上|立即|立刻|まず|次に"
    r"|第.步|步骤|ます|ましょう|겠습니다|할게요|볼게요|보겠|하겠",
    re.I,
)
# A word or two that says nothing of what follows
AFFIRMS = re.compile(
    r"(?:sure|ok|okay|alright|all right|done|got it|certainly|of course|great|good|right|yes|"
    r"好的|好|行|可以|没问题|收到|明白|了解|はい|わかりました|네|알겠습니다|d'accord|claro|vale|bien|"
    r"gut|klar|хорошо|ладно|понял)\W*",
    re.I,
)
# A sentence that presents, shows or quotes what follows rather than doing it
PRESENTS = re.compile(
    r"\b(?:here is|here's|here are|here it is|below is|show\w*|give you|quot\w*|past\w*|"
    r"demonstrat\w*|illustrat\w*|would|voici|voilà|montr\w*|hier ist|zeig\w*|aquí|"
    r"mostr\w*|ecco|вот|показ\w*|покаж\w*|hier is)\b"
    r"|展示|演示|示范|给你看|下面是|以下是|这是|示します|見せ|これが|다음은|보여",
    re.I,
)
# A sentence that names what follows an example, a format or a reference: never a call
EXAMPLES = re.compile(
    r"\b(?:for example|for instance|e\.g\.|an? example|examples|example(?!\s+[a-z])|like this|"
    r"like so|such as|sample|format|syntax|for reference|is how|are how|this way|typical|"
    r"written as|par exemple|exemple|comme ceci|por ejemplo|ejemplo|zum beispiel|beispiel\w*|"
    r"exemplo|esempio|например|пример\w*|образец|voorbeeld|przykład|örnek|exempel|contoh|"
    r"παράδειγμα|příklad|приклад|ví dụ|mfano|esimerkki)\b"
    r"|例如|比如|譬如|示例|例子|举例|样例|範例|如下|这样|这种|格式|长这样|写法|形如|参考|模板|以上|上面|就是"
    r"|例えば|例を|の例|以下のよう|このよう|形式|書式|예를|예시|다음과|형식|방식|उदाहरण|مثال|ตัวอย่าง|למשל|जैसे",
    re.I,
)
# A sentence that introduces the model's own plan: "Here is my plan:", "计划："
PLANS = re.compile(
    r"\b(?:my plan|the plan|plan|my steps|the steps)\s*[:：]|计划|步骤|手順|계획", re.I
)
# A sentence that says what something contains or looks like: no call, unless it announces one
DESCRIBES = re.compile(
    r"\b(?:looks? like|contains?|says|ressemble|ainsi|así|sieht so aus|enthält|so schreibt|assim|"
    r"così|выглядит|содержит|так)\b|内容|の内容",
    re.I,
)
# Structure above a call that makes it part of a document: a heading, a line of bold, an rST
# directive or literal block
DOCUMENT_LINE = re.compile(
    r"\s*(?:#{1,6}\s|\*\*[^*]+\*\*\s*$|__[^_]+__\s*$|\.\. [\w-]+::)|.*::\s*$"
)
# The person's message asks to see a call rather than to have it run
ASKS_FOR_A_CALL = re.compile(
    r"(?=.*(?:\b(?:tool[ _-]?calls?|function[ _-]?calls?|the call|a call|json for|llamada|appel|"
    r"aufruf|вызов)\b|调用|呼び出し|호출))"
    r"(?=.*(?:\b(?:show|look like|example|give me|write out|don't run|do not run|without running|"
    r"just|only)\b|不要|别|只|示例|例子|显示|見せ|보여))",
    re.I | re.S,
)


def mention(text: str, start: int, end: int, outside, last: bool, after_a_call: bool) -> bool:
    """Whether the call markup at text[start:end] is quoted, by where it stands. last: it is the
    reply's last call markup; after_a_call: a call of this reply stands before it, and the text
    between needs only not to introduce an example."""
    line_start = text.rfind("\n", 0, start) + 1
    return quoted_place(text, start, end, line_start, outside) or unannounced(
        text, start, end, line_start, last, after_a_call
    )


def quoted_place(text: str, start: int, end: int, line_start: int, outside) -> bool:
    """Whether the markup stands in code, a quotation, a list or a table, or inside a sentence."""
    line_end = text.find("\n", end, end + 10_000)
    before, after = text[line_start:start], text[end : line_end if line_end >= 0 else len(text)]
    above = text[max(0, line_start - 2000) : max(0, line_start - 1)].rsplit("\n", 1)[-1]
    return (
        not outside(start)
        or bool(LIST_ITEM.match(text, line_start))
        or bool(CODE_TAGS.search(text, max(line_start - 200, 0), end))  # <pre>, <code>, ...
        # inside a sentence, or opened by a quotation mark
        or (
            bool(before.strip())
            and (before.rstrip()[-1] not in SENTENCE_END + COLONS or quotes(before))
        )
        or (bool(after.strip()) and not MARKUP.fullmatch(after))  # the sentence goes on after it
        # thinking it did not start with: the reply explains thinking
        or bool(THINK_MARK.search(text, max(0, start - 100_000), start))
        or (not before.strip() and opened_above(above))
        or open_quotation(text[max(0, line_start - 2000) : line_start])
        # indented under a list item: part of it
        or (
            bool(before)
            and not before.strip()
            and bool(LIST_ITEM.match(previous_line(text, line_start)))
        )
    )


def unannounced(
    text: str, start: int, end: int, line_start: int, last: bool, after_a_call: bool
) -> bool:
    """Whether the text next to the markup keeps it from being a call: the text before it on its
    line, and the line before when its own starts with markup or with it (harmony's preamble);
    and, after the reply's last call, the sentence the reply goes on with."""
    before = text[line_start:start].strip()
    introductions = [before]
    if not before or TOKEN_START.match(text, line_start):
        introductions.append(above_list(text, line_start))
    # a fence above ends a code block: it introduces nothing
    introductions = [w for w in introductions if w and not FENCE_LINE.fullmatch(w)]
    if any(not announces(words, after_a_call) for words in introductions):
        return True
    going_on = first_sentence(text[end : end + 2000].strip())
    return (
        last
        and bool(going_on)
        and not MARKUP.fullmatch(going_on)
        and not announces(going_on, False)
    )


TOKEN_START = re.compile(rf"[ \t]*(?:{TOKEN})")


def announces(words: str, lenient: bool) -> bool:
    """Whether text next to a call lets it be a call: its sentence announces the model's own next
    step without showing, quoting or exemplifying something, or it is a word or two that says
    nothing of it ("Sure.", "好的。"). lenient (between calls): any sentence that does not introduce
    an example or a description."""
    sentence = last_sentence(words).strip()
    if EXAMPLES.search(sentence) or DOCUMENT_LINE.match(sentence):
        return False
    if PLANS.search(sentence):
        return True
    if PRESENTS.search(sentence):
        return False
    if ANNOUNCES.search(sentence):
        return True
    if sentence[-1:] in COLONS or DESCRIBES.search(sentence):
        return False
    return lenient or bool(AFFIRMS.fullmatch(sentence))


PAIRS = [("\u201c", "\u201d"), ("\u300c", "\u300d"), ("\u300e", "\u300f"), ("\u00ab", "\u00bb")]


def open_quotation(before: str) -> bool:
    """Whether the paragraph before a line leaves a quotation open: more “ than ”, 「 than 」,
    『 than 』, « than », or an odd number of triple quotes (a Python string)."""
    paragraph = before.rsplit("\n\n", 1)[-1]
    if (paragraph.count('"""') + paragraph.count("'''")) % 2:
        return True
    return any(paragraph.count(a) > paragraph.count(b) for a, b in PAIRS)


def opened_above(line: str) -> bool:
    """Whether the line above a call opens a quotation around it: it ends with a quotation mark or
    bracket (a fence is code, read by outside_code()), or it is a blockquote that a lazy
    continuation line extends (>>> is Functionary's call token)."""
    stripped = line.lstrip()
    if FENCE_LINE.fullmatch(stripped):
        return False
    return quotes(line) or (stripped.startswith(">") and not stripped.startswith(">>>"))


def quotes(before: str) -> bool:
    """Whether text ends with an open quotation mark or bracket: “, 「, (, \", ''' and the like."""
    last = before.rstrip()[-1:]
    return bool(last) and (unicodedata.category(last) in ("Pi", "Ps") or last in "\"'`")


def above_list(text: str, line_start: int) -> str:
    """The line with text before line_start, or, when that is an item of a list (a plan), the line
    that introduces the list."""
    lines = text[max(0, line_start - 2000) : line_start].rstrip().split("\n")
    while len(lines) > 1 and LIST_ITEM.match(lines[-1]):
        lines.pop()
    return lines[-1].strip() if lines else ""


def previous_line(text: str, line_start: int) -> str:
    """The last line with text before line_start, stripped ("" if none in 2,000 characters)."""
    before = text[max(0, line_start - 2000) : line_start].rstrip()
    return before.rsplit("\n", 1)[-1].strip()


SENTENCE_BREAK = re.compile(
    r"[.!?\u2026](?=\s)|[\u3002\uff01\uff1f\u061f\u0964]"
)  # "a.txt" goes on


def last_sentence(text: str) -> str:
    """The last sentence of text (in its last 1,000 characters), its final colon or stop kept."""
    text = text[-1000:]
    body = text.rstrip(SENTENCE_END + COLONS + " ")
    cut = max((m.end() for m in SENTENCE_BREAK.finditer(body)), default=0)
    return text[cut:]


def first_sentence(text: str) -> str:
    """The first sentence of text (up to 300 characters)."""
    head = text[:300]
    cuts = [head.find(mark) for mark in SENTENCE_END + "\n" if mark in head]
    return head[: min(cuts) + 1] if cuts else head


def flat(text: str) -> str:
    """Text compared for quoting: no whitespace, no backslashes, one kind of quote (a call shown
    inside JSON or a Python repr is still that call)."""
    return re.sub(r"[\s\\]+", "", text).replace("'", '"')


def quoted_calls(quoted_in, known) -> tuple[list[str], set[str]]:
    """What a reply may quote: each source flattened, and the calls readable in them."""
    sources = [s for s in quoted_in if any(name in s for name in known)]
    calls = {
        json.dumps([n, a], sort_keys=True) for s in sources for n, a, _s, _e in payloads(s, known)
    }
    return [flat(s) for s in sources], calls


def echoes(payload: str, name: str, arguments: dict, quoted) -> bool:
    """Whether a payload repeats a tool result or the person's message: the same text, or the same
    call (quoted: from quoted_calls())."""
    sources, calls = quoted
    return json.dumps([name, arguments], sort_keys=True) in calls or any(
        flat(payload) in source for source in sources
    )


def units(text: str, found: list[tuple]) -> list[tuple[int, int, list]]:
    """Payloads with the markup around them, adjacent ones joined: (start, end, payloads)."""
    joined = []
    for payload in found:
        start, end = payload[2], payload[3]
        gap_start = joined[-1][1] if joined else 0
        before = MARKUP_AT_END.search(text[max(gap_start, start - 300) : start])
        start -= len(before.group()) if before else 0
        start = payload[2] - len(text[start : payload[2]].lstrip())  # no blank at its head
        if joined and not text[gap_start:start].strip(" \t\n,;[]"):
            joined[-1] = (joined[-1][0], end, [*joined[-1][2], payload])
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


def recover_tool_calls(
    content: str, known, quoted_in=(), asked: str = ""
) -> tuple[list, str, list[str]]:
    """Tool calls a model wrote as text in content, when the server sent no tool_calls.

    known: each tool's parameter names. quoted_in: the texts of the conversation a reply may
    quote (the person's messages, tool results). asked: the person's last message; when it asks
    to see a call rather than have it run, no call written as text runs. Returns (calls, the
    content without them and their markup, what happened); ([], content, []) when there are
    none."""
    if ASKS_FOR_A_CALL.match(asked[:10_000]):
        return [], content, []
    rest = split_thinking(content)[1]
    # where it stands: at the end, or inside a wrapper it came out of (<answer>...</answer>)
    offset = content.rfind(rest) if rest.strip() else -1
    if offset < 0:  # nothing after thinking, or harmony's final channel: no calls in it
        return [], content, []
    outside, calls, kept, at, quoted = outside_code(rest), [], [], 0, None
    found_units = units(rest, payloads(rest, known))
    for number, (start, end, found) in enumerate(found_units, 1):
        if mention(rest, start, end, outside, number == len(found_units), bool(calls)):
            continue
        quoted = quoted or quoted_calls(quoted_in, known)
        if any(echoes(rest[s:e], n, a, quoted) for n, a, s, e in found):
            continue
        kept.append(rest[at:start])
        calls += [text_call(name, arguments) for name, arguments, _s, _e in found]
        at = end
    if not calls:
        return [], content, []
    kept.append(rest[at:])
    text = "\n".join(filter(None, map(unwrapped, kept)))
    family = family_of(rest)
    names = ", ".join(c["function"]["name"] for c in calls)
    happened = (
        f"the model wrote {len(calls)} tool call(s) as {family} text ({names}): run as real "
        "calls; "
        + ("DeepSeek's API sometimes does this, nothing to set" if "DSML" in family else SERVER_FIX)
    )
    return calls, (content[:offset] + text + content[offset + len(rest) :]).rstrip(), [happened]


def unwrapped(piece: str) -> str:
    """Text between calls without the tokens at its edges (harmony's <|channel|>commentary
    <|message|> before it, an end-of-turn token after it)."""
    head = TOKEN_RUN.match(piece)
    piece = piece[head.end() :] if head else piece
    tail = TOKENS_AT_END.search(piece[-200:])
    return (piece[: len(piece) - len(tail.group())] if tail else piece).strip()


TOKEN_RUN = re.compile(rf"(?:{TOKEN}|\s)+")


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
        "DeepSeek V3, R1 and V3.1",
        "vLLM tool_parsers/deepseekv3_tool_parser.py, deepseekv31_tool_parser.py; "
        "llama.cpp common/chat-parser.cpp common_chat_parse_deepseek_r1",
        rf"<{B}tool.call",
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
    name. Text before it can be printed while a reply streams."""
    names = "|".join(re.escape(n) for n in known)
    pattern = re.compile(rf"{TOKEN}|^[ \t]*[\[{{]" + (rf"|\b(?:{names})\b" if names else ""), re.M)
    outside = outside_code(text)
    return next((m.start() for m in pattern.finditer(text) if outside(m.start())), None)


def outside_code(text: str):
    """A test of a position in text: whether it is outside fenced blocks (``` or ~~~), `inline`
    code, and lines indented as code or quoted with >. The fences, spans and line starts are found
    once, and each position is looked up in them by bisection: a reply of thousands of spans or
    openers is read in one pass."""
    blocks = fenced_blocks(text)
    block_starts = [start for start, _end in blocks]
    spans = [m.span() for m in INLINE_CODE.finditer(text)]  # in order, never overlapping
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


FENCE_LINE = re.compile(r"^[ \t]{0,3}(`{3,}|~{3,})([^\n]*)", re.M)


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


INLINE_CODE = re.compile(r"`[^`\n]+`")
NEWLINE = re.compile("\n")
INDENTED = re.compile(r"    |\t|[ \t]*>(?!>>)")  # a Markdown code block's indent, or a quote


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
            calls, before, _ = recover_tool_calls(content, self.known, *self.quoting)
            self.show(split_thinking(before if calls else content)[1].rstrip() + "\n")

    def show(self, text: str) -> None:
        if text.startswith(self.shown) and len(text) > len(self.shown):
            print(visible(clean_text(text[len(self.shown) :])), end="", flush=True)
            self.shown = text
