"""How model families write tool calls and thinking as text, and how the agent reads them back.

When a server has no parser for a model (vLLM without --tool-call-parser, llama.cpp without --jinja,
a model newer than the Ollama or LM Studio build), the model's tool calls and its thinking arrive
as plain text in content. This file holds one table of the families the agent recognizes, each row
naming where its shape comes from, and the few functions that use it. docs/servers.md (rule 10)
lists the families and the server setting that avoids the leak.
"""

import bisect
import itertools
import json
import re
import sys

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
# (family, opening tag, closing tag, where the shape comes from). A closing tag that no opening
# tag opened ends thinking too: the template put the opening tag in the prompt (vLLM's deepseek_r1
# reasoning parser).
THINKING = [
    (
        "Qwen3, QwQ, DeepSeek-R1 and its distills, GLM, Kimi, MiniMax",
        "<think>",
        "</think>",
        "vLLM reasoning/deepseek_r1_reasoning_parser.py, qwen3_reasoning_parser.py",
    ),
    (
        "Magistral, Ministral 3",
        "[THINK]",
        "[/THINK]",
        "vLLM reasoning/mistral_reasoning_parser.py; mistral-common",
    ),
    ("Seed-OSS", "<seed:think>", "</seed:think>", "vLLM reasoning/seed_oss_reasoning_parser.py"),
    ("Command A Reasoning", "<|START_THINKING|>", "<|END_THINKING|>", "Cohere's chat template"),
]
# gpt-oss's harmony format: the analysis channel is thinking, the final channel the answer
# (openai/harmony docs/format.md; llama.cpp common/chat-parser.cpp common_chat_parse_gpt_oss). With
# special tokens stripped (a server that decodes with skip_special_tokens) the words run together:
# "analysis...assistantfinal...".
HARMONY_ANALYSIS = re.compile(
    r"\s*(?:<\|start\|>assistant)?<\|channel\|>analysis<\|message\|>(.*?)(?:<\|end\|>|$)", re.S
)
HARMONY_FINAL = re.compile(
    r"\s*(?:<\|start\|>assistant)?<\|channel\|>(?:final|commentary)(?: ?<\|constrain\|>\w+)?"
    r"<\|message\|>(.*?)(?:<\|return\|>|<\|end\|>)?\s*$",
    re.S,
)
THINKING_TAGS = (*(opening for _f, opening, _c, _s in THINKING), "<|channel|>", "<|start|>")
HARMONY_GLUED = re.compile(r"\s*analysis(.*?)assistant(?:final|(?=commentary to=))(.*)$", re.S)


def split_thinking(content: str) -> tuple[str, str]:
    """(thinking, the rest) of a reply's text, for each family in THINKING and gpt-oss's harmony
    channels; ("", content) when there is no thinking. Unclosed thinking is all thinking:
    the rest is ""."""
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
        return thinking, final.group(1)
    if glued:
        return glued.group(1), glued.group(2)
    if thinking:
        return thinking, rest
    for _family, opening, closing, _source in THINKING:
        if rest.lstrip().startswith(opening):
            inner, closed, after = rest.lstrip()[len(opening) :].partition(closing)
            return inner, response(after) if closed else ""
        before, closed, after = rest.partition(closing)
        if closed and opening not in before and ends_thinking(rest, len(before), len(closing)):
            return before, response(after)
    return "", content


def ends_thinking(text: str, at: int, length: int) -> bool:
    """Whether a closing tag that no opening tag opened, at text[at], ends thinking rather than
    being quoted: it ends its line or a tool call follows it (GLM-4.7), and it is not in code
    (fenced, `inline` or indented)."""
    after = text[at + length :]
    ends = not after.split("\n", 1)[0].strip() or after.lstrip().startswith(("<", "["))
    return ends and outside_code(text)(at)


def response(text: str) -> str:
    """The answer after thinking, without Cohere's response markers around it."""
    stripped = text.strip()
    if stripped.startswith("<|START_RESPONSE|>"):
        return stripped.removeprefix("<|START_RESPONSE|>").removesuffix("<|END_RESPONSE|>")
    return text


def no_answer(msg, thinking: str) -> str:
    """Why an empty reply is no answer, with the end of the model's reasoning if it sent any."""
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
# Each family is one row: its name, where its shape comes from, the markup that opens it, and a
# function that reads one block of it at a position of the text: (calls, where the block ends),
# or None if it is not there. A call is {"function": {"name", "arguments"}} as a server sends one;
# a call that cannot be read is None. A row with no opening markup (bare JSON, a Python list) counts
# only when it is the whole of the text.

B = "[\uff5c|]"  # DeepSeek's bars: the fullwidth U+FF5C, or an ASCII | as models also write it


def deepseek_token(*words: str) -> str:
    """A regex for one of DeepSeek's tokens: its words joined by U+2581, or by what models
    write for it."""
    return f"<{B}" + "(?:\u2581|_|\\\\_| )".join(words) + f"{B}>"


DS_BEGIN, DS_SEP, DS_END = (
    deepseek_token("tool", "call", "begin"),
    deepseek_token("tool", "sep"),
    deepseek_token("tool", "call", "end"),
)
DS_CALLS = "|".join(
    deepseek_token(*w)
    for w in (("tool", "calls", "begin"), ("tool", "calls"), ("tool", "calls", "end"))
)
# Bodies are read up to their closing tag or, where a model may leave it out, to the next opening
# tag or the end: "(?:(?!<opening).)*?" stops at the next opening, so that text with thousands of
# unclosed ones reads in one pass.
DSML = re.compile(
    rf"<{B}DSML{B}(function_calls|tool_calls)>(?P<body>.*?)(?:</{B}DSML{B}(?:function_calls|tool_calls)>|$)",
    re.S,
)
DSML_INVOKE = re.compile(
    rf'<{B}DSML{B}invoke\s+name="(?P<name>[^"]{{0,256}})"\s*>'
    rf"(?P<body>(?:(?!<{B}DSML{B}invoke).)*?)</{B}DSML{B}invoke>",
    re.S,
)
DSML_PARAMETER = re.compile(
    rf'<{B}DSML{B}parameter\s+name="(?P<name>[^"]{{0,256}})"(?P<attrs>[^>]{{0,1000}})>'
    rf"(?P<value>(?:(?!<{B}DSML{B}parameter).)*?)"
    rf"</{B}DSML{B}parameter>",
    re.S,
)
MINIMAX = re.compile(r"<minimax:tool_call>(?P<body>.*?)(?:</minimax:tool_call>|$)", re.S)
MINIMAX_INVOKE = re.compile(
    r"""<invoke\s+name=["']?(?P<name>[^"'>]{0,256})["']?\s*>(?P<body>(?:(?!<invoke).)*?)</invoke>""",
    re.S,
)
MINIMAX_PARAMETER = re.compile(
    r"""<parameter\s+name=["']?(?P<name>[^"'>]{0,256})["']?\s*>(?P<value>(?:(?!<parameter).)*?)</parameter>""",
    re.S,
)
TOOL_CALL = re.compile(r"<tool_call>\s*")
TOOL_CALL_END = re.compile(r"\s*(?:</tool_call>|$)")
XML_FUNCTION = re.compile(
    r"<function=(?P<name>[^>\n]{1,256})>(?P<body>(?:(?!<function=).)*?)(?:</function>|$)", re.S
)
# A parameter ends at its closing tag, or where the next begins or the function ends (vLLM
# qwen3coder_tool_parser.py).
XML_PARAMETER = re.compile(
    r"<parameter=(?P<name>[^>\n]{1,256})>\n?(?P<value>(?:(?!<parameter=).)*?)\n?(?:</parameter>|(?=<parameter=)|$)",
    re.S,
)
GLM = re.compile(
    r"<tool_call>\s*(?P<name>[^\s<>{}\[\]\\]{1,256})(?:\\n)*\s*(?P<body>(?:(?!<tool_call>).)*?)(?:</tool_call>|$)",
    re.S,
)
GLM_ARGUMENT = re.compile(
    r"<arg_key>(?P<name>(?:(?!<arg_key>).)*?)</arg_key>(?:\\n|\s)*<arg_value>(?P<value>(?:(?!<arg_key>).)*?)</arg_value>",
    re.S,
)
KIMI = re.compile(
    r"<\|tool_call_begin\|>\s*(?P<name>[^<]{1,256}?)\s*<\|tool_call_argument_begin\|>\s*"
)
KIMI_ARGUMENTS = re.compile(
    r"(?P<arguments>(?:(?!<\|tool_call_begin\|>).)*?)\s*(?:<\|tool_call_end\|>|$)", re.S
)
# The head only, up to the opening fence: the closing one is found with str.find, since a
# pattern for the arguments between whitespace and a fence backtracked for minutes.
DEEPSEEK_V3 = re.compile(
    rf"(?:{DS_BEGIN})?function(?:{DS_SEP}(?P<name>[^\n]{{1,256}})|<(?P<bare>[^>\n]{{1,256}})>)"
    r"\s*```(?:json)?"
)
DEEPSEEK_V3_END = re.compile(rf"\s*(?:{DS_END}|$)")
DEEPSEEK_V31 = re.compile(rf"{DS_BEGIN}(?P<name>[^<]{{0,256}}?){DS_SEP}\s*")
HARMONY = re.compile(
    r"(?:<\|start\|>assistant)?(?: to=functions\.(?P<role_to>[^<\s]{1,256}))?\s*"
    r"<\|channel\|>(?:analysis|commentary)"
    r"(?: to=functions\.(?P<to>[^<\s]{1,256}))?(?: ?(?:<\|constrain\|>)?\w+)?\s*<\|message\|>"
)
HARMONY_GLUED_CALL = re.compile(
    r"(?:assistant)?commentary to=functions\.(?P<name>[^\s<{]{1,256})\s*"
    r"(?:<\|constrain\|>)?(?:json)?\s*"
)
MISTRAL_NAME = re.compile(
    r'\s*(?P<name>[^\[\]{}\s]{1,256})\s*(?:\[CALL_ID\]\s*(?P<id>\w+)\s*)?(?:\[ARGS\])?\s*(?=[{"])'
)
BARE_NAME = re.compile(r"(?P<name>[A-Za-z_][\w.-]{0,255})\s*(?=\{)")
PYTHONIC_LINE = re.compile(r"[A-Za-z_]\w*\(.*\)")  # one call a line (OLMo 3); no re.S: one line


def json_at(text: str, at: int):
    """(the JSON value that starts at text[at], where it ends), or None."""
    try:
        return json.JSONDecoder(strict=False).raw_decode(text, at)
    except (ValueError, RecursionError):
        return None


def text_call(name, arguments) -> dict | None:
    """A recovered call shaped as a server sends one (it has no id: replies.tool_call() gives it
    one); None if its arguments are not an object, also when they come as a string (once or twice
    encoded) that holds none."""
    if isinstance(arguments, str):
        arguments = json.loads(clean_arguments(arguments)[0]) if arguments.strip() else {}
    if not isinstance(name, str) or not isinstance(arguments, dict):
        return None
    try:
        arguments = json.dumps(arguments, ensure_ascii=False)
    # a Python value JSON cannot hold ({1, 2}, b"x", 1j)
    except (TypeError, ValueError, RecursionError):
        return None
    return {"type": "function", "function": {"name": name.strip(), "arguments": arguments}}


def named_object(value) -> dict | None:
    """One call from a JSON object {"name", "arguments" or "parameters"} (Hermes, Llama,
    Mistral, xLAM). Without either, or with a JSON schema in it ("show me the tool's schema"),
    it is no call."""
    if not isinstance(value, dict) or not isinstance(value.get("name"), str):
        return None
    arguments = value.get("arguments", value.get("parameters"))
    if arguments is None or (
        isinstance(arguments, dict) and {"type", "properties"} <= set(arguments)
    ):
        return None
    return text_call(value["name"], arguments)


def only(body: str, inner: re.Pattern) -> list[re.Match] | None:
    """The inner elements of a block's body, or None if anything but whitespace stands between
    or after them: an unclosed block followed by prose ("... and then it closes the tag") is
    quoted, not a call."""
    found = list(inner.finditer(body))
    gaps = [body[a.end() : b.start()] for a, b in itertools.pairwise(found)]
    edges = [body[: found[0].start()], body[found[-1].end() :]] if found else [body]
    return found if not "".join(gaps + edges).strip() else None


def invokes(body: str, invoke: re.Pattern, parameter: re.Pattern) -> list:
    """The calls of a DSML or MiniMax block: one per invoke, a string per parameter
    (DSML marks others)."""
    calls = []
    for each in only(body, invoke) or [None]:
        parameters = only(each.group("body"), parameter) if each else None
        if parameters is None:
            return [None]
        args = {}
        for p in parameters:
            value = p.group("value")
            # DeepSeek marks a value that is not text
            if 'string="false"' in p.groupdict().get("attrs", ""):
                value = (json_at(value.strip(), 0) or [None])[0]
            args[p.group("name").strip()] = value
        calls.append(text_call(each.group("name"), args) if None not in args.values() else None)
    return calls


def read_dsml(text: str, at: int):
    block = DSML.match(text, at) or MINIMAX.match(text, at)
    if not block:
        return None
    pair = (
        (DSML_INVOKE, DSML_PARAMETER) if block.re is DSML else (MINIMAX_INVOKE, MINIMAX_PARAMETER)
    )
    return invokes(block.group("body"), *pair), block.end()


def read_tool_call(text: str, at: int):
    """<tool_call>: Hermes' JSON object, Granite 3.1's JSON list, Qwen3-coder's XML or GLM's
    arg_key pairs."""
    opening = TOOL_CALL.match(text, at)
    if not opening:
        return None
    if text.startswith("<function=", opening.end()):
        found = read_function(text, opening.end())
        close = found and TOOL_CALL_END.match(text, found[1])
        return close and (found[0], close.end())
    # read as JSON: a </tool_call> in a value is the value's
    if text.startswith(("{", "["), opening.end()):
        found = json_at(text, opening.end())
        # then the closing tag, or the end of the text
        close = found and TOOL_CALL_END.match(text, found[1])
        if not close:
            return None
        values = found[0] if isinstance(found[0], list) else [found[0]]
        return [named_object(v) for v in values] or [None], close.end()
    glm = GLM.match(text, at)
    arguments = only(glm.group("body"), GLM_ARGUMENT) if glm else None
    if arguments is None:
        return None
    args = {a.group("name").strip(): a.group("value").strip() for a in arguments}
    return [text_call(glm.group("name"), args)], glm.end()


def read_function(text: str, at: int):
    """Qwen3-coder's <function=NAME><parameter=P>V</parameter></function>, or Llama 3.1's
    <function=NAME>{json}."""
    block = XML_FUNCTION.match(text, at)
    if not block:
        return None
    body = block.group("body").strip()
    if body.startswith("{"):
        return [text_call(block.group("name"), body)], block.end()
    parameters = only(body, XML_PARAMETER)
    if parameters is None:
        return None
    return [
        text_call(
            block.group("name"), {p.group("name").strip(): p.group("value") for p in parameters}
        )
    ], block.end()


def read_kimi(text: str, at: int):
    """One Kimi K2 call: functions.NAME:INDEX, then its arguments, read as JSON where
    they are JSON."""
    call = KIMI.match(text, at)
    if not call:
        return None
    name = call.group("name").removeprefix("functions.").rsplit(":", 1)[0]  # functions.read_file:0
    found = json_at(text, call.end())
    if found:
        end = found[1] + len(text[found[1] :]) - len(text[found[1] :].lstrip())
        return [text_call(name, found[0])], end + len("<|tool_call_end|>") * text.startswith(
            "<|tool_call_end|>", end
        )
    arguments = KIMI_ARGUMENTS.match(text, call.end())
    return ([text_call(name, arguments.group("arguments"))], arguments.end()) if arguments else None


def read_deepseek(text: str, at: int):
    call = DEEPSEEK_V3.match(text, at)
    close = text.find("```", call.end()) if call else -1
    while close >= 0:  # the first closing fence that an end token or the end of the text follows
        end = DEEPSEEK_V3_END.match(text, close + 3)
        if end:
            arguments = text[call.end() : close].strip()
            return [text_call(call.group("name") or call.group("bare"), arguments)], end.end()
        close = text.find("```", close + 3)
    call = DEEPSEEK_V31.match(text, at)
    found = json_at(text, call.end()) if call else None
    if not found:
        return None
    end = re.compile(rf"\s*(?:{DS_END})?").match(text, found[1]).end()
    return [text_call(call.group("name"), found[0])], end


def read_mistral(text: str, at: int):
    """[TOOL_CALLS] then a JSON list of calls (before tokenizer v11) or NAME[CALL_ID]ID[ARGS]{json}
    (v11, v13)."""
    if not text.startswith("[TOOL_CALLS]", at):
        return None
    at += len("[TOOL_CALLS]")
    at += len(text[at:]) - len(text[at:].lstrip())
    if text.startswith("[", at):
        found = json_at(text, at)
        return (
            ([named_object(v) for v in found[0]] or [None], found[1])
            if found and isinstance(found[0], list)
            else None
        )
    named = MISTRAL_NAME.match(text, at)
    found = json_at(text, named.end()) if named else None
    return ([text_call(named.group("name"), found[0])], found[1]) if found else None


def read_harmony(text: str, at: int):
    """A gpt-oss message addressed to a tool: its recipient in the header, its arguments
    after <|message|>."""
    header = HARMONY.match(text, at) or HARMONY_GLUED_CALL.match(text, at)
    name = header and (
        header.groupdict().get("name")
        or header.groupdict().get("to")
        or header.groupdict().get("role_to")
    )
    found = json_at(text, header.end()) if name else None
    if not found:
        return None
    end = found[1] + len(text[found[1] :]) - len(text[found[1] :].lstrip())
    for stop in ("<|call|>", "<|end|>"):
        end += len(stop) if text.startswith(stop, end) else 0
    return [text_call(name, found[0])], end


def read_json(text: str, at: int):
    """Bare JSON: {"name", "parameters"} (Llama 3.x), a list of {"name", "arguments"} (Mistral
    with its tokens stripped, xLAM, Phi-4-mini, Granite 3.0), or NAME{json} (Mistral v11 with
    [TOOL_CALLS] and [ARGS] stripped)."""
    named = BARE_NAME.match(text, at)
    found = json_at(text, named.end() if named else at)
    if not found:
        return None
    if named:
        return [text_call(named.group("name"), found[0])], found[1]
    values = found[0] if isinstance(found[0], list) else [found[0]]
    return [named_object(v) for v in values] or [None], found[1]


def after_function_calls(text: str, at: int) -> bool:
    """Whether <function_calls> and only whitespace stand before text[at]."""
    opening = text.rfind("<function_calls>", max(0, at - 1000), at)  # a bounded look back
    return opening >= 0 and not text[opening + len("<function_calls>") : at].strip()


def read_pythonic(text: str, at: int):
    """[read_file(path="a.txt"), run_shell(command='ls')]: Llama 3.2 and 4, LFM2; or one call
    a line inside <function_calls> (OLMo 3). Keyword arguments with literal values only: true,
    false and null as JSON's."""
    import ast

    if text.startswith("[", at):
        end = text.rfind("]") + 1
        source = text[at:end]
    elif after_function_calls(text, at):
        close = text.find("</function_calls>", at)
        end = len(text) if close < 0 else close
        lines = [line.strip() for line in text[at:end].split("\n") if line.strip()]
        if not lines or not all(PYTHONIC_LINE.fullmatch(line) for line in lines):
            return None
        source = "[" + ",".join(lines) + "]"
    else:
        return None
    try:
        tree = ast.parse(source.strip(), mode="eval").body
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return None
    if not isinstance(tree, ast.List) or not all(
        isinstance(c, ast.Call) and isinstance(c.func, ast.Name) for c in tree.elts
    ):
        return None
    calls = []
    for call in tree.elts:
        try:
            args = {k.arg: literal(k.value) for k in call.keywords if k.arg}
        except (ValueError, TypeError, SyntaxError, RecursionError, MemoryError):
            return [None], end
        calls.append(text_call(call.func.id, args) if not call.args else None)
    return calls or [None], end


def literal(node):
    """A Python literal's value; true, false and null as JSON's (OLMo 3 writes them so)."""
    import ast

    json_names = {"true": True, "false": False, "null": None}
    if isinstance(node, ast.Name) and node.id in json_names:
        return json_names[node.id]
    return ast.literal_eval(node)


# (family, where its shape comes from, the markup that opens it, its reader). A reader also reads a
# bare block (no opening markup) at the start of the text or after an ANNOUNCING token.
FAMILIES = [
    (
        "DeepSeek V3.2 DSML",
        "DeepSeek's API; vLLM tool_parsers/deepseekv32_tool_parser.py",
        rf"<{B}DSML{B}(?:function_calls|tool_calls)>",
        read_dsml,
    ),
    (
        "MiniMax-M2",
        "vLLM tool_parsers/minimax_m2_tool_parser.py",
        r"<minimax:tool_call>",
        read_dsml,
    ),
    (
        "Hermes, Qwen2.5, Qwen3 (JSON); Qwen3-Coder (XML); GLM-4.5, 4.6, 4.7 (arg_key); "
        "Granite 3.1 (list)",
        "vLLM tool_parsers/hermes_tool_parser.py, qwen3coder_tool_parser.py, "
        "glm4_moe_tool_parser.py, glm47_moe_tool_parser.py, granite_tool_parser.py",
        r"<tool_call>",
        read_tool_call,
    ),
    (
        "Qwen3-Coder without its wrapper; Llama 3.1's <function=NAME>{json}",
        "vLLM tool_parsers/qwen3coder_tool_parser.py; Meta's Llama 3.1 prompt format",
        r"<function=[^>\n]{1,256}>",
        read_function,
    ),
    (
        "Kimi K2",
        "vLLM tool_parsers/kimi_k2_tool_parser.py; MoonshotAI/Kimi-K2 docs/tool_call_guidance.md",
        r"<\|tool_calls?_section_begin\|>|<\|tool_call_begin\|>",
        read_kimi,
    ),
    (
        "DeepSeek V3, R1 and V3.1",
        "vLLM tool_parsers/deepseekv3_tool_parser.py, deepseekv31_tool_parser.py; "
        "llama.cpp common/chat-parser.cpp common_chat_parse_deepseek_r1",
        rf"{DS_CALLS}|{DS_BEGIN}",
        read_deepseek,
    ),
    (
        "Mistral, Mixtral, Nemo, Small, Magistral, Devstral",
        "vLLM tool_parsers/mistral_tool_parser.py; mistral-common tokens/tokenizers/instruct.py",
        r"\[TOOL_CALLS\]",
        read_mistral,
    ),
    (
        "gpt-oss (harmony)",
        "openai/harmony docs/format.md; llama.cpp common_chat_parse_gpt_oss",
        r"<\|start\|>assistant to=|<\|start\|>assistant<\|channel\|>|"
        r"<\|channel\|>(?:commentary|analysis) to=",
        read_harmony,
    ),
    (
        "Llama 3.x JSON; Granite 3.0; Mistral, xLAM and Phi-4-mini with their tokens stripped",
        "vLLM tool_parsers/llama_tool_parser.py, granite_tool_parser.py, mistral_tool_parser.py, "
        "xlam_tool_parser.py, phi4mini_tool_parser.py",
        r"<\|python_tag\|>|functools(?=\[)|<\|tool_call\|>",
        read_json,
    ),
    (
        "Llama 3.2 and 4 pythonic, OLMo 3, LFM2",
        "vLLM tool_parsers/pythonic_tool_parser.py, llama4_pythonic_tool_parser.py",
        r"<\|python_start\|>|<function_calls>|<\|tool_call_start\|>",
        read_pythonic,
    ),
]
OPENINGS = [(family, re.compile(opening), reader) for family, _source, opening, reader in FAMILIES]
OPENING = re.compile("|".join(f"(?:{opening})" for _f, _s, opening, _r in FAMILIES))
# Tokens that wrap or end calls, read past between and after them (Kimi's and DeepSeek's section
# ends, the end-of-turn tokens a server that did not stop on them leaves in, Llama's separators
# between JSON calls).
ANNOUNCING = (
    r"<\|python_tag\|>|<\|python_start\|>|<function_calls>|<\|tool_call_start\|>|functools(?=\[)|"
    r"<\|tool_call\|>"
)
END_OF_SENTENCE = deepseek_token("end", "of", "sentence")
BETWEEN = re.compile(
    rf"(?:\s|;|<\|tool_calls?_section_(?:begin|end)\|>|{DS_CALLS}|{END_OF_SENTENCE}|<\|im_end\|>|<\|eot_id\|>|"
    r"<\|eom_id\|>|</s>|<\|python_end\|>|<\|observation\|>|<\|user\|>|<\|call\|>|<\|end\|>|<\|return\|>|"
    rf"</function_calls>|<\|tool_call_end\|>|{ANNOUNCING})+"
)
FENCE_LINE = re.compile(r"^[ \t]*(```|~~~)", re.M)
INLINE_CODE = re.compile(r"`[^`\n]+`")
# Words that introduce a quoted example rather than a call: "a call looks like this:".
QUOTING = re.compile(
    r"\b(?:example|like this|looks? like|format|for instance|e\.g\.|such as|syntax|written|"
    r"writes?|emits?|would)\b",
    re.I,
)


def recover_tool_calls(content: str, known) -> tuple[list, str, list[str]]:
    """Tool calls a model wrote as text in content, when the server sent no tool_calls.

    Returns (calls, the content before them, what happened); ([], content, []) when there are none.
    Markup counts only where a leaked call stands: after the thinking, outside code (``` or ~~~
    fences, `inline`, indented), not after a colon that introduces it, with nothing but more calls
    after it, every call naming a known tool with arguments that parse. An answer that explains or
    quotes a tool call is an answer."""
    rest = split_thinking(content)[1]
    offset = len(content) - len(rest) if content.endswith(rest) else None
    if offset is None or not rest.strip():  # harmony's final channel: no calls in it
        return [], content, []
    starts = [len(rest) - len(rest.lstrip())]  # a bare row counts only when it is the whole text
    opening = first_opening(rest)
    if opening is not None and opening != starts[0] and not quoted(rest, opening):
        starts.append(opening)
    for start in starts:
        calls, family = read_calls(rest, start, known, bare=start == starts[0])
        if calls:
            names = ", ".join(c["function"]["name"] for c in calls)
            happened = (
                f"the model wrote {len(calls)} tool call(s) as {family} text ({names}): "
                "run as real calls; "
                + (
                    "DeepSeek's API sometimes does this, nothing to set"
                    if "DSML" in family
                    else SERVER_FIX
                )
            )
            return calls, content[: offset + start].rstrip(), [happened]
    return [], content, []


def quoted(text: str, at: int) -> bool:
    """Whether markup at text[at], after some text, is quoted rather than a call: thinking that did
    not start the reply stands before it, or a colon after words that introduce an example ("a call
    looks like this:"). After "Let me look:" it is a call: real leaks often follow such a line."""
    before = text[:at]
    if any(tag in before for tag in THINKING_TAGS):
        return True
    sentence = before.rstrip().rsplit("\n", 1)[-1]
    return sentence.endswith(":") and bool(QUOTING.search(sentence))


SERVER_FIX = (
    "the server did not parse them: start llama.cpp with --jinja, vLLM with "
    "--enable-auto-tool-choice --tool-call-parser for the model (docs/servers.md)"
)


def read_calls(text: str, at: int, known, bare: bool) -> tuple[list, str]:
    """The calls in text[at:] if it is nothing but tool-call markup, and the first one's family;
    ([], "") if anything else is there, or any call is bad or names no known tool. Markup inside
    a block is its text."""
    calls, family = [], ""
    while True:
        between = BETWEEN.match(text, at)
        at = between.end() if between else at
        # <|python_tag|>{
        bare = bare or bool(between and re.search(ANNOUNCING, text[between.start() : at + 1]))
        if at >= len(text):
            break
        for name, opening, reader in OPENINGS:
            found = reader(text, at) if bare or opening.match(text, at) else None
            if found:
                calls, family, at = calls + found[0], family or name, max(found[1], at + 1)
                break
        else:
            return [], ""
    for call in calls:
        if call:
            call["function"]["name"] = tool_name(call["function"]["name"], known)
    if not calls or any(c is None or c["function"]["name"] not in known for c in calls):
        return [], ""
    return calls, family


def first_opening(text: str) -> int | None:
    """Where the first tool-call markup stands outside code and quotes (outside_code())."""
    outside = outside_code(text)
    return next((m.start() for m in OPENING.finditer(text) if outside(m.start())), None)


def outside_code(text: str):
    """A test of a position in text: whether it is outside fenced blocks (``` or ~~~), `inline`
    code, and lines indented as code or quoted with >. The fences, spans and line starts are found
    once, and each position is looked up in them by bisection: a reply of thousands of spans or
    openers is read in one pass."""
    # an even number before a position: not in a block
    fences = [m.start() for m in FENCE_LINE.finditer(text)]
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
        return (
            bisect.bisect(fences, at) % 2 == 0
            and not INDENTED.match(text, line)
            and not (span >= 0 and at < spans[span][1])
        )

    return outside


NEWLINE = re.compile("\n")
INDENTED = re.compile(r"    |\t|[ \t]*>")  # a Markdown code block's indent, or a quote


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

    def __init__(self, known):
        self.known, self.pieces, self.size, self.read, self.shown = known, [], 0, 0, ""
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
            opening = first_opening(rest)
            self.show(rest[: rest.rfind("\n", 0, len(rest) if opening is None else opening) + 1])

    def end(self, content: str) -> None:
        if self.live:
            calls, before, _ = recover_tool_calls(content, self.known)
            self.show(split_thinking(before if calls else content)[1].rstrip() + "\n")

    def show(self, text: str) -> None:
        if text.startswith(self.shown) and len(text) > len(self.shown):
            print(visible(clean_text(text[len(self.shown) :])), end="", flush=True)
            self.shown = text
