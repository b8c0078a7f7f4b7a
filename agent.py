"""A minimal agent: a model, three tools and a loop.

    task ─► messages ─► model ─► reply has tool calls? ──no──► final answer
                ▲                        │ yes
                └── one tool message ◄───┘ run each call (read_file, write_file, run_shell)
                    per call

Read run() first: it is the whole idea. Below it is what run() steps into on a normal
step (request, assistant_message, call_tool), and the command line comes last.
servers.py copes with what real servers send, transcripts.py writes and replays runs:
both can wait until the loop is clear.

Try the loop from a Python prompt in this folder:
    >>> import agent, openai
    >>> client = openai.OpenAI(base_url="http://localhost:11434/v1", api_key="none")
    >>> agent.run("list the files", client=client, model="qwen3")
"""

import json
import signal
import sys
import time
import uuid
from pathlib import Path
from typing import NamedTuple

import config
import servers
import tools
import transcripts
from servers import shorten
from tools import TOOL_MAP, TOOLS, ToolError, blank, clip, consent, parameters, visible
from transcripts import record

# Settings: defaults that a flag or the environment replaces (config.py reads them once, at start).
MODEL = config.MODEL  # --model, AGENT_MODEL
BASE_URL = config.BASE_URL  # --base-url, AGENT_BASE_URL
MAX_STEPS = config.MAX_STEPS  # --max-steps: model requests per task
MAX_CALLS = 8  # tool calls run from one reply; with MAX_OUTPUT, this bounds what one step adds
WORKDIR = config.WORKDIR  # --workdir: the folder the tools work in
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


class Outcome(NamedTuple):
    """How run() ended. status is what the transcript's turn/end records ("answered", "max_steps", ...);
    text is the answer, or why there is none; used is the tokens each step used."""

    status: str
    text: str
    used: list[dict]


def run(
    task: str,
    messages: list[dict] | None = None,
    *,
    client=None,
    model: str = MODEL,
    max_steps: int = MAX_STEPS,
    workdir: Path = WORKDIR,
    yes: bool = False,
    stream: bool = False,
    trace: bool = False,
    transcript=None,
) -> Outcome:
    """Work on task until the model answers, and say how it ended.

    messages: a conversation to continue (it grows in place). client: an openai.OpenAI (or a replay of
    a transcript), made from the settings if None. yes: run shell commands without asking. stream: print
    the reply as it comes. trace: print each request and response. transcript: an open file for events."""
    client = client or servers.make_client(BASE_URL, config.API_KEY, config.TIMEOUT)
    if messages is None:
        messages = [{"role": "system", "content": SYSTEM_PROMPT}]
    messages.append({"role": "user", "content": task})
    record(transcript, "user/message", content=task)
    used = []
    for step in range(1, max_steps + 1):
        started = time.monotonic()
        try:
            resp = request(client, model, messages, stream, trace)
        except RequestFailed as e:
            return end(transcript, "api_error", str(e), used)
        msg = resp.choices[0].message
        finish_reason = resp.choices[0].finish_reason
        assistant, repairs = assistant_message(msg, messages)
        messages.append(assistant)
        used.append(report_step(step, resp, assistant, repairs, started, used, transcript))

        if finish_reason in STOP_REASONS:
            # The arguments may be cut off mid-way: answer each call without running it.
            answer_pending(messages, f"not run: {STOP_REASONS[finish_reason]}", transcript)
            return end(transcript, finish_reason, STOP_REASONS[finish_reason], used)
        if not assistant.get("tool_calls"):
            if not assistant["content"].strip():  # DeepSeek sometimes ends with reasoning and nothing else
                return end(transcript, "empty_answer", no_answer(assistant), used)
            record(transcript, "turn/end", status="answered")
            return Outcome("answered", assistant["content"], used)
        for call in assistant["tool_calls"][:MAX_CALLS]:
            name = call["function"]["name"]
            say(f"  → {name}({shorten(call['function']['arguments'], 120)})")
            result, ok = call_tool(name, call["function"]["arguments"], workdir, yes)
            say(f"  {'←' if ok else '✗'} {shorten(result, 160)}")
            messages.append({"role": "tool", "tool_call_id": call["id"], "content": result})
            record(transcript, "tool/result", call_id=call["id"], name=name, content=result, ok=ok)
        if len(assistant["tool_calls"]) > MAX_CALLS:  # one reply can hold thousands: the rest are not run
            answer_pending(messages, f"not run: more than {MAX_CALLS} calls in one reply; send it again", transcript)
    return end(transcript, "max_steps", f"reached MAX_STEPS ({max_steps}) without an answer; raise --max-steps", used)


class RequestFailed(Exception):
    """The server gave no usable reply; the message says why in a line or two, for the person."""


def request(client, model: str, messages: list[dict], stream: bool, trace: bool):
    """Send the conversation and the tools; return the reply as the SDK's ChatCompletion."""
    # Imported here, not at the top: --help and --show then start without loading the SDK (about a second).
    import openai

    if trace:
        trace_request(model, messages)
    options = {"stream": True, "stream_options": {"include_usage": True}} if stream else {}
    try:
        resp = client.chat.completions.create(model=model, messages=messages, tools=TOOLS, **options)
        if stream:
            resp = servers.collect_stream(resp, model)
    except (openai.APIError, ValueError, RecursionError) as e:  # the SDK lets a body that is not JSON through
        raise RequestFailed(servers.explain(e, str(client.base_url), model)) from None
    except (AttributeError, TypeError) as e:  # chunks of another shape: the SDK builds them without checking
        raise RequestFailed(f"the server sent a stream that is not a chat completion stream ({e})") from None
    problem = servers.reply_problem(resp)  # the SDK builds a reply without checking its shape
    if problem:
        detail = shorten(blank(str(resp)), 300)
        raise RequestFailed(f"the server sent a reply with {problem}: {detail}")
    if trace:
        say(f"── response (raw JSON)\n{resp.model_dump_json(indent=2, warnings=False)}")
    return resp


def assistant_message(msg, messages: list[dict]) -> tuple[dict, list[str]]:
    """The reply as an explicit dict that every server accepts back, and what had to be repaired in it."""
    content = servers.clean_text(msg.content)
    calls, repairs = msg.tool_calls or [], []
    if not calls and content:  # a tool call written as text, when the server did not parse it
        calls, content, repairs = servers.recover_tool_calls(content, TOOL_MAP)
    # content is never null: Ollama's and Mistral's templates reject a null content.
    message = {"role": "assistant", "content": content}
    extra = msg.model_extra or {}
    if "reasoning_content" in extra:
        # DeepSeek's thinking mode answers 400 on later requests if this is not sent back.
        message["reasoning_content"] = servers.clean_text(extra["reasoning_content"])
    if calls:
        taken = {c["id"] for m in messages for c in m.get("tool_calls", [])}
        message["tool_calls"] = [tool_call(c, taken, repairs) for c in calls]
    return message, repairs


def tool_call(call, taken: set[str], repairs: list[str]) -> dict:
    """One tool call with a unique id and its arguments as a valid JSON string."""
    call_id = getattr(call, "id", None)
    call_id = call_id if isinstance(call_id, str) and call_id.strip() and call_id not in taken else ""
    if not call_id:  # some local servers send no id, or the same id every time; recovered calls have none
        call_id = f"call_{uuid.uuid4().hex[:24]}"
    taken.add(call_id)
    function = getattr(call, "function", None)  # None for a non-function ("custom") tool call
    name = getattr(function, "name", None)
    arguments, repair = servers.clean_arguments(getattr(function, "arguments", None))
    name = servers.clean_text(name).strip()
    if repair:
        repairs.append(repair)
    return {
        "id": call_id,
        "type": "function",
        "function": {"name": name, "arguments": arguments},
    }


def call_tool(name: str, arguments: str, workdir: Path, yes: bool) -> tuple[str, bool]:
    """Run one tool call. Return (result, ok); every failure is a result the model can read."""
    try:
        args = check_call(name, arguments)
        if name == "run_shell" and not yes:
            consent(args["command"])  # the person says yes or no at the terminal; no raises ToolError
        result, ok = TOOL_MAP[name](**args, workdir=workdir), True
    except ToolError as e:
        result, ok = f"error: {e}", False
    except Exception as e:  # noqa: BLE001 -- a bug or an OS error in a tool is news for the model, not a crash
        result, ok = f"error: {type(e).__name__}: {e}", False
    return clip(result), ok  # the key blanked out (a file or a command may show it), at most MAX_OUTPUT long


def check_call(name: str, arguments: str) -> dict:
    """The call's arguments, checked against what TOOLS shows the model; ToolError says what is wrong."""
    if name not in TOOL_MAP:
        raise ToolError(f"unknown tool {name!r}; the tools are {', '.join(TOOL_MAP)}")
    args = json.loads(arguments)  # valid JSON: tool_call() made it so
    if isinstance(args, str):  # what the model sent was not JSON; tool_call() kept it as a string
        raise ToolError(f"arguments are not valid JSON: {shorten(args, 200)}")
    if not isinstance(args, dict):
        raise ToolError(f"arguments must be a JSON object, not {type(args).__name__}")
    expected = parameters(name)
    missing = [p for p in expected if p not in args]
    unexpected = [p for p in args if p not in expected]
    if missing or unexpected:
        raise ToolError(
            f"{name} takes {', '.join(expected)}; "
            f"missing: {', '.join(missing) or 'none'}; unexpected: {', '.join(unexpected) or 'none'}"
        )
    return args


def answer_pending(messages: list[dict], reason: str, transcript) -> None:
    """Answer each call of the last reply that has no tool message yet, so the history stays valid."""
    last = next((m for m in reversed(messages) if m["role"] == "assistant"), {})
    answered = {m["tool_call_id"] for m in messages if m["role"] == "tool"}
    for call in last.get("tool_calls", []):
        if call["id"] not in answered:
            messages.append({"role": "tool", "tool_call_id": call["id"], "content": reason})
            record(
                transcript, "tool/result", call_id=call["id"], name=call["function"]["name"], content=reason, ok=False
            )


def end(transcript, status: str, why: str, used: list[dict]) -> Outcome:
    """End the run without an answer: say why, and record it."""
    say(f"stopped: {why}" if status != "api_error" else f"agent: {why}")
    record(transcript, "turn/end", status=status, **({"error": why} if status == "api_error" else {}))
    return Outcome(status, why, used)


def no_answer(assistant: dict) -> str:
    """Why an empty reply is no answer, with the end of the model's reasoning if it sent any."""
    reasoning = assistant.get("reasoning_content", "").strip()
    why = "the model ended without an answer (no text and no tool calls)"
    return f"{why}; its reasoning ended: …{shorten(reasoning[-300:], 300)}" if reasoning else why


def say(text: str) -> None:
    """Progress for the person: stderr, so stdout holds only the answer (with --stream, each reply's text).
    What the model or a tool wrote is in it, so control characters are shown as escapes: an escape
    sequence could redraw the screen."""
    print(visible(text), file=sys.stderr, flush=True)


def report_step(step: int, resp, assistant: dict, repairs: list[str], started: float, used: list, transcript) -> dict:
    """Record the reply in the transcript and print the step on stderr; return the tokens it used."""
    latency_ms = round((time.monotonic() - started) * 1000)
    usage = servers.usage_of(resp)
    record(transcript, "assistant/message", message=assistant, finish_reason=resp.choices[0].finish_reason,
           usage=usage, latency_ms=latency_ms, repairs=repairs)  # fmt: skip
    counts = servers.count_tokens(usage)
    say(f"step {step}: {servers.describe_tokens(counts)}, {latency_ms} ms")
    for repair in repairs:
        say(f"  repaired: {repair}")
    if assistant.get("tool_calls") and assistant["content"].strip():
        say(f"  {shorten(assistant['content'], 200)}")
    if servers.prompt_first_cut([*used, counts]):
        say(f"agent: warning: {servers.PROMPT_CUT}")
    return counts


def trace_request(model: str, messages: list[dict]) -> None:
    """--trace: what this request adds to the conversation (the rest was sent before)."""
    last = max((i for i, m in enumerate(messages) if m["role"] == "assistant"), default=0)
    names = ", ".join(t["function"]["name"] for t in TOOLS)
    say(f"── request: model {model}, tools {names}, {len(messages)} messages; new since the last request:")
    say(json.dumps(messages[last:], indent=2, ensure_ascii=False))


# The command line: python agent.py [options] "task". Options and help are in config.py.


def main(argv: list[str] | None = None) -> int:
    """Run what the command line asks for; return the exit status."""
    for stream in (sys.stdout, sys.stderr):  # a Windows console may not encode every answer
        stream.reconfigure(errors="replace")
    try:
        options = config.parse_options(argv)
    except config.ConfigError as e:
        say(f"agent: {e}")
        return 2
    source = options.show or options.replay or options.resume
    try:
        recorded = transcripts.read(source) if source else []
    except (OSError, ValueError) as e:
        say(f"agent: cannot read the transcript: {e}")
        return 2
    if options.show:
        transcripts.show(recorded)
        return 0
    if not options.replay and not config.API_KEY and not servers.is_loopback(options.base_url):
        say(
            f"agent: no API key for {options.base_url}. Set AGENT_API_KEY (or DEEPSEEK_API_KEY) in the "
            "environment or in .env; .env.example shows how. No key yet? Try the loop on a recorded run: "
            "python agent.py --replay examples/lesson-01.jsonl"
        )
        return 2
    task = read_task(options, recorded)
    if not task and not sys.stdin.isatty():
        say('agent: no task. Give one, as in: python agent.py "list the files"')
        return 2
    try:
        options.workdir.mkdir(parents=True, exist_ok=True)
        transcript = transcripts.open_file(options.resume or options.transcript, "a" if options.resume else "x")
    except OSError as e:
        say(f"agent: {e.strerror}: {e.filename}")
        return 2
    for number in (signal.SIGTERM, getattr(signal, "SIGHUP", None)):  # a closed terminal, kill, systemd
        if number:
            signal.signal(number, stop_on_signal)
    with transcript:
        try:
            return converse(options, task, recorded, transcript)
        except KeyboardInterrupt as e:  # Ctrl-C, SIGTERM or SIGHUP before a task began: nothing to answer
            say("\nagent: interrupted")
            return getattr(e, "status", 130)
        finally:
            tools.end_all()  # a command's background processes end with the agent


class Stopped(KeyboardInterrupt):
    """SIGTERM or SIGHUP, handled as Ctrl-C is: the exit status is 128 + the signal's number."""

    def __init__(self, number: int):
        super().__init__(number)
        self.status = 128 + number


def stop_on_signal(number: int, frame) -> None:
    raise Stopped(number)


def converse(options, task: str, recorded: list[dict], transcript) -> int:
    """Run the task, or ask for one task after another; print the token totals; return the exit status."""
    if options.replay:
        client = transcripts.replay_client(recorded, options.replay, transcript)
        other = transcripts.other_task(recorded, task)
        if other:
            say(f"replay: the recorded replies answer {other!r}, not this task; they will not change")
    else:
        client = servers.make_client(options.base_url, config.API_KEY, config.TIMEOUT)
    base_url = f"replay of {options.replay}" if options.replay else options.base_url
    settings = {"model": options.model, "base_url": base_url, "workspace": str(options.workdir.resolve())}
    messages = transcripts.start(recorded if options.resume else None, settings, SYSTEM_PROMPT, transcript)
    answer_pending(messages, "unknown: the earlier run ended before this call was answered; it may or may not have "
                   "run, so check before repeating it", transcript)  # fmt: skip
    say(f"{options.model} at {base_url}, working in {options.workdir}; transcript: {transcript.name}")
    run_options = {
        "client": client,
        "model": options.model,
        "max_steps": options.max_steps,
        "workdir": options.workdir,
        "yes": options.yes,
        "stream": options.stream,
        "trace": options.trace,
        "transcript": transcript,
    }
    used = []
    status = turn(task, messages, run_options, used) if task else interactive(messages, run_options, used)
    if used:
        say(f"total: {servers.describe_tokens(servers.total_tokens(used))}")
    if getattr(client, "diverged_at", None):
        say(f"replay: the recorded replies after step {client.diverged_at} were written for other tool results")
    return status


EXIT_STATUS = {"answered": 0, "api_error": 1}  # any other status: 3, stopped without an answer


def turn(task: str, messages: list[dict], run_options: dict, used: list[dict]) -> int:
    """Run one task in the conversation, print its answer, and return the exit status."""
    transcript = run_options["transcript"]
    try:
        outcome = run(task, messages, **run_options)
    except transcripts.ReplayEnded as e:
        answer_pending(messages, f"not run: {e}", transcript)
        outcome = end(transcript, "replay_ended", f"{e}; this run needs more steps than were recorded", [])
    except KeyboardInterrupt as e:  # Ctrl-C, SIGTERM or SIGHUP; tools.run_shell has already ended a running command
        answer_pending(messages, "interrupted by the user", transcript)
        say("\nagent: interrupted")
        record(transcript, "turn/end", status="interrupted")
        return getattr(e, "status", 130)
    used += outcome.used
    if outcome.status == "answered" and not run_options["stream"]:  # a streamed answer was printed as it came
        print(visible(outcome.text) if sys.stdout.isatty() else outcome.text, flush=True)  # piped: as written
    return EXIT_STATUS.get(outcome.status, 3)


def interactive(messages: list[dict], run_options: dict, used: list[dict]) -> int:
    """Read tasks from the terminal, one a line, as turns of one conversation, until exit or Ctrl-D."""
    while True:
        print("> ", end="", file=sys.stderr, flush=True)
        try:
            line = sys.stdin.readline()
        except Stopped as e:
            return e.status
        except KeyboardInterrupt:  # Ctrl-C at the prompt: a new prompt
            say("")
            continue
        task = line.strip()
        if not line or task == "exit":
            return 0
        status = turn(task, messages, run_options, used) if task else 0
        if status in (129, 143):  # SIGHUP or SIGTERM during the task: the session is over
            return status


def read_task(options, recorded: list[dict]) -> str:
    """The task: from the command line, else the replayed transcript's, else piped in. "" means ask for tasks."""
    task = " ".join(options.task).strip()
    if options.replay and not task:
        task = transcripts.recorded_task(recorded)
    if not task and not sys.stdin.isatty():  # echo "task" | python agent.py
        task = sys.stdin.read().strip()
    return task


if __name__ == "__main__":
    sys.exit(main())
