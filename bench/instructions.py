"""The loop's own work counted in CPU instructions: agent.py against bench/baseline.py, the same
requests, each run once under valgrind's callgrind, which counts the instructions the process runs
(not its commands': they are the same on both sides). Unlike time, the count does not move with
what else the machine runs, so a change of a few tenths of a percent shows.

Both run with their modules' bytecode cached, as on a person's machine: each is run once first.
Needs valgrind (`apt-get install valgrind`); a 50-step run of the three (the agent, the
baseline, and the baseline with --freeze) takes about six minutes.

Usage: python bench/instructions.py [--steps N]
"""

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "bench"), str(ROOT / "tests")]

from loop import respond  # noqa: E402
from scripted_server import ScriptedServer  # noqa: E402

import agent as agent_module  # noqa: E402
import tools  # noqa: E402


def instructions(command: list[str], folder: Path, env: dict) -> int:
    """The instructions command runs, counted by callgrind."""
    out = folder / f"callgrind.{time.monotonic_ns()}"
    subprocess.run(
        ["valgrind", "--tool=callgrind", f"--callgrind-out-file={out}", *command],
        env=env,
        cwd=folder,
        capture_output=True,
        check=True,
    )
    return int(re.search(r"^summary:\s*(\d+)", out.read_text(errors="replace"), re.M).group(1))


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--steps", type=int, default=50, help="run_shell steps (default 50)")
    steps = parser.parse_args().steps
    server = ScriptedServer(respond=respond)
    folder = Path(tempfile.mkdtemp(prefix="bench-"))
    (folder / "request.json").write_text(
        json.dumps({"system": agent_module.SYSTEM_PROMPT, "tools": tools.TOOLS})
    )
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    # generous limits: under valgrind everything is about fifty times slower
    env |= {"AGENT_API_KEY": "bench", "AGENT_TIMEOUT": "600", "AGENT_SHELL_TIMEOUT": "600"}
    env |= {"AGENT_MAX_OUTPUT": "10000", "AGENT_CONTEXT_WINDOW": "100000000"}  # as bench/loop.py

    def agent() -> list[str]:
        transcript = str(folder / f"{time.monotonic_ns()}.jsonl")
        return [
            sys.executable,
            str(ROOT / "agent.py"),
            "--yes",
            *("--model", f"echo-{steps}", "--max-steps", str(steps + 1)),
            *("--base-url", server.url, "--workdir", str(folder / "work")),
            *("--transcript", transcript, "go"),
        ]

    baseline = [
        sys.executable,
        str(ROOT / "bench" / "baseline.py"),
        server.url,
        f"echo-{steps}",
        str(folder / "request.json"),
    ]
    frozen = [*baseline, "--freeze"]  # as the agent's command line freezes what it made
    for command in (agent(), baseline):  # the bytecode written, as a person's first run does
        subprocess.run(command, env=env, cwd=folder, capture_output=True, check=True)
    counted_agent = instructions(agent(), folder, env)
    counted = {"baseline": instructions(baseline, folder, env)}
    counted["baseline that freezes too"] = instructions(frozen, folder, env)
    server.close()
    print(f"{steps} steps: agent {counted_agent:,} instructions")
    for name, count in counted.items():
        print(
            f"  against the {name}, {count:,}: {counted_agent / count:.4f}, "
            f"{(counted_agent - count) / 1e6:+.1f} million"
        )


if __name__ == "__main__":
    main()
