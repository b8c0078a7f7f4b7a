"""The suite runs offline (issue #46): every Python it starts, and this one, refuses connections
past loopback (tests/network/sitecustomize.py), and a test that tried one fails. Package installers
are stood in for on PATH (tests/network/bin), so a lesson's `pip install` installs nothing."""

import os
import sys
from pathlib import Path

import pytest

NETWORK = Path(__file__).resolve().parent / "network"
sys.path.insert(0, str(NETWORK))
import sitecustomize as guard  # noqa: E402  (this folder's, not another)

assert Path(guard.__file__).parent == NETWORK, guard.__file__


def offline_env(env: dict[str, str], log: str) -> dict[str, str]:
    """env with the guard on PYTHONPATH, the log named, and the stand-ins first on PATH."""
    python_path = [str(NETWORK), *filter(None, env.get("PYTHONPATH", "").split(os.pathsep))]
    return env | {
        "PYTHONPATH": os.pathsep.join(python_path),
        "AGENT_TESTS_OFFLINE_LOG": log,
        "PATH": os.pathsep.join([str(NETWORK / "bin"), env.get("PATH", os.defpath)]),
    }


def go_offline(log: str) -> None:
    """This process and every one it starts: offline, attempts written to log."""
    os.environ.update(offline_env(dict(os.environ), log))
    guard.install()


@pytest.fixture(autouse=True)
def reaches_no_further_than_loopback(request):
    """Fails the test that tried to reach past loopback, in this process or one it started."""
    log = Path(os.environ["AGENT_TESTS_OFFLINE_LOG"])
    before = log.stat().st_size if log.exists() else 0
    yield
    if request.node.get_closest_marker("install"):
        return  # a test of the README's install: it installs from the registry by design
    tried = log.read_text(encoding="utf-8")[before:] if log.exists() else ""
    if tried:
        pytest.fail(f"this test reached past loopback: {tried.strip()}", pytrace=False)
