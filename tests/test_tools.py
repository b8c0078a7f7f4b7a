"""The tools on real files and real processes in a temporary workspace."""

import os

import pytest
from conftest import posix_only

import tools
from tools import ToolError, read_file, run_shell, write_file


def test_write_then_read_round_trip_with_new_folders(workspace):
    assert (
        write_file("deep/er/note.txt", "héllo\n", workdir=workspace)
        == "wrote 6 characters to deep/er/note.txt"
    )
    assert (workspace / "deep/er/note.txt").read_bytes() == "héllo\n".encode()
    assert read_file("deep/er/note.txt", workdir=workspace) == "héllo\n"


@posix_only
def test_write_takes_a_json_object_as_the_files_json_and_refuses_other_non_text(workspace):
    write_file("package.json", {"name": "demo"}, workdir=workspace)
    assert (workspace / "package.json").read_text() == '{\n  "name": "demo"\n}'
    with pytest.raises(ToolError, match="content must be a string, not int"):
        write_file("n.txt", 391, workdir=workspace)


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
def test_run_shell_runs_in_the_workspace_and_reports_the_exit_status(workspace):
    (workspace / "here.txt").write_text("")
    assert run_shell("ls", workdir=workspace) == "here.txt\n"
    assert (
        run_shell("echo out; echo err >&2; exit 3", workdir=workspace)
        == "out\nerr\n\n[exit status 3]"
    )


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


@posix_only
def test_read_file_refuses_a_fifo_without_waiting_for_a_writer(tmp_path):
    os.mkfifo(tmp_path / "pipe")
    with pytest.raises(ToolError, match="not a regular file"):
        tools.read_file("pipe", workdir=tmp_path)
