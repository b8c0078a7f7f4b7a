"""A budget is a ceiling (issue #45): no run spends more than its budget, by the server's own
counts. Before each request the client bounds what it can cost at most: its prompt at the
cache-miss price, counted from the server's last prompt_tokens and a token for each byte added
since, and its reply capped (max_tokens) at what the money left buys; a request that cannot fit
is not sent.

The server here is honest (scripted_server.Honest): it counts each request's tokens from what it
got, caches the prefix an earlier request shared, and stops a reply at max_tokens, as llama.cpp
and vLLM do. What a run spent is reckoned from the usage the server sent, never from the agent's
own lines. The family is every request a run sends: its own steps, a helper's
(examples/subagent.py), a summary's (realworld/compaction.py), a reply the server sent no usage
for, and a server that refuses the cap as too large.
"""

import pytest
from conftest import KEY, clean_env, posix_only
from scripted_server import Error, Honest, ScriptedServer, call, reply
from test_beyond_the_loop import subagent

import config
from agent import SYSTEM_PROMPT
from realworld import replies
from realworld.compaction import SUMMARY_PROMPT

FLASH = config.Prices(*config.DEEPSEEK_PRICES["deepseek-flash"], "USD")
FILE = "".join(f"line {n}: {'x' * 60}\n" for n in range(40))  # about 2.8 KB


def billed(server: ScriptedServer, prices: config.Prices = FLASH) -> float:
    """What the server's replies cost at prices (deepseek-flash's), from the usage it counted."""
    total = 0.0
    for usage in server.sent:
        hit = usage["prompt_cache_hit_tokens"]
        total += (usage["prompt_tokens"] - hit) * prices.input + hit * prices.cached
        total += usage["completion_tokens"] * prices.output
    return total / 1_000_000


def fixing_task(steps: int = 10, usage: bool = True) -> list:
    """A fixing task's replies: reads, whole rewrites, test runs with a few KB of output, and
    an answer; every one honest."""
    script = []
    for n in range(steps):
        script += [
            call("read_file", {"path": "app.txt"}, f"r{n}"),
            call("write_file", {"path": "app.txt", "content": FILE + f"fix {n}\n"}, f"w{n}"),
            call("run_shell", {"command": "cat app.txt app.txt"}, f"s{n}"),
        ][n % 3 : n % 3 + 1]
    replies_ = [Honest(reply(tool_calls=[c]), usage=usage) for c in script]
    return [*replies_, Honest(reply("Fixed: " + "the tests pass. " * 20), usage=usage)]


def run_on(loop, server, script, budget, **options):
    server.script[:] = []
    server.requests.clear()
    server.sent.clear()
    server.add(*script)
    (loop.workdir / "app.txt").write_text(FILE)
    options = {"model": "deepseek-flash", "yes": True, **options}
    return loop("fix app.txt", budget=budget, **options)


@pytest.fixture
def honest(server):
    return server


def sweep(loop, server, script, **options) -> tuple[float, list]:
    """The cost of the whole run, and (budget, spent, status) at budgets from 2% to 150% of it."""
    whole = run_on(loop, server, script, None, **options)
    assert whole.status == "answered", whole.text
    cost = billed(server)
    tried = []
    for share in (0.02, 0.05, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 0.95, 1.0, 1.5, 4.0):
        ran = run_on(loop, server, script, cost * share, **options)
        tried.append((cost * share, billed(server), ran.status, len(server.requests)))
    return cost, tried


def test_no_run_spends_more_than_its_budget_at_any_budget(loop, honest):
    _, tried = sweep(loop, honest, fixing_task())
    for budget, spent, status, _ in tried:
        assert spent <= budget, (budget, spent, status)
    # the bound takes the whole prompt at the cache-miss price, a fiftieth of which a cached
    # token costs: a run stops well before its budget, but a budget of four times its cost
    # finishes it
    assert tried[-1][2] == "answered"
    # stopped before a request, or a reply cut at the cap the money left bought
    assert {status for _, _, status, _ in tried[:-2]} == {"budget", "length"}
    assert sum(sent for *_, sent in tried) > 14  # and most budgets sent requests: no stop at once


def test_every_request_is_capped_at_what_the_money_left_buys(loop, honest):
    cost, _ = sweep(loop, honest, fixing_task(4))
    ran = run_on(loop, honest, fixing_task(4), cost * 0.6)
    assert ran.status in ("budget", "length")
    caps = [r["body"].get("max_tokens") for r in honest.requests]
    assert all(isinstance(cap, int) and cap >= 1 for cap in caps)
    assert caps == sorted(caps, reverse=True)  # the money left only shrinks


def test_a_helpers_requests_are_kept_to_the_same_budget(loop, honest):
    script = [
        Honest(reply(tool_calls=[call("ask_helper", {"question": "what is in app.txt?"}, "h1")])),
        *[
            Honest(reply(tool_calls=[call("read_file", {"path": "app.txt"}, f"hr{n}")]))
            for n in (1, 2)
        ],
        Honest(reply("It holds forty lines. " * 5)),
        *fixing_task(4),
    ]
    _, tried = sweep(loop, honest, script, tools=list(subagent.OFFERED))
    for budget, spent, status, _ in tried:
        assert spent <= budget, (budget, spent, status)


def test_a_summarys_request_is_kept_to_the_same_budget(loop, honest):
    # two tasks on one conversation, in a window so small that the second compacts the first
    # into a summary, which is a request of its own (realworld/compaction.py)
    summary = Honest(reply("The user asked for app.txt to be fixed; it was read. " * 3))
    script = [*fixing_task(3), summary, *fixing_task(3)]

    def two_tasks(budget):
        run_on(loop, honest, script, None, model="deepseek-flash")  # to set the script up
        honest.script[:], _ = [*script], honest.requests.clear()
        honest.sent.clear()
        client = replies.Client(replies.openai_client(honest.url, KEY, 60))
        client.window = 2_400
        messages = [{"role": "system", "content": SYSTEM_PROMPT}]
        options = {"client": client, "model": "deepseek-flash", "yes": True, "budget": budget}
        first = loop("fix app.txt", messages, **options)
        if first.status != "answered":
            return first
        return loop("fix it again", messages, **options)

    whole = two_tasks(None)
    assert whole.status == "answered"
    assert any(r["body"]["messages"][0]["content"] == SUMMARY_PROMPT for r in honest.requests)
    cost = billed(honest)
    for share in (0.1, 0.3, 0.5, 0.7, 0.9, 1.0):
        ran = two_tasks(cost * share)
        assert billed(honest) <= cost * share, (share, ran.status)


def test_a_reply_with_no_usage_counts_at_its_most(loop, honest):
    _, tried = sweep(loop, honest, fixing_task(usage=False))
    for budget, spent, status, _ in tried:
        assert spent <= budget, (budget, spent, status)  # the server's count, which it kept


# Each provider's refusal of a max_tokens larger than it takes, in its own words, and what the
# agent asks again with: the most it names, never another number in the text
CAP_REFUSALS = {
    # OpenAI (param "max_tokens")
    "openai": (
        "max_tokens is too large: {cap}. This model supports at most 4096 completion tokens, "
        "whereas you provided {cap}.",
        4096,
    ),
    # DeepSeek (api-docs.deepseek.com: the valid range of max_tokens)
    "deepseek": ("Invalid max_tokens value, the valid range of max_tokens is [1, 8192]", 8192),
    # vLLM (vllm/entrypoints/openai/serving_engine.py): the window less the prompt
    "vllm": (
        "'max_tokens' or 'max_completion_tokens' is too large: {cap}. This model's maximum "
        "context length is 4096 tokens and your request has 1000 input tokens ({cap} > 4096 - "
        "1000).",
        3096,
    ),
    # Groq
    "groq": (
        "`max_tokens` must be less than or equal to `8192`, the maximum value for "
        "`max_tokens` is less than the `context_window` for this model",
        8192,
    ),
    # Gemini's OpenAI-compatible endpoint: an exclusive end
    "gemini": (
        "The maximum number of tokens (maxOutputTokens) value of {cap} is out of range: "
        "supported values are from 1 (inclusive) to 65537 (exclusive).",
        65536,
    ),
    # Anthropic's OpenAI-compatible endpoint: the prompt and the cap against the window, and a
    # date in the model's name that is no limit
    "anthropic-sum": (
        "input length and `max_tokens` exceed context limit: 198000 + {cap} > "
        "200000, decrease input length or `max_tokens` and try again",
        2000,
    ),
    "anthropic-date": (
        "max_tokens: {cap} > 4096, which is the maximum allowed number of output "
        "tokens for claude-3-haiku-20240307",
        None,
    ),
}


@pytest.mark.parametrize("name", list(CAP_REFUSALS))
def test_a_cap_the_server_refuses_as_too_large_is_asked_again_at_its_most(loop, honest, name):
    refusal, most = CAP_REFUSALS[name]
    said = lambda body: refusal.format(cap=body["max_tokens"])  # noqa: E731
    honest.add(Error(400, said, times=1), Honest(reply("done")))
    ran = loop("go", model="deepseek-flash", budget=1.0)
    if most is None:  # "> 4096" names no limit in words the agent reads: said as it is
        assert ran.status == "api_error" and len(honest.requests) == 1
        assert "20240307" not in str([r["body"].get("max_tokens") for r in honest.requests])
        return
    assert ran.status == "answered", ran.text
    first, second = (r["body"].get("max_tokens") for r in honest.requests)
    assert first > most and second == most
    assert f"the server takes a reply of at most {most} tokens; asking again" in ran.stderr
    assert not [e for e in ran.events() if e["type"] == "context/compacted"]


def test_a_refusal_in_two_stages_is_followed_down(loop, honest):
    # a gateway's own bound first, then the model's own most (OpenAI's words, both)
    honest.add(
        Error(
            400,
            "Invalid 'max_tokens': integer above maximum value. Expected a value <= "
            "1000000, but got 2147483647 instead.",
            times=1,
        ),
        Error(
            400,
            "max_tokens is too large: 1000000. This model supports at most 16384 "
            "completion tokens, whereas you provided 1000000.",
            times=1,
        ),
        Honest(reply("done")),
    )
    ran = loop("go", model="deepseek-flash", budget=1e9)
    assert ran.status == "answered", ran.text
    assert [r["body"]["max_tokens"] for r in honest.requests] == [2**31 - 1, 1_000_000, 16384]


def test_a_model_that_takes_max_completion_tokens_is_asked_again_under_that_name(loop, honest):
    # OpenAI's reasoning models refuse max_tokens by name
    honest.add(
        Error(
            400,
            "Unsupported parameter: 'max_tokens' is not supported with this model. Use "
            "'max_completion_tokens' instead.",
            times=1,
        ),
        Honest(reply("done")),
        Honest(reply("again")),
    )
    ran = loop("go", model="deepseek-flash", budget=1.0)
    assert ran.status == "answered", ran.text
    first, second = (r["body"] for r in honest.requests)
    assert "max_tokens" in first and "max_tokens" not in second
    assert second["max_completion_tokens"] == first["max_tokens"]


def test_a_context_refusal_of_the_prompt_and_the_cap_teaches_the_window_the_cap_keeps_to(
    loop, honest
):
    # OpenRouter counts the cap in the request. It is a context refusal as any other: the run
    # compacts where it can, or ends with one line, and its turn/end records the window (so that
    # a replay goes as it went); from then on the cap keeps to the room that window leaves
    honest.add(
        Error(
            400,
            lambda body: (
                "This endpoint's maximum context length is 131072 tokens. "
                f"However, you requested about {body['max_tokens'] + 600} tokens (600 of text "
                f"input, {body['max_tokens']} in the output). Please reduce the length of either "
                "one."
            ),
            times=1,
        ),
        Honest(reply("done")),
    )
    client = replies.Client(replies.openai_client(honest.url, KEY, 60))
    options = {"client": client, "model": "deepseek-flash", "budget": 1.0}
    refused = loop("go", **options)
    assert refused.status == "context_full" and client.window == 131_072
    again = loop("go on", **options)
    assert again.status == "answered", again.text
    assert 120_000 < honest.requests[-1]["body"]["max_tokens"] < 131_072


def test_a_budget_past_any_number_a_server_takes_caps_at_the_largest_it_takes(loop, honest):
    honest.add(Honest(reply("done")))
    ran = loop("go", model="deepseek-flash", budget=1e305)
    assert ran.status == "answered" and honest.requests[0]["body"]["max_tokens"] == 2**31 - 1


def test_a_budget_that_cannot_pay_the_first_prompt_sends_nothing_and_says_so(loop, honest):
    honest.add(Honest(reply("never sent")))
    ran = loop("go", model="deepseek-flash", budget=0.0001)
    assert ran.status == "budget" and honest.requests == []
    assert ran.text.startswith("the budget of 0.0001 USD buys no request: its prompt could cost")
    assert "spent" not in ran.text


def test_the_stop_line_says_what_was_spent_by_the_servers_counts(loop, honest):
    _, tried = sweep(loop, honest, fixing_task(4))
    budget = next(b for b, _, status, sent in tried if status == "budget" and sent)
    ran = run_on(loop, honest, fixing_task(4), budget)
    spent = replies.money(billed(honest), "USD")
    assert ran.status == "budget" and ran.text.startswith(f"spent {spent} of the budget of ")
    assert "the next request was not sent: its prompt could cost up to " in ran.text


def test_a_reply_cut_at_the_budgets_cap_says_the_budget_bought_no_more(loop, honest):
    honest.add(Honest(reply("A long answer. " * 300)))  # some 1,500 tokens; the cap buys fewer
    ran = loop("go", model="deepseek-flash", budget=0.001)
    cap = honest.requests[0]["body"]["max_tokens"]
    assert ran.status == "length" and cap < 1_000
    assert f"agent: the budget left buys a reply of at most {cap} tokens; it was cut there" in (
        ran.stderr
    )
    assert billed(honest) <= 0.001


@posix_only
def test_a_resumed_run_counts_what_it_spent_before_against_its_budget(agent, honest):
    # a budget is the run's: a --resume after a pause goes on with what is left of it
    env = clean_env(AGENT_API_KEY=KEY)
    reads = [
        Honest(reply(tool_calls=[call("read_file", {"path": "app.txt"}, f"r{n}")]))
        for n in range(6)
    ]
    agent.workdir.mkdir()
    (agent.workdir / "app.txt").write_text(FILE)

    def both(budget: float) -> float:
        honest.script[:], _ = [], honest.requests.clear()
        honest.sent.clear()
        honest.add(
            *reads, Honest(reply(tool_calls=[call("run_shell", {"command": "echo hi"}, "s1")]))
        )
        honest.add(*reads, Honest(reply("done")))
        flags = ["--model", "deepseek-flash", "--budget", str(budget)]
        paused = agent(*flags, "read app.txt, then echo hi", env=env)
        if paused.returncode == 4:
            agent("--resume", str(paused.transcript), "--approve", *flags, env=env)
        return billed(honest)

    whole = both(1.0)
    assert len(honest.requests) == 14  # it paused, and went on to the end
    for share in (0.3, 0.5, 0.7, 0.9):
        assert both(whole * share) <= whole * share


def test_a_reply_with_no_usage_counts_at_a_token_a_byte_and_the_run_goes_on(loop, honest):
    _, tried = sweep(loop, honest, fixing_task(usage=False))
    assert max(sent for *_, sent in tried) > 3  # not stopped after its first request
    budget = next(b for b, _, status, sent in tried if status == "budget" and sent)
    ran = run_on(loop, honest, fixing_task(usage=False), budget)
    assert ran.text.startswith("spent up to ")  # what was spent is a bound: no usage was said


def test_a_cached_price_above_the_input_price_bounds_the_prompt_at_it(loop, honest, monkeypatch):
    monkeypatch.setattr(config, "PRICE_INPUT", 0.1)
    monkeypatch.setattr(config, "PRICE_CACHED", 0.5)  # dearer than a miss: the bound takes it
    monkeypatch.setattr(config, "PRICE_OUTPUT", 1.0)
    prices = config.prices("any")
    script = fixing_task()
    run_on(loop, honest, script, None)
    cost = billed(honest, prices)
    assert prices.cached == 0.5
    for share in (0.2, 0.5, 0.8):
        run_on(loop, honest, script, cost * share)
        spent = billed(honest, prices)
        assert spent <= cost * share
