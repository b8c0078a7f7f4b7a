"""The fork server starts a program as the interpreter does: what a program can see of how it was
started is the same both ways (tests/forkserver.py)."""

import signal
import subprocess
import sys

import forkserver
import pytest
from conftest import clean_env, linux_only

PROBE = """
import json, os, signal, sys
streams = [
    [s.name, s.mode, s.encoding, s.errors, s.line_buffering, s.write_through, s.isatty()]
    for s in (sys.stdin, sys.stdout, sys.stderr)
]
handlers = [str(signal.getsignal(n)) for n in (2, 15, 1, 3, 13, 17, 25)]
seen = [sys.argv, sys.path[0], os.getcwd(), os.umask(0o22), __name__, __spec__, streams, handlers]
print(json.dumps(seen + [os.environ.get("PROBE"), sys.stdin.read()]))
print("to stderr", file=sys.stderr)
ending = sys.argv[1]
if ending == "exit-text":
    sys.exit("a reason")
if ending == "exit-number":
    sys.exit(300)
if ending == "raise":
    raise ValueError("boom")
if ending == "ctrl-c":
    raise KeyboardInterrupt
"""


def both(tmp_path, *args: str) -> list[subprocess.CompletedProcess]:
    """The probe run by a new interpreter, then forked by the server."""
    probe = tmp_path / "probe.py"
    probe.write_text(PROBE, encoding="utf-8")
    argv = [sys.executable, str(probe), *args]
    env = clean_env(PROBE="é")
    assert forkserver.relayed(argv, env) != argv
    return [
        subprocess.run(started, cwd=tmp_path, env=env, input="in ✓", capture_output=True, text=True)
        for started in (argv, forkserver.relayed(argv, env))
    ]


@linux_only
@pytest.mark.parametrize("ending", ["end", "exit-text", "exit-number", "raise", "ctrl-c"])
def test_a_forked_program_sees_and_ends_as_a_started_one(tmp_path, ending):
    started, forked = both(tmp_path, ending)
    assert started.returncode == forked.returncode
    assert started.stdout == forked.stdout and started.stdout.startswith("[[")
    assert started.stderr == forked.stderr
    if ending == "ctrl-c":
        assert forked.returncode == -signal.SIGINT


@linux_only
def test_a_program_run_with_other_interpreter_settings_is_started_not_forked():
    argv = [sys.executable, "agent.py"]
    assert forkserver.relayed(argv, clean_env(PYTHONHASHSEED="1")) == argv
    assert forkserver.relayed([sys.executable, "-c", "pass"], clean_env()) == [
        sys.executable,
        "-c",
        "pass",
    ]
