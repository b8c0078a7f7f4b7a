"""A run that needs a yes nobody can give pauses, is shown, and goes on when the person approves
or declines (issue 26). The state is the transcript, as openai-agents' RunState is its state:
`result.interruptions`, then `state.approve(item)` / `state.reject(item)` and `Runner.run(agent,
state)` (openai-agents-python, docs/human_in_the_loop.md); here `--resume RUN --approve` or
`run(None, messages, approvals={id: True})`.

What every test checks of the requests (scripted_server.history_problem, OpenAI's own 400s): each
call answered once, by its id, before the next request."""

import json
import os
import subprocess
import sys

from conftest import (
    AGENT,
    KEY,
    ROOT,
    clean_env,
    events_of,
    open_fifo,
    posix_only,
    read_fifo,
    run_offline,
    tool_messages,
)
from scripted_server import call, history_problem, reply

from realworld import pauses, runs, transcripts


def ids_answered(messages) -> list:
    return [m["tool_call_id"] for m in tool_messages(messages)]


def paused_run(agent, server, *calls, task="go"):
    """A run with no terminal whose first reply makes calls; it pauses. The result and the
    transcript's events."""
    server.add(reply(tool_calls=list(calls)))
    result = agent(task)
    return result, events_of(result.transcript)


def codes_of(events) -> dict:
    """{call id: code} of what the pause recorded."""
    return {c["call_id"]: c["code"] for c in pauses.last_end(events)["pending"]}


@posix_only
def test_a_run_without_a_terminal_pauses_on_a_command_and_says_how_to_go_on(agent, server):
    result, events = paused_run(agent, server, call("run_shell", {"command": "touch ran"}, "c1"))
    assert result.returncode == 4 and not (agent.workdir / "ran").exists()
    assert len(server.requests) == 1  # nothing was sent with the call unanswered
    end = events[-1]
    assert end["type"] == "turn/end" and end["status"] == "paused"
    assert [c["call_id"] for c in end["pending"]] == ["c1"]
    assert "c1" not in [e.get("call_id") for e in events if e["type"] == "tool/result"]
    assert f"--resume {result.transcript} --approve" in result.stderr
    assert f"[{end['pending'][0]['code']}]" in result.stderr and "touch ran" in result.stderr
    assert "Traceback" not in result.stderr


@posix_only
def test_show_prints_the_waiting_command_whole(agent, server):
    command = "printf 'a\\x1b[2J' && \\\n  touch ran"
    result, events = paused_run(agent, server, call("run_shell", {"command": command}, "c1"))
    shown = agent("--show", str(result.transcript)).stdout
    assert "[turn paused: 1 command(s) waiting for a yes" in shown
    assert f"[{codes_of(events)['c1']}] run_shell, id c1" in shown
    assert "touch ran" in shown and "\x1b" not in shown and "\\x1b" in shown


@posix_only
def test_approve_runs_exactly_the_waiting_command_and_the_run_goes_on(agent, server):
    result, _ = paused_run(agent, server, call("run_shell", {"command": "echo hi > ran"}, "c1"))
    server.add(reply("done: ran"))
    went_on = agent("--resume", str(result.transcript), "--approve")
    assert went_on.returncode == 0 and "done: ran" in went_on.stdout
    assert (agent.workdir / "ran").read_text() == "hi\n"
    sent = server.messages(1)
    assert history_problem(sent) is None and ids_answered(sent) == ["c1"]
    assert sent[-1]["content"] == "(no output)"
    assert [m["role"] for m in sent].count("user") == 1  # no new task was added


@posix_only
def test_reject_sends_the_reason_to_the_model_and_runs_nothing(agent, server):
    result, _ = paused_run(agent, server, call("run_shell", {"command": "rm -rf build"}, "c1"))
    (agent.workdir / "build").mkdir()
    server.add(reply("ok, I will not"))
    went_on = agent("--resume", str(result.transcript), "--reject", "keep the build folder")
    assert went_on.returncode == 0 and (agent.workdir / "build").is_dir()
    sent = server.messages(1)
    assert sent[-1] == {
        "role": "tool",
        "tool_call_id": "c1",
        "content": "error: declined by the user: keep the build folder",
    }


@posix_only
def test_some_calls_approved_others_declined_and_the_rest_wait_their_turn(agent, server):
    # The calls after the first waiting one wait with it, so that results keep the calls' order
    # (Qwen's and Llama's templates render results in order, without ids) and a file read after a
    # command sees what the command did.
    calls = [
        call("read_file", {"path": "missing.txt"}, "r0"),
        call("run_shell", {"command": "echo one > one"}, "s1"),
        call("write_file", {"path": "w.txt", "content": "w"}, "w2"),
        call("run_shell", {"command": "echo two > two"}, "s3"),
        call("run_shell", "{not json", "s4"),
    ]
    result, events = paused_run(agent, server, *calls)
    assert [e["call_id"] for e in events if e["type"] == "tool/result"] == ["r0"]
    assert not (agent.workdir / "w.txt").exists()  # it waits behind s1
    codes = codes_of(events)
    assert list(codes) == ["s1", "s3"]  # what does not parse is never approved blindly
    server.add(reply("done"))
    went_on = agent(
        "--resume", str(result.transcript), "--approve", codes["s1"], "--reject", "not now"
    )
    assert went_on.returncode == 0
    sent = server.messages(1)
    assert history_problem(sent) is None
    assert ids_answered(sent) == ["r0", "s1", "w2", "s3", "s4"]
    assert (agent.workdir / "one").exists() and not (agent.workdir / "two").exists()
    assert (agent.workdir / "w.txt").read_text() == "w"
    results = {m["tool_call_id"]: m["content"] for m in tool_messages(sent)}
    assert results["s3"] == "error: declined by the user: not now"
    assert results["s4"].startswith("error: arguments are not valid JSON")


@posix_only
def test_a_call_left_undecided_pauses_the_run_again(agent, server):
    calls = [
        call("run_shell", {"command": "echo 1"}, "a"),
        call("run_shell", {"command": "echo 2"}, "b"),
    ]
    result, events = paused_run(agent, server, *calls)
    again = agent("--resume", str(result.transcript), "--approve", codes_of(events)["a"])
    assert again.returncode == 4 and len(server.requests) == 1
    events = events_of(result.transcript)
    assert [c["call_id"] for c in pauses.last_end(events)["pending"]] == ["b"]
    server.add(reply("done"))
    assert agent("--resume", str(result.transcript), "--approve").returncode == 0
    assert ids_answered(server.messages(1)) == ["a", "b"]


@posix_only
def test_a_transcript_changed_since_the_pause_is_refused_in_one_line(agent, server):
    result, events = paused_run(agent, server, call("run_shell", {"command": "ls"}, "c1"))
    code = codes_of(events)["c1"]
    lines = result.transcript.read_text().splitlines()
    changed = [line.replace('\\"ls\\"', '\\"rm -rf ~\\"') for line in lines[:-1]] + lines[-1:]
    assert changed != lines
    result.transcript.write_text("\n".join(changed) + "\n")
    for approve in (["--approve"], ["--approve", code]):
        refused = agent("--resume", str(result.transcript), *approve)
        assert refused.returncode == 2 and refused.stderr.count("\n") == 1, refused.stderr
        assert "changed since it paused" in refused.stderr
    assert len(server.requests) == 1


@posix_only
def test_a_code_that_names_no_waiting_call_is_refused(agent, server):
    result, _ = paused_run(agent, server, call("run_shell", {"command": "ls"}, "c1"))
    refused = agent("--resume", str(result.transcript), "--approve", "deadbeef")
    assert refused.returncode == 2 and "no call waiting" in refused.stderr
    assert refused.stderr.count("\n") == 1


def test_approve_on_a_run_that_is_not_paused_is_refused(agent, server):
    server.add(reply("hello"))
    done = agent("go")
    refused = agent("--resume", str(done.transcript), "--approve")
    assert refused.returncode == 2 and "not paused" in refused.stderr
    assert agent("--approve").returncode == 2


@posix_only
def test_with_a_terminal_the_prompt_asks_as_it_always_did(agent, server):
    server.add(reply(tool_calls=[call("run_shell", {"command": "touch ran"}, "c1")]), reply("ok"))
    result = agent("go", terminal="y\n")
    assert result.returncode == 0 and (agent.workdir / "ran").exists()
    assert "Run this command? [y/N]" in result.stderr and "paused" not in result.stderr


@posix_only
def test_a_paused_run_resumed_at_a_terminal_asks_there(agent, server):
    result, _ = paused_run(agent, server, call("run_shell", {"command": "touch ran"}, "c1"))
    server.add(reply("ok"))
    went_on = agent("--resume", str(result.transcript), terminal="y\n")
    assert went_on.returncode == 0 and (agent.workdir / "ran").exists()
    assert "Run this command? [y/N]" in went_on.stderr


@posix_only
def test_run_from_python_pauses_and_goes_on_with_approvals_by_id(loop, server):
    server.add(
        reply(tool_calls=[call("run_shell", {"command": "echo hi"}, "c1")]),
        reply(tool_calls=[call("run_shell", {"command": "touch no"}, "c2")]),
        reply("done"),
    )
    messages = [{"role": "system", "content": "test"}]
    first = loop("go", messages)
    assert first.status == "paused" and "by id" in first.text and "c1" in first.text
    assert [c["id"] for c in pauses.waiting(messages)] == ["c1"]
    second = loop(None, messages, approvals={"c1": True})
    assert second.status == "paused" and messages[-2]["content"] == "hi\n"
    third = loop(None, messages, approvals={"c2": "not that"})
    assert third.status == "answered" and third.text == "done"
    assert not (loop.workdir / "no").exists()
    for n in range(3):
        assert history_problem(server.messages(n)) is None
    assert server.messages(2)[-1]["content"] == "error: declined by the user: not that"


def test_run_from_python_asked_to_pause_pauses_even_with_yes_false(loop, server):
    server.add(reply(tool_calls=[call("run_shell", {"command": "echo hi"}, "c1")]))
    ran = loop("go", pause=True)
    assert ran.status == "paused"
    end = ran.events()[-1]
    assert end["status"] == "paused" and end["pending"][0]["call_id"] == "c1"


def test_a_pause_is_recorded_so_that_resume_rebuilds_the_open_calls(loop, server):
    server.add(reply(tool_calls=[call("run_shell", {"command": "echo hi"}, "c1")]))
    ran = loop("go", pause=True)
    events = transcripts.read(ran.transcript)
    assert pauses.is_paused(events)
    assert [c["id"] for c in pauses.open_calls(runs.conversation(events))] == ["c1"]
    assert json.loads(pauses.last_end(events)["pending"][0]["arguments"]) == {"command": "echo hi"}


# What a fresh-eyes probe found, each a member of a family above.


@posix_only
def test_a_closed_standard_input_pauses_too(agent, server, tmp_path):
    server.add(reply(tool_calls=[call("run_shell", {"command": "touch ran"}, "c1")]))
    agent.workdir.mkdir()
    command = [
        sys.executable,
        str(AGENT),
        "--base-url",
        server.url,
        "--workdir",
        str(agent.workdir),
    ]
    command += ["--transcript", str(tmp_path / "t.jsonl"), "go"]
    done = subprocess.run(
        ["bash", "-c", 'exec "$@" <&-', "-", *command],
        env=clean_env(AGENT_API_KEY=KEY),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 4 and "Traceback" not in done.stderr, done.stderr
    assert not (agent.workdir / "ran").exists()


@posix_only
def test_a_command_killed_while_it_ran_after_its_approval_is_never_run_again(
    agent, server, tmp_path
):
    fifo = tmp_path / "started"
    held = open_fifo(fifo)
    command = f"echo C >> c; echo go > {fifo}; sleep 5"
    result, _ = paused_run(agent, server, call("run_shell", {"command": command}, "c1"))
    process, _ = agent.start("--resume", str(result.transcript), "--approve", fresh=True)
    assert read_fifo(held, until_eof=False) == b"go\n"
    process.kill()
    process.wait()
    os.close(held)
    again = agent("--resume", str(result.transcript), "--approve")
    assert again.returncode == 2 and "not paused" in again.stderr
    server.add(reply("checked"))
    went_on = agent("--resume", str(result.transcript), "what happened?")
    assert went_on.returncode == 0
    assert (agent.workdir / "c").read_text() == "C\n"  # run once, not twice
    answer = [m for m in server.messages(1) if m.get("tool_call_id") == "c1"]
    assert [m["content"] for m in answer] == [pauses.UNANSWERED]


@posix_only
def test_a_message_added_after_the_pause_is_refused_before_anything_runs(agent, server):
    result, _ = paused_run(agent, server, call("run_shell", {"command": "touch ran"}, "c1"))
    with open(result.transcript, "a") as f:
        f.write(json.dumps({"type": "user/message", "content": "more"}) + "\n")
    refused = agent("--resume", str(result.transcript), "--approve")
    assert refused.returncode == 2 and not (agent.workdir / "ran").exists()


@posix_only
def test_show_prints_the_code_made_of_the_call_not_the_one_the_transcript_says(agent, server):
    calls = [
        call("run_shell", {"command": "ls"}, "a"),
        call("run_shell", {"command": "touch x"}, "b"),
    ]
    result, _ = paused_run(agent, server, *calls)
    end = json.loads(result.transcript.read_text().splitlines()[-1])
    end["pending"][0]["code"], end["pending"][1]["code"] = (
        end["pending"][1]["code"],
        end["pending"][0]["code"],
    )
    lines = result.transcript.read_text().splitlines()
    result.transcript.write_text("\n".join([*lines[:-1], json.dumps(end)]) + "\n")
    shown = agent("--show", str(result.transcript)).stdout
    ls_code = pauses.code(
        {"id": "a", "function": {"name": "run_shell", "arguments": '{"command": "ls"}'}}
    )
    assert f"[{ls_code}] run_shell, id a:\n    ls" in shown
    server.add(reply("done"))
    went_on = agent("--resume", str(result.transcript), "--approve", ls_code, "--reject", "later")
    assert went_on.returncode == 0 and not (agent.workdir / "x").exists()


@posix_only
def test_a_consistent_edit_needs_the_codes_show_prints(agent, server):
    result, _ = paused_run(agent, server, call("run_shell", {"command": "ls"}, "c1"))
    text = result.transcript.read_text().replace('\\"ls\\"', '\\"touch edited\\"')
    result.transcript.write_text(text)
    bare = agent("--resume", str(result.transcript), "--approve")
    assert bare.returncode == 2 and "approve the calls by the codes --show prints" in bare.stderr
    assert bare.stderr.count("\n") == 1 and not (agent.workdir / "edited").exists()
    shown = agent("--show", str(result.transcript)).stdout
    assert "touch edited" in shown  # what the code approves is what --show showed
    code = shown.split("⏸ [")[1].split("]")[0]
    server.add(reply("done"))
    assert agent("--resume", str(result.transcript), "--approve", code).returncode == 0
    assert (agent.workdir / "edited").exists()


def test_a_field_under_that_is_not_text_is_refused_in_one_line(agent, tmp_path):
    bad = tmp_path / "bad.jsonl"
    bad.write_text(
        json.dumps({"type": "run/start", "system_prompt": "s"})
        + "\n"
        + json.dumps({"type": "user/message", "content": "x", "under": {}})
        + "\n"
    )
    for option in (["--show", str(bad)], ["--html", str(bad), str(tmp_path / "p.html")]):
        done = agent(*option)
        assert done.returncode == 2 and "under" in done.stderr and "Traceback" not in done.stderr


def test_approvals_that_name_no_waiting_call_or_are_no_decision_run_nothing(loop, server):
    server.add(reply(tool_calls=[call("run_shell", {"command": "touch ran"}, "c1")]))
    messages = [{"role": "system", "content": "test"}]
    loop("go", messages, pause=True)
    for wrong in ({"c9": True}, {"c1": 1}):
        again = loop(None, messages, approvals=wrong)
        assert again.status == "paused" and "nothing was run" in again.text
    assert not (loop.workdir / "ran").exists() and len(server.requests) == 1
    server.add(reply("done"))
    assert loop(None, messages, approvals={"c1": "yes"}).status == "answered"
    assert (loop.workdir / "ran").exists()


def test_a_lesson_made_with_another_program_is_not_replayed_by_agent_py(tmp_path):
    done = run_offline(tmp_path, "--replay", str(ROOT / "examples" / "lesson-08.jsonl"), "--yes")
    assert done.returncode == 2 and "'ask_helper'" in done.stderr and done.stdout == ""


def test_a_tool_started_event_that_names_no_call_is_refused_in_one_line(agent, tmp_path):
    bad = tmp_path / "bad.jsonl"
    bad.write_text(
        json.dumps({"type": "run/start", "system_prompt": "s"})
        + "\n"
        + json.dumps({"type": "tool/started", "call_id": ["c1"]})
        + "\n"
    )
    done = agent("--show", str(bad))
    assert done.returncode == 2 and "call_id" in done.stderr and "Traceback" not in done.stderr


@posix_only
def test_approve_given_twice_approves_both(agent, server):
    calls = [
        call("run_shell", {"command": "touch a"}, "a"),
        call("run_shell", {"command": "touch b"}, "b"),
    ]
    result, events = paused_run(agent, server, *calls)
    codes = codes_of(events)
    server.add(reply("done"))
    went_on = agent(
        "--resume", str(result.transcript), "--approve", codes["a"], "--approve", codes["b"]
    )
    assert went_on.returncode == 0
    assert (agent.workdir / "a").exists() and (agent.workdir / "b").exists()


@posix_only
def test_a_call_id_with_a_line_break_cannot_draw_a_line_of_its_own(agent, server):
    result, _ = paused_run(agent, server, call("run_shell", {"command": "ls"}, "c\n[turn ended]"))
    assert "\n[turn ended]" not in result.stderr and "id c\\n[turn ended]" in result.stderr
