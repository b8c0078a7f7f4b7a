"""Ctrl-C in run() from Python (issue 35): wherever it comes (in the SDK's first import of a
module, while the server is silent, in the middle of a stream, while a command runs, while the
person is asked for a yes), run() raises KeyboardInterrupt with a traceback that ends in agent.py,
and leaves messages as the next run() can send them: every call answered, no two user messages
in a row.

Each test starts a real Python process that does what a person at a Python prompt does (PERSON,
below): run() a task, Ctrl-C, print the traceback, run() the next task with the same messages. The
scripted server, like a strict chat template (Mistral's, Gemma's), refuses two user messages in a
row.
"""

import json
import os
import re
import select
import signal
import subprocess
import sys

import forkserver
import pytest
from conftest import (
    AGENT,
    ROOT,
    as_at_a_terminal,
    clean_env,
    events_of,
    open_fifo,
    posix_only,
    read_fifo,
)
from scripted_server import Hang, Stream, call, history_problem, reply, roles_problem

from agent import SYSTEM_PROMPT
from realworld import runs
from realworld.pauses import WHILE_IT_RAN

PERSON = '''
import importlib.abc, json, os, signal, sys, traceback

root, url, workdir, transcript_path, where = sys.argv[1:]
sys.path.insert(0, root)
import agent
from realworld import replies


class FirstUse(importlib.abc.MetaPathFinder):
    """Ctrl-C as a module is imported: with a client given, one the SDK imports for client.chat
    on first use (openai.resources.chat.chat is half imported then, at its import of it); with
    none, the SDK itself, which run() imports to make the settings' client."""

    def __init__(self, name):
        self.name = name

    def find_spec(self, name, path, target=None):
        if name == self.name:
            sys.meta_path.remove(self)
            print(f"importing {name}", file=sys.stderr, flush=True)
            os.kill(os.getpid(), signal.SIGINT)
        return None


if where == "import":
    sys.meta_path.insert(0, FirstUse("openai.resources.chat.completions.completions"))
if where == "settings":  # no client given: AGENT_BASE_URL names the server
    sys.meta_path.insert(0, FirstUse("openai"))
    client = None
else:
    import openai

    client = openai.OpenAI(base_url=url, api_key="none")
if where == "stream":
    client = replies.Client(client, stream=True)
messages = [{"role": "system", "content": agent.SYSTEM_PROMPT}]
with open(transcript_path, "x", encoding="utf-8") as transcript:
    first = {"client": client, "workdir": workdir, "transcript": transcript}
    try:
        agent.run("first task", messages, yes=where == "tool", **first)
    except KeyboardInterrupt:
        traceback.print_exc()
    outcome = agent.run("second task", messages, **first)
print(json.dumps({"outcome": list(outcome), "messages": messages}))
'''


def start(tmp_path, server, where: str, stdin=subprocess.DEVNULL):
    """The person's process, started as from a terminal (SIGINT as a shell hands it over); by a
    new interpreter where the SDK, or the part it imports on first use, must not be imported yet
    (forkserver.py imports both)."""
    script = tmp_path / "person.py"
    script.write_text(PERSON, encoding="utf-8")
    (tmp_path / "work").mkdir(exist_ok=True)
    transcript = tmp_path / "run.jsonl"
    argv = [sys.executable, str(script), str(ROOT), server.url, str(tmp_path / "work")]
    argv += [str(transcript), where]
    env = clean_env(AGENT_BASE_URL=server.url)
    process = subprocess.Popen(
        argv if where in ("settings", "import") else forkserver.command(argv, env),
        preexec_fn=as_at_a_terminal,  # Ctrl-C's signal, even under a background job
        cwd=tmp_path,
        env=env,
        stdin=stdin,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    return process, script, transcript


def read_until(process, marker: bytes) -> bytes:
    """What the process wrote on stderr up to marker, where it waits; fails after 60 s of
    silence."""
    said = b""
    while marker not in said:
        ready, _, _ = select.select([process.stderr], [], [], 60)
        assert ready, f"no {marker!r}; it said: {said.decode()!r}"
        chunk = os.read(process.stderr.fileno(), 4096)
        assert chunk, f"it ended before {marker!r}; it said: {said.decode()!r}"
        said += chunk
    return said


def ended(process, said: bytes = b"") -> tuple[dict, str]:
    """What the process printed at its end: the second run's outcome and messages, and all it
    said on stderr."""
    stdout, stderr = process.communicate(timeout=60)
    stderr = (said + stderr).decode()
    assert process.returncode == 0, stderr
    return json.loads(stdout), stderr


def traceback_ends_in_the_loop(stderr: str, script, line: str) -> None:
    """The traceback the person saw: their own line, then the line of run() where Ctrl-C stopped
    it; no frame of the SDK, httpx, importlib, threading or subprocess, no exception it came in
    the middle of."""
    assert stderr.count("Traceback (most recent call last):") == 1, stderr
    files = re.findall(r'^  File "([^"]+)", line \d+, in (\S+)$', stderr, re.M)
    assert files == [(str(script), "<module>"), (str(AGENT), "run")], stderr
    assert line in stderr.split(f'File "{AGENT}"')[1].splitlines()[1], stderr
    assert "site-packages" not in stderr and "During handling" not in stderr
    assert "\nKeyboardInterrupt\n" in stderr


def sent_again(server, done: dict, transcript) -> list[dict]:
    """The second run's request: answered, accepted by a strict server, as the transcript reads
    it and as the person's messages hold it; its messages."""
    assert done["outcome"] == ["answered", "done"]
    sent = server.messages(-1)
    assert history_problem(sent) is None and roles_problem(sent) is None
    assert done["messages"] == [*sent, {"role": "assistant", "content": "done"}]
    events = events_of(transcript)
    assert runs.requests(events)[-1].messages == sent  # --show, the page, a replay
    assert runs.conversation(events) == done["messages"]  # --resume
    return sent


NO_ANSWER = {"role": "assistant", "content": "(no answer: interrupted by the user)"}
STARTED = [{"role": "system", "content": SYSTEM_PROMPT}, {"role": "user", "content": "first task"}]
SECOND = {"role": "user", "content": "second task"}


@posix_only
def test_ctrl_c_while_the_sdk_imports_on_first_use_is_a_short_traceback_and_run_goes_on(
    server, tmp_path
):
    server.add(reply("done"))
    process, script, transcript = start(tmp_path, server, "import")
    done, stderr = ended(process)
    assert "importing openai.resources.chat.completions.completions" in stderr
    traceback_ends_in_the_loop(stderr, script, "client.chat.completions.create(")
    assert len(server.requests) == 1  # the first task's request was never sent
    assert sent_again(server, done, transcript) == [*STARTED, NO_ANSWER, SECOND]


@posix_only
def test_ctrl_c_while_run_imports_the_sdk_for_the_settings_client_leaves_no_task_behind(
    server, tmp_path
):
    server.add(reply("done"))
    process, script, transcript = start(tmp_path, server, "settings")
    done, stderr = ended(process)
    assert "importing openai\n" in stderr
    traceback_ends_in_the_loop(stderr, script, "client = replies.wrap(client, budget)")
    # stopped before the task was taken: the next one is the conversation's first
    assert sent_again(server, done, transcript) == [STARTED[0], SECOND]


@posix_only
@pytest.mark.parametrize("where", ["request", "stream"])
def test_ctrl_c_while_the_reply_is_awaited_is_a_short_traceback_and_the_task_is_answered(
    server, tmp_path, where
):
    if where == "request":
        held, then = Hang(), reply("done")
    else:
        held, then = Stream(reply("Hello, I am still"), hold=True), Stream(reply("done"))
    server.add(held, then)
    process, script, transcript = start(tmp_path, server, where)
    assert held.arrived.wait(60)  # the server has the request (and has sent part of the stream)
    process.send_signal(signal.SIGINT)
    done, stderr = ended(process)
    traceback_ends_in_the_loop(stderr, script, "client.chat.completions.create(")
    sent = sent_again(server, done, transcript)
    assert sent == [*STARTED, NO_ANSWER, SECOND]
    [no_reply] = [e for e in events_of(transcript) if runs.is_no_reply(e)]
    assert no_reply["no_reply"] == "interrupted by the user"  # the transcript says what happened


@posix_only
def test_ctrl_c_while_a_command_runs_is_a_short_traceback_and_every_call_is_answered(
    server, tmp_path
):
    (tmp_path / "work").mkdir()
    fd = open_fifo(tmp_path / "work" / "started")
    shell = call("run_shell", {"command": "echo started >started; exec sleep 600"}, id="c1")
    server.add(reply(tool_calls=[shell]), reply("done"))
    process, script, transcript = start(tmp_path, server, "tool")
    assert read_fifo(fd, until_eof=False) == b"started\n"  # the command runs
    os.close(fd)
    process.send_signal(signal.SIGINT)
    done, stderr = ended(process)
    traceback_ends_in_the_loop(stderr, script, "run_call(")
    sent = sent_again(server, done, transcript)
    assert [m["role"] for m in sent] == ["system", "user", "assistant", "tool", "user"]
    assert sent[3] == {
        "role": "tool",
        "tool_call_id": "c1",
        "content": f"interrupted by the user {WHILE_IT_RAN}",
    }


@posix_only
def test_ctrl_c_while_asked_for_a_yes_is_a_short_traceback_and_the_command_is_answered(
    server, tmp_path
):
    import pty  # POSIX only, like the tests that use it

    shell = call("run_shell", {"command": "touch ran"}, id="c1")
    server.add(reply(tool_calls=[shell]), reply("done"))
    terminal, tty = pty.openpty()
    process, script, transcript = start(tmp_path, server, "yes", stdin=tty)
    os.close(tty)
    said = read_until(process, b"[y/N] ")  # nothing typed: it waits for the person
    process.send_signal(signal.SIGINT)
    done, stderr = ended(process, said)
    os.close(terminal)
    traceback_ends_in_the_loop(stderr, script, "run_call(")
    sent = sent_again(server, done, transcript)
    assert [m["role"] for m in sent] == ["system", "user", "assistant", "tool", "user"]
    assert sent[3] == {"role": "tool", "tool_call_id": "c1", "content": "interrupted by the user"}
    assert not (tmp_path / "work" / "ran").exists()
