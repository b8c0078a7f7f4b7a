"""What the model, a file or a server sends can't fool the person, leak the key, escape
or crash the agent.

The README section "Safety" says what each guard does and what it cannot stop."""

import functools
import json
import os
import subprocess
import sys

import pytest
from conftest import AGENT, KEY, clean_env, posix_only, shell_then_answer, tool_result
from scripted_server import Error, Stream, call, reply

import config
import tools

ESC = "\x1b"


# clipboard, title, clear, bidi
HOSTILE = f"{ESC}]52;c;ZXZpbA=={ESC}\\{ESC}]0;owned\x07{ESC}[2J\u202eevil"


# What the person sees is what the model, a file or a command sent, shown as text.


def test_progress_shows_escape_sequences_from_the_model_and_tools_as_text(loop, server):
    (loop.workdir / "page.html").write_text(f"<p>{HOSTILE}</p>")
    bad_name = {
        "id": "c2",
        "type": "function",
        "function": {"name": f"x{ESC}[2J", "arguments": "{}"},
    }
    server.add(
        reply(HOSTILE, tool_calls=[call("read_file", {"path": "page.html"}, id="c1"), bad_name]),
        reply("ok"),
    )
    result = loop("go")
    assert (
        ESC not in result.stderr and "\u202e" not in result.stderr and "\x07" not in result.stderr
    )
    assert "\\x1b]52;c;ZXZpbA==" in result.stderr and "\\u202eevil" in result.stderr
    # the model gets the file as it is
    assert server.messages(1)[3]["content"] == f"<p>{HOSTILE}</p>"


def test_progress_lines_show_invisible_characters_too(loop, server):
    server.add(reply(tool_calls=[call("read_file", {"path": "a\u00a0\u200bb"})]), reply("ok"))
    result = loop("go")
    assert "a\\xa0\\u200bb" in result.stderr and "\u00a0" not in result.stderr


@posix_only
def test_the_answer_on_a_terminal_is_escaped_and_piped_is_as_written(agent, server, tmp_path):
    import pty

    server.add(reply(f"answer {HOSTILE}"), reply(f"answer {HOSTILE}"))
    assert agent("go").stdout == f"answer {HOSTILE}\n"
    held, terminal = pty.openpty()
    command = [
        sys.executable,
        str(AGENT),
        "--base-url",
        server.url,
        "--workdir",
        str(agent.workdir),
        "go",
    ]
    command += ["--transcript", str(tmp_path / "tty.jsonl")]
    done = subprocess.run(
        command,
        cwd=tmp_path,
        env=clean_env(AGENT_API_KEY=KEY),
        stdout=terminal,
        stderr=subprocess.PIPE,
        timeout=60,
    )
    os.close(terminal)
    shown = os.read(held, 65536).decode()
    os.close(held)
    assert done.returncode == 0
    assert ESC not in shown and "answer \\x1b]52;c;ZXZpbA==" in shown


def test_show_prints_escapes_as_text(agent, server):
    server.add(reply(HOSTILE, tool_calls=[call("read_file", {"path": "nope"})]), reply(HOSTILE))
    first = agent("go")
    shown = agent("--show", str(first.transcript))
    assert shown.returncode == 0 and ESC not in shown.stdout and "\\x1b[2J" in shown.stdout


# The key goes nowhere.


@posix_only
def test_the_api_key_is_not_in_the_commands_environment(agent, server):
    shell_then_answer(server, "env")
    env = clean_env(
        AGENT_API_KEY=KEY, OPENAI_API_KEY="sk-openai-other", COPY_OF_KEY=KEY, HARMLESS="visible"
    )
    agent("go", "--yes", env=env)
    content = tool_result(server)
    assert "HARMLESS=visible" in content
    for secret in (KEY, "sk-openai-other", "AGENT_API_KEY", "DEEPSEEK_API_KEY", "OPENAI_API_KEY"):
        assert secret not in content


@posix_only
def test_shell_commands_see_no_key_shaped_variable(tmp_path, monkeypatch):
    import config

    monkeypatch.setattr(config, "HIDDEN_KEY", KEY)
    monkeypatch.setenv("AUTH", f"Bearer {KEY}")
    output = tools.run_shell("env", workdir=tmp_path)
    assert KEY not in output and "AUTH=" not in output


@posix_only
def test_a_change_to_the_environment_reaches_the_next_command_and_the_key_never(
    tmp_path, monkeypatch
):
    # processes.shell_env() makes the commands' environment again only when os.environ or the
    # secrets changed: a change between two runs (at a Python prompt) reaches the next command
    monkeypatch.setattr(config, "HIDDEN_KEY", KEY)
    monkeypatch.setenv("STAGE", "first")
    monkeypatch.setenv("LATER_KEY_COPY", "sk-later-secret")
    output = tools.run_shell("env", workdir=tmp_path)
    assert "STAGE=first" in output and "LATER_KEY_COPY=sk-later-secret" in output
    monkeypatch.setenv("STAGE", "second")
    monkeypatch.setenv("AUTH", f"Bearer {KEY}")
    output = tools.run_shell("env", workdir=tmp_path)
    assert "STAGE=second" in output and KEY not in output and "AUTH=" not in output
    monkeypatch.delenv("STAGE")
    monkeypatch.setattr(config, "HIDDEN_KEY", "sk-later-secret")  # another client's key
    output = tools.run_shell("env", workdir=tmp_path)
    assert "STAGE=" not in output and "sk-later-secret" not in output
    assert f"AUTH=Bearer {KEY}" in output  # no longer the key


def test_a_file_or_command_showing_the_key_reaches_neither_model_nor_transcript(agent, server):
    (agent.workdir).mkdir()
    (agent.workdir / ".env").write_text(f"AGENT_API_KEY={KEY}\n")
    env = clean_env(AGENT_API_KEY=KEY, AUTH=f"Bearer {KEY}", KEYS=f"a,{KEY},b", HARMLESS="visible")
    server.add(
        reply(
            tool_calls=[
                call("read_file", {"path": ".env"}, id="r1"),
                call(
                    "run_shell",
                    {"command": "env; cat /proc/$PPID/environ | tr '\\0' '\\n'"},
                    id="s1",
                ),
            ]
        ),
        reply("done"),
    )
    # fresh: /proc/PID/environ is the environment the process was started with, not os.environ
    result = agent("go", "--yes", env=env, fresh=True)
    sent = json.dumps(server.messages(1))
    assert result.returncode == 0
    assert KEY not in sent and KEY not in result.transcript.read_text() and KEY not in result.stderr
    assert "AGENT_API_KEY=***" in sent and "HARMLESS=visible" in sent
    # from /proc/$PPID/environ: no blanking of a file, only of what comes back
    assert "AUTH=Bearer ***" in sent


def test_an_error_body_echoing_the_key_is_blanked_before_it_is_cut(loop, server, monkeypatch):
    import config

    monkeypatch.setattr(config, "HIDDEN_KEY", KEY)
    # the cut at 400 goes through the key
    server.add(Error(401, "x" * 360 + f"Incorrect API key provided: {KEY}"))
    result = loop("go")
    assert "provided: ***" in result.stderr
    assert KEY[:10] not in result.stderr and KEY[:10] not in result.transcript.read_text()


def test_a_short_placeholder_key_is_no_secret_and_mangles_nothing(agent, server):
    agent.workdir.mkdir()
    (agent.workdir / "notes.txt").write_text("display: none;\n")
    server.add(reply(tool_calls=[call("read_file", {"path": "notes.txt"})]), reply("done"))
    agent("go", env=clean_env(AGENT_API_KEY="none"))
    assert server.messages(1)[-1]["content"] == "display: none;\n"


@posix_only
def test_the_key_cut_in_two_by_clipping_shows_neither_half(tmp_path, monkeypatch):
    import config

    monkeypatch.setattr(config, "HIDDEN_KEY", KEY)
    # Ten characters of the key in the head that each keeps (run_shell keeps 100 fewer,
    # for its own lines).
    (tmp_path / "read.txt").write_text("x" * (config.MAX_OUTPUT // 2 - 10) + KEY + "y" * 60_000)
    (tmp_path / "cat.txt").write_text(
        "x" * ((config.MAX_OUTPUT - 200) // 2 - 10) + KEY + "y" * 60_000
    )
    text = tools.read_file("read.txt", workdir=tmp_path)
    output = tools.run_shell("cat cat.txt", workdir=tmp_path)
    assert KEY[:10] not in text and KEY[:10] not in output
    assert "x***\n[..." in text and "x***\n[..." in output


# Hostile structure: no traceback, no flood.


def test_a_reply_with_too_many_calls_keeps_max_calls_and_says_so(loop, server):
    (loop.workdir / "big.txt").write_text("b" * 20_000)
    calls = [call("read_file", {"path": "big.txt"}, id=f"c{i}") for i in range(1500)]
    server.add(reply(tool_calls=calls), reply("done"))
    result = loop("go")
    sent = server.messages(1)
    assistant = next(m for m in sent if m["role"] == "assistant")
    results = [m for m in sent if m["role"] == "tool"]
    assert (
        result.status == "answered"
        and len(assistant["tool_calls"]) == len(results) == config.MAX_CALLS
    )
    # ids paired
    assert [m["tool_call_id"] for m in results] == [c["id"] for c in assistant["tool_calls"]]
    assert sum(len(m["content"]) for m in results) < config.MAX_CALLS * (config.MAX_OUTPUT + 100)
    assert f"repaired: kept the first {config.MAX_CALLS} of 1500 tool calls" in result.stderr


def test_a_reply_body_nested_too_deep_is_one_clear_line(loop, server):
    body = json.dumps(reply("hi")).replace('"hi"', "[" * 100_000 + "]" * 100_000)
    server.add(body)
    result = loop("go")
    assert result.status == "api_error" and "nested too deep" in result.text
    assert result.events()[-1]["type"] == "turn/end"


@pytest.mark.parametrize("stream", [False, True], ids=["plain", "stream"])
def test_lone_and_split_surrogates_neither_crash_nor_break_the_transcript(loop, server, stream):
    lone = reply("lone \ud800 here", tool_calls=[call("read_file", {"path": "nope"})])
    # streamed one code unit a chunk: the pair arrives in two
    split = reply("smile \ud83d\ude00 end")
    server.add(*([Stream(lone, size=1), Stream(split, size=1)] if stream else [lone, split]))
    result = loop("go", stream=stream)
    assert result.status == "answered" and result.text == "smile \N{GRINNING FACE} end"
    assert server.messages(1)[2]["content"] == "lone \ufffd here"
    assert [e["type"] for e in result.events()][-1] == "turn/end"  # every line is JSON


def choice(message, finish_reason="stop") -> dict:
    return {
        "id": "x",
        "object": "chat.completion",
        "choices": [{"index": 0, "message": message, "finish_reason": finish_reason}],
    }


@pytest.mark.parametrize(
    "body",
    [
        {"choices": [1]},
        choice("hi"),
        choice({"role": "assistant", "content": None, "tool_calls": [1]}, "tool_calls"),
        choice({"role": "assistant", "content": None, "tool_calls": "abc"}, "tool_calls"),
        choice(
            {"role": "assistant", "content": None, "tool_calls": [{"id": 5, "function": "x"}]},
            "tool_calls",
        ),
        choice({"role": "assistant", "content": [{"type": "text", "text": 5}, "part"]}),
        choice({"role": "assistant", "content": "hi", "reasoning_content": {"a": 1}}, 7),
        {**reply("hi"), "usage": [1, 2]},
        {**reply("hi"), "usage": {"prompt_tokens": "many", "prompt_tokens_details": 3}},
    ],
    ids=[
        "choice-int",
        "message-str",
        "call-int",
        "calls-str",
        "call-odd",
        "parts-odd",
        "reasoning-dict",
        "usage-list",
        "usage-str",
    ],
)
def test_a_reply_of_another_shape_is_an_error_or_an_answer_never_a_crash(loop, server, body):
    server.add(body, reply("done"))
    result = loop("go", yes=True)
    assert result.status in ("answered", "api_error", "empty_answer")
    assert result.events()[-1]["type"] == "turn/end"


def test_a_stream_of_another_shape_is_one_clear_line(loop, server):
    chunk = {"id": "x", "object": "chat.completion.chunk", "created": 1, "model": "m"}
    server.add(Stream(reply("x")))
    server.script[-1].events = [
        {**chunk, "choices": [{"index": 0, "delta": {"content": 5}, "finish_reason": None}]}
    ]
    result = loop("go", stream=True)
    assert result.status == "api_error" and "not a chat completion stream" in result.text


def test_a_reply_field_nested_hundreds_deep_is_one_clear_line(loop, server):
    nested = "x"
    for _ in range(400):  # deep enough for pydantic's serializer, not for the JSON parser
        nested = [nested]
    server.add(reply("hello", provider_extra=nested))
    result = loop("go")
    assert result.status == "api_error" and "fields nested more than 100 deep" in result.text


@pytest.mark.parametrize(
    "make",
    [
        lambda f: f,
        lambda f: functools.partial(f),
        lambda f: Unhashable(f),  # no weak key: its parameters are asked each time
    ],
    ids=["function", "partial", "unhashable"],
)
def test_a_tool_gets_what_it_names_of_the_run_however_it_is_callable(make, tmp_path):
    # calls.keyword_only() keeps what inspect found, by a weak key where the callable allows
    def shown(*, workdir, messages):
        return f"{workdir} {len(messages)}"

    tool = tools.Tool(tools.TOOLS[0] | {"function": {"name": "shown"}}, make(shown))
    given = {"workdir": tmp_path, "messages": [1, 2], "yes": False, "model": "m"}
    for _ in range(2):
        assert tools.run_call("shown", "{}", [tool], given) == (f"{tmp_path} 2", True)


class Unhashable:
    __hash__ = None

    def __init__(self, function):
        self.function = function

    def __call__(self, *, workdir, messages):
        return self.function(workdir=workdir, messages=messages)
