"""--sandbox: every run_shell command inside the real bubblewrap, tried as a model would,
through the scripted server.

The tests skip, saying why, where bubblewrap cannot make a sandbox; SANDBOX_REQUIRED=1 (as .ci/run
sets it) turns that skip into a failure.
"""

import os
import shutil
import subprocess
import sys
import tempfile
import uuid
from pathlib import Path

import pytest
from conftest import KEY, ROOT, clean_env, posix_only
from scripted_server import call, reply

import config
import tools
from realworld import sandbox
from tools import ToolError

PROBLEM = sandbox.problem() if sys.platform.startswith("linux") else "the sandbox tests need Linux"
if PROBLEM and os.environ.get("SANDBOX_REQUIRED") == "1":
    raise RuntimeError(f"SANDBOX_REQUIRED=1, but: {PROBLEM}")
needs_sandbox = pytest.mark.skipif(bool(PROBLEM), reason=f"no working sandbox here: {PROBLEM}")


@pytest.fixture
def sandbox(monkeypatch):
    monkeypatch.setattr(config, "SANDBOX", True)  # what --sandbox sets, once, at start


def running(marker: str) -> list[int]:
    """The processes whose command line holds marker."""
    found = []
    for entry in Path("/proc").iterdir():
        try:
            if entry.name.isdigit() and marker.encode() in (entry / "cmdline").read_bytes():
                found.append(int(entry.name))
        except OSError:
            continue
    return found


@needs_sandbox
def test_a_write_outside_the_workspace_fails_leaves_nothing_and_says_why(loop, server, sandbox):
    # Not $HOME, which may lie under /tmp (the sandbox has a /tmp of its own): the environment the
    # agent runs from is outside the workspace wherever it is, and read-only in the sandbox.
    outside = Path(sys.prefix) / f"sandbox-probe-{uuid.uuid4().hex}"
    server.add(
        reply(tool_calls=[call("run_shell", {"command": f"echo x > {outside}"})]), reply("ok")
    )
    try:
        loop("go", yes=True)
        assert not outside.exists()
    finally:
        outside.unlink(missing_ok=True)
    result = server.messages(1)[-1]["content"]
    assert (
        "Read-only file system" in result
        and "outside the workspace the file system is read-only" in result
    )


@needs_sandbox
def test_a_write_inside_the_workspace_works(loop, server, sandbox):
    server.add(
        reply(tool_calls=[call("run_shell", {"command": "echo made > made.txt && cat made.txt"})]),
        reply("ok"),
    )
    loop("go", yes=True)
    assert (loop.workdir / "made.txt").read_text() == "made\n" and server.messages(1)[-1][
        "content"
    ] == "made\n"


@needs_sandbox
def test_a_connection_to_a_loopback_server_fails_and_says_there_is_no_network(
    loop, server, sandbox
):
    fetch = (
        f'{sys.executable} -c "import urllib.request; '
        f"urllib.request.urlopen('{server.url}/models', timeout=5)\""
    )
    server.add(reply(tool_calls=[call("run_shell", {"command": fetch})]), reply("ok"))
    loop("go", yes=True)
    assert len(server.requests) == 2  # the model's two requests, and nothing from the command
    assert "there is no network in the sandbox" in server.messages(1)[-1]["content"]


@needs_sandbox
def test_the_network_is_kept_when_the_person_allows_it(sandbox, monkeypatch, tmp_path, server):
    monkeypatch.setattr(config, "SANDBOX_NETWORK", True)
    server.add(reply("pong"))
    fetch = (
        f'{sys.executable} -c "import urllib.request as u; '
        f"u.urlopen(u.Request('{server.url}/chat/completions', "
    )
    fetch += "data=b'{}', headers={'content-type': 'application/json'}))\""
    tools.run_shell(fetch, workdir=tmp_path)
    assert len(server.requests) == 1


@needs_sandbox
def test_the_agents_dotenv_and_transcripts_are_unreadable_inside(sandbox, monkeypatch, tmp_path):
    # Outside /tmp, as the project usually is: the sandbox's /tmp is its own anyway.
    project = Path(tempfile.mkdtemp(dir="/var/tmp" if os.path.isdir("/var/tmp") else None))
    (project / "runs").mkdir()
    (project / ".env").write_text(f"AGENT_API_KEY={KEY}\n")
    (project / "runs" / "t.jsonl").write_text('{"secret": "transcript"}\n')
    monkeypatch.setattr(config, "HERE", project)
    monkeypatch.setattr(config, "RUNS", project / "runs")
    (tmp_path / "work").mkdir()
    try:
        output = tools.run_shell(
            f"cat {project}/.env; ls {project}/runs; cat {project}/runs/*", workdir=tmp_path
        )
    finally:
        shutil.rmtree(project)
    assert KEY not in output and '"secret"' not in output and "t.jsonl" not in output


# Every copy of the .env beside it holds keys too: the one in use and others (a commented-out
# one, another provider's); vim(1) writes "name~" and ".name.swp", nano(1) "name.save", and
# symlink(7): a .env that is a link is read at its target by that name too.
COPIES = {
    ".env.local": lambda project, key: (project / ".env.local").write_text(key),
    "an editor's .env~": lambda project, key: (project / ".env~").write_text(key),
    ".env.save": lambda project, key: (project / ".env.save").write_text(key),
    ".env a link to a file elsewhere": lambda project, key: (
        (project.parent / f"{project.name}.secret").write_text(key),
        (project / ".env").symlink_to(project.parent / f"{project.name}.secret"),
    ),
}


@needs_sandbox
@pytest.mark.parametrize("copy", list(COPIES))
def test_every_copy_of_the_agents_dotenv_is_unreadable_inside(sandbox, monkeypatch, tmp_path, copy):
    project = Path(tempfile.mkdtemp(dir="/var/tmp" if os.path.isdir("/var/tmp") else None))
    secret = project.parent / f"{project.name}.secret"
    COPIES[copy](project, "# OLD_KEY=sk-old-commented-out-000000\n")
    monkeypatch.setattr(config, "HERE", project)
    monkeypatch.setattr(config, "RUNS", project / "runs")
    try:
        output = tools.run_shell(f"cat {project}/.env* {secret}; echo ran", workdir=tmp_path)
    finally:
        shutil.rmtree(project)
        secret.unlink(missing_ok=True)
    assert "sk-old-commented-out" not in output and output.endswith("ran\n"), output


@needs_sandbox
def test_the_command_runs_without_the_key_in_its_environment(sandbox, tmp_path, monkeypatch):
    monkeypatch.setenv("AGENT_API_KEY", KEY)
    assert KEY not in tools.run_shell("env", workdir=tmp_path)


@needs_sandbox
def test_a_background_process_dies_with_the_command(sandbox, tmp_path):
    # sleep's own seconds, unique
    marker = f"{1000 + uuid.uuid4().int % 1000}.{uuid.uuid4().int % 10**6}"
    output = tools.run_shell(
        f"(sleep {marker}; touch late) > /dev/null 2>&1 & echo started", workdir=tmp_path
    )
    assert output == "started\n" and running(f"sleep\0{marker}") == []


@needs_sandbox
def test_a_timeout_still_kills_the_command(sandbox, tmp_path):
    marker = f"{1000 + uuid.uuid4().int % 1000}.{uuid.uuid4().int % 10**6}"
    with pytest.raises(ToolError, match="timed out after 1 seconds"):
        tools.run_shell(f"echo begun; sleep {marker}", workdir=tmp_path, timeout=1)
    assert running(f"sleep\0{marker}") == []


@posix_only
@needs_sandbox
def test_the_person_sees_the_mode_at_start_and_at_the_prompt(agent, server):
    server.add(reply(tool_calls=[call("run_shell", {"command": "echo hi"})]), reply("ok"))
    result = agent("go", "--sandbox", terminal="y\n")
    assert "commands run in a sandbox with no network" in result.stderr
    assert (
        "Run this command in the sandbox (writes only in the workspace, no network)? [y/N]"
        in result.stderr
    )


def fake_path(tmp_path, bwrap: str | None) -> str:
    """A PATH with sh and, if given, a bwrap script."""
    folder = tmp_path / "bin"
    folder.mkdir()
    os.symlink(shutil.which("sh"), folder / "sh")
    if bwrap:
        (folder / "bwrap").write_text(f"#!/bin/sh\n{bwrap}\n")
        (folder / "bwrap").chmod(0o755)
    return str(folder)


@pytest.mark.skipif(
    not sys.platform.startswith("linux"), reason="the bubblewrap messages are Linux's"
)
@pytest.mark.parametrize(
    ("bwrap", "said"),
    [
        (None, "needs bubblewrap, which is not installed (or only inside the workspace"),
        (
            "echo 'bwrap: No permissions to create a new namespace' >&2; exit 1",
            "user namespaces may be disabled",
        ),
    ],
    ids=["bwrap-missing", "no-user-namespaces"],
)
def test_without_a_working_sandbox_the_agent_refuses_to_start_in_one_line(
    server, tmp_path, bwrap, said
):
    env = clean_env(AGENT_API_KEY=KEY, PATH=fake_path(tmp_path, bwrap))
    done = subprocess.run(
        [sys.executable, str(ROOT / "agent.py"), "--sandbox", "--base-url", server.url, "go"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert (done.returncode, done.stderr.count("\n")) == (2, 1) and said in done.stderr
    assert server.requests == []
