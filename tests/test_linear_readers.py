"""Every reader is linear in time and memory in what it reads (issue 42, family 5).

The shapes that were superlinear, at about a megabyte each, bounded in seconds of CPU: a string that
never closes, of escaped quotes or of backslashes, which the depth check's string pattern tried
again from every later quote (a 32 KB line took 4.4 s, a 300 KB one hung --show); a transcript
whose resumes alternate the system prompt, whose conversation was copied at each (3.3 MB took
3.9 GB in --show); one that compacts at each step, a placeholder or a summary, whose conversation
was copied at each compaction and shown whole on the page at each. The memory bound is held where
it protects the machine: agent.py --show and --html as processes under an address-space limit.
bench/readers.py measures the ratios.
"""

import html
import json
import os
import re
import resource
import subprocess
import sys

import pytest
from conftest import AGENT, clean_env, events_of, posix_only
from scripted_server import call, reply

from agent import SYSTEM_PROMPT
from realworld import compaction, page, runs, transcripts
from realworld.guards import MAX_DEPTH, nested_deeper

MB = 2**20


def step(i: int) -> list[dict]:
    """One reply with one call, and its result."""
    call = {
        "id": f"c{i}",
        "type": "function",
        "function": {"name": "read_file", "arguments": '{"path": "a"}'},
    }
    return [
        {
            "type": "assistant/message",
            "message": {"role": "assistant", "content": "", "tool_calls": [call]},
        },
        {
            "type": "tool/result",
            "call_id": f"c{i}",
            "name": "read_file",
            "content": "ok",
            "ok": True,
        },
    ]


def prompt(i: int) -> str:
    return ("prompt A " if i % 2 else "prompt B ") * 20


def alternating(resumes: int) -> list[dict]:
    """A run whose resumes alternate two system prompts, a task and a reply after each: the shape
    of the issue's 2.6 MB transcript (about 600 bytes a resume)."""
    events = [
        {"type": "run/start", "system_prompt": "s", "model": "m", "base_url": "b", "workspace": "w"}
    ]
    for i in range(resumes):
        events.append({"type": "run/resume", "system_prompt": prompt(i)})
        events.append({"type": "user/message", "content": f"task {i}"})
        events += step(i)
    return events


def placeholders(compactions: int) -> list[dict]:
    """As many results, then as many compactions, each a placeholder for one, and a reply after
    each: the list was copied at each (about 600 bytes a compaction)."""
    events = [*alternating(0), {"type": "user/message", "content": "go"}]
    for i in range(compactions):
        events += step(i)
    for i in range(compactions):
        events.append({"type": "context/compacted", "placeholders": {f"c{i}": "[compacted: .]"}})
        events += step(compactions + i)
    return events


def summaries(compactions: int) -> list[dict]:
    """As many tasks, then a summary of the one before and a task at each compaction, and a reply
    after each: the conversation stays as long, and was copied at each (about 400 bytes each)."""
    events = alternating(0) + [
        {"type": "user/message", "content": f"task {i}"} for i in range(compactions)
    ]
    for i in range(compactions - 1):
        summary = {"text": f"summary {i}", "replaced": 3 if i else 1}
        events.append({"type": "context/compacted", "placeholders": {}, "summary": summary})
        events += step(i)
    return events


def mixed(compactions: int) -> list[dict]:
    """Turns, then at each compaction a placeholder further on and a summary of the first turn
    left, a resume with the other system prompt and a reply."""
    events = alternating(0)
    for i in range(compactions):
        events.append({"type": "user/message", "content": f"task {i}"})
        events += step(i)
    for i in range(compactions - 1):
        summary = {"text": f"summary {i}", "replaced": 5 if i else 3}
        cut = {f"c{compactions - 1 - i}": "[compacted: .]"}
        events.append({"type": "context/compacted", "placeholders": cut, "summary": summary})
        events.append({"type": "run/resume", "system_prompt": prompt(i)})
        events += step(compactions + i)
    return events


SHAPES = {"placeholders": placeholders, "summaries": summaries, "mixed": mixed}


def written(events: list[dict], path) -> int:
    path.write_text("".join(json.dumps(e) + "\n" for e in events), encoding="utf-8")
    return path.stat().st_size


def cpu_of(reader, *given) -> float:
    """The CPU seconds reader takes on given (this process's, user and system)."""
    before = resource.getrusage(resource.RUSAGE_SELF)
    reader(*given)
    after = resource.getrusage(resource.RUSAGE_SELF)
    return after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime


def refused_line(path) -> None:
    with pytest.raises(ValueError, match="not JSON"):
        transcripts.read(path)


# --- Time: each shape at a megabyte ---------------------------------------------------------------

STRINGS = {
    # the issue's: a string of escaped quotes that never closes (each \" was a new start)
    "unterminated-escaped-quotes": '{"type": "user/message", "content": "' + '\\"' * (MB // 2),
    "unterminated-backslashes": '["' + "\\\\" * (MB // 2),
    "quote-after-quote": '"a' * (MB // 2),
    "strings-between-brackets": '["a", [' * (MB // 7),
}


@pytest.mark.parametrize("shape", sorted(STRINGS))
def test_the_depth_check_reads_a_megabyte_of_strings_that_never_close_in_one_pass(shape):
    # A bound that protects the machine: under 0.1 s here, 4.4 s for 32 KB before (quadratic).
    assert cpu_of(nested_deeper, STRINGS[shape]) < 2


@pytest.mark.parametrize("shape", ["unterminated-escaped-quotes", "unterminated-backslashes"])
def test_a_transcript_line_that_never_closes_its_string_is_refused_at_once(tmp_path, shape):
    # transcripts.read() asks the depth check before json.loads: a 300 KB line hung --show before.
    path = tmp_path / "t.jsonl"
    path.write_text(STRINGS[shape] + "\n", encoding="utf-8")
    assert cpu_of(refused_line, path) < 2


def test_the_depth_check_still_counts_only_brackets_outside_strings():
    # What one pass must keep: brackets inside a string (escaped quotes too) are text; a string
    # that never closes ends the count, where json.loads stops reading.
    deep = "[" * (MAX_DEPTH + 1)
    assert nested_deeper(deep) and not nested_deeper("[" * MAX_DEPTH)
    assert not nested_deeper(json.dumps(['\\"' + deep]))
    assert nested_deeper('["a\\"b", ' + deep)
    assert not nested_deeper('"never closed ' + deep)
    assert nested_deeper(deep + '"never closed')


def test_a_megabyte_of_resumes_alternating_the_system_prompt_is_walked_shown_and_paged_in_bounds():
    # A bound that protects the machine, in CPU seconds: walk, --show's lines and the page each
    # take well under a second here; the page grew with the square of the resumes before.
    events = alternating(1_700)  # about a megabyte
    assert cpu_of(runs.walk, events) < 2
    assert cpu_of(lambda e: list(page.shown(e, SYSTEM_PROMPT)), events) < 4
    assert cpu_of(page.page, events, SYSTEM_PROMPT) < 8


def test_each_request_sent_the_system_prompt_of_its_resume_and_the_page_shows_each_once():
    # The list is no longer copied at each resume: what each request sent must still be what it
    # sent (realworld/runs.py), and the page lists each prompt once, not the whole list each time.
    events = alternating(6)
    requests = runs.requests(events)
    assert [r.messages[0]["content"] for r in requests] == [prompt(i) for i in range(6)]
    assert [len(r.messages) for r in requests] == [2 + 3 * i for i in range(6)]
    assert all(r.conversation is requests[0].conversation for r in requests)  # never copied
    assert runs.conversation(events)[0] == {"role": "system", "content": prompt(5)}
    shown = page.page(events, SYSTEM_PROMPT)
    listed = shown.split("<h2 id=messages>")[1]
    assert listed.count(prompt(1)) == 3 and listed.count(prompt(0)) == 3
    assert "data-from=6 data-to=7" in listed  # the last prompt, sent by request 6 and left after


@pytest.mark.parametrize("shape", sorted(SHAPES))
def test_a_megabyte_of_compactions_is_walked_shown_and_paged_in_bounds(shape):
    # A bound that protects the machine, in CPU seconds: each well under a second here; a
    # placeholder at each of 500 steps took 0.06 s to walk and 1,000 took 4.7 times that.
    events = SHAPES[shape](2_400)
    assert 0.8 * MB < len("".join(json.dumps(e) + "\n" for e in events)) < 4 * MB
    assert cpu_of(runs.walk, events) < 2
    assert cpu_of(lambda e: list(page.shown(e, SYSTEM_PROMPT)), events) < 4
    assert cpu_of(page.page, events, SYSTEM_PROMPT) < 8


@pytest.mark.parametrize("shape", sorted(SHAPES))
def test_each_message_is_listed_once_whatever_the_compactions(shape):
    # The page lists each message the conversation held once, with the requests that sent it:
    # a compaction ends some and begins others, it starts no list of its own.
    events = SHAPES[shape](30)
    requests = runs.requests(events)
    held = requests[0].conversation.entries
    listed = page.page(events, SYSTEM_PROMPT).split("<h2 id=messages>")[1]
    assert listed.count("<div class=version ") == 1
    assert 0 < listed.count("<div class=msg ") <= len(held)
    for request in requests:  # what each sent, as it was before the conversation was kept once
        assert len(request.messages) == request.count


# --- Memory: agent.py as a process under a limit --------------------------------------------------

LIMIT = 768 * MB  # of address space: agent.py --show needs about 100 MB of it on this machine


def limited() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (LIMIT, LIMIT))


@pytest.mark.parametrize("view", ["--show", "--html"])
def test_a_few_megabytes_of_alternating_system_prompts_are_shown_within_a_memory_limit(
    tmp_path, view
):
    # The issue's: 2.6 MB of these drove --show to MemoryError at a 2 GiB limit, and a traceback
    # (3.3 MB reached 3.9 GB). A new interpreter under the limit, not the fork server: the limit
    # is the process's own.
    transcript = tmp_path / "alternating.jsonl"
    assert written(alternating(6_000), transcript) > 3 * MB
    out = [str(tmp_path / "page.html")] if view == "--html" else []
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    done = subprocess.run(
        [sys.executable, str(AGENT), view, str(transcript), *out],
        cwd=tmp_path,
        env=clean_env(),
        preexec_fn=limited,
        capture_output=True,
        text=True,
        timeout=300,
    )
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "Traceback" not in done.stderr
    if view == "--show":
        assert done.stdout.count("prompt A prompt A") == 0  # the run's own resumes: not printed
        assert done.stdout.count("[step 1: the request sent") == 6_000
    else:
        assert os.path.getsize(out[0]) < 40 * MB
    # and in CPU seconds: a bound that protects the machine, several times what it takes here
    assert after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime < 60


@pytest.mark.parametrize("view", ["--show", "--html"])
@pytest.mark.parametrize("shape", ["placeholders", "summaries"])
def test_ten_thousand_compactions_are_shown_within_a_memory_limit(tmp_path, view, shape):
    # The family: a hostile transcript of a few megabytes whose every compaction copied
    # the conversation (and the page showed each copy whole) reached gigabytes.
    transcript = tmp_path / f"{shape}.jsonl"
    assert written(SHAPES[shape](10_000), transcript) > 3 * MB
    out = [str(tmp_path / "page.html")] if view == "--html" else []
    done = subprocess.run(
        [sys.executable, str(AGENT), view, str(transcript), *out],
        cwd=tmp_path,
        env=clean_env(),
        preexec_fn=limited,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert "Traceback" not in done.stderr
    if view == "--show":
        assert done.stdout.count("[compacted: about ") >= 9_999
    else:
        assert os.path.getsize(out[0]) < 80 * MB


# --- What each request sent, on the page and in --show, as the server got it --------------------

# each pre begins with the newline a browser drops after its tag
LISTED = re.compile(
    r"<div class=msg data-i=\d+ data-first=\d+ data-from=(\d+) data-to=(\d+)><span class=role>"
    r"(\w+)</span> <span class=meta>[^<]*</span>(?:<pre>\n(.*?)</pre>)?",
    re.S,
)


def on_the_page(shown: str, number: int) -> list[tuple[str, str]]:
    """(role, text) of each message the page's slider shows at request number, read as its script
    reads the page: the list of the step's data-v, each message whose data-from and data-to hold
    number."""
    [v] = re.findall(rf"class=step id=step-{number} data-v=(\d+)", shown)
    lists = shown.split("<h2 id=messages>")[1].split("<div class=version data-v=")[1:]
    [listed] = [body for body in lists if body.startswith(f"{v}>")]
    return [
        (role, html.unescape(text))
        for first, last, role, text in LISTED.findall(listed)
        if int(first) <= number <= int(last)
    ]


@posix_only
def test_the_page_and_show_say_what_each_request_sent_across_three_compactions(agent, server):
    # /compact three times: placeholders for the long results, then a summary in the place of
    # the turns before, the second and third summarizing the one before. At each of the run's own
    # requests the page shows what the server got, in its order, none more; --show says how many.
    agent.workdir.mkdir()
    for name in ("a.txt", "b.txt"):
        (agent.workdir / name).write_text(f"{name} " + "x" * 1_500)
    server.add(
        reply(tool_calls=[call("read_file", {"path": "a.txt"}, "c1")]),
        reply("read a"),
        reply("The user had a.txt read."),  # the first summary
        reply(tool_calls=[call("read_file", {"path": "b.txt"}, "c2")]),
        reply("read b"),
        reply("The user had a.txt and b.txt read."),
        reply("both"),
        reply("The user had both read, and asked which."),
        reply("still both"),
    )
    typed = "read a\n/compact\nread b\n/compact\nwhich?\n/compact\nand now?\nexit\n"
    done = agent("--yes", terminal=typed)
    assert done.returncode == 0, done.stderr
    events = events_of(done.transcript)
    compacted = [e for e in events if e["type"] == "context/compacted"]
    assert [bool(e["summary"]) for e in compacted] == [True, True, True]
    assert [list(e["placeholders"]) for e in compacted] == [["c1"], ["c2"], []]
    got = [
        r["body"]["messages"]
        for r in server.requests
        if r["body"]["messages"][0]["content"] != compaction.SUMMARY_PROMPT
    ]
    own = [r for r in runs.requests(events) if r.under is None]
    assert [json.loads(json.dumps(r.messages)) for r in own] == got
    shown = page.page(events, SYSTEM_PROMPT)
    for number, messages in enumerate(got, 1):
        assert on_the_page(shown, number) == [(m["role"], m["content"] or "") for m in messages]
    printed = subprocess.run(
        [sys.executable, str(AGENT), "--show", str(done.transcript)],
        env=clean_env(),
        capture_output=True,
        text=True,
        timeout=60,
    ).stdout
    counts = re.findall(r"\[step \d+: the request sent (\d+) messages?\]", printed)
    assert len(counts) == len(server.requests)  # a summary's request too
    steps = [int(n) for n, r in zip(counts, runs.requests(events), strict=True) if r.under is None]
    assert steps == [len(m) for m in got]
