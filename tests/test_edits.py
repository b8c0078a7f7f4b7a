"""write_file(path, content, old): an edit replaces the one place where old stands (issue #45).

The family is what edit tools of other agents answer: Anthropic's text editor tool (str_replace:
old_str must match exactly one place, or nothing is written and the model is told how many it
matched), Claude Code's Edit (old_string unique in the file), aider's search/replace blocks and
Codex's apply_patch (a Windows file's \\r\\n matched to the model's \\n). Each member is a real
file in a temporary workspace, and a call through run_call() as the loop makes it; the calls the
model writes as text are read with the schema the request offers.
"""

import json
import os
import stat

import pytest
from conftest import posix_only
from scripted_server import call, reply

import tools
from realworld import calls, consent, dialects, page
from tools import ToolError, write_file

APP = "def total(xs):\n    return sum(xs)\n\nprint(total([1, 2]))\n"


def edit(workspace, old, content, path="app.py"):
    return write_file(path, content, old, workdir=workspace)


def test_an_edit_replaces_the_one_place_old_stands_and_keeps_the_rest(workspace):
    (workspace / "app.py").write_text(APP)
    said = edit(workspace, "sum(xs)", "sum(xs) * 2")
    assert (workspace / "app.py").read_text() == APP.replace("sum(xs)", "sum(xs) * 2")
    assert said == f"wrote {len(APP) + 4} characters to app.py"


@pytest.mark.parametrize(
    "old, said",
    [
        ("product(xs)", "old stands nowhere in app.py; nothing was written: read the file"),
        ("total", "old stands in 2 places in app.py; nothing was written: give more"),
    ],
)
def test_old_that_stands_nowhere_or_twice_writes_nothing_and_says_how_many(workspace, old, said):
    (workspace / "app.py").write_text(APP)
    before = os.stat(workspace / "app.py")
    with pytest.raises(ToolError, match=said):
        edit(workspace, old, "x")
    assert (workspace / "app.py").read_text() == APP
    assert os.stat(workspace / "app.py").st_mtime_ns == before.st_mtime_ns


def test_overlapping_places_are_more_than_one_and_each_is_counted(workspace):
    (workspace / "a.txt").write_text("aaaa")
    with pytest.raises(ToolError, match=r"old stands in 3 places in a\.txt"):
        edit(workspace, "aa", "b", "a.txt")
    assert (workspace / "a.txt").read_text() == "aaaa"
    (workspace / "many.txt").write_text("x" * 100_000)
    with pytest.raises(ToolError, match="old stands in more than 100 places"):
        edit(workspace, "x", "y", "many.txt")


def test_an_empty_old_is_refused_never_read_as_the_whole_file(workspace):
    (workspace / "app.py").write_text(APP)
    with pytest.raises(ToolError, match="old must be the exact text to replace, not empty"):
        edit(workspace, "", "print('gone')\n")
    assert (workspace / "app.py").read_text() == APP  # nothing the person had is lost


def test_a_null_old_is_no_old_the_whole_file_is_written(workspace):
    (workspace / "app.py").write_text(APP)
    edit(workspace, None, "print(1)\n")
    assert (workspace / "app.py").read_text() == "print(1)\n"


@pytest.mark.parametrize(
    "old, said",
    [
        (10, "old must be a string, not int"),  # as content must be (as_text())
        (True, "old must be a string, not bool"),
        ({"a": 1}, "old must be a string, not dict"),
    ],
)
def test_an_old_that_is_no_string_is_refused_saying_so(workspace, old, said):
    (workspace / "n.txt").write_text("limit = 10\n")
    with pytest.raises(ToolError, match=said):
        edit(workspace, old, "20", "n.txt")
    assert (workspace / "n.txt").read_text() == "limit = 10\n"


def test_an_edit_of_a_file_that_does_not_exist_says_how_to_create_it(workspace):
    with pytest.raises(
        ToolError, match=r"new\.py does not exist, so old stands nowhere; leave old"
    ):
        edit(workspace, "x", "y", "new.py")
    assert not (workspace / "new.py").exists()


@pytest.mark.parametrize(
    "data, old, content, after",
    [
        # a Windows file; the model writes its lines with \n (Codex's apply_patch matches them)
        (b"a = 1\r\nb = 2\r\n", "a = 1\nb = 2", "a = 1\nb = 3", b"a = 1\r\nb = 3\r\n"),
        # a file of \n; the model writes \r\n
        (b"a = 1\nb = 2\n", "a = 1\r\nb = 2", "a = 1\r\nb = 3", b"a = 1\nb = 3\n"),
        # a byte-order mark stays where it is
        ("\ufeffa = 1\n".encode(), "a = 1", "a = 2", "\ufeffa = 2\n".encode()),
        # the new text takes the file's line ends whether old matched as written or not
        (b"a = 1\r\nb = 2\r\n", "a = 1", "a = 1\nc = 3", b"a = 1\r\nc = 3\r\nb = 2\r\n"),
        (b"a\r\nb\r\n", "a\r\nb", "A\nB", b"A\r\nB\r\n"),
        (b"a = 1\nb = 2\n", "a = 1", "a = 1\r\nc = 3", b"a = 1\nc = 3\nb = 2\n"),
        # a file of both kinds keeps what the model wrote: which kind it meant is a guess
        (b"a\r\nb\nc\n", "b\n", "B\r\n", b"a\r\nB\r\nc\n"),
    ],
    ids=["crlf-file", "lf-file", "bom", "crlf-new", "crlf-exact", "lf-new", "mixed"],
)
def test_an_edit_reads_the_models_line_ends_as_the_files(workspace, data, old, content, after):
    (workspace / "w.txt").write_bytes(data)
    edit(workspace, old, content, "w.txt")
    assert (workspace / "w.txt").read_bytes() == after


def test_an_edit_of_what_is_not_text_is_refused(workspace):
    (workspace / "blob").write_bytes(b"\x89PNG\x00ab")
    (workspace / "latin1").write_bytes("café".encode("latin-1"))
    for path in ("blob", "latin1"):
        with pytest.raises(ToolError, match="text"):
            edit(workspace, "a", "b", path)
    assert (workspace / "blob").read_bytes() == b"\x89PNG\x00ab"


@posix_only
def test_an_edit_keeps_the_workspaces_protections_and_the_files_mode(workspace, tmp_path):
    (workspace / ".env").write_text("KEY=1\n")
    with pytest.raises(ToolError):
        edit(workspace, "KEY=1", "KEY=2", ".env")
    assert (workspace / ".env").read_text() == "KEY=1\n"
    (tmp_path / "outside.txt").write_text("secret\n")
    (workspace / "link.txt").symlink_to(tmp_path / "outside.txt")
    with pytest.raises(ToolError):
        edit(workspace, "secret", "gone", "link.txt")
    assert (tmp_path / "outside.txt").read_text() == "secret\n"
    (workspace / "run.sh").write_text("echo 1\n")
    os.chmod(workspace / "run.sh", 0o750)
    edit(workspace, "1", "2", "run.sh")
    assert stat.S_IMODE(os.stat(workspace / "run.sh").st_mode) == 0o750


def test_the_schema_offers_old_as_optional_and_prefers_an_edit_for_a_small_change():
    [schema] = [t["function"] for t in tools.TOOLS if t["function"]["name"] == "write_file"]
    assert schema["parameters"]["required"] == ["path", "content"]
    assert "old" in schema["parameters"]["properties"]
    assert "prefer an edit" in schema["description"]


def test_a_call_without_content_or_with_another_name_says_what_write_file_takes(workspace):
    with pytest.raises(ToolError, match=r"takes path, content, old \(optional\); missing: content"):
        tools.check_args("write_file", json.dumps({"path": "a", "old": "x"}))
    assert tools.check_args("write_file", json.dumps({"path": "a", "content": "b"})) == {
        "path": "a",
        "content": "b",
    }


@pytest.mark.parametrize(
    "text",
    [
        # Hermes / Qwen <tool_call> JSON (vLLM hermes_tool_parser.py), with old and without
        '<tool_call>\n{"name": "write_file", "arguments": {"path": "a.txt", "content": "B", '
        '"old": "A"}}\n</tool_call>',
        '<tool_call>\n{"name": "write_file", "arguments": {"path": "a.txt", "content": "B"}}\n'
        "</tool_call>",
        # Qwen3-Coder's XML parameters (vLLM qwen3coder_tool_parser.py)
        "<tool_call>\n<function=write_file>\n<parameter=path>\na.txt\n</parameter>\n"
        "<parameter=content>\nB\n</parameter>\n<parameter=old>\nA\n</parameter>\n</function>\n"
        "</tool_call>",
        # a null for the optional old: a whole write (Hermes JSON, a Python literal's None)
        '<tool_call>{"name": "write_file", "arguments": {"path": "a.txt", "content": "B", '
        '"old": null}}</tool_call>',
        'write_file(path="a.txt", content="B", old=None)',
    ],
    ids=["hermes-edit", "hermes-whole", "qwen3-coder-edit", "hermes-null", "python-none"],
)
def test_a_call_written_as_text_is_read_with_old_or_without(text):
    known = calls.parameters(tools.TOOLS)
    [found] = dialects.recover_tool_calls(text, known, ())[0]
    arguments = json.loads(found["function"]["arguments"])
    assert found["function"]["name"] == "write_file" and arguments["path"] == "a.txt"
    assert arguments["content"] == "B" and arguments.get("old", "A") in ("A", None)


def test_a_call_with_a_parameter_no_tool_takes_is_no_call():
    known = calls.parameters(tools.TOOLS)
    text = (
        '<tool_call>{"name": "write_file", "arguments": {"path": "a", "content": "b", '
        '"mode": "x"}}</tool_call>'
    )
    assert dialects.recover_tool_calls(text, known, ())[0] == []


def test_the_page_shows_an_edit_as_the_old_lines_and_the_new():
    arguments = json.dumps({"path": "app.py", "content": "b = 3\nc = 4", "old": "b = 2"})
    shown = consent.edit_shown("write_file", arguments)
    assert shown == "edit app.py:\n- b = 2\n+ b = 3\n+ c = 4"
    html = page.call_and_result(
        {"id": "w1", "function": {"name": "write_file", "arguments": arguments}}, None
    )
    assert "- b = 2\n+ b = 3" in html
    whole = json.dumps({"path": "app.py", "content": "b = 3"})
    assert consent.edit_shown("write_file", whole) is None
    # what would draw over another line, or as nothing, is an escape: a \r, a bidi override
    hidden = json.dumps({"path": "a\u202e.py", "content": "x = 1\rx = 2", "old": "y\x1b[2K"})
    assert consent.edit_shown("write_file", hidden) == (
        "edit a\\u202e.py:\n- y\\x1b[2K\n+ x = 1\\rx = 2"
    )


# an edit of app.py written as text, in Hermes' <tool_call> JSON (vLLM hermes_tool_parser.py)
DOUBLE_AS_TEXT = (
    '<tool_call>\n{"name": "write_file", "arguments": {"path": "app.py", "content": '
    '"sum(xs) * 2", "old": "sum(xs)"}}\n</tool_call>'
)


@posix_only
def test_an_edit_written_as_text_asks_with_the_old_text_and_the_new(agent, server):
    agent.workdir.mkdir()
    (agent.workdir / "app.py").write_text(APP)
    server.add(reply(DOUBLE_AS_TEXT), reply("done"))
    done = agent("--yes", "double it", terminal="y\n")
    assert done.returncode == 0, done.stderr
    assert (
        "In app.py, replace these 7 characters:\n    sum(xs)\nwith these 11:\n    sum(xs) * 2"
        in done.stderr
    )
    assert "Make this edit? [y/N]" in done.stderr
    assert (agent.workdir / "app.py").read_text() == APP.replace("sum(xs)", "sum(xs) * 2")


def test_an_edit_through_the_loop_reaches_the_model_as_its_result(loop, server):
    (loop.workdir / "app.py").write_text(APP)
    server.add(
        reply(
            tool_calls=[call("write_file", {"path": "app.py", "content": "x", "old": "nope"}, "e1")]
        ),
        reply(
            tool_calls=[
                call(
                    "write_file", {"path": "app.py", "content": "prod(xs)", "old": "sum(xs)"}, "e2"
                )
            ]
        ),
        reply("done"),
    )
    ran = loop("fix it")
    assert ran.status == "answered"
    assert server.messages(1)[-1]["content"].startswith("error: old stands nowhere in app.py")
    assert server.messages(2)[-1]["content"].startswith("wrote ")
    assert (loop.workdir / "app.py").read_text() == APP.replace("sum(xs)", "prod(xs)")


def test_a_file_past_the_edit_bound_is_refused_without_being_read_whole(workspace):
    from realworld.workspace import EDIT_MOST

    (workspace / "big.txt").write_bytes(b"a = 1\n" + b"x" * EDIT_MOST)
    with pytest.raises(ToolError, match="too large for an edit"):
        edit(workspace, "a = 1", "a = 2", "big.txt")
    assert (workspace / "big.txt").read_bytes().startswith(b"a = 1\n")


def test_a_value_that_holds_a_parameters_opening_tag_is_no_call():
    # Qwen3-Coder's XML (vLLM qwen3coder_tool_parser.py): content that shows <parameter=old>
    # would end at it, and old take its text; the closing tag left over says the reading is
    # a guess, so it is no call, and nothing is written on it
    text = (
        "<tool_call>\n<function=write_file>\n<parameter=path>\nREADME.md\n</parameter>\n"
        "<parameter=content>\n# Calls\nAn edit names the text to replace:\n<parameter=old>\nX\n"
        "</parameter>\n</parameter>\n</function>\n</tool_call>"
    )
    assert dialects.recover_tool_calls(text, calls.parameters(tools.TOOLS), ())[0] == []


def test_show_says_an_edit_as_the_old_lines_and_the_new(loop, server):
    (loop.workdir / "app.py").write_text(APP)
    arguments = {"path": "app.py", "content": "sum(xs) * 2 # " + "long " * 80, "old": "sum(xs)"}
    server.add(reply(tool_calls=[call("write_file", arguments, "e1")]), reply("done"))
    ran = loop("double it")
    shown = "\n".join(page.shown(ran.events(), "system"))
    said = "  → write_file, edit app.py:\n      - sum(xs)\n      + sum(xs) * 2 # long"
    assert said in shown, shown


@posix_only
def test_a_paused_edit_is_listed_as_its_old_text_and_new(agent, server):
    agent.workdir.mkdir()
    (agent.workdir / "app.py").write_text(APP)
    server.add(reply(DOUBLE_AS_TEXT))
    paused = agent("--yes", "double it")  # no terminal: a call written as text waits
    assert paused.returncode == 4, paused.stderr
    assert "    edit app.py:\n    - sum(xs)\n    + sum(xs) * 2" in paused.stderr
    assert (agent.workdir / "app.py").read_text() == APP
