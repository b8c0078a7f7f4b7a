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
THINK_HEADER = Pattern(
    r"\s*Here(?: is|'s| are) my (?:thought process|reasoning steps?):\s*(.*?)"
    r"(?:\n\s*(?=Here(?: is|'s) my response:|\[BEGIN FINAL RESPONSE\])|$)",
    re.S | re.I,
)
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
ANSWER_AFTER_THINKING = Pattern(
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
    r"|function call(?=<\|role_sep)"  # GigaChat 3's (vLLM gigachat3_tool_parser.py)
    r"|\s?to="
)
MARKUP = Pattern(rf"(?:{TOKEN}|[\s,;\[\]}}]|```)+")  # after a call: a fence it opened too
MARKUP_AT_END = Pattern(rf"(?:{TOKEN}|[\s,;\[\]])+\Z")
TOKENS_AT_END = Pattern(rf"(?:{TOKEN}|\s)+\Z")

# Between a tool's name and its JSON arguments: DeepSeek's separator and ```json fence, Kimi's
# :0 and argument token, Mistral's [CALL_ID]id[ARGS], harmony's <|constrain|>json<|message|>.
GLUE = Pattern(
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


def python_at(text: str, at: int, limit: int = 100_000):
    """(the Python literal that starts at text[at], where it ends), or None: a call payload in
    single quotes, with True, False, None or a trailing comma, read with ast as NousResearch's
    Hermes parser falls back to ast.literal_eval (utils.py); each key once, as json_at()."""
    import ast

    end = closing_paren(text, at, limit) if text.startswith(("{", "["), at) else None
    try:
        return (python_value(ast.parse(text[at:end], mode="eval").body), end) if end else None
    except (ValueError, TypeError, SyntaxError, RecursionError, MemoryError):
        return None


def python_value(node):
    """A Python literal's value as JSON's: objects with each key once, lists, plain values."""
    import ast

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


OPENS_OBJECT = ("\n{", ">{", "\n {", "> {")  # Hermes' <tool_call>\n{...}, the name anywhere in it
FAR = 20_000  # how far before its name an object that opens a line may begin ("arguments" first)


def starts_before(text: str, at: int) -> list[int]:
    """Where a call object holding text[at] may begin: up to three { shortly before it, and the
    last { that opens a line or follows a tag; nearest first."""
    starts, start = [], at
    for _ in range(3):
        start = text.rfind("{", max(0, at - 300), start)
        if start < 0:
            break
        starts.append(start)
    found = [(i, o) for o in OPENS_OBJECT if (i := text.rfind(o, max(0, at - FAR), at)) >= 0]
    opens = max((i + len(o) - 1 for i, o in found), default=-1)
    if opens >= 0 and (not starts or opens < starts[-1]):
        starts.append(opens)
    return starts


def object_after(text: str, name: re.Match, _wanted=None, decode=None):
    """NAME, markup, then its arguments as a JSON object: (arguments, start, end)."""
    glue, decode = GLUE.match(text, name.end()), decode or json_at
    found = (decode(text, glue.end()) or gemma_object(text, glue.end())) if glue else None
    arguments = arguments_of(found[0]) if found else None
    if arguments is None:
        return None
    end = found[1]
    if "```" in glue.group():  # DeepSeek V3 closes the fence it opened
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
GEMMA_OBJECT = Pattern(
    r"\{((?:\s*\w{1,64}:(?:<escape>.*?<escape>|<\|\"\|>.*?<\|\"\|>|\"(?:[^\"\\]|\\.)*\""
    r"|[^,{}<]{0,200})\s*,?)*)\}",
    re.S,
)
GEMMA_PAIR = Pattern(
    r"\s*(\w{1,64}):(?:<escape>(.*?)<escape>|<\|\"\|>(.*?)<\|\"\|>|(\"(?:[^\"\\]|\\.)*\")"
    r"|([^,{}<]*))",
    re.S,
)


def gemma_object(text: str, at: int):
    """(the arguments of a Gemma call object at text[at], where it ends), or None."""
    found = GEMMA_OBJECT.match(text, at)
    if not found or not found.group(1).strip():
        return None
    arguments = {}
    for p in GEMMA_PAIR.finditer(found.group(1)):
        quoted = p.group(4) and json_at(p.group(4), 0)  # "g4q.txt": the value without quotes
        arguments[p.group(1)] = (
            quoted[0] if quoted else next(v for v in p.groups()[1:] if v is not None)
        )
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
        value, at = true_end(text, p, wanted) or (value, p.end())
        if 'string="false"' in (p.group("attrs") or ""):  # DSML marks a value that is not text
            value = (json_at(value.strip(), 0) or [value])[0]
        arguments[key.strip()] = value
    return (arguments, head(text, name), at) if arguments else None


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


BRACKETS = Pattern(r"[()\[\]{}\"'\\]")


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
# A payload is a call only where it stands as one (mention() says where it does not):
# - its place: outside code (fences that do not say they are a call, `inline`, indented, <pre>,
#   <code>, rST blocks), quotations (a quotation mark or bracket open before it, on its line or
#   across lines; a blockquote), list items and table rows, and not inside a sentence (prose before
#   it on its line that ends no sentence, or prose after it on its line but for a new sentence after
#   a closing token); not after thinking it did not start with;
# - who acts, and when: nothing before it on its line or the line before but markup, a word or two
#   ("Sure.", "好的。"), a plan ("Here is my plan:" above a list), or a sentence in which the
#   model announces its own next step ("Let me look:", "I'll read it.", "让我看看：");
#   never one that vetoes() (another actor, a past action, a condition, a denial, an example, a
#   demonstration, a heading); between calls, any sentence but those;
# - what follows: when the reply goes on after its last call, nothing that vetoes, and no question
#   or condition for the person;
# - what it repeats: no call that a tool result or the person's message of the conversation holds,
#   no call already made unless the model says it runs it once more, and none at all when the
#   person asked to see a call, or that nothing run or change (keeps_from_running()).
# The words each rule reads are in CUES, below.
LIST_ITEM = Pattern(r"[ \t]*(?:[-*+•·]|\d{1,3}[.)、]|[A-Za-z][.)]|\|)[ \t]")
CODE_TAGS = Pattern(r"</?(?:pre|code|tt|samp|kbd|blockquote|q|example|quote)\b", re.I)
COLONS = ":\uff1a\ufe55\ufe13\u2236"  # ASCII, fullwidth, small, vertical, ratio
SENTENCE_END = ".!?\u3002\uff01\uff1f\u2026\u061f\u0964"  # and 。！？…؟।
# --- The words the rules read: one table, every language the project's users write -------------
# Each rule that reads words takes them from CUES, a row per language and a column per rule;
# tests/test_who_acts.py checks every rule in every language. What no row recognises is text:
# a language missing from the table fails safe (no announcement is read, so nothing runs).
# Entries are regular expressions. Rows of languages written with spaces are matched as whole
# words (\b on both sides); Chinese, Japanese and Korean rows are matched anywhere.
#   announces  the model's own next step, first person, present or future ("I'll", "我来")
#   next       an adverb of sequence ("Now", "First", "现在"): it announces where nothing in its
#              line vetoes
#   affirms    a word or two that says nothing of what follows ("Sure.", "好的。")
#   presents   presents what follows ("Here is"): a call only when it also announces
#   shows      shows, quotes, explains or imagines what follows ("show", "would"): never a call
#   examples   names it an example or a reference: never a call
#   topics     a format, a syntax, a template: what follows is one, unless the model announces
#              its own step ("Let me check the config format:")
#   plans      introduces the model's own plan ("Here is my plan:")
#   describes  says what something contains or looks like: a mention, unless the model
#              announces its own step ("Let me see what the file contains:")
#   another    another actor acts: the model, an assistant, a named model family, a role label
#   past       the action is done already ("I ran", "我运行了"): a recap
#   condition  the action waits on something ("If the tests fail, I'll run:", "once you confirm")
#   negation   the model says it will not ("I won't run it")
#   again      the model runs a call it made before once more ("Let me run the tests again:")
#   call       the person's word for a tool call
#   see        the person asks to see one ("show", "look like"): with call, a veto
#   keep       the person asks that nothing run or change ("don't run", "不要修改"): a veto
CUES = {
    "en": {
        "announces": r"let me(?! know)|let's|let us|i'll|i will|i'm going to|i am going to|"
        r"i (?:first |now )?(?:need|want|have) to|i'd like to|(?:the )?first step is|"
        r"using the \w+ tool|i shall|i'm now|i should|i can|i'd be happy|happy to help|"
        r"we (?:first )?need to|we'll|"
        r"we will|we should|now i|next,? i|first,? i|then i|this will|that will|"
        r"(?:reading|writing|running|checking|creating|looking|opening|listing|executing|"
        r"searching|saving|updating|editing|testing|installing|inspecting|calling|trying|"
        r"starting|fixing|reviewing|examining|verifying|viewing|loading|fetching|making|adding|"
        r"removing|deleting)",
        # "Now run it.", "First, the file."
        "next": r"^\W*(?:first|next|then|now|finally)(?! time)",
        "affirms": r"sure|ok|okay|alright|all right|done|got it|certainly|of course|great|good|"
        r"right|yes",
        "presents": r"here is|here's|here are|here it is|below is|give you",
        "shows": r"show\w*|quot(?:e|es|ed|ing) (?:it|this|that|from|the (?:docs|readme|manual))|"
        r"pasted|demonstrat\w*|illustrat\w*|would|walk (?:you )?through|explain\w*|"
        r"break (?:it|this) down|teach\w*|introduc\w*|present(?:ing|s)?|describ\w*|anatomy|"
        r"\w+'d (?:describe|write|make|run|call|use|do|look|send|say)",
        "examples": r"for example|for instance|e\.g\.|examples|example(?!\s+[a-z])|"
        r"an? example(?! (?:file|script|project|config|app|program|module|folder|directory)\b)|"
        r"like this|like so|such as|sample|for reference|is how|are how|this way|typical|"
        r"written as",
        "topics": r"formats?|syntax|template|schema",
        "plans": r"(?:my plan|the plan|plan|my steps|the steps)\s*[:：]",
        "describes": r"looks? like|contains?|says",
        "another": r"the (?:model|assistant|llm|bot)(?= \w+s\b| (?:then|now|will|would|might|"
        r"may|can|could|should)\b|\s*[:：]|'s)|you'd need|you would need|"
        r"you'll need|(?:it|he|she|they|the (?:agent|user|server|client|loop|"
        r"parser)) (?:then )?(?:writes|outputs|emits|returns|sends|produces|generates|replies|"
        r"responds|answers|says|calls|runs|sees|types|gets)|\w+ (?:outputs|emits|generates|"
        r"produces|responds|replies)|(?:assistant|model|output|response|ai)\s*:|"
        r"you (?:can|could|should|may|might|need to|have to|will need to) (?:run|execute|use|"
        r"try|paste|type)|yourself|(?:steps?|commands?) for you|for you to run|"
        r"leave (?:\w+ ){0,2}(?:for|to) you",
        "past": r"i (?:ran|wrote|did|executed|created|called|invoked|used|typed|sent|edited|saved|"
        r"changed)|(?:i've|i have|i had|we've|we have)(?: already| just)? (?:run|written|done|"
        r"executed|created|called|invoked|used|typed|sent|edited|saved|changed|made)|"
        r"(?:was|were) (?:run|written|executed|called)|(?:the old|the previous) \w+ (?:did|ran|"
        r"had)",
        "condition": r"^\W*(?:if|when|whenever|unless|in case|should)|"
        r"if you (?:want|like|wish|prefer|'d like|agree|confirm|approve)|once you|"
        r"(?:after|when) you (?:confirm|approve|agree)|wait for your|"
        r"let me know (?:and|before|whether|if (?:i should|it's|that's|this is|you want me to|"
        r"you'd like me to))|your (?:confirmation|approval|ok|go-ahead|permission|review)|"
        r"(?:so|for) you (?:can|to) review|review it before|before (?:you )?approv\w*|"
        r"shall i|do you want me|want me to|if (?:that's|it's|this is) (?:ok|okay|fine|alright)",
        "negation": r"(?:i|we) (?:will|shall|would|am|'m|are|do|did|can) not|(?:i|we) (?:won't|"
        r"don't|didn't|can't|cannot|shouldn't|wouldn't)|(?:i'm|i am|we're) not going to|"
        r"(?:i|we)(?:'ll| will) never|not (?:run|execute|write|call) (?:it|this|that)",
        "again": r"again|once more|re-?run|one more time|"
        r"to (?:verify|confirm|check|make sure|ensure)",
        # the tool's call, not one in the person's code ("every function call in config.py",
        # "the call to parse()")
        "call": r"tool[ _-]?calls?|json for|\w+_\w+ calls?|function[ _-]?calls?(?! in\b)|"
        r"(?:the|a|your) call(?! to \w+\()",
        "see": r"show|look like|looks like|example|give me|write out",
        # the whole object: "anything", "it", "any commands", then the clause ends ("anything
        # else", "anything in /etc", "anything destructive" is a narrow ask)
        "keep": r"(?:don't|do not|never) (?:change|modify|touch|write|edit|alter) (?:anything|any "
        r"files?|a thing)(?=\s*(?:[,.;:!?)]|$|yet\b|at all\b|for now\b|please\b))|"
        r"change nothing|do(?:n't| not) make any changes|dont (?:run|change|modify|touch)|"
        r"(?:don't|do not) run (?:any )?commands|read-only|"
        r"touch nothing|without (?:changing|touching|writing|running) anything|without (?:running|"
        r"executing) it|(?:don't|do not|never) (?:actually )?(?:run|execute) (?:it|this|that|"
        r"anything|any (?:commands?|tools?|calls?))(?=\s*(?:[,.;:!?)]|$|yet\b|at all\b|for now\b))|"
        r"dry run only|(?:just|only) a dry run|as a dry run|(?:don't|do not) actually|"
        r"make no changes(?! to)|no changes(?! to)|no execution|(?:only|just) (?:a |the )?plan"
        r"(?:;|,|\.|$)|plan only|without executing|(?:just|only) (?:explain|describe)|explain only",
    },
    "zh": {
        "announces": r"让我|我来|我将|我会|我先|我要|我需要|我看|我查|我读|我试|我再|需要先|"
        r"先看|先读|下面我|我们(?:先|来|现在)|(?:首先|先|现在|接下来|然后)(?:来)?(?:查看|读取|运行|执行|"
        r"检查|创建|写入|看一下|跑)",
        "next": r"现在|接下来|首先|然后|这就|马上|立即|立刻|第.步",
        "affirms": r"好的|好|行|可以|没问题|收到|明白|了解",
        "presents": r"下面是|以下是|这是",
        "shows": r"展示|演示|示范|给你看|讲解|解释|带你|介绍|说明一下|讲一下|教你",
        "examples": r"例如|比如|譬如|示例|例子|举例|样例|範例|如下|这样|这种|长这样|写法|形如|"
        r"就是",
        "topics": r"格式|模板|参考|以上|上面|语法",
        "plans": r"计划|步骤",
        "describes": r"内容|包含",
        "another": r"模型|助手|它(?:会)?(?:输出|写|返回|生成|调用)|解析器|输出[:：]|回复[:：]|"
        r"(?:代理|智能体|用户|程序|系统)(?:会|将|可以|需要|再)?(?:调用|输出|返回|发送|看到|输入|运行|执行|得到)|"
        r"你可以|您可以|你自己",
        "past": r"(?:运行|执行|写入?|调用|创建|读取?|修改|跑)(?:过|了)|我已经|刚才|刚刚",
        "condition": r"如果|要是|假如|万一|一旦|的话|确认后|同意后|等你|你确认|需要的话|要我|"
        r"可以吗|好吗|是否",
        "negation": r"我不会|我不|不会(?:运行|执行|写)|我没有|不打算",
        "again": r"再|重新|验证|确认一下|确保",
        "call": r"调用",
        "see": r"什么样|怎么写|格式|示例|例子|显示|给我看|只显示|不要执行|别执行",
        "keep": r"(?:不要|别|请勿|勿)(?:修改|改动|改|动|运行|执行)任何(?:东西|文件|内容|事|地方|"
        r"代码|命令)?(?![\u4e00-\u9fff])|(?:不要|别)(?:运行|执行|修改)(?=[，。,.！!]|$)|"
        r"(?:不要|别)(?:运行|执行)这个命令|不(?:要)?(?:改动?|修改|动)任何(?:东西|文件|内容)?"
        r"(?![\u4e00-\u9fff])|不(?:要)?做任何(?:修改|改动)|(?:不要|别)(?:运行|执行)(?:它|这个)"
        r"(?![\u4e00-\u9fff])|只(?:给我)?(?:方案|计划|解释|说明)",
    },
    "ja": {
        "announces": r"(?<!い)(?<!あり)ます|ましょう",
        "next": r"まず|次に",
        "affirms": r"はい|わかりました",
        "presents": r"以下は|これは|これが",
        "shows": r"示します|見せ|説明|紹介",
        "examples": r"例えば|例を|の例|以下のよう|このよう",
        "topics": r"形式|書式|書き方|記法",
        "plans": r"手順|計画",
        "describes": r"の内容|含まれ|含む",
        "another": r"モデル|アシスタント|出力[:：]|あなたが|ご自身|ユーザー|利用者",
        "past": r"ました|でした",
        "condition": r"もし|なら[、,]|たら[、,]|場合は|よろしければ|確認後|ご確認|いいですか|"
        r"しましょうか",
        "negation": r"しません|ません|しないつもり",
        "again": r"もう一度|再度|再び",
        "call": r"呼び出し",
        "see": r"見せ|どのよう|どんな|例",
        "keep": r"何も(?:変更|実行|書き換え)し(?:ない|ません)|何も(?:変更|実行)せず|何も触らないで|"
        r"ファイル(?:に|には)?触らないで|(?:^|[、。,.\s])(?:実行|変更)(?:は)?しないで|説明だけ|"
        r"説明のみ",
    },
    "ko": {
        "announces": r"겠습니다|할게요|볼게요|보겠|하겠",
        "next": r"먼저|이제|다음으로",
        "affirms": r"네|알겠습니다",
        "presents": r"다음은|이것은",
        "shows": r"보여|설명|알려드리|소개",
        "examples": r"예를|예시|다음과",
        "topics": r"형식|방식|문법",
        "plans": r"계획",
        "describes": r"내용|포함",
        "another": r"모델|어시스턴트|출력[:：]|직접|사용자",
        "past": r"했습니다|했어요|었습니다|았습니다",
        "condition": r"만약|(?:하|으)면[ ,]|경우에|원하시면|확인 후|괜찮으시면|할까요",
        "negation": r"않겠|않을|안 할|하지 않",
        "again": r"다시|한 번 더",
        "call": r"호출",
        "see": r"보여|어떻게|예시",
        "keep": r"아무것도 (?:바꾸지|수정하지|변경하지|건드리지|실행하지) 마|"
        r"(?:^|[,.]\s*)실행하지 마|설명만",
    },
    "fr": {
        "announces": r"je vais|laissez-moi|laisse-moi|voyons|"
        r"je (?:lis|écris|lance|exécute|vérifie|regarde|ouvre|crée)",
        "next": r"maintenant|d'abord|tout d'abord|ensuite|puis",
        "affirms": r"d'accord|bien|oui",
        "presents": r"voici|voilà",
        "shows": r"montr\w*|expliqu\w*|cit\w*|présent\w*|décri\w*|enseign\w*|serait",
        "examples": r"par exemple|exemple|comme ceci",
        "topics": r"formats?|syntaxe|modèle de",
        "plans": r"mon plan|le plan|plan\s*[:：]",
        "describes": r"ressemble|ainsi|contient",
        "another": r"le modèle|l['’]assistant|il (?:écrit|renvoie|produit|génère|répond)|"
        r"tu peux|vous pouvez|toi-même|vous-même|l['’]utilisateur",
        "past": r"j['’]ai (?!besoin|envie)\w+|nous avons \w+é",
        "condition": r"^\W*(?:si|s'il|quand|lorsque|au cas où|une fois)|si tu veux|si vous voulez|"
        r"si vous le souhaitez|une fois que tu|après ta confirmation|dis-moi|voulez-vous|veux-tu",
        "negation": r"ne (?:vais|vas|va|le|l['’]\w+|\w+) pas|je ne|n['’]\w+ pas",
        "again": r"encore|de nouveau|à nouveau",
        "call": r"appels?",
        "see": r"montre\w*|ressemble|exemple",
        "keep": r"ne (?:change|modifie|touche|lance|exécute|écris) rien"
        r"(?! (?:à|au|aux|dans|de|d['’]))|ne touche à rien|"
        r"aucune modification(?! (?:des|du|de|aux?|dans|à)\b)|"
        r"aucun changement(?! (?:des|du|de|aux?|dans|à)\b)|explique seulement|juste expliquer|"
        r"sans rien (?:changer|modifier|exécuter)|sans l['’]exécuter|"
        r"ne l['’](?:exécute|lance) pas|aucune commande",
    },
    "es": {
        "announces": r"voy a|déjame|vamos a|"
        r"(?:^\W*|yo |ahora |primero |luego )(?:reviso|leo|escribo|ejecuto|abro|compruebo|miro)",
        "next": r"ahora|primero|luego|después",
        "affirms": r"claro|vale|bien|sí",
        "presents": r"aquí",
        "shows": r"mostr\w*|muestr\w*|explic\w*|cit\w*|enseñ\w*|present\w*|describ\w*|"
        r"sería|cómo se escribe",
        "examples": r"por ejemplo|ejemplo",
        "topics": r"formatos?|sintaxis|plantilla",
        "plans": r"mi plan|el plan|plan\s*[:：]",
        "describes": r"así|contiene|el primero es|la primera es",
        "another": r"el modelo|el asistente|puedes|usted puede|tú mismo|el usuario",
        "past": r"(?:he|hemos|había) \w+(?:ado|ido)|ejecuté|escribí|corrí|hice|usé|creé",
        "condition": r"^\W*(?:si|cuando|en caso de|una vez)|si quieres|si lo deseas|"
        r"cuando confirmes|dime si|quieres que",
        "negation": r"no (?:lo |la )?(?:voy|vamos|ejecut\w*|escrib\w*|corr\w*|har\w*)",
        "again": r"de nuevo|otra vez|nuevamente",
        "call": r"llamadas?",
        "see": r"muestra\w*|cómo (?:es|se ve)|ejemplo",
        "keep": r"no (?:cambies|modifiques|toques|ejecutes|escribas) nada|"
        r"ningún cambio(?! en\b| a\b| de\b)|sin (?:cambiar|ejecutar|tocar) nada|no lo ejecutes|"
        r"ningún comando|solo explic\w*",
    },
    "de": {
        "announces": r"ich werde|werde ich|lass mich|"
        r"(?:lese|schreibe|führe|prüfe|öffne|erstelle|schaue|starte) ich|"
        r"ich (?:lese|schreibe|führe|prüfe|öffne|erstelle|schaue|starte)",
        "next": r"jetzt|nun|zuerst|zunächst|dann",
        "affirms": r"gut|klar|ja",
        "presents": r"hier ist|hier sind",
        "shows": r"zeig\w*|erklär\w*|zitier\w*|würde|bei(?:zu)?bringen|vorstell\w*|"
        r"beschreib\w*|aussieht|aussehen|wäre",
        "examples": r"zum beispiel|beispiel\w*",
        "topics": r"formate?|syntax|vorlage",
        "plans": r"mein plan|der plan|plan\s*[:：]",
        "describes": r"sieht (?:\w+ )?so aus|enthält|so schreibt",
        "another": r"das modell|der assistent|es (?:schreibt|gibt|erzeugt|antwortet)|du kannst|"
        r"sie können|selbst|der (?:nutzer|benutzer)",
        "past": r"ich habe|ich hatte|wir haben|habe ich|hatte ich",
        "condition": r"^\W*(?:wenn|falls|sobald|sofern)|wenn du willst|wenn sie möchten|"
        r"sobald du bestätigst|sag mir|soll ich",
        "negation": r"werde (?:\w+ )?nicht|nicht (?:aus|ausführen|schreiben)",
        "again": r"erneut|nochmal|noch einmal|wieder",
        "call": r"aufruf(?:s|e)?|funktionsaufruf\w*|toolaufruf\w*",
        "see": r"zeig\w*|sieht|aussieht|beispiel",
        "keep": r"ändere nichts(?! an\b| am\b| in\b)|nichts (?:ändern|anfassen|ausführen)|"
        r"keine dateien anfassen|keine änderungen?(?! an\b| am\b| in\b| zu\b)|"
        r"führ\w* (?:es |ihn |das )?nicht aus|^\W*nicht ausführen|keine befehle|nur erklären",
    },
    "pt": {
        "announces": r"vou|deixe-me|deixa eu|vamos|"
        r"(?:^\W*|eu |agora |primeiro )(?:leio|escrevo|executo|abro|verifico)",
        "next": r"agora|primeiro|depois|então",
        "affirms": r"claro|certo|sim",
        "presents": r"aqui está|aqui estão",
        "shows": r"mostr\w*|explic\w*|cit\w*|veja|ficaria|seria|descrev\w*|apresent\w*|ensin\w*",
        "examples": r"por exemplo|exemplo",
        "topics": r"formatos?|sintaxe|modelo de",
        "plans": r"meu plano|o plano|plano\s*[:：]",
        "describes": r"assim|contém",
        "another": r"o modelo|o assistente|você pode|você mesmo|o usuário",
        "past": r"executei|escrevi|rodei|fiz|criei|usei|chamei",
        "condition": r"^\W*(?:se|quando|caso)|se quiser|se você quiser|quando confirmar|"
        r"me diga se|quer que eu",
        "negation": r"não (?:vou|vamos|execut\w*|escrev\w*|rod\w*|far\w*)",
        "again": r"de novo|novamente|outra vez",
        "call": r"chamadas?",
        "see": r"mostr\w*|como (?:é|fica)|exemplo",
        "keep": r"não (?:altere|mude|modifique|mexa|toque|execute|rode|escreva) (?:nada|em nada)|"
        r"não mexa(?=[,.!]|$)|sem (?:alterar|executar|mudar) nada|não o execute|nenhum comando|"
        r"(?:só|apenas) expli\w*",
    },
    "it": {
        "announces": r"lascia(?:temi)? che|\w+erò|\w+irò|\w+arò|"
        r"(?:^\W*|io |ora |adesso |prima )(?:leggo|scrivo|eseguo|controllo|apro|creo|lancio|"
        r"verifico|guardo)",
        "next": r"ora|adesso|prima|poi",
        "affirms": r"certo|va bene|sì",
        "presents": r"ecco",
        "shows": r"mostr\w*|spieg\w*|cit\w*|faccio vedere|far vedere|illustr\w*|present\w*|"
        r"descriv\w*|insegn\w*|sarebbe",
        "examples": r"per esempio|esempio",
        "topics": r"formato|formati|sintassi|modello di",
        "plans": r"il mio piano|il piano|piano\s*[:：]",
        "describes": r"così|contiene",
        "another": r"il modello|l['’]assistente|puoi|tu stesso|l['’]utente",
        "past": r"ho (?:eseguito|scritto|fatto|lanciato|creato|usato|chiamato)|"
        r"abbiamo \w+(?:ato|uto|ito)|\w+(?:ava|eva|iva)",
        "condition": r"^\W*(?:se|quando|nel caso|una volta)|se vuoi|se desideri|quando confermi|"
        r"dimmi se|vuoi che",
        "negation": r"non (?:lo |la )?(?:eseguir\w*|scriver\w*|far\w*|lancer\w*|vado)",
        "again": r"di nuovo|ancora|nuovamente",
        "call": r"chiamat[ae]",
        "see": r"mostr\w*|come (?:è|appare)|esempio",
        "keep": r"non (?:modificare|cambiare|toccare|eseguire|scrivere) (?:niente|nulla)|"
        r"lascia stare (?:tutto|i file)|lascia stare(?=[,.!]|$)|senza (?:modificare|eseguire|"
        r"toccare) (?:niente|nulla)|non eseguirl[oa]|nessun comando|solo spiega\w*",
    },
    "nl": {
        "announces": r"ik ga|laat me|ik zal|"
        r"ik (?:lees|schrijf|voer|open|maak|kijk|controleer|start)",
        "next": r"nu|eerst|dan|daarna",
        "affirms": r"goed|prima|ja",
        "presents": r"hier is",
        "shows": r"toon\w*|laat zien|uitleg\w*|zie je|laat .{0,20}zien|beschrijf\w*|eruitziet|zou",
        "examples": r"bijvoorbeeld|voorbeeld",
        "topics": r"formaat|syntaxis|sjabloon",
        "plans": r"mijn plan|het plan|plan\s*[:：]",
        "describes": r"ziet er (?:\w+ )?zo uit|bevat",
        "another": r"het model|de assistent|je kunt|u kunt|zelf|de gebruiker",
        "past": r"ik heb|ik had|we hebben|heb ik",
        "condition": r"^\W*(?:als|wanneer|indien|zodra)|als je wilt|zodra je bevestigt|"
        r"laat (?:me|maar) weten|zal ik",
        "negation": r"ga (?:\w+ )?niet|niet (?:uit|uitvoeren|schrijven)",
        "again": r"opnieuw|nog een keer|weer",
        "call": r"aanroep\w*",
        "see": r"toon|laat .{0,20}zien|ziet|voorbeeld",
        "keep": r"verander niets|niets (?:veranderen|aanpassen|uitvoeren)|pas niets aan|"
        r"raak niets aan|voer (?:het )?niet uit|^\W*niet uitvoeren|alleen uitleggen",
    },
    "ru": {
        "announces": r"давайте|я (?:\w+у|\w+ю)|посмотрю|прочитаю|проверю|запущу|читаю|"
        r"запускаю|посмотрим|проверим|запустим|прочитаем",
        "next": r"сейчас|сначала|теперь|затем|потом",
        "affirms": r"хорошо|ладно|понял|да",
        "presents": r"вот",
        "shows": r"показ\w*|покаж\w*|объясн\w*|цитир\w*|опиш\w*|описыва\w*|научу|"
        r"представлю|был бы|было бы",
        "examples": r"например|пример\w*|образец",
        "topics": r"формат\w*|синтаксис|шаблон\w*",
        "plans": r"мой план|план\s*[:：]",
        "describes": r"выглядит|содержит|так",
        "another": r"модель|ассистент|(?:она|он) (?:пишет|выдаёт|выдает|возвращает)|"
        r"агент (?:вызывает|пишет|выдаёт)|можешь|можете|сам|пользователь",
        "past": r"я (?:\w+л|\w+ла)|запустил\w*|выполнил\w*|написал\w*|сделал\w*|создал\w*|"
        r"вызвал\w*",
        "condition": r"^\W*(?:если|когда|в случае)|если хотите|если хочешь|после подтверждения|"
        r"скажите|дайте знать|хотите, чтобы",
        "negation": r"не (?:буду|стану|запущу|выполню|запускаю)",
        "again": r"снова|ещё раз|еще раз|заново|повторно",
        "call": r"вызов\w*",
        "see": r"покаж\w*|выглядит|пример",
        "keep": r"ничего не (?:меняй|изменяй|трогай|запускай|пиши|выполняй)|"
        r"не (?:запускай|выполняй) (?:его|это|ничего)|никаких команд|(?:только|просто) "
        r"(?:объясни|опиши)",
    },
}
SPACED = ("en", "fr", "es", "de", "pt", "it", "nl", "ru")  # matched as whole words
# Model families named in a sentence: another model acts (a comparison of formats, a tutorial)
FAMILY_NAMES = (
    r"hermes|qwen\w*|kimi|llama|mistral|mixtral|gemma|deepseek|glm|minimax|granite|phi-?\d|"
    r"gpt-oss|gpt-\d\w*|claude|gemini|jamba|functionary|xlam|lfm\d?|olmo|"
    r"seed-oss|ernie|hunyuan|gigachat\w*|nemotron|magistral|devstral|codestral|pixtral|harmony|"
    r"internlm\w*|baichuan|chatglm|smollm\w*|starcoder\w*|falcon|grok|command[- ]r\+?|cohere"
)


# Words for "example" in languages without a row: a mention in them is text all the same
ELSEWHERE = {
    "examples": r"przykład|örnek|exempel|contoh|παράδειγμα|příklad|приклад|ví dụ|mfano|esimerkki|"
    r"उदाहरण|مثال|ตัวอย่าง|למשל|जैसे"
}


def cue(rule: str) -> Pattern:
    """One pattern for a rule, from its column in every row of CUES."""
    spaced = "|".join(CUES[lang][rule] for lang in SPACED)
    other = "|".join([*(CUES[lang][rule] for lang in CUES if lang not in SPACED)])
    other += f"|{ELSEWHERE[rule]}" if rule in ELSEWHERE else ""
    return Pattern(rf"(?<!\w)(?:{spaced})(?!\w)|{other}", re.I)


ANNOUNCES, NEXT, PRESENTS, SHOWS, EXAMPLES, TOPICS, PLANS, DESCRIBES, PAST, AGAIN = (
    cue(rule)
    for rule in (
        "announces",
        "next",
        "presents",
        "shows",
        "examples",
        "topics",
        "plans",
        "describes",
        "past",
        "again",
    )
)
# the action waits on a condition, or the model says it will not take it
UNSURE = Pattern(f"{cue('condition').pattern}|{cue('negation').pattern}", re.I)
# the whole sentence is the word or two, and what follows it is punctuation
AFFIRMS = Pattern(rf"(?:{'|'.join(row['affirms'] for row in CUES.values())})\W*", re.I)
# a family's name in prose, not in its markup (<minimax:tool_call>)
ANOTHER = Pattern(
    rf"{cue('another').pattern}|(?<![\w<:|/-])(?:{FAMILY_NAMES})(?![\w|>-]|:\w)", re.I
)
ASKS_TO_SEE = (cue("call"), cue("see"))
KEEPS = cue("keep")
# Structure above a call that makes it part of a document: a heading, a line of bold, an rST
# directive or literal block
DOCUMENT_LINE = Pattern(r"\s*(?:#{1,6}\s|\*\*[^*]+\*\*\s*$|__[^_]+__\s*$|\.\. [\w-]+::)|.*::\s*$")
# The scripts the rows are written in: a person's message in none of them cannot be read for a
# veto, so no call written as text runs (fails safe)
READ_SCRIPTS = Pattern(r"[A-Za-z\u00c0-\u024f\u0400-\u04ff\u3040-\u30ff\u4e00-\u9fff\uac00-\ud7af]")


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
        # the sentence goes on after it; not after a closing token, which ends the call, with a
        # new sentence after it (LFM2's "…<|tool_call_end|>Checking the current status.")
        or (bool(after.strip()) and not MARKUP.fullmatch(after) and not new_sentence(text, end))
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


CLOSED = Pattern(r"(?:<\|[^<>|\n]{0,40}end[^<>|\n]{0,40}\|>|</[\w:.-]{1,64}>|<[\w:.-]{1,40}\|>)\Z")


def new_sentence(text: str, end: int) -> bool:
    """Whether the markup before text[end] closes with a token and a new sentence starts there."""
    first = text[end : end + 20].lstrip(" ")[:1]
    return bool(CLOSED.search(text[max(0, end - 90) : end])) and (
        first.isupper() or (first.isalpha() and not first.isascii())
    )


def unannounced(
    text: str, start: int, end: int, line_start: int, last: bool, after_a_call: bool
) -> bool:
    """Whether the text next to the markup keeps it from being a call: the text before it on its
    line, and the line before when its own starts with markup or with it (harmony's preamble), or
    the list item right above it; and, after the reply's last call, the sentence the reply goes on
    with, if it vetoes."""
    before = text[line_start:start].strip()
    introductions = [before]
    if not before or TOKEN_START.match(text, line_start):
        introductions.append(above_list(text, line_start))
        above = previous_line(text, line_start)  # a list's item right above: "2. It emits:"
        if LIST_ITEM.match(above) and vetoes(last_sentence(above).strip()):
            return True
    # a fence above ends a code block: it introduces nothing
    introductions = [w for w in introductions if w and not FENCE_LINE.fullmatch(w)]
    if any(not announces(words, after_a_call) for words in introductions):
        return True
    going_on = first_sentence(text[end : end + 2000].strip())
    return (
        last and bool(going_on) and not MARKUP.fullmatch(going_on) and vetoes(going_on, after=True)
    )


TOKEN_START = Pattern(rf"[ \t]*(?:{TOKEN})")


def announces(words: str, lenient: bool, after: bool = False) -> bool:
    """Whether text next to a call lets it be a call: its sentence announces the model's own next
    step, or it is a word or two that says nothing of it ("Sure.", "好的。"). lenient (between
    calls, and a list's item above a call): any sentence that vetoes() nothing. after: the
    sentence after the reply's last call, which may say what the call will show."""
    sentence = last_sentence(words).strip()
    if vetoes(sentence, after):
        return False
    if PLANS.search(sentence) or ANNOUNCES.search(sentence):
        return True
    if NEXT.search(sentence):  # "First:" after "There are two formats." announces nothing
        return not vetoes(words[-1000:], after)
    if sentence[-1:] in COLONS or DESCRIBES.search(sentence):
        return False
    return lenient or bool(AFFIRMS.fullmatch(sentence))


def vetoes(sentence: str, after: bool = False) -> bool:
    """Whether a sentence makes what follows it a mention, whoever runs it: it names an example or
    heads a document section; another actor acts ("the model writes", "模型输出", "Hermes:",
    "you can run"), the action is past ("I ran", "我运行了"), waits on a condition ("If the tests
    fail", "once you confirm") or is denied ("I won't"); it shows, quotes or explains (but for what
    a call will show, after it: "This will show which tests fail"); or, unless the model announces
    its own step, it names a format, says what something contains or presents what follows
    ("Here is"; but "Here's the file I'll write")."""
    own = ANNOUNCES.search(sentence) or PLANS.search(sentence)
    return bool(
        EXAMPLES.search(sentence)
        or DOCUMENT_LINE.match(sentence)
        or ANOTHER.search(sentence)
        or PAST.search(main_clause(sentence))
        or UNSURE.search(sentence)
        or (after and sentence.rstrip()[-1:] in "?？")  # a question to the person waits for them
        or (SHOWS.search(sentence) and not (after and (own or NEXT.search(sentence))))
        or (not own and (TOPICS.search(sentence) or DESCRIBES.search(sentence)))
        or (not own and PRESENTS.search(sentence))
    )


CLAUSE = Pattern(r"[,，;；、]")


def main_clause(sentence: str) -> str:
    """The clause that announces the model's step, and what follows it: a clause before it says
    what was done ("Now that I've fixed it, let me run the tests"), which makes no recap."""
    found = ANNOUNCES.search(sentence)
    if not found:
        return sentence
    return sentence[
        max((m.end() for m in CLAUSE.finditer(sentence, 0, found.start())), default=0) :
    ]


def keeps_from_running(asked: str) -> bool:
    """Whether the person's last message vetoes every call written as text: it asks to see a call
    ("what does the call look like", "只显示调用"), or that nothing run or change ("don't change
    anything", "不要修改"); or it is written in a script no row of CUES reads, so that neither can
    be known (fails safe)."""
    call, see = ASKS_TO_SEE
    if KEEPS.search(asked) or (call.search(asked) and see.search(asked)):
        return True
    letters = sum(c.isalpha() for c in asked)
    return letters >= 4 and len(READ_SCRIPTS.findall(asked)) * 2 < letters


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


SENTENCE_BREAK = Pattern(r"[.!?\u2026](?=\s)|[\u3002\uff01\uff1f\u061f\u0964]")  # "a.txt" goes on


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


class Made(str):
    """A call the conversation made, as the JSON payload it is read in (replies.quoted_texts()):
    written again, it is a recap, unless the model says it runs it again."""


def quoted_calls(quoted_in, known) -> tuple[list[str], set[str], set[str]]:
    """What a reply may quote: each source flattened and the calls readable in them, and the calls
    the conversation made (Made)."""
    sources = [s for s in quoted_in if any(name in s for name in known)]
    said, made = set(), set()
    for source in sources:
        for n, a, _s, _e in payloads(source, known):
            (made if isinstance(source, Made) else said).add(json.dumps([n, a], sort_keys=True))
    return [flat(s) for s in sources if not isinstance(s, Made)], said, made


def echoes(payload: str, name: str, arguments: dict, quoted) -> str | None:
    """What a payload repeats: "quoted", a tool result or the person's message (the same text, or
    the same call), or "made", a call the conversation made; None if neither (quoted: from
    quoted_calls())."""
    sources, said, made = quoted
    call = json.dumps([name, arguments], sort_keys=True)
    if call in said or any(flat(payload) in source for source in sources):
        return "quoted"
    return "made" if call in made else None


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
    if not any(name in content for name in known):  # a call written as text names its tool
        return [], content, []
    if keeps_from_running(asked[:10_000]):
        return [], content, []
    rest = split_thinking(content)[1]
    # where it stands: at the end, or inside a wrapper it came out of (<answer>...</answer>)
    offset = content.rfind(rest) if rest.strip() else -1
    if offset < 0:  # nothing after thinking, or harmony's final channel: no calls in it
        return [], content, []
    found = payloads(rest, known)
    fences = call_fences(rest, found)  # a fence that says it is a call is no code
    outside, calls, kept, at, quoted = outside_code(rest, fences), [], [], 0, None
    found_units = in_fences(units(rest, found), fences)
    for number, (start, end, found) in enumerate(found_units, 1):
        if mention(rest, start, end, outside, number == len(found_units), bool(calls)):
            continue
        quoted = quoted or quoted_calls(quoted_in, known)
        repeats = {echoes(rest[s:e], n, a, quoted) for n, a, s, e in found}
        # a file's call never runs; a recap of a call made runs only where the model says "again"
        if "quoted" in repeats or ("made" in repeats and not said_again(rest, start)):
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
        f"the model wrote {len(calls)} tool call(s) as {family} text ({names}): read as calls, "
        "and each that could change anything waits for your yes (AGENT_TEXT_CALLS); "
        + ("DeepSeek's API sometimes does this, nothing to set" if "DSML" in family else SERVER_FIX)
    )
    return calls, (content[:offset] + text + content[offset + len(rest) :]).rstrip(), [happened]


def said_again(text: str, start: int) -> bool:
    """Whether the sentence that introduces the call at text[start] says it runs once more."""
    line_start = text.rfind("\n", 0, start) + 1
    words = text[line_start:start].strip() or previous_line(text, line_start)
    return bool(AGAIN.search(last_sentence(words)))


def unwrapped(piece: str) -> str:
    """Text between calls without the tokens at its edges (harmony's <|channel|>commentary
    <|message|> before it, an end-of-turn token after it)."""
    head = TOKEN_RUN.match(piece)
    piece = piece[head.end() :] if head else piece
    tail = TOKENS_AT_END.search(piece[-200:])
    return (piece[: len(piece) - len(tail.group())] if tail else piece).strip()


TOKEN_RUN = Pattern(rf"(?:{TOKEN}|\s)+")


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
    blocks = [block for block in fenced_blocks(text) if block not in calls]
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


FENCE_LINE = Pattern(r"^[ \t]{0,3}(`{3,}|~{3,})([^\n]*)", re.M)


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
    fences = []
    for start, end in fenced_blocks(text):
        label = FENCE_LINE.match(text, start).group(2).strip()
        inside = [p for p in found if start < p[2] and p[3] <= end]
        if not inside:
            continue
        if CALL_LABEL.fullmatch(label) or (
            not text[:start].strip()
            and not text[end:].strip()
            and only_payloads(text, start, end, inside)
        ):
            fences.append((start, end))
    return fences


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
    joined = []
    for start, end, found in found_units:
        fence = next(((a, b) for a, b in fences if a <= start < b), None)
        if fence and joined and joined[-1][0] == fence[0]:
            joined[-1] = (fence[0], fence[1], [*joined[-1][2], *found])
        elif fence:
            joined.append((fence[0], fence[1], found))
        else:
            joined.append((start, end, found))
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
            calls, before, _ = recover_tool_calls(content, self.known, *self.quoting)
            self.show(split_thinking(before if calls else content)[1].rstrip() + "\n")

    def show(self, text: str) -> None:
        if text.startswith(self.shown) and len(text) > len(self.shown):
            print(visible(clean_text(text[len(self.shown) :])), end="", flush=True)
            self.shown = text
