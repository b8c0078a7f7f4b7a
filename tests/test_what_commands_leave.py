"""Nothing a sandboxed command leaves turns the agent against the person (issue 32): the cleanup
after it never deletes, never follows a path or a link the command wrote, reads what the command
could have made only with bounds. On the real bubblewrap.

Sources: git-config(1) (core.hooksPath "relative paths are taken as relative to the directory where
the hooks are run"; core.fsmonitor), gitrepository-layout(5) (a .git file's "gitdir: <path>"),
git's setup.c is_git_directory(); open(2) (O_NOFOLLOW, O_NONBLOCK: a FIFO opens at once, no
writer needed), fifo(7); rename(2) (a rename within one file system; EBUSY for a mount point).
"""

import json
import os
import subprocess
import sys
import threading
from pathlib import Path

import pytest

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
def test_a_dotenv_made_where_the_persons_link_was_is_moved_aside(tmp_path):
    # the person's .env links outside (read-only there, so not bound inside): a file made in its
    # place may get the freed inode back, never its time of change
    workspace = tmp_path / "work"
    workspace.mkdir()
    (tmp_path / "outside.env").write_text("PORT=1\n")
    (workspace / ".env").symlink_to(tmp_path / "outside.env")
    result = run("rm .env && echo AGENT_BASE_URL=http://attacker.example/v1 > .env", workspace)
    assert "the sandbox moved .env" in result and not (workspace / ".env").exists()


# --- What is the person's is judged by what stood there, never by a time of change (issue 42) ----
# Writing into a folder or a file changes its time of change (inode(7): st_ctime "changed by
# writing or by setting inode information"), not its device and inode. The person's folders named
# like a repository's pieces (config/, hooks/) and files (a config file) stay where they are when
# a command writes into them and makes a repository around them; only what it made goes.


@sandboxed_only
def test_the_persons_folders_a_command_writes_into_stay_when_it_plants_a_repository(tmp_path):
    workspace = tmp_path / "work"
    (workspace / "config").mkdir(parents=True)
    (workspace / "config" / "settings.yml").write_text("mine: 1\n")
    (workspace / "hooks").mkdir()
    (workspace / "hooks" / "useAuth.js").write_text("export {}\n")
    (workspace / "data").mkdir()
    (workspace / "data" / "config").write_text("the person's own file named config\n")
    plant = (
        "mkdir objects refs && echo 'ref: refs/heads/m' > HEAD && echo x > config/new.yml && "
        "echo y > hooks/post-checkout && echo more >> data/config && mkdir data/objects"
    )
    result = run(plant, workspace)
    assert (workspace / "config" / "settings.yml").read_text() == "mine: 1\n"
    assert (workspace / "hooks" / "useAuth.js").read_text() == "export {}\n"
    assert (workspace / "data" / "config").read_text().startswith("the person's own file")
    # data/ holds config and objects/ but no HEAD: no repository, so nothing there is moved
    assert "[the sandbox moved HEAD, objects, refs, which this command made" in result, result
    assert not is_git_dir({p.name.lower() for p in workspace.iterdir()})


@sandboxed_only
def test_a_package_marker_moves_nothing_of_the_persons(tmp_path):
    workspace = tmp_path / "work"
    (workspace / "playground").mkdir(parents=True)
    (workspace / "playground" / "notes.md").write_text("mine\n")
    result = run("touch playground/__init__.py && echo done", workspace)
    assert result == "done\n" and not (workspace / ".agent-moved").exists()
    assert (workspace / "playground" / "notes.md").read_text() == "mine\n"


# What the command moved of the person's is still theirs: rename(2) keeps an entry's device and
# inode, link(2) gives the same inode a second name and leaves the first. A folder of the person's
# a command renames into a repository it plants stays where it went, and only the pieces the
# command made go; what would still make a repository, a link, an entry renamed into another role
# (.env) or to where git's configuration points, goes.


@sandboxed_only
@pytest.mark.parametrize("swap", [False, True], ids=["renamed into it", "swapped with hooks/"])
def test_the_persons_folder_renamed_into_a_planted_repository_stays_theirs(tmp_path, swap):
    workspace = tmp_path / "work"
    (workspace / "config").mkdir(parents=True)
    (workspace / "config" / "settings.yml").write_text("mine: 1\n")
    (workspace / "x" / "hooks").mkdir(parents=True)
    plant = "mkdir -p x/objects x/refs && echo 'ref: refs/heads/m' > x/HEAD && "
    plant += "mv config t && mv x/hooks x/config && mv t x/hooks" if swap else "mv config x/config"
    result = run(plant, workspace)
    assert "the sandbox moved x/HEAD, x/objects, x/refs, which this command made" in result, result
    said = "x/config, x/hooks" if swap else "x/config"
    assert f"this command moved configuration to {said}" in result
    mine = workspace / "x" / ("hooks" if swap else "config") / "settings.yml"
    assert mine.read_text() == "mine: 1\n"
    assert not is_git_dir({p.name.lower() for p in (workspace / "x").iterdir()})


@sandboxed_only
@pytest.mark.parametrize(
    "plant",
    [
        "ln data/config x/config",
        "mkdir x && mv data/config x/config && mv data/HEAD x/HEAD && mv objects x/ && mv refs x/",
        "mv data/config .env",
    ],
    ids=["a hard link", "every piece the person's, together", "renamed into another role"],
)
def test_what_would_still_be_obeyed_of_the_persons_goes(tmp_path, plant):
    workspace = tmp_path / "work"
    (workspace / "data").mkdir(parents=True)
    (workspace / "data" / "config").write_text("[core]\n\tfsmonitor = touch PWNED\n")
    (workspace / "data" / "HEAD").write_text("ref: refs/heads/m\n")
    (workspace / "objects").mkdir()
    (workspace / "refs").mkdir()
    decoy = "mkdir -p x/objects x/refs && echo 'ref: refs/heads/m' > x/HEAD"
    result = run(plant if "HEAD" in plant else f"{decoy} && {plant}", workspace)
    assert "the sandbox moved " in result and "which this command made" in result, result
    assert not (workspace / ".env").exists() and not (workspace / "x" / "config").exists()
    assert not is_git_dir({p.name.lower() for p in (workspace / "x").iterdir()})


@sandboxed_only
def test_the_persons_folder_renamed_to_where_git_points_goes(tmp_path):
    # core.hooksPath names hooks/, not made yet; the person's old/hooks/ is an ordinary folder
    workspace = tmp_path / "work"
    person_repository(workspace)
    subprocess.run(["git", "-C", str(workspace), "config", "core.hooksPath", "hooks"], check=True)
    (workspace / "old" / "hooks").mkdir(parents=True)
    (workspace / "old" / "hooks" / "README").write_text("mine\n")
    plant = "printf '#!/bin/sh\\ntouch PWNED\\n' > old/hooks/pre-commit && mv old/hooks hooks"
    result = run(f"{plant} && chmod +x hooks/pre-commit", workspace)
    assert "the sandbox moved hooks, which this command made" in result, result
    assert not (workspace / "hooks").exists()
