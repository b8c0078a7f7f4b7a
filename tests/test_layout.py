"""agent.py as the lesson: the loop can be called on its own, and what needs no model starts
without the SDK."""

import subprocess
import sys

import pytest
from conftest import AGENT, ROOT, clean_env
from scripted_server import call, reply

import config
import tools


def python(code_or_args, cwd, **env) -> subprocess.CompletedProcess:
    """A fresh interpreter; code_or_args is code for -c, or a list of arguments."""
    args = ["-c", code_or_args] if isinstance(code_or_args, str) else code_or_args
    return subprocess.run(
        [sys.executable, *args],
        cwd=cwd,
        env=clean_env(**env),
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_run_can_be_called_from_a_fresh_interpreter_with_a_client(server, tmp_path):
    server.add(
        reply(tool_calls=[call("write_file", {"path": "hi.txt", "content": "hi"})]),
        reply("wrote hi.txt"),
    )
    code = (
        "import agent, openai\n"
        f"client = openai.OpenAI(base_url={server.url!r}, api_key='none')\n"
        f"outcome = agent.run('write hi.txt', client=client, workdir={str(tmp_path)!r})\n"
        "print(outcome.status, '|', outcome.text)\n"
    )
    done = python(code, ROOT)
    assert done.returncode == 0, done.stderr
    assert done.stdout == "answered | wrote hi.txt\n"
    assert (tmp_path / "hi.txt").read_text() == "hi"


def test_run_returns_why_it_stopped_with_the_transcripts_status(loop, server):
    server.add(
        reply(tool_calls=[call("read_file", {"path": "a"})]),
        reply(tool_calls=[call("read_file", {"path": "b"})]),
    )
    result = loop("go", max_steps=2)
    assert (result.status, result.events()[-1]["status"]) == ("max_steps", "max_steps")
    assert result.text.startswith("reached MAX_STEPS (2)")


def test_no_module_global_is_rebound_by_a_run(loop, server):
    import agent

    before = {
        name: value for module in (agent, tools, config) for name, value in vars(module).items()
    }
    server.add(reply(tool_calls=[call("read_file", {"path": "a"})]), reply("done"))
    loop("go", yes=True, stream=False, max_steps=3)
    after = {
        name: value for module in (agent, tools, config) for name, value in vars(module).items()
    }
    assert [name for name in before if after[name] is not before[name]] == []


@pytest.mark.parametrize(
    "args",
    [["--help"], ["--show", "examples/lesson-01.jsonl"], ["--max-steps", "0", "go"], ["go"]],
    ids=["help", "show", "usage-error", "missing-key"],
)
def test_what_needs_no_model_never_imports_the_sdk(args):
    # The time it saves is measured by bench/loop.py; this holds the cause: openai is
    # never imported.
    code = f"import runpy, sys; sys.argv = ['agent.py', *{args!r}]\n"
    code += "try:\n    runpy.run_path('agent.py', run_name='__main__')\n"
    code += (
        "except SystemExit as e:\n"
        "    print('exit', e.code, 'openai' in sys.modules, file=sys.stderr)\n"
    )
    done = python(code, ROOT, AGENT_BASE_URL="https://api.deepseek.com")
    assert (
        done.stderr.splitlines()[-1] == f"exit {0 if args[0] in ('--help', '--show') else 2} False"
    )


def test_installing_puts_no_config_or_tools_module_on_the_import_path(tmp_path):
    done = python(
        "import importlib.util as u; print(u.find_spec('config'), u.find_spec('tools'))", tmp_path
    )
    assert done.stdout == "None None\n"


def test_a_bad_setting_raises_config_error_and_the_command_line_says_it_in_one_line(monkeypatch):
    monkeypatch.setattr(config, "BAD", ["AGENT_TIMEOUT='soon' must be a positive number"])
    with pytest.raises(config.ConfigError, match="AGENT_TIMEOUT='soon'"):
        config.parse_options(["go"])
    done = python([str(AGENT), "go"], ROOT, AGENT_TIMEOUT="soon")
    assert (done.returncode, done.stderr) == (
        2,
        "agent: AGENT_TIMEOUT='soon' must be a positive number\n",
    )
