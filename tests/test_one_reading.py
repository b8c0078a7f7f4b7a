"""One reading of a run (realworld/runs.py), held against what the loop sent (issue 33).

Each run below goes to the scripted server, which records every request it got. What runs.walk()
reads from the run's transcript must be those requests: the same messages, in the same order, with
the same tools. So must every view of it: --show's step lines, the page's counts and lists, the
replay's comparison of results, and a --resume, which goes on from the reading. Each lesson is
run so too, its recorded replies served one by one: the reading of the lesson file itself must
give the requests the loop sends, or its page would show a conversation the loop never sent.
"""

import importlib.util
import json
import os
import re
import signal
import subprocess
import sys
from pathlib import Path

import pytest
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
)
from scripted_server import Error, Hang, call, history_problem, reply

from agent import SYSTEM_PROMPT
from realworld import compaction, page, pauses, runs, transcripts
from realworld.replay import Replay, ReplayEnded

LESSONS = sorted((ROOT / "examples").glob("lesson-*.jsonl"))
PROGRAMS = {"08": ROOT / "examples" / "subagent.py", "09": ROOT / "examples" / "handoff.py"}
# What a person types where a lesson needs it (03: its [y/N] answers; 07: the yes a call written as
# text asks for, --yes or not); the others run with --yes.
TYPED = {"03": "n no installs, plain Python is enough\ny\n", "07": "y\n"}


def sent_by_server(server) -> list[tuple[list, list]]:
    """(messages, tools) of each request the server got, in order."""
    return [[r["body"]["messages"], r["body"].get("tools", [])] for r in server.requests]


def read(events: list[dict]) -> list[tuple[list, list]]:
    """(messages, tools) of each request the reading says was sent, as JSON would carry them."""
    return [json.loads(json.dumps((r.messages, r.tools or []))) for r in runs.requests(events)]


def named_in_order(requests: list[tuple[list, list]]) -> list:
    """requests with every call id named by the order it first appears in: a call recovered from
    text gets a new id at each run (lesson 07)."""
    ids = {}
    for messages, _ in requests:
        for message in messages:
            for made in message.get("tool_calls") or []:
                made["id"] = ids.setdefault(made["id"], f"id-{len(ids)}")
            if "tool_call_id" in message:
                message["tool_call_id"] = ids.setdefault(message["tool_call_id"], f"id-{len(ids)}")
    return requests


def served(lesson) -> list[dict]:
    """A lesson's recorded replies as the server sent them, in the order they were recorded."""
    bodies = []
    for event in transcripts.read(lesson):
        if event["type"] != "assistant/message":
            continue
        sent = event.get("sent") or event["message"]
        fields = {k: v for k, v in sent.items() if k not in ("role", "content", "tool_calls")}
        bodies.append(
            reply(
                sent.get("content"),
                sent.get("tool_calls"),
                event.get("finish_reason"),
                event.get("usage"),
                **fields,
            )
        )
    return bodies


def views_hold(path, server) -> None:
    """Every view of the transcript at path says what the server got."""
    events = events_of(path)
    got = sent_by_server(server)
    assert read(events) == got  # the reading: messages, order, counts, tools
    for messages, _ in got:
        assert history_problem(messages) is None
    every = runs.requests(events)
    # --show: before each reply, its step and the size of its request
    shown = show(path)
    lines = re.findall(r"\[step (\d+): the request sent (\d+) messages?\]", shown)
    assert [(int(s), int(n)) for s, n in lines] == [(r.step, r.count) for r in every]
    # the page: each of the run's own requests with its count, and the list it sent
    html = page.page(events, SYSTEM_PROMPT)
    own = [(m, t) for (m, t), r in zip(got, every, strict=True) if r.under is None]
    counts = re.findall(r"class=step id=step-\d+ data-v=(\d+) data-count=(\d+)", html)
    assert [int(n) for _, n in counts] == [len(m) for m, _ in own]
    helpers = [r for r in every if r.under is not None]
    assert html.count("class=substep") == len(helpers)


@posix_only
@pytest.mark.parametrize("lesson", LESSONS, ids=lambda p: p.stem)
def test_each_lessons_requests_are_what_the_loop_sends_and_every_view_says_so(
    agent, server, lesson
):
    number = lesson.stem.split("-")[1]
    events = transcripts.read(lesson)
    start = events[0]
    tasks = runs.recorded_tasks(events)
    server.add(*served(lesson))
    env = clean_env(AGENT_API_KEY=KEY)
    if start.get("context_window"):  # lesson 10: as AGENT_CONTEXT_WINDOW=1000 would set it
        env["AGENT_CONTEXT_WINDOW"] = str(start["context_window"])
    program = PROGRAMS.get(number, AGENT)
    if len(tasks) > 1:  # typed at the > prompt, one after another
        done = agent("--yes", terminal="\n".join(tasks) + "\nexit\n", env=env, program=program)
    elif number in TYPED:
        done = agent(tasks[0], terminal=TYPED[number], env=env, program=program)
    else:
        done = agent("--yes", tasks[0], env=env, program=program)
    assert "Traceback" not in done.stderr, done.stderr
    assert len(server.requests) == len(served(lesson)), done.stderr
    views_hold(done.transcript, server)
    live = runs.requests(events_of(done.transcript))
    # the steps the terminal printed (a summary's request prints none), and its total, which the
    # page's header says too: a helper's and a summary's requests counted
    printed = [int(n) for n in re.findall(r"^(?:> )*(?:  │ )*step (\d+): ", done.stderr, re.M)]
    assert printed == [r.step for r in live if not str(r.under).startswith("compaction-")]
    [total] = re.findall(r"^(?:> )*total: (.*)$", done.stderr, re.M)
    assert f"; {total}</p>" in page.page(events_of(done.transcript), SYSTEM_PROMPT)
    for summary in (r for r in live if str(r.under).startswith("compaction-")):
        assert summary.reply.get("usage") and summary.reply.get("finish_reason") == "stop"
    # the lesson file read the same way gives the same requests: its page is the loop's
    assert named_in_order(read(events)) == named_in_order(sent_by_server(server))


@pytest.mark.parametrize("lesson", LESSONS, ids=lambda p: p.stem)
def test_a_lessons_replay_sends_what_the_lesson_says_was_sent(tmp_path, lesson):
    number = lesson.stem.split("-")[1]
    transcript = tmp_path / "t.jsonl"
    flags = ["--replay", str(lesson), "--transcript", str(transcript)]
    program = PROGRAMS.get(number, AGENT)
    if number in TYPED:
        done = run_offline(tmp_path, *flags, terminal=TYPED[number], program=program)
    else:
        done = run_offline(tmp_path, *flags, "--yes", program=program)
    assert "replay:" not in done.stderr, done.stderr  # no result differed
    replayed = named_in_order(read(events_of(transcript)))
    assert replayed == named_in_order(read(transcripts.read(lesson)))


# --- Scripted runs: a repair, a refusal and its compaction, a Ctrl-C, a handoff across tasks and
# a resume, a helper's own tool written as text ----------------------------------------------


@posix_only
def test_a_refused_request_compacted_and_sent_again_reads_as_it_was_sent(agent, server):
    server.add(
        reply(tool_calls=[call("read_file", {"path": "big.txt"}, "r1")]),
        reply("It holds many x."),
        Error(400, "This model's maximum context length is 2048 tokens", times=1),
        reply("The user asked what big.txt holds: many x."),  # the summary
        reply("Still many x."),
    )
    agent.workdir.mkdir()
    (agent.workdir / "big.txt").write_text("x" * 5_000)
    done = agent("--yes", terminal="what is in big.txt?\nand now?\nexit\n")
    assert done.returncode == 0, done.stderr
    # the refused request got no reply: it is in no view, but the server got it
    refused = server.requests.pop(2)
    assert history_problem(refused["body"]["messages"]) is None
    views_hold(done.transcript, server)
    [summary] = [r for r in runs.requests(events_of(done.transcript)) if r.under]
    assert [m["role"] for m in summary.messages] == ["system", "user"] and summary.tools == []
    assert [r.step for r in runs.requests(events_of(done.transcript))] == [1, 2, 1, 1]


@posix_only
@pytest.mark.parametrize("where", ["request", "command"])
def test_a_task_interrupted_reads_with_the_agents_answer_in_place_of_the_reply(
    agent, server, where
):
    import pty  # POSIX only, like the tests that use it

    agent.workdir.mkdir()
    started = agent.workdir / "started"
    if where == "request":
        held = Hang()
        server.add(held, reply("after it"))
    else:
        fd = open_fifo(started)
        # waits for Ctrl-C; run again by the replay, it finds no FIFO and ends at once
        command = "[ -p started ] && echo go >started && exec sleep 600"
        shell = call("run_shell", {"command": command}, "c1")
        server.add(reply(tool_calls=[shell]), reply("after it"))
    terminal, tty = pty.openpty()
    os.write(terminal, b"slow task\nnext task\nexit\n")
    process, transcript = agent.start("--yes", stdin=tty)
    os.close(tty)
    if where == "request":
        assert held.arrived.wait(60)
        server.requests.pop(0)  # it got no reply: it is in no view, but the server got it
    else:
        assert read_fifo(fd, until_eof=False) == b"go\n"
        os.close(fd)
        started.unlink()
    process.send_signal(signal.SIGINT)
    _, stderr = process.communicate(timeout=60)
    os.close(terminal)
    assert process.returncode == 0, stderr
    views_hold(transcript, server)
    shown = show(transcript)
    in_place = "(no answer: interrupted by the user)"
    assert (f"[no reply: the agent answered in its place] {in_place}" in shown) == (
        where == "request"
    )
    html = page.page(events_of(transcript), SYSTEM_PROMPT)
    assert (
        f"<b>no reply</b>: the agent answered the task in its place<pre>\n{in_place}" in html
    ) == (where == "request")
    # a replay fails where the recording got no reply, and sends what the recording sent
    replayed = agent.tmp_path / "replayed.jsonl"
    again = run_offline(
        agent.tmp_path, "--replay", str(transcript), "--transcript", str(replayed), "--yes"
    )
    assert again.stdout == "after it\n" and "the recorded run got no reply here" in again.stderr
    recorded = named_in_order(read(events_of(transcript)))
    sent = named_in_order(read(events_of(replayed)))
    if where == "command":  # it ran again in the replay: its result differs, and is said
        assert "run_shell gave another result" in again.stderr
        for messages, _ in recorded + sent:
            for m in messages:
                m["content"] = "(its result)" if m["role"] == "tool" else m["content"]
    assert sent == recorded


def test_a_recovered_call_reads_with_the_id_its_result_carries(agent, server):
    text = '<tool_call>{"name": "write_file", "arguments": {"path": "a.txt", "content": "A"}}'
    server.add(reply(text + "</tool_call>"), reply("done"))
    done = agent("--yes", "write a.txt", terminal="y\n")  # written as text: it asks, --yes or not
    assert done.returncode == 0 and (agent.workdir / "a.txt").read_text() == "A"
    views_hold(done.transcript, server)
    first = next(e for e in events_of(done.transcript) if e["type"] == "assistant/message")
    assert first["sent"]["content"] == text + "</tool_call>"  # kept for a replay to repair again
    [result] = [e for e in events_of(done.transcript) if e["type"] == "tool/result"]
    assert first["message"]["tool_calls"][0]["id"] == result["call_id"]


@posix_only
def test_a_handoff_lasts_through_the_next_task_and_a_resume(agent, server):
    handoff = ROOT / "examples" / "handoff.py"
    reviewer_tools = ["read_file"]
    server.add(
        reply(tool_calls=[call("transfer_to_reviewer", {}, "t1")]),
        reply("Handed over."),
        reply("Still the reviewer."),  # the next task at the prompt
    )
    first = agent("--yes", terminal="review it\nand again\nexit\n", program=handoff)
    assert first.returncode == 0, first.stderr
    names = [[t["function"]["name"] for t in tools] for _, tools in sent_by_server(server)]
    assert names[1] == names[2] == reviewer_tools
    server.add(reply("The reviewer, resumed."))
    resumed = agent("--resume", str(first.transcript), "--yes", "once more", program=handoff)
    assert resumed.returncode == 0, resumed.stderr
    messages, tools = sent_by_server(server)[-1]
    assert [t["function"]["name"] for t in tools] == reviewer_tools
    assert messages[0]["content"].startswith("You review code")
    views_hold(first.transcript, server)  # the resume appended to the same transcript


@posix_only
def test_a_resume_with_a_program_that_lacks_the_agent_handed_to_goes_on_with_its_own(agent, server):
    server.add(reply(tool_calls=[call("transfer_to_reviewer", {}, "t1")]), reply("Handed over."))
    first = agent("--yes", "review it", program=ROOT / "examples" / "handoff.py")
    server.add(reply("The agent's own, resumed."))
    resumed = agent("--resume", str(first.transcript), "--yes", "go on")
    assert resumed.returncode == 0
    assert "which this program does not have" in resumed.stderr
    messages, tools = sent_by_server(server)[-1]
    assert messages[0]["content"] == SYSTEM_PROMPT
    assert [t["function"]["name"] for t in tools] == ["read_file", "write_file", "run_shell"]
    views_hold(first.transcript, server)


def test_a_programs_own_tool_written_as_text_is_recovered_and_run(agent, server):
    # The recovery reads the tools the request offered: ask_helper is one of them here.
    text = '<tool_call>{"name": "ask_helper", "arguments": {"question": "what is in a.txt?"}}'
    server.add(
        reply(text + "</tool_call>"),
        reply(tool_calls=[call("read_file", {"path": "a.txt"}, "r1")]),
        reply("It says A."),
        reply("The helper says a.txt says A."),
    )
    agent.workdir.mkdir()
    (agent.workdir / "a.txt").write_text("A")
    # AGENT_TEXT_CALLS=run: a program's own tool written as text runs as its tool call would (by
    # default it asks: what it changes is the program's to say, not the agent's)
    subagent = ROOT / "examples" / "subagent.py"
    done = agent("--yes", "--text-calls=run", "ask the helper", program=subagent)
    assert done.returncode == 0 and done.stdout == "The helper says a.txt says A.\n"
    views_hold(done.transcript, server)
    helper = server.requests[1]["body"]
    assert helper["messages"][0]["content"].startswith("You answer one question")


@posix_only
def test_going_on_after_a_pause_numbers_its_steps_from_one_as_the_terminal_does(agent, server):
    server.add(reply(tool_calls=[call("run_shell", {"command": "echo hi"}, "c1")]))
    paused = agent("say hi")
    assert paused.returncode == 4
    server.add(reply("said hi"))
    went = agent("--resume", str(paused.transcript), "--approve")
    assert went.returncode == 0, went.stderr
    assert "step 1:" in went.stderr
    views_hold(paused.transcript, server)
    assert [r.step for r in runs.requests(events_of(paused.transcript))] == [1, 1]


# --- Members a fresh pair of eyes found ---------------------------------------------------------
# Each was a view that said another thing than the loop did, or a crash; the rule changed.


def write_events(path, events) -> None:
    path.write_text("".join(json.dumps(e) + "\n" for e in events), encoding="utf-8")


def task_and_reply(reply_message: dict, **fields) -> list[dict]:
    return [
        {"type": "run/start", "system_prompt": SYSTEM_PROMPT, "tools": []},
        {"type": "user/message", "content": "go"},
        {"type": "assistant/message", "message": reply_message, "finish_reason": "stop", **fields},
        {"type": "turn/end", "status": "answered"},
    ]


def test_a_replay_answers_with_what_the_server_sent_only_where_it_repairs_into_what_was_shown(
    tmp_path,
):
    # A transcript's "sent" that holds a call its "message" (what every view shows) does not.
    hidden = call("write_file", {"path": "pwned.txt", "content": "x"}, "c1")
    sent = {"role": "assistant", "content": "", "tool_calls": [hidden]}
    lesson = tmp_path / "t.jsonl"
    write_events(lesson, task_and_reply({"role": "assistant", "content": "done"}, sent=sent))
    done = run_offline(tmp_path, "--replay", str(lesson), "--yes")
    assert done.returncode == 0 and done.stdout == "done\n"
    assert not (tmp_path / "work" / "pwned.txt").exists()


@pytest.mark.parametrize(
    "event",
    [
        {"type": "agent/handoff", "to": ["reviewer"], "system_prompt": "s", "tools": []},
        {"type": "agent/handoff", "to": {"a": 1}, "system_prompt": 5, "tools": "read_file"},
        {"type": "agent/handoff", "to": "reviewer", "tools": [{"function": "read_file"}, 7]},
        {"type": "run/resume", "agent": ["x"], "tools": [{"function": None}]},
    ],
    ids=["to-a-list", "to-an-object", "tools-of-text", "resume-of-a-list"],
)
def test_a_hand_written_handoff_or_resume_of_any_shape_is_shown_and_resumed_without_a_traceback(
    agent, server, event
):
    events = task_and_reply({"role": "assistant", "content": "done"})
    events.insert(3, event)
    agent.workdir.mkdir()
    path = agent.tmp_path / "hand.jsonl"
    write_events(path, events)
    for view in (["--show", str(path)], ["--html", str(path), str(agent.tmp_path / "p.html")]):
        done = subprocess.run(
            [sys.executable, str(AGENT), *view], env=clean_env(), capture_output=True, text=True
        )
        assert done.returncode == 0 and "Traceback" not in done.stderr, done.stderr
    server.add(reply("again"))
    went = agent("--resume", str(path), "--yes", "more", program=PROGRAMS["09"])
    assert went.returncode == 0 and "Traceback" not in went.stderr, went.stderr
    # the program's own words for the agent it goes on with, never the transcript's
    reviewer = "You review code in a folder on the user's computer."
    assert server.messages(0)[0]["content"].startswith((SYSTEM_PROMPT, reviewer))


def test_a_resume_of_a_killed_run_numbers_its_steps_from_one(tmp_path):
    events = task_and_reply({"role": "assistant", "content": "", "tool_calls": []})[:3]
    events += [{"type": "run/resume"}, {"type": "user/message", "content": "and now?"}]
    events += [{"type": "assistant/message", "message": {"role": "assistant", "content": "now"}}]
    assert [r.step for r in runs.requests(events)] == [1, 1]


def test_run_from_python_records_the_start_of_the_conversation_it_begins(loop, server):
    server.add(reply("hi"))
    ran = loop("go")
    views_hold(ran.transcript, server)
    assert ran.events()[0]["type"] == "run/start"


@posix_only
def test_a_replay_asks_for_a_summary_where_the_person_typed_compact(agent, server):
    server.add(reply("first"), reply("The user said go."), reply("second"))
    done = agent("--yes", terminal="go\n/compact\nmore\nexit\n")
    assert done.returncode == 0, done.stderr
    replayed = agent.tmp_path / "replayed.jsonl"
    again = run_offline(
        agent.tmp_path, "--replay", str(done.transcript), "--transcript", str(replayed), "--yes"
    )
    assert again.returncode == 0 and again.stdout == "first\nsecond\n", again.stderr
    assert named_in_order(read(events_of(replayed))) == named_in_order(
        read(events_of(done.transcript))
    )


@posix_only
def test_a_replay_fails_where_the_recording_failed(agent, server):
    server.add(Error(400, "bad request", times=1), reply("second"))
    done = agent("--yes", terminal="go\nmore\nexit\n")
    assert "bad request" in done.stderr and done.stdout == "second\n"
    again = run_offline(agent.tmp_path, "--replay", str(done.transcript), "--yes")
    assert again.stdout == "second\n" and "bad request" in again.stderr, again.stderr


def test_a_helpers_call_id_is_never_one_the_caller_gives_later(agent, server):
    # A server that gives the same ids in every conversation: the page tells them apart by id.
    server.add(
        reply(tool_calls=[call("ask_helper", {"question": "a?"}, "c1")]),
        reply(tool_calls=[call("read_file", {"path": "a.txt"}, "c2")]),
        reply("A."),
        reply(tool_calls=[call("ask_helper", {"question": "again?"}, "c2")]),
        reply("A again."),
        reply("done"),
    )
    agent.workdir.mkdir()
    (agent.workdir / "a.txt").write_text("A")
    done = agent("--yes", "go", program=PROGRAMS["08"])
    assert done.returncode == 0, done.stderr
    views_hold(done.transcript, server)
    replies = [r.reply["message"] for r in runs.requests(events_of(done.transcript))]
    ids = [c["id"] for message in replies for c in message.get("tool_calls") or []]
    assert len(ids) == len(set(ids)) == 3
    html = page.page(events_of(done.transcript), SYSTEM_PROMPT)
    assert html.count("its own requests") == 2


@posix_only
def test_a_second_resume_goes_on_with_the_agent_the_first_went_on_with(agent, server):
    server.add(reply(tool_calls=[call("transfer_to_reviewer", {}, "t1")]), reply("Handed over."))
    first = agent("--yes", "review it", program=PROGRAMS["09"])
    server.add(reply("the agent's own"), reply("still the agent's own"))
    agent("--resume", str(first.transcript), "--yes", "go on")  # agent.py: no reviewer
    agent("--resume", str(first.transcript), "--yes", "and on", program=PROGRAMS["09"])
    names = [[t["function"]["name"] for t in tools] for _, tools in sent_by_server(server)]
    assert names[2] == ["read_file", "write_file", "run_shell"]  # agent.py's own
    assert names[3] == [*names[2], "transfer_to_reviewer"]  # handoff.py's own, not the reviewer
    views_hold(first.transcript, server)


def test_a_helpers_own_helper_is_recorded_under_its_own_call(loop, server):
    spec = importlib.util.spec_from_file_location("subagent", PROGRAMS["08"])
    subagent = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(subagent)  # this test's own copy: its helper may ask a helper too
    subagent.HELPER_TOOLS = (*subagent.HELPER_TOOLS, subagent.ASK_HELPER)
    server.add(
        reply(tool_calls=[call("ask_helper", {"question": "a?"}, "h1")]),
        reply(tool_calls=[call("ask_helper", {"question": "b?"}, "h2")]),
        reply(tool_calls=[call("read_file", {"path": "a"}, "r1")]),
        reply("no a"),
        reply("none"),
        reply("no file"),
    )
    ran = loop("go", tools=list(subagent.OFFERED), yes=True)
    assert ran.status == "answered" and ran.text == "no file"
    views_hold(ran.transcript, server)
    assert {e.get("under") for e in ran.events()} == {None, "h1", "h2"}


def test_show_says_a_helpers_pause_waits_for_nobody():
    events = task_and_reply({"role": "assistant", "content": "done"})
    events.insert(3, {"type": "turn/end", "status": "paused", "under": "h1", "pending": []})
    shown = "\n".join(page.shown(events, SYSTEM_PROMPT))
    assert "[the helper paused: its command waited for a yes nobody could give it]" in shown
    assert "--approve" not in shown


# --- A second pair of eyes: what a replay answers, and where it fails ---------------------------


def test_a_replay_reads_no_call_in_a_recorded_messages_text(tmp_path):
    # Live, a call written as text that the agent took for a mention ran nothing; recorded as
    # text, it runs nothing in a replay either.
    text = '<tool_call>{"name": "run_shell", "arguments": {"command": "touch pwned"}}</tool_call>'
    lesson = tmp_path / "t.jsonl"
    write_events(lesson, task_and_reply({"role": "assistant", "content": text}))
    done = run_offline(tmp_path, "--replay", str(lesson), "--yes")
    assert done.returncode == 0 and not (tmp_path / "work" / "pwned").exists()


def test_a_replay_does_not_take_a_field_no_view_shows_from_what_the_server_sent(tmp_path):
    sent = {"role": "assistant", "content": "done", "reasoning_content": "not shown anywhere"}
    lesson = tmp_path / "t.jsonl"
    write_events(lesson, task_and_reply({"role": "assistant", "content": "done"}, sent=sent))
    done = run_offline(tmp_path, "--replay", str(lesson), "--yes")
    assert done.returncode == 0 and "not shown anywhere" not in done.stderr


@posix_only
def test_a_replay_fails_twice_where_the_recording_failed_twice(agent, server):
    server.add(Error(400, "bad one", times=1), Error(400, "bad two", times=1), reply("third"))
    done = agent("--yes", terminal="go\nmore\nagain\nexit\n")
    assert done.stdout == "third\n"
    again = run_offline(agent.tmp_path, "--replay", str(done.transcript), "--yes")
    assert again.stdout == "third\n", again.stderr
    assert "bad one" in again.stderr and "bad two" in again.stderr


@posix_only
def test_a_replay_types_compact_where_its_summary_failed(agent, server):
    server.add(reply("first"), Error(400, "summary bad", times=1), reply("second"))
    done = agent("--yes", terminal="go\n/compact\nmore\nexit\n")
    assert done.stdout == "first\nsecond\n", done.stderr
    again = run_offline(agent.tmp_path, "--replay", str(done.transcript), "--yes")
    assert again.stdout == "first\nsecond\n", again.stderr


def test_once_a_replay_has_ended_every_request_fails_a_helpers_or_a_summarys_too(tmp_path):
    events = task_and_reply({"role": "assistant", "content": "done"})
    replay = Replay(events, tmp_path / "t.jsonl")
    summary = [
        {"role": "system", "content": compaction.SUMMARY_PROMPT},
        {"role": "user", "content": "x"},
    ]
    with pytest.raises(ReplayEnded):
        replay.create(model="m", messages=summary)  # the recording asked for no summary here
    with pytest.raises(ReplayEnded):  # swallowed by compaction, it still ends the run's own
        replay.create(model="m", messages=runs.requests(events)[0].messages)


def test_a_conversation_passed_to_run_from_python_is_recorded_as_it_stands(loop, server):
    server.add(reply("hi"), reply("again"))
    messages = [{"role": "system", "content": SYSTEM_PROMPT}]
    loop("go", messages=messages)
    second = loop("more", messages=messages)  # a new transcript, going on with the same list
    views_hold(second.transcript, type("Only", (), {"requests": server.requests[1:]})())


SHELL = call("run_shell", {"command": "echo hi"}, "c1")
PAUSED = [  # and went on with --approve, in the process that was killed
    {"type": "turn/end", "status": "paused", "pending": [{"call_id": "c1", **SHELL["function"]}]},
    {"type": "run/resume"},
]


@pytest.mark.parametrize("before", [[], PAUSED], ids=["in-its-turn", "going-on-from-a-pause"])
def test_a_replay_of_a_killed_then_resumed_run_stops_its_first_turn_where_the_kill_was(
    tmp_path, before
):
    events = task_and_reply({"role": "assistant", "content": "", "tool_calls": [SHELL]})[:3]
    events += [
        *before,
        {"type": "tool/started", "call_id": "c1"},
        {"type": "run/resume"},
        {"type": "tool/result", "call_id": "c1", "name": "run_shell", "content": "unknown"},
        {"type": "user/message", "content": "more"},
        {"type": "assistant/message", "message": {"role": "assistant", "content": "done"}},
        {"type": "turn/end", "status": "answered"},
    ]
    lesson = tmp_path / "t.jsonl"
    write_events(lesson, events)
    done = run_offline(tmp_path, "--replay", str(lesson), "--yes")
    assert done.returncode == 0 and done.stdout == "done\n", done.stderr
    assert "the recorded run was stopped here" in done.stderr
    assert "gave another result than recorded: 'unknown'" in done.stderr  # as a kill leaves it


def show(path) -> str:
    """What `agent.py --show path` prints."""
    command = [sys.executable, str(AGENT), "--show", str(path)]
    shown = subprocess.run(command, env=clean_env(), capture_output=True, text=True, timeout=60)
    return shown.stdout


# --- Every request in every view (issue #46): a summary's request that wrote no summary, a tool
# the model made up ------------------------------------------------------------------------------


@posix_only
@pytest.mark.parametrize(
    "summary", ["", "The user said go. " * 400], ids=["empty", "no-shorter-than-the-turns"]
)
def test_a_summarys_request_that_wrote_no_summary_is_on_the_page_as_it_was_sent(
    agent, server, summary
):
    server.add(reply("first"), reply(summary), reply("second"))
    done = agent("--yes", terminal="go\n/compact\nmore\nexit\n")
    assert done.returncode == 0 and "kept" in done.stderr, done.stderr
    views_hold(done.transcript, server)  # the page shows the summary's request as a substep
    shown = page.page(events_of(done.transcript), SYSTEM_PROMPT)
    assert shown.count("a summary was asked for and not kept") == 1
    assert "ended: no_summary" in shown


@posix_only
def test_a_replay_answers_a_tool_the_model_made_up_as_the_run_did(agent, server):
    server.add(reply(tool_calls=[call("delete_file", {"path": "a.txt"}, "c1")]), reply("done"))
    done = agent("--yes", "go")
    assert done.returncode == 0 and done.stdout == "done\n", done.stderr
    made_up = server.messages(1)[-1]
    assert made_up["role"] == "tool" and "unknown tool" in made_up["content"]
    replayed = agent.tmp_path / "replayed.jsonl"
    again = run_offline(
        agent.tmp_path, "--replay", str(done.transcript), "--transcript", str(replayed), "--yes"
    )
    assert again.returncode == 0 and again.stdout == "done\n", again.stderr
    assert read(events_of(replayed)) == read(events_of(done.transcript))


# A replay goes on with the window the run went on with: a helper's refusal that named one, the
# smaller AGENT_CONTEXT_WINDOW where a refusal named a larger, and a resume's own window and count
# (the resumed process began afresh). Each compacts where the run compacted, so each request sent
# is the one the run sent.
REFUSED_AT = "This model's maximum context length is {} tokens"


def replay_of(agent, transcript, program=AGENT) -> tuple[subprocess.CompletedProcess, list]:
    """A replay of transcript with no window setting, and what its reading says it sent."""
    out = agent.tmp_path / "replayed.jsonl"
    command = ["--replay", str(transcript), "--transcript", str(out), "--yes"]
    again = run_offline(agent.tmp_path, *command, program=program)
    return again, read(events_of(out)) if out.exists() else []


@posix_only
def test_a_replay_goes_on_with_the_window_a_helpers_refusal_named(agent, server):
    server.add(
        reply(tool_calls=[call("read_file", {"path": "big.txt"}, "r1")]),
        reply(tool_calls=[call("ask_helper", {"question": "a?"}, "c1")]),
        Error(400, REFUSED_AT.format(2048), times=1),  # the helper's request
        reply(tool_calls=[call("read_file", {"path": "big.txt"}, "r2")]),  # compacted for 2,048
        reply("done"),
    )
    agent.workdir.mkdir()
    (agent.workdir / "big.txt").write_text("x " * 2_000)
    done = agent("--yes", "go", program=PROGRAMS["08"])
    assert done.returncode == 0 and "window 2,048" in done.stderr, done.stderr
    [helper_end] = [e for e in events_of(done.transcript) if e.get("status") == "context_full"]
    assert "under" in helper_end and helper_end["window"] == 2048
    again, sent = replay_of(agent, done.transcript, PROGRAMS["08"])
    assert again.returncode == 0, again.stderr
    assert sent == read(events_of(done.transcript))


@posix_only
def test_a_replay_keeps_the_smaller_window_the_run_was_given(agent, server):
    server.add(
        reply(tool_calls=[call("read_file", {"path": "big.txt"}, "r1")]),
        reply("first done"),
        Error(400, REFUSED_AT.format(100_000), times=1),
        reply("The user read big.txt."),  # the summary
        reply(tool_calls=[call("read_file", {"path": "big.txt"}, "r2")]),
        reply(tool_calls=[call("read_file", {"path": "big.txt"}, "r3")]),  # compacted for 3,000
        reply("done"),
    )
    agent.workdir.mkdir()
    (agent.workdir / "big.txt").write_text("x " * 1_500)
    env = clean_env(AGENT_API_KEY=KEY, AGENT_CONTEXT_WINDOW="3000")
    done = agent("--yes", terminal="go\nmore\nexit\n", env=env)
    assert done.returncode == 0, done.stderr
    assert "the model reads 3,000 tokens at most: compacting" in done.stderr
    assert done.stderr.count("(window 3,000)") == 2
    again, sent = replay_of(agent, done.transcript)
    assert again.returncode == 0 and again.stderr.count("(window 3,000)") == 2, again.stderr
    assert sent == read(events_of(done.transcript))


@posix_only
def test_a_replay_begins_again_where_the_recorded_run_was_resumed(agent, server):
    counted = {"prompt_tokens": 9000, "completion_tokens": 5, "total_tokens": 9005}
    server.add(
        reply(tool_calls=[call("read_file", {"path": "big.txt"}, "r1")]),
        reply("first done", usage=counted),  # four times the estimate: the first process's ratio
    )
    agent.workdir.mkdir()
    (agent.workdir / "big.txt").write_text("x " * 2_000)
    first = agent("--yes", "go", env=clean_env(AGENT_API_KEY=KEY, AGENT_CONTEXT_WINDOW="100000"))
    assert first.returncode == 0, first.stderr
    server.add(
        reply(tool_calls=[call("read_file", {"path": "big.txt"}, "r2")]),  # compacted for 3,000
        reply("second done"),
    )
    on = ["--resume", str(first.transcript), "--transcript", str(first.transcript), "more"]
    second = agent("--yes", *on, env=clean_env(AGENT_API_KEY=KEY, AGENT_CONTEXT_WINDOW="3000"))
    assert second.returncode == 0 and "(window 3,000)" in second.stderr, second.stderr
    again, sent = replay_of(agent, first.transcript)
    assert again.returncode == 0, again.stderr
    assert sent == read(events_of(first.transcript))


# A stop the recording's budget made is a stop the replay makes: nothing was sent there, so the
# replay sends nothing there either, and goes on where the recording went on (a resume)
MONEY = ["--price-input", "1", "--price-output", "1", "--budget", "0.002"]
COSTLY = {"prompt_tokens": 6000, "completion_tokens": 5, "total_tokens": 6005}  # 0.006


@posix_only
@pytest.mark.parametrize("where", ["mid-turn", "in-a-summary"])
def test_a_replay_stops_where_the_recordings_budget_stopped_and_goes_on_after(agent, server, where):
    if where == "mid-turn":
        agent.workdir.mkdir()
        (agent.workdir / "a.txt").write_text("A")
        server.add(reply(tool_calls=[call("read_file", {"path": "a.txt"}, "r1")], usage=COSTLY))
        first = agent("--yes", *MONEY, "read a.txt")
    else:  # the next task compacts first: the summary's request is the one the budget stops
        server.add(reply("first", usage=COSTLY))
        env = clean_env(AGENT_API_KEY=KEY, AGENT_CONTEXT_WINDOW="2000")
        first = agent("--yes", *MONEY, terminal="one\ntwo\nexit\n", env=env)
    assert "the next request was not sent" in first.stderr, first.stderr
    server.add(reply("resumed"))
    on = ["--resume", str(first.transcript), "--transcript", str(first.transcript), "more"]
    assert agent("--yes", *on).returncode == 0
    views_hold(first.transcript, server)
    again, sent = replay_of(agent, first.transcript)
    assert again.returncode == 0, again.stderr
    assert sent == read(events_of(first.transcript)) and again.stdout.endswith("resumed\n")


# A replay pauses where its recording paused, and goes on as the recording went on: each way a
# paused run goes on (realworld/pauses.py, agent.go_on(); the human-in-the-loop family of
# openai-agents-python's docs/human_in_the_loop.md: approve, reject, resume with more input) is a
# member. The replay runs nothing the recording did not run, and counts each process's steps from
# one (--max-steps), as the recording did.
def touch(name: str, call_id: str) -> dict:
    return call("run_shell", {"command": f"touch {name}"}, call_id)


TEXT_CALL = '<tool_call>\n{"name": "run_shell", "arguments": {"command": "touch b"}}\n</tool_call>'


def codes_waiting(path) -> dict:
    """{call id: code} of the calls the transcript's last pause left waiting."""
    return {c["call_id"]: c["code"] for c in pauses.last_end(events_of(Path(path)))["pending"]}


def never_gone_on(agent, server):
    server.add(reply(tool_calls=[touch("a", "c1")]))
    return [agent("say hi")], {}, 1


def approved_under_max_steps(agent, server):
    server.add(reply(tool_calls=[touch("a", "c1")]))
    first = agent("--max-steps", "1", "go")
    server.add(reply("done"))
    on = ["--resume", str(first.transcript), "--transcript", str(first.transcript), "--approve"]
    return [first, agent("--max-steps", "1", *on)], {"flags": ["--max-steps", "1"]}, 1


def some_approved_some_declined(agent, server):
    calls = [
        call("read_file", {"path": "missing.txt"}, "r0"),
        touch("one", "s1"),
        call("write_file", {"path": "w.txt", "content": "w"}, "w2"),
        touch("two", "s3"),
        call("run_shell", "{not json", "s4"),
    ]
    server.add(reply(tool_calls=calls))
    first = agent("go")
    server.add(reply("done"))
    T = str(first.transcript)
    on = ["--resume", T, "--transcript", T, "--approve", codes_waiting(T)["s1"]]
    return [first, agent(*on, "--reject", "not now")], {}, 1


def paused_twice(agent, server):
    server.add(reply(tool_calls=[touch("a", "c1")]))
    first = agent("go")
    T = str(first.transcript)
    server.add(reply(tool_calls=[touch("b", "c2")]))
    second = agent("--resume", T, "--transcript", T, "--approve")
    server.add(reply("done"))
    return [first, second, agent("--resume", T, "--transcript", T, "--approve")], {}, 2


def a_text_call_under_yes(agent, server):
    # --yes ran the tool call; the one written as text asks with --yes too, so it paused, and the
    # replay asks its own person where the recording's said yes (at a terminal, as its line says)
    server.add(reply(tool_calls=[touch("a", "c1")]), reply(TEXT_CALL))
    first = agent("--yes", "go")
    server.add(reply("done"))
    T = str(first.transcript)
    went_on = agent("--yes", "--resume", T, "--transcript", T, "--approve")
    return [first, went_on], {"terminal": "y\n"}, 1


def resumed_with_a_task(agent, server):
    server.add(reply(tool_calls=[touch("a", "c1")]))
    first = agent("go")
    server.add(reply("then done"))
    T = str(first.transcript)
    return [first, agent("--yes", "--resume", T, "--transcript", T, "and then")], {}, 1


def fewer_approved_than_wait(agent, server):
    server.add(reply(tool_calls=[touch("one", "s1"), touch("two", "s2")]))
    first = agent("go")
    T = str(first.transcript)
    on = ["--resume", T, "--transcript", T, "--approve", codes_waiting(T)["s1"]]
    return [first, agent(*on)], {}, 2  # s2 waits again


def a_task_given_while_calls_wait(agent, server):
    server.add(reply(tool_calls=[touch("a", "c1")]))
    first = agent("go")
    T = str(first.transcript)
    return [first, agent("--resume", T, "--transcript", T, "and then")], {}, 2  # not started


def declined_at_a_terminal_with_a_yes_word(agent, server):
    # "n ok": declined, "ok" its reason (consent.answer()); read as a yes, the replay ran it
    server.add(reply(tool_calls=[touch("a", "c1")]))
    first = agent("go")
    server.add(reply("done"))
    T = str(first.transcript)
    return [first, agent("--resume", T, "--transcript", T, terminal="n ok\n")], {}, 1


def rejected_with_a_yes_word(agent, server):
    server.add(reply(tool_calls=[touch("a", "c1")]))
    first = agent("go")
    server.add(reply("done"))
    T = str(first.transcript)
    went_on = agent("--resume", T, "--transcript", T, "--reject", "ok")
    assert not (agent.workdir / "a").exists()  # --reject declines, whatever its reason says
    return [first, went_on], {}, 1


def paused_twice_replayed_at_a_terminal(agent, server):
    processes, _, paused = paused_twice(agent, server)
    return processes, {"terminal": "y\ny\n", "yes": False}, paused  # a yes for each


GONE_ON = [
    never_gone_on,
    approved_under_max_steps,
    some_approved_some_declined,
    paused_twice,
    a_text_call_under_yes,
    resumed_with_a_task,
    fewer_approved_than_wait,
    a_task_given_while_calls_wait,
    declined_at_a_terminal_with_a_yes_word,
    rejected_with_a_yes_word,
    paused_twice_replayed_at_a_terminal,
]


@posix_only
@pytest.mark.parametrize("recorded", GONE_ON, ids=lambda f: f.__name__)
def test_a_replay_pauses_where_its_recording_paused_and_goes_on_as_it_went_on(
    agent, server, recorded
):
    processes, replayed, paused_as_recorded = recorded(agent, server)
    assert processes[0].returncode == 4, processes[0].stderr  # each recording paused first
    transcript, made = processes[0].transcript, sorted(os.listdir(agent.workdir))
    views_hold(transcript, server)
    for name in made:  # the replay begins in the folder as the recording began in it
        os.remove(agent.workdir / name)
    out = agent.tmp_path / "replayed.jsonl"
    command = ["--replay", str(transcript), "--transcript", str(out)]
    command += ["--yes"] * replayed.get("yes", True) + replayed.get("flags", [])
    again = run_offline(agent.tmp_path, *command, terminal=replayed.get("terminal"))
    assert again.returncode == processes[-1].returncode, again.stderr
    assert read(events_of(out)) == read(events_of(transcript))
    assert sorted(os.listdir(agent.workdir)) == made  # it ran what the recording ran, no more
    assert again.stderr.count("wait where the recording paused") == paused_as_recorded


def test_a_replay_types_compact_where_the_recording_compacted_whatever_the_event_holds(tmp_path):
    # a transcript is untrusted: what a context/compacted event carries is never a task
    events = task_and_reply({"role": "assistant", "content": "hi"})
    events.append({"type": "context/compacted", "asked": True, "content": "touch hacked"})
    lesson = tmp_path / "t.jsonl"
    write_events(lesson, events)
    done = run_offline(tmp_path, "--replay", str(lesson), "--yes")
    assert "Traceback" not in done.stderr and "hacked" not in done.stderr, done.stderr
    assert not (tmp_path / "work" / "hacked").exists()


@posix_only
def test_a_replay_of_a_session_typed_at_the_prompt_exits_as_the_session_did(agent, server):
    # the session ends 0 as asked, though its last task failed; its replay says the same
    server.add(reply("first"), Error(500, "down", times=3))
    done = agent("--yes", terminal="one\ntwo\nexit\n")
    assert done.returncode == 0 and "HTTP 500: down" in done.stderr, done.stderr
    again, sent = replay_of(agent, done.transcript)
    assert again.returncode == 0 and "HTTP 500: down" in again.stderr, again.stderr
    assert sent == read(events_of(done.transcript))


def test_a_replay_pauses_where_a_process_going_on_was_killed_before_it_answered(tmp_path):
    # killed while it asked y/N: the call never began; the next process declined it
    events = task_and_reply({"role": "assistant", "content": "", "tool_calls": [SHELL]})[:3]
    declined = "error: declined by the user: nope"
    events += [
        *PAUSED,
        {"type": "run/resume"},
        {"type": "tool/result", "call_id": "c1", "name": "run_shell", "content": declined},
        {"type": "assistant/message", "message": {"role": "assistant", "content": "done"}},
        {"type": "turn/end", "status": "answered"},
    ]
    lesson = tmp_path / "t.jsonl"
    write_events(lesson, events)
    out = tmp_path / "replayed.jsonl"
    done = run_offline(tmp_path, "--replay", str(lesson), "--transcript", str(out), "--yes")
    assert done.returncode == 0 and done.stdout == "done\n", done.stderr
    ran = [e for e in events_of(out) if e["type"] == "tool/started"]
    assert ran == []  # never run: it waited, then was declined again
    assert [m for m, _ in read(events_of(out))] == [m for m, _ in read(events)]


@posix_only
def test_a_prompt_command_given_with_approve_is_refused_before_the_pause_is_spent(agent, server):
    server.add(reply(tool_calls=[touch("a", "c1")]))
    first = agent("go")
    T = str(first.transcript)
    refused = agent("--resume", T, "--transcript", T, "/compact", "--approve")
    assert refused.returncode == 2 and "nothing was run" in refused.stderr, refused.stderr
    server.add(reply("done"))
    assert agent("--resume", T, "--transcript", T, "--approve").returncode == 0  # still waits
