"""The suite never leaves the machine (issue #46): a test that reaches past loopback, in its own
process or in one it starts, fails; a lesson's `pip install` installs nothing."""

import subprocess
import sys

from conftest import LESSON, ROOT, clean_env, run_offline

# TEST-NET-1 (RFC 5737): an address no network routes, so nothing is sent if the guard failed.
REACHING = """
import socket, subprocess, sys

def test_connects_from_this_process():
    socket.create_connection(("192.0.2.1", 80), timeout=0.01)

def test_looks_up_a_name():
    socket.getaddrinfo("pypi.org", 443)

def test_connects_from_a_child():
    fetch = "import urllib.request as u; u.urlopen('http://192.0.2.1', timeout=0.01)"
    subprocess.run([sys.executable, "-c", fetch])

def test_loopback_only():
    server = socket.create_server(("127.0.0.1", 0))
    socket.create_connection(server.getsockname()).close()
    server.close()
"""
PLUGIN = "import sys; sys.path.insert(0, {tests!r})\nfrom offline import *  # noqa\n"


def test_a_test_that_reaches_past_loopback_fails(tmp_path):
    (tmp_path / "test_reaching.py").write_text(REACHING)
    (tmp_path / "conftest.py").write_text(
        PLUGIN.format(tests=str(ROOT / "tests"))
        + "import os\ngo_offline(os.path.join(os.environ['TMP_LOG_DIR'], 'offline.log'))\n"
    )
    (tmp_path / "pytest.ini").write_text("[pytest]\n")
    env = clean_env(TMP_LOG_DIR=str(tmp_path), COLUMNS="400")  # the summary's lines whole
    for name in ("PYTHONPATH", "AGENT_TESTS_OFFLINE_LOG"):  # the inner run sets its own
        env.pop(name, None)
    ran = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:xdist", "-p", "no:cacheprovider", "-rA", "-q"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    out = ran.stdout
    assert ran.returncode == 1, out
    for name in ("connects_from_this_process", "looks_up_a_name", "connects_from_a_child"):
        assert f"ERROR test_reaching.py::test_{name} - Failed: this test reached past" in out, out
    assert "PASSED test_reaching.py::test_loopback_only" in out, out
    assert "reached past loopback: a connection to 192.0.2.1:80" in out
    assert "reached past loopback: looking up pypi.org" in out


def test_a_lessons_pip_install_is_stood_in_for_and_installs_nothing(tmp_path):
    lesson = ROOT / "examples" / "lesson-03.jsonl"
    assert LESSON.exists() and "pip install numpy" in lesson.read_text(encoding="utf-8")
    ran = run_offline(tmp_path, "--replay", str(lesson), "--yes")
    assert "the tests run offline; nothing installed" in ran.stdout + ran.stderr
    found = subprocess.run(
        [sys.executable, "-c", "import importlib.util as u; print(u.find_spec('numpy'))"],
        capture_output=True,
        text=True,
    )
    assert found.stdout.strip() == "None"
