"""What compaction does for a long conversation, and what it costs.

A scripted 200-turn session, as at the > prompt: each task gets one read_file call whose result is
10,000 characters, then an answer. It runs twice in the same process, against a server on
127.0.0.1 that counts tokens as about 4 bytes each:
- compacted: AGENT_CONTEXT_WINDOW small (8,000 tokens) and the server refusing any request over it,
  as a real one would;
- whole: the same session with a window too large to compact, and the server accepting anything.
It reports: requests refused (must be 0), the largest prompt against the window, the prompt tokens
sent over the session (the sum of every request's), compacted against whole, and the time each
takes and the share of the compacted session spent making room (agent.make_room(), the estimate
included, and the summaries' requests).

    python bench/compaction.py [--turns N] [--window TOKENS]
"""

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]

from scripted_server import Error, ScriptedServer, call, history_problem, reply  # noqa: E402

import agent  # noqa: E402
import config  # noqa: E402
import tools  # noqa: E402
from realworld import compaction, replies, transcripts  # noqa: E402

RESULT = "r" * 10_000


class Server(ScriptedServer):
    """One read_file call a task, then "done"; a summary when asked; over window: refused."""

    def __init__(self, window: int | None):
        self.window, self.sizes, self.refused, self.bad = window, [], 0, 0
        super().__init__(respond=self.answer, lenient=True)

    def answer(self, body: dict):
        messages = body["messages"]
        size = (len(json.dumps(messages)) + len(json.dumps(body.get("tools", [])))) // 4
        self.sizes.append(size)
        self.bad += history_problem(messages) is not None
        if self.window and size > self.window:
            self.refused += 1
            text = f"This model's maximum context length is {self.window} tokens."
            return Error(400, body={"error": {"message": text}}, times=1)
        if messages[0]["content"] == compaction.SUMMARY_PROMPT:
            return reply("the user asked for big.txt to be read, again and again")
        if messages[-1]["role"] == "user":
            return reply(tool_calls=[call("read_file", {"path": "big.txt"}, id=None)])
        return reply("done")


def session(turns: int, window: int, enforced: bool) -> dict:
    """The session, run once; what it sent and how long it took."""
    config.CONTEXT_WINDOW = window  # the setting, as AGENT_CONTEXT_WINDOW would set it
    server = Server(window if enforced else None)
    spent = [0.0]
    make_room = agent.make_room

    def timed(*args):  # the share of the session spent making room
        started = time.perf_counter()
        try:
            return make_room(*args)
        finally:
            spent[0] += time.perf_counter() - started

    agent.make_room = timed
    try:
        with (
            tempfile.TemporaryDirectory() as folder,
            open(Path(folder) / "t.jsonl", "x", encoding="utf-8") as transcript,
        ):
            (Path(folder) / "big.txt").write_text(RESULT)
            client = replies.Client(replies.openai_client(server.url, "bench", 60))
            messages = transcripts.begin(
                transcript, agent.SYSTEM_PROMPT, tools.TOOLS, **{"model": "m"}
            )
            started = time.perf_counter()
            statuses = [
                agent.run(
                    f"task {n}",
                    messages,
                    client=client,
                    model="m",
                    workdir=folder,
                    transcript=transcript,
                ).status
                for n in range(turns)
            ]
            took = time.perf_counter() - started
    finally:
        agent.make_room = make_room
        server.close()
    return {
        "answered": statuses.count("answered"),
        "refused": server.refused,
        "invalid histories": server.bad,
        "largest prompt": max(server.sizes),
        "tokens sent": sum(server.sizes),
        "requests": len(server.sizes),
        "seconds": took,
        "making room": spent[0],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--turns", type=int, default=200)
    parser.add_argument("--window", type=int, default=8_000)
    options = parser.parse_args()
    sys.stderr = open("/dev/null", "w")  # noqa: SIM115 (the agent's step lines: thousands)
    whole = session(options.turns, 10**9, enforced=False)
    compacted = session(options.turns, options.window, enforced=True)
    sys.stderr = sys.__stderr__
    print(f"{options.turns} turns, 10,000-character results, window {options.window:,} tokens")
    print(f"{'':34} {'compacted':>12} {'whole':>12}")
    for key in ("answered", "refused", "invalid histories", "requests", "largest prompt"):
        print(f"{key:34} {compacted[key]:>12,} {whole[key]:>12,}")
    print(f"{'prompt tokens sent':34} {compacted['tokens sent']:>12,} {whole['tokens sent']:>12,}")
    print(f"{'seconds':34} {compacted['seconds']:>12.2f} {whole['seconds']:>12.2f}")
    ratio = compacted["tokens sent"] / whole["tokens sent"]
    print(f"tokens sent, compacted against whole: {ratio:.3f}")
    print(f"time, compacted against whole: {compacted['seconds'] / whole['seconds']:.3f}")
    share = compacted["making room"] / compacted["seconds"]
    print(f"share of the compacted session spent making room: {share:.3f}")
    print(
        f"the same for the whole session (the estimate alone): "
        f"{whole['making room'] / whole['seconds']:.3f}"
    )
    ok = compacted["refused"] == 0 and compacted["largest prompt"] <= options.window
    ok = ok and compacted["answered"] == options.turns and compacted["invalid histories"] == 0
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
