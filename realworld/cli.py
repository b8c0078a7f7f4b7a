"""The command line: python agent.py [options] "task". Options and --help are in config.py.

agent.py runs main() below when it is started as a program; this file holds what the command line
adds to run(): reading the task or one task after another, the transcript file, signals, exit
statuses, and printing the answer. The loop itself is agent.run().
"""

import contextlib
import os
import signal
import sys
from types import SimpleNamespace

import config
from agent import SYSTEM_PROMPT, Outcome, close_open_calls, run
from realworld import compaction, pauses, processes, replies, sandbox, transcripts
from realworld.guards import hide_secrets, say, shown_url, visible
from tools import TOOLS

# any other status: 3, no answer
EXIT_STATUS = {"answered": 0, "api_error": 1, "context_full": 1, "paused": 4, "interrupted": 130}

# What the command line is running: for a tool that runs the loop itself (subagent.py) or changes
# the agent (handoff.py). Set once, when the conversation starts.
RUN = SimpleNamespace(client=None, messages=None, transcript=None, options=None)


class Stopped(KeyboardInterrupt):
    """SIGTERM or SIGHUP, handled as Ctrl-C is; its argument is the exit status, 128 + the
    signal's number."""


def stop_on_signal(number: int, frame) -> None:
    raise Stopped(128 + number)


def main(argv: list[str] | None = None) -> int:
    """Run what the command line asks for; return the exit status. A closed stdout, or Ctrl-C
    (SIGTERM, SIGHUP) before a task began, ends it quietly; a turn under way handles them
    itself (turn())."""
    signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        status = command(argv)
        if sys.stdout:  # a closed stdout is found here, not at exit, where Python would exit 120
            sys.stdout.flush()
        return status
    except BrokenPipeError:  # what read stdout has gone (| head): a quiet exit, as others make
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 128 + 13  # as if killed by SIGPIPE
    except KeyboardInterrupt as e:
        say("\nagent: interrupted")
        return e.args[0] if isinstance(e, Stopped) else 130


def command(argv: list[str] | None) -> int:
    """main() without its quiet exits."""
    if sys.stdin is None:  # closed by the shell (<&-): read as empty, never a person to ask
        sys.stdin = open(os.devnull, encoding="utf-8")  # noqa: SIM115 (open for the whole run)
    for stream in (sys.stdout, sys.stderr):  # a Windows console may not encode every answer
        if stream:  # None when the shell closed it (>&-)
            stream.reconfigure(errors="replace")
    try:
        options = config.parse_options(argv)
        source = options.show or options.replay or options.resume or (options.html or [None])[0]
        as_read = transcripts.as_it_is(options.resume)
        recorded = transcripts.read(source) if source else []
        approvals = decided(options, recorded)
    # a bad setting (ConfigError), or a transcript that cannot be read
    except (OSError, ValueError) as e:
        say(
            f"agent: {e}"
            if isinstance(e, (config.ConfigError, pauses.NotApproved))
            else f"agent: cannot read the transcript: {e}"
        )
        return 2
    if options.show:
        transcripts.show(recorded, SYSTEM_PROMPT)
        return 0
    if options.html:
        return write_page(recorded, options.html[1])
    # Never silently unsandboxed; this also fixes which bubblewrap every command will use.
    if config.SANDBOX and (problem := sandbox.problem(options.workdir)):
        say(f"agent: {problem}")
        return 2
    if not options.replay and not config.API_KEY and not replies.is_loopback(options.base_url):
        say(
            f"agent: no API key for {options.base_url}. Set AGENT_API_KEY (or DEEPSEEK_API_KEY) "
            "in the environment or in .env; .env.example shows how. No key yet? Try the loop on a "
            "recorded run: python agent.py --replay examples/lesson-01.jsonl"
        )
        return 2
    task = read_task(options, recorded, going_on=approvals is not None)
    if not task and approvals is None and not sys.stdin.isatty():
        say('agent: no task. Give one, as in: python agent.py "list the files"')
        return 2
    try:
        options.workdir.mkdir(parents=True, exist_ok=True)
        transcript = transcripts.open_run(options.transcript, options.resume, recorded)
    except (OSError, transcripts.TranscriptError) as e:
        say(f"agent: {e.strerror}: {e.filename}" if isinstance(e, OSError) else f"agent: {e}")
        return 2
    if options.resume and transcripts.as_it_is(options.resume) != as_read:  # locked now
        transcript.close()
        say(
            f"agent: {options.resume} changed while this agent read it (another agent went on "
            "from it): nothing was run; --show it, then resume it again"
        )
        return 2
    # a closed terminal, kill, systemd
    for number in (signal.SIGTERM, getattr(signal, "SIGHUP", None)):
        if number:
            signal.signal(number, stop_on_signal)
    try:
        return converse(options, task, recorded, transcript, approvals)
    except transcripts.TranscriptError as e:  # a full disk: what was written stays readable
        say(f"agent: {e}; the run was stopped")
        return 1
    finally:
        processes.stop_all()  # a command's background processes end with the agent
        with contextlib.suppress(OSError):  # what a full disk kept in the file's buffer is lost
            transcript.close()


def write_page(recorded: list[dict], path) -> int:
    """--html: the transcript as one page; the exit status."""
    from realworld import page

    try:
        path.write_text(page.page(recorded, SYSTEM_PROMPT), encoding="utf-8")
    except OSError as e:
        say(f"agent: cannot write the page: {e.strerror}: {e.filename}")
        return 2
    say(f"agent: wrote {path}; open it in a browser")
    return 0


def decided(options, recorded: list[dict]) -> dict | None:
    """What --approve and --reject say of the resumed transcript's waiting calls; None when the
    run is not going on from a pause."""
    if options.approve is None and options.reject is None:
        return {} if options.resume and pauses.is_paused(recorded) else None
    if not options.resume:
        raise pauses.NotApproved("--approve and --reject go with --resume TRANSCRIPT")
    settings = pauses.settings_of(options.model, options.workdir, options.base_url)
    return pauses.decisions(options.resume, recorded, options.approve, options.reject, settings)


def converse(options, task: str, recorded: list[dict], transcript, approvals) -> int:
    """Run the task, or ask for one task after another; print the token totals; return the
    exit status. approvals: the decisions for a paused run's waiting calls, None if not paused."""
    replay = transcripts.Replay(recorded, options.replay) if options.replay else None
    where = replay.base_url if replay else shown_url(options.base_url)
    if replay:
        client = replies.Client(replay, options.stream, options.trace)
    else:
        client = replies.make_client(options.stream, options.trace, options.base_url)
    if not goes_on_from(recorded, options, replay, client, task):
        return 2
    settings = {
        "model": options.model,
        "base_url": where,
        "workspace": str(options.workdir.resolve()),
        "context_window": compaction.window(options.model, client),
    }
    messages = transcripts.start(
        recorded if options.resume else None, settings, SYSTEM_PROMPT, transcript
    )
    if approvals is None:  # a resumed run killed mid-step; a paused one goes on (go_on())
        close_open_calls(messages, transcripts.UNANSWERED, transcript)
    else:  # killed while it ran what was approved: those may or may not have run
        close_open_calls(messages, transcripts.UNANSWERED, transcript, pauses.started(recorded))
    RUN.client, RUN.messages, RUN.transcript, RUN.options = client, messages, transcript, options
    say(
        f"{options.model} at {where}, working in {options.workdir}{sandbox.mode()}; "
        f"transcript: {transcript.name}"
    )
    if (
        not replay
        and config.API_KEY
        and where.startswith("http://")
        and not replies.is_loopback(where)
    ):
        say(
            f"agent: warning: the key goes to {where} unencrypted (http://); use https:// unless "
            "the network is yours"
        )
    status, going_on = 0, approvals is not None
    # going on from a pause: that turn first, the task (if any) after its open calls
    todo = [task or None] if task or going_on else tasks()
    if replay and not options.task:  # every task it recorded, one after another
        todo = transcripts.recorded_tasks(recorded) or todo
    for each in todo:
        if each == "/compact":  # at the > prompt: make room now
            if pauses.open_calls(messages):
                say("agent: commands wait for a yes: approve or reject them before /compact")
            else:
                compaction.compact(messages, client, options.model, TOOLS, transcript, asked=True)
            continue
        asked = [m["role"] for m in messages].count("user")
        outcome = turn(each, messages, options, client, transcript, approvals)
        approvals = None
        status = EXIT_STATUS.get(outcome.status, 3)
        if outcome.status == "paused":
            waiting = pauses.waiting(messages)
            settings = pauses.settings_of(options.model, options.workdir, options.base_url)
            say(pauses.how_to_go_on(transcript.name, waiting, settings, bool(replay)))
            if each and [m["role"] for m in messages].count("user") == asked:
                say("agent: the task was not started, since commands still wait: give it again")
        if outcome.status == "answered" and not (
            options.stream and sys.stdout.isatty() and not replay  # printed
        ):
            # piped: as written
            answer = hide_secrets(outcome.text)
            print(visible(answer) if sys.stdout.isatty() else answer, flush=True)
    if client.tokens:
        say(f"total: {replies.describe_tokens(replies.total_tokens(client.tokens))}")
    if replay:
        replay.report(transcript)
    return status if task or going_on else 0  # typed tasks: the session ended as asked


def goes_on_from(recorded: list[dict], options, replay, client, task: str) -> bool:
    """Before a replayed or resumed conversation starts: what its transcript says that this run
    keeps (the window a server said) or tells the person (the lesson's note, a handoff, another
    task); False if a replay cannot work (it calls tools this agent does not have)."""
    said = [e.get("window") for e in recorded if e["type"] == "context/window"]
    # the server said it before; the person's AGENT_CONTEXT_WINDOW, if set, is taken instead
    if options.resume and said and type(said[-1]) is int and said[-1] >= 256:
        client.window = None if config.CONTEXT_WINDOW else said[-1]
    if replay and recorded and recorded[0].get("note"):  # a lesson says what it shows
        say(f"lesson: {recorded[0]['note']}")
    if replay and (other := replay.other_tools()):
        say(
            f"replay: the recorded replies call {', '.join(map(repr, other))}, which this agent "
            "does not have: replay it with the program its first line names"
        )
        return False
    handoffs = [e for e in recorded if e["type"] == "agent/handoff"] if options.resume else []
    if handoffs:
        say(
            f"agent: this conversation was handed off (to {handoffs[-1].get('to')!r}); it goes "
            "on with this program's own agent: its system prompt and its tools"
        )
    if replay and (other := replay.other_task(task)):
        say(f"replay: the recorded replies answer {other!r}, not this task; they will not change")
    return True


def turn(task: str | None, messages: list[dict], options, client, transcript, approvals) -> Outcome:
    """Run one task. Ctrl-C ends the turn; SIGTERM and SIGHUP end the agent too. run() has answered
    every call and recorded the end before the interruption reaches here. A request the server
    refuses as longer than its context window gets the conversation compacted, and goes once
    more."""
    settings = {
        "client": client,
        "model": options.model,
        "max_steps": options.max_steps,
        "workdir": options.workdir,
        "yes": options.yes,
        "transcript": transcript,
    }
    try:
        outcome = run(task, messages, approvals=approvals, **settings)
        if outcome.status == "context_full":  # refused as too long: compact all it can, once
            if client.window:
                say(f"agent: the model reads {client.window:,} tokens at most: compacting")
                # what the server said, for a --resume of this transcript to keep
                transcripts.record(transcript, "context/window", window=client.window)
            compaction.compact(messages, client, options.model, TOOLS, transcript, refused=True)
            outcome = run(None, messages, **settings)
        if outcome.status == "context_full":
            say(
                "agent: still too long after compacting: the task and its last results alone do "
                "not fit; lower AGENT_MAX_OUTPUT, or start a new conversation"
            )
        return outcome
    except KeyboardInterrupt as e:  # tools.run_shell has already ended a running command
        if isinstance(e, Stopped):
            raise
        say("\nagent: interrupted")
        return Outcome("interrupted", "interrupted by the user")


def tasks():
    """Tasks typed at the terminal, one a line, until exit or Ctrl-D; Ctrl-C at the prompt
    gives a new prompt."""
    while True:
        try:  # the prompt too: a Ctrl-C that comes just after it is drawn gives a new one
            say("> ", end="")
            line = sys.stdin.readline()
        except KeyboardInterrupt as e:
            if isinstance(e, Stopped):
                raise
            say("")
            continue
        if not line or line.strip() == "exit":
            # Ctrl-D: the shell's prompt then starts a line of its own
            say("", end="" if line else "\n")
            return
        if line.strip():
            yield line.strip()


def read_task(options, recorded: list[dict], going_on: bool = False) -> str:
    """The task: from the command line, else the replayed transcript's, else piped in (not when
    going on from a pause). "" means ask for tasks."""
    task = " ".join(options.task).strip()
    if going_on:
        return task
    if options.replay and not task:  # standard input stays unread: pdb may be reading it
        if not sys.stdin.isatty():
            say("agent: a replay answers its recorded task; standard input is not read")
        return transcripts.recorded_task(recorded)
    if not task and not sys.stdin.isatty():  # echo "task" | python agent.py
        task = sys.stdin.read().strip()
    return task
