"""A run's page (python agent.py --html TRANSCRIPT PAGE; realworld/page.py), opened in a real
browser: Debian's Chromium, headless (.ci/run installs it). Without it the browser tests skip,
saying why; CHROMIUM_REQUIRED=1 (set by .ci/run) makes that skip a failure."""

import html
import json
import os
import re
import select
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import AGENT, ROOT, clean_env, events_of
from scripted_server import call, reply

from agent import SYSTEM_PROMPT
from realworld import page, replies, runs, transcripts
from realworld.guards import visible

LESSONS = sorted((ROOT / "examples").glob("lesson-*.jsonl"))
PAGES = ROOT / "docs" / "lessons"
CHROMIUM = next(
    (shutil.which(n) for n in ("chromium", "chromium-browser", "google-chrome") if shutil.which(n)),
    None,
)


def browser():
    """The browser's path; a skip (or, under CHROMIUM_REQUIRED, a failure) without one."""
    if CHROMIUM is None:
        if os.environ.get("CHROMIUM_REQUIRED"):
            pytest.fail(
                "CHROMIUM_REQUIRED is set and no Chromium is installed (apt-get install chromium)"
            )
        pytest.skip("no Chromium here: apt-get install chromium")
    return CHROMIUM


# What --dump-dom prints of a page (HeadlessCommandHandler in Chromium's headless mode).
DUMP_DOM = (
    "(document.doctype ? new XMLSerializer().serializeToString(document.doctype) + '\\n' : '')"
    " + document.documentElement.outerHTML"
)


class Chromium:
    """Headless Chromium, started at the first page this worker opens and driven over its DevTools
    pipe (--remote-debugging-pipe). Each page opens in a new tab and is read once it has loaded,
    its scripts run, as `chromium --headless --dump-dom` reads it; a browser started for each
    page took about 1.1 s of CPU, a tab takes about 0.3 s."""

    def __init__(self, profile: Path):
        self.profile, self.process, self.sent = profile, None, 0

    def dom(self, path: Path, at: str = "") -> str:
        """The page's DOM after its scripts ran; at: a #fragment."""
        if self.process is None:
            self.start()
        tab = self.call("Target.createTarget", url="about:blank")["targetId"]
        session = self.call("Target.attachToTarget", targetId=tab, flatten=True)["sessionId"]
        try:
            self.call("Page.enable", session)
            went = self.call("Page.navigate", session, url=path.as_uri() + at)
            assert "errorText" not in went, went
            self.wait_for("Page.loadEventFired", session)
            done = self.call("Runtime.evaluate", session, expression=DUMP_DOM, returnByValue=True)
            return done["result"]["value"]
        finally:
            self.call("Target.closeTarget", targetId=tab)
            self.events.clear()

    def start(self) -> None:
        path = browser()
        to_browser, self.commands = os.pipe()
        self.replies, from_browser = os.pipe()
        self.received, self.events = b"", []
        # the browser reads the pipe's commands on its fd 3 and answers on its fd 4 (bash: dash
        # redirects no fd above 9)
        pipe = f'exec "$0" "$@" 3<&{to_browser} 4>&{from_browser}'
        command = ["bash", "-c", pipe, path, "--headless", "--remote-debugging-pipe"]
        command += ["--no-sandbox", "--disable-gpu", f"--user-data-dir={self.profile}"]  # as root
        with open(self.profile / "stderr.txt", "wb") as stderr:
            self.process = subprocess.Popen(
                command,
                pass_fds=(to_browser, from_browser),
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=stderr,
            )
        os.close(to_browser)
        os.close(from_browser)

    def call(self, method: str, session: str | None = None, **params) -> dict:
        """The result of one DevTools command; the events that come before it are kept."""
        self.sent += 1
        command = {"id": self.sent, "method": method, "params": params}
        if session:
            command["sessionId"] = session
        os.write(self.commands, json.dumps(command).encode() + b"\0")
        while (message := self.read()).get("id") != self.sent:
            self.events.append(message)
        assert "error" not in message, (command, message)
        return message["result"]

    def wait_for(self, event: str, session: str) -> dict:
        while True:
            for message in self.events:
                if message.get("method") == event and message.get("sessionId") == session:
                    return message
            self.events.append(self.read())

    def read(self) -> dict:
        """The browser's next message; fails after 60 s of silence, or if it ended."""
        while b"\0" not in self.received:
            ready, _, _ = select.select([self.replies], [], [], 60)
            chunk = os.read(self.replies, 1 << 16) if ready else b""
            assert chunk, "Chromium said nothing for 60 s, or ended: " + self.said()
            self.received += chunk
        message, _, self.received = self.received.partition(b"\0")
        return json.loads(message)

    def said(self) -> str:
        """The end of what the browser wrote on stderr."""
        return (self.profile / "stderr.txt").read_text(errors="replace")[-2000:]

    def close(self) -> None:
        if self.process is not None:
            self.call("Browser.close")
            self.process.wait(timeout=60)
            os.close(self.commands)
            os.close(self.replies)


@pytest.fixture(scope="session")
def chromium(tmp_path_factory):
    """This worker's browser, started at its first page."""
    started = Chromium(tmp_path_factory.mktemp("chromium"))
    yield started
    started.close()


def written(tmp_path, transcript) -> Path:
    """The page agent.py --html writes for a transcript."""
    out = tmp_path / "page.html"
    done = subprocess.run(
        [sys.executable, str(AGENT), "--html", str(transcript), str(out)],
        env=clean_env(),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0 and done.stdout == "", done.stderr
    return out


@pytest.mark.parametrize("lesson", LESSONS, ids=lambda p: p.stem)
def test_each_lessons_page_shows_every_step_message_call_and_result(tmp_path, lesson, chromium):
    events = transcripts.read(lesson)
    shown = chromium.dom(written(tmp_path, lesson))
    assert 'data-script="ran"' in shown  # its own script ran
    steps = [e for e in events if e["type"] == "assistant/message"]
    inner = [e for e in steps if "under" in e]  # a helper's or a summary's, nested in place
    assert len(re.findall(r'class="step" id="step-\d+"', shown)) == len(steps) - len(inner)
    assert len(re.findall(r'class="substep"', shown)) == len(inner)
    # the last list is the conversation as the run left it, each message once (a system prompt
    # a handoff replaced is in its first place too, hidden after the run)
    last = shown.split('class="version"')[-1]
    seen = re.findall(r'class="msg(?! hidden)[^"]*" data-i="\d+"', last)
    assert len(seen) == len(runs.conversation(events))
    for result in (e for e in events if e["type"] == "tool/result"):
        assert html.escape(visible(result["content"]), quote=False) in shown  # as the DOM says it
    for step in steps:
        for made in step["message"].get("tool_calls") or []:
            assert f"→ {made['function']['name']}" in shown
    assert "<svg" in shown and "running total" in shown
    if inner:
        assert shown.count("its own requests") == len({e["under"] for e in inner})
    for handoff in (e for e in events if e["type"] == "agent/handoff"):
        assert f"<b>handed off</b> to {handoff['to']}" in shown


def test_a_pause_is_on_the_page_with_what_waits(tmp_path, loop, server, chromium):
    server.add(reply(tool_calls=[call("run_shell", {"command": "rm -rf build"}, "c1")]))
    ran = loop("go", pause=True)
    shown = chromium.dom(written(tmp_path, ran.transcript))
    code = ran.events()[-1]["pending"][0]["code"]
    assert "<b>paused</b>: 1 call waits for a yes" in shown and f"code {code}: run_shell" in shown
    assert "rm -rf build" in shown


HOSTILE = [
    "<script>document.documentElement.dataset.pwned = 'script'</script>",
    "</pre></script><script>document.documentElement.dataset.pwned = 'closed'</script>",
    "<img src=x onerror=\"document.documentElement.dataset.pwned = 'img'\">",
    "<a href=\"javascript:document.documentElement.dataset.pwned='link'\">click</a>",
    "</style><style>body{display:none}</style>",
    "<svg onload=\"document.documentElement.dataset.pwned = 'svg'\"></svg>",
    "<meta http-equiv=refresh content='0;url=https://example.invalid/'>",
    "evil \u202egnp.exe\u200b\u2066 and \x1b[2J",
]


def hostile_transcript(tmp_path):
    """A transcript whose every field a model, a tool or a server could fill is an attack."""
    text = "\n".join(HOSTILE)
    lines = [
        {
            "type": "run/start",
            "model": text,
            "base_url": text,
            "workspace": text,
            "system_prompt": text,
            "note": text,
        },
        {"type": "user/message", "content": text},
        {
            "type": "assistant/message",
            "message": {
                "role": "assistant",
                "content": text,
                "reasoning_content": text,
                "tool_calls": [
                    {
                        "id": text,
                        "type": "function",
                        "function": {"name": text, "arguments": json.dumps({"command": text})},
                    }
                ],
            },
            "finish_reason": text,
            "usage": {"prompt_tokens": 10, "completion_tokens": 2},
            "repairs": [text],
        },
        {"type": "tool/result", "call_id": text, "name": text, "content": text, "ok": False},
        {"type": "turn/end", "status": text, "error": text},
    ]
    path = tmp_path / "hostile.jsonl"
    path.write_text("".join(json.dumps(e) + "\n" for e in lines), encoding="utf-8")
    return path


def test_a_hostile_transcripts_page_runs_nothing_and_loads_nothing(tmp_path, chromium):
    out = written(tmp_path, hostile_transcript(tmp_path))
    source = out.read_text(encoding="utf-8")
    # the only script and style are the page's own, and the policy allows only them, by hash
    assert source.count("<script>") == 1 and source.count("<style>") == 1
    policy = re.search(r'http-equiv="Content-Security-Policy" content="([^"]+)"', source).group(1)
    assert policy.startswith("default-src 'none';")
    assert f"script-src {page.digest(page.SCRIPT)};" in policy
    assert f"style-src {page.digest(page.STYLE)};" in policy
    assert "unsafe" not in policy
    for attack in (
        "<img",
        '<a href="javascript',
        "<svg onload",
        "<meta http-equiv=refresh",
        "\u202e",
    ):
        assert attack not in source.replace(page.CSP, "")
    assert "\\u202e" in source and "\\x1b" in source  # shown as escapes
    shown = chromium.dom(out)
    assert 'data-script="ran"' in shown and "data-pwned" not in shown
    assert "&lt;script&gt;document.documentElement.dataset.pwned" in shown


def test_the_lessons_pages_are_made_from_the_lessons(tmp_path):
    # docs/lessons/ holds each lesson's page as --html writes it; the README links them.
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    for lesson in LESSONS:
        committed = PAGES / f"{lesson.stem}.html"
        made = page.page(transcripts.read(lesson), SYSTEM_PROMPT)
        again = f"rm {committed}; python agent.py --html examples/{lesson.name} {committed}"
        assert committed.read_text(encoding="utf-8") == made, f"make it again: {again}"
        assert f"(docs/lessons/{lesson.stem}.html)" in readme
    assert "![" in readme and "(docs/lesson-01.png)" in readme
    assert (ROOT / "docs" / "lesson-01.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_a_screenshot_of_lesson_01_is_drawn(tmp_path):
    shot = tmp_path / "shot.png"
    done = subprocess.run(
        [
            browser(),
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--hide-scrollbars",
            f"--user-data-dir={tmp_path / 'profile'}",
            "--window-size=1100,1400",
            f"--screenshot={shot}",
            (PAGES / "lesson-01.html").as_uri(),
        ],
        capture_output=True,
        timeout=120,
    )
    assert done.returncode == 0 and shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert shot.stat().st_size > 20_000  # a page drawn, not a blank one


def test_a_page_of_a_run_shows_what_the_person_did(tmp_path, agent, server):
    from scripted_server import call, reply

    server.add(reply(tool_calls=[call("run_shell", {"command": "rm -rf /"}, id="s1")]), reply("ok"))
    result = agent("go", terminal="n not that\n")
    html = page.page(events_of(result.transcript), SYSTEM_PROMPT)
    assert "declined" in html and "not that" in html and "turn ended" in html


def step_event(usage, latency) -> dict:
    return {
        "type": "assistant/message",
        "message": {"role": "assistant", "content": "x"},
        "usage": usage,
        "latency_ms": latency,
    }


def test_numbers_a_chart_cannot_draw_are_drawn_as_nothing():
    # Python's json reads NaN, Infinity and integers of thousands of digits
    huge = int("9" * 4000)
    events = [
        {"type": "run/start", "system_prompt": "s"},
        step_event({"prompt_tokens": huge, "completion_tokens": huge}, float("nan")),
        step_event({"prompt_tokens": 1, "prompt_cache_hit_tokens": 500}, float("inf")),
        step_event({"prompt_tokens": -100, "completion_tokens": -5}, -5),
        step_event({"prompt_tokens": 10, "completion_tokens": 2}, 0),
    ]
    html_page = page.page(events, SYSTEM_PROMPT)
    drawn = " ".join(re.findall(r"<rect[^>]*>", html_page))
    assert "nan" not in drawn and "inf" not in drawn and "=-" not in drawn


def test_a_key_cut_by_a_preview_or_a_title_is_still_hidden(monkeypatch):
    import config

    key = "sk-A1b2C3d4E5f6G7h8J9k0L1m2N3o4P5q6R7"
    monkeypatch.setattr(config, "HIDDEN_KEY", key)
    events = [
        {"type": "run/start", "system_prompt": "s"},
        {"type": "user/message", "content": "x" * 60 + key + " rest"},
        {
            "type": "assistant/message",
            "message": {
                "role": "assistant",
                "content": "y" * 1990 + key + "z" * 100,
                "tool_calls": [],
            },
        },
    ]
    shown = page.page(events, SYSTEM_PROMPT)
    assert key[:10] not in shown and "***" in shown


def test_a_long_run_is_written_in_linear_time():
    # 16,000 steps took 38 s when each step looked through every message
    import time

    events = [
        {"type": "run/start", "system_prompt": "s"},
        {"type": "user/message", "content": "go"},
    ]
    for i in range(6_000):
        call = {
            "id": f"c{i}",
            "type": "function",
            "function": {"name": "read_file", "arguments": '{"path": "a"}'},
        }
        events.append(
            {
                "type": "assistant/message",
                "message": {"role": "assistant", "content": "", "tool_calls": [call]},
            }
        )
        events.append(
            {
                "type": "tool/result",
                "call_id": f"c{i}",
                "name": "read_file",
                "content": "ok",
                "ok": True,
            }
        )
    started = time.process_time()
    page.page(events, SYSTEM_PROMPT)
    assert time.process_time() - started < 10  # a bound that protects the machine: about 1 s


@pytest.mark.parametrize(
    "lesson",
    [ROOT / "examples" / f"lesson-{n}.jsonl" for n in ("10", "08", "09")],
    ids=lambda p: p.stem,
)
def test_the_slider_shows_exactly_what_each_request_sent(tmp_path, lesson, chromium):
    # Lesson 10 compacts twice, lesson 08 nests a helper, lesson 09 hands off: at each of the
    # run's own requests the list shown is the one it sent (realworld/runs.py), in its order,
    # none more (issue 33).
    events = transcripts.read(lesson)
    own = [r for r in runs.requests(events) if r.under is None]
    out = written(tmp_path, lesson)
    for number, request in enumerate(own, 1):
        shown = chromium.dom(out, f"#request-{number}")
        assert f"request {number} (step {request.step}): {request.count} messages" in shown
        lists = shown.split('<div class="version')[1:]
        [visible_list] = [body for body in lists if not body.startswith(" hidden")]
        listed = (
            r'<div class="msg( new)?( hidden)?" data-i="\d+" data-first="\d+"'
            r'(?: data-from="\d+" data-to="\d+")?>'
        )
        roles = re.findall(listed + r'<span class="role">(\w+)</span>', visible_list)
        assert [role for _, hidden, role in roles if not hidden] == [
            m["role"] for m in request.messages
        ]


def test_a_lessons_page_says_it_was_written_by_hand_and_shows_its_point(tmp_path):
    # Lesson 05 is about reasoning_content sent back: it is shown in the list, not folded away;
    # the charts have a scale; a lesson's figures are marked as written, not measured (issue 35).
    shown = page.page(
        transcripts.read(PAGES.parent.parent / "examples" / "lesson-05.jsonl"), SYSTEM_PROMPT
    )
    assert "Written by hand: its server, its tokens and its times are examples" in shown
    assert shown.count("its reasoning, a field of the message (reasoning_content)") >= 2
    assert re.search(r"<text class=scale x=2 y=14>[\d,]+ tokens</text>", shown)


def test_lesson_11s_page_says_what_each_step_cost_and_what_the_cache_saved():
    # Each step with its money and the share the prefix cache saved, as the lesson records them
    # (issue 36); the total in the header.
    events = transcripts.read(PAGES.parent.parent / "examples" / "lesson-11.jsonl")
    shown = page.page(events, SYSTEM_PROMPT)
    steps = [e for e in events if e["type"] == "assistant/message"]
    for step in steps:
        said = replies.describe_tokens(replies.count_tokens(step["usage"]), step["cost"])
        assert f"; {said}; " in shown
    assert "(the cache saved 0.000113 USD, 48%)" in shown
    assert "(the cache saved 0.000188 USD, 86%)" in shown
    total = "2424 prompt tokens (2048 cached), 123 completion tokens, 0.000273 USD"
    assert f"; {total} (the cache saved 0.000602 USD, 69%)</p>" in shown


def test_a_text_that_begins_with_a_newline_shows_it(tmp_path, loop, server, chromium):
    # A browser drops the newline right after <pre>'s tag (WHATWG HTML 13.2.6.4.7): the page
    # writes one, and the text's own shows, in the DOM the browser built.
    (loop.workdir / "a.txt").write_text("\nthe second line")
    server.add(reply(tool_calls=[call("read_file", {"path": "a.txt"}, "c1")]), reply("\nanswer"))
    ran = loop("go", yes=True)
    shown = chromium.dom(written(tmp_path, ran.transcript))
    assert '<pre class="text">\nanswer</pre>' in shown
    assert "<pre>\nthe second line" in shown


def test_the_charts_scales_say_what_each_line_stands_for():
    # Each line on its own scale: the bars' top at the left, the running total's at the right;
    # the requests numbered along the bottom; lesson 10's window and its 3/4 mark, where it
    # compacts, and no window on a page of a run that never compacted (issue #46).
    for lesson, window in (("lesson-10", 1000), ("lesson-01", None)):
        events = transcripts.read(PAGES.parent.parent / "examples" / f"{lesson}.jsonl")
        shown = page.page(events, SYSTEM_PROMPT)
        requests = runs.requests(events)
        used = [r.reply["usage"] for r in requests]
        grand = sum(u["prompt_tokens"] + u["completion_tokens"] for u in used)
        assert f">running total {grand:,}</text>" in shown
        numbers = re.findall(r"<text class='scale number' x=[\d.]+ y=\d+>(\d+)</text>", shown)
        assert numbers == [str(n) for n in range(1, len(requests) + 1)]
        marks = re.findall(r"<line class=window x1=0 y1=([\d.]+)", shown)
        if window:
            assert len(marks) == 2 and f">window, {window:,}</text>" in shown
            assert f">3/4: compaction, {window * 3 // 4:,}</text>" in shown
            top, three_quarters = (float(y) for y in marks)
            assert three_quarters - top == pytest.approx((140 - 20) / 4, abs=0.2)
        else:
            assert marks == [] and "the context window" not in shown


def test_each_tools_time_is_on_its_line_and_on_the_page(tmp_path, loop, server):
    # The tool's own time, from the moment it began (its tool/started, after any question) to its
    # result: on the terminal's result line, and on the page as the two events' times say it.
    (loop.workdir / "a.txt").write_text("A")
    server.add(reply(tool_calls=[call("read_file", {"path": "a.txt"}, "c1")]), reply("read"))
    ran = loop("go", yes=True)
    assert re.search(r"^  ← A · \d+ ms$", ran.stderr, re.M), ran.stderr
    events = ran.events()
    [began] = [e["time"] for e in events if e["type"] == "tool/started"]
    [ended] = [e["time"] for e in events if e["type"] == "tool/result"]
    took = page.between(began, ended)
    assert took is not None and took >= 0
    assert f"← ok · the tool took {took:,} ms</p>" in page.page(events, SYSTEM_PROMPT)
    # and --show: each step's time at the server, each tool's time on its result line
    shown = list(page.shown(events, SYSTEM_PROMPT))
    latency = next(e["latency_ms"] for e in events if e["type"] == "assistant/message")
    assert f"  time: {latency:,} ms at the server" in shown and f"  ← A · {took:,} ms" in shown
