"""Nothing the agent writes as its own output replaces what stands at its path (issue #42, family
1): python agent.py --html run.jsonl run.jsonl replaced the transcript with its page, and
--html examples/lesson-01.jsonl agent.py replaced agent.py. Every file of its own (the --html
page, a --transcript, a transcript in runs/) is made by transcripts.create(): O_CREAT | O_EXCL |
O_NOFOLLOW, so whatever stands there (a file, the same file by another name, a link to one or to
nothing, a folder, a FIFO) is refused in one line, exit status 2, and nothing is written."""

import os
import stat

import pytest
from conftest import LESSON, posix_only, run_offline

from realworld import transcripts

LESSON_BYTES = LESSON.read_bytes()


def standing(tmp_path, kind: str):
    """What stands at the output's path, and the file whose bytes must stay as they are."""
    kept = tmp_path / "run.jsonl"
    kept.write_bytes(LESSON_BYTES)
    at = tmp_path / "out"
    if kind == "the file itself":
        at = kept
    elif kind == "the file as ./name":
        at = tmp_path / "." / "run.jsonl"
    elif kind == "a hard link to it":
        os.link(kept, at)
    elif kind == "a symlink to it":
        at.symlink_to(kept)
    elif kind == "a symlink to nothing":
        at.symlink_to(tmp_path / "missing")
    elif kind == "a folder":
        at.mkdir()
    elif kind == "a FIFO":  # opened for writing, it would wait for a reader
        os.mkfifo(at)
    return at, kept


KINDS = [
    "the file itself",
    "the file as ./name",
    "a hard link to it",
    "a symlink to it",
    "a symlink to nothing",
    "a folder",
    "a FIFO",
]


def nothing_was_made(tmp_path, at, kept) -> None:
    assert kept.read_bytes() == LESSON_BYTES
    assert not (tmp_path / "missing").exists(), "the link's target was made"
    if at.is_dir() and not at.is_symlink():
        assert list(at.iterdir()) == []


@posix_only
@pytest.mark.parametrize("kind", KINDS)
def test_html_never_replaces_what_stands_at_the_page_path(tmp_path, kind):
    at, kept = standing(tmp_path, kind)
    done = run_offline(tmp_path, "--html", str(kept), str(at))
    assert done.returncode == 2, done.stderr
    assert done.stderr.count("\n") == 1 and "Traceback" not in done.stderr
    assert "exists already" in done.stderr and "give a new name" in done.stderr
    nothing_was_made(tmp_path, at, kept)


@posix_only
@pytest.mark.parametrize("kind", KINDS)
def test_a_transcript_never_replaces_what_stands_at_its_path(tmp_path, kind):
    at, kept = standing(tmp_path, kind)
    # a replay starts no server: the transcript is opened before anything is sent
    done = run_offline(tmp_path, "--replay", str(LESSON), "--transcript", str(at), "--yes")
    assert done.returncode == 2, done.stderr
    assert done.stderr.count("\n") == 1 and "exists already" in done.stderr
    nothing_was_made(tmp_path, at, kept)


def test_the_agents_own_file_is_not_replaced_by_its_page(tmp_path):
    # the second sample, on a copy: --html examples/lesson-01.jsonl agent.py
    program = tmp_path / "agent.py"
    program.write_text("print('the program')\n")
    done = run_offline(tmp_path, "--html", str(LESSON), str(program))
    assert done.returncode == 2 and program.read_text() == "print('the program')\n"


@posix_only
def test_a_new_page_is_written_owner_only_and_said(tmp_path):
    page = tmp_path / "page.html"
    done = run_offline(tmp_path, "--html", str(LESSON), str(page))
    assert done.returncode == 0, done.stderr
    assert page.read_text(encoding="utf-8").startswith("<!DOCTYPE html>")
    assert stat.S_IMODE(page.stat().st_mode) == 0o600  # it holds what the transcript holds


@posix_only
def test_create_refuses_every_standing_thing_without_opening_it(tmp_path):
    for kind in KINDS:
        folder = tmp_path / kind.replace(" ", "-").replace("/", "")
        folder.mkdir()
        at, kept = standing(folder, kind)
        with pytest.raises(FileExistsError) as e:
            transcripts.create(at)
        assert "exists already" in transcripts.refused(e.value)
        nothing_was_made(folder, at, kept)
