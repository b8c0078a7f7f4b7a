"""Commands as processes: time limits, Ctrl-C and signals, background processes, bounded memory."""

import os
import shlex
import signal
import subprocess
import sys
import threading
import tracemalloc

import pytest
from conftest import (
    KEY,
    clean_env,
    events_of,
    linux_only,
    open_fifo,
    posix_only,
    read_fifo,
    shell_then_answer,
    tool_result,
)
from scripted_server import Hang, call, reply

import config
import tools
from realworld import pauses
from tools import ToolError, run_shell


@posix_only
def test_a_command_reading_input_gets_end_of_file_not_the_agents_stdin(agent, server):
    shell_then_answer(server, "cat; echo after-cat")
    agent("go", "--yes", open_stdin=True, env=clean_env(AGENT_API_KEY=KEY, AGENT_SHELL_TIMEOUT="5"))
    assert tool_result(server) == "after-cat\n"


@posix_only
def test_huge_output_reaches_the_model_clipped_with_head_and_tail(loop, server):
    program = "import sys; sys.stdout.write('HEAD' + 'x' * 15_000_000 + 'TAIL')"
    shell_then_answer(server, f"{shlex.quote(sys.executable)} -c {shlex.quote(program)}")
    loop("go", yes=True)
    content = tool_result(server)
    assert content.startswith("HEAD") and content.endswith("TAIL")
    assert "[... 14990208 characters left out ...]" in content
    assert len(content) < 10_100


@posix_only
def test_ctrl_c_during_a_command_kills_it_answers_the_calls_and_exits_130(agent, server):
    agent.workdir.mkdir()
    fd = open_fifo(agent.workdir / "alive")
    # The shell and its background sleep both hold the FIFO: end-of-file means both are gone.
    command = "exec 3>alive; echo started >&3; sleep 600 & wait"
    server.add(
        reply(
            tool_calls=[
                call("run_shell", {"command": command}, id="c1"),
                call("read_file", {"path": "x"}, id="c2"),
            ]
        )
    )
    process, transcript = agent.start("go", "--yes")
    assert read_fifo(fd, until_eof=False) == b"started\n"
    process.send_signal(signal.SIGINT)
    assert read_fifo(fd, until_eof=True) == b""
    _, stderr = process.communicate(timeout=60)
    os.close(fd)
    assert process.returncode == 130
    assert "Traceback" not in stderr
    events = events_of(transcript)
    results = [(e["call_id"], e["content"]) for e in events if e["type"] == "tool/result"]
    began = f"interrupted by the user {pauses.WHILE_IT_RAN}"  # c1 ran when stopped; c2 never did
    assert results == [("c1", began), ("c2", "interrupted by the user")]
    assert events[-1]["type"] == "turn/end" and events[-1]["status"] == "interrupted"


@posix_only
def test_ctrl_c_while_waiting_for_the_model_exits_130(agent, server):
    hang = Hang()
    server.add(hang)
    process, transcript = agent.start("go")
    assert hang.arrived.wait(60)
    process.send_signal(signal.SIGINT)
    _, stderr = process.communicate(timeout=60)
    assert process.returncode == 130
    assert "Traceback" not in stderr
    assert transcript.read_text().splitlines()[-1].count('"status": "interrupted"') == 1


@posix_only
def test_timeout_kills_the_command_and_its_grandchild_and_keeps_the_output(workspace):
    fd = open_fifo(workspace / "alive")
    with pytest.raises(ToolError) as caught:
        run_shell(
            "exec 3>alive; echo started >&3; echo partial; sleep 600 & wait",
            workdir=workspace,
            timeout=1,
        )
    assert str(caught.value).startswith("timed out after 1 seconds and was killed")
    assert "partial" in str(caught.value)
    # end-of-file: the background sleep is gone too
    assert read_fifo(fd, until_eof=True) == b"started\n"


@linux_only
@pytest.mark.parametrize("escape", ["setsid", "double-fork"])
def test_a_process_that_leaves_the_group_is_ended_at_the_timeout_too(workspace, escape):
    # It starts its own session, so killing the group misses it, and it keeps the output pipe open.
    # A shell, started in a few milliseconds, long before the time limit.
    fd = open_fifo(workspace / "escaped")
    start = "setsid sh -c 'exec 3>escaped; printf started >&3; exec sleep 600'"
    command = (
        f"echo before; {start} & sleep 600"
        if escape == "setsid"
        else f"echo before; ({start} &); sleep 600"
    )
    with pytest.raises(ToolError, match="timed out") as caught:
        run_shell(command, workdir=workspace, timeout=1)
    assert "before" in str(caught.value)
    # end-of-file: nothing holds the FIFO any more
    assert read_fifo(fd, until_eof=True) == b"started"


@linux_only
def test_a_background_process_of_a_finished_command_ends_with_the_agent(agent, server):
    agent.workdir.mkdir()
    fd = open_fifo(agent.workdir / "alive")
    os.mkfifo(agent.workdir / "ready")
    # The command ends only once its background process holds the FIFO: `read <ready` waits
    # for the echo into it.
    background = (
        "nohup sh -c 'exec 3>alive; echo started >&3; echo >ready; exec sleep 600' "
        ">/dev/null 2>&1 &"
    )
    shell_then_answer(server, f"{background} read line <ready")
    result = agent("go", "--yes")
    assert result.returncode == 0
    assert read_fifo(fd, until_eof=True) == b"started\n"  # end-of-file: the nohup'd sleep is gone
    os.close(fd)


@linux_only
@pytest.mark.parametrize(("name", "status"), [("SIGTERM", 143), ("SIGHUP", 129)])
def test_sigterm_and_sighup_end_the_command_answer_the_calls_and_exit_128_plus_n(
    agent, server, name, status
):
    agent.workdir.mkdir()
    fd = open_fifo(agent.workdir / "alive")
    command = "exec 3>alive; echo started >&3; setsid sleep 600 & wait"
    server.add(
        reply(
            tool_calls=[
                call("run_shell", {"command": command}, id="c1"),
                call("read_file", {"path": "x"}),
            ]
        )
    )
    process, transcript = agent.start("go", "--yes")
    assert read_fifo(fd, until_eof=False) == b"started\n"
    process.send_signal(getattr(signal, name))
    assert read_fifo(fd, until_eof=True) == b""
    _, stderr = process.communicate(timeout=60)
    os.close(fd)
    assert process.returncode == status and "Traceback" not in stderr
    events = events_of(transcript)
    # A signal, not the person's Ctrl-C: the transcript says which.
    assert [e["content"] for e in events if e["type"] == "tool/result"] == [
        f"interrupted by a signal {pauses.WHILE_IT_RAN}",
        "interrupted by a signal",
    ]
    assert events[-1] == {**events[-1], "type": "turn/end", "status": "interrupted"}


@linux_only
def test_a_command_that_writes_without_end_does_not_grow_memory(agent, server):
    shell_then_answer(server, "yes")
    env = clean_env(AGENT_API_KEY=KEY, AGENT_SHELL_TIMEOUT="1")
    process, _ = agent.start("go", "--yes", env=env, stdin=subprocess.DEVNULL, fresh=True)
    _, status, usage = os.wait4(process.pid, 0)  # the agent's own peak memory, not yes's
    process.returncode = os.waitstatus_to_exitcode(status)
    assert process.returncode == 0
    # KiB: the agent starts near 60 MB; reading it whole took gigabytes
    assert usage.ru_maxrss < 250 * 1024
    assert server.messages(1)[-1]["content"].startswith("error: timed out after 1 seconds")


def test_read_file_reads_no_more_of_a_large_file_than_it_can_return(tmp_path):
    (tmp_path / "big.txt").write_bytes(b"HEAD" + b"a" * 50_000_000 + b"TAIL")
    tracemalloc.start()
    text = tools.read_file("big.txt", workdir=tmp_path)
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert peak < 2_000_000
    assert text.startswith("HEADaaa") and text.endswith("aaaTAIL")
    assert "\n[... 49990008 bytes left out ...]\n" in text and len(text) == config.MAX_OUTPUT + 35


@posix_only
def test_a_timeout_keeps_the_count_of_what_was_left_out(tmp_path):
    # 30,000 characters written in a few milliseconds, long before the time limit
    command = "head -c 30000 /dev/zero | tr '\\0' z; exec sleep 600"
    with pytest.raises(ToolError) as caught:
        tools.run_shell(command, workdir=tmp_path, timeout=1)
    result = tools.clip(f"error: {caught.value}")
    assert f"[... {30000 - (config.MAX_OUTPUT - 200)} characters left out ...]" in result


@linux_only
def test_sigterm_while_the_agent_starts_is_exit_143_without_a_traceback(agent, server):
    hang = Hang()
    server.add(hang)
    process, _ = agent.start("go")
    assert hang.arrived.wait(60)  # the SDK is loaded and the first request sent: now the signal
    process.send_signal(signal.SIGTERM)
    _, stderr = process.communicate(timeout=60)
    assert process.returncode == 143 and "Traceback" not in stderr


def test_threads_are_not_left_behind_by_a_finished_command(tmp_path):
    before = threading.active_count()
    tools.run_shell(f"{shlex.quote(sys.executable)} -c pass", workdir=tmp_path)
    assert threading.active_count() == before
