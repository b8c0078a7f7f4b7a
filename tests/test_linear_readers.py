"""Every reader is linear in time and memory in what it reads (issue 42, family 5).

The shapes that were superlinear, at about a megabyte each, bounded in seconds of CPU: a string that
never closes, of escaped quotes or of backslashes, which the depth check's string pattern tried
again from every later quote (a 32 KB line took 4.4 s, a 300 KB one hung --show); a transcript
whose resumes alternate the system prompt, whose conversation was copied at each (3.3 MB took
3.9 GB in --show). The memory bound is held where it protects the machine: agent.py --show and
--html as processes under an address-space limit. bench/readers.py measures the ratios.
"""

import json
import os
import resource
import subprocess
import sys

import pytest
from conftest import AGENT, clean_env

from agent import SYSTEM_PROMPT
from realworld import page, runs, transcripts
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
