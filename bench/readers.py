"""How each reader of untrusted text grows with what it reads: n, 2n and 4n of one shape each.

Each reader (the depth check before json.loads, a transcript's read, the walk of its requests,
--show's lines, the page) is given the shape that made one of them superlinear, at n, 2n and 4n,
and its CPU time is printed with the ratios against n: linear is about 2 and 4, quadratic 4 and
16. Then agent.py --show as a process on a transcript whose resumes alternate the system prompt,
its peak memory (os.wait4's ru_maxrss) at each size.
python bench/readers.py [--quick] [--scale F]: --scale multiplies every n
"""

import argparse
import contextlib
import gc
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from realworld import page, runs, transcripts  # noqa: E402
from realworld.guards import nested_deeper  # noqa: E402

SYSTEM_PROMPT = "You are a careful assistant."


def start() -> list[dict]:
    return [
        {
            "type": "run/start",
            "model": "bench",
            "base_url": "http://127.0.0.1",
            "workspace": "w",
            "system_prompt": SYSTEM_PROMPT,
        },
        {"type": "user/message", "content": "go"},
    ]


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


def alternating(n: int) -> list[dict]:
    """n resumes, each with the other of two system prompts, each followed by a task and a reply
    (the transcript that drove --show to 3.9 GB)."""
    events = start()
    for i in range(n):
        prompt = ("prompt A " if i % 2 else "prompt B ") * 20
        events.append({"type": "run/resume", "system_prompt": prompt})
        events.append({"type": "user/message", "content": f"task {i}"})
        events += step(i)
    return events


def placeholders(n: int) -> list[dict]:
    """n results, then n compactions, each putting a placeholder in one's place, each followed by
    a reply (each compaction copied the whole conversation before)."""
    events = start()
    for i in range(n):
        events += step(i)
    for i in range(n):
        events.append({"type": "context/compacted", "placeholders": {f"c{i}": "[cut]"}})
        events += step(n + i)
    return events


def summaries(n: int) -> list[dict]:
    """n tasks, then n compactions, each a summary in the place of the one before and one task
    (the first: of one task), each followed by a reply: the conversation stays as long."""
    events = start()[:1] + [{"type": "user/message", "content": f"task {i}"} for i in range(n)]
    for i in range(n - 1):
        summary = {"text": f"summary {i}", "replaced": 3 if i else 1}
        events.append({"type": "context/compacted", "placeholders": {}, "summary": summary})
        events += step(i)
    return events


def mixed(n: int) -> list[dict]:
    """n turns, then n compactions, each a placeholder for a result further on and a summary of
    the earliest turn left, then a resume with the other system prompt and a reply."""
    events = start()[:1]
    for i in range(n):
        events.append({"type": "user/message", "content": f"task {i}"})
        events += step(i)
    for i in range(n - 1):
        summary = {"text": f"summary {i}", "replaced": 5 if i else 3}
        cut = {f"c{n - 1 - i}": "[cut]"}
        events.append({"type": "context/compacted", "placeholders": cut, "summary": summary})
        events.append({"type": "run/resume", "system_prompt": ("A " if i % 2 else "B ") * 20})
        events += step(n + i)
    return events


def line(events: list[dict]) -> str:
    return "".join(json.dumps(e) + "\n" for e in events)


# shape: (what it is, the reader, the input for n, n)
READERS = {
    "depth check, an unterminated string of escaped quotes": (
        nested_deeper,
        lambda n: '{"a": "' + '\\"' * n,
        2**19,
    ),
    "depth check, an unterminated string of backslashes": (
        nested_deeper,
        lambda n: '["' + "\\\\" * n,
        2**19,
    ),
    "depth check, quotes and brackets": (nested_deeper, lambda n: '["a", [' * n, 2**17),
    "transcript read, a line that never closes its string": (
        None,  # transcripts.read of a file (below)
        lambda n: '{"type": "user/message", "content": "' + '\\"' * n + "\n",
        2**19,
    ),
    "walk, resumes alternating the system prompt": (runs.walk, alternating, 2_000),
    "--show's lines, the same": (lambda e: list(page.shown(e, SYSTEM_PROMPT)), alternating, 2_000),
    "page, the same": (lambda e: page.page(e, SYSTEM_PROMPT), alternating, 500),
    "walk, a placeholder at each step": (runs.walk, placeholders, 4_000),
    "page, a placeholder at each step": (
        lambda e: page.page(e, SYSTEM_PROMPT),
        placeholders,
        1_000,
    ),
    "walk, a summary at each step": (runs.walk, summaries, 4_000),
    "page, a summary at each step": (lambda e: page.page(e, SYSTEM_PROMPT), summaries, 1_000),
    "walk, a placeholder, a summary and a resume at each step": (runs.walk, mixed, 2_000),
    "--show's lines, a placeholder, a summary and a resume": (
        lambda e: list(page.shown(e, SYSTEM_PROMPT)),
        mixed,
        2_000,
    ),
    "page, a placeholder, a summary and a resume": (
        lambda e: page.page(e, SYSTEM_PROMPT),
        mixed,
        500,
    ),
}


def cpu(reader, given, folder: Path) -> float:
    """The CPU seconds one reading takes, the least of three (the machine is shared)."""
    return min(once(reader, given, folder) for _ in range(3))


def once(reader, given, folder: Path) -> float:
    gc.collect()
    if reader is None:
        path = folder / "line.jsonl"
        path.write_text(given, encoding="utf-8")
        started = time.process_time()
        with contextlib.suppress(ValueError):  # not JSON: refused, as it should be, once read
            transcripts.read(path)
        return time.process_time() - started
    started = time.process_time()
    reader(given)
    return time.process_time() - started


def peak_of_show(events: list[dict], folder: Path) -> tuple[int, float]:
    """The bytes of a transcript and the peak memory (MB) of agent.py --show reading it."""
    path = folder / "show.jsonl"
    path.write_text(line(events), encoding="utf-8")
    # started from a small launcher: a child's peak counts the memory of the process it was forked
    # from (Linux), and this one holds the readers' inputs
    agent = [sys.executable, str(ROOT / "agent.py"), "--show", str(path)]
    done = subprocess.run(
        [sys.executable, "-c", LAUNCHER, *agent], capture_output=True, text=True, cwd=folder
    )
    assert done.returncode == 0, f"agent.py --show failed: {done.stderr[-500:]}"
    return path.stat().st_size, float(done.stdout)


LAUNCHER = """
import os, subprocess, sys
shown = subprocess.Popen(sys.argv[1:], stdout=subprocess.DEVNULL)
_, status, usage = os.wait4(shown.pid, 0)
assert os.waitstatus_to_exitcode(status) == 0
print(usage.ru_maxrss * (1 if sys.platform == "darwin" else 1024) / 1e6)  # kB on Linux
"""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="tiny sizes: only that it runs")
    parser.add_argument("--scale", type=float, default=1.0, help="every n times this")
    options = parser.parse_args()
    quick, scale = options.quick, options.scale
    with tempfile.TemporaryDirectory() as folder:
        folder = Path(folder)
        print("| reader, shape | n | CPU at n | 2n / n | 4n / n |")
        print("| --- | --- | --- | --- | --- |")
        for name, (reader, make, n) in READERS.items():
            n = max(4, n // 64) if quick else max(4, int(n * scale))
            times = [cpu(reader, make(n * k), folder) for k in (1, 2, 4)]
            base = max(times[0], 1e-6)
            print(
                f"| {name} | {n:,} | {times[0]:.3f} s | {times[1] / base:.2f} "
                f"| {times[2] / base:.2f} |",
                flush=True,
            )
        print("\n| agent.py --show, resumes alternating the system prompt | transcript | peak |")
        print("| --- | --- | --- |")
        for n in (250, 500, 1000) if quick else (int(k * scale) for k in (8_000, 16_000, 32_000)):
            size, peak = peak_of_show(alternating(n), folder)
            print(f"| {n:,} resumes | {size / 1e6:.1f} MB | {peak:.0f} MB |", flush=True)


if __name__ == "__main__":
    main()
