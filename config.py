"""Settings, read once at start: command-line flag > environment > .env > default.

Flags are applied in agent.py; this file covers the other three. python-dotenv
never overrides a variable that is already set, so real environment variables win.
"""

import os
import sys
from pathlib import Path

from dotenv import find_dotenv, load_dotenv

HERE = Path(__file__).resolve().parent

load_dotenv(find_dotenv(usecwd=True))  # .env in the current folder or one above it
load_dotenv(HERE / ".env")  # .env beside agent.py, for settings that are still missing


def _number(name: str, default: float) -> float:
    """A positive number from the environment, or stop with exit status 2."""
    raw = os.environ.get(name, "").strip()
    try:
        value = float(raw) if raw else default
    except ValueError:
        value = -1.0
    if value <= 0:
        print(f"agent: {name}={raw!r} must be a positive number", file=sys.stderr)
        sys.exit(2)
    return value


BASE_URL = os.environ.get("AGENT_BASE_URL") or "https://api.deepseek.com"
MODEL = os.environ.get("AGENT_MODEL") or "deepseek-flash"
# Never OPENAI_API_KEY: it would be sent to whatever server BASE_URL names.
API_KEY = os.environ.get("AGENT_API_KEY") or os.environ.get("DEEPSEEK_API_KEY") or ""
SHELL_TIMEOUT = _number("AGENT_SHELL_TIMEOUT", 60)  # seconds
MAX_OUTPUT = int(_number("AGENT_MAX_OUTPUT", 10_000))  # characters of a tool result
WORKDIR = HERE / "playground"
RUNS = HERE / "runs"
