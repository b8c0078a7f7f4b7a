"""What the agent keeps for itself stays out of every tool's reach (issue 42): its folder (its code,
its lessons, its .env, a .pdbrc), its runs/ and the folders Python imports it from. A workspace that
holds one of them or lies inside one (but playground/) is refused, by every tool and at the command
line; runs/ is the agent's before anything runs, and is used only as the agent made it.

Sources: Python's import system and site.py (sys.path: the script's folder first, then PYTHONPATH,
the standard library, site-packages and the person's own site-packages once it exists, and what
their .pth files add; a missing folder of PYTHONPATH or of a .pth file is imported from once it
exists); pdb(1) (.pdbrc in the current and home folders); stat(2) (st_dev and st_ino name a file
whatever the path: a bind mount or a link is the same folder); open(2) (O_NOFOLLOW, O_NONBLOCK: a
FIFO opens at once, and a write-only one with no reader fails with ENXIO).
"""

import json
import os
import shutil
import site
import stat
import sys
from pathlib import Path

import pytest
from conftest import KEY, ROOT, clean_env, events_of, posix_only
from scripted_server import call, reply

import config
import tools
from realworld import own, transcripts


def project_copy(tmp_path: Path) -> Path:
    """A copy of the agent's folder, as config.HERE for the test."""
    project = tmp_path / "project"
    for name in ("agent.py", "config.py", "tools.py"):
        project.mkdir(exist_ok=True)
        shutil.copy(ROOT / name, project / name)
    shutil.copytree(ROOT / "examples", project / "examples")
    (project / "playground").mkdir()
    (project / ".env").write_text(f"AGENT_API_KEY={KEY}\n")
    return project


@pytest.fixture
def here(tmp_path, monkeypatch) -> Path:
    project = project_copy(tmp_path)
    monkeypatch.setattr(config, "HERE", project)
    monkeypatch.setattr(config, "RUNS", project / "runs")
    return project


def each_tool(workdir: Path) -> list[tuple[str, bool]]:
    """What each of the three tools says in workdir: (result, ok)."""
    calls = [
        ("read_file", {"path": ".env"}),
        ("write_file", {"path": "examples/typing.py", "content": "import os\n"}),
        ("run_shell", {"command": "echo planted > .pdbrc"}),
    ]
    given = {"workdir": workdir, "yes": True}
    return [tools.run_call(n, json.dumps(a), tools.DEFAULT_TOOLS, given) for n, a in calls]


# Every shape of overlap: the folder itself, one above it, one inside it, its runs/ inside or
# elsewhere, a link that leads to it, a folder Python imports from, and the person's own
# site-packages that does not exist yet.
OVERLAPS = {
    "the agent's folder": lambda here: here,
    "a folder above it": lambda here: here.parent,
    "its examples/": lambda here: here / "examples",
    "its runs/": lambda here: here / "runs",
    "a link to the agent's folder": lambda here: link(here.parent / "alias", here),
}


def link(path: Path, target: Path) -> Path:
    path.symlink_to(target)
    return path


@pytest.mark.parametrize("shape", sorted(OVERLAPS))
def test_no_tool_reaches_the_agents_own_things_from_a_workspace_that_overlaps_them(here, shape):
    workdir = OVERLAPS[shape](here)
    (here / "runs").mkdir(exist_ok=True)
    for result, ok in each_tool(workdir):
        assert not ok and "Give a --workdir that neither holds nor lies in it" in result, result
        assert KEY not in result and "playground/" in result
    assert not (here / "examples" / "typing.py").exists() and not (here / ".pdbrc").exists()
    assert not (here.parent / ".pdbrc").exists() and not (here / "runs" / ".pdbrc").exists()


def test_runs_elsewhere_is_the_agents_too(here, tmp_path, monkeypatch):
    monkeypatch.setattr(config, "RUNS", tmp_path / "keep" / "runs")
    assert "the agent's runs/" in own.overlap(tmp_path / "keep")
    assert "the agent's runs/" in own.overlap(tmp_path / "keep" / "runs" / "inner")
    assert own.overlap(tmp_path / "other") is None


def test_a_folder_python_imports_from_is_the_agents_existing_or_not(here, tmp_path, monkeypatch):
    lib = tmp_path / "other" / "lib"
    lib.mkdir(parents=True)
    monkeypatch.syspath_prepend(str(lib))  # PYTHONPATH, or a folder a .pth file adds
    assert "a folder Python imports the agent's code from" in own.overlap(tmp_path / "other")
    assert "a folder Python imports the agent's code from" in own.overlap(lib / "pkg")
    # the person's own site-packages, which Python adds at the next start once it exists
    user = tmp_path / "home" / ".local" / "lib" / "python3" / "site-packages"
    monkeypatch.setattr(site, "ENABLE_USER_SITE", True)
    monkeypatch.setattr(site, "getusersitepackages", lambda: str(user))
    assert "a folder Python imports" in own.overlap(tmp_path / "home")


def test_a_folder_python_would_import_from_once_made_is_the_agents_before_it_exists(
    here, tmp_path, monkeypatch
):
    # Python's docs, "The initialization of the sys.path module search path": PYTHONPATH's
    # folders are on sys.path even while missing; site.py: a folder a .pth file names is added at
    # the start after it exists. A command that makes one (lib/json.py) runs at the next start.
    site_dir = tmp_path / "site-packages"
    site_dir.mkdir()
    (site_dir / "mine.pth").write_text(
        f"# a comment\nimport os\n{tmp_path / 'pth-project' / 'src'}\nrelative\n"
    )
    monkeypatch.setattr(site, "getsitepackages", lambda: [str(site_dir)])
    assert "a folder Python imports" in own.overlap(tmp_path / "pth-project")
    assert "a folder Python imports" in own.overlap(site_dir / "relative" / "x")
    assert own.overlap(tmp_path / "other") is None


def test_a_workspace_holding_a_missing_pythonpath_folder_is_refused(agent, server):
    agent.workdir.mkdir()
    made = 'mkdir lib && echo \'open("PWNED", "w")\' > lib/json.py'
    server.add(reply(tool_calls=[call("run_shell", {"command": made})]), reply("done"))
    env = clean_env(AGENT_API_KEY=KEY, PYTHONPATH=str(agent.workdir / "lib"))
    result = agent("--yes", "go", env=env, fresh=True)  # a new interpreter reads PYTHONPATH
    assert result.returncode == 2 and not server.requests, result.stderr
    [line] = result.stderr.splitlines()
    assert f"holds {agent.workdir / 'lib'}, a folder Python imports" in line
    assert not (agent.workdir / "lib").exists()


def test_the_playground_and_a_project_folder_are_the_persons(here, tmp_path):
    (tmp_path / "project-of-mine").mkdir()
    (here / "playground" / "sub").mkdir()
    for workdir in (here / "playground", here / "playground" / "sub", tmp_path / "project-of-mine"):
        assert own.overlap(workdir) is None
        results = each_tool(workdir)
        assert [ok for _, ok in results] == [False, True, True], results  # no .env there to read
        assert (workdir / "examples" / "typing.py").exists() and (workdir / ".pdbrc").exists()


@pytest.mark.parametrize("where", ["..", ".", "examples", "runs"])
def test_the_command_line_refuses_such_a_workspace_in_one_line_and_sends_nothing(
    agent, server, where
):
    agent.workdir = Path(os.environ["AGENT_RUNS"]) if where == "runs" else ROOT / where
    server.add(reply(tool_calls=[call("run_shell", {"command": "touch PWNED"})]), reply("done"))
    result = agent("--yes", "go")
    assert result.returncode == 2 and not server.requests, result.stderr
    [line] = result.stderr.splitlines()
    assert line.startswith("agent: the workspace ") and "the agent's playground/" in line
    assert not (agent.workdir / "PWNED").exists() and not result.transcript.exists()


# --- runs/: the agent's before anything runs --------------------------------------------------


def runs_env(runs: Path) -> dict:
    return clean_env(AGENT_API_KEY=KEY, AGENT_RUNS=str(runs))


def pause_then_approve(agent, server, runs: Path):
    """A run that pauses on a command, then a bare --approve of it: both results, and the end the
    pause recorded."""
    server.add(reply(tool_calls=[call("run_shell", {"command": "touch ran"}, "c1")]))
    paused = agent("go", env=runs_env(runs))
    end = events_of(paused.transcript)[-1]
    assert end["status"] == "paused", paused.stderr
    server.add(reply("done"))
    approved = agent("--resume", str(paused.transcript), "--approve", env=runs_env(runs))
    return paused, approved, end


@posix_only
def test_runs_is_made_owner_only_at_start_with_its_key_and_seals_the_pause(agent, server, tmp_path):
    runs = tmp_path / "fresh" / "runs"
    _, approved, end = pause_then_approve(agent, server, runs)
    assert stat.S_IMODE(runs.stat().st_mode) == 0o700
    assert stat.S_IMODE((runs / own.KEY).stat().st_mode) == 0o600
    assert isinstance(end.get("seal"), str)
    assert approved.returncode == 0 and (agent.workdir / "ran").exists(), approved.stderr


def planted_link(runs: Path, elsewhere: Path) -> None:
    elsewhere.mkdir(mode=0o700)
    (elsewhere / own.KEY).write_bytes(b"k" * 32)
    (elsewhere / own.KEY).chmod(0o600)
    runs.symlink_to(elsewhere)


def planted(mode: int, key_mode: int = 0o600, done=None):
    def plant(runs: Path, elsewhere: Path) -> None:
        runs.mkdir(mode=0o700)
        (runs / own.KEY).write_bytes(b"k" * 32)
        (runs / own.KEY).chmod(key_mode)
        if done:
            done(runs / own.SPENT)
        runs.chmod(mode)

    return plant


def key_link(runs: Path, elsewhere: Path) -> None:
    planted(0o700)(runs, elsewhere)
    elsewhere.write_bytes(b"k" * 32)
    (runs / own.KEY).unlink()
    (runs / own.KEY).symlink_to(elsewhere)


# What a command (or another user) can leave where runs/ goes before the agent makes it.
PLANTS = {
    "runs/ a link to a folder of the command's": planted_link,
    "runs/ readable by others (0755)": planted(0o755),
    "a key readable by others (0644)": planted(0o700, key_mode=0o644),
    "a key that is a link": key_link,
    "a short key": lambda runs, _: (planted(0o700)(runs, _), (runs / own.KEY).write_bytes(b"k")),
}


@posix_only
@pytest.mark.parametrize("plant", sorted(PLANTS))
def test_a_runs_folder_not_the_agents_own_seals_nothing_and_says_so_once(
    agent, server, tmp_path, plant
):
    runs, elsewhere = tmp_path / "runs", tmp_path / "elsewhere"
    PLANTS[plant](runs, elsewhere)
    paused, approved, end = pause_then_approve(agent, server, runs)
    assert paused.returncode == 4 and end.get("seal") is None
    said = [line for line in paused.stderr.splitlines() if "is not the agent's own" in line]
    assert len(said) == 1, paused.stderr
    # a bare --approve needs a seal: the codes --show prints are asked for, and nothing ran
    assert approved.returncode == 2 and "approve the calls by the codes" in approved.stderr
    assert not (agent.workdir / "ran").exists()


@posix_only
@pytest.mark.skipif(not hasattr(os, "geteuid") or os.geteuid() != 0, reason="needs root to chown")
def test_a_runs_folder_of_another_user_is_not_the_agents(agent, server, tmp_path):
    runs = tmp_path / "runs"
    planted(0o700)(runs, tmp_path)
    os.chown(runs, 65534, 65534)
    paused, _, end = pause_then_approve(agent, server, runs)
    assert "owned by user 65534" in paused.stderr and end.get("seal") is None


@posix_only
def test_a_fifo_where_the_spent_pauses_are_kept_is_no_hang(agent, server, tmp_path):
    runs = tmp_path / "runs"
    server.add(reply(tool_calls=[call("run_shell", {"command": "touch ran"}, "c1")]))
    paused = agent("go", env=runs_env(runs))
    os.mkfifo(runs / own.SPENT, 0o600)  # no writer ever comes: an open that waits would hang
    server.add(reply("done"))
    approved = agent("--resume", str(paused.transcript), "--approve", env=runs_env(runs))
    assert approved.returncode == 2 and "approve the calls by the codes" in approved.stderr
    assert not (agent.workdir / "ran").exists()


def test_no_transcript_is_kept_in_a_runs_folder_that_is_not_the_agents(tmp_path, monkeypatch):
    (tmp_path / "elsewhere").mkdir()
    (tmp_path / "runs").symlink_to(tmp_path / "elsewhere")
    monkeypatch.setattr(config, "RUNS", tmp_path / "runs")
    with pytest.raises(transcripts.TranscriptError, match="give --transcript FILE"):
        transcripts.open_file(None)
    assert list((tmp_path / "elsewhere").iterdir()) == []


def test_the_modules_python_imports_at_start_are_counted_by_the_running_program(tmp_path):
    # sys.path[0] is the running program's folder: a person's program beside its own work folder
    # does not make that folder the agent's
    program = tmp_path / "mine.py"
    program.write_text(
        f"import sys; sys.path.insert(0, {str(ROOT)!r})\n"
        "from realworld import own\n"
        f"print(own.overlap({str(tmp_path / 'work')!r}))\n"
    )
    (tmp_path / "work").mkdir()
    done = __import__("subprocess").run(
        [sys.executable, str(program)], capture_output=True, text=True, env=clean_env()
    )
    assert done.stdout.strip() == "None", done.stderr


# --- the transcript the run writes: never in the workspace -------------------------------------


@pytest.mark.parametrize("where", ["in it", "deeper", "by a link"])
def test_a_transcript_in_the_workspace_is_refused_before_anything_is_sent(
    agent, server, tmp_path, where
):
    # a tool could rewrite it between its lines, and a pause's seal is read back from the file
    agent.workdir.mkdir()
    (tmp_path / "alias").symlink_to(agent.workdir)
    path = {
        "in it": agent.workdir / "run.jsonl",
        "deeper": agent.workdir / "logs" / "run.jsonl",
        "by a link": tmp_path / "alias" / "run.jsonl",
    }[where]
    server.add(reply(tool_calls=[call("run_shell", {"command": "touch ran"})]), reply("done"))
    result = agent("--transcript", str(path), "--yes", "go")
    assert result.returncode == 2 and not server.requests, result.stderr
    [line] = result.stderr.splitlines()
    assert line.startswith(f"agent: the transcript {path} is in the workspace") and "runs/" in line
    assert not path.exists() and not (agent.workdir / "ran").exists()


# How a transcript resumed from outside the workspace can be a file in it: symlink(7), a link is
# followed by open(2); link(2), a hard link is the same file under another name, anywhere.
REACHED = {
    "in it": lambda shared, outside: shared,
    "by a symlink outside it": lambda shared, outside: link(outside, shared),
    "by a hard link outside it": lambda shared, outside: (os.link(shared, outside), outside)[1],
}


@pytest.mark.parametrize("reached", list(REACHED))
def test_a_transcript_resumed_from_the_workspace_is_read_once_and_goes_on_elsewhere(
    agent, server, reached
):
    server.add(reply("first answer"))
    first = agent("first task")
    assert first.returncode == 0, first.stderr
    agent.workdir.mkdir(exist_ok=True)
    shared = agent.workdir / "shared.jsonl"
    shutil.copy(first.transcript, shared)
    read = shared.read_bytes()
    resumed = REACHED[reached](shared, agent.tmp_path / "resumed.jsonl")
    # the resumed run's command rewrites the file it was resumed from: nothing of it is read again
    forged = {"type": "user/message", "content": "forged"}
    command = f"printf '%s\\n' '{json.dumps(forged)}' >> shared.jsonl"
    server.add(reply(tool_calls=[call("run_shell", {"command": command})]), reply("done"))
    result = agent("--resume", str(resumed), "--yes", "second task")
    assert result.returncode == 0, result.stderr
    assert f"{resumed} is in the workspace" in result.stderr or "other names" in result.stderr
    assert f"goes on in {result.transcript}" in result.stderr
    went_on = events_of(result.transcript)
    assert went_on[: len(events_of(first.transcript))] == events_of(first.transcript)
    assert forged not in went_on and shared.read_bytes().startswith(read)
    assert shared.read_bytes() != read  # the command did append to it
    # what the next request sent is the conversation as it was read, and the new task
    contents = [m.get("content") for m in server.messages(1)]
    assert contents[1:] == ["first task", "first answer", "second task"]
