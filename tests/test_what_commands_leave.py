"""Nothing a sandboxed command leaves turns the agent against the person (issue 32): the cleanup
after it never deletes, never follows a path or a link the command wrote, reads what the command
could have made only with bounds, and the agent's own code is whatever Python would import at its
next start, whatever its name. On the real bubblewrap.

Sources: git-config(1) (core.hooksPath "relative paths are taken as relative to the directory where
the hooks are run"; core.fsmonitor), gitrepository-layout(5) (a .git file's "gitdir: <path>"),
git's setup.c is_git_directory(); open(2) (O_NOFOLLOW, O_NONBLOCK: a FIFO opens at once, no
writer needed), fifo(7); rename(2) (a rename within one file system; EBUSY for a mount point);
Python's import system (the PathFinder: sys.path[0] first, a regular package before a namespace
portion, __pycache__/NAME.cpython-XY.pyc, sourceless .pyc, extension suffixes) and site(7)/site.py
(.pth files in site-packages run their import lines).
"""

import base64
import json
import os
import shlex
import shutil
import subprocess
import sys
import threading
from pathlib import Path

import pytest
from conftest import ROOT, clean_env

import config
import tools
from realworld import sandbox as sandboxing
from realworld.protected import is_git_dir, read_bounded

PROBLEM = sandboxing.problem() if sys.platform.startswith("linux") else "Linux only"
if PROBLEM and os.environ.get("SANDBOX_REQUIRED") == "1":
    raise RuntimeError(f"SANDBOX_REQUIRED=1, but: {PROBLEM}")
sandboxed_only = pytest.mark.skipif(bool(PROBLEM), reason=f"no working sandbox here: {PROBLEM}")


def run(command: str, workdir: Path) -> str:
    """What the model reads back from one sandboxed run_shell, finished within a minute: a hang
    fails the test instead of stalling the suite (a bound, not a measure of time)."""
    done = []
    worker = threading.Thread(
        target=lambda: done.append(
            tools.run_call(
                "run_shell",
                json.dumps({"command": command}),
                tools.DEFAULT_TOOLS,
                {"workdir": workdir, "yes": True},
            )[0]
        ),
        daemon=True,
    )
    worker.start()
    worker.join(60)
    assert done, "the agent did not come back from the command"
    return done[0]


def files(folder: Path) -> dict:
    """Every file and link under folder (but what was moved aside), with its bytes or target."""
    found = {}
    for path in sorted(folder.rglob("*")):
        if ".agent-moved" in path.relative_to(folder).parts:
            continue
        if path.is_symlink():
            found[path] = ("link", os.readlink(path))
        elif path.is_file():
            found[path] = path.read_bytes()
    return found


def moved(folder: Path) -> Path:
    """The one folder the sandbox moved things into."""
    (stamp,) = (folder / ".agent-moved").iterdir()
    return stamp


def person_repository(folder: Path) -> None:
    """The person's own work: a git repository with a commit, a .env and some files."""
    folder.mkdir(parents=True, exist_ok=True)
    git = ["git", "-C", str(folder), "-c", "user.name=p", "-c", "user.email=p@x"]
    subprocess.run(["git", "init", "-q", str(folder)], check=True)
    (folder / "notes.txt").write_text("mine\n")
    (folder / "data").mkdir()
    (folder / "data" / "table.csv").write_text("a,b\n1,2\n")
    subprocess.run([*git, "add", "."], check=True)
    subprocess.run([*git, "commit", "-qm", "mine"], check=True)
    (folder / ".env").write_text("PORT=1\n")


@pytest.fixture(autouse=True)
def sandbox_on(monkeypatch):
    monkeypatch.setattr(config, "SANDBOX", True)


# --- A path the command wrote is never followed, nothing is deleted ------------------------------
# core.hooksPath is the command's word about a folder: "..", ".", the repository's own objects, the
# workspace by its absolute path, a folder outside it. Each used to be taken as "what the command
# made", and removed with everything in it.

HOOKS_PATHS = ["..", ".", "../.git/objects", "ROOT", "../..", "../data", "/"]


@sandboxed_only
@pytest.mark.parametrize("hooks", HOOKS_PATHS)
def test_a_planted_hooks_path_never_costs_the_person_a_file(tmp_path, hooks):
    workspace = tmp_path / "work"
    person_repository(workspace)
    before = files(workspace)
    value = str(workspace) if hooks == "ROOT" else hooks
    plant = f"mkdir -p x/.git && printf '[core]\\n\\thooksPath = {value}\\n' > x/.git/config"
    result = run(plant, workspace)
    after = files(workspace)
    assert {p: v for p, v in after.items() if p.parts[len(workspace.parts)] != "x"} == before
    log = subprocess.run(["git", "-C", str(workspace), "log", "--oneline"], capture_output=True)
    assert log.returncode == 0 and b"mine" in log.stdout
    assert "the sandbox moved x/.git, which this command made" in result
    assert (moved(workspace) / "x" / ".git" / "config").read_text().strip().endswith(value)


@sandboxed_only
@pytest.mark.parametrize("hooks", [".", "..", "../.git"])
def test_a_hooks_path_the_person_had_keeps_the_workspace_writable(tmp_path, hooks):
    # read before the command, to keep hooks read-only: never the workspace or the repository
    workspace = tmp_path / "work"
    person_repository(workspace)
    subprocess.run(["git", "-C", str(workspace), "config", "core.hooksPath", hooks], check=True)
    assert run("echo more >> notes.txt && cat notes.txt", workspace) == "mine\nmore\n"


# --- What the command could have made is read with bounds ----------------------------------------
# A repository's config found before a command is read to find its hooks folder. A FIFO there
# would block an open() for good, /dev/zero or a huge file would fill memory, a link could lead
# anywhere.


def plant_config(config_file: Path, kind: str, tmp_path: Path) -> None:
    config_file.parent.mkdir(parents=True, exist_ok=True)
    if kind == "fifo":
        os.mkfifo(config_file)
    elif kind == "dev-zero":
        config_file.symlink_to("/dev/zero")
    elif kind == "link-outside":
        (tmp_path / "secret").write_text("[core]\n\thooksPath = /\n")
        config_file.symlink_to(tmp_path / "secret")
    elif kind == "huge":
        with open(config_file, "wb") as f:
            f.truncate(2**34)  # 16 GiB, sparse
    elif kind == "socket":
        import socket

        server = socket.socket(socket.AF_UNIX)
        server.bind(str(config_file))


CONFIG_KINDS = ["fifo", "dev-zero", "link-outside", "huge", "socket"]


@pytest.mark.parametrize("kind", CONFIG_KINDS)
def test_a_config_is_read_with_bounds_whatever_it_is(tmp_path, kind):
    plant_config(tmp_path / "config", kind, tmp_path)
    text = read_bounded(tmp_path / "config")
    assert text == "" if kind != "huge" else len(text) <= 64 * 1024


@sandboxed_only
@pytest.mark.parametrize("kind", CONFIG_KINDS)
@pytest.mark.parametrize("when", ["left before", "made by the command"])
def test_a_config_of_any_kind_neither_hangs_nor_fills_memory(tmp_path, kind, when):
    workspace = tmp_path / "work"
    workspace.mkdir()
    if when == "left before":
        (workspace / "x" / ".git").mkdir(parents=True)
        plant_config(workspace / "x" / ".git" / "config", kind, tmp_path)
        result = run("echo ran", workspace)
        assert result.startswith("ran\n")
        assert (tmp_path / "secret").exists() or kind != "link-outside"
    else:
        command = {
            "fifo": "mkfifo x/.git/config",
            "dev-zero": "ln -s /dev/zero x/.git/config",
            "link-outside": "ln -s /etc/passwd x/.git/config",
            "huge": "truncate -s 16G x/.git/config",
            "socket": "mknod x/.git/config p",
        }[kind]
        result = run(f"git init -q x && rm x/.git/config && {command} && echo ran", workspace)
        assert result.startswith("ran\n") and "the sandbox moved x/.git" in result, result


# --- Planted in the person's place: moved aside, said, nothing lost -------------------------------
# Each makes something git obeys out of what the person had, or where the person runs git.

PLANTS = {
    "ordinary folder made a bare .git": (
        "mv data .git && git init -q --bare .git && git config -f .git/config core.fsmonitor "
        "'touch $PWD/PWNED'"
    ),
    "folder made a bare repository in place": (
        "git init -q --bare data && git config -f data/config core.fsmonitor 'touch PWNED'"
    ),
    ".git a link to the person's folder": "ln -s data .git",
    ".git a gitdir: file pointing at a planted repository": (
        "git init -q --bare /tmp/r && cp -r /tmp/r planted && echo 'gitdir: planted' > .git"
    ),
    ".env a link to the agent's": f"ln -s {config.HERE / '.env'} .env",
    ".envrc made in a folder the person had": "echo 'touch PWNED' > data/.envrc",
    "a repository whose folder then lost its write right": (
        "git init -q sub && git -C sub config core.fsmonitor 'touch PWNED' && chmod 555 sub"
    ),
}


@sandboxed_only
@pytest.mark.parametrize("plant", sorted(PLANTS))
def test_what_a_command_plants_is_moved_aside_and_nothing_the_person_had_is_lost(tmp_path, plant):
    workspace = tmp_path / "work"
    workspace.mkdir()
    (workspace / "data").mkdir()
    (workspace / "data" / "table.csv").write_text("a,b\n")
    (workspace / "keep.txt").write_text("keep\n")
    result = run(PLANTS[plant], workspace)
    assert "the sandbox moved " in result and "into .agent-moved/" in result, result
    left = [p for p in workspace.rglob("*") if ".agent-moved" not in p.parts]
    assert not any(p.name in (".git", ".env", ".envrc") for p in left), left
    folders = [workspace, *(p for p in left if p.is_dir() and not p.is_symlink())]
    assert not any(is_git_dir({q.name.lower() for q in f.iterdir()}) for f in folders)
    # the person's own files: where they were, or in what was moved aside, byte for byte
    assert (workspace / "keep.txt").read_text() == "keep\n"
    tables = [p for p in tmp_path.rglob("table.csv") if p.is_file()]
    assert tables and tables[0].read_text() == "a,b\n"
    # and the person's git in the workspace runs nothing the command planted
    subprocess.run(["git", "-C", str(workspace), "status"], capture_output=True)
    assert not (workspace / "PWNED").exists() and not (workspace / "data" / "PWNED").exists()


@sandboxed_only
def test_a_link_planted_where_things_are_moved_does_not_lead_the_move_out(tmp_path):
    workspace = tmp_path / "work"
    workspace.mkdir()
    outside = tmp_path / "outside"
    outside.mkdir()
    result = run(f"ln -s {outside} .agent-moved && git init -q sub", workspace)
    assert not any(outside.iterdir())  # nothing was moved through the link
    assert not (workspace / "sub" / ".git").exists()
    assert "into .agent-moved-" in result


@sandboxed_only
def test_the_persons_own_repository_moved_by_the_command_stays_where_it_went(tmp_path):
    workspace = tmp_path / "work"
    person_repository(workspace / "proj")
    result = run("mv proj proj2", workspace)
    assert (workspace / "proj2" / ".git").is_dir() and not (workspace / ".agent-moved").exists()
    assert "this command moved configuration to proj2/.env, proj2/.git" in result


# --- The agent's own code: whatever Python would import at its next start -------------------------
# The workspace holds the agent (--workdir .). Each plant ran unsandboxed at the next start.

CODE_PLANTS = {
    "a typing.py beside agent.py": "typing.py",
    "a forged config bytecode": "__pycache__/config.cpython-{v}.pyc",
    "a package that shadows python-dotenv": "dotenv/__init__.py",
    "an __init__ that makes a folder a package": "examples/__init__.py",
    "a sourceless json.pyc": "json.pyc",
    "a line on top of a module the agent has": "realworld/replay.py",
}


def project_copy(tmp_path: Path) -> Path:
    project = tmp_path / "project"
    project.mkdir()
    for name in ("agent.py", "config.py", "tools.py"):
        shutil.copy(ROOT / name, project / name)
    shutil.copytree(ROOT / "realworld", project / "realworld")
    (project / "examples").mkdir()
    return project


def agent_help(project: Path) -> subprocess.CompletedProcess:
    """python agent.py --help in project, by a new interpreter: the next start."""
    command = [sys.executable, str(project / "agent.py"), "--help"]
    return subprocess.run(command, env=clean_env(), capture_output=True, text=True, timeout=60)


def planting(name: str, marker: Path) -> str:
    """A shell command that writes name (a module, or its bytecode) so that importing it touches
    marker; a module the agent has gets the line on its top."""
    version = f"{sys.version_info.major}{sys.version_info.minor}"
    target = name.format(v=version)
    code = f"import pathlib; pathlib.Path({str(marker)!r}).touch()\n"
    program = (
        "import base64, os, pathlib, py_compile, sys\n"
        "target, code = pathlib.Path(sys.argv[1]), base64.b64decode(sys.argv[2]).decode()\n"
        "target.parent.mkdir(parents=True, exist_ok=True)\n"
        "if target.suffix == '.pyc':\n"
        "    pathlib.Path('/tmp/m.py').write_text(code)\n"
        "    py_compile.compile('/tmp/m.py', cfile=str(target), doraise=True)\n"
        "else:\n"
        "    old = target.read_text() if target.exists() else ''\n"
        "    target.write_text(code + old)\n"
    )
    encoded = base64.b64encode(code.encode()).decode()
    return f"{sys.executable} -c {shlex.quote(program)} {target} {encoded}"


@sandboxed_only
@pytest.mark.parametrize("plant", sorted(CODE_PLANTS))
def test_code_a_command_plants_beside_the_agent_never_runs_at_its_next_start(tmp_path, plant):
    project = project_copy(tmp_path)
    marker = tmp_path / "PWNED"
    script = (
        "import sys, pathlib; sys.path.insert(0, sys.argv[1]); import config; "
        "config.SANDBOX = True\nimport tools\n"
        "print(tools.run_shell(sys.argv[2], workdir=pathlib.Path(sys.argv[1])))"
    )
    done = subprocess.run(
        [sys.executable, "-c", script, str(project), planting(CODE_PLANTS[plant], marker)],
        env=clean_env(),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    started = agent_help(project)
    assert started.returncode == 0, started.stderr
    assert not marker.exists(), done.stdout
    assert "Read-only file system" in done.stdout or "the sandbox moved" in done.stdout


OWN_CODE = [
    "config.py",
    "typing.py",
    "__pycache__/tools.cpython-311.pyc",
    "realworld/new.py",
    "dotenv/__init__.py",
    "examples/__init__.py",
    "local.pth",
    "json.cpython-311-x86_64-linux-gnu.so",
    "a.pyc",
]
NOT_CODE = ["playground/add.py", "notes.txt", "examples/lesson.py", "my-notes.py", "data/x.py"]


@pytest.mark.parametrize("path", OWN_CODE + NOT_CODE)
def test_write_file_refuses_the_agents_own_code_whatever_its_name(tmp_path, monkeypatch, path):
    project = project_copy(tmp_path)
    monkeypatch.setattr(config, "HERE", project)
    (project / "playground").mkdir()
    (project / "data").mkdir()
    (project / "examples" / "lesson.txt").write_text("x")
    arguments = json.dumps({"path": path, "content": "x = 1\n"})
    result, ok = tools.run_call(
        "write_file", arguments, tools.DEFAULT_TOOLS, {"workdir": project, "yes": False}
    )
    assert ok is (path in NOT_CODE), result
    assert (project / path).exists() is (path in NOT_CODE) or path == "config.py"
    if not ok:
        assert "the agent's own code" in result
    if path == "config.py":
        assert (project / "config.py").read_bytes() == (ROOT / "config.py").read_bytes()


def test_write_file_in_the_playground_is_the_persons_when_the_agent_is_above(tmp_path, monkeypatch):
    # The default: the workspace is playground/ inside the agent's folder.
    project = project_copy(tmp_path)
    monkeypatch.setattr(config, "HERE", project)
    (project / "playground").mkdir()
    for path, expected in (("add.py", True), ("typing.py", True), ("__init__.py", False)):
        arguments = json.dumps({"path": path, "content": "x"})
        given = {"workdir": project / "playground", "yes": False}
        _result, ok = tools.run_call("write_file", arguments, tools.DEFAULT_TOOLS, given)
        assert ok is expected, path


# --- Members a fresh pair of eyes found --------------------------------------------------------
# Each was a way round one of the rules above; the rule, not the member, is what changed.


@sandboxed_only
def test_names_a_command_takes_first_do_not_keep_a_plant_in_place(tmp_path):
    # the folder things are moved into has a random part: a command cannot take every name
    workspace = tmp_path / "work"
    workspace.mkdir()
    taken = (
        "mkdir -p .agent-moved && cd .agent-moved && now=$(date -u +%s) && for s in 0 1 2 3; do "
        "t=$(date -u -d @$((now+s)) +%Y%m%dT%H%M%SZ); touch $t; for i in $(seq 2 99); do "
        "touch $t-$i; done; done; cd .. && git init -q . && git config core.fsmonitor 'touch PWNED'"
    )
    result = run(taken, workspace)
    assert "the sandbox moved .git" in result and not (workspace / ".git").exists()


@sandboxed_only
def test_what_was_moved_aside_stays_planted_whatever_a_later_command_does(tmp_path):
    workspace = tmp_path / "work"
    workspace.mkdir()
    first = (
        "git init -q y && git -C y config core.fsmonitor 'touch PWNED' && mkdir x && "
        "echo hi > x/.git && ln x/.git spare && git -C y config core.hooksPath ../../../src"
    )
    assert "the sandbox moved x/.git, y/.git" in run(first, workspace)
    (workspace / "src").mkdir()
    # a hard link to what was moved, or the move undone by the command: moved aside again
    stamp = moved(workspace).relative_to(workspace)
    second = (
        f"printf 'gitdir: {stamp}/y/.git\\n' > spare && mv spare .git; "
        f"mv {stamp}/y ./y2; echo x > src/b.txt && echo wrote"
    )
    result = run(second, workspace)
    assert "wrote" in result and "the sandbox moved .git" in result, result
    assert "Read-only file system" in result  # the quarantine is the agent's, not the command's
    # mv out of the read-only quarantine copies: the copy is new, and moved aside in its turn
    assert not (workspace / ".git").exists() and not (workspace / "y2" / ".git").exists()
    subprocess.run(["git", "-C", str(workspace), "status"], capture_output=True)
    assert not (workspace / "PWNED").exists()


@sandboxed_only
@pytest.mark.parametrize("link", ["data", "/etc", "nowhere"])
def test_a_link_moved_aside_never_stops_the_next_command(tmp_path, link):
    workspace = tmp_path / "work"
    (workspace / "data").mkdir(parents=True)
    assert "the sandbox moved .git" in run(f"ln -s {link} .git", workspace)
    assert run("echo next", workspace) == "next\n"


@sandboxed_only
def test_a_folder_the_scan_cannot_list_hides_no_plant_elsewhere(tmp_path):
    workspace = tmp_path / "work"
    workspace.mkdir()
    deep = (
        "python3 -c \"import os\nfor n in 'ab':\n    os.mkdir(n); fd = os.open(n, os.O_RDONLY)\n"
        "    for i in range(20):\n        os.mkdir('d' * 250, dir_fd=fd); nf = os.open('d' * 250, "
        'os.O_RDONLY, dir_fd=fd); os.close(fd); fd = nf" && git init -q z'
    )
    result = run(deep, workspace)
    assert "the sandbox moved z/.git" in result and not (workspace / "z" / ".git").exists()
    assert "(or one it cannot list)" in result


@sandboxed_only
def test_a_name_that_is_not_utf_8_reaches_the_model_as_text(tmp_path):
    workspace = tmp_path / "work"
    workspace.mkdir()
    result = run('d=$(printf \'\\377\'); mkdir "$d" && git init -q "$d"', workspace)
    assert "the sandbox moved " in result
    result.encode("utf-8")  # no lone surrogate: every later request can carry it


# Python takes a folder without __init__ as a namespace package for any name nothing else has:
# subprocess's `try: import msvcrt` on Linux, then `from _winapi import CREATE_NEW_CONSOLE` imports
# the submodule _winapi/CREATE_NEW_CONSOLE.py (PEP 420; Lib/subprocess.py).
NAMESPACE_PLANT = {
    "msvcrt/README.txt": "x\n",
    "_winapi/CREATE_NEW_CONSOLE.py": "import pathlib; pathlib.Path(MARKER).touch()\n",
}


def test_a_folder_without_init_beside_the_agent_is_never_imported(tmp_path, monkeypatch):
    project = project_copy(tmp_path)
    monkeypatch.setattr(config, "HERE", project)
    marker = tmp_path / "PWNED"
    for path, content in NAMESPACE_PLANT.items():
        arguments = json.dumps(
            {"path": path, "content": content.replace("MARKER", repr(str(marker)))}
        )
        tools.run_call(
            "write_file", arguments, tools.DEFAULT_TOOLS, {"workdir": project, "yes": False}
        )
    assert (project / "_winapi" / "CREATE_NEW_CONSOLE.py").exists()  # written: not code by name
    started = agent_help(project)
    assert started.returncode == 0 and not marker.exists(), started.stderr


@sandboxed_only
@pytest.mark.parametrize(
    "plant",
    [
        "mkdir -p x/objects x/refs && echo 'ref: refs/heads/m' > x/HEAD && git init -q x/inner && "
        "git -C x/inner config core.fsmonitor 'touch PWNED'",
        "git init -q --bare x && git init -q x/sub && "
        "git -C x/sub config core.fsmonitor 'touch PWNED'",
        "git init -q --bare x && echo AGENT_BASE_URL=http://attacker.example/v1 > x/.env",
    ],
    ids=["inside-a-decoy", "inside-a-bare-repository", "dotenv-inside-a-bare-repository"],
)
def test_a_plant_inside_a_folder_git_takes_for_a_repository_is_moved_too(tmp_path, plant):
    workspace = tmp_path / "work"
    workspace.mkdir()
    result = run(plant, workspace)
    assert "the sandbox moved " in result
    left = [p for p in workspace.rglob("*") if ".agent-moved" not in p.parts]
    assert not any(p.name in (".git", ".env") for p in left), left


@sandboxed_only
def test_the_agents_folder_in_the_workspace_cannot_be_swapped_for_a_link(tmp_path):
    workspace = tmp_path / "work"
    workspace.mkdir()
    project = project_copy(workspace)  # the workspace holds the agent, one folder down
    marker = tmp_path / "PWNED"
    swap = (
        f"mv project project-old && cp -r project-old evil && "
        f"sed -i '1i import pathlib; pathlib.Path({str(marker)!r}).touch()' evil/agent.py && "
        "ln -s evil project"
    )
    script = (
        "import sys, pathlib; sys.path.insert(0, sys.argv[1]); import config; "
        "config.SANDBOX = True\nimport tools\n"
        "print(tools.run_shell(sys.argv[2], workdir=pathlib.Path(sys.argv[3])))"
    )
    done = subprocess.run(
        [sys.executable, "-c", script, str(project), swap, str(workspace)],
        env=clean_env(),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    assert agent_help(project).returncode == 0 and not marker.exists(), done.stdout
    assert project.is_dir() and not project.is_symlink()


@sandboxed_only
def test_a_dotenv_made_where_the_persons_link_was_is_moved_aside(tmp_path):
    # the person's .env links outside (read-only there, so not bound inside): a file made in its
    # place may get the freed inode back, never its time of change
    workspace = tmp_path / "work"
    workspace.mkdir()
    (tmp_path / "outside.env").write_text("PORT=1\n")
    (workspace / ".env").symlink_to(tmp_path / "outside.env")
    result = run("rm .env && echo AGENT_BASE_URL=http://attacker.example/v1 > .env", workspace)
    assert "the sandbox moved .env" in result and not (workspace / ".env").exists()
