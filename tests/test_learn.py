"""Watching the loop: replay, pdb, trace, show, resume, interactive mode, streaming."""

import json
import os
import signal
import subprocess
import sys

import pytest
from conftest import AGENT, ROOT, clean_env, events_of, posix_only
from scripted_server import Hang, Stream, call, reply

import transcripts

LESSON = ROOT / "examples" / "lesson-01.jsonl"


def run_offline(tmp_path, *args: str, stdin: str = "") -> subprocess.CompletedProcess:
    """agent.py with no key and no server: only a replay can work."""
    command = [sys.executable, str(AGENT), "--workdir", str(tmp_path / "work"), *args]
    return subprocess.run(
        command,
        cwd=tmp_path,
        env=clean_env(AGENT_BASE_URL="https://api.deepseek.com"),
        input=stdin,
        capture_output=True,
        text=True,
        encoding="utf-8",
        timeout=120,
    )


def test_the_lesson_replays_end_to_end_without_a_key(tmp_path):
    done = run_offline(tmp_path, "--replay", str(LESSON), "--yes", "--transcript", str(tmp_path / "t.jsonl"))
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "work" / "tool_demo.py").read_text() == "print(17 * 23)\n"
    results = [e for e in events_of(tmp_path / "t.jsonl") if e["type"] == "tool/result"]
    assert results[-1] == {**results[-1], "name": "run_shell", "content": "391\n", "ok": True}
    assert "391" in done.stdout


def test_the_lesson_says_it_was_written_by_hand():
    assert "by hand" in events_of(LESSON)[0]["note"]


def test_a_file_that_is_not_a_transcript_is_refused_with_its_line(tmp_path):
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"type": "run/start", "system_prompt": "s"}\n{"type": "user/message"}\n')
    for option in ("--show", "--replay", "--resume"):
        done = run_offline(tmp_path, option, str(bad), "go")
        assert done.returncode == 2
        assert "line 2: not a transcript event with content" in done.stderr
        assert "Traceback" not in done.stderr


def test_a_replay_that_runs_out_of_replies_stops_with_3(tmp_path):
    short = tmp_path / "short.jsonl"
    short.write_text("\n".join(LESSON.read_text().splitlines()[:3]) + "\n")  # one reply, a write_file call
    done = run_offline(tmp_path, "--replay", str(short), "--transcript", str(tmp_path / "t.jsonl"))
    assert done.returncode == 3
    assert "no more recorded replies" in done.stderr
    assert events_of(tmp_path / "t.jsonl")[-1]["status"] == "replay_ended"


def test_pdb_stops_after_msg_and_shows_the_sdk_objects(tmp_path):
    # Keeps the README's walkthrough true: the line after msg = resp.choices[0].message, found, not hard-coded.
    lines = AGENT.read_text(encoding="utf-8").splitlines()
    line = next(i for i, text in enumerate(lines, 1) if text.strip() == "msg = resp.choices[0].message") + 1
    commands = f"break {AGENT}:{line}\ncontinue\n"
    commands += 'p f"name={msg.tool_calls[0].function.name} len={len(messages)} resp={type(resp).__name__}"\n'
    commands += "clear 1\ncontinue\n"
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "pdb",
            str(AGENT),
            "--replay",
            str(LESSON),
            "--yes",
            "--workdir",
            str(tmp_path / "work"),
            "--transcript",
            str(tmp_path / "t.jsonl"),
        ],
        cwd=tmp_path,
        env=clean_env(),
        input=commands,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert "'name=write_file len=2 resp=ChatCompletion'" in done.stdout
    assert (tmp_path / "work" / "tool_demo.py").exists()  # after the breakpoint, the run went on


def test_trace_shows_the_request_and_the_raw_response(agent, server):
    server.add(reply(tool_calls=[call("read_file", {"path": "a"}, id="c1")]), reply("done"))
    result = agent("go", "--trace")
    assert "── request: model test-model, tools read_file, write_file, run_shell, 2 messages" in result.stderr
    assert '"arguments": "{\\"path\\": \\"a\\"}"' in result.stderr  # a string, before it is parsed
    assert '"tool_call_id": "c1"' in result.stderr  # the second request shows what was added
    assert result.stdout == "done\n"


def test_show_prints_the_conversation_without_running_anything(agent, server):
    server.add(reply("Reading.", tool_calls=[call("read_file", {"path": "a"})]), reply("It is missing."))
    first = agent("read a")
    shown = agent("--show", str(first.transcript))
    assert len(server.requests) == 2
    for needle in (
        "user: read a",
        "assistant: Reading.",
        '→ read_file({"path": "a"})',
        "✗ error: a does not exist",
        "assistant: It is missing.",
        "[turn ended: answered]",
        "[total: 20 prompt tokens (0 cached), 10",
    ):
        assert needle in shown.stdout


def test_resume_continues_the_conversation_and_appends_to_the_transcript(agent, server):
    server.add(reply(tool_calls=[call("write_file", {"path": "a", "content": "1"})]), reply("wrote a"))
    first = agent("write a")
    answer = first.events()[-2]["message"]
    server.add(reply("a holds 1"))
    second = agent("--resume", str(first.transcript), "what is in a?")
    assert second.stdout == "a holds 1\n"
    sent = server.messages(2)
    assert json.dumps(sent[:-1]) == json.dumps([*server.messages(1), answer])
    assert sent[-1] == {"role": "user", "content": "what is in a?"}
    events = events_of(first.transcript)
    assert [e["type"] for e in events].count("run/resume") == 1
    assert json.dumps(transcripts.rebuild(events)[:-1]) == json.dumps(sent)


def test_resume_answers_calls_a_killed_run_left_open(agent, server, tmp_path):
    cut = tmp_path / "cut.jsonl"
    cut.write_text("\n".join(LESSON.read_text().splitlines()[:3]) + "\n")  # ends on a call with no result
    server.add(reply("ok"))
    agent("--resume", str(cut), "go on")
    sent = server.messages(0)
    assert sent[3] == {
        "role": "tool",
        "tool_call_id": "call_01",
        "content": "unknown: the earlier run ended before this call was answered; it may or may not have run, "
        "so check before repeating it",
    }


def test_a_task_can_come_from_standard_input(agent, server):
    server.add(reply("piped"))
    agent_result = agent(stdin_text="list the files\n")
    assert server.messages(0)[1]["content"] == "list the files"
    assert agent_result.stdout == "piped\n"


@posix_only
def test_interactive_mode_keeps_one_conversation_until_exit(agent, server):
    server.add(reply("first answer"), reply("second answer"))
    result = agent(terminal="first task\n\nsecond task\nexit\n")
    assert result.returncode == 0
    assert result.stdout == "first answer\nsecond answer\n"
    assert [m["content"] for m in server.messages(1)[1:]] == ["first task", "first answer", "second task"]
    assert len(server.requests) == 2


@posix_only
def test_interactive_mode_ends_on_ctrl_d(agent, server):
    server.add(reply("only"))
    result = agent(terminal="one task\n\x04")
    assert result.returncode == 0 and result.stdout == "only\n"


@posix_only
def test_ctrl_c_in_interactive_mode_interrupts_the_turn_and_returns_to_the_prompt(agent, server):
    import pty

    hang = Hang()
    server.add(hang, reply("after the interrupt"))
    terminal, tty = pty.openpty()
    os.write(terminal, b"slow task\nnext task\nexit\n")
    process, transcript = agent.start(stdin=tty)
    os.close(tty)
    assert hang.arrived.wait(60)
    process.send_signal(signal.SIGINT)
    stdout, stderr = process.communicate(timeout=60)
    os.close(terminal)
    assert process.returncode == 0, stderr
    assert stdout == "after the interrupt\n"
    assert [e["status"] for e in events_of(transcript) if e["type"] == "turn/end"] == ["interrupted", "answered"]


def scripted_replies():
    """Two steps with parallel calls, reasoning and text, then an answer."""
    return [
        reply(
            "Let me look.",
            reasoning_content="two files",
            tool_calls=[
                call("write_file", {"path": "a.txt", "content": "alpha"}, id="w1"),
                call("read_file", {"path": "a.txt"}, id="r1"),
            ],
        ),
        reply(tool_calls=[call("read_file", {"path": "missing"}, id="r2")]),
        reply("All done, à bientôt."),
    ]


def without_timing(events):
    return [{k: v for k, v in e.items() if k not in ("time", "latency_ms")} for e in events]


@pytest.mark.parametrize("same_index", [False, True], ids=["indexed", "ollama-style"])
def test_a_streamed_run_equals_the_same_run_not_streamed(agent, server, same_index):
    server.add(*scripted_replies())
    plain = agent("go")
    server.add(*[Stream(r, size=3, same_index=same_index) for r in scripted_replies()])
    streamed = agent("go", "--stream")
    assert streamed.stdout == plain.stdout == "All done, à bientôt.\n"  # piped: the answer, streamed or not
    assert without_timing(streamed.events()) == without_timing(plain.events())
    assert [r["body"]["messages"] for r in server.requests[3:]] == [r["body"]["messages"] for r in server.requests[:3]]
    assert server.requests[3]["body"]["stream"] is True
    assert server.requests[3]["body"]["stream_options"] == {"include_usage": True}


def test_a_stream_that_ends_without_finish_reason_is_cut_off(agent, server):
    server.add(Stream(reply(tool_calls=[call("write_file", {"path": "a", "content": "x"})]), cut=True))
    result = agent("go", "--stream")
    assert result.returncode == 3
    assert not (agent.workdir / "a").exists()
    assert "stream ended before the reply was complete" in result.stderr


def test_a_replay_whose_tool_results_differ_says_so_at_the_step_and_at_the_end(tmp_path):
    done = run_offline(tmp_path, "--replay", str(LESSON), "--transcript", str(tmp_path / "t.jsonl"))  # declined
    assert done.returncode == 0
    assert "replay: step 3: run_shell gave another result than recorded: '391', now 'error: declined" in (done.stderr)
    assert done.stderr.rstrip().endswith("the recorded replies after step 3 were written for other tool results")
    [diverged] = [e for e in events_of(tmp_path / "t.jsonl") if e["type"] == "replay/diverged"]
    assert (diverged["step"], diverged["recorded"]) == (3, "391\n")


def test_a_replay_that_matches_says_nothing_about_it(tmp_path):
    done = run_offline(tmp_path, "--replay", str(LESSON), "--yes")
    assert "replay:" not in done.stderr


def test_a_replay_with_another_task_is_warned_about_at_the_start(tmp_path):
    done = run_offline(tmp_path, "--replay", str(LESSON), "--yes", "delete everything")
    lesson, warning = done.stderr.splitlines()[:2]  # the lesson's note, then the warning, before anything runs
    assert lesson.startswith("lesson: ") and warning.startswith(
        "replay: the recorded replies answer 'Write tool_demo.py"
    )


def test_stream_with_replay_prints_the_recorded_answer(tmp_path):
    done = run_offline(tmp_path, "--replay", str(LESSON), "--yes", "--stream")
    assert done.returncode == 0
    assert done.stdout.endswith("tool_demo.py prints 391, which is 17 \N{MULTIPLICATION SIGN} 23.\n")


def test_the_missing_key_message_names_the_keyless_replay(tmp_path):
    done = run_offline(tmp_path, "go")
    assert done.returncode == 2
    assert "python agent.py --replay examples/lesson-01.jsonl" in done.stderr
