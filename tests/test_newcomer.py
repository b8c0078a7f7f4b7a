"""From clone to breakpoint without a stumble: the README's keyless block, lessons that show what
they teach, pdb that quits where asked, and the rough edges a newcomer meets, each one clear line or
a quiet exit."""

import ast
import json
import os
import pty
import re
import shutil
import signal
import subprocess
import sys

import pytest
from conftest import (
    AGENT,
    KEY,
    ROOT,
    clean_env,
    events_of,
    msg_line,
    pdb_replay,
    posix_only,
    run_offline,
)
from scripted_server import Error, call, reply

from realworld import page, transcripts

README = (ROOT / "README.md").read_text(encoding="utf-8")
LESSONS = ROOT / "examples"


def keyless_block() -> str:
    """The README's keyless line: install, activate and replay."""
    block = README.split("No key yet?")[1].split("```sh\n")[1].split("```")[0]
    return next(line for line in block.splitlines() if "--replay" in line)


@pytest.mark.install
def test_the_keyless_block_replays_a_lesson_as_pasted_in_a_shell_without_python(tmp_path):
    if os.environ.get("INSTALL_TESTS") != "1":
        pytest.skip("builds a fresh virtual environment: run with INSTALL_TESTS=1 (.ci/run does)")
    clone = tmp_path / "clone"
    subprocess.run(["git", "clone", "-q", str(ROOT), str(clone)], check=True)
    tools = tmp_path / "bin"  # python3 and nothing called python, as on a fresh Debian
    tools.mkdir()
    os.symlink(sys._base_executable, tools / "python3")
    env = {k: v for k, v in clean_env().items() if k not in ("VIRTUAL_ENV", "PYTHONPATH")}
    env["PATH"] = f"{tools}:/usr/bin:/bin"
    assert shutil.which("python", path=env["PATH"]) is None
    terminal, held = pty.openpty()
    os.write(terminal, b"y\n")  # the lesson asks before it runs python tool_demo.py
    done = subprocess.run(
        ["bash", "-c", keyless_block()],
        cwd=clone,
        env=env,
        stdin=held,
        capture_output=True,
        text=True,
        timeout=600,
    )
    os.close(held), os.close(terminal)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "391" in done.stdout and "Traceback" not in done.stderr


def test_a_missing_package_is_one_line_naming_the_install_command(tmp_path):
    subprocess.run(
        [sys.executable, "-m", "venv", "--without-pip", str(tmp_path / "bare")], check=True
    )
    done = subprocess.run(
        [
            str(tmp_path / "bare" / "bin" / "python"),
            str(AGENT),
            "--replay",
            str(LESSONS / "lesson-01.jsonl"),
        ],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        env={"PATH": "/usr/bin:/bin"},
        timeout=60,
    )
    assert done.returncode == 2 and done.stderr.count("\n") == 1
    assert "not installed" in done.stderr and "pip install .  " in done.stderr


# Where each lesson's row in the README puts its breakpoint: (file, the line's text, lines after).
BREAKPOINTS = {
    "01": ("agent.py", "msg = resp.choices[0].message", 1),
    "02": ("agent.py", "result, ok = run_call(", 1),
    "03": ("realworld/consent.py", 'consent(args["command"], written_as_text(call_id))', 0),
    "04": ("agent.py", "for call in msg.tool_calls", 0),
    "05": ("agent.py", "msg = resp.choices[0].message", 1),
    "06": ("agent.py", "if finish_reason in STOP_REASONS", 0),
    "07": ("agent.py", "msg = resp.choices[0].message", 1),
    "08": ("examples/subagent.py", "outcome = agent.run(", 0),
    "09": ("examples/handoff.py", "messages[0] = ", 0),
    "10": ("agent.py", "make_room(messages, client, model, offered, transcript)", 1),
    "11": ("agent.py", "msg = resp.choices[0].message", 1),
}


@posix_only
@pytest.mark.parametrize("lesson", sorted(BREAKPOINTS))
def test_q_leaves_pdb_at_each_lessons_breakpoint(tmp_path, lesson):
    name, text, after = BREAKPOINTS[lesson]
    row = next(line for line in README.splitlines() if line.startswith(f"| {lesson} |"))
    assert text.split("(")[0] in row  # the README names this breakpoint
    lines = (ROOT / name).read_text(encoding="utf-8").splitlines()
    line = next(i for i, source in enumerate(lines, 1) if source.strip().startswith(text)) + after
    cited = re.search(rf"`break {re.escape(name)}:(\d+)`", row)  # where the row gives the command
    assert cited is None or int(cited.group(1)) == line, row
    commands = f"break {ROOT / name}:{line}\ncontinue\nq\n"
    program = ROOT / name if name.startswith("examples/") else AGENT
    done = pdb_replay(
        tmp_path, LESSONS / f"lesson-{lesson}.jsonl", commands, terminal=True, program=program
    )
    assert f"{name}({line})" in done.stdout, done.stdout[-1500:]  # it stopped at the breakpoint
    assert "will be restarted" not in done.stdout and "BdbQuit" not in done.stdout + done.stderr


def test_a_replay_says_what_its_lesson_shows_and_shows_it(tmp_path):
    thinking = run_offline(tmp_path, "--replay", str(LESSONS / "lesson-05.jsonl"), "--yes")
    before_step_1 = thinking.stderr.split("step 1:")[0]
    assert (
        "\nlesson: Written by hand" in "\n" + before_step_1 and "\n  thinking: " in thinking.stderr
    )
    cut = run_offline(tmp_path, "--replay", str(LESSONS / "lesson-06.jsonl"), "--yes")
    assert (
        cut.returncode == 3
        and "  ✗ write_file(" in cut.stderr
        and "not run: the reply was cut off" in cut.stderr
    )


def test_resuming_a_lesson_leaves_it_as_it_was_and_goes_on_in_a_new_transcript(
    agent, server, tmp_path
):
    lesson = LESSONS / "lesson-01.jsonl"
    before = lesson.read_bytes()
    server.add(reply("more done"))
    new = tmp_path / "goes-on.jsonl"
    result = agent("--resume", str(lesson), "--transcript", str(new), "and now?")
    assert result.returncode == 0 and lesson.read_bytes() == before
    events = events_of(new)
    assert (
        events[: len(transcripts.read(lesson))] == transcripts.read(lesson)
        and events[-1]["type"] == "turn/end"
    )


@posix_only
def test_a_closed_stdout_is_a_quiet_exit(agent, server):
    server.add(reply("an answer nobody reads"))
    process, _ = agent.start("go", stdin=subprocess.DEVNULL)
    process.stdout.close()  # as `| head -c 0` does, before the answer comes
    stderr = process.stderr.read()
    assert process.wait(timeout=60) == 141 and "Traceback" not in stderr


@posix_only
def test_ctrl_c_in_the_first_instant_is_no_traceback(agent):
    process, _ = agent.start("go", stdin=subprocess.DEVNULL, fresh=True)
    process.send_signal(signal.SIGINT)  # while the modules still load, or just after
    _, stderr = process.communicate(timeout=60)
    assert process.returncode in (-signal.SIGINT, 130) and "Traceback" not in stderr


def test_a_server_address_without_its_scheme_is_named(tmp_path):
    done = run_offline(tmp_path, "--base-url", "127.0.0.1:9/v1", "go")
    assert (done.returncode, done.stderr) == (
        2,
        "agent: the server address '127.0.0.1:9/v1' must start with http:// or https://\n",
    )


@posix_only
def test_ctrl_d_at_the_prompt_leaves_the_shell_a_line_of_its_own(agent):
    result = agent(terminal="\x04")
    assert result.returncode == 0 and result.stderr.endswith("> \n")


def test_a_task_piped_beside_a_replay_is_left_unread_without_a_word(tmp_path):
    # A replay answers its recorded task; pdb may be reading standard input (issue 35).
    done = run_offline(
        tmp_path, "--replay", str(LESSONS / "lesson-04.jsonl"), "--yes", stdin="another task\n"
    )
    assert done.returncode == 0 and "standard input" not in done.stderr
    assert "another task" not in done.stderr


def test_show_of_a_run_that_failed_on_the_api_shows_the_error(loop, server):
    server.add(Error(401, "Invalid API key"))
    failed = loop("go")
    shown = list(page.shown(failed.events(), "system"))
    assert any(
        line.startswith("[turn ended: api_error: the server answered HTTP 401: Invalid API key")
        for line in shown
    )
    assert KEY not in " ".join(shown)


@posix_only
def test_show_into_a_closed_pipe_is_a_quiet_exit(tmp_path):
    process = subprocess.Popen(
        [sys.executable, str(AGENT), "--show", str(LESSONS / "lesson-01.jsonl")],
        cwd=tmp_path,
        env=clean_env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    process.stdout.close()  # as `| head -1` does, before --show writes
    stderr = process.stderr.read()
    assert process.wait(timeout=60) == 141 and "Traceback" not in stderr


@posix_only
@pytest.mark.parametrize("lesson", sorted(BREAKPOINTS))
def test_at_the_breakpoint_after_msg_its_tool_calls_are_the_calls_the_loop_answers(
    tmp_path, lesson
):
    # What a learner sees in the debugger is what the loop runs: msg.tool_calls at each step is the
    # calls of the message appended, and each gets its tool message, in order (lesson 07: recovered
    # from text).
    line = msg_line()
    shown = 'p ("CALLS", [c.id for c in msg.tool_calls or []])'
    commands = f"break {AGENT}:{line + 1}\ncommands 1\n{shown}\ncontinue\ncontinue\nq\n"
    transcript = tmp_path / "t.jsonl"
    # The last continue ends the program; q leaves the one pdb restarts.
    flags = ("--yes", "--workdir", str(tmp_path / "work"), "--transcript", str(transcript))
    flags += ("--text-calls=run",) * (lesson == "07")  # its call, written as text, runs unasked
    program = {"08": ROOT / "examples" / "subagent.py", "09": ROOT / "examples" / "handoff.py"}.get(
        lesson, AGENT
    )
    done = pdb_replay(
        tmp_path, LESSONS / f"lesson-{lesson}.jsonl", commands, *flags, program=program
    )
    seen = [ast.literal_eval(ids) for ids in re.findall(r"\('CALLS', (\[.*?\])\)", done.stdout)]
    events = [e for e in events_of(transcript) if e["type"] in ("assistant/message", "tool/result")]
    # a compaction's summary is its own request, not the loop's (lesson 10)
    events = [e for e in events if not str(e.get("under", "")).startswith("compaction-")]
    appended, answered, last = [], [], {}  # last: each conversation's last reply (a subagent's)
    for event in events:
        if event["type"] == "assistant/message":
            appended.append([c["id"] for c in event["message"].get("tool_calls", [])])
            answered.append([])
            last[event.get("under")] = len(answered) - 1
        else:
            answered[last[event.get("under")]].append(event["call_id"])
    assert seen and seen == appended == answered, done.stdout[-2000:]
    if lesson == "07":  # recovered from DSML text: an id of the agent's own
        assert len(seen[0]) == 1 and seen[0][0].startswith("call_") and seen[1:] == [[]]


# What the rows of lessons 08 and 09 say pdb shows, typed as they say it (issue 33): the break
# command as written, the values compared.
BY_VALUE = {
    "08": (
        "subagent.py",
        "p len(own), [m['role'] for m in own]\np messages[-1]['tool_calls'][0]['function']['name']"
        "\nw\n",
        ["(1, ['system'])", "'ask_helper'", "agent.py("],
    ),
    "09": (
        "handoff.py",
        "p messages[0]['content'][:16]\nn\np messages[0]['content'][:16]\nn\n"
        "p [t.schema['function']['name'] for t in tools]\n",
        ["'You are a carefu'", "'You review code '", "['read_file']"],
    ),
}


@posix_only
@pytest.mark.parametrize("lesson", sorted(BY_VALUE))
def test_a_lesson_programs_breakpoint_shows_what_its_row_says(tmp_path, lesson):
    name, typed, shown = BY_VALUE[lesson]
    row = next(line for line in README.splitlines() if line.startswith(f"| {lesson} |"))
    number = int(re.search(rf"`break {name}:(\d+)`", row).group(1))
    assert f"`break {name}:{number}`" in (ROOT / "README.zh.md").read_text(encoding="utf-8")
    commands = f"break {name}:{number}\ncontinue\n{typed}q\n"
    flags = ("--yes", "--workdir", str(tmp_path / "work"), "--transcript", str(tmp_path / "t"))
    program = ROOT / "examples" / name
    done = pdb_replay(
        tmp_path, LESSONS / f"lesson-{lesson}.jsonl", commands, *flags, program=program
    )
    assert f"{name}({number})" in done.stdout, done.stdout[-1500:]
    for value in shown:
        assert value in done.stdout, done.stdout[-1500:]


@posix_only
def test_lesson_11s_breakpoint_shows_the_cached_tokens_and_the_money_its_row_says(tmp_path):
    # Typed as the row says: at the first reply, then three continues on, at the second task's.
    row = next(line for line in README.splitlines() if line.startswith("| 11 |"))
    assert "(384 of `resp.usage.prompt_tokens`, 505)" in row and "640 of 677" in row
    assert "`continue` three times" in row and '`resp.cost["amount"]`' in row
    shown = "p resp.usage.prompt_cache_hit_tokens, resp.usage.prompt_tokens\n"
    shown += 'p resp.cost["amount"], resp.cost["saved"]\n'

    commands = f"break {AGENT}:{msg_line() + 1}\ncontinue\n{shown}continue\ncontinue\ncontinue\n"
    flags = ("--yes", "--model", "deepseek-flash", "--transcript", str(tmp_path / "t"))
    done = pdb_replay(tmp_path, LESSONS / "lesson-11.jsonl", commands + shown + "q\n", *flags)
    recorded = [
        e for e in events_of(LESSONS / "lesson-11.jsonl") if e["type"] == "assistant/message"
    ]
    assert "(384, 505)" in done.stdout and "(640, 677)" in done.stdout, done.stdout[-1500:]
    for cost in (recorded[0]["cost"], recorded[-1]["cost"]):  # the money, as the lesson says it
        assert repr((cost["amount"], cost["saved"])) in done.stdout, done.stdout[-1500:]
    assert recorded[-1]["cost"]["saved"] > recorded[-1]["cost"]["amount"]  # by the last request


# --- The > prompt, --workdir and --help say what they are (issue 35) ------------------------------


@posix_only
def test_a_line_starting_with_a_slash_is_a_command_and_never_a_task(agent, server):
    server.add(reply("done"))
    result = agent("--yes", terminal="/help\n/compat\nwhat now?\nexit\n")
    assert result.returncode == 0
    assert result.stderr.startswith("type a task, or /compact, /cost, /help, exit\n") or (
        "type a task, or /compact, /cost, /help, exit\n" in result.stderr.split("> ")[0]
    )
    assert "/compact: make room in the conversation now" in result.stderr
    assert "/compat is no command (/compact, /cost, /help, exit); nothing was sent" in result.stderr
    assert len(server.requests) == 1 and server.messages(0)[-1]["content"] == "what now?"


def test_a_workdir_that_did_not_exist_is_made_and_said_new(agent, server):
    server.add(reply("hi"))
    result = agent("--yes", "go")
    assert (
        "working in " in result.stderr
        and "(a new, empty folder: it did not exist)" in result.stderr
    )
    server.add(reply("hi again"))
    again = agent("--yes", "go")
    assert "a new, empty folder" not in again.stderr


def test_a_file_given_as_the_workdir_is_one_line(agent, tmp_path):
    (tmp_path / "notes.md").write_text("x")
    result = agent("--workdir", str(tmp_path / "notes.md"), "go")
    said = "is a file, not a folder: give a folder to work in"
    assert result.returncode == 2 and result.stderr.count("\n") == 1 and said in result.stderr


def test_a_lesson_programs_help_names_the_program_and_its_tools(tmp_path):
    program = ROOT / "examples" / "subagent.py"
    done = run_offline(tmp_path, "--help", program=program)
    assert done.returncode == 0 and "usage: " in done.stdout and "subagent.py" in done.stdout
    assert "its tools (read_file, write_file, run_shell, ask_helper)" in done.stdout


def test_a_hint_names_the_setting_the_way_the_person_gave_it(agent, server):
    # The address came from --base-url (the agent fixture gives it so): the hint says that flag.
    server.add(Error(404, "no such route", times=3))
    result = agent("--yes", "go")
    assert result.returncode == 1 and "Check --base-url (many servers" in result.stderr
    assert "AGENT_BASE_URL" not in result.stderr


@posix_only
@pytest.mark.parametrize("word", ["exit", "quit", "/exit", "/quit", "退出"])
def test_each_way_to_end_the_session_ends_it_and_sends_nothing(agent, server, word):
    # issue #46: /exit, /quit and 退出 were "no command" or sent as a task
    result = agent("--yes", terminal=f"{word}\nnever sent\n")
    assert result.returncode == 0 and server.requests == [], result.stderr


@posix_only
def test_help_at_the_prompt_says_what_ctrl_c_does(agent, server):
    result = agent("--yes", terminal="/help\nexit\n")
    assert "Ctrl-C: stops the step under way (a request or a command); at the prompt, a new " in (
        result.stderr
    )


def test_the_step_line_shows_a_calls_arguments_with_every_blank_as_sent(loop, server):
    # issue #46: lesson 09's "def add(a, b):\n    return a + b\n" showed as "\n return"
    content = "def add(a, b):\n    return a + b\n\tdone"
    server.add(reply(tool_calls=[call("write_file", {"path": "add.py", "content": content})]))
    server.add(reply("written"))
    ran = loop("write add.py", yes=True)
    shown = json.dumps({"path": "add.py", "content": content})
    assert f"  → write_file({shown})" in ran.stderr
    assert "\\n    return a + b\\n\\tdone" in ran.stderr
