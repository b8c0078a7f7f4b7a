"""A minimal agent: a model, three tools and a loop.

    task ─► messages ─► model ─► reply has tool calls? ──no──► final answer
                ▲                        │ yes
                └── one tool message ◄───┘ run each call (read_file, write_file, run_shell)
                    per call

run() below is lesson 1's loop, line for line in shape. What real servers and models need is
behind two seams: the client (realworld/replies.py) answers client.chat.completions.create(...)
with a reply that is already whole and honest, and tools.run_call() turns one call into the text
the model reads. The tools a run offers are its tools argument: the three of tools.py unless it
is given others (examples/subagent.py). realworld/ holds the rest: the command line, transcripts,
the sandbox.

Try the loop from a Python prompt in this folder:
    >>> import agent, openai
    >>> client = openai.OpenAI(base_url="http://localhost:11434/v1", api_key="none")
    >>> agent.run("list the files", client=client, model="qwen3")
"""

import _signal  # signal's C half, loaded at once: signal itself loads enum, functools and more

if __name__ == "__main__":  # Ctrl-C while the modules load: a quiet exit (main() sets it back)
    _signal.signal(_signal.SIGINT, _signal.SIG_DFL)
import sys
from typing import NamedTuple

import config
from realworld import calls, compaction, consent, dialects, pauses, replies, transcripts
from realworld.guards import clip, say, shorten
from tools import DEFAULT_TOOLS, run_call

# Fixed for the whole run (no date, no counters): providers cache a repeated prefix.
SYSTEM_PROMPT = (
    "You are a careful assistant working in a folder on the user's computer. "
    "Use the tools to read files, write files and run shell commands there; "
    "file paths are relative to that folder. Check your work, then answer briefly."
)


class Outcome(NamedTuple):
    """How run() ended. status: "answered", or why there is no answer ("max_steps", "api_error",
    "interrupted", "paused", ...), as the transcript's turn/end records it. text: the answer, or
    why not."""

    status: str
    text: str


def run(
    task: str,
    messages: list[dict] | None = None,
    *,
    tools: list | None = None,
    client=None,
    model: str | None = None,
    max_steps: int | None = None,
    workdir=None,
    yes: bool = False,
    pause: bool = False,
    approvals: dict | None = None,
    transcript=None,
    budget: float | None = None,
) -> Outcome:
    """Work on task until the model answers, and say how it ended.

    messages: a conversation to continue (it grows in place). tools: what the run offers, a list of
    tools.Tool (tools.DEFAULT_TOOLS if not given); a handoff changes it in place, so a conversation
    passes one list from task to task. client: an openai.OpenAI, a replay or a replies.Client (else
    the settings' server). model, max_steps, workdir, budget (the most its requests may cost; past
    it, status "budget"): config.py's if not given. yes: run shell commands without asking. pause:
    when a command needs a yes, pause (status "paused"); with no terminal a run always pauses.
    approvals: to go on after a pause, {call id: True, or the reason to decline it}, with the same
    messages and task None (or the next). transcript: an open file that records every step."""
    model = model or config.MODEL
    max_steps = max_steps or config.MAX_STEPS
    workdir = workdir or config.WORKDIR
    tools = list(DEFAULT_TOOLS) if tools is None else tools
    if messages is None:
        messages = [{"role": "system", "content": SYSTEM_PROMPT}]
    record_start(messages, tools, transcript)  # where the transcript holds nothing yet
    ran = {}  # what each call returned, by its id, the moment it returned (tools.run_call())
    try:
        client = replies.wrap(client, budget)  # none given: the settings' server (SDK loads)
        # what a tool may be given by naming it: workdir (the three), the run itself (lesson 08's)
        given = {"workdir": workdir, "yes": yes, "client": client, "model": model, "ran": ran}
        given |= {"messages": messages, "tools": tools, "transcript": transcript}
        # A paused run goes on where it stopped: the calls it left open are answered first.
        if outcome := go_on(messages, approvals or {}, tools, given, pause, transcript):
            return outcome
        if task is not None:
            add(messages, {"role": "user", "content": task}, transcript)
        for step in range(1, max_steps + 1):
            offered = [tool.schema for tool in tools]  # what the model is shown: TOOLS by default
            make_room(messages, client, model, offered, transcript)  # a long one: lesson 10
            resp = client.chat.completions.create(model=model, messages=messages, tools=offered)
            msg = resp.choices[0].message
            finish_reason = resp.choices[0].finish_reason
            # Every field the server sent goes back, nulls too (DeepSeek's reasoning_content,
            # Gemini's signatures): exclude_none would drop some. add() also records it.
            add(messages, msg.model_dump(exclude_unset=True), transcript, **about(resp))
            show_step(step, msg, resp)
            if finish_reason in STOP_REASONS:  # cut off or filtered: arguments may be partial
                outcome = Outcome(finish_reason, STOP_REASONS[finish_reason])
                return outcome
            if not msg.tool_calls:
                outcome = final_answer(msg)
                return outcome
            for call in msg.tool_calls:
                name = call.function.name
                result, ok = run_call(name, call.function.arguments, tools, given, pause)
                if result is None:  # a command waits for a yes nobody can give now
                    outcome = paused(messages)
                    return outcome
                tool_message = {"role": "tool", "tool_call_id": call.id, "content": result}
                add(messages, tool_message, transcript, name=name, ok=ok)
        outcome = Outcome("max_steps", f"reached MAX_STEPS ({max_steps}); raise --max-steps")
    except replies.RequestFailed as e:  # no usable reply; e says why in the provider's words
        outcome = Outcome(e.status, str(e))
    except BaseException as e:  # Ctrl-C, SIGTERM, a bug: finished below, then raised again
        outcome = interrupted(e)
        trim_traceback(e)  # Ctrl-C: shown stopping this loop, not inside a library
        raise
    finally:  # every exit: each call answered, and the task, so a server accepts the history
        finish(messages, outcome, transcript, model, workdir, client, ran)
    return outcome


# finish_reason values that end the run without an answer, and what to tell the person.
STOP_REASONS = {
    "length": "the reply was cut off at the output token limit; its tool calls were not run",
    "content_filter": "the provider's content filter stopped the reply",
    "insufficient_system_resource": "the provider is out of capacity for now; try again later",
    "incomplete_stream": (
        "the stream ended before the reply was complete; its tool calls were not run"
    ),
}


def record_start(messages: list[dict], tools: list, transcript) -> None:
    """A transcript that holds nothing yet (run() from Python, with a new file) gets the
    conversation's start as it stands: the system prompt, the tools offered and the messages it
    goes on from, so that it reads as what was sent. The command line records its own start."""
    if transcripts.is_empty(transcript):
        system = bool(messages) and messages[0]["role"] == "system"
        prompt, earlier = (messages[0]["content"], messages[1:]) if system else ("", messages)
        offered = calls.schemas(tools)
        transcripts.record(
            transcript, "run/start", system_prompt=prompt, tools=offered, messages=earlier
        )


def make_room(messages: list[dict], client, model: str, offered: list[dict], transcript) -> None:
    """Before a request that offers the tools offered: if the conversation would not fit the
    model's context window, compact it (realworld/compaction.py): old tool results first, then a
    summary of the earliest turns."""
    size = compaction.window(model, client)
    if compaction.too_big(messages, offered, client, size):
        compaction.compact(messages, client, model, offered, transcript)


def add(messages: list[dict], message: dict, transcript, **details) -> None:
    """Append a message to the conversation and record it: the one way messages grow."""
    messages.append(message)
    transcripts.record_message(transcript, message, **details)


def about(resp) -> dict:
    """What the transcript keeps of a reply beside its message."""
    choice = resp.choices[0]
    return {
        "finish_reason": choice.finish_reason,
        "usage": replies.usage_of(resp),
        "latency_ms": resp.latency_ms,
        "repairs": resp.repairs,
        # what it cost, where a price is known (realworld/replies.py): tokens alone otherwise
        **({"cost": resp.cost} if resp.cost else {}),
        # the reply as the server sent it, where the client repaired it: a replay repairs it again
        **({"sent": resp.sent} if resp.repairs else {}),
    }


def final_answer(msg) -> Outcome:
    """The reply's text as the answer, less its thinking; an empty one is no answer."""
    thinking, answer = dialects.split_thinking(msg.content)  # Qwen3, R1: <think> in content
    if not answer.strip():  # DeepSeek sometimes ends with reasoning and nothing else
        return Outcome("empty_answer", dialects.no_answer(msg, thinking))
    return Outcome("answered", answer.strip())


def paused(messages: list[dict]) -> Outcome:
    """How run() ends when a command waits for a yes: the calls from it on stay open."""
    pauses.show_waiting(messages)
    return Outcome("paused", pauses.explain(messages))


def go_on(messages: list[dict], decided: dict, tools: list, given: dict, pause: bool, transcript):
    """Answer the calls a paused run left open, in their order: an approved one runs, a declined
    one gets its reason, any other is asked about as in the loop. An Outcome if the run pauses
    again, None once every call has its answer."""
    if mistake := pauses.mistaken(decided, messages):  # the calls stay open, as they were
        return Outcome("paused", f"{mistake}; {pauses.explain(messages)}")
    for call in pauses.open_calls(messages):
        name, arguments = call["function"]["name"], call["function"]["arguments"]
        decision = pauses.decision(decided.get(call["id"]))
        if decision is None or decision is True:
            approved = {**given, "yes": given["yes"] or decision is True, "approved": decision}
            result, ok = run_call(name, arguments, tools, approved, pause)
        else:
            result, ok = consent.declined(name, arguments, decision or ""), False
        if result is None:
            return paused(messages)
        tool_message = {"role": "tool", "tool_call_id": call["id"], "content": result}
        add(messages, tool_message, transcript, name=name, ok=ok)
    return None


def interrupted(e: BaseException) -> Outcome:
    """How run() ended when an exception stopped it: Ctrl-C (or a signal handled as one), or an
    error, which the caller sees as it is."""
    if type(e) is KeyboardInterrupt:
        return Outcome("interrupted", "interrupted by the user")
    if type(e).__module__ == "bdb":  # q in pdb: the person left the debugger
        return Outcome("interrupted", "the person left the debugger")
    if isinstance(e, KeyboardInterrupt):  # SIGTERM or SIGHUP, as the command line raises them
        return Outcome("interrupted", "interrupted by a signal")
    return Outcome("error", f"stopped by an error: {type(e).__name__}: {e}")


def trim_traceback(e: BaseException) -> None:
    """Ctrl-C raises KeyboardInterrupt wherever Python is when the key is pressed: most often deep
    in the SDK (reading the reply, or importing one of its modules, which it does on first use),
    in httpx, or in subprocess and threading while a command runs. Nothing failed there, so the
    traceback a person sees at a Python prompt ends at the line of run() it stopped, and no
    exception it came in the middle of is shown (as `raise ... from None`). Any other exception,
    a bug or pdb's quit (bdb.BdbQuit), keeps its whole traceback."""
    if isinstance(e, KeyboardInterrupt):  # a signal handled as Ctrl-C (SIGTERM, SIGHUP) too
        e.__traceback__.tb_next = None  # it starts at run(), the frame that caught it
        e.__cause__ = None  # which shows no context either
        e.__suppress_context__ = True


def finish(
    messages: list[dict], outcome: Outcome, transcript, model: str, workdir, client, ran: dict
) -> None:
    """Answer every call still open (a pause leaves them for the person): one that ran (in ran,
    what it returned) with its result, one stopped while it ran with that it began (ran holds
    None), the others with why the run stopped; the task too if no
    reply came to it; say why the run stopped, record the end. A pause records the settings the
    run had, sealed with the whole conversation: going on needs the same."""
    reason = (
        outcome.text if outcome.status in ("interrupted", "error") else f"not run: {outcome.text}"
    )
    if outcome.status == "paused":  # the caller says how to go on
        pending = pauses.recorded(messages)
        settings = pauses.settings_of(model, workdir, client.base_url)
        path = getattr(transcript, "name", None)  # a file: a subagent's is inside another's
        sealed = {"seal": pauses.seal(path, pending, settings)} if transcript else {}
        transcripts.record(
            transcript, "turn/end", status="paused", pending=pending, settings=settings, **sealed
        )
        return
    for call in pauses.open_calls(messages)[:1]:  # the one run when the run stopped, if it began
        if call["id"] in ran:  # what it returned, or (None) that it was stopped while it ran
            result, ok = ran[call["id"]] or (f"{reason} {pauses.WHILE_IT_RAN}", False)
            tool_message = {"role": "tool", "tool_call_id": call["id"], "content": clip(result)}
            add(messages, tool_message, transcript, name=call["function"]["name"], ok=ok)
    pauses.close_open_calls(messages, reason, transcript)
    if outcome.status != "context_full":  # that one goes again once compacted (realworld/cli.py)
        pauses.close_open_task(messages, outcome.text, transcript)
    if outcome.status in ("api_error", "context_full"):
        say(f"agent: {outcome.text}")
    elif outcome.status not in ("answered", "interrupted", "error"):  # the caller says those
        say(f"stopped: {outcome.text}")
    explained = ("api_error", "context_full", "budget")  # turn/end keeps why: --show says it
    error = {"error": outcome.text} if outcome.status in explained else {}
    if outcome.status == "context_full":  # and the window from here on, for a replay or a resume
        error["window"] = compaction.window(model, client)
    transcripts.record(transcript, "turn/end", status=outcome.status, **error)


def show_step(step: int, msg, resp) -> None:
    """Print one step on stderr: tokens, the server's time, repairs, reasoning, text by calls."""
    tokens = replies.describe_tokens(replies.count_tokens(replies.usage_of(resp)), resp.cost)
    took = "a recorded reply" if resp.latency_ms is None else f"{resp.latency_ms} ms at the server"
    say(f"step {step}: {tokens}, {took}")
    for repair in resp.repairs:
        say(f"  repaired: {repair}")
    thinking, text = dialects.split_thinking(msg.content)
    reasoning = dialects.reasoning_of(msg) or thinking
    if reasoning.strip():
        say(f"  thinking: {shorten(reasoning, 200)}")
    if msg.tool_calls and text.strip():
        say(f"  {shorten(text, 200)}")


if __name__ == "__main__":  # python agent.py [options] "task": the command line is realworld/cli.py
    from realworld import cli  # not imported by `import agent`: a Python prompt starts faster

    sys.exit(cli.main(run, SYSTEM_PROMPT, DEFAULT_TOOLS))
