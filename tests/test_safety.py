"""Tool safety seen from outside: consent, closed input, clipping, the key, Ctrl-C."""

import os
import shlex
import signal
import sys

from conftest import KEY, clean_env, events_of, open_fifo, posix_only, read_fifo
from scripted_server import Hang, call, reply


def shell_then_answer(server, command: str) -> None:
    server.add(reply(tool_calls=[call("run_shell", {"command": command}, id="sh1")]), reply("done"))


def tool_result(server) -> str:
    return server.messages(1)[-1]["content"]


@posix_only
def test_consent_y_runs_the_command_shown_on_the_terminal(agent, server):
    shell_then_answer(server, "touch ran.txt")
    result = agent("go", terminal="y\n")
    assert (agent.workdir / "ran.txt").exists()
    assert "touch ran.txt" in result.stderr and "Run this command? [y/N]" in result.stderr
    assert tool_result(server) == "(no output)"


@posix_only
def test_consent_n_declines_and_runs_nothing(agent, server):
    shell_then_answer(server, "touch ran.txt")
    agent("go", terminal="n\n")
    assert not (agent.workdir / "ran.txt").exists()
    assert tool_result(server) == "error: declined by the user"


@posix_only
def test_consent_n_with_a_reason_tells_the_model_the_reason(agent, server):
    shell_then_answer(server, "rm -rf build")
    agent("go", terminal="n use ls -la instead\n")
    assert tool_result(server) == "error: declined by the user: use ls -la instead"


def test_without_a_terminal_or_yes_the_command_is_declined_without_waiting(agent, server):
    shell_then_answer(server, "touch ran.txt")
    result = agent("go", open_stdin=True)  # a pipe nobody writes to: waiting on it would hang
    assert not (agent.workdir / "ran.txt").exists()
    assert "could not be asked" in tool_result(server)
    assert "--yes" in result.stderr
    assert result.returncode == 0


def test_run_called_from_python_without_yes_asks_no_one_and_declines(loop, server):
    shell_then_answer(server, "touch ran.txt")
    loop("go")  # pytest's standard input is no terminal
    assert not (loop.workdir / "ran.txt").exists()
    assert "could not be asked" in tool_result(server)


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
def test_the_api_key_is_not_in_the_commands_environment(agent, server):
    shell_then_answer(server, "env")
    env = clean_env(AGENT_API_KEY=KEY, OPENAI_API_KEY="sk-openai-other", COPY_OF_KEY=KEY, HARMLESS="visible")
    agent("go", "--yes", env=env)
    content = tool_result(server)
    assert "HARMLESS=visible" in content
    for secret in (KEY, "sk-openai-other", "AGENT_API_KEY", "DEEPSEEK_API_KEY", "OPENAI_API_KEY"):
        assert secret not in content


@posix_only
def test_ctrl_c_during_a_command_kills_it_answers_the_calls_and_exits_130(agent, server):
    agent.workdir.mkdir()
    fd = open_fifo(agent.workdir / "alive")
    # The shell and its background sleep both hold the FIFO: end-of-file means both are gone.
    command = "exec 3>alive; echo started >&3; sleep 600 & wait"
    server.add(
        reply(tool_calls=[call("run_shell", {"command": command}, id="c1"), call("read_file", {"path": "x"}, id="c2")])
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
    assert results == [("c1", "interrupted by the user"), ("c2", "interrupted by the user")]
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
