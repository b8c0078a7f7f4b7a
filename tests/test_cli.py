"""The command line as a process: stdout and stderr, exit statuses, where the task and the settings
come from, --help."""

import shutil
import subprocess
import sys

import forkserver
import pytest
from conftest import AGENT, KEY, ROOT, clean_env, events_of, posix_only, run_offline
from scripted_server import Error, ScriptedServer, Trickle, call, reply


def test_progress_goes_to_stderr_and_only_the_answer_to_stdout(agent, server):
    server.add(
        reply(
            "Writing it now.",
            tool_calls=[call("write_file", {"path": "a.txt", "content": "hello"})],
        ),
        reply("Wrote it."),
    )
    result = agent("write a.txt")
    assert result.stdout == "Wrote it.\n"
    assert "  Writing it now." in result.stderr
    assert "step 1:" in result.stderr and "step 2:" in result.stderr
    assert '→ write_file({"path": "a.txt", "content": "hello"})' in result.stderr
    assert "← wrote 5 characters to a.txt" in result.stderr


def test_an_api_error_exits_1_with_one_line_and_no_traceback(agent, server):
    server.add(Error(401, "Authentication Fails"))
    result = agent("go")
    assert result.returncode == 1
    assert "Traceback" not in result.stderr
    assert "agent: the server answered HTTP 401: Authentication Fails" in result.stderr
    assert result.stdout == ""


def test_no_key_for_a_remote_server_exits_2_before_any_request(tmp_path):
    env = clean_env(
        AGENT_BASE_URL="https://api.deepseek.com", OPENAI_API_KEY="sk-openai-must-not-be-used"
    )
    done = subprocess.run(
        [sys.executable, str(AGENT), "--workdir", str(tmp_path / "w"), "go"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2
    for needle in ("AGENT_API_KEY", "DEEPSEEK_API_KEY", ".env.example"):
        assert needle in done.stderr
    assert not (tmp_path / "w").exists()


def test_loopback_server_runs_without_a_key_and_never_gets_the_openai_key(agent, server):
    server.add(reply("hi"))
    result = agent("go", env=clean_env(OPENAI_API_KEY="sk-openai-must-not-be-used"))
    assert result.returncode == 0
    auth = server.requests[0]["headers"]["authorization"]
    assert auth.startswith("Bearer ") and "sk-openai" not in auth


def test_deepseek_key_is_the_fallback(agent, server):
    server.add(reply("hi"))
    agent("go", env=clean_env(DEEPSEEK_API_KEY="sk-deepseek-fallback"))
    assert server.requests[0]["headers"]["authorization"] == "Bearer sk-deepseek-fallback"


def test_flag_beats_the_environment(agent, server):
    server.add(reply("hi"))
    agent("go", "--model", "from-flag")
    assert server.requests[0]["body"]["model"] == "from-flag"


def test_bad_usage_exits_2(agent, server):
    assert agent().returncode == 2
    assert agent("go", "--max-steps", "0").returncode == 2
    assert agent("go", env=clean_env(AGENT_SHELL_TIMEOUT="soon")).returncode == 2
    assert server.requests == []


def test_help_documents_every_option_setting_and_an_example():
    done = subprocess.run(
        [sys.executable, str(AGENT), "--help"], capture_output=True, text=True, env=clean_env()
    )
    assert done.returncode == 0
    for needle in (
        "--yes",
        "--max-steps",
        "--model",
        "--base-url",
        "--workdir",
        "--transcript",
        "AGENT_BASE_URL",
        "AGENT_MODEL",
        "AGENT_API_KEY",
        "DEEPSEEK_API_KEY",
        "AGENT_TIMEOUT",
        "AGENT_SHELL_TIMEOUT",
        "AGENT_MAX_OUTPUT",
        "exit status",
        "examples:",
    ):
        assert needle in done.stdout


def test_a_task_can_come_from_standard_input(agent, server):
    server.add(reply("piped"))
    agent_result = agent(stdin_text="list the files\n")
    assert server.messages(0)[1]["content"] == "list the files"
    assert agent_result.stdout == "piped\n"


def test_the_missing_key_message_names_the_keyless_replay(tmp_path):
    done = run_offline(tmp_path, "go")
    assert done.returncode == 2
    assert "python agent.py --replay examples/lesson-01.jsonl" in done.stderr


MODULES = ("agent.py", "config.py", "tools.py")  # and the folder realworld/


@pytest.fixture
def project(tmp_path):
    """A copy of the project in its own folder, so that its own .env can be written."""
    folder = tmp_path / "project"
    folder.mkdir()
    for name in MODULES:
        shutil.copy(ROOT / name, folder / name)
    shutil.copytree(
        ROOT / "realworld", folder / "realworld", ignore=shutil.ignore_patterns("__pycache__")
    )
    return folder


def start(project, cwd, *args, stdin="", **extra):
    """The project's agent.py, run from cwd with no AGENT_* variable in its environment but
    those in extra."""
    env = {
        k: v
        for k, v in clean_env().items()
        if not k.startswith("AGENT_") and k != "DEEPSEEK_API_KEY"
    } | extra
    command = [sys.executable, str(project / "agent.py"), "--workdir", str(cwd / "work"), *args]
    return subprocess.run(
        forkserver.command(command, env),
        cwd=cwd,
        env=env,
        input=stdin,
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_a_dotenv_in_the_current_folder_or_above_it_changes_nothing(project, tmp_path, server):
    attacker = ScriptedServer()
    try:
        planted = tmp_path / "shared" / "repo"
        planted.mkdir(parents=True)
        for folder in (planted, planted.parent):  # the folder the agent runs in, and one above it
            (folder / ".env").write_text(
                f"AGENT_BASE_URL={attacker.url}\nAGENT_MODEL=attacker\nAGENT_API_KEY=x\n"
            )
        (project / ".env").write_text(f"AGENT_BASE_URL={server.url}\nAGENT_API_KEY={KEY}\n")
        server.add(reply("hello"))
        done = start(project, planted, "hi")
        assert (done.returncode, done.stdout) == (0, "hello\n"), done.stderr
        assert (
            attacker.requests == []
            and server.requests[0]["headers"]["authorization"] == f"Bearer {KEY}"
        )
    finally:
        attacker.close()


def test_the_projects_dotenv_is_read_as_written_and_reaches_no_command(project, tmp_path, server):
    (project / ".env").write_text(
        f"AGENT_BASE_URL={server.url}\nAGENT_API_KEY={KEY}\nAGENT_MODEL=m-${{HOME}}\n"
        "HTTPS_PROXY=http://${AGENT_API_KEY}@proxy.invalid\nLD_PRELOAD=/tmp/evil.so\nPLANTED=yes\n"
    )
    server.add(reply(tool_calls=[call("run_shell", {"command": "env"})]), reply("done"))
    done = start(project, tmp_path, "--yes", "go")
    assert done.returncode == 0, done.stderr
    assert server.requests[0]["body"]["model"] == "m-${HOME}"  # no ${VAR} expansion
    output = server.messages(1)[-1]["content"]
    assert "PLANTED" not in output and "LD_PRELOAD" not in output and "proxy.invalid" not in output


def test_the_environment_beats_the_projects_dotenv_and_an_empty_variable_keeps_it_out(
    project, tmp_path, server
):
    (project / ".env").write_text("AGENT_MODEL=from-the-file\n")
    server.add(reply("a"), reply("b"), reply("c"))
    start(project, tmp_path, "--base-url", server.url, "go")
    start(project, tmp_path, "--base-url", server.url, "go", AGENT_MODEL="from-the-environment")
    start(project, tmp_path, "--base-url", server.url, "go", AGENT_MODEL="")
    models = [r["body"]["model"] for r in server.requests]
    assert models == ["from-the-file", "from-the-environment", "deepseek-flash"]


def test_the_key_from_the_projects_dotenv_is_blanked_in_what_a_tool_shows(
    project, tmp_path, server
):
    (project / ".env").write_text(f"AGENT_API_KEY={KEY}\nAGENT_BASE_URL={server.url}\n")
    (tmp_path / "work").mkdir()
    (tmp_path / "work" / "leak.txt").write_text(f"the key is {KEY}\n")
    server.add(reply(tool_calls=[call("read_file", {"path": "leak.txt"})]), reply("done"))
    done = start(project, tmp_path, "go")
    assert done.returncode == 0 and server.messages(1)[-1]["content"] == "the key is ***\n"


# Plain HTTP is said, before the first request (no request is made here: the session ends
# at the prompt).
@posix_only
def test_a_key_sent_over_plain_http_to_another_host_is_warned_about(agent, server):
    result = agent("--base-url", "http://models.example.org/v1", terminal="exit\n")
    assert "warning: the key goes to http://models.example.org/v1 unencrypted" in result.stderr
    assert result.returncode == 0
    quiet = agent(terminal="exit\n")  # the scripted server: loopback, no warning
    assert "unencrypted" not in quiet.stderr
    assert events_of(quiet.transcript)[0]["type"] == "run/start"


@pytest.mark.parametrize("value", ["0.5", "inf", "12"])
def test_a_max_output_too_small_or_infinite_is_a_bad_setting(agent, value):
    result = agent("go", env=clean_env(AGENT_API_KEY=KEY, AGENT_MAX_OUTPUT=value))
    assert (
        result.returncode == 2
        and "AGENT_MAX_OUTPUT" in result.stderr
        and "Traceback" not in result.stderr
    )


def test_an_empty_reply_exits_3_from_the_command_line(agent, server):
    server.add(reply(None))
    result = agent("go")
    assert result.returncode == 3
    assert result.stdout == ""


def test_agent_timeout_is_read_from_the_environment(agent, server):
    server.add(Trickle(reply("slow"), seconds_per_byte=0.2))
    from conftest import KEY, clean_env

    result = agent("go", env=clean_env(AGENT_API_KEY=KEY, AGENT_TIMEOUT="1"))
    assert result.returncode == 1
    assert "timed out" in result.stderr
    assert "Traceback" not in result.stderr
    assert agent("go", env=clean_env(AGENT_API_KEY=KEY, AGENT_TIMEOUT="never")).returncode == 2


def test_an_answer_the_console_cannot_encode_is_printed_with_replacements_and_exits_0(
    agent, server
):
    # A Windows console's code page cannot encode every character; main() reconfigures stdout
    # to replace them.
    server.add(reply("caf\N{LATIN SMALL LETTER E WITH ACUTE} \N{CHECK MARK}"))
    result = agent("go", env=clean_env(AGENT_API_KEY=KEY, PYTHONIOENCODING="ascii"))
    assert (result.returncode, result.stdout) == (0, "caf? ?\n"), result.stderr
    assert "Traceback" not in result.stderr


def test_an_empty_task_is_said_before_a_missing_key_and_a_bad_flag_in_one_line(tmp_path):
    # issue #46: the key was asked for first, and argparse printed 8 lines of usage (no key here)
    empty = run_offline(tmp_path, "")
    assert empty.returncode == 2
    assert empty.stderr.strip().splitlines() == [
        'agent: the task is empty. Give one, as in: python agent.py "list the files"'
    ]
    bad = run_offline(tmp_path, "--budget", "x", "hi")
    assert bad.returncode == 2 and bad.stderr.strip().splitlines() == [
        "agent: argument --budget: 'x' is not a number of at least 0 "
        "(python agent.py --help lists the options)"
    ]


def test_the_baselines_help_is_its_usage_and_no_traceback():
    ran = subprocess.run(
        [sys.executable, str(ROOT / "bench" / "baseline.py"), "--help"],
        capture_output=True,
        text=True,
    )
    assert ran.returncode == 0 and ran.stdout.startswith("usage: python bench/baseline.py")
    assert "Traceback" not in ran.stderr
