"""Every configuration git reads is judged as core.hooksPath is (issue 42): every file git reads
and every path a value names inside the workspace, existing or not yet, whichever file set it.
What exists is read-only to a sandboxed command; what the command makes there is moved aside and
said. Then the person's own git, outside the sandbox, runs nothing the command planted. On the
real git and the real bubblewrap.

Sources: git-config(1) "Includes" (include.path; includeIf.<condition>.path with gitdir:,
onbranch:; "relative to the configuration file in which the include directive was found"; ~
expanded), "FILES" (GIT_CONFIG_GLOBAL, $XDG_CONFIG_HOME/git/config, ~/.gitconfig,
GIT_CONFIG_SYSTEM) and "ENVIRONMENT" (GIT_CONFIG_COUNT, GIT_CONFIG_KEY_<n>, GIT_CONFIG_VALUE_<n>);
core.hooksPath ("relative paths are taken as relative to the directory where the hooks are run",
the top of the work tree), core.fsmonitor ("the path to a command"); gitattributes(5) filter
drivers (filter.<driver>.clean runs on git add).
"""

import os
import subprocess
from pathlib import Path

import pytest
from test_what_commands_leave import moved, run, sandboxed_only

import config

pytestmark = sandboxed_only

HOOK = "#!/bin/sh\ntouch {mark}\n"


@pytest.fixture(autouse=True)
def sandbox_on(monkeypatch, tmp_path):
    monkeypatch.setattr(config, "SANDBOX", True)
    # the person's own global config, empty: a member sets what it needs
    home = tmp_path / "home"
    home.mkdir()
    for name in ("GIT_CONFIG_GLOBAL", "GIT_CONFIG_SYSTEM", "XDG_CONFIG_HOME", "GIT_CONFIG_COUNT"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("GIT_CONFIG_NOSYSTEM", "1")  # the person's; the agent reads it anyway


def workspace_repository(tmp_path: Path) -> Path:
    """The person's repository, with one commit, as the workspace."""
    work = tmp_path / "work"
    subprocess.run(["git", "init", "-q", str(work)], check=True)
    (work / "notes.txt").write_text("mine\n")
    git(work, "add", ".")
    git(work, "commit", "-qm", "mine")
    return work


def git(work: Path, *args: str) -> subprocess.CompletedProcess:
    """The person's git, outside the sandbox, hooks and all."""
    who = ["-c", "user.name=p", "-c", "user.email=p@x"]
    return subprocess.run(["git", "-C", str(work), *who, *args], capture_output=True, text=True)


def persons_next_git(work: Path, mark: Path) -> None:
    """What the person runs next: git status, then a commit (hooks, fsmonitor, filters)."""
    (work / "notes.txt").write_text("mine, more\n")
    git(work, "status")
    git(work, "add", ".")
    git(work, "commit", "-qm", "next")
    assert not mark.exists(), "git ran what the command planted"


PLANT_FSMONITOR = "printf '[core]\\n\\tfsmonitor = \"touch {mark}\"\\n' >> {file}; echo tried"


@pytest.mark.parametrize(
    "include",
    ["relative", "absolute", "includeIf gitdir:", "includeIf onbranch: not on it yet", "~"],
)
def test_an_included_file_in_the_work_tree_cannot_be_changed(tmp_path, include):
    work = workspace_repository(tmp_path)
    mark = tmp_path / "PWNED"
    (work / "team.cfg").write_text("[user]\n\tname = team\n")
    value = {
        "relative": "../team.cfg",  # relative to .git/config, the including file
        "absolute": str(work / "team.cfg"),
        "includeIf gitdir:": "../team.cfg",
        "includeIf onbranch: not on it yet": "../team.cfg",
        "~": "~/../work/team.cfg",
    }[include]
    key = {
        "includeIf gitdir:": f"includeIf.gitdir:{work}/.path",
        "includeIf onbranch: not on it yet": "includeIf.onbranch:later.path",
    }.get(include, "include.path")
    git(work, "config", key, value)
    result = run(PLANT_FSMONITOR.format(mark=mark, file="team.cfg"), work)
    assert "Read-only file system" in result, result
    assert (work / "team.cfg").read_text() == "[user]\n\tname = team\n"
    git(work, "checkout", "-qb", "later")  # the condition holds now
    persons_next_git(work, mark)


def test_an_included_file_not_made_yet_is_moved_aside_when_a_command_makes_it(tmp_path):
    work = workspace_repository(tmp_path)
    mark = tmp_path / "PWNED"
    git(work, "config", "include.path", "../local.cfg")  # the person's, for later
    result = run(PLANT_FSMONITOR.format(mark=mark, file="local.cfg"), work)
    assert "the sandbox moved local.cfg, which this command made" in result, result
    assert not (work / "local.cfg").exists() and (moved(work) / "local.cfg").is_file()
    persons_next_git(work, mark)


@pytest.mark.parametrize("where", ["GIT_CONFIG_GLOBAL", "~/.gitconfig", "XDG_CONFIG_HOME"])
@pytest.mark.parametrize("exists", [True, False], ids=["hooks folder there", "not made yet"])
def test_a_global_hooks_path_naming_a_work_tree_folder(tmp_path, monkeypatch, where, exists):
    work = workspace_repository(tmp_path)
    mark = tmp_path / "PWNED"
    text = "[core]\n\thooksPath = .githooks\n"
    if where == "GIT_CONFIG_GLOBAL":
        (tmp_path / "global.cfg").write_text(text)
        monkeypatch.setenv("GIT_CONFIG_GLOBAL", str(tmp_path / "global.cfg"))
    elif where == "XDG_CONFIG_HOME":
        (tmp_path / "xdg" / "git").mkdir(parents=True)
        (tmp_path / "xdg" / "git" / "config").write_text(text)
        monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "xdg"))
    else:
        (tmp_path / "home" / ".gitconfig").write_text(text)
    if exists:
        (work / ".githooks").mkdir()
        (work / ".githooks" / "README").write_text("the person's hooks go here\n")
    plant = f"mkdir -p .githooks; printf '{HOOK.format(mark=mark)}' > .githooks/pre-commit"
    result = run(f"{plant}; chmod +x .githooks/pre-commit; echo tried", work)
    if exists:
        assert "Read-only file system" in result and not (work / ".githooks/pre-commit").exists()
        assert (work / ".githooks" / "README").read_text() == "the person's hooks go here\n"
    else:
        assert "the sandbox moved .githooks, which this command made" in result, result
        assert (moved(work) / ".githooks" / "pre-commit").is_file()
        assert not (work / ".githooks").exists()
    persons_next_git(work, mark)


@pytest.mark.parametrize("exists", [True, False], ids=["there", "not made yet"])
def test_the_repositorys_own_hooks_path(tmp_path, exists):
    work = workspace_repository(tmp_path)
    mark = tmp_path / "PWNED"
    git(work, "config", "core.hooksPath", "tools/hooks")
    (work / "tools").mkdir()
    (work / "tools" / "build.sh").write_text("echo build\n")
    if exists:
        (work / "tools" / "hooks").mkdir()
    plant = f"mkdir -p tools/hooks && printf '{HOOK.format(mark=mark)}' > tools/hooks/pre-commit"
    result = run(f"{plant} && chmod +x tools/hooks/pre-commit; echo more >> tools/build.sh", work)
    assert (work / "tools" / "build.sh").read_text() == "echo build\nmore\n"  # the rest is free
    if exists:
        assert "Read-only file system" in result, result
    else:
        assert "the sandbox moved tools/hooks, which this command made" in result, result
    assert not (work / "tools" / "hooks" / "pre-commit").exists()
    persons_next_git(work, mark)


@pytest.mark.parametrize("exists", [True, False], ids=["there", "not made yet"])
@pytest.mark.parametrize("value", ["tools/fsmon.sh", "sh tools/fsmon.sh --quiet"])
def test_an_fsmonitor_naming_a_work_tree_file(tmp_path, exists, value):
    work = workspace_repository(tmp_path)
    mark = tmp_path / "PWNED"
    git(work, "config", "core.fsmonitor", value)
    (work / "tools").mkdir()
    if exists:
        (work / "tools" / "fsmon.sh").write_text("#!/bin/sh\nexit 1\n")
        (work / "tools" / "fsmon.sh").chmod(0o755)
    plant = f"printf '{HOOK.format(mark=mark)}' > tools/fsmon.sh; chmod +x tools/fsmon.sh"
    result = run(f"{plant}; echo tried", work)
    if exists:
        assert "Read-only file system" in result, result
        assert (work / "tools" / "fsmon.sh").read_text() == "#!/bin/sh\nexit 1\n"
    else:
        assert "the sandbox moved tools/fsmon.sh, which this command made" in result, result
        assert not (work / "tools" / "fsmon.sh").exists()
    persons_next_git(work, mark)


def test_values_from_the_environment_and_a_filter_driver_are_judged_too(tmp_path, monkeypatch):
    # members no line of the issue names: GIT_CONFIG_COUNT, and a filter driver's script that
    # .gitattributes selects (a command may write .gitattributes; the script is what runs)
    work = workspace_repository(tmp_path)
    mark = tmp_path / "PWNED"
    for n, (key, value) in enumerate(
        [("filter.tidy.clean", "sh scripts/tidy.sh"), ("core.hooksPath", "envhooks")]
    ):
        monkeypatch.setenv(f"GIT_CONFIG_KEY_{n}", key)
        monkeypatch.setenv(f"GIT_CONFIG_VALUE_{n}", value)
    monkeypatch.setenv("GIT_CONFIG_COUNT", "2")
    plant = (
        f"mkdir scripts envhooks && printf 'touch {mark}; cat' > scripts/tidy.sh && "
        f"printf '{HOOK.format(mark=mark)}' > envhooks/pre-commit && chmod +x envhooks/pre-commit "
        "&& echo '*.txt filter=tidy' > .gitattributes"
    )
    result = run(plant, work)
    assert "the sandbox moved envhooks, scripts, which this command made" in result, result
    persons_next_git(work, mark)


def test_a_global_config_not_made_yet_in_the_workspace_is_moved_aside(tmp_path, monkeypatch):
    work = workspace_repository(tmp_path)
    mark = tmp_path / "PWNED"
    monkeypatch.setenv("GIT_CONFIG_GLOBAL", str(work / ".gitconfig.local"))
    result = run(PLANT_FSMONITOR.format(mark=mark, file=".gitconfig.local"), work)
    assert "the sandbox moved .gitconfig.local, which this command made" in result, result
    persons_next_git(work, mark)


def test_a_link_of_the_persons_on_the_way_cannot_be_turned(tmp_path):
    # hooksPath names a link of the person's to a folder in the work tree: the folder it leads
    # to is read-only, and a link the command puts in its place is moved aside
    work = workspace_repository(tmp_path)
    mark = tmp_path / "PWNED"
    (work / "real-hooks").mkdir()
    (work / "hooks-link").symlink_to("real-hooks")
    (work / "elsewhere").mkdir()
    git(work, "config", "core.hooksPath", "hooks-link")
    plant = (
        f"printf '{HOOK.format(mark=mark)}' > real-hooks/pre-commit; "
        f"printf '{HOOK.format(mark=mark)}' > elsewhere/pre-commit; chmod +x elsewhere/*; "
        "rm hooks-link && ln -s elsewhere hooks-link && echo turned"
    )
    result = run(plant, work)
    assert "turned" in result and "Read-only file system" in result, result
    assert "the sandbox moved hooks-link, which this command made" in result, result
    assert not (work / "real-hooks" / "pre-commit").exists()
    persons_next_git(work, mark)


def test_the_persons_ordinary_work_stays_writable(tmp_path):
    # what no value names stays the command's to change, and git's answer costs no failure
    work = workspace_repository(tmp_path)
    git(work, "config", "core.hooksPath", ".husky")
    (work / ".husky").mkdir()
    result = run("echo more >> notes.txt && mkdir -p src && echo x > src/a.py && echo ok", work)
    assert result == "ok\n" and not (work / ".agent-moved").exists()


def test_git_that_does_not_answer_refuses_the_command_in_one_line(tmp_path, monkeypatch):
    # a git that hangs: the command is refused, said, within the bound
    work = workspace_repository(tmp_path)
    slow = tmp_path / "bin"
    slow.mkdir()
    (slow / "git").write_text("#!/bin/sh\nexec sleep 60\n")
    (slow / "git").chmod(0o755)
    from realworld import protected, sandbox

    monkeypatch.setattr(protected, "GIT_SECONDS", 0.5)
    monkeypatch.setenv("PATH", f"{slow}{os.pathsep}{os.environ['PATH']}")
    sandbox.program.cache_clear()
    try:
        result = run("echo ran", work)
    finally:
        sandbox.program.cache_clear()
    assert "ran" not in result and "more than the sandbox reads" in result, result


@pytest.mark.parametrize(
    "plant",
    [
        "mv tools tools.old && mkdir tools && printf '{hook}' > tools/fsmon.sh",
        "mv tools/fsmon.sh tools/fsmon.old; printf '{hook}' > tools/fsmon.sh",
        "rm -rf tools; mkdir tools && printf '{hook}' > tools/fsmon.sh",
    ],
    ids=["folder on the way renamed", "file renamed", "folder removed"],
)
def test_what_a_command_puts_in_the_place_of_what_a_value_names_is_moved_aside(tmp_path, plant):
    work = workspace_repository(tmp_path)
    mark = tmp_path / "PWNED"
    git(work, "config", "core.fsmonitor", "tools/fsmon.sh")
    (work / "tools").mkdir()
    (work / "tools" / "fsmon.sh").write_text("#!/bin/sh\nexit 1\n")
    (work / "tools" / "fsmon.sh").chmod(0o755)
    command = plant.format(hook=HOOK.format(mark=mark))
    result = run(f"{command}; chmod +x tools/fsmon.sh; echo tried", work)
    assert "tried" in result
    now = work / "tools" / "fsmon.sh"
    assert not now.exists() or now.read_text() == "#!/bin/sh\nexit 1\n", result
    persons_next_git(work, mark)


def test_more_repositories_than_git_is_asked_about_refuses_the_command(tmp_path):
    # one git per repository before every command: past the bound, refused, never slowed to a crawl
    from realworld.protected import MAX_PLACES

    work = tmp_path / "work"
    for n in range(MAX_PLACES + 1):
        (work / f"r{n}" / ".git").mkdir(parents=True)
    result = run("echo ran", work)
    assert "ran" not in result and f"{MAX_PLACES} repositories" in result, result


def test_a_value_that_reaches_the_workspace_through_a_link_outside_it(tmp_path, monkeypatch):
    work = workspace_repository(tmp_path)
    mark = tmp_path / "PWNED"
    (tmp_path / "via").symlink_to(work)
    (tmp_path / "global.cfg").write_text(f"[core]\n\thooksPath = {tmp_path / 'via' / 'hk'}\n")
    monkeypatch.setenv("GIT_CONFIG_GLOBAL", str(tmp_path / "global.cfg"))
    plant = f"mkdir hk && printf '{HOOK.format(mark=mark)}' > hk/pre-commit && chmod +x hk/*"
    assert "the sandbox moved hk, which this command made" in run(plant, work)
    persons_next_git(work, mark)


# --- Members a fresh pair of eyes found (issue 42) -----------------------------------------------
# git runs a command value (core.fsmonitor, an alias after its "!", a filter) with sh -c when it
# holds a shell's special characters (git's run-command.c, prepare_shell_cmd()), and sh reads
# quotes, backslashes and $VARIABLES before it finds the path (POSIX sh, 2.2 Quoting, 2.6.2
# Parameter Expansion): a path with a space, quoted or escaped, or under $HOME, is one path.


@pytest.mark.parametrize(
    "value",
    [
        "'tools/fs mon.sh'",
        '"tools/fs mon.sh" --quiet',
        "tools/fs\\ mon.sh",
        "$HOME/../work/tools/fs mon.sh",
    ],
    ids=["single-quoted", "double-quoted with an argument", "backslash", "$HOME"],
)
def test_a_command_value_is_read_as_sh_reads_it(tmp_path, value):
    work = workspace_repository(tmp_path)
    mark = tmp_path / "PWNED"
    (work / "tools").mkdir()
    git(work, "config", "core.fsmonitor", value if value[0] != "$" else f"'{value}'")
    plant = f"printf '{HOOK.format(mark=mark)}' > 'tools/fs mon.sh'; chmod +x tools/*; echo tried"
    result = run(plant, work)
    assert "the sandbox moved tools/fs mon.sh, which this command made" in result, result
    persons_next_git(work, mark)


@pytest.mark.parametrize("kind", ["a .git link", "a bare repository's HEAD link"])
def test_a_repository_the_person_reaches_through_a_link_is_asked_too(tmp_path, kind):
    # stat(2) follows a link: git takes sub/.git -> elsewhere for the repository, and a bare
    # repository's HEAD "can also be a symbolic link" (gitrepository-layout(5))
    work = tmp_path / "work"
    work.mkdir()
    mark = tmp_path / "PWNED"
    if kind == "a .git link":
        store = workspace_repository(tmp_path / "store")
        (work / "sub").mkdir()
        (store / ".git").rename(tmp_path / "sub.git")
        (work / "sub" / ".git").symlink_to(tmp_path / "sub.git")
        git(work / "sub", "checkout", "-qf", "HEAD")
        git(work / "sub", "config", "core.hooksPath", ".hooks")
        plant, persons = "mkdir sub/.hooks && printf '{hook}' > sub/.hooks/pre-commit", work / "sub"
    else:
        subprocess.run(["git", "init", "-q", "--bare", str(work / "sub.git")], check=True)
        (work / "sub.git" / "HEAD").unlink()
        (work / "sub.git" / "HEAD").symlink_to("refs/heads/master")
        git(work / "sub.git", "config", "core.hooksPath", "myhooks")
        plant, persons = "mkdir sub.git/myhooks && printf '{hook}' > sub.git/myhooks/update", None
    result = run(plant.format(hook=HOOK.format(mark=mark)) + " && chmod +x */*/*; echo tried", work)
    assert "the sandbox moved sub" in result and "which this command made" in result, result
    if persons:
        persons_next_git(persons, mark)


@pytest.mark.parametrize("turned", [False, True], ids=["the link as it is", "the link turned"])
def test_a_dot_dot_after_a_link_is_taken_where_the_system_takes_it(tmp_path, turned):
    # path_resolution(7): ".." after a link is the parent of where the link leads, so
    # tools/../hooks with tools -> ci/scripts is ci/hooks, not hooks
    work = workspace_repository(tmp_path)
    mark = tmp_path / "PWNED"
    (work / "ci" / "scripts").mkdir(parents=True)
    (work / "tools").symlink_to("ci/scripts")
    git(work, "config", "core.hooksPath", "tools/../hooks")
    where = "x" if turned else "ci"
    turn = "rm tools && mkdir -p x/y && ln -s x/y tools && " if turned else ""
    hook = f"{where}/hooks/pre-commit"
    plant = f"{turn}mkdir {where}/hooks && printf '{HOOK.format(mark=mark)}' > {hook}"
    result = run(f"{plant} && chmod +x {hook}; echo tried", work)
    moved_what = "tools" if turned else "ci/hooks"
    assert f"the sandbox moved {moved_what}, which this command made" in result, result
    persons_next_git(work, mark)


@pytest.mark.parametrize("checked_out", [True, False], ids=["checked out", "after a deinit"])
def test_a_submodules_own_config_is_judged_checked_out_or_not(tmp_path, checked_out):
    # gitsubmodules(7): a submodule's repository lives in the superproject's .git/modules/<name>/
    # and stays there after "git submodule deinit"; "git submodule update" checks it out again,
    # and its config (core.hooksPath, relative to its work tree) is obeyed there
    work = workspace_repository(tmp_path)
    lib = workspace_repository(tmp_path / "lib")
    mark = tmp_path / "PWNED"
    allow = ["-c", "protocol.file.allow=always"]
    assert git(work, *allow, "submodule", "--quiet", "add", str(lib), "sub").returncode == 0
    git(work, "commit", "-qm", "sub")
    git(work / "sub", "config", "core.hooksPath", "hk")
    if not checked_out:
        git(work, "submodule", "--quiet", "deinit", "-f", "sub")
    plant = f"mkdir -p sub/hk && printf '{HOOK.format(mark=mark)}' > sub/hk/pre-commit"
    result = run(f"{plant} && chmod +x sub/hk/pre-commit; echo tried", work)
    assert "the sandbox moved sub/hk, which this command made" in result, result
    git(work, *allow, "submodule", "--quiet", "update", "--init")
    persons_next_git(work / "sub", mark)
