"""API errors and the transcript (in this process); the command line: exit statuses, settings, help (as a process)."""

import json
import socket
import subprocess
import sys

import openai
from conftest import AGENT, KEY, clean_env, posix_only
from scripted_server import Error, call, reply

import agent as agent_module
import servers
import transcripts


def test_progress_goes_to_stderr_and_only_the_answer_to_stdout(agent, server):
    server.add(
        reply("Writing it now.", tool_calls=[call("write_file", {"path": "a.txt", "content": "hello"})]),
        reply("Wrote it."),
    )
    result = agent("write a.txt")
    assert result.stdout == "Wrote it.\n"
    assert "  Writing it now." in result.stderr
    assert "step 1:" in result.stderr and "step 2:" in result.stderr
    assert '→ write_file({"path": "a.txt", "content": "hello"})' in result.stderr
    assert "← wrote 5 characters to a.txt" in result.stderr


@posix_only
def test_with_yes_a_shell_command_runs_in_the_workspace(loop, server):
    server.add(reply(tool_calls=[call("run_shell", {"command": "echo hi > ran && cat ran"})]), reply("ok"))
    loop("touch", yes=True)
    assert (loop.workdir / "ran").exists()
    assert server.messages(1)[-1]["content"] == "hi\n"


def assert_one_clear_line(result, *needles):
    assert result.status == "api_error"
    assert "Traceback" not in result.stderr
    error = result.stderr[result.stderr.index("agent: ") :].splitlines()[:2]
    for needle in needles:
        assert needle in "\n".join(error)


def test_401_names_the_key_settings_and_exits_1(loop, server):
    server.add(Error(401, "Authentication Fails, Your api key: ****cret is invalid"))
    result = loop("go")
    assert_one_clear_line(result, "HTTP 401", "Authentication Fails", "AGENT_API_KEY")
    assert len(server.requests) == 1  # an auth error is not retried


def test_429_is_retried_by_the_sdk_then_exits_1(loop, server):
    server.add(Error(429, "Rate limit reached"))
    result = loop("go")
    assert_one_clear_line(result, "HTTP 429", "Rate limit reached")
    assert len(server.requests) == 3


def test_500_exits_1_with_the_server_message(loop, server):
    server.add(Error(500, "upstream exploded"))
    assert_one_clear_line(loop("go"), "HTTP 500", "upstream exploded")


def test_retired_model_is_named_in_the_hint(loop, server):
    server.add(Error(400, "Model Not Exist: deepseek-chat"))
    result = loop("go", model="deepseek-chat")
    assert_one_clear_line(result, "HTTP 400", "retired in July 2026", "deepseek-flash")


def test_403_points_at_the_keys_permissions(loop, server):
    server.add(Error(403, "not allowed for this model"))
    assert_one_clear_line(loop("go"), "HTTP 403", "not allowed for this model", "may use this model")


def test_a_timeout_is_explained_in_one_line():
    explained = servers.explain(openai.APITimeoutError(request=None), "http://h/v1", "m")  # the request rides along
    assert explained.startswith("the request to http://h/v1 timed out")
    assert "\n" not in explained


def test_404_points_at_the_base_url(loop, server):
    server.add(Error(404, "no route"))
    assert_one_clear_line(loop("go"), "HTTP 404", "AGENT_BASE_URL")


def test_refused_connection_is_one_line_naming_the_address(tmp_path, capsys):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # closed again below: nothing listens there
    url = f"http://127.0.0.1:{port}/v1"
    outcome = agent_module.run("go", client=servers.make_client(url, KEY, 60), workdir=tmp_path)
    assert outcome.status == "api_error"
    assert f"could not reach {url}" in outcome.text
    assert "Traceback" not in capsys.readouterr().err


def test_an_api_error_exits_1_with_one_line_and_no_traceback(agent, server):
    server.add(Error(401, "Authentication Fails"))
    result = agent("go")
    assert result.returncode == 1
    assert "Traceback" not in result.stderr
    assert "agent: the server answered HTTP 401: Authentication Fails" in result.stderr
    assert result.stdout == ""


def test_a_reply_that_is_not_a_completion_exits_1(loop, server):
    server.add({"error": {"message": "provider overloaded"}})
    result = loop("go")
    assert_one_clear_line(result, "reported an error instead of a reply: provider overloaded")


def test_a_reply_that_is_not_json_exits_1(loop, server):
    server.add("<html>this is not json")
    assert_one_clear_line(loop("go"), "not a chat completion", "AGENT_BASE_URL")


def test_a_non_function_tool_call_is_answered_not_fatal(loop, server):
    custom = {"id": "c1", "type": "custom", "custom": {"name": "grep", "input": "x"}}
    server.add(reply(tool_calls=[custom]), reply("done"))
    result = loop("go")
    assert result.status == "answered"
    assert server.messages(1)[-1]["content"].startswith("error: unknown tool ''")


def test_no_key_for_a_remote_server_exits_2_before_any_request(tmp_path):
    env = clean_env(AGENT_BASE_URL="https://api.deepseek.com", OPENAI_API_KEY="sk-openai-must-not-be-used")
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


def test_an_existing_transcript_is_never_overwritten(agent, server, tmp_path):
    existing = tmp_path / "keep.jsonl"
    existing.write_text("precious\n")
    result = agent("go", "--transcript", str(existing))
    assert result.returncode == 2
    assert existing.read_text() == "precious\n"


def test_help_documents_every_option_setting_and_an_example():
    done = subprocess.run([sys.executable, str(AGENT), "--help"], capture_output=True, text=True, env=clean_env())
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


def test_transcript_records_each_event_in_order_and_never_the_key(agent, server):
    server.add(reply(tool_calls=[call("read_file", {"path": "nope"})]), reply("done"))
    result = agent("go")
    types = [e["type"] for e in result.events()]
    assert types == ["run/start", "user/message", "assistant/message", "tool/result", "assistant/message", "turn/end"]
    start, tool, end = result.events()[0], result.events()[3], result.events()[-1]
    assert start["model"] == "test-model" and start["base_url"] == server.url and start["system_prompt"]
    assert tool["ok"] is False and tool["name"] == "read_file"
    assert end["status"] == "answered"
    assert result.events()[2]["finish_reason"] == "tool_calls"
    assert "latency_ms" in result.events()[2] and result.events()[2]["usage"]["prompt_tokens"] == 10
    assert KEY not in result.transcript.read_text()


def test_transcript_rebuilds_the_messages_exactly(agent, server):
    server.add(
        reply("let me see", tool_calls=[call("write_file", {"path": "a", "content": "1"})], reasoning_content="plan"),
        reply(tool_calls=[call("read_file", {"path": "a"}), call("bogus", "{")]),
        reply("done"),
    )
    result = agent("go")
    messages = transcripts.rebuild(result.events())  # what --resume starts from
    assert json.dumps(messages[:-1]) == json.dumps(server.messages(-1))
    assert messages[-1]["content"] == "done"


def test_api_failure_is_recorded_in_the_transcript(loop, server):
    server.add(Error(401, "bad key"))
    result = loop("go")
    assert result.events()[-1]["type"] == "turn/end"
    assert result.events()[-1]["status"] == "api_error"
