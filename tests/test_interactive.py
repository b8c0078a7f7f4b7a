"""Interactive mode: one conversation, task after task typed at a terminal, until exit,
Ctrl-D or a signal."""

import itertools
import os
import select
import signal

import pytest
from conftest import events_of, posix_only
from scripted_server import Error, Hang, reply

from realworld import runs


def at_a_terminal(agent):
    """Start the agent with a pseudo-terminal as its standard input; return the process, the
    terminal's end a person types into, and the transcript."""
    import pty  # POSIX only, like the tests that use it

    terminal, tty = pty.openpty()
    process, transcript = agent.start(stdin=tty)
    os.close(tty)
    return process, terminal, transcript


def wait_for_prompts(process, count: int) -> str:
    """Read the agent's stderr until it has shown count more prompts; fail after 60 s of silence."""
    shown = b""
    while shown.count(b"> ") < count:
        ready, _, _ = select.select([process.stderr], [], [], 60)
        assert ready, f"no prompt; the agent said: {shown.decode()!r}"
        chunk = os.read(process.stderr.fileno(), 4096)
        assert chunk, f"the agent ended; it said: {shown.decode()!r}"
        shown += chunk
    return shown.decode()


@posix_only
def test_interactive_mode_keeps_one_conversation_until_exit(agent, server):
    server.add(reply("first answer"), reply("second answer"))
    result = agent(terminal="first task\n\nsecond task\nexit\n")
    assert result.returncode == 0
    assert result.stdout == "first answer\nsecond answer\n"
    assert [m["content"] for m in server.messages(1)[1:]] == [
        "first task",
        "first answer",
        "second task",
    ]
    assert len(server.requests) == 2


@posix_only
def test_interactive_mode_ends_on_ctrl_d(agent, server):
    server.add(reply("only"))
    result = agent(terminal="one task\n\x04")
    assert result.returncode == 0 and result.stdout == "only\n"


@posix_only
def test_ctrl_c_in_interactive_mode_interrupts_the_turn_and_returns_to_the_prompt(agent, server):
    import pty

    hang = Hang()
    server.add(hang, reply("after the interrupt"))
    terminal, tty = pty.openpty()
    os.write(terminal, b"slow task\nnext task\nexit\n")
    process, transcript = agent.start(stdin=tty)
    os.close(tty)
    assert hang.arrived.wait(60)
    process.send_signal(signal.SIGINT)
    stdout, stderr = process.communicate(timeout=60)
    os.close(terminal)
    assert process.returncode == 0, stderr
    assert stdout == "after the interrupt\n"
    assert [e["status"] for e in events_of(transcript) if e["type"] == "turn/end"] == [
        "interrupted",
        "answered",
    ]
    # the next task follows an answer: a strict chat template refuses two user messages in a row
    assert [m["content"] for m in server.messages(1)[1:]] == [
        "slow task",
        "(no answer: interrupted by the user)",
        "next task",
    ]


@posix_only
def test_ctrl_c_while_compacting_after_a_refusal_leaves_the_next_task_sendable(agent, server):
    import pty

    summary = Hang()
    too_long = "This model's maximum context length is 2048 tokens"
    server.add(reply("first answer"), Error(400, too_long, times=1), summary, reply("third"))
    terminal, tty = pty.openpty()
    os.write(terminal, b"first task\nsecond task\nthird task\nexit\n")
    process, transcript = agent.start(stdin=tty)
    os.close(tty)
    assert summary.arrived.wait(60)  # the second task was refused: the agent asks for a summary
    process.send_signal(signal.SIGINT)
    stdout, stderr = process.communicate(timeout=60)
    os.close(terminal)
    assert (process.returncode, stdout) == (0, "first answer\nthird\n"), stderr
    assert [m["content"] for m in server.messages(-1)[1:]] == [
        "first task",
        "first answer",
        "second task",
        "(no answer: interrupted by the user)",
        "third task",
    ]
    assert runs.conversation(events_of(transcript))[1:-1] == server.messages(-1)[1:]


@posix_only
def test_a_task_still_too_long_after_compacting_leaves_the_next_task_sendable(agent, server):
    too_long = "This model's maximum context length is 2048 tokens"
    server.add(
        reply("first answer"),
        Error(400, too_long, times=1),  # the long task: the first task can be compacted
        reply("the summary of the first task"),
        Error(400, too_long, times=1),  # sent again, compacted: still too long
        reply("a small answer"),
    )
    done = agent(terminal="first task\na long task\na small task\nexit\n")
    assert done.stdout == "first answer\na small answer\n", done.stderr
    assert "still too long after compacting" in done.stderr
    sent = server.messages(-1)
    roles = [m["role"] for m in sent]
    assert roles[-2:] == ["assistant", "user"] and ("user", "user") not in itertools.pairwise(roles)
    assert sent[-2]["content"] == "(no answer: too long for the model's context window)"


def test_a_task_too_long_on_its_own_is_refused_once_and_the_next_task_is_sendable(agent, server):
    too_long = "This model's maximum context length is 2048 tokens"
    server.add(Error(400, too_long, times=1), reply("a small answer"))
    done = agent(terminal="a long task\na small task\nexit\n")
    assert done.stdout == "a small answer\n", done.stderr
    assert done.stderr.count(too_long) == 1 and "compacting" not in done.stderr
    assert len(server.requests) == 2  # nothing to compact: not sent again
    sent = server.messages(-1)
    assert [m["role"] for m in sent] == ["system", "user", "assistant", "user"]
    assert sent[2]["content"] == "(no answer: too long for the model's context window)"


@posix_only
def test_ctrl_c_at_the_prompt_gives_a_new_prompt_and_the_session_goes_on(agent, server):
    server.add(reply("still here"))
    process, terminal, transcript = at_a_terminal(agent)
    wait_for_prompts(process, 1)
    process.send_signal(signal.SIGINT)  # nothing typed yet: the agent is reading the terminal
    wait_for_prompts(process, 1)  # the next one
    os.write(terminal, b"a task\nexit\n")
    stdout, stderr = process.communicate(timeout=60)
    os.close(terminal)
    assert (process.returncode, stdout) == (0, "still here\n"), stderr
    assert "Traceback" not in stderr and "interrupted" not in stderr
    assert [e["status"] for e in events_of(transcript) if e["type"] == "turn/end"] == ["answered"]


@posix_only
@pytest.mark.parametrize(("name", "status"), [("SIGTERM", 143), ("SIGHUP", 129)])
def test_sigterm_and_sighup_during_a_session_end_the_turn_and_exit_128_plus_n(
    agent, server, name, status
):
    hang = Hang()
    server.add(reply("first answer"), hang)
    process, terminal, transcript = at_a_terminal(agent)
    os.write(terminal, b"first task\nslow task\nnext task\n")
    assert hang.arrived.wait(60)  # the second turn is waiting on the model
    process.send_signal(getattr(signal, name))
    stdout, stderr = process.communicate(timeout=60)
    os.close(terminal)
    assert (process.returncode, stdout) == (status, "first answer\n"), stderr
    assert "Traceback" not in stderr
    events = events_of(transcript)
    assert [e["status"] for e in events if e["type"] == "turn/end"] == ["answered", "interrupted"]
    # the next task never began
    assert events[-1]["type"] == "turn/end" and len(server.requests) == 2
