"""The workspace: paths and symlinks that lead out, races on folders, configuration (.env, .git) the
model may not write, and files that stay as private as they were."""

import contextlib
import os
import shutil
import stat
import subprocess
import sys

import pytest
from conftest import posix_only

import tools
from realworld import workspace
from tools import ToolError, read_file, write_file


# No planted repositories: git's setup.c (is_git_directory) takes a folder holding HEAD,
# objects/ and refs/ for a repository, and would obey its config (core.fsmonitor runs a command)
# whenever git runs there.
@pytest.mark.parametrize(
    "order",
    [
        ["HEAD", "objects/info/x", "refs/heads/main"],
        ["refs/x", "HEAD", "objects/y"],
        ["sub/objects/a", "sub/refs/b", "sub/HEAD"],
        ["x/objects/o", "x/refs/r", "x/config", "a/commondir", "a/HEAD"],
        ["a/HEAD", "a/commondir"],
    ],
    ids=[
        "head-first",
        "head-second",
        "in-a-subfolder",
        "commondir-then-head",
        "head-then-commondir",
    ],
)
def test_write_file_refuses_to_complete_a_git_repository_in_any_folder(tmp_path, order):
    for path in order[:-1]:
        tools.write_file(path, "ref: refs/heads/main\n", workdir=tmp_path)
    with pytest.raises(ToolError, match="what git looks for in a repository"):
        tools.write_file(order[-1], "x", workdir=tmp_path)
    assert not (tmp_path / order[-1]).exists()
    tools.write_file("notes/HEAD.md", "a file that names HEAD is fine", workdir=tmp_path)


@pytest.mark.skipif(not shutil.which("git"), reason="needs git")
def test_commands_run_with_git_ignoring_a_bare_repository_it_was_not_pointed_to(tmp_path):
    bare = tmp_path / "planted"
    subprocess.run(["git", "init", "--bare", "-q", str(bare)], check=True)
    subprocess.run(
        ["git", "-C", str(bare), "config", "core.fsmonitor", f"touch {tmp_path / 'PWNED'}"],
        check=True,
    )
    output = tools.run_shell("cd planted && git status", workdir=tmp_path)
    assert "cannot use bare repository" in output and not (tmp_path / "PWNED").exists()


@posix_only
def test_write_file_keeps_the_replaced_files_group_and_mode(tmp_path):
    target = tmp_path / "shared.txt"
    target.write_text("old")
    os.chmod(target, 0o640)
    group = 4242 if os.geteuid() == 0 else os.getgid()  # root may give a file any group
    os.chown(target, -1, group)
    tools.write_file("shared.txt", "new", workdir=tmp_path)
    assert (stat.S_IMODE(target.stat().st_mode), target.stat().st_gid, target.read_text()) == (
        0o640,
        group,
        "new",
    )
    tools.write_file("fresh.txt", "x", workdir=tmp_path)
    assert stat.S_IMODE((tmp_path / "fresh.txt").stat().st_mode) == 0o666 & ~workspace.UMASK


def test_a_temporary_file_left_by_a_killed_write_does_not_collect(tmp_path):
    (tmp_path / ".a.txt.0123abcd.tmp").write_text("half")
    (tmp_path / ".other.txt.0123abcd.tmp").write_text("not ours to remove")
    tools.write_file("a.txt", "whole", workdir=tmp_path)
    assert sorted(p.name for p in tmp_path.iterdir()) == [".other.txt.0123abcd.tmp", "a.txt"]


@posix_only
def test_write_keeps_the_mode_and_leaves_no_temporary_file(workspace):
    script = workspace / "run.sh"
    script.write_text("old")
    script.chmod(0o751)
    write_file("run.sh", "new", workdir=workspace)
    assert stat.S_IMODE(script.stat().st_mode) == 0o751
    assert os.listdir(workspace) == ["run.sh"]


@pytest.mark.parametrize("path", ["../outside.txt", "a/../../outside.txt", "/etc/passwd"])
def test_paths_outside_the_workspace_are_refused(workspace, path):
    with pytest.raises(ToolError, match="outside the workspace"):
        write_file(path, "x", workdir=workspace)
    with pytest.raises(ToolError, match="outside the workspace"):
        read_file(path, workdir=workspace)
    assert not (workspace.parent / "outside.txt").exists()


@pytest.mark.skipif(os.name == "nt", reason="symlinks need privileges on Windows")
def test_a_symlink_chain_leading_out_is_refused(workspace, tmp_path):
    (tmp_path / "secret.txt").write_text("secret")
    (workspace / "hop2").symlink_to(tmp_path / "secret.txt")
    (workspace / "hop1").symlink_to(workspace / "hop2")
    with pytest.raises(ToolError, match="outside the workspace"):
        read_file("hop1", workdir=workspace)
    with pytest.raises(ToolError, match="outside the workspace"):
        write_file("hop1", "overwritten", workdir=workspace)
    assert (tmp_path / "secret.txt").read_text() == "secret"


@pytest.mark.skipif(os.name == "nt", reason="symlinks need privileges on Windows")
def test_a_symlink_inside_the_workspace_is_followed(workspace):
    (workspace / "real.txt").write_text("real")
    (workspace / "link.txt").symlink_to("real.txt")
    assert read_file("link.txt", workdir=workspace) == "real"
    write_file("link.txt", "changed", workdir=workspace)
    assert (workspace / "link.txt").is_symlink()
    assert (workspace / "real.txt").read_text() == "changed"


def test_an_absolute_path_inside_the_workspace_is_accepted(workspace):
    write_file(str(workspace / "abs.txt"), "ok", workdir=workspace)
    assert read_file("abs.txt", workdir=workspace) == "ok"


def test_a_path_through_a_file_is_refused_in_one_line(workspace):
    (workspace / "file").write_text("")
    with pytest.raises(ToolError, match="file is not a folder inside the workspace"):
        write_file("file/inside.txt", "x", workdir=workspace)


@pytest.mark.parametrize(
    "path", [".env", "app/.env.local", ".git/config", "sub/.GIT/hooks/pre-commit", "a/../.Env"]
)
def test_write_file_refuses_env_files_and_git_folders(tmp_path, path):
    with pytest.raises(ToolError, match="is configuration"):
        tools.write_file(path, "AGENT_BASE_URL=http://attacker\n", workdir=tmp_path)
    assert not (tmp_path / path).exists()


@posix_only
def test_write_file_refuses_git_config_through_a_symlink(tmp_path):
    (tmp_path / ".git").mkdir()
    (tmp_path / ".git" / "config").write_text("[core]\n")
    (tmp_path / "notes.txt").symlink_to(".git/config")
    with pytest.raises(ToolError, match=r"inside a \.git folder"):
        tools.write_file("notes.txt", "[core]\n\tfsmonitor = touch PWNED\n", workdir=tmp_path)
    assert (tmp_path / ".git" / "config").read_text() == "[core]\n"


@posix_only
def test_a_folder_swapped_for_a_symlink_during_writes_never_leads_outside(tmp_path):
    workspace, outside = tmp_path / "work", tmp_path / "outside"
    workspace.mkdir()
    outside.mkdir()
    swapper = (
        "import os, sys, time\n"
        "work, outside = sys.argv[1], sys.argv[2]\n"
        "end = time.monotonic() + 20\n"
        "sub, old = os.path.join(work, 'sub'), os.path.join(work, 'old')\n"
        "while time.monotonic() < end and not os.path.exists(os.path.join(work, 'stop')):\n"
        "    try:\n"
        "        os.makedirs(sub, exist_ok=True)\n"
        "        os.rename(sub, old)\n"
        "        os.symlink(outside, sub)\n"
        "        os.unlink(sub)\n"
        "        os.rename(old, sub)\n"
        "    except OSError:\n"
        "        pass\n"
    )
    helper = subprocess.Popen([sys.executable, "-c", swapper, str(workspace), str(outside)])
    try:
        for i in range(800):  # the race, tried; test below: the swap after the check, made sure of
            # refused because the folder changed: right too
            with contextlib.suppress(ToolError, OSError):
                tools.write_file(f"sub/f{i}.txt", "x", workdir=workspace)
    finally:
        (workspace / "stop").write_text("")
        helper.wait(timeout=60)
    assert os.listdir(outside) == []


@posix_only
def test_a_folder_swapped_for_a_symlink_after_the_check_is_not_followed(tmp_path):
    root, outside = tmp_path / "work", tmp_path / "outside"
    (root / "sub").mkdir(parents=True)
    outside.mkdir()
    target = workspace.resolve("sub/f.txt", root)  # the check: sub is a folder inside
    (root / "sub").rmdir()
    (root / "sub").symlink_to(outside)  # swapped before the use
    with pytest.raises(ToolError, match="changed while in use"):
        workspace.open_inside(root, target, os.O_WRONLY | os.O_CREAT)
    assert os.listdir(outside) == []


# A replaced file keeps who may read it: its mode, owner and group, and its access list and other
# extended attributes. The access list is written as the kernel stores it (acl(5); linux
# include/uapi/linux/posix_acl_xattr.h): a version, then (tag, permissions, id) entries in order.

ACL_USER_OBJ, ACL_USER, ACL_GROUP_OBJ, ACL_MASK, ACL_OTHER = 0x01, 0x02, 0x04, 0x10, 0x20
NO_ID = 0xFFFFFFFF


def access_list(*entries: tuple[int, int, int]) -> bytes:
    import struct

    return struct.pack("<I", 2) + b"".join(struct.pack("<HHI", *entry) for entry in entries)


def with_attributes(path, attributes: dict) -> bool:
    """Give path these extended attributes; False where the file system keeps none."""
    try:
        for name, value in attributes.items():
            os.setxattr(path, name, value)
    except OSError:
        return False
    return True


@pytest.mark.skipif(not hasattr(os, "setxattr"), reason="extended attributes are Linux's here")
def test_a_replaced_file_keeps_its_access_list_and_extended_attributes(workspace):
    shared = workspace / "shared.txt"
    shared.write_text("old")
    shared.chmod(0o600)
    # The owner may read and write; the user nobody (65534) may read, through the mask; no one else.
    acl = access_list(
        (ACL_USER_OBJ, 6, NO_ID),
        (ACL_USER, 4, 65534),
        (ACL_GROUP_OBJ, 0, NO_ID),
        (ACL_MASK, 4, NO_ID),
        (ACL_OTHER, 0, NO_ID),
    )
    if not with_attributes(shared, {"system.posix_acl_access": acl, "user.origin": b"person"}):
        pytest.skip("this file system keeps no access lists")
    before = (os.getxattr(shared, "system.posix_acl_access"), stat.S_IMODE(shared.stat().st_mode))
    write_file("shared.txt", "new", workdir=workspace)
    assert shared.read_text() == "new"
    assert (
        os.getxattr(shared, "system.posix_acl_access"),
        stat.S_IMODE(shared.stat().st_mode),
    ) == before
    assert os.getxattr(shared, "user.origin") == b"person"


@pytest.mark.skipif(not hasattr(os, "setxattr"), reason="extended attributes are Linux's here")
def test_a_folders_default_access_list_gives_a_replaced_file_no_new_reader(workspace):
    # The temporary file inherits the folder's default list; the file it replaces had none.
    folder = workspace / "team"
    folder.mkdir()
    default = access_list(
        (ACL_USER_OBJ, 7, NO_ID),
        (ACL_USER, 7, 65534),
        (ACL_GROUP_OBJ, 0, NO_ID),
        (ACL_MASK, 7, NO_ID),
        (ACL_OTHER, 0, NO_ID),
    )
    if not with_attributes(folder, {"system.posix_acl_default": default}):
        pytest.skip("this file system keeps no access lists")
    private = folder / "private.txt"
    private.write_text("old")
    with contextlib.suppress(OSError):
        os.removexattr(private, "system.posix_acl_access")
    private.chmod(0o640)
    write_file("team/private.txt", "new", workdir=workspace)
    assert "system.posix_acl_access" not in os.listxattr(private)
    assert stat.S_IMODE(private.stat().st_mode) == 0o640
