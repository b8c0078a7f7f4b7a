"""A call that ran is recorded as ran, whatever stops the agent after it (issue #42, family 6).
Found: q at lesson 02's breakpoint (README: "after `result, ok = run_call(...)`"), after
write_file had written the file, recorded the call as failed ("the person left the debugger",
ok: false). tools.run_call() keeps what a tool returned the moment it returns (run()'s "ran", by
the call's id), and run() records it as the call's result however it ends: pdb's q (bdb.BdbQuit),
Ctrl-C (KeyboardInterrupt), SIGTERM and SIGHUP (as the command line raises them), SystemExit. A
call stopped while its tool runs is recorded as interrupted, as before.

The interruptions are real: pdb driven over a pipe, and a signal the agent's process sends itself
from a trace function (a debugger's hook, as pdb's is) at a given line, with the command line's
own handlers in place."""

import os
import signal
import subprocess
import sys
from pathlib import Path

import forkserver
import pytest
from conftest import (
    AGENT,
    KEY,
    ROOT,
    clean_env,
    events_of,
    open_fifo,
    pdb_replay,
    posix_only,
    read_fifo,
)
from scripted_server import call, reply

from realworld.pauses import WHILE_IT_RAN

TOOLS = ROOT / "tools.py"
LESSON_02 = ROOT / "examples" / "lesson-02.jsonl"
WROTE = "wrote 6 characters to greeting.txt"


def line_after(text: str, path=AGENT, after: int = 1) -> int:
    """The number of the line after (or, after=0, at) the one of path that starts with text."""
    lines = path.read_text(encoding="utf-8").splitlines()
    return next(i for i, line in enumerate(lines, 1) if line.strip().startswith(text)) + after


def results(events, call_id: str) -> list[dict]:
    return [e for e in events if e["type"] == "tool/result" and e["call_id"] == call_id]


@posix_only
@pytest.mark.parametrize("stops", [1, 2])
def test_q_at_lesson_02s_breakpoint_records_each_call_as_it_ran(tmp_path, stops):
    # stop 1: after call_01, whose arguments were wrong (its own error); stop 2: after call_02,
    # which wrote greeting.txt
    transcript = tmp_path / "run.jsonl"
    line = line_after("result, ok = run_call(")
    commands = f"break {AGENT}:{line}\n" + "continue\n" * stops + "q\n"
    done = pdb_replay(tmp_path, LESSON_02, commands, "--transcript", str(transcript))
    assert f"agent.py({line})" in done.stdout, done.stdout[-1500:]
    events = events_of(transcript)
    (first,) = results(events, "call_01")
    assert first["ok"] is False and first["content"].startswith("error: write_file takes path")
    if stops == 2:
        (second,) = results(events, "call_02")
        assert (second["ok"], second["content"]) == (True, WROTE)
        assert (tmp_path / "work" / "greeting.txt").read_text() == "hello\n"
    else:
        assert results(events, "call_02") == []  # never run, never called
    assert "the person left the debugger" not in [e["content"] for e in results(events, "call_01")]
    assert events[-1]["type"] == "turn/end" and events[-1]["status"] == "interrupted"


# agent.py's command line, with a trace function that, at one line of one function, sends the
# process a signal (or raises SystemExit): what a person's Ctrl-C, a kill or a closed terminal
# does at that moment.
STOPPER = """
import os, runpy, signal, sys

root, function, line, how = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
program = os.path.join(root, "agent.py")
sys.argv = [program, *sys.argv[5:]]
sys.path[0] = root  # as python agent.py has it: this script's folder holds the workspace


def local(frame, event, arg):
    # after the tool: the call that wrote the file (call_01 fails before write_file runs)
    wanted = function == "write_file" or frame.f_locals.get("ok") is True
    if event == "line" and frame.f_lineno == line and wanted:
        sys.settrace(None)
        if how == "SystemExit":
            raise SystemExit(9)
        os.kill(os.getpid(), getattr(signal, how))  # raised here by the handler in place
    return local


def trace(frame, event, arg):
    code = frame.f_code
    return local if code.co_name == function and code.co_filename.startswith(root) else None


sys.settrace(trace)
runpy.run_path(program, run_name="__main__")
"""

# where the agent is stopped: (function, a line of it, in which file, how many lines after it)
WHERE = {
    # the lesson's breakpoint: the line after run() got the result
    "after the tool, in run()": ("run", "result, ok = run_call(", AGENT, 1),
    # run_call() has the result, not yet clipped nor shown
    "after the tool, in run_call()": ("run_call", "result = clip(result)", TOOLS, 0),
    # the first line of write_file's body, before it writes: the tool is running
    # an approved call, run where a paused run goes on: go_on() has the result (the line after
    # its else: branch)
    "after an approved call, in go_on()": ("go_on", "result, ok = consent.declined(", AGENT, 1),
    "in the tool": ("write_file", '"""Write content to a file in the workspace', TOOLS, 2),
}


def stopped(
    tmp_path, where: str, how: str, *args: str, env: dict | None = None
) -> tuple[subprocess.CompletedProcess, list[dict]]:
    """agent.py stopped at where by how, replaying lesson 02 (or with args: those, and the
    transcript they name); what it did and its transcript's events."""
    folder = tmp_path / "person"  # not the workspace's folder: it is on sys.path
    folder.mkdir(exist_ok=True)
    script = folder / "stopper.py"
    script.write_text(STOPPER, encoding="utf-8")
    function, text, path, after = WHERE[where]
    transcript = tmp_path / "run.jsonl"
    line = str(line_after(text, path, after))
    argv = [sys.executable, str(script), str(ROOT), function, line, how]
    if args:
        argv += args
        transcript = Path(args[args.index("--resume") + 1])
    else:
        argv += ["--replay", str(LESSON_02), "--workdir", str(tmp_path / "work")]
        argv += ["--transcript", str(transcript)]
    env = env or clean_env()
    done = subprocess.run(
        forkserver.command(argv, env),
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert transcript.exists(), done.stderr
    return done, events_of(transcript)


STATUS = {"SIGINT": 130, "SIGTERM": 128 + signal.SIGTERM, "SIGHUP": 128 + 1, "SystemExit": 9}


@posix_only
@pytest.mark.parametrize("how", list(STATUS))
@pytest.mark.parametrize("where", ["after the tool, in run()", "after the tool, in run_call()"])
def test_an_interruption_after_the_tool_returned_leaves_the_call_recorded_as_it_ran(
    tmp_path, where, how
):
    done, events = stopped(tmp_path, where, how)
    assert done.returncode == STATUS[how], done.stderr
    (second,) = results(events, "call_02")
    assert (second["ok"], second["content"]) == (True, WROTE), done.stderr
    assert (tmp_path / "work" / "greeting.txt").read_text() == "hello\n"
    assert events[-1]["status"] in ("interrupted", "error")


@posix_only
@pytest.mark.parametrize("how", ["SIGINT", "SIGTERM"])
def test_an_interruption_while_the_tool_runs_is_recorded_as_interrupted(tmp_path, how):
    done, events = stopped(tmp_path, "in the tool", how)
    assert done.returncode == STATUS[how], done.stderr
    # call_01's write_file fails in check_args(), before its function runs: stopped in call_02's
    (second,) = results(events, "call_02")
    assert second["ok"] is False and second["content"].startswith("interrupted by")
    assert not (tmp_path / "work" / "greeting.txt").exists()


@posix_only
@pytest.mark.parametrize("how", ["SIGINT", "SIGTERM"])
def test_an_approved_call_that_ran_before_an_interruption_is_recorded_as_it_ran(
    agent, server, tmp_path, how
):
    server.add(reply(tool_calls=[call("run_shell", {"command": "echo hi > ran"}, "c1")]))
    made = agent("go")
    assert made.returncode == 4, made.stderr
    words = ["--base-url", server.url, "--workdir", str(agent.workdir), "--model", "test-model"]
    words += ["--resume", str(made.transcript), "--approve"]
    env = clean_env(AGENT_API_KEY=KEY)
    done, events = stopped(tmp_path, "after an approved call, in go_on()", how, *words, env=env)
    assert done.returncode == STATUS[how], done.stderr
    (result,) = results(events, "c1")
    assert (result["ok"], result["content"]) == (True, "(no output)"), done.stderr
    assert (agent.workdir / "ran").read_text() == "hi\n" and len(server.requests) == 1


@posix_only
@pytest.mark.parametrize("how", ["SIGINT", "SIGTERM", "SIGHUP"])
def test_a_command_stopped_while_it_ran_is_recorded_as_begun_and_the_calls_after_as_not(
    agent, server, how
):
    # signal(7): the agent's handlers run between two of Python's instructions, here while it
    # waits for the command; the command began (it wrote "started"), the call after it never did
    agent.workdir.mkdir()
    fd = open_fifo(agent.workdir / "started")
    command = "echo started >started; sleep 600; touch finished"
    then = call("write_file", {"path": "after.txt", "content": "x"}, "c2")
    server.add(reply(tool_calls=[call("run_shell", {"command": command}, "c1"), then]))
    process, transcript = agent.start("--yes", "go")
    assert read_fifo(fd, until_eof=False) == b"started\n"
    os.close(fd)
    process.send_signal(getattr(signal, how))
    process.communicate(timeout=60)
    events = events_of(transcript)
    (began,) = results(events, "c1")
    assert began["ok"] is False and began["content"].endswith(WHILE_IT_RAN), began
    (never,) = results(events, "c2")
    assert WHILE_IT_RAN not in never["content"] and not (agent.workdir / "after.txt").exists()
    # what the model reads on --resume: the command began, and may have done its work
    server.add(reply("checked"))
    went = agent("--resume", str(transcript), "what now")
    sent = {m.get("tool_call_id"): m["content"] for m in server.messages(1) if m["role"] == "tool"}
    assert (
        went.returncode == 0
        and sent["c1"].endswith(WHILE_IT_RAN)
        and sent["c2"] == never["content"]
    )
