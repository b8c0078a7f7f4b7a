"""The command line: python agent.py [options] "task". Options and --help are in config.py.

agent.py runs main() below when it is started as a program; this file holds what the command line
adds to run(): reading the task or one task after another, the transcript file, signals, exit
statuses, and printing the answer. The loop itself is agent.run().
"""

import contextlib
import os
import signal
import sys

import config
from agent import SYSTEM_PROMPT, Outcome, close_open_calls, run
from realworld import processes, replies, sandbox, transcripts
from realworld.guards import hide_secrets, say, shown_url, visible

EXIT_STATUS = {"answered": 0, "api_error": 1, "interrupted": 130}  # any other status: 3, no answer


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
    for stream in (sys.stdout, sys.stderr):  # a Windows console may not encode every answer
        if stream:  # None when the shell closed it (>&-)
            stream.reconfigure(errors="replace")
    try:
        options = config.parse_options(argv)
        source = options.show or options.replay or options.resume or (options.html or [None])[0]
        recorded = transcripts.read(source) if source else []
    # a bad setting (ConfigError), or a transcript that cannot be read
    except (OSError, ValueError) as e:
        say(
            f"agent: {e}"
            if isinstance(e, config.ConfigError)
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
    task = read_task(options, recorded)
    if not task and not sys.stdin.isatty():
        say('agent: no task. Give one, as in: python agent.py "list the files"')
        return 2
    try:
        options.workdir.mkdir(parents=True, exist_ok=True)
        transcript = transcripts.open_run(options.transcript, options.resume, recorded)
    except (OSError, transcripts.TranscriptError) as e:
        say(f"agent: {e.strerror}: {e.filename}" if isinstance(e, OSError) else f"agent: {e}")
        return 2
    # a closed terminal, kill, systemd
    for number in (signal.SIGTERM, getattr(signal, "SIGHUP", None)):
        if number:
            signal.signal(number, stop_on_signal)
    try:
        return converse(options, task, recorded, transcript)
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


def converse(options, task: str, recorded: list[dict], transcript) -> int:
    """Run the task, or ask for one task after another; print the token totals; return the
    exit status."""
    replay = transcripts.Replay(recorded, options.replay) if options.replay else None
    where = replay.base_url if replay else shown_url(options.base_url)
    if replay:
        client = replies.Client(replay, options.stream, options.trace)
    else:
        client = replies.make_client(options.stream, options.trace, options.base_url)
    if replay and recorded and recorded[0].get("note"):  # a lesson says what it shows
        say(f"lesson: {recorded[0]['note']}")
    if replay and (other := replay.other_task(task)):
        say(f"replay: the recorded replies answer {other!r}, not this task; they will not change")
    settings = {
        "model": options.model,
        "base_url": where,
        "workspace": str(options.workdir.resolve()),
    }
    messages = transcripts.start(
        recorded if options.resume else None, settings, SYSTEM_PROMPT, transcript
    )
    close_open_calls(messages, transcripts.UNANSWERED, transcript)  # a resumed run killed mid-step
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
    status = 0
    for each in [task] if task else tasks():
        outcome = turn(each, messages, options, client, transcript)
        status = EXIT_STATUS.get(outcome.status, 3)
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
    return status if task else 0  # typed tasks: the session ended as asked


def turn(task: str, messages: list[dict], options, client, transcript) -> Outcome:
    """Run one task. Ctrl-C ends the turn; SIGTERM and SIGHUP end the agent too. run() has answered
    every call and recorded the end before the interruption reaches here."""
    try:
        return run(
            task,
            messages,
            client=client,
            model=options.model,
            max_steps=options.max_steps,
            workdir=options.workdir,
            yes=options.yes,
            transcript=transcript,
        )
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


def read_task(options, recorded: list[dict]) -> str:
    """The task: from the command line, else the replayed transcript's, else piped in.
    "" means ask for tasks."""
    task = " ".join(options.task).strip()
    if options.replay and not task:  # standard input stays unread: pdb may be reading it
        if not sys.stdin.isatty():
            say("agent: a replay answers its recorded task; standard input is not read")
        return transcripts.recorded_task(recorded)
    if not task and not sys.stdin.isatty():  # echo "task" | python agent.py
        task = sys.stdin.read().strip()
    return task
