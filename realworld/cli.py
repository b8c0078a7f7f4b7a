"""The command line: python agent.py [options] "task". Options and --help are in config.py.

agent.py runs main() below when it is started as a program, handing it the loop (agent.run), its
system prompt and the tools it offers; a lesson's program (examples/subagent.py) hands it its own.
This file holds what the command line adds to run(): reading the task or one task after another,
the transcript file, signals, exit statuses, and printing the answer.
"""

import contextlib
import gc
import os
import signal
import sys
from collections.abc import Callable
from typing import NamedTuple

import config
from realworld import (
    compaction,
    endings,
    own,
    page,
    pauses,
    processes,
    replies,
    runs,
    sandbox,
    transcripts,
)
from realworld.calls import schemas
from realworld.guards import hide_secrets, say, shown_url, visible
from realworld.replay import TURN, Replay


class Program(NamedTuple):
    """What main() runs: the loop, and the agent it starts with: its system prompt and its tools
    (tools.Tool). handoffs: the agents a handoff may go on with, by name: (system prompt, tools),
    so that a resumed conversation goes on with the one it was handed to (examples/handoff.py)."""

    run: Callable
    system_prompt: str
    tools: list
    handoffs: dict


class Stopped(KeyboardInterrupt):
    """SIGTERM or SIGHUP, handled as Ctrl-C is; its argument is the exit status, 128 + the
    signal's number."""


def stop_on_signal(number: int, frame) -> None:
    raise Stopped(128 + number)


def main(
    run,
    system_prompt: str,
    tools: list,
    handoffs: dict | None = None,
    argv: list[str] | None = None,
) -> int:
    """Run what the command line asks for with run (agent.run), system_prompt and tools; return
    the exit status. A closed stdout, or Ctrl-C (SIGTERM, SIGHUP) before a task began, ends it
    quietly; a turn under way handles them itself (turn())."""
    signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        status = command(Program(run, system_prompt, tools, handoffs or {}), argv)
        if sys.stdout:  # a closed stdout is found here, not at exit, where Python would exit 120
            sys.stdout.flush()
        return status
    except BrokenPipeError:  # what read stdout has gone (| head): a quiet exit, as others make
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 128 + 13  # as if killed by SIGPIPE
    except KeyboardInterrupt as e:
        say("\nagent: interrupted")
        return e.args[0] if isinstance(e, Stopped) else 130


def command(program: Program, argv: list[str] | None) -> int:
    """main() without its quiet exits."""
    if sys.stdin is None:  # closed by the shell (<&-): read as empty, never a person to ask
        sys.stdin = open(os.devnull, encoding="utf-8")  # noqa: SIM115 (open for the whole run)
    for stream in (sys.stdout, sys.stderr):  # a Windows console may not encode every answer
        if stream:  # None when the shell closed it (>&-)
            stream.reconfigure(errors="replace")
    try:
        # --help names the program that was started and the tools it offers
        name = sys.argv[0] if sys.argv and sys.argv[0].endswith(".py") else "agent.py"
        options = config.parse_options(argv, name, tuple(runs.names(schemas(program.tools))))
        source = options.show or options.replay or options.resume or (options.html or [None])[0]
        as_read = transcripts.as_it_is(options.resume)
        recorded = runs.read(source) if source else []
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
        page.show(recorded, program.system_prompt)
        return 0
    if options.html:
        return write_page(recorded, options.html[1], program.system_prompt)
    if problem := own.overlap(options.workdir):  # its code, runs/ and Python: out of reach
        say(f"agent: {problem}")
        return 2
    if own.in_workspace(options.transcript, options.workdir):
        say(
            f"agent: the transcript {options.transcript} is in the workspace {options.workdir}, "
            "where a command or write_file could rewrite what this run records: give a "
            "--transcript outside it, or leave it out to keep the run in runs/"
        )
        return 2
    if problem := own.make_runs():  # before any command could make it
        say(f"agent: {problem}")
    # Never silently unsandboxed; this also fixes which bubblewrap every command will use.
    if config.SANDBOX and (problem := sandbox.problem(options.workdir)):
        say(f"agent: {problem}")
        return 2
    if options.task and not " ".join(options.task).strip() and approvals is None:
        say('agent: the task is empty. Give one, as in: python agent.py "list the files"')
        return 2  # said before the key: a key would not make it a task
    if not options.replay and not config.API_KEY and not replies.is_loopback(options.base_url):
        say(
            f"agent: no API key for {options.base_url}. Set AGENT_API_KEY (or DEEPSEEK_API_KEY) "
            "in the environment or in .env; .env.example shows how. No key yet? Try the loop on a "
            "recorded run: python agent.py --replay examples/lesson-01.jsonl"
        )
        return 2
    task = read_task(options, recorded, going_on=approvals is not None)
    deciding = options.approve is not None or options.reject is not None
    if deciding and task and task.startswith("/"):  # before the pause is spent
        say(
            f"agent: {pauses.one_line(task.split()[0])} is a command of the > prompt, not a task: "
            "go on from the pause first, then type it at the prompt; nothing was run"
        )
        return 2
    if not task and approvals is None and not sys.stdin.isatty():
        say('agent: no task. Give one, as in: python agent.py "list the files"')
        return 2
    if options.workdir.exists() and not options.workdir.is_dir():
        say(f"agent: --workdir {options.workdir} is a file, not a folder: give a folder to work in")
        return 2
    options.made_workdir = not options.workdir.exists()  # a typo makes a new one: say so
    try:
        options.workdir.mkdir(parents=True, exist_ok=True)
        transcript = transcripts.open_run(
            options.transcript, options.resume, recorded, options.workdir
        )
    except (OSError, transcripts.TranscriptError) as e:
        say(f"agent: {transcripts.refused(e)}" if isinstance(e, OSError) else f"agent: {e}")
        return 2
    if options.resume and transcripts.as_it_is(options.resume) != as_read:  # locked now
        transcript.close()
        say(
            f"agent: {options.resume} changed while this agent read it (another agent went on "
            "from it): nothing was run; --show it, then resume it again"
        )
        return 2
    if deciding:  # it goes on from the pause now
        pauses.spend(options.resume, recorded)
    # a closed terminal, kill, systemd
    for number in (signal.SIGTERM, getattr(signal, "SIGHUP", None)):
        if number:
            signal.signal(number, stop_on_signal)
    try:
        return converse(program, options, task, recorded, transcript, approvals)
    except transcripts.TranscriptError as e:  # a full disk: what was written stays readable
        say(f"agent: {e}; the run was stopped")
        return 1
    finally:
        processes.stop_all()  # a command's background processes end with the agent
        with contextlib.suppress(OSError):  # what a full disk kept in the file's buffer is lost
            transcript.close()


def write_page(recorded: list[dict], path, system_prompt: str) -> int:
    """--html: the transcript as one page, in a new file (transcripts.create()); the exit status."""
    made = page.page(recorded, system_prompt)
    try:
        with open(transcripts.create(path), "w", encoding="utf-8") as f:
            f.write(made)
    except OSError as e:
        say(f"agent: cannot write the page: {transcripts.refused(e)}")
        return 2
    say(f"agent: wrote {path}; open it in a browser")
    return 0


def decided(options, recorded: list[dict]) -> dict | None:
    """What --approve and --reject say of the resumed transcript's waiting calls; None when the
    run is not going on from a pause. A resume of a paused run, however it would go on (asked at
    a terminal, paused again, --yes), goes on only with the settings of its pause: NotApproved
    before anything is sent or written."""
    settings = pauses.settings_of(options.model, options.workdir, options.base_url)
    if options.approve is None and options.reject is None:
        if options.resume and pauses.last_end(recorded).get("status") == "paused":
            pauses.same_settings(options.resume, recorded, settings)
        return {} if options.resume and pauses.is_paused(recorded) else None
    if not options.resume:
        raise pauses.NotApproved("--approve and --reject go with --resume TRANSCRIPT")
    return pauses.decisions(options.resume, recorded, options.approve, options.reject, settings)


def converse(program: Program, options, task: str, recorded: list[dict], transcript, approvals):
    """Run the task, or ask for one task after another; print the token totals; return the
    exit status. approvals: the decisions for a paused run's waiting calls, None if not paused."""
    replay = Replay(recorded, options.replay) if options.replay else None
    if replay and options.model == config.MODEL:  # no --model: the model the run recorded
        options.model = runs.recorded_model(recorded) or options.model
    where = replay.base_url if replay else shown_url(options.base_url)
    if replay:
        client = replies.Client(replay, options.stream, options.trace)
    else:
        client = replies.make_client(options.stream, options.trace, options.base_url)
        # a setting given as a flag is named as the flag in what the agent says of a failure
        flags = {"AGENT_BASE_URL": ("--base-url", options.base_url, config.BASE_URL)}
        flags["AGENT_MODEL"] = ("--model", options.model, config.MODEL)
        client.named = {k: flag for k, (flag, given, set_) in flags.items() if given != set_}
    # What exists by now (the modules, the SDK's types) lives as long as the process: out of the
    # garbage collector's sight, no collection the requests set off walks it again
    gc.freeze()
    if not goes_on_from(program, recorded, options, replay, client, task):
        return 2
    if (
        options.resume
    ):  # the ids the recorded run gave, in every conversation: a new call takes none
        client.ids |= {c["id"] for r in runs.requests(recorded) for c in r.calls}
        # a budget is the run's, whichever process spends it: what it spent before counts
        client.charges = [replies.recorded_spend(runs.requests(recorded), options.model)]
    going_on = approvals is not None
    settings = {
        "model": options.model,
        "base_url": where,
        "workspace": str(options.workdir.resolve()),
        "context_window": compaction.window(options.model, client),
        # tasks typed at the prompt: the session ends 0, as asked (a replay of it too)
        "typed": not (task or going_on or replay),
    }
    # the conversation's own list of tools: a handoff changes it, for the tasks after it too
    if options.resume:
        messages, tools = resumed(program, recorded, settings, transcript)
    else:
        messages = transcripts.begin(
            transcript, program.system_prompt, schemas(program.tools), **settings
        )
        tools = list(program.tools)
    if approvals is None:  # a resumed run killed mid-step; a paused one goes on (go_on())
        pauses.close_open_calls(messages, pauses.UNANSWERED, transcript)
    else:  # killed while it ran what was approved: those may or may not have run
        started = pauses.started(recorded)
        pauses.close_open_calls(messages, pauses.UNANSWERED, transcript, started)
    pauses.close_open_task(messages, pauses.NO_ANSWER, transcript)  # killed while it waited
    new = " (a new, empty folder: it did not exist)" if options.made_workdir else ""
    say(
        f"{options.model} at {where}, working in {options.workdir}{new}{sandbox.mode()}; "
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
    status, spent_out, typed = 0, False, settings["typed"]
    # going on from a pause: that turn first, the task (if any) after its open calls
    todo = [task or None] if task or going_on else tasks()
    todo = ({**TURN, "task": each} for each in todo)
    if replay and not options.task:  # every turn it recorded, one after another
        todo = replay.turns or todo
    for recorded_turn in todo:
        each, yes, pause = recorded_turn["task"], options.yes, False
        if replay:  # it pauses where the recording paused, and goes on as it went on
            yes, pause = replay.consent(recorded_turn, options.yes)
            approvals = replay.approvals(recorded_turn, options.yes, messages)
            if each is None and approvals is None:  # nothing waits here: it did not pause
                continue
        if each and each.startswith("/"):  # a command, never a task for the model
            slash(each, messages, tools, options, client, transcript)
            continue
        asked, spent_before = [m["role"] for m in messages].count("user"), len(client.costs)
        if replay and each:  # the recorded task it replays, as a person would have typed it
            say(f"task: {pauses.one_line(each)}")
        going = {"approvals": approvals, "yes": yes, "pause": pause}
        outcome = turn(program, each, messages, tools, options, client, transcript, going)
        approvals = None
        if typed:  # at the prompt, what the task cost and what the session has
            say(session_cost(client, spent_before))
        status = endings.exit_status(outcome.status if outcome else None)
        # spent for the session: no later task runs (but a replay goes on past a stop it replays,
        # as the recording went on, unless its own budget is spent)
        if outcome and outcome.status == "budget" and (not replay or client.spent_out()):
            spent_out = True
            break
        if outcome and outcome.status == "paused":
            waiting = pauses.waiting(messages)
            settings = pauses.settings_of(options.model, options.workdir, options.base_url)
            if replay and (then := replay.paused_as_recorded(recorded_turn, waiting)):
                say(f"paused: {pauses.counted(waiting)} wait where the recording paused; {then}")
            else:
                say(pauses.how_to_go_on(transcript.name, waiting, settings, bool(replay)))
            if each and [m["role"] for m in messages].count("user") == asked:
                say("agent: the task was not started, since commands still wait: give it again")
        if (
            outcome
            and outcome.status == "answered"
            and not (
                options.stream and sys.stdout.isatty() and not replay  # printed
            )
        ):
            # piped: as written
            answer = hide_secrets(outcome.text)
            print(visible(answer) if sys.stdout.isatty() else answer, flush=True)
    if client.tokens:
        spent = replies.total_cost(client.costs)
        say(f"total: {replies.describe_tokens(replies.total_tokens(client.tokens), spent)}")
    if replay:
        replay.report(transcript)
    if replay and replay.typed:  # a session typed at the prompt ends as it ended
        return endings.exit_status("budget") if spent_out or replay.typed == "budget" else 0
    # typed tasks: the session ended as asked, but where the budget ended it
    return status if task or going_on or spent_out else 0


def resumed(program: Program, recorded: list[dict], settings: dict, transcript):
    """The messages and the tools a resumed conversation goes on with: as the transcript reads
    (realworld/runs.py), with this program's own system prompt and tools for the agent it was
    left with (the one it was handed off to, if this program has it): a shared transcript may
    carry other instructions. Recorded as run/resume."""
    messages, agent = runs.conversation(recorded), runs.agent_at_end(recorded)
    system_prompt, tools = program.system_prompt, list(program.tools)
    if isinstance(agent, str) and agent in program.handoffs:
        system_prompt, handed = program.handoffs[agent]
        tools = list(handed)
    elif agent is not None:
        say(
            f"agent: this conversation was handed off (to {pauses.one_line(agent)!r}), which "
            "this program does not have; it goes on with this program's own agent"
        )
        agent = None
    if messages and messages[0]["role"] == "system" and messages[0]["content"] != system_prompt:
        say(
            "agent: the transcript's system prompt is not this agent's own (--show prints it); "
            "the conversation goes on with this agent's"
        )
    # this program's own words, at the head whatever the transcript held (one written by hand
    # may have no run/start)
    messages = runs.with_system_prompt(messages, system_prompt)
    offered = schemas(tools)
    transcripts.record(
        transcript,
        "run/resume",
        **settings,
        system_prompt=system_prompt,
        tools=offered,
        agent=agent,
    )
    return messages, tools


def goes_on_from(program: Program, recorded: list[dict], options, replay, client, task) -> bool:
    """Before a replayed or resumed conversation starts: what its transcript says that this run
    keeps (the window a server said) or tells the person (the lesson's note, another task); False
    if a replay cannot work (it calls tools this program does not have)."""
    said = runs.windows_said(recorded)
    # the server said it before; the person's AGENT_CONTEXT_WINDOW, if set, is taken instead
    if options.resume and said:
        client.window = None if config.CONTEXT_WINDOW else said[-1]
    if replay and recorded and recorded[0].get("note"):  # a lesson says what it shows
        say(f"lesson: {recorded[0]['note']}")
    if replay and (other := replay.other_tools(runs.names(schemas(program.tools)))):
        say(
            f"replay: the recorded replies call {', '.join(map(repr, other))}, which this agent "
            "does not have: replay it with the program its first line names"
        )
        return False
    if replay and (other := replay.other_task(task)):
        say(f"replay: the recorded replies answer {other!r}, not this task; they will not change")
    return True


def turn(program: Program, task, messages, tools, options, client, transcript, going: dict):
    """Run one task; its Outcome, or None if Ctrl-C ended it. SIGTERM and SIGHUP end the agent
    too. run() has answered every call, and the task, and recorded the end before the
    interruption reaches here. A request the server refuses as longer than its context window
    gets the conversation compacted, and goes once more. going: run()'s approvals, yes and pause
    (a replay pauses where its recording paused)."""
    settings = {
        "tools": tools,
        "client": client,
        "model": options.model,
        "max_steps": options.max_steps,
        "workdir": options.workdir,
        "yes": going["yes"],
        "pause": going["pause"],
        "transcript": transcript,
        "budget": options.budget,
    }
    try:
        outcome = program.run(task, messages, approvals=going["approvals"], **settings)
        refused = outcome.status == "context_full"  # its turn/end keeps the window from here on
        # refused as too long: compact all it can, once; where nothing can be compacted (the task
        # alone is too long), the one line run() printed says so, and nothing is tried again
        if refused and compaction.can_make_room(messages):
            if client.window:  # the window it compacts for: AGENT_CONTEXT_WINDOW, if smaller
                window = compaction.window(options.model, client)
                say(f"agent: the model reads {window:,} tokens at most: compacting")
            offered = schemas(tools)
            compaction.compact(messages, client, options.model, offered, transcript, refused=True)
            outcome = program.run(None, messages, **settings)
            if outcome.status == "context_full":
                say(
                    "agent: still too long after compacting: the task and its last results alone "
                    "do not fit; lower AGENT_MAX_OUTPUT, or start a new conversation"
                )
        if outcome.status == "context_full":  # answered here, for the next task to follow
            still = "too long for the model's context window"
            pauses.close_open_task(messages, still, transcript)
        return outcome
    except KeyboardInterrupt as e:  # tools.run_shell has already ended a running command
        # run() answered the task, unless Ctrl-C came while compacting above: answered here
        by = "a signal" if isinstance(e, Stopped) else "the user"
        pauses.close_open_task(messages, f"interrupted by {by}", transcript)
        if isinstance(e, Stopped):
            raise
        say("\nagent: interrupted")
        return None


# What a line typed at the > prompt may be, besides a task.
COMMANDS = {
    "/compact": "make room in the conversation now (lesson 10)",
    "/cost": "what the session has cost so far",
    "/help": "these commands",
    "exit": "end the session (quit, /exit, /quit and 退出 too, or Ctrl-D)",
}
EXIT = {"exit", "quit", "/exit", "/quit", "退出"}  # the README.zh's word too
CTRL_C = "Ctrl-C: stops the step under way (a request or a command); at the prompt, a new prompt"


def slash(line: str, messages: list[dict], tools: list, options, client, transcript) -> None:
    """A command typed at the > prompt (or given as the task): /compact, /help, or one line
    that says it is none, with nothing sent."""
    if line == "/compact":
        if pauses.open_calls(messages):
            say("agent: commands wait for a yes: approve or reject them before /compact")
        else:
            offered = schemas(tools)
            compaction.compact(messages, client, options.model, offered, transcript, asked=True)
    elif line == "/cost":
        say(session_cost(client))
    elif line == "/help":
        say("; ".join(f"{name}: {what}" for name, what in COMMANDS.items()) + f"; {CTRL_C}")
    else:
        known = ", ".join(COMMANDS)
        say(f"agent: {pauses.one_line(line[:40])} is no command ({known}); nothing was sent")


def session_cost(client, before: int | None = None) -> str:
    """One line: what the requests after the first before cost (a task's), and the session's;
    the session's alone where before is None (/cost). Tokens where no price is known."""
    if not client.costs:
        return "cost: no request was sent yet"

    def said(costs: list, tokens: list) -> str:
        cost = replies.total_cost(costs)
        if cost is None and any(costs):
            return "unknown (a price is missing for some of it)"
        if cost is None:  # no price known: the tokens
            return replies.describe_tokens(replies.total_tokens(tokens)) if tokens else "nothing"
        return replies.describe_cost(cost)

    session = f"the session {said(client.costs, client.tokens)}"
    if before is None:
        return f"cost: {session}"
    return f"cost: this task {said(client.costs[before:], client.tokens[before:])}; {session}"


def tasks():
    """Tasks typed at the terminal, one a line, until exit or Ctrl-D; Ctrl-C at the prompt
    gives a new prompt. The first prompt says what else a line may be."""
    say(f"type a task, or {', '.join(COMMANDS)}")
    while True:
        try:  # the prompt too: a Ctrl-C that comes just after it is drawn gives a new one
            say("> ", end="")
            line = sys.stdin.readline()
        except KeyboardInterrupt as e:
            if isinstance(e, Stopped):
                raise
            say("")
            continue
        if not line or line.strip() in EXIT:
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
        return runs.recorded_task(recorded)
    if not task and not sys.stdin.isatty():  # echo "task" | python agent.py
        task = sys.stdin.read().strip()
    return task
