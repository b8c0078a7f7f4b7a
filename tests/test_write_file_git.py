"""write_file writes nothing git's configuration names (issue 42), sandbox or not: a file git
includes, a hook in a hooks folder named anywhere (made yet or not), a program a value names (an
fsmonitor, a filter driver's command), whichever config file or environment variable set it. The
person's other files stay writable. Judged as a sandboxed command's are: asked of the real git.

Sources: git-config(1) "Includes" (include.path, includeIf.<condition>.path, relative to the
including file), "FILES" (~/.gitconfig, $XDG_CONFIG_HOME/git/config, GIT_CONFIG_GLOBAL) and
"ENVIRONMENT" (GIT_CONFIG_COUNT, GIT_CONFIG_KEY_<n>, GIT_CONFIG_VALUE_<n>); core.hooksPath,
core.fsmonitor, core.sshCommand; gitattributes(5) filter.<driver>.clean and diff.<driver>.command.
"""

import json
import shutil
from pathlib import Path

import pytest
from test_git_config import git, workspace_repository

import config
import tools

pytestmark = pytest.mark.skipif(not shutil.which("git"), reason="needs git")


@pytest.fixture(autouse=True)
def persons_git(monkeypatch, tmp_path):
    monkeypatch.setattr(config, "SANDBOX", False)  # the tool's own rule, sandbox or not
    (tmp_path / "home").mkdir()
    for name in ("GIT_CONFIG_GLOBAL", "GIT_CONFIG_SYSTEM", "XDG_CONFIG_HOME", "GIT_CONFIG_COUNT"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.setenv("GIT_CONFIG_NOSYSTEM", "1")


def write(work: Path, path: str, content: str = "#!/bin/sh\ntouch PWNED\n") -> tuple[str, bool]:
    arguments = json.dumps({"path": path, "content": content})
    return tools.run_call("write_file", arguments, tools.DEFAULT_TOOLS, {"workdir": work})


def local(work: Path, key: str, value: str) -> None:
    assert git(work, "config", key, value).returncode == 0


MEMBERS = {
    # (how the configuration names it, the file write_file is asked to write)
    "include.path, relative to .git/config": (
        lambda w, h: local(w, "include.path", "../team.cfg"),
        "team.cfg",
    ),
    "includeIf gitdir:, a file not made yet": (
        lambda w, h: local(w, f"includeIf.gitdir:{w}/.path", "cfg/extra.cfg"),
        ".git/../cfg/extra.cfg",
    ),
    "the repository's hooksPath, a folder not made yet": (
        lambda w, h: local(w, "core.hooksPath", "githooks"),
        "githooks/pre-commit",
    ),
    "a global hooksPath in ~/.gitconfig": (
        lambda w, h: (h / ".gitconfig").write_text(f"[core]\n\thooksPath = {w}/ci/hooks\n"),
        "ci/hooks/post-checkout",
    ),
    "core.fsmonitor, a program": (
        lambda w, h: local(w, "core.fsmonitor", "tools/fsmon.sh"),
        "tools/fsmon.sh",
    ),
    "a filter driver's command, one word of it": (
        lambda w, h: local(w, "filter.lfsish.clean", "sh scripts/clean.sh --quiet %f"),
        "scripts/clean.sh",
    ),
    "a diff driver's command in $XDG_CONFIG_HOME/git/config": (
        lambda w, h: xdg(h, f'[diff "pic"]\n\tcommand = {w}/bin/picdiff\n'),
        "bin/picdiff",
    ),
    # sh reads the value (POSIX sh 2.2 Quoting): a quoted path with a space is one path
    "an alias's quoted program with a space in it": (
        lambda w, h: local(w, "alias.lint", "!'./dev tools/lint.sh' --fix"),
        "dev tools/lint.sh",
    ),
}


def xdg(home: Path, text: str) -> None:
    (home / ".config" / "git").mkdir(parents=True)
    (home / ".config" / "git" / "config").write_text(text)


@pytest.mark.parametrize("member", sorted(MEMBERS))
def test_write_file_refuses_what_gits_configuration_names(tmp_path, member):
    work, home = workspace_repository(tmp_path), tmp_path / "home"
    name_it, path = MEMBERS[member]
    name_it(work, home)
    result, ok = write(work, path)
    assert not ok and "named by git's configuration" in result, result
    assert not (work / path).exists()
    assert write(work, "src/ordinary.py", "print(1)\n")[1]  # the person's other files: written


def test_a_value_from_the_environment_is_judged_too(tmp_path, monkeypatch):
    work = workspace_repository(tmp_path)
    monkeypatch.setenv("GIT_CONFIG_COUNT", "1")
    monkeypatch.setenv("GIT_CONFIG_KEY_0", "core.sshCommand")
    monkeypatch.setenv("GIT_CONFIG_VALUE_0", "./ssh-wrapper -v")
    result, ok = write(work, "ssh-wrapper")
    assert not ok and "named by git's configuration" in result, result


def test_a_workspace_outside_any_repository_writes_as_before(tmp_path):
    work = tmp_path / "plain"
    work.mkdir()
    assert write(work, "githooks/pre-commit")[1]
    assert (work / "githooks" / "pre-commit").exists()
