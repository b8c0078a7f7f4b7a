"""How large a run's page is and how long Chromium takes to open it, for a long run.

Makes a transcript of a 200-step session, each step a command whose result is 10,000 characters,
writes its page with agent.py --html, and reports the page's size against the transcript's, and
the time headless Chromium takes to load it and run its script (--dump-dom) against the time it
takes to load the transcript itself as plain text, in the same run: python bench/page.py [--steps N]
"""

import argparse
import json
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def transcript(steps: int, path: Path) -> None:
    """A transcript of steps replies, each one run_shell call with a long result."""
    events = [
        {
            "type": "run/start",
            "model": "bench",
            "base_url": "http://127.0.0.1",
            "workspace": "w",
            "system_prompt": "You are a careful assistant.",
        },
        {"type": "user/message", "content": "run the checks, one after another"},
    ]
    for i in range(steps):
        call = {
            "id": f"c{i}",
            "type": "function",
            "function": {"name": "run_shell", "arguments": json.dumps({"command": f"check {i}"})},
        }
        events.append(
            {
                "type": "assistant/message",
                "message": {"role": "assistant", "content": f"Step {i}.", "tool_calls": [call]},
                "finish_reason": "tool_calls",
                "usage": {"prompt_tokens": 1000 + 2600 * i, "completion_tokens": 20},
                "latency_ms": 500 + i,
            }
        )
        result = (f"line {i} " * 1250)[:10_000]
        events.append(
            {
                "type": "tool/result",
                "call_id": f"c{i}",
                "name": "run_shell",
                "content": result,
                "ok": True,
            }
        )
    events.append(
        {
            "type": "assistant/message",
            "message": {"role": "assistant", "content": "All checks ran."},
            "finish_reason": "stop",
            "usage": {"prompt_tokens": 9, "completion_tokens": 3},
        }
    )
    events.append({"type": "turn/end", "status": "answered"})
    path.write_text("".join(json.dumps(e) + "\n" for e in events), encoding="utf-8")


def load_time(browser: str, url: str, profile: Path) -> float:
    """Seconds for headless Chromium to load a page, run its scripts and dump the DOM."""
    started = time.perf_counter()
    subprocess.run(
        [
            browser,
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            f"--user-data-dir={profile}",
            "--dump-dom",
            url,
        ],
        capture_output=True,
        check=True,
        timeout=300,
    )
    return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=200)
    parser.add_argument("--pairs", type=int, default=5)
    options = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        folder = Path(folder)
        source, out = folder / "run.jsonl", folder / "run.html"
        transcript(options.steps, source)
        started = time.perf_counter()
        subprocess.run(
            [sys.executable, str(ROOT / "agent.py"), "--html", str(source), str(out)],
            check=True,
            capture_output=True,
        )
        written = time.perf_counter() - started
        plain = folder / "plain.txt"
        shutil.copy(source, plain)
        print(
            f"transcript: {source.stat().st_size:,} bytes; page: {out.stat().st_size:,} bytes "
            f"({out.stat().st_size / source.stat().st_size:.2f} times); written in {written:.2f} s"
        )
        browser = next(
            (shutil.which(n) for n in ("chromium", "chromium-browser") if shutil.which(n)), None
        )
        if not browser:
            print("no Chromium here: apt-get install chromium, to time the page's loading")
            return
        ratios, page_times = [], []
        load_time(browser, out.as_uri(), folder / "profile")  # warm-up
        for _ in range(options.pairs):
            page_time = load_time(browser, out.as_uri(), folder / "profile")
            plain_time = load_time(browser, plain.as_uri(), folder / "profile")
            page_times.append(page_time)
            ratios.append(page_time / plain_time)
        print(
            f"Chromium, load and run the script: {statistics.median(page_times):.2f} s median "
            f"over {options.pairs}; against the transcript as plain text: "
            f"{statistics.median(ratios):.2f} times"
        )


if __name__ == "__main__":
    main()
