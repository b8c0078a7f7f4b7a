"""What real servers and models send, and how the agent copes with it.

agent.py is written for the protocol as documented; this file holds what real servers
need on top of it, each piece with the server or model that needs it named. A learner can
skip it at first. The rules the agent keeps are listed, numbered, in the README section
"What real servers need".

The openai package is imported inside the functions that use it, so that --help, --show
and a usage error start without loading it.
"""

import bisect
import ipaddress
import itertools
import json
import re
import sys
import time
from types import SimpleNamespace
from urllib.parse import urlsplit

from tools import blank, visible

try:  # the HTTP library the openai package is built on: httpx2 from openai 3 on, httpx before
    from httpx2 import SyncByteStream
except ImportError:  # pragma: no cover
    from httpx import SyncByteStream

RETIRED_MODELS = ("deepseek-chat", "deepseek-reasoner")  # answer HTTP 400 since July 2026
PROMPT_CUT = (
    "the server counted fewer prompt tokens than on the step before, though the conversation only grew: "
    "it is cutting the start of the prompt (system prompt and task first). Give the model a larger "
    "context window (Ollama: OLLAMA_CONTEXT_LENGTH=32768 ollama serve, or num_ctx in a Modelfile)."
)


# --- The client: a time limit for the whole of one request ---------------------------------------


def make_client(base_url: str, api_key: str, timeout: float):
    """An openai.OpenAI whose every request, body and stream included, ends within timeout seconds.

    The SDK's own timeout bounds each read, not the whole: a body that trickles in one byte a second,
    or a stream that never ends, would hold the terminal for ever. The SDK retries a timed-out read twice."""
    import openai

    def limit(response) -> None:  # runs when the headers have arrived, before the body is read
        response.stream = Deadline(response.stream, response.request.extensions["started"] + timeout, response)

    def stamp(request) -> None:
        request.extensions["started"] = time.monotonic()

    http_client = openai.DefaultHttpxClient(event_hooks={"request": [stamp], "response": [limit]})
    # A local server needs no key, but the SDK must get one: given None it would send OPENAI_API_KEY.
    return openai.OpenAI(base_url=base_url, api_key=api_key or "no-key", timeout=timeout, http_client=http_client)


class Deadline(SyncByteStream):
    """A response body that raises the SDK's APITimeoutError once its deadline has passed."""

    def __init__(self, stream, deadline: float, response):
        self.stream, self.deadline, self.response = stream, deadline, response

    def __iter__(self):
        import openai

        for chunk in self.stream:
            if time.monotonic() > self.deadline:
                raise openai.APITimeoutError(request=self.response.request)
            yield chunk

    def close(self) -> None:
        self.stream.close()


def is_loopback(url: str) -> bool:
    """Whether url names this machine (a local Ollama, llama.cpp or vLLM needs no key)."""
    host = urlsplit(url).hostname or ""
    try:
        return host == "localhost" or ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


# --- Streams: one reply rebuilt from its fragments -----------------------------------------------


def collect_stream(stream, model: str):
    """Read a streamed reply, printing its text as it comes, and rebuild it as one ChatCompletion."""
    show = visible if sys.stdout.isatty() else str  # on a terminal, escape sequences are shown, not obeyed
    if hasattr(stream, "choices"):  # a replay answers whole, streamed or not: print it as a stream would
        print(show(stream.choices[0].message.content or ""), flush=True)
        return stream
    message = {"role": "assistant", "content": "", "tool_calls": []}
    at_index, finish_reason, usage = {}, "incomplete_stream", None  # a stream that never says why it ended was cut
    held = ""  # the first half of a surrogate pair whose second half is in the next chunk
    for chunk in stream:
        usage = chunk.usage or usage
        if not chunk.choices:  # the usage chunk at the end has no choices
            continue
        delta = chunk.choices[0].delta
        if delta.content:
            message["content"] += delta.content
            text, held = held + delta.content, ""
            if "\ud800" <= text[-1] <= "\udbff":
                text, held = text[:-1], text[-1]
            print(show(clean_text(text)), end="", flush=True)
        if "reasoning_content" in (delta.model_extra or {}):  # DeepSeek needs it back; see assistant_message()
            message["reasoning_content"] = message.get("reasoning_content", "") + (delta.reasoning_content or "")
        for piece in delta.tool_calls or []:
            add_fragment(message["tool_calls"], at_index, piece)
        finish_reason = chunk.choices[0].finish_reason or finish_reason
    if message["content"]:
        print(flush=True)
    return completion(message, finish_reason, usage, model)


def add_fragment(calls: list[dict], at_index: dict, piece) -> None:
    """Add one streamed tool-call fragment: the first at an index brings id, type and name, the rest arguments."""
    call = at_index.get(piece.index or 0)
    if call is None or (piece.id and call["id"] and piece.id != call["id"]):  # Ollama: a new id at the same index
        call = {"id": piece.id, "type": piece.type or "function", "function": {"name": "", "arguments": ""}}
        at_index[piece.index or 0] = call
        calls.append(call)
    if piece.function and piece.function.name and not call["function"]["name"]:
        call["function"]["name"] = piece.function.name
    if piece.function and piece.function.arguments:
        call["function"]["arguments"] += piece.function.arguments


def completion(message: dict, finish_reason: str | None, usage, model: str):
    """A ChatCompletion built as the SDK builds a live reply (model_construct: DeepSeek's finish reasons pass)."""
    from openai.types.chat import ChatCompletion

    choices = [{"index": 0, "message": message, "finish_reason": finish_reason}]
    return ChatCompletion.model_construct(
        id="local", object="chat.completion", created=0, model=model, usage=usage, choices=choices
    )


# --- Arguments as models write them --------------------------------------------------------------

FENCE = re.compile(r"^\s*```[\w-]*\s*\n(.*?)\n?\s*```\s*$", re.S)  # ```json ... ``` around the whole


def reply_problem(resp) -> str | None:
    """What makes a reply unusable as a chat completion ("no choices", ...), or None if nothing does."""
    choices = getattr(resp, "choices", None)
    if not isinstance(choices, list) or not choices:
        return "no choices"
    message = getattr(choices[0], "message", None)
    if not hasattr(message, "content"):
        return "no message in its first choice"
    if not isinstance(getattr(message, "tool_calls", None) or [], list):
        return "tool_calls that are not a list"
    if not isinstance(getattr(choices[0], "finish_reason", None) or "", str):
        return "a finish_reason that is not a string"
    return None


def clean_text(value) -> str:
    """A string the server sent as valid Unicode ("" for anything else): a surrogate pair split across two
    stream chunks is joined, a lone surrogate becomes U+FFFD. Neither can be written as UTF-8. Content sent
    as a list of parts (OpenAI's content array) is their text, joined."""
    if isinstance(value, list):
        value = "".join(p["text"] for p in value if isinstance(p, dict) and isinstance(p.get("text"), str))
    if not isinstance(value, str):
        return ""
    return value.encode("utf-16", "surrogatepass").decode("utf-16", "replace")


def clean_arguments(raw) -> tuple[str, str | None]:
    """A tool call's arguments as valid JSON text to send back, and what was repaired (None if nothing).

    Valid JSON is kept byte for byte, so that every later request begins with the same bytes (rule 7).
    Arguments a model wrote sloppily but unambiguously are re-encoded once, here. What cannot be read is
    kept as a JSON string, for llama.cpp's --jinja server parses earlier calls' arguments and answers 500
    on invalid JSON; call_tool() then tells the model what it sent."""
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
        return (json.dumps(args, ensure_ascii=False), how) if args is not None else (json.dumps(raw), None)
    if isinstance(value, str):  # encoded twice: a JSON string holding the object, or holding anything
        args, _ = parse_sloppy(value)
        return (json.dumps(args, ensure_ascii=False), "arguments encoded twice") if args is not None else (raw, None)
    return raw, None


def parse_sloppy(text: str) -> tuple[dict | None, str | None]:
    """A JSON object as small models write it, and how it was read; (None, None) if it is not one."""
    fenced = FENCE.match(text)
    attempts = [(text, True, None), (text, False, "raw control characters (a newline or tab) inside a JSON string")]
    if fenced:
        attempts += [
            (fenced.group(1), strict, "arguments wrapped in a Markdown code fence") for strict in (True, False)
        ]
    for candidate, strict, how in attempts:
        try:
            value = json.loads(candidate, strict=strict)
        except (ValueError, RecursionError):
            continue
        if isinstance(value, dict):
            return value, how
    return None, None


# --- Tool calls written as text ------------------------------------------------------------------

# DeepSeek's DSML, wrapped in function_calls or tool_calls, with the fullwidth bar U+FF5C or an ASCII |.
BAR = "[\uff5c|]"
DSML_BLOCK = re.compile(
    rf"<{BAR}DSML{BAR}(function_calls|tool_calls)>(?P<body>.*?)</{BAR}DSML{BAR}(?:function_calls|tool_calls)>", re.S
)
DSML_INVOKE = re.compile(
    rf'<{BAR}DSML{BAR}invoke\s+name="(?P<name>[^"]*)"\s*>(?P<body>.*?)</{BAR}DSML{BAR}invoke>', re.S
)
DSML_PARAMETER = re.compile(
    rf'<{BAR}DSML{BAR}parameter\s+name="(?P<name>[^"]*)"(?P<attrs>[^>]*)>(?P<value>.*?)</{BAR}DSML{BAR}parameter>', re.S
)
# Hermes and Qwen: <tool_call>{"name": ..., "arguments": {...}}</tool_call>, or Qwen3-coder's XML inside it.
TOOL_CALL_BLOCK = re.compile(r"<tool_call>(?P<body>.*?)</tool_call>", re.S)
XML_FUNCTION = re.compile(r"^\s*<function=(?P<name>[^>\s]+)>(?P<body>.*?)</function>\s*$", re.S)
XML_PARAMETER = re.compile(r"<parameter=(?P<name>[^>\s]+)>\n?(?P<value>.*?)\n?</parameter>", re.S)
OPENING = re.compile(rf"^(<{BAR}DSML{BAR}(?:function_calls|tool_calls)>|<tool_call>)", re.M)  # not indented
FENCE_LINE = re.compile(r"^[ \t]*(```|~~~)", re.M)
SERVER_FIX = {
    "DSML": "DeepSeek's API sometimes does this; nothing to set, the agent recovers the calls",
    "tool_call": "the server did not parse the model's tool calls: start llama.cpp with --jinja, "
    "vLLM with --enable-auto-tool-choice --tool-call-parser hermes (qwen3_coder for Qwen3-Coder)",
}


def recover_tool_calls(content: str, known) -> tuple[list, str, list[str]]:
    """Tool calls a model wrote as text in content, when the server sent no tool_calls.

    Returns (calls, the text before them, what happened); ([], content, []) when there are none. Markup counts
    only where a leaked call stands: at the start of a line, outside a code block (``` or ~~~ fences, or
    indented), not after a colon that introduces it, with nothing but more calls after it, every call naming a
    known tool with arguments that parse. An answer that explains or quotes a tool call is an answer."""
    start = first_opening(content)
    if start is None or content[:start].rstrip().endswith(":"):  # "a call looks like this:" quotes one
        return [], content, []
    calls = parse_markup(content[start:], known)
    if not calls:
        return [], content, []
    kind = "DSML" if "DSML" in content[start : start + 20] else "tool_call"
    names = ", ".join(c.function.name for c in calls)
    happened = (
        f"the model wrote {len(calls)} tool call(s) as {kind} text ({names}): run as real calls; {SERVER_FIX[kind]}"
    )
    return calls, content[:start].rstrip(), [happened]


def first_opening(content: str) -> int | None:
    """Where the first tool-call markup starts a line outside a fenced block; None if nowhere."""
    fences = [m.start() for m in FENCE_LINE.finditer(content)]
    for match in OPENING.finditer(content):
        if bisect.bisect(fences, match.start()) % 2 == 0:  # an even number of fences before: not in a block
            return match.start()
    return None


def parse_markup(text: str, known) -> list:
    """The calls in text that is nothing but tool-call blocks, in order; [] if anything else is there or any
    call is bad. Markup inside a block (a <tool_call> in a DSML parameter) is that block's text."""
    calls, at = [], 0
    while at < len(text.rstrip()):
        at = len(text) - len(text[at:].lstrip())
        block = DSML_BLOCK.match(text, at) or TOOL_CALL_BLOCK.match(text, at)
        if not block:
            return []
        calls += parse_dsml(block.group("body")) if block.re is DSML_BLOCK else parse_tool_call(block.group("body"))
        at = block.end()
    if not calls or any(c is None or c.function.name not in known for c in calls):
        return []
    return calls


def parse_dsml(body: str) -> list:
    """The invokes of one DSML block, as tool calls; None for one whose arguments cannot be read."""
    calls = []
    for invoke in DSML_INVOKE.finditer(body):
        args = {}
        for parameter in DSML_PARAMETER.finditer(invoke.group("body")):
            value = parameter.group("value")
            if 'string="false"' in parameter.group("attrs"):  # DeepSeek marks non-string values so
                try:
                    value = json.loads(value)
                except ValueError:
                    return [None]
            args[parameter.group("name")] = value
        calls.append(text_call(invoke.group("name"), args))
    return calls or [None]


def parse_tool_call(body: str) -> list:
    """One <tool_call> block, JSON (Hermes, Qwen) or XML (Qwen3-coder), as a tool call; None if unreadable."""
    xml = XML_FUNCTION.match(body)
    if xml:
        args = {p.group("name"): p.group("value") for p in XML_PARAMETER.finditer(xml.group("body"))}
        return [text_call(xml.group("name"), args)]
    value, _ = parse_sloppy(body.strip())
    if value is None or not isinstance(value.get("name"), str):
        return [None]
    args = value.get("arguments", value.get("parameters", {}))
    if isinstance(args, str):
        args, _ = parse_sloppy(args) if args.strip() else ({}, None)
    return [text_call(value["name"], args)] if isinstance(args, dict) else [None]


def text_call(name: str, args: dict):
    """A recovered call shaped like the SDK's tool call; it has no id, so tool_call() gives it one."""
    function = SimpleNamespace(name=name.strip(), arguments=json.dumps(args, ensure_ascii=False))
    return SimpleNamespace(id=None, type="function", function=function)


# --- Tokens: what each provider reports ----------------------------------------------------------


def usage_of(resp) -> dict | None:
    """The reply's usage as the server sent it, or None if it sent none (or something else)."""
    # warnings=False: pydantic would print a warning for each field of the wrong type.
    return resp.usage.model_dump(exclude_none=True, warnings=False) if hasattr(resp.usage, "model_dump") else None


def count_tokens(usage: dict | None) -> dict:
    """Prompt, cached prompt and completion tokens from a usage dict, 0 where not reported as a number."""
    usage = usage if isinstance(usage, dict) else {}  # a transcript written by hand may hold anything
    details = usage.get("prompt_tokens_details")
    # DeepSeek reports cache hits as prompt_cache_hit_tokens, OpenAI as prompt_tokens_details.cached_tokens.
    cached = usage.get("prompt_cache_hit_tokens") or (details.get("cached_tokens") if isinstance(details, dict) else 0)
    counts = {"prompt": usage.get("prompt_tokens"), "cached": cached, "completion": usage.get("completion_tokens")}
    return {key: value if isinstance(value, int) else 0 for key, value in counts.items()}


def total_tokens(used: list[dict]) -> dict:
    """The sum of several count_tokens() results."""
    return {key: sum(counts[key] for counts in used) for key in ("prompt", "cached", "completion")}


def prompt_first_cut(used: list[dict]) -> bool:
    """Whether the last step is the first whose prompt was smaller than the step's before: the conversation only
    grows, so a server that counts fewer prompt tokens has cut the prompt (Ollama keeps only its window's end)."""
    cuts = [0 < after["prompt"] < before["prompt"] for before, after in itertools.pairwise(used)]
    return bool(cuts) and cuts[-1] and not any(cuts[:-1])


def describe_tokens(counts: dict) -> str:
    return f"{counts['prompt']} prompt tokens ({counts['cached']} cached), {counts['completion']} completion tokens"


# --- Errors: one or two lines the person can act on ----------------------------------------------

CONTEXT_FULL = re.compile(r"context length|context window|context size|too many tokens|prompt is too long", re.I)


def explain(error: Exception, base_url: str, model: str) -> str:
    """One or two lines about a failed request: what happened, the server's words, what to check."""
    import openai

    detail = server_message(error)
    if isinstance(error, openai.APITimeoutError):
        return f"the request to {base_url} timed out (AGENT_TIMEOUT). Check that the server is up and not overloaded."
    if isinstance(error, openai.APIConnectionError):
        cause = blank(str(error.__cause__ or error))
        return f"could not reach {base_url}: {cause}. Check AGENT_BASE_URL and your network, or start the server."
    if isinstance(error, ValueError):  # not JSON, or not UTF-8
        return f"the server's reply is not a chat completion ({detail}). Is AGENT_BASE_URL an OpenAI-compatible API?"
    if isinstance(error, RecursionError):
        return "the server's reply is nested too deep to read. Is AGENT_BASE_URL the server you meant?"
    status = getattr(error, "status_code", "?")
    hint = {
        401: "Check AGENT_API_KEY (or DEEPSEEK_API_KEY) in your environment or .env.",
        402: "Check your balance with the provider.",
        403: "Check that your key may use this model.",
        404: "Check AGENT_BASE_URL (many servers want it to end in /v1) and AGENT_MODEL.",
        429: "The provider is rate limiting you or your balance is empty; wait, or check your account.",
    }.get(status, "Check AGENT_MODEL and AGENT_BASE_URL." if status == 400 else "Try again later.")
    if status in (400, 413) and CONTEXT_FULL.search(detail):
        hint = (
            "The conversation is longer than the model's context window: start a new one (without --resume), "
            "or lower AGENT_MAX_OUTPUT so that tool results take less of it."
        )
    elif status in (400, 404) and model in detail:
        hint = f"The server does not accept the model {model!r}; check AGENT_MODEL."
        if model in RETIRED_MODELS:
            hint += " deepseek-chat and deepseek-reasoner were retired in July 2026: use deepseek-flash."
    return f"the server answered HTTP {status}: {detail}\n{hint}"


def server_message(error: Exception) -> str:
    """The server's own error text, one line, with the key blanked out before it is cut."""
    body = getattr(error, "body", None)
    if isinstance(body, dict):
        body = body.get("error", body)
    text = body.get("message", body) if isinstance(body, dict) else body or str(error)
    return shorten(blank(str(text)), 400)


def shorten(text: str, limit: int) -> str:
    """One line of at most limit characters."""
    text = " ".join(str(text).split())
    return text if len(text) <= limit else text[: limit - 1] + "…"
