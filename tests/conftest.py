import json
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest
from scripted_server import ScriptedServer

ROOT = Path(__file__).resolve().parent.parent
AGENT = ROOT / "agent.py"
KEY = "sk-test-7f3a9c-secret"
sys.path.insert(0, str(ROOT))


@dataclass
class Result:
    returncode: int
    stdout: str
    stderr: str
    transcript: Path

    def events(self) -> list[dict]:
        return [json.loads(line) for line in self.transcript.read_text(encoding="utf-8").splitlines()]


@pytest.fixture
def server():
    s = ScriptedServer()
    yield s
    s.close()


def clean_env(**extra: str) -> dict[str, str]:
    """The environment a test runs the agent in: no real keys or settings leak in."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AGENT_", "OPENAI_")) and k != "DEEPSEEK_API_KEY"}
    # Empty values count as set, so a developer's .env beside agent.py cannot fill them in.
    env.update(
        AGENT_API_KEY="",
        DEEPSEEK_API_KEY="",
        AGENT_MODEL="test-model",
        AGENT_BASE_URL="",
        AGENT_SHELL_TIMEOUT="",
        AGENT_MAX_OUTPUT="",
        PYTHONUTF8="1",
    )
    env.update(extra)
    return env


@pytest.fixture
def agent(tmp_path, server):
    """Run agent.py against the scripted server; return what it printed and wrote."""
    workdir = tmp_path / "work"

    def run(*args: str, env: dict | None = None, key: str = KEY, stdin: str = "") -> Result:
        transcript = tmp_path / f"transcript-{len(list(tmp_path.glob('transcript-*')))}.jsonl"
        command = [
            sys.executable,
            str(AGENT),
            "--base-url",
            server.url,
            "--workdir",
            str(workdir),
            "--transcript",
            str(transcript),
            *args,
        ]
        done = subprocess.run(
            command,
            cwd=tmp_path,
            env=env or clean_env(AGENT_API_KEY=key),
            input=stdin,
            capture_output=True,
            text=True,
            encoding="utf-8",
            timeout=120,
        )
        return Result(done.returncode, done.stdout, done.stderr, transcript)

    run.workdir = workdir
    return run
