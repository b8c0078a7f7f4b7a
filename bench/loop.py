"""What the loop costs on top of the model, measured against a bare-SDK baseline in the same run.

A scripted server on 127.0.0.1 answers at once, so all that is left to measure is the loop:
  1. wall time and CPU time (user + system, of the process and the commands it waited for) of a
     50-step run (each step one run_shell of `echo hi`), agent against baseline
  2. peak memory (maximum resident set size) of the same runs
  3. context growth: a 10-step run whose commands each print about 15 MB
  4. prefix stability: how often a request's messages begin with the previous request's,
     byte for byte
  5. time from process start to the first request, agent against baseline
  6. what needs no model (--help, --show, a usage error, a missing key), against a bare
     `python -c pass`
Runs alternate agent, baseline, agent, baseline ... and report medians. Both run with their
modules' bytecode cached (__pycache__), as on a person's machine: the warm-up pair writes it.

Usage: python bench/loop.py [--quick] [--loop-only] [--pairs N] [--json PATH]
"""

import argparse
import itertools
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]

from scripted_server import ScriptedServer, call, reply  # noqa: E402

import agent as agent_module  # noqa: E402
import tools  # noqa: E402
from realworld import sandbox  # noqa: E402

FLOOD = f"{sys.executable} -c \"import sys; sys.stdout.write('x' * 15_000_000)\""


def respond(body: dict) -> dict:
    """A model named like echo-50 or flood-10: that many run_shell steps, then an answer."""
    kind, steps = body["model"].split("-")
    done = sum(m["role"] == "assistant" for m in body["messages"])
    if done >= int(steps):
        return reply("done")
    command = "echo hi" if kind == "echo" else FLOOD
    return reply(tool_calls=[call("run_shell", {"command": command}, id=f"call_{done}")])


def measure(command: list[str], server: ScriptedServer, folder: Path) -> dict:
    """Run one command to the end; its wall time, CPU time, peak memory, time to first request
    and requests."""
    server.requests.clear()
    environ = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    env = {
        **environ,  # bytecode written and read again, as on a person's machine
        "AGENT_API_KEY": "bench",
        "AGENT_SHELL_TIMEOUT": "60",
        "AGENT_MAX_OUTPUT": "10000",
        # the baseline sends the whole history: the agent must too (bench/compaction.py measures
        # what compaction changes)
        "AGENT_CONTEXT_WINDOW": "100000000",
    }
    # a file: a full pipe would block it
    with open(folder / "stderr.txt", "w+", encoding="utf-8") as stderr:
        started = time.monotonic()
        process = subprocess.Popen(
            command, cwd=folder, env=env, stdout=subprocess.DEVNULL, stderr=stderr
        )
        # the rusage of this one child, unlike getrusage
        _, status, usage = os.wait4(process.pid, 0)
        wall = time.monotonic() - started
        process.returncode = os.waitstatus_to_exitcode(status)
        if process.returncode:
            stderr.seek(0)
            sys.exit(f"bench: {command[1]} failed ({process.returncode}): {stderr.read()[-500:]}")
    return {
        "wall_s": wall,
        # user + system: steadier than wall time on a shared machine
        "cpu_s": usage.ru_utime + usage.ru_stime,
        "max_rss_mb": usage.ru_maxrss / 1024,
        "first_request_ms": (server.requests[0]["time"] - started) * 1000,
        "requests": [r["body"] for r in server.requests],
        "request_bytes": [len(r["raw"]) for r in server.requests],
    }


NO_MODEL = {
    "--help": ["--help"],
    "--show": ["--show", str(ROOT / "examples" / "lesson-01.jsonl")],
    "usage error": ["--max-steps", "0", "go"],
    "missing key": ["go"],
}


def no_model_starts(pairs: int) -> dict:
    """Extra milliseconds each command that needs no model takes over a bare `python -c pass`:
    median of pairs."""
    env = {
        **os.environ,
        "AGENT_API_KEY": "",
        "DEEPSEEK_API_KEY": "",
        "AGENT_BASE_URL": "https://api.deepseek.com",
    }

    def wall(command: list[str]) -> float:
        started = time.monotonic()
        subprocess.run(command, env=env, cwd=ROOT, capture_output=True, check=False)
        return (time.monotonic() - started) * 1000

    extra = {}
    for name, args in NO_MODEL.items():
        pairs_ms = [
            wall([sys.executable, str(ROOT / "agent.py"), *args])
            - wall([sys.executable, "-c", "pass"])
        ]
        pairs_ms += [
            wall([sys.executable, str(ROOT / "agent.py"), *args])
            - wall([sys.executable, "-c", "pass"])
            for _ in range(pairs - 1)
        ]
        extra[name] = statistics.median(pairs_ms)
    return extra


def sandbox_cost(run, steps: int, pairs: int) -> dict:
    """What --sandbox adds: the same session sandboxed and not, in turn; the ratio and the
    milliseconds per command."""
    problem = sandbox.problem()
    if problem:
        return {"not_measured": problem}
    runs = [(run("--sandbox")["wall_s"], run()["wall_s"]) for _ in range(pairs)]
    return {
        "ratio": statistics.median(a / b for a, b in runs),
        "ms_per_command": statistics.median((a - b) * 1000 / steps for a, b in runs),
    }


def prefix_stability(requests: list[dict]) -> tuple[int, int]:
    """Consecutive pairs whose later messages begin with the earlier ones, with the same tools."""
    kept = 0
    for before, after in itertools.pairwise(requests):
        prefix = after["messages"][: len(before["messages"])]
        kept += (
            json.dumps(prefix) == json.dumps(before["messages"])
            and after["tools"] == before["tools"]
        )
    return kept, len(requests) - 1


def compare(agents: list[dict], baselines: list[dict], key: str, paired) -> dict:
    """One figure of both: medians; paired(agent, baseline) per pair, its median and middle
    half (quartiles); and paired() of the best (lowest) run of each, which noise that only
    adds cannot move."""
    per_pair = [paired(a[key], b[key]) for a, b in zip(agents, baselines, strict=True)]
    quartiles = statistics.quantiles(per_pair, n=4) if len(per_pair) > 1 else per_pair * 3
    return {
        "agent": statistics.median(a[key] for a in agents),
        "baseline": statistics.median(b[key] for b in baselines),
        "paired": statistics.median(per_pair),
        "quartiles": [quartiles[0], quartiles[2]],
        "best": paired(min(a[key] for a in agents), min(b[key] for b in baselines)),
    }


def ratio(a: float, b: float) -> float:
    return a / b


def difference(a: float, b: float) -> float:
    return a - b


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--quick", action="store_true", help="a few steps, one pair: only shows that it runs"
    )
    parser.add_argument(
        "--loop-only",
        action="store_true",
        help="only the 50-step pairs: wall time, CPU time and memory (about two minutes)",
    )
    parser.add_argument("--pairs", type=int, help="how many pairs of 50-step runs (default 9)")
    parser.add_argument(
        "--json", type=Path, default=ROOT / "runs" / "bench.json", help="where to write the figures"
    )
    options = parser.parse_args()
    steps, pairs, start_pairs, flood_steps = (5, 1, 1, 2) if options.quick else (50, 9, 20, 10)
    pairs = options.pairs or pairs
    server = ScriptedServer(respond=respond)
    folder = Path(tempfile.mkdtemp(prefix="bench-"))
    (folder / "request.json").write_text(
        json.dumps({"system": agent_module.SYSTEM_PROMPT, "tools": tools.TOOLS})
    )

    def agent(steps: int, kind: str = "echo", *extra: str) -> list[str]:
        workdir, transcript = str(folder / "work"), str(folder / f"{time.monotonic_ns()}.jsonl")
        return [
            sys.executable,
            str(ROOT / "agent.py"),
            "--yes",
            "--model",
            f"{kind}-{steps}",
            "--max-steps",
            str(steps + 1),
            "--base-url",
            server.url,
            "--workdir",
            workdir,
            "--transcript",
            transcript,
            *extra,
            "go",
        ]

    def baseline(steps: int, *extra: str) -> list[str]:
        return [
            sys.executable,
            str(ROOT / "bench" / "baseline.py"),
            server.url,
            f"echo-{steps}",
            str(folder / "request.json"),
            *extra,
        ]

    def alternate(steps: int, n: int, *extra: str) -> tuple[list[dict], list[dict]]:
        """n runs of each, agent and baseline (given extra) in turn, so that drift in the
        machine hits both alike."""
        runs = [
            (
                measure(agent(steps), server, folder),
                measure(baseline(steps, *extra), server, folder),
            )
            for _ in range(n)
        ]
        return [a for a, _ in runs], [b for _, b in runs]

    alternate(steps, 1)  # a warm-up pair, not counted: the first run of all pays for cold caches
    agents, baselines = alternate(steps, pairs)
    # the loop's own code alone: against a baseline that freezes what it made, as the agent does
    frozen_agents, frozen = alternate(steps, pairs, "--freeze")
    if agents[0]["requests"] != baselines[0]["requests"]:
        sys.exit(
            "bench: the baseline's requests differ from the agent's, so the comparison "
            "would be unfair"
        )
    loop = {
        "wall_s": compare(agents, baselines, "wall_s", ratio),
        "cpu_s": compare(agents, baselines, "cpu_s", ratio),
        "max_rss_mb": compare(agents, baselines, "max_rss_mb", ratio),
        "cpu_s_frozen": compare(frozen_agents, frozen, "cpu_s", ratio),
    }
    if options.loop_only:
        server.close()
        figures = {"machine": machine(), "steps": steps, "pairs": pairs, **loop}
        options.json.parent.mkdir(parents=True, exist_ok=True)
        options.json.write_text(json.dumps(figures, indent=2))
        print(f"{table(figures)}\n\nfigures: {options.json}")
        return
    # an answer at once: only the start is timed
    start_agents, start_baselines = alternate(0, start_pairs)
    flood = measure(agent(flood_steps, "flood"), server, folder)
    sandbox = sandbox_cost(
        lambda *extra: measure(agent(steps, "echo", *extra), server, folder), steps, pairs
    )
    no_model = no_model_starts(start_pairs)
    server.close()
    kept, seen = prefix_stability(agents[0]["requests"])
    figures = {
        "machine": machine(),
        "steps": steps,
        "pairs": pairs,
        "start_pairs": start_pairs,
        **loop,
        "first_request_ms": compare(start_agents, start_baselines, "first_request_ms", difference),
        "flood": {
            "request_bytes": flood["request_bytes"],
            "tool_chars_per_step": [
                len(b["messages"][-1]["content"]) for b in flood["requests"][1:]
            ],
            "max_rss_mb": flood["max_rss_mb"],
        },
        "prefix_stability": {"kept": kept, "pairs": seen},
        "no_model_extra_ms": no_model,
        "sandbox": sandbox,
    }
    options.json.parent.mkdir(parents=True, exist_ok=True)
    options.json.write_text(json.dumps(figures, indent=2))
    print(table(figures))
    flood = figures["flood"]
    print(f"\nrequest bodies in the ~15 MB run, bytes: {flood['request_bytes']}")
    print(f"tool output each step added, characters: {flood['tool_chars_per_step']}")
    if options.quick:
        print(
            "\nquick mode: one pair of short runs, so these figures are noise; run without "
            "--quick to measure"
        )
    print(f"\nfigures: {options.json}")


def machine() -> str:
    return f"{platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}"


def sandbox_row(sandbox: dict, steps: int, pairs: int) -> list[str]:
    """The row for --sandbox against the same session without it."""
    if "not_measured" in sandbox:
        return [
            "--sandbox against the same session without it",
            "not measured",
            "",
            sandbox["not_measured"],
            "",
            "",
        ]
    extra = f"{sandbox['ratio']:.3f} ({sandbox['ms_per_command']:+.1f} ms a command)"
    return [
        f"--sandbox against the same session without it, {steps} steps, {pairs} pairs",
        "",
        "",
        extra,
        "",
        "",
    ]


def both(figure: dict, value: str, compared: str) -> list[str]:
    """agent, baseline, paired median (middle half), best of each: formatted with value
    and compared."""
    low, high = (compared.format(q) for q in figure["quartiles"])
    paired = f"{compared.format(figure['paired'])} ({low} to {high})"
    return [
        value.format(figure["agent"]),
        value.format(figure["baseline"]),
        paired,
        compared.format(figure["best"]),
    ]


def table(f: dict) -> str:
    """The figures as a Markdown table, targets beside them."""

    rows = [
        [
            "measure",
            "agent",
            "baseline",
            "agent against baseline, per pair: median (middle half)",
            "best against best",
            "target",
        ],
        ["---"] * 6,
        [
            f"wall time, {f['steps']} steps, {f['pairs']} pairs",
            *both(f["wall_s"], "{:.2f} s", "{:.3f}"),
            "<= 1.10",
        ],
        [
            "CPU time (user + system), same runs",
            *both(f["cpu_s"], "{:.2f} s", "{:.3f}"),
            "<= 1.03",
        ],
        [
            "peak memory (max RSS), same runs",
            *both(f["max_rss_mb"], "{:.1f} MB", "{:.3f}"),
            "<= 1.15",
        ],
        [
            f"CPU time against a baseline that freezes too (gc.freeze()), {f['pairs']} pairs more",
            *both(f["cpu_s_frozen"], "{:.2f} s", "{:.3f}"),
            "<= 1.03",
        ],
    ]
    if "flood" in f:
        rows += rest_rows(f)
    return "\n".join("| " + " | ".join(row) + " |" for row in rows) + f"\n\nmachine: {f['machine']}"


def rest_rows(f: dict) -> list[list[str]]:
    """The rows past the 50-step runs: the start, the flood, the prefix, --sandbox."""
    flood, kept, seen = f["flood"], f["prefix_stability"]["kept"], f["prefix_stability"]["pairs"]
    return [
        [
            f"process start to first request, {f['start_pairs']} pairs",
            *both(f["first_request_ms"], "{:.0f} ms", "{:+.0f} ms"),
            "<= +50 ms",
        ],
        [
            f"tool output added per step, {len(flood['tool_chars_per_step'])} steps of "
            "~15 MB output",
            f"{max(flood['tool_chars_per_step']):,} chars at most",
            "",
            "",
            "",
            "<= 11,000",
        ],
        [
            "largest request body in that run",
            f"{max(flood['request_bytes']):,} bytes",
            "",
            "",
            "",
            "",
        ],
        ["peak memory in that run", f"{flood['max_rss_mb']:.1f} MB", "", "", "", ""],
        [
            "requests that extend the previous one byte for byte",
            f"{kept}/{seen}",
            "",
            f"{kept / seen:.0%}",
            "",
            "100%",
        ],
        *[
            [
                f"{name}: time over a bare `python -c pass`, {f['start_pairs']} pairs",
                "",
                "",
                f"{ms:+.0f} ms",
                "",
                "<= +100 ms" if name == "--help" else "<= +300 ms",
            ]
            for name, ms in f["no_model_extra_ms"].items()
        ],
        sandbox_row(f["sandbox"], f["steps"], f["pairs"]),
    ]


if __name__ == "__main__":
    main()
