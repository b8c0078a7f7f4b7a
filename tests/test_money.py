"""Money, where prices are known, and a budget (issue 36): each step's line, the total, --show,
the page and the transcript say what a reply cost and what the prefix cache saved; --budget stops
a run before the first request past it."""

import re
import subprocess
import sys

import pytest
from conftest import AGENT, KEY, ROOT, clean_env, events_of, posix_only, run_offline
from scripted_server import Stream, call, reply

from agent import SYSTEM_PROMPT
from realworld import page, replies

# 1,000,000 prompt tokens, 800,000 of them cached, and 100,000 completion tokens, at 1.0 a million
# not cached, 0.1 cached and 2.0 out: 200,000 x 1.0 + 800,000 x 0.1 + 100,000 x 2.0, a million
# each: 0.2 + 0.08 + 0.2 = 0.48; the cache saved 800,000 x (1.0 - 0.1) / 1M = 0.72, 60% of 1.20.
PRICES = {
    "AGENT_PRICE_INPUT": "1.0",
    "AGENT_PRICE_CACHED": "0.1",
    "AGENT_PRICE_OUTPUT": "2.0",
    "AGENT_CURRENCY": "EUR",
}
DEEPSEEK_USAGE = {  # DeepSeek's names for the cached part
    "prompt_tokens": 1_000_000,
    "completion_tokens": 100_000,
    "total_tokens": 1_100_000,
    "prompt_cache_hit_tokens": 800_000,
    "prompt_cache_miss_tokens": 200_000,
}
OPENAI_USAGE = {  # OpenAI's
    "prompt_tokens": 1_000_000,
    "completion_tokens": 100_000,
    "total_tokens": 1_100_000,
    "prompt_tokens_details": {"cached_tokens": 800_000},
}
ONE_STEP = "1000000 prompt tokens (800000 cached), 100000 completion tokens, 0.48 EUR"
SAVED = "(the cache saved 0.72 EUR, 60%)"


def priced(**extra: str) -> dict:
    return clean_env(AGENT_API_KEY=KEY, **{**PRICES, **extra})


def replies_of(path) -> list[dict]:
    return [e for e in events_of(path) if e["type"] == "assistant/message"]


def test_each_step_the_total_the_transcript_show_and_page_say_what_the_prices_make(agent, server):
    server.add(
        reply(tool_calls=[call("read_file", {"path": "a.txt"}, "r1")], usage=DEEPSEEK_USAGE),
        reply("It says A.", usage=OPENAI_USAGE),
    )
    agent.workdir.mkdir()
    (agent.workdir / "a.txt").write_text("A")
    done = agent("--yes", "what does a.txt say?", env=priced())
    assert done.returncode == 0, done.stderr
    assert f"step 1: {ONE_STEP} {SAVED}, " in done.stderr
    assert f"step 2: {ONE_STEP} {SAVED}, " in done.stderr
    total = "2000000 prompt tokens (1600000 cached), 200000 completion tokens, 0.96 EUR"
    assert f"total: {total} (the cache saved 1.44 EUR, 60%)\n" in done.stderr
    recorded = [e["cost"] for e in replies_of(done.transcript)]
    assert [(c["amount"], c["saved"], c["currency"]) for c in recorded] == [(0.48, 0.72, "EUR")] * 2
    assert recorded[0]["prices"] == {"input": 1.0, "cached": 0.1, "output": 2.0}
    shown = subprocess.run(
        [sys.executable, str(AGENT), "--show", str(done.transcript)],
        env=clean_env(),
        capture_output=True,
        text=True,
        timeout=60,
    ).stdout
    assert shown.count(f"  cost: 0.48 EUR {SAVED}\n") == 2
    assert f"[total: {total} (the cache saved 1.44 EUR, 60%)]" in shown
    html = page.page(events_of(done.transcript), SYSTEM_PROMPT)
    assert html.count(f"{ONE_STEP} {SAVED}") == 2 and f"; {total} (the cache saved" in html


def test_prices_given_as_flags_win_over_the_environment(agent, server):
    server.add(reply("hi", usage=DEEPSEEK_USAGE))
    done = agent(
        "--price-input", "2", "--price-cached", "0", "--price-output", "0", "go", env=priced()
    )
    # 200,000 not cached at 2.0 a million; the cache saved 800,000 x 2.0 / 1M
    assert "100000 completion tokens, 0.40 EUR (the cache saved 1.60 EUR, 80%)" in done.stderr


def test_a_server_that_reports_only_its_cache_misses_had_the_rest_cached():
    only_misses = {"prompt_tokens": 1_000_000, "prompt_cache_miss_tokens": 200_000}
    both = {"prompt_cache_hit_tokens": 800_000, "prompt_cache_miss_tokens": 200_000}
    assert replies.count_tokens(only_misses) == {
        "prompt": 1_000_000,
        "cached": 800_000,
        "completion": 0,
    }
    assert replies.count_tokens(both) == {"prompt": 1_000_000, "cached": 800_000, "completion": 0}
    assert replies.count_tokens(DEEPSEEK_USAGE) == replies.count_tokens(OPENAI_USAGE)


def test_the_default_models_price_is_deepseeks_own(loop, server):
    usage = {
        "prompt_tokens": 1_000_000,
        "prompt_cache_miss_tokens": 200_000,
        "completion_tokens": 100_000,
    }
    server.add(reply("hi", usage=usage))
    ran = loop("go", model="deepseek-flash")
    # DeepSeek's peak prices: 0.3 a million not cached, 0.006 cached, 1.2 out (config.py)
    [event] = [e for e in ran.events() if e["type"] == "assistant/message"]
    assert event["cost"]["amount"] == pytest.approx(0.2 * 0.3 + 0.8 * 0.006 + 0.1 * 1.2)
    assert event["cost"]["currency"] == "USD"
    assert "step 1: 1000000 prompt tokens (800000 cached), 100000 completion tokens, 0.185 USD" in (
        ran.stderr
    )


def test_a_streamed_reply_is_priced_from_the_usage_at_its_end(loop, server):
    server.add(Stream(reply("hi", usage=DEEPSEEK_USAGE)))
    ran = loop("go", model="deepseek-v4-pro", stream=True)
    [event] = [e for e in ran.events() if e["type"] == "assistant/message"]
    # 200,000 x 1.32 + 800,000 x 0.044 + 100,000 x 3.96, a million each
    assert event["cost"]["amount"] == pytest.approx(0.264 + 0.0352 + 0.396)


def test_a_model_with_no_known_price_shows_tokens_alone(loop, server):
    server.add(reply("hi"))
    ran = loop("go")  # test-model: no price built in, none given
    assert re.search(
        r"step 1: 10 prompt tokens \(0 cached\), 5 completion tokens, \d+ ms", ran.stderr
    )
    assert "cost" not in next(e for e in ran.events() if e["type"] == "assistant/message")
    assert "USD" not in ran.stderr


# --- --budget ------------------------------------------------------------------------------------


@posix_only
def test_the_budget_stops_the_run_before_a_request_that_could_pass_it(agent, server):
    server.add(
        reply(
            tool_calls=[call("write_file", {"path": "a.txt", "content": "A"}, "w1")],
            usage=DEEPSEEK_USAGE,
        ),
        reply("never sent", usage=DEEPSEEK_USAGE),
    )
    done = agent("--yes", "--budget", "0.5", "write a file", env=priced())
    assert done.returncode == 3, done.stderr
    # 0.48 after the first request; the next one's prompt is the server's 1,000,000 tokens and
    # what was added since, at 1.0 a million not cached: more than the 0.02 left, so not sent
    assert len(server.requests) == 1
    said = (
        "spent 0.48 EUR of the budget of 0.50 EUR; the next request was not sent: its prompt "
        "could cost up to 1.00 EUR, and leave nothing for a reply"
    )
    assert f"stopped: {said}\n" in done.stderr
    assert (agent.workdir / "a.txt").read_text() == "A"  # the reply's calls were answered
    events = events_of(done.transcript)
    assert events[-1] == {**events[-1], "type": "turn/end", "status": "budget", "error": said}
    assert f"[turn ended: budget: {said}]" in page.shown(events, SYSTEM_PROMPT)
    # the reply was capped at what the money left bought: (0.5 - its prompt) / 2.0 a million
    cap = server.requests[0]["body"]["max_tokens"]
    assert 240_000 < cap < 250_000


def test_the_budget_comes_from_the_environment_too(agent, server):
    server.add(reply("hi", usage=DEEPSEEK_USAGE), reply("never sent"))
    done = agent("--yes", "go", env=priced(AGENT_BUDGET="0.4"))
    assert done.returncode == 0 and len(server.requests) == 1  # one request: its answer ends it


def test_a_budget_with_no_known_price_is_refused_in_one_line_at_the_start(agent, server):
    done = agent("--budget", "1", "go")  # test-model, no prices given
    assert done.returncode == 2 and done.stderr.count("\n") == 1
    assert "a budget needs a price, and none is known for the model 'test-model'" in done.stderr
    assert server.requests == []


@pytest.mark.parametrize(
    "settings, said",
    [
        ({"AGENT_PRICE_INPUT": "cheap"}, "AGENT_PRICE_INPUT='cheap' must be a price per million"),
        ({"AGENT_PRICE_OUTPUT": "-1"}, "AGENT_PRICE_OUTPUT='-1' must be a price per million"),
        ({"AGENT_BUDGET": "lots"}, "AGENT_BUDGET='lots' must be an amount of money"),
        ({"AGENT_PRICE_OUTPUT": ""}, "AGENT_PRICE_INPUT and AGENT_PRICE_OUTPUT"),
    ],
)
def test_a_malformed_price_is_one_line_at_the_start(agent, server, settings, said):
    done = agent("go", env=priced(**settings))
    assert done.returncode == 2 and done.stderr.count("\n") == 1 and said in done.stderr
    assert server.requests == []


def test_run_from_python_takes_a_budget(loop, server):
    server.add(reply("hi"), reply("never sent"))
    # deepseek-flash: the first prompt, at most a token a byte (about 1,500) at 0.3 a million,
    # leaves about 0.00055 of 0.001 for the reply: some 450 tokens at 1.2 a million
    ran = loop("say hi", model="deepseek-flash", budget=0.001)
    assert ran.status == "answered" and len(server.requests) == 1
    assert 300 < server.requests[0]["body"]["max_tokens"] < 600
    none = loop("say hi", model="deepseek-flash", budget=0.0001)
    assert none.status == "budget" and len(server.requests) == 1
    assert none.text.startswith("the budget of 0.0001 USD buys no request: its prompt could cost")


def test_run_from_python_refuses_a_budget_it_cannot_price_before_sending_anything(loop, server):
    server.add(reply("never sent"))
    ran = loop("go", budget=1.0)  # test-model: no price
    assert ran.status == "budget" and server.requests == []
    assert ran.text.startswith("a budget needs a price, and none is known for the model")
    assert ran.stderr.count("\n") == 1 and "stopped: a budget needs a price" in ran.stderr


@posix_only
def test_a_summarys_request_counts_against_the_budget(agent, server):
    usage = {"prompt_tokens": 1_000, "completion_tokens": 0, "total_tokens": 1_000}
    server.add(
        reply("The first answer.", usage=usage),  # 0.001
        reply("The person asked a first question.", usage=usage),  # the summary: 0.001 more
        reply("never sent"),
    )
    # the summary's prompt is a conversation of its own: a token a byte, about 1,000 of them
    done = agent(
        "--yes", "--budget", "0.0025", terminal="first\n/compact\nsecond\nexit\n", env=priced()
    )
    assert len(server.requests) == 2, done.stderr
    assert "stopped: spent 0.002 EUR of the budget of 0.0025 EUR; the next request" in done.stderr
    summary = [e for e in replies_of(done.transcript) if "under" in e]
    assert summary[0]["cost"]["amount"] == 0.001
    assert "total: 2000 prompt tokens (0 cached), 0 completion tokens, 0.002 EUR\n" in done.stderr


def test_the_lessons_price_list_names_the_page_it_was_read_from():
    source = (ROOT / "config.py").read_text(encoding="utf-8")
    assert "https://api-docs.deepseek.com/quick_start/pricing" in source
    assert re.search(r"read on \d{4}-\d{2}-\d{2}", source)


def test_the_money_settings_are_in_the_help_the_configuration_page_and_the_env_example(tmp_path):
    done = subprocess.run(
        [sys.executable, str(AGENT), "--help"], env=clean_env(), capture_output=True, text=True
    )
    configuration = (ROOT / "docs" / "configuration.md").read_text(encoding="utf-8")
    example = (ROOT / ".env.example").read_text(encoding="utf-8")
    for name, flag in [
        ("AGENT_PRICE_INPUT", "--price-input"),
        ("AGENT_PRICE_CACHED", "--price-cached"),
        ("AGENT_PRICE_OUTPUT", "--price-output"),
        ("AGENT_CURRENCY", "--currency"),
        ("AGENT_BUDGET", "--budget"),
    ]:
        assert name in done.stdout and flag in done.stdout
        assert f"| `{name}` | `{flag} " in configuration
        assert f"# {name}=" in example


def test_a_spent_budget_ends_the_session_with_one_line(agent):
    # a budget is the session's: a replay of two tasks stops at the first, and says so once
    lesson = str(ROOT / "examples" / "lesson-11.jsonl")
    done = agent("--model", "deepseek-flash", "--budget", "0.00015", "--replay", lesson)
    assert done.returncode == 3, done.stderr
    assert done.stderr.count("stopped: the budget of 0.00015 USD buys no request") == 1
    assert "And how many characters?" not in done.stderr


@posix_only
def test_a_budget_spent_at_the_prompt_ends_the_session_with_exit_3(agent, server):
    # typed tasks end with 0 as asked; a spent budget is no ending the person asked for
    server.add(reply("hi", usage=DEEPSEEK_USAGE))
    done = agent("--budget", "0.1", terminal="say hi\nsay it again\n", env=priced())
    assert done.returncode == 3, done.stderr
    assert len(server.requests) == 1 and done.stderr.count("stopped: spent ") == 1
    again = run_offline(agent.tmp_path, "--replay", str(done.transcript))  # it ends as it ended
    assert again.returncode == 3 and again.stderr.count("stopped: spent ") == 1, again.stderr


def test_a_paused_replays_show_says_how_a_replay_goes_on(tmp_path):
    # a replay's pause cannot go on with --resume: there is no server to go on with
    event = {"type": "turn/end", "status": "paused", "pending": [], "settings": {}}
    replayed = {**event, "settings": {"base_url": "replay of examples/lesson-01.jsonl"}}
    assert "--resume" in next(page.shown_pause(event))
    assert "replay it at a terminal, or with --yes" in next(page.shown_pause(replayed))


# --- Every request's cost on a line, and what nothing spent says (issue #45) ---------------------


def test_lesson_10s_lines_add_up_to_its_total_the_summarys_request_on_one_of_its_own(tmp_path):
    lesson = ROOT / "examples" / "lesson-10.jsonl"
    options = ["--yes", "--model", "deepseek-flash", "--workdir", str(tmp_path / "work")]
    done = subprocess.run(
        [sys.executable, str(AGENT), "--replay", str(lesson), *options],
        env=clean_env(),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    said = r"(\d+) prompt tokens \((\d+) cached\), (\d+) completion tokens, ([\d.]+) USD"
    lines = re.findall(rf"^(?:step \d+|the summary's request): {said}", done.stderr, re.M)
    [total] = re.findall(rf"^total: {said}", done.stderr, re.M)
    assert len(lines) == 6  # five steps of its own and the summary's request
    for column in range(3):
        assert sum(int(line[column]) for line in lines) == int(total[column])
    assert sum(float(line[3]) for line in lines) == pytest.approx(float(total[3]), abs=2e-6)


def test_a_budget_of_nothing_says_no_request_was_sent(agent, server):
    done = agent("--budget", "0", "--model", "deepseek-flash", "go")
    assert done.returncode == 3 and not server.requests
    said = "the budget of 0.00 USD buys no request: its prompt could cost up to 0.000"
    assert said in done.stderr and done.stderr.endswith("; none was sent\n")
    assert "spent" not in done.stderr


@posix_only
def test_at_the_prompt_each_task_says_its_cost_and_the_sessions_and_slash_cost_again(agent, server):
    server.add(reply("one", usage=DEEPSEEK_USAGE), reply("two", usage=DEEPSEEK_USAGE))
    env = clean_env(AGENT_API_KEY=KEY, **PRICES)
    done = agent("--yes", terminal="first\nsecond\n/cost\nexit\n", env=env)
    assert done.returncode == 0, done.stderr
    task, session = f"0.48 EUR {SAVED}", "0.96 EUR (the cache saved 1.44 EUR, 60%)"
    assert done.stderr.count(f"cost: this task {task}; the session {task}\n") == 1
    assert done.stderr.count(f"cost: this task {task}; the session {session}\n") == 1
    assert done.stderr.count(f"cost: the session {session}\n") == 1  # /cost


def replayed_page(tmp_path, lesson: str) -> tuple[str, list[dict]]:
    """The page of a lesson replayed at deepseek-flash's prices, and the replay's events."""
    transcript = tmp_path / "t.jsonl"
    options = ["--yes", "--model", "deepseek-flash", "--workdir", str(tmp_path / "work")]
    options += ["--transcript", str(transcript)]
    done = subprocess.run(
        [sys.executable, str(AGENT), "--replay", str(ROOT / "examples" / lesson), *options],
        env=clean_env(),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    events = events_of(transcript)
    return page.page(events, SYSTEM_PROMPT), events


def test_lesson_10s_lines_on_the_page_add_up_to_its_total(tmp_path):
    html, _ = replayed_page(tmp_path, "lesson-10.jsonl")
    said = r"(\d+) prompt tokens \((\d+) cached\), (\d+) completion tokens, ([\d.]+) USD"
    total, *lines = re.findall(said, html)
    assert len(lines) == 6  # five steps of its own and the summary's request
    for column in range(3):
        assert sum(int(line[column]) for line in lines) == int(total[column])
    assert sum(float(line[3]) for line in lines) == pytest.approx(float(total[3]), abs=2e-6)


def test_the_pages_money_chart_has_a_bar_a_request_on_one_scale(tmp_path):
    html, events = replayed_page(tmp_path, "lesson-10.jsonl")
    costs = [e["cost"] for e in events if e["type"] == "assistant/message"]
    chart = html[html.index("<h2>Money per request</h2>") :]
    chart = chart[: chart.index("</p>")]
    spent = re.findall(r"class=bar-money x=[\d.]+ y=([\d.]+) width=[\d.]+ height=([\d.]+)", chart)
    saved = re.findall(r"class=bar-saved x=[\d.]+ y=[\d.]+ width=[\d.]+ height=([\d.]+)", chart)
    assert len(spent) == len(saved) == len(costs) == 6
    # the heights are the amounts on one scale, whose top is the largest bar, cost and saving
    top = max(c["amount"] + c["saved"] for c in costs)
    for (_, height), cost in zip(spent, costs, strict=True):
        assert float(height) == pytest.approx(cost["amount"] / top * 66, abs=0.06)
    titles = re.findall(r": cost ([\d.]+) USD</title>", chart)
    assert titles == [replies.money(c["amount"], "").strip() for c in costs]
    assert f"whose top (the dashed line) is {replies.money(top, 'USD')}" in chart
    assert f"In all, {replies.money(sum(c['amount'] for c in costs), 'USD')} spent" in chart


def test_no_money_chart_where_a_request_records_no_price():
    events = events_of(ROOT / "examples" / "lesson-01.jsonl")
    assert "Money per request" in page.page(events, SYSTEM_PROMPT)
    last = max(i for i, e in enumerate(events) if e["type"] == "assistant/message")
    del events[last]["cost"]  # one request of a price unknown: no chart of a part of them
    html = page.page(events, SYSTEM_PROMPT)
    assert "Tokens per request" in html and "Money per request" not in html
