"""Every lesson in examples/ replays with no key, and shows what the README's table of lessons
says it shows."""

import json
import os
import re
import subprocess
import sys

import forkserver
import pytest
from conftest import AGENT, LESSON, ROOT, clean_env, events_of, posix_only, run_offline

from realworld import replies, runs


def test_the_lesson_replays_end_to_end_without_a_key(tmp_path):
    done = run_offline(
        tmp_path, "--replay", str(LESSON), "--yes", "--transcript", str(tmp_path / "t.jsonl")
    )
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "work" / "tool_demo.py").read_text() == "print(17 * 23)\n"
    results = [e for e in events_of(tmp_path / "t.jsonl") if e["type"] == "tool/result"]
    assert results[-1] == {**results[-1], "name": "run_shell", "content": "391\n", "ok": True}
    assert "391" in done.stdout


def test_the_lesson_says_it_was_written_by_hand():
    assert "by hand" in events_of(LESSON)[0]["note"]


LESSONS = sorted((ROOT / "examples").glob("lesson-*.jsonl"))


README = (ROOT / "README.md").read_text(encoding="utf-8")
README_ZH = (ROOT / "README.zh.md").read_text(encoding="utf-8")


# The program that replays each lesson (its note says so): a lesson past the loop adds a tool.
PROGRAMS = {"08": ROOT / "examples" / "subagent.py", "09": ROOT / "examples" / "handoff.py"}


def replay(tmp_path, lesson, terminal: str | None = None, *flags: str):
    """Replay a lesson with --yes, or on a pseudo-terminal where a person types terminal; flags:
    the command line's others."""
    transcript = tmp_path / "t.jsonl"
    command = [
        sys.executable,
        str(PROGRAMS.get(lesson.stem.split("-")[1], AGENT)),
        "--replay",
        str(lesson),
        "--workdir",
        str(tmp_path / "work"),
    ]
    command += ["--transcript", str(transcript), *flags] + ([] if terminal else ["--yes"])
    stdin = subprocess.DEVNULL
    if terminal:
        import pty

        held, stdin = pty.openpty()
        os.write(held, terminal.encode())
    done = subprocess.run(
        forkserver.command(command, clean_env()),
        cwd=tmp_path,
        env=clean_env(),
        stdin=stdin,
        capture_output=True,
        text=True,
        timeout=120,
    )
    if terminal:
        os.close(stdin)
        os.close(held)
    assert "Traceback" not in done.stderr
    assert "replay:" not in done.stderr, done.stderr  # every tool gave the recorded result
    return done, events_of(transcript)


def results(events):
    return [(e["name"], e["content"], e["ok"]) for e in events if e["type"] == "tool/result"]


def test_every_lesson_is_in_both_tables_and_says_what_it_teaches():
    assert len(LESSONS) >= 6
    for lesson in LESSONS:
        number = lesson.stem.split("-")[1]
        first = json.loads(lesson.read_text(encoding="utf-8").splitlines()[0])
        assert f"Lesson {int(number)}:" in first["note"] and "by hand" in first["note"]
        for readme in (README, README_ZH):
            program = PROGRAMS.get(number, AGENT).relative_to(ROOT).as_posix()
            row = rf"^\| {number} \|.*`python {program} --replay examples/{lesson.name}`"
            assert f"python {program} --replay examples/{lesson.name}" in first["note"]
            assert re.search(row, readme, re.M), (
                f"{lesson.name} needs a row in README.md and README.zh.md"
            )


def test_lesson_01_the_basic_loop(tmp_path):
    done, events = replay(tmp_path, ROOT / "examples" / "lesson-01.jsonl")
    assert done.returncode == 0 and "391" in done.stdout
    assert [name for name, _, _ in results(events)] == ["write_file", "read_file", "run_shell"]


def test_lesson_02_a_tool_error_is_a_result_and_the_model_corrects(tmp_path):
    done, events = replay(tmp_path, ROOT / "examples" / "lesson-02.jsonl")
    assert done.returncode == 0
    assert results(events)[0][1:] == (
        "error: write_file takes path, content, old (optional); missing: content; unexpected: text",
        False,
    )
    assert (tmp_path / "work" / "greeting.txt").read_text() == "hello\n"


@posix_only
def test_lesson_03_a_declined_command_and_its_reason_reach_the_model(tmp_path):
    done, events = replay(
        tmp_path,
        ROOT / "examples" / "lesson-03.jsonl",
        "n no installs, plain Python is enough\ny\n",
    )
    assert done.returncode == 0 and "604800" in done.stdout
    assert results(events) == [
        ("run_shell", "error: declined by the user: no installs, plain Python is enough", False),
        ("run_shell", "604800\n", True),
    ]


def test_lesson_04_two_calls_in_one_reply_are_answered_in_order(tmp_path):
    done, events = replay(tmp_path, ROOT / "examples" / "lesson-04.jsonl")
    first = next(e for e in events if e["type"] == "assistant/message")
    ids = [c["id"] for c in first["message"]["tool_calls"]]
    assert [e["call_id"] for e in events if e["type"] == "tool/result"] == ids and len(ids) == 2
    assert done.returncode == 0
    # the second call is an edit of what the first wrote: it works only in this order (issue #45)
    assert json.loads(first["message"]["tool_calls"][1]["function"]["arguments"])["old"] == "hello"
    assert (tmp_path / "work" / "hello.txt").read_text() == "hello, world\n"
    html = (ROOT / "docs" / "lessons" / "lesson-04.html").read_text(encoding="utf-8")
    assert "edit hello.txt:\n- hello\n+ hello, world" in html


def test_lesson_05_reasoning_content_is_kept_in_every_message_sent_back(tmp_path):
    done, events = replay(tmp_path, ROOT / "examples" / "lesson-05.jsonl")
    sent = [e["message"] for e in events if e["type"] == "assistant/message"]
    assert done.returncode == 0 and all(m["reasoning_content"] for m in sent)


def test_lesson_06_a_cut_off_reply_runs_nothing_and_exits_3(tmp_path):
    done, events = replay(tmp_path, ROOT / "examples" / "lesson-06.jsonl")
    assert done.returncode == 3
    assert results(events)[0][1].startswith("not run: the reply was cut off")
    assert not (tmp_path / "work" / "story.txt").exists()


def test_lesson_07_a_tool_call_written_as_text_is_recovered_and_asked_about(tmp_path):
    done, events = replay(tmp_path, ROOT / "examples" / "lesson-07.jsonl", "y\n")
    assert done.returncode == 0 and "remember the milk" in done.stdout
    first = next(e for e in events if e["type"] == "assistant/message")
    assert first["message"]["content"] == "I'll write the file." and first["message"]["tool_calls"]
    assert "DSML" in first["repairs"][0]
    # the question says the call was written as text, and the yes wrote the file
    assert "The model wrote this call as text, not as a tool call." in done.stderr
    assert "to note.txt? [y/N]" in done.stderr
    assert (tmp_path / "work" / "note.txt").read_text() == "remember the milk\n"
    # with --yes and no terminal it writes nothing: the replay pauses, and says how to run it
    (tmp_path / "yes").mkdir()
    paused, _ = replay(tmp_path / "yes", ROOT / "examples" / "lesson-07.jsonl")
    assert paused.returncode == 4 and not (tmp_path / "yes" / "work" / "note.txt").exists()
    assert "--yes --text-calls=run" in paused.stderr


def test_lesson_08_a_subagent_runs_the_loop_on_a_conversation_of_its_own(tmp_path):
    done, events = replay(tmp_path, ROOT / "examples" / "lesson-08.jsonl")
    assert done.returncode == 0 and "passport" in done.stdout
    under = [e for e in events if e.get("under") == "call_helper"]
    assert [e["type"] for e in under] == [
        "run/start",  # its own system prompt and tools
        "user/message",
        "assistant/message",
        "tool/started",  # as its tool began
        "tool/result",
        "assistant/message",
        "turn/end",
    ]
    helper_answer = under[5]["message"]["content"]
    [result] = [e for e in events if e["type"] == "tool/result" and e["call_id"] == "call_helper"]
    assert result["content"] == helper_answer  # only its answer comes back
    conversation = runs.conversation(events)  # the helper's steps are not the caller's
    assert not any(m.get("tool_call_id") == "call_read" for m in conversation)
    assert "  ┌ the helper's own loop:" in done.stderr
    shown = subprocess.run(
        [sys.executable, str(AGENT), "--show", str(tmp_path / "t.jsonl")],
        capture_output=True,
        text=True,
    ).stdout
    assert "\n    subagent, asked: Does notes.txt mention a passport?" in shown
    assert "\n      → read_file(" in shown


def test_lesson_09_a_handoff_goes_on_with_the_reviewer_on_the_same_conversation(tmp_path):
    done, events = replay(tmp_path, ROOT / "examples" / "lesson-09.jsonl")
    assert done.returncode == 0 and "add.py is right" in done.stdout
    kinds = [e["type"] for e in events]
    handoff = kinds.index("agent/handoff")
    assert events[handoff]["to"] == "reviewer"
    assert runs.names(events[handoff]["tools"]) == ["read_file"]
    assert results(events)[-1] == ("read_file", "def add(a, b):\n    return a + b\n", True)
    assert (tmp_path / "work" / "add.py").exists()
    assert (
        "[handed off to reviewer"
        in subprocess.run(
            [sys.executable, str(AGENT), "--show", str(tmp_path / "t.jsonl")],
            capture_output=True,
            text=True,
        ).stdout
    )


def test_lesson_10_a_long_conversation_is_compacted_where_the_person_sees_it(tmp_path):
    done, events = replay(tmp_path, ROOT / "examples" / "lesson-10.jsonl")
    assert done.returncode == 0 and "2686700" in done.stdout and "20100" in done.stdout
    compacted = [e for e in events if e["type"] == "context/compacted"]
    assert [bool(e["summary"]) for e in compacted] == [True, False]
    assert list(compacted[1]["placeholders"]) == ["call_read"]
    assert done.stderr.count("compacted: about ") == 2
    conversation = runs.conversation(events)  # what --resume goes on from
    assert conversation[1]["content"].startswith("[The conversation before this point was")
    [read] = [m for m in conversation if m.get("tool_call_id") == "call_read"]
    assert read["content"].startswith('[compacted: read_file({"path": "numbers.txt"})')


def test_lesson_11_each_step_says_what_it_cost_and_what_the_prefix_cache_saved(tmp_path):
    # The tests run as test-model, which has no price: the lesson's model is named, as a person
    # who has not set AGENT_MODEL runs it (the default, deepseek-flash).
    lesson = ROOT / "examples" / "lesson-11.jsonl"
    done, events = replay(tmp_path, lesson, None, "--model", "deepseek-flash")
    assert done.returncode == 0 and "27 words" in done.stdout and "128 characters" in done.stdout
    recorded = [e for e in events_of(lesson) if e["type"] == "assistant/message"]
    printed = re.findall(r"^step \d+: (.*), a recorded reply$", done.stderr, re.M)
    # what the agent makes of the recorded usage now, at DeepSeek's prices, is what the lesson says
    said = [replies.describe_tokens(replies.count_tokens(e["usage"]), e["cost"]) for e in recorded]
    assert printed == said
    shares = [
        int(share) for share in re.findall(r"the cache saved [\d.]+ USD, (\d+)%", "".join(said))
    ]
    assert shares == sorted(shares) and shares[0] >= 45 and shares[-1] >= 75  # it grows
    assert (
        "\ntotal: 2424 prompt tokens (2048 cached), 123 completion tokens, 0.000273 USD (the "
        in done.stderr
    )
    replayed = [e["cost"] for e in events if e["type"] == "assistant/message"]
    assert replayed == [e["cost"] for e in recorded]  # the replay's transcript records the same
    # each recorded task is said as it starts, before its first step (issue #46)
    tasks = [e["content"] for e in events_of(lesson) if e["type"] == "user/message"]
    said_before = re.findall(r"^task: (.*)\nstep 1: ", done.stderr, re.M)
    assert said_before == tasks and len(tasks) == 2
    # and the note says why the first request is already cached
    note = events_of(lesson)[0]["note"]
    assert (
        "already 384 tokens cached" in note
        and recorded[0]["usage"]["prompt_cache_hit_tokens"] == 384
    )


@pytest.mark.parametrize("lesson", LESSONS, ids=lambda p: p.stem)
def test_every_lesson_has_its_own_test(lesson):
    assert (
        f"def test_lesson_{lesson.stem.split('-')[1]}_"
        in (ROOT / "tests" / "test_lessons.py").read_text()
    )


def test_a_recovered_call_gets_the_same_id_at_every_replay(tmp_path):
    # Lesson 07's call was written as text, with no id: the id made for it is made of the call,
    # so two replays, and the lesson itself, say the same (issue 35: "the same run every time").
    ids = []
    for n in (1, 2):
        (tmp_path / str(n)).mkdir()
        _done, events = replay(tmp_path / str(n), ROOT / "examples" / "lesson-07.jsonl", "y\n")
        ids.append([e["call_id"] for e in events if e["type"] == "tool/result"])
    lesson = [
        e["call_id"]
        for e in events_of(ROOT / "examples" / "lesson-07.jsonl")
        if e["type"] == "tool/result"
    ]
    assert ids[0] == ids[1] == lesson


def test_a_replay_is_of_the_model_it_recorded_whatever_the_settings_say(agent):
    # AGENT_MODEL (test-model here, qwen3 in a .env made for Ollama) names a live server's model:
    # a replay is priced and labelled as recorded, unless --model says otherwise
    done = agent("--replay", str(ROOT / "examples" / "lesson-11.jsonl"))
    assert done.returncode == 0, done.stderr
    assert "deepseek-flash at replay of" in done.stderr and "USD (the cache saved" in done.stderr
    other = agent("--model", "qwen3", "--replay", str(ROOT / "examples" / "lesson-11.jsonl"))
    assert "qwen3 at replay of" in other.stderr and "USD (the cache saved" not in other.stderr
