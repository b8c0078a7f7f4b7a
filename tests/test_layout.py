"""agent.py as the lesson: the loop can be called on its own, and what needs no model starts
without the SDK."""

import ast
import copy
import importlib.util
import re
import subprocess
import sys
import threading

import pytest
from conftest import AGENT, ROOT, clean_env
from scripted_server import ScriptedServer, call, reply

import agent
import config
import realworld
import tools
from realworld import calls, cli, endings, replies


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


# --- The house: one direction, no circle (issue 33) ----------------------------------------------

HOUSE = [ROOT / "agent.py", ROOT / "config.py", ROOT / "tools.py"]
HOUSE += sorted((ROOT / "realworld").glob("*.py")) + sorted((ROOT / "examples").glob("*.py"))


def module_name(path) -> str:
    relative = path.relative_to(ROOT).with_suffix("")
    return ".".join(relative.parts).removesuffix(".__init__")


def imported(node) -> list[str]:
    """The project modules an import statement names."""
    if isinstance(node, ast.Import):
        names = [a.name for a in node.names]
    elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
        names = [f"{node.module}.{a.name}" for a in node.names] + [node.module]
    else:
        return []
    known = {module_name(p) for p in HOUSE}
    return sorted({n for n in names if n in known and n != "realworld"})


def test_the_house_has_no_circle_and_no_import_hides_in_a_function():
    arrows, hidden = {}, []
    for path in HOUSE:
        tree = ast.parse(path.read_text(encoding="utf-8"))
        here = module_name(path)
        arrows[here] = set()
        for node in ast.walk(tree):
            arrows[here] |= set(imported(node))
        for function in (n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef)):
            hidden += [
                f"{here}.{function.name}: {m}" for n in ast.walk(function) for m in imported(n)
            ]
    assert hidden == []  # an import placed in a function to dodge a circle keeps it, unseen
    # no circle: every module can be placed after all it imports
    placed, left = [], dict(arrows)
    while left:
        ready = [m for m, needs in left.items() if needs <= set(placed)]
        assert ready, f"a circle among {sorted(left)}"
        placed += sorted(ready)
        for m in ready:
            del left[m]
    assert placed.index("realworld.transcripts") < placed.index("realworld.runs")
    assert placed.index("realworld.runs") < placed.index("realworld.pauses")


def test_every_module_is_named_with_its_job_in_the_folder_and_the_readme():
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    chinese = (ROOT / "README.zh.md").read_text(encoding="utf-8")
    for path in sorted((ROOT / "realworld").glob("*.py")):
        if path.name != "__init__.py":
            assert f"- {path.name}: " in realworld.__doc__, path.name
            assert f"`realworld/{path.name}`" in readme and f"`realworld/{path.name}`" in chinese


def test_nothing_reaches_the_command_lines_conversation_through_a_global():
    assert not hasattr(cli, "RUN")
    for path in HOUSE:
        assert "cli.RUN" not in path.read_text(encoding="utf-8"), path


def lesson_program(name: str):
    path = ROOT / "examples" / f"{name}.py"
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_no_tool_list_of_a_module_changes_when_a_program_adds_a_tool_or_hands_off(loop, server):
    handoff, subagent = lesson_program("handoff"), lesson_program("subagent")
    lists = [tools.TOOLS, tools.TOOL_MAP, tools.DEFAULT_TOOLS, handoff.OFFERED]
    lists += [handoff.REVIEWER_TOOLS, subagent.OFFERED, subagent.HELPER_TOOLS]
    before = [(id(x), copy.copy(x)) for x in lists]
    server.add(
        reply(tool_calls=[call("ask_helper", {"question": "what is in a?"}, "h1")]),
        reply("nothing"),
        reply(tool_calls=[call("transfer_to_reviewer", {}, "t1")]),
        reply("reviewed"),
    )
    offered = [*subagent.OFFERED, handoff.TRANSFER]
    first = loop("go", tools=offered, yes=True)
    assert first.status == "answered"
    names = [[t["function"]["name"] for t in r["body"]["tools"]] for r in server.requests]
    assert names[1] == ["read_file"] and names[3] == ["read_file"]  # the helper's, the reviewer's
    assert [t.schema["function"]["name"] for t in offered] == ["read_file"]  # the run's own list
    assert [(id(x), copy.copy(x)) for x in lists] == before


def test_two_runs_at_once_each_offer_their_own_tools(tmp_path):
    servers = [ScriptedServer(), ScriptedServer()]
    offered = [tools.DEFAULT_TOOLS[:1], tools.DEFAULT_TOOLS]
    try:
        for server in servers:
            for _ in range(20):
                server.add(reply(tool_calls=[call("read_file", {"path": "a"})]))
            server.add(reply("done"))

        def run(n):
            client = replies.Client(replies.openai_client(servers[n].url, "k", 60))
            settings = {"client": client, "model": "m", "workdir": tmp_path, "max_steps": 21}
            agent.run("go", tools=list(offered[n]), **settings)

        threads = [threading.Thread(target=run, args=(n,)) for n in (0, 1)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(60)
        for server, tools_given in zip(servers, offered, strict=True):
            seen = {str(r["body"]["tools"]) for r in server.requests}
            assert seen == {str(calls.schemas(tools_given))}
    finally:
        for server in servers:
            server.close()


def test_every_ending_the_code_makes_is_in_the_one_table_with_its_exit_status():
    # an Outcome, a RequestFailed's status, a stop reason, a turn/end recorded by hand
    made = set()
    for path in [
        ROOT / "agent.py",
        *(ROOT / "realworld").glob("*.py"),
        *(ROOT / "examples").glob("*.py"),
    ]:
        text = path.read_text(encoding="utf-8")
        made |= set(re.findall(r'Outcome\(\s*"(\w+)"', text))
        made |= set(re.findall(r'^    status = "(\w+)"', text, re.M))
        made |= set(re.findall(r'"turn/end", status="(\w+)"', text))
    made |= set(agent.STOP_REASONS)
    assert len(made) > 10 and made <= set(endings.ENDINGS), made - set(endings.ENDINGS)
    assert endings.exit_status("paused") == 4 and endings.exit_status(None) == 130
