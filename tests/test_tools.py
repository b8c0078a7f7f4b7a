"""The tools on real files and real processes in a temporary workspace."""

import os
import shlex
import stat
import sys

import pytest
from conftest import linux_only, open_fifo, posix_only, read_fifo

import tools
from tools import ToolError, read_file, run_shell, write_file


@pytest.fixture(autouse=True)
def workspace(tmp_path):
    root = tmp_path / "work"
    root.mkdir()
    return root


def test_write_then_read_round_trip_with_new_folders(workspace):
    assert write_file("deep/er/note.txt", "héllo\n", workdir=workspace) == "wrote 6 characters to deep/er/note.txt"
    assert (workspace / "deep/er/note.txt").read_bytes() == "héllo\n".encode()
    assert read_file("deep/er/note.txt", workdir=workspace) == "héllo\n"


@posix_only
def test_write_takes_a_json_object_as_the_files_json_and_refuses_other_non_text(workspace):
    write_file("package.json", {"name": "demo"}, workdir=workspace)
    assert (workspace / "package.json").read_text() == '{\n  "name": "demo"\n}'
    with pytest.raises(ToolError, match="content must be a string, not int"):
        write_file("n.txt", 391, workdir=workspace)


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


def test_read_file_answers_missing_folder_and_binary_in_one_line(workspace):
    (workspace / "dir").mkdir()
    (workspace / "dir" / "a.txt").write_text("")
    (workspace / "blob").write_bytes(b"\x89PNG\x00\x01")
    (workspace / "latin1").write_bytes("café".encode("latin-1"))
    for path, expected in [
        ("nope.txt", "does not exist"),
        ("dir", "is a folder"),
        ("blob", "binary file"),
        ("latin1", "binary file"),
    ]:
        with pytest.raises(ToolError, match=expected) as caught:
            read_file(path, workdir=workspace)
        assert "\n" not in str(caught.value)


@posix_only
def test_timeout_kills_the_command_and_its_grandchild_and_keeps_the_output(workspace):
    fd = open_fifo(workspace / "alive")
    with pytest.raises(ToolError) as caught:
        run_shell("exec 3>alive; echo started >&3; echo partial; sleep 600 & wait", workdir=workspace, timeout=1)
    assert str(caught.value).startswith("timed out after 1 seconds and was killed")
    assert "partial" in str(caught.value)
    assert read_fifo(fd, until_eof=True) == b"started\n"  # end-of-file: the background sleep is gone too


@linux_only
@pytest.mark.parametrize("escape", ["setsid", "double-fork"])
def test_a_process_that_leaves_the_group_is_ended_at_the_timeout_too(workspace, escape):
    # It starts its own session, so killing the group misses it, and it keeps the output pipe open.
    fd = open_fifo(workspace / "escaped")
    program = "import os, time; os.setsid(); f = open('escaped', 'w'); f.write('started'); f.flush(); time.sleep(600)"
    start = f"{shlex.quote(sys.executable)} -c {shlex.quote(program)}"
    command = f"echo before; {start} & sleep 600" if escape == "setsid" else f"echo before; ({start} &); sleep 600"
    with pytest.raises(ToolError, match="timed out") as caught:
        run_shell(command, workdir=workspace, timeout=2)
    assert "before" in str(caught.value)
    assert read_fifo(fd, until_eof=True) == b"started"  # end-of-file: nothing holds the FIFO any more


@posix_only
def test_run_shell_runs_in_the_workspace_and_reports_the_exit_status(workspace):
    (workspace / "here.txt").write_text("")
    assert run_shell("ls", workdir=workspace) == "here.txt\n"
    assert run_shell("echo out; echo err >&2; exit 3", workdir=workspace) == "out\nerr\n\n[exit status 3]"


def test_run_shell_refuses_a_command_that_is_not_one_string(workspace):
    with pytest.raises(ToolError, match="one non-empty string"):
        run_shell(["touch", "made"], workdir=workspace)
    assert not (workspace / "made").exists()


@posix_only
def test_run_shell_output_that_is_not_utf8_is_replaced_not_fatal(workspace):
    assert run_shell("printf 'caf\\351'", workdir=workspace) == "caf\N{REPLACEMENT CHARACTER}"


def test_clip_keeps_head_and_tail_and_counts_what_was_left_out():
    text = "H" * 60 + "x" * 1000 + "T" * 60
    clipped = tools.clip(text, 100)
    assert clipped.startswith("H" * 50) and clipped.endswith("T" * 50)
    assert "[... 1020 characters left out ...]" in clipped
    assert tools.clip("short") == "short"


def test_a_path_through_a_file_is_refused_in_one_line(workspace):
    (workspace / "file").write_text("")
    with pytest.raises(ToolError, match="file is not a folder inside the workspace"):
        write_file("file/inside.txt", "x", workdir=workspace)
