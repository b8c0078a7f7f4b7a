"""A minimal agent: a model, three tools and a loop.

    task ─► messages ─► model ─► reply has tool calls? ──no──► final answer
                ▲                        │ yes
                └── one tool message ◄───┘ run each call (read_file, write_file, run_shell)
                    per call

run() below is the whole idea; request() just under it is the one call to the model. tools.py
holds the tools and runs a call; servers.py copes with what real servers send; transcripts.py
records and replays runs; config.py holds every setting; cli.py is the command line.

Try the loop from a Python prompt in this folder:
    >>> import agent, openai
    >>> client = openai.OpenAI(base_url="http://localhost:11434/v1", api_key="none")
    >>> agent.run("list the files", client=client, model="qwen3")
"""

import signal
import sys

if __name__ == "__main__":  # Ctrl-C while the modules load: a quiet exit, not a traceback (main() sets it back)
    signal.signal(signal.SIGINT, signal.SIG_DFL)
import time
from typing import NamedTuple

import config
import dialects
import servers
import tools
import transcripts
from text import say, shorten
from tools import TOOLS

# Fixed for the whole run (no date, no counters): providers cache a repeated prefix.
SYSTEM_PROMPT = (
    "You are a careful assistant working in a folder on the user's computer. "
    "Use the tools to read files, write files and run shell commands there; "
    "file paths are relative to that folder. Check your work, then answer briefly."
)


class Outcome(NamedTuple):
    """How run() ended: status is what the transcript's turn/end records ("answered", "max_steps", ...);
    text is the answer, or why there is none; used is the tokens each step used."""

    status: str
    text: str
    used: list[dict]


def run(task: str, messages: list[dict] | None = None, *, client=None, model: str | None = None,
        max_steps: int | None = None, workdir=None, yes: bool = False, stream: bool = False,
        trace: bool = False, transcript=None) -> Outcome:  # fmt: skip
    """Work on task until the model answers, and say how it ended.

    messages: a conversation to continue (it grows in place). client: an openai.OpenAI, or a replay of a
    transcript. model, max_steps, workdir: the settings in config.py if not given. yes: run shell commands
    without asking. stream: print the text as it comes. trace: print each request and response."""
    client = client or servers.make_client(config.BASE_URL, config.API_KEY, config.TIMEOUT)
    model, max_steps, workdir = model or config.MODEL, max_steps or config.MAX_STEPS, workdir or config.WORKDIR
    messages = [{"role": "system", "content": SYSTEM_PROMPT}] if messages is None else messages
    add(messages, {"role": "user", "content": task}, transcript)
    used = []
    for step in range(1, max_steps + 1):
        started = time.monotonic()
        try:
            resp = request(client, model, messages, stream, trace)
        except servers.RequestFailed as e:
            return end(transcript, "api_error", str(e), used)
        msg = resp.choices[0].message
        finish_reason = resp.choices[0].finish_reason
        assistant, repairs = servers.reply_message(msg, messages)  # what goes back: every field the server sent
        latency_ms, usage = round((time.monotonic() - started) * 1000), servers.usage_of(resp)
        add(messages, assistant, transcript, finish_reason=finish_reason, usage=usage, latency_ms=latency_ms,
            repairs=repairs)  # fmt: skip
        used.append(servers.count_tokens(usage))
        show_step(step, latency_ms, assistant, repairs, used)

        if finish_reason in STOP_REASONS:
            # The arguments may be cut off mid-way: answer each call without running it.
            answer_pending(messages, f"not run: {STOP_REASONS[finish_reason]}", transcript)
            return end(transcript, finish_reason, STOP_REASONS[finish_reason], used)
        if not assistant.get("tool_calls"):
            thinking, answer = dialects.split_thinking(assistant["content"])  # Qwen3, R1: <think> in content
            if not answer.strip():  # DeepSeek sometimes ends with reasoning and nothing else
                return end(transcript, "empty_answer", dialects.no_answer(assistant, thinking), used)
            transcripts.record(transcript, "turn/end", status="answered")
            return Outcome("answered", answer.strip(), used)
        for call in assistant["tool_calls"][: config.MAX_CALLS]:
            name = call["function"]["name"]
            say(f"  → {name}({shorten(call['function']['arguments'], 120)})")
            result, ok = tools.run_call(name, call["function"]["arguments"], workdir, yes)
            say(f"  {'←' if ok else '✗'} {shorten(result, 160)}")
            add(messages, {"role": "tool", "tool_call_id": call["id"], "content": result}, transcript, name=name, ok=ok)
        if len(assistant["tool_calls"]) > config.MAX_CALLS:  # one reply can hold thousands: the rest are not run
            answer_pending(messages, f"not run: more than {config.MAX_CALLS} calls in one reply; send it again",
                           transcript)  # fmt: skip
    return end(transcript, "max_steps", f"reached MAX_STEPS ({max_steps}) without an answer; raise --max-steps", used)


def request(client, model: str, messages: list[dict], stream: bool, trace: bool):
    """Send the conversation and the tools; return the model's reply as the SDK's ChatCompletion. servers.answer()
    wraps what real servers need around the call: a stream put together, errors made one line (RequestFailed)."""

    def create():
        options = {"stream": True, "stream_options": {"include_usage": True}} if stream else {}
        return client.chat.completions.create(model=model, messages=messages, tools=TOOLS, **options)

    if trace:
        transcripts.trace_request(model, messages)
    resp = servers.answer(create, str(client.base_url), model)
    if trace:
        say(f"── response (raw JSON)\n{resp.model_dump_json(indent=2, warnings=False)}")
    return resp


# finish_reason values that end the run without an answer, and what to tell the person.
STOP_REASONS = {
    "length": "the reply was cut off at the output token limit; its tool calls were not run",
    "content_filter": "the provider's content filter stopped the reply",
    "insufficient_system_resource": "the provider is out of capacity for now; try again later",
    "incomplete_stream": "the stream ended before the reply was complete; its tool calls were not run",
}


def add(messages: list[dict], message: dict, transcript, **details) -> None:
    """Append a message to the conversation and record it in the transcript: the one way messages grow."""
    messages.append(message)
    transcripts.record_message(transcript, message, **details)


def answer_pending(messages: list[dict], reason: str, transcript) -> None:
    """Answer each call of the last reply that has no tool message yet, so the history stays valid."""
    last = next((m for m in reversed(messages) if m["role"] == "assistant"), {})
    answered = {m["tool_call_id"] for m in messages if m["role"] == "tool"}
    for call in last.get("tool_calls", []):
        if call["id"] not in answered:
            say(f"  ✗ {call['function']['name']}({shorten(call['function']['arguments'], 120)}): {reason}")
            tool_message = {"role": "tool", "tool_call_id": call["id"], "content": reason}
            add(messages, tool_message, transcript, name=call["function"]["name"], ok=False)


def end(transcript, status: str, why: str, used: list[dict]) -> Outcome:
    """End the run without an answer: say why, and record it."""
    say(f"stopped: {why}" if status != "api_error" else f"agent: {why}")
    transcripts.record(transcript, "turn/end", status=status, **({"error": why} if status == "api_error" else {}))
    return Outcome(status, why, used)


def show_step(step: int, latency_ms: int, assistant: dict, repairs: list[str], used: list[dict]) -> None:
    """Print one step on stderr: its tokens and time, what was repaired, the reasoning and text beside calls."""
    say(f"step {step}: {servers.describe_tokens(used[-1])}, {latency_ms} ms")
    for repair in repairs:
        say(f"  repaired: {repair}")
    thinking, text = dialects.split_thinking(assistant["content"])
    reasoning = dialects.reasoning_of(assistant) or thinking
    if reasoning.strip():
        say(f"  thinking: {shorten(reasoning, 200)}")
    if assistant.get("tool_calls") and text.strip():
        say(f"  {shorten(text, 200)}")
    if servers.prompt_first_cut(used):
        say(f"agent: warning: {servers.PROMPT_CUT}")


if __name__ == "__main__":  # python agent.py [options] "task": the command line is in cli.py
    import cli

    sys.exit(cli.main())
