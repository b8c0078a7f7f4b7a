"""A minimal agent: a model, three tools and a loop.

    task ─► messages ─► model ─► reply has tool calls? ──no──► final answer
                ▲                        │ yes
                └── one tool message ◄───┘ run each call (read_file, write_file, run_shell)
                    per call

Read run() first: it is the whole idea. Everything else is plumbing around it.
Usage: python agent.py "task"   (python agent.py --help for options)
"""

import argparse
import ipaddress
import json
import sys
import time
import uuid
from datetime import datetime, timezone
from pathlib import Path
from types import SimpleNamespace
from urllib.parse import urlsplit

import openai
from openai.types.chat import ChatCompletion

import config
import tools
from tools import TOOL_MAP, TOOLS

# Settings. Flags given on the command line replace them in main().
MODEL = config.MODEL
BASE_URL = config.BASE_URL
MAX_STEPS = 20  # model requests per task
TRACE = False  # --trace: print each request and raw response on stderr
STREAM_OPTIONS = {}  # --stream makes it {"stream": True, "stream_options": {"include_usage": True}}
# Fixed for the whole run (no date, no counters): providers cache a repeated prefix.
SYSTEM_PROMPT = (
    "You are a careful assistant working in a folder on the user's computer. "
    "Use the tools to read files, write files and run shell commands there; "
    "file paths are relative to that folder. Check your work, then answer briefly."
)
# finish_reason values that end the run without an answer, and what to tell the person.
STOP_REASONS = {
    "length": "the reply was cut off at the output token limit; its tool calls were not run",
    "content_filter": "the provider's content filter stopped the reply",
    "insufficient_system_resource": "the provider is out of capacity for now; try again later",
    "incomplete_stream": "the stream ended before the reply was complete; its tool calls were not run",
}
RETIRED_MODELS = ("deepseek-chat", "deepseek-reasoner")  # answer HTTP 400 since July 2026

client = None  # an openai.OpenAI made in main() once the flags are read, or a replay of a transcript
transcript = None  # the open JSONL file each event is appended to
tokens = {"prompt": 0, "cached": 0, "completion": 0}  # totals over the run


def run(task: str, messages: list[dict] | None = None) -> str | None:
    """Work on task until the model answers. Return the answer, or None if stopped."""
    if messages is None:
        messages = [{"role": "system", "content": SYSTEM_PROMPT}]
    messages.append({"role": "user", "content": task})
    record("user/message", content=task)
    for step in range(1, MAX_STEPS + 1):
        started = time.monotonic()
        if TRACE:
            trace_request(messages)
        resp = client.chat.completions.create(model=MODEL, messages=messages, tools=TOOLS, **STREAM_OPTIONS)
        if isinstance(resp, openai.Stream):
            resp = collect_stream(resp)
        if not getattr(resp, "choices", None):
            raise BadReply(f"the server sent a reply with no choices: {shorten(str(resp), 300)}")
        if TRACE:
            say(f"── response (raw JSON)\n{resp.model_dump_json(indent=2)}")
        msg = resp.choices[0].message
        finish_reason = resp.choices[0].finish_reason
        messages.append(assistant_message(msg, messages))
        latency_ms = round((time.monotonic() - started) * 1000)
        record(
            "assistant/message",
            message=messages[-1],
            finish_reason=finish_reason,
            usage=dump(resp.usage),
            latency_ms=latency_ms,
        )
        report_step(step, messages[-1], resp.usage, latency_ms)

        calls = messages[-1].get("tool_calls", [])
        if finish_reason in STOP_REASONS:
            # The arguments may be cut off mid-way: answer each call without running it.
            answer_pending(messages, f"not run: {STOP_REASONS[finish_reason]}")
            return stop(finish_reason, STOP_REASONS[finish_reason])
        if not calls:
            record("turn/end", status="answered")
            return messages[-1]["content"]
        for call in calls:
            name = call["function"]["name"]
            say(f"  → {name}({shorten(call['function']['arguments'], 120)})")
            result, ok = call_tool(name, call["function"]["arguments"])
            say(f"  {'←' if ok else '✗'} {shorten(result, 160)}")
            messages.append({"role": "tool", "tool_call_id": call["id"], "content": result})
            record("tool/result", call_id=call["id"], name=name, content=result, ok=ok)
    return stop("max_steps", f"reached MAX_STEPS ({MAX_STEPS}) without an answer; raise it with --max-steps")


class BadReply(Exception):
    """The server answered 200 with something that is not a chat completion."""


# What a failed request raises. The SDK lets a body that is not JSON through as a JSONDecodeError.
REQUEST_ERRORS = (openai.APIError, BadReply, json.JSONDecodeError)


def assistant_message(msg, messages: list[dict]) -> dict:
    """The reply as an explicit dict that every server accepts back."""
    # content is never null: Ollama's and Mistral's templates reject a null content.
    message = {"role": "assistant", "content": msg.content if isinstance(msg.content, str) else ""}
    extra = msg.model_extra or {}
    if "reasoning_content" in extra:
        # DeepSeek's thinking mode answers 400 on later requests if this is not sent back.
        message["reasoning_content"] = extra["reasoning_content"] or ""
    if msg.tool_calls:
        used = {c["id"] for m in messages for c in m.get("tool_calls", [])}
        message["tool_calls"] = [tool_call(c, used) for c in msg.tool_calls]
    return message


def tool_call(call, used: set[str]) -> dict:
    """One tool call with a unique id and its arguments as a JSON string."""
    call_id = call.id if isinstance(call.id, str) and call.id.strip() and call.id not in used else ""
    if not call_id:  # some local servers send no id, or the same id every time
        call_id = f"call_{uuid.uuid4().hex[:24]}"
    used.add(call_id)
    function = getattr(call, "function", None)  # None for a non-function ("custom") tool call
    name = getattr(function, "name", None)
    arguments = getattr(function, "arguments", None)
    if isinstance(arguments, (dict, list)):  # some servers send an object, not a string
        arguments = json.dumps(arguments, ensure_ascii=False)
    if not isinstance(arguments, str) or not arguments.strip():
        arguments = "{}"
    return {
        "id": call_id,
        "type": "function",
        "function": {"name": name.strip() if isinstance(name, str) else "", "arguments": arguments},
    }


def call_tool(name: str, arguments: str) -> tuple[str, bool]:
    """Run one tool call. Return (result, ok); every failure is a result the model can read."""
    if name not in TOOL_MAP:
        return f"error: unknown tool {name!r}; the tools are {', '.join(TOOL_MAP)}", False
    try:
        args = json.loads(arguments)
        if isinstance(args, str):  # arguments encoded twice: a JSON string holding the object
            args = json.loads(args)
    except json.JSONDecodeError as e:
        return f"error: arguments are not valid JSON ({e.msg}): {shorten(arguments, 200)}", False
    if not isinstance(args, dict):
        return f"error: arguments must be a JSON object, not {type(args).__name__}", False
    expected = tools.parameters(name)
    missing = [p for p in expected if p not in args]
    unexpected = [p for p in args if p not in expected]
    if missing or unexpected:
        return (
            f"error: {name} takes {', '.join(expected)}; "
            f"missing: {', '.join(missing) or 'none'}; unexpected: {', '.join(unexpected) or 'none'}"
        ), False
    try:
        result = TOOL_MAP[name](**args)
    except tools.ToolError as e:
        return tools.clip(f"error: {e}"), False
    except Exception as e:  # noqa: BLE001 -- a bug or an OS error in a tool is news for the model, not a crash
        return f"error: {type(e).__name__}: {e}", False
    return tools.clip(result), True


def answer_pending(messages: list[dict], reason: str) -> None:
    """Answer each call of the last reply that has no tool message yet, so the history stays valid."""
    last = next((m for m in reversed(messages) if m["role"] == "assistant"), {})
    answered = {m["tool_call_id"] for m in messages if m["role"] == "tool"}
    for call in last.get("tool_calls", []):
        if call["id"] not in answered:
            messages.append({"role": "tool", "tool_call_id": call["id"], "content": reason})
            record("tool/result", call_id=call["id"], name=call["function"]["name"], content=reason, ok=False)


def stop(status: str, why: str) -> None:
    """End the run without an answer."""
    say(f"stopped: {why}")
    record("turn/end", status=status)


def say(text: str) -> None:
    """Progress for the person: stderr, so stdout holds only the answer."""
    print(text, file=sys.stderr, flush=True)


def shorten(text: str, limit: int) -> str:
    """One line of at most limit characters."""
    text = " ".join(str(text).split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def record(event: str, **fields) -> None:
    """Append one event to the transcript and flush it, so a crash loses nothing before it."""
    if transcript:
        line = {"type": event, "time": datetime.now(timezone.utc).isoformat(timespec="milliseconds"), **fields}
        transcript.write(json.dumps(line, ensure_ascii=False) + "\n")
        transcript.flush()


def dump(usage) -> dict | None:
    """The usage object as the server sent it, or None."""
    return usage.model_dump(exclude_none=True) if usage else None


def count_tokens(usage: dict | None) -> dict:
    """Prompt, cached prompt and completion tokens from a usage dict, 0 where not reported."""
    usage = usage or {}
    # DeepSeek reports cache hits as prompt_cache_hit_tokens, OpenAI as prompt_tokens_details.cached_tokens.
    cached = usage.get("prompt_cache_hit_tokens") or (usage.get("prompt_tokens_details") or {}).get("cached_tokens")
    return {
        "prompt": usage.get("prompt_tokens") or 0,
        "cached": cached or 0,
        "completion": usage.get("completion_tokens") or 0,
    }


def describe_tokens(counts: dict) -> str:
    return f"{counts['prompt']} prompt tokens ({counts['cached']} cached), {counts['completion']} completion tokens"


def report_step(step: int, message: dict, usage, latency_ms: int) -> None:
    """Print a step's token counts, and what the model said beside its tool calls; add to the totals."""
    counts = count_tokens(dump(usage))
    for key, value in counts.items():
        tokens[key] += value
    say(f"step {step}: {describe_tokens(counts)}, {latency_ms} ms")
    if message.get("tool_calls") and message["content"].strip():
        say(f"  {shorten(message['content'], 200)}")


def explain(error: Exception) -> str:
    """One or two lines about a failed request: what happened, the server's words, what to check."""
    detail = server_message(error)
    if isinstance(error, openai.APITimeoutError):
        return f"the request to {BASE_URL} timed out. Check that the server is up and not overloaded."
    if isinstance(error, openai.APIConnectionError):
        cause = error.__cause__ or error
        return f"could not reach {BASE_URL}: {cause}. Check AGENT_BASE_URL and your network, or start the server."
    if isinstance(error, (BadReply, json.JSONDecodeError)):
        return f"the server's reply is not a chat completion ({detail}). Is AGENT_BASE_URL an OpenAI-compatible API?"
    status = getattr(error, "status_code", "?")
    hint = {
        401: "Check AGENT_API_KEY (or DEEPSEEK_API_KEY) in your environment or .env.",
        402: "Check your balance with the provider.",
        403: "Check that your key may use this model.",
        404: "Check AGENT_BASE_URL (many servers want it to end in /v1) and AGENT_MODEL.",
        429: "The provider is rate limiting you or your balance is empty; wait, or check your account.",
    }.get(status, "Check AGENT_MODEL and AGENT_BASE_URL." if status == 400 else "Try again later.")
    if status in (400, 404) and MODEL in detail:
        hint = f"The server does not accept the model {MODEL!r}; check AGENT_MODEL."
        if MODEL in RETIRED_MODELS:
            hint += " deepseek-chat and deepseek-reasoner were retired in July 2026: use deepseek-flash."
    return f"the server answered HTTP {status}: {detail}\n{hint}"


def server_message(error: Exception) -> str:
    """The server's own error text, with the key blanked out in case it is echoed."""
    body = getattr(error, "body", None)
    if isinstance(body, dict):
        body = body.get("error", body)
    text = body.get("message", body) if isinstance(body, dict) else body or str(error)
    text = shorten(text, 400)
    return text.replace(config.API_KEY, "***") if config.API_KEY else text


def is_loopback(url: str) -> bool:
    """Whether url names this machine (a local Ollama, llama.cpp or vLLM needs no key)."""
    host = urlsplit(url).hostname or ""
    try:
        return host == "localhost" or ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def trace_request(messages: list[dict]) -> None:
    """--trace: what this request adds to the conversation (the rest was sent before)."""
    last = max((i for i, m in enumerate(messages) if m["role"] == "assistant"), default=0)
    names = ", ".join(t["function"]["name"] for t in TOOLS)
    say(f"── request: model {MODEL}, tools {names}, {len(messages)} messages; new since the last request:")
    say(json.dumps(messages[last:], indent=2, ensure_ascii=False))


def collect_stream(stream) -> ChatCompletion:
    """Read a streamed reply, printing its text as it comes, and rebuild it as one ChatCompletion."""
    message = {"role": "assistant", "content": "", "tool_calls": []}
    at_index, finish_reason, usage = {}, "incomplete_stream", None  # a stream that never says why it ended was cut
    for chunk in stream:
        usage = chunk.usage or usage
        if not chunk.choices:  # the usage chunk at the end has no choices
            continue
        delta = chunk.choices[0].delta
        if delta.content:
            message["content"] += delta.content
            print(delta.content, end="", flush=True)
        if "reasoning_content" in (delta.model_extra or {}):  # DeepSeek needs it back; see assistant_message()
            message["reasoning_content"] = message.get("reasoning_content", "") + (delta.reasoning_content or "")
        for piece in delta.tool_calls or []:
            add_fragment(message["tool_calls"], at_index, piece)
        finish_reason = chunk.choices[0].finish_reason or finish_reason
    if message["content"]:
        print(flush=True)
    return completion(message, finish_reason, usage)


def completion(message: dict, finish_reason: str | None, usage) -> ChatCompletion:
    """A ChatCompletion built as the SDK builds a live reply (model_construct: DeepSeek's finish reasons pass)."""
    choices = [{"index": 0, "message": message, "finish_reason": finish_reason}]
    return ChatCompletion.model_construct(
        id="local", object="chat.completion", created=0, model=MODEL, usage=usage, choices=choices
    )


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


class ReplayEnded(Exception):
    """The run asked for more replies than the transcript recorded."""


def replay_client(events: list[dict]) -> SimpleNamespace:
    """A stand-in for the OpenAI client that answers with a transcript's recorded replies, in order.

    Each reply is built by completion(), so resp, msg and msg.tool_calls look as in a live run."""
    replies = [e for e in events if e["type"] == "assistant/message"]

    def create(**request) -> ChatCompletion:
        if not replies:
            raise ReplayEnded("the transcript has no more recorded replies")
        event = replies.pop(0)
        return completion(event["message"], event.get("finish_reason"), event.get("usage"))

    return SimpleNamespace(chat=SimpleNamespace(completions=SimpleNamespace(create=create)))


# The fields each event needs for --show, --replay and --resume.
EVENT_FIELDS = {
    "run/start": ("system_prompt",),
    "user/message": ("content",),
    "assistant/message": ("message",),
    "tool/result": ("call_id", "name", "content"),
    "turn/end": ("status",),
}


def read_transcript(path: Path) -> list[dict]:
    """The events of a transcript file; ValueError names the first line that is not one."""
    with open(path, encoding="utf-8") as f:
        events = [(number, json.loads(line)) for number, line in enumerate(f, 1) if line.strip()]
    for number, event in events:
        needed = EVENT_FIELDS.get(event.get("type"), ()) if isinstance(event, dict) else None
        if needed is None or any(field not in event for field in needed):
            raise ValueError(f"{path}, line {number}: not a transcript event with {', '.join(needed or ['type'])}")
    return [event for _, event in events]


def rebuild(events: list[dict]) -> list[dict]:
    """The messages a transcript records: its system prompt, then every message in order."""
    messages = []
    for event in events:
        if event["type"] == "run/start" and not messages:
            messages.append({"role": "system", "content": event["system_prompt"]})
        elif event["type"] == "user/message":
            messages.append({"role": "user", "content": event["content"]})
        elif event["type"] == "assistant/message":
            messages.append(event["message"])
        elif event["type"] == "tool/result":
            messages.append({"role": "tool", "tool_call_id": event["call_id"], "content": event["content"]})
    return messages


def show(events: list[dict]) -> None:
    """Print a transcript as a conversation, without running anything."""
    total = {"prompt": 0, "cached": 0, "completion": 0}
    for event in events:
        kind = event["type"]
        if kind == "run/start":
            print(f"[{event.get('model')} at {event.get('base_url')}, working in {event.get('workspace')}]")
        elif kind == "user/message":
            print(f"\nuser: {event['content']}")
        elif kind == "assistant/message":
            message = event["message"]
            if message.get("content"):
                print(f"\nassistant: {message['content']}")
            for call in message.get("tool_calls", []):
                print(f"  → {call['function']['name']}({shorten(call['function']['arguments'], 300)})")
            for key, value in count_tokens(event.get("usage")).items():
                total[key] += value
        elif kind == "tool/result":
            print(f"  {'←' if event.get('ok') else '✗'} {shorten(event['content'], 300)}")
        elif kind == "turn/end":
            print(f"[turn ended: {event['status']}]")
    print(f"[total: {describe_tokens(total)}]")


HELP_EPILOG = """\
settings (flag > environment > .env in the current folder or beside agent.py > default):
  AGENT_BASE_URL       server address              default https://api.deepseek.com
  AGENT_MODEL          model name                  default deepseek-flash
  AGENT_API_KEY        API key (or DEEPSEEK_API_KEY; never OPENAI_API_KEY).
                       Not needed for a server on this machine (localhost).
  AGENT_SHELL_TIMEOUT  seconds before a shell command is killed      default 60
  AGENT_MAX_OUTPUT     characters of a tool result kept for the model  default 10000

with no task: on a terminal, type one task a line (exit or Ctrl-D ends);
  otherwise the task is read from standard input.

exit status: 0 answered, 1 API or network failure, 2 bad usage or configuration,
  3 stopped without an answer (step limit, the reply was cut off or filtered,
  or a replay ran out of recorded replies), 130 interrupted (Ctrl-C)

examples:
  python agent.py "write hello.py that prints hello, then run it"
  python agent.py --replay examples/lesson-01.jsonl     (no key, no network)
  python agent.py --resume runs/20261130T101500123456Z.jsonl "now add a test"
  echo "list the files" | python agent.py --yes
  AGENT_BASE_URL=http://localhost:11434/v1 AGENT_MODEL=qwen3 python agent.py "list the files"
"""


def parse_options(argv: list[str] | None) -> argparse.Namespace:
    """The command line."""
    parser = argparse.ArgumentParser(
        prog="agent.py",
        description="A minimal agent: a model, three tools and a loop.",
        epilog=HELP_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    add = parser.add_argument
    add("task", nargs="*", help="what to do, in words")
    add("-y", "--yes", action="store_true", help="run shell commands without asking")
    add("--max-steps", type=positive_int, default=MAX_STEPS, metavar="N", help=f"model requests per task ({MAX_STEPS})")
    add("--model", default=MODEL, metavar="NAME", help="model name (AGENT_MODEL)")
    add("--base-url", default=BASE_URL, metavar="URL", help="server address (AGENT_BASE_URL)")
    add("--workdir", type=Path, default=config.WORKDIR, metavar="DIR", help="the tools' folder (playground/)")
    add("--transcript", type=Path, metavar="PATH", help="where to write the transcript (runs/<UTC time>.jsonl)")
    add("--stream", action="store_true", help="print the answer as it is written")
    add("--trace", action="store_true", help="print each request and raw response on stderr")
    group = parser.add_mutually_exclusive_group()
    group.add_argument("--replay", type=Path, metavar="TRANSCRIPT", help="answer with a transcript's recorded replies")
    group.add_argument("--resume", type=Path, metavar="TRANSCRIPT", help="continue a transcript's conversation")
    group.add_argument("--show", type=Path, metavar="TRANSCRIPT", help="print a transcript as a conversation")
    return parser.parse_args(argv)


def positive_int(text: str) -> int:
    """argparse type: a whole number of at least 1."""
    if not text.isdigit() or int(text) < 1:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number of at least 1")
    return int(text)


def open_transcript(path: Path | None, mode: str = "x"):
    """The transcript file: new ("x": an existing file is never overwritten), or appended to ("a")."""
    if path is None:
        path = config.RUNS / f"{datetime.now(timezone.utc):%Y%m%dT%H%M%S%fZ}.jsonl"
    path.parent.mkdir(parents=True, exist_ok=True)
    return open(path, mode, encoding="utf-8")


def turn(task: str, messages: list[dict]) -> int:
    """Run one task in the conversation, print its answer, and return the exit status."""
    try:
        answer = run(task, messages)
    except REQUEST_ERRORS as e:
        say(f"agent: {explain(e)}")
        record("turn/end", status="api_error", error=server_message(e))
        return 1
    except ReplayEnded as e:
        answer_pending(messages, f"not run: {e}")
        stop("replay_ended", f"{e}; this run needs more steps than were recorded")
        return 3
    except KeyboardInterrupt:  # tools.run_shell has already killed a running command
        answer_pending(messages, "interrupted by the user")
        say("\nagent: interrupted")
        record("turn/end", status="interrupted")
        return 130
    if answer is None:
        return 3
    if not STREAM_OPTIONS:  # a streamed answer was printed as it came
        print(answer, flush=True)
    return 0


def interactive(messages: list[dict]) -> int:
    """Read tasks from the terminal, one a line, as turns of one conversation, until exit or Ctrl-D."""
    while True:
        print("> ", end="", file=sys.stderr, flush=True)
        try:
            line = sys.stdin.readline()
        except KeyboardInterrupt:
            say("")
            continue
        task = line.strip()
        if not line or task == "exit":
            return 0
        if task:
            turn(task, messages)


def read_task(options: argparse.Namespace, recorded: list[dict]) -> str:
    """The task: from the command line, else the replayed transcript's, else piped in. "" means ask for tasks."""
    task = " ".join(options.task).strip()
    if options.replay and not task:
        task = next((e["content"] for e in recorded if e["type"] == "user/message"), "")
    if not task and not sys.stdin.isatty():  # echo "task" | python agent.py
        task = sys.stdin.read().strip()
    return task


def start_conversation(options: argparse.Namespace, recorded: list[dict]) -> list[dict]:
    """The messages to start from, a new conversation's or a resumed one's, recorded in the transcript."""
    settings = {"model": MODEL, "base_url": BASE_URL, "workspace": str(options.workdir.resolve())}
    if not options.resume:
        record("run/start", **settings, system_prompt=SYSTEM_PROMPT)
        return [{"role": "system", "content": SYSTEM_PROMPT}]
    messages = rebuild(recorded)
    record("run/resume", **settings)
    answer_pending(messages, "not run: the earlier run ended before this call was answered")
    return messages


def main(argv: list[str] | None = None) -> int:
    """Run what the command line asks for; return the exit status."""
    global MODEL, BASE_URL, MAX_STEPS, TRACE, STREAM_OPTIONS, client, transcript
    for stream in (sys.stdout, sys.stderr):  # a Windows console may not encode every answer
        stream.reconfigure(errors="replace")
    options = parse_options(argv)
    MODEL, BASE_URL, MAX_STEPS, TRACE = options.model, options.base_url, options.max_steps, options.trace
    if options.stream:
        STREAM_OPTIONS = {"stream": True, "stream_options": {"include_usage": True}}
    source = options.show or options.replay or options.resume
    try:
        recorded = read_transcript(source) if source else []
    except (OSError, ValueError) as e:
        say(f"agent: cannot read the transcript: {e}")
        return 2
    if options.show:
        show(recorded)
        return 0
    if options.replay:
        client = replay_client(recorded)
        BASE_URL = f"replay of {options.replay}"
    elif not config.API_KEY and not is_loopback(BASE_URL):
        say(
            f"agent: no API key for {BASE_URL}. Set AGENT_API_KEY (or DEEPSEEK_API_KEY) in the "
            "environment or in .env; .env.example shows how."
        )
        return 2
    else:
        # A local server needs no key, but the SDK must get one: given None it would send OPENAI_API_KEY.
        client = openai.OpenAI(base_url=BASE_URL, api_key=config.API_KEY or "no-key")
    task = read_task(options, recorded)
    if not task and not sys.stdin.isatty():
        say('agent: no task. Give one, as in: python agent.py "list the files"')
        return 2
    try:
        options.workdir.mkdir(parents=True, exist_ok=True)
        transcript = open_transcript(options.resume or options.transcript, "a" if options.resume else "x")
    except OSError as e:
        say(f"agent: {e.strerror}: {e.filename}")
        return 2
    tools.WORKDIR, tools.ASSUME_YES = options.workdir, options.yes
    messages = start_conversation(options, recorded)
    say(f"{MODEL} at {BASE_URL}, working in {options.workdir}; transcript: {transcript.name}")
    status = turn(task, messages) if task else interactive(messages)
    if status != 1 or any(tokens.values()):  # a request that failed at once has nothing to total
        say(f"total: {describe_tokens(tokens)}")
    return status


if __name__ == "__main__":
    sys.exit(main())
