"""The README's promises that a test can hold to."""

import re
from collections import Counter

import pytest
from conftest import AGENT, LESSON, ROOT, msg_line, pdb_replay

README = (ROOT / "README.md").read_text(encoding="utf-8")
CHINESE = (ROOT / "README.zh.md").read_text(encoding="utf-8")


def test_pdb_stops_after_msg_and_shows_the_sdk_objects(tmp_path):
    # Keeps the README's walkthrough true: the line after msg = resp.choices[0].message, found, not
    # hard-coded.
    line = msg_line() + 1
    commands = f"break {AGENT}:{line}\ncontinue\n"
    commands += (
        'p f"name={msg.tool_calls[0].function.name} len={len(messages)} '
        'resp={type(resp).__name__}"\n'
    )
    commands += "clear 1\ncontinue\n"
    work, transcript = str(tmp_path / "work"), str(tmp_path / "t.jsonl")
    flags = ("--yes", "--workdir", work, "--transcript", transcript)
    done = pdb_replay(tmp_path, LESSON, commands, *flags)
    assert "'name=write_file len=2 resp=ChatCompletion'" in done.stdout
    assert (tmp_path / "work" / "tool_demo.py").exists()  # after the breakpoint, the run went on


def test_the_servers_page_lists_the_rules_the_tests_cite():
    section = (ROOT / "docs" / "servers.md").read_text(encoding="utf-8")
    listed = {int(line.split(".")[0]) for line in section.splitlines() if line[:1].isdigit()}
    comments = " ".join(
        path.read_text(encoding="utf-8") for path in (ROOT / "tests").glob("test_*.py")
    )
    cited = {int(number) for number in re.findall(r"# Rule (\d+)", comments)}
    assert cited and cited <= listed == set(range(1, len(listed) + 1))


def test_the_safety_page_says_what_blanking_cannot_stop():
    from conftest import ROOT

    safety = (ROOT / "docs" / "safety.md").read_text(encoding="utf-8")
    for needle in (
        "prompt is the guard",
        "encoded",
        ".env",
        ".git",
        "MAX_CALLS",
        "subreaper",
        "SIGTERM",
    ):
        assert needle in safety


def test_ci_runs_the_readme_test_command_word_for_word():
    command = (
        'python3 -m venv .venv && . .venv/bin/activate && pip install ".[test]" && python -m pytest'
    )
    assert command in README.split("\n## ")[0]  # on the first screen
    assert command in (ROOT / ".ci" / "run").read_text().splitlines()


def test_readme_first_screen_shows_how_to_run_the_agent():
    assert (
        "python3 -m venv .venv && . .venv/bin/activate && pip install . && python agent.py"
        in README.split("\n## ")[0]
    )


def test_the_pdb_walkthrough_names_the_real_line_numbers():
    shown = re.search(r"\(`(\d+):\s+msg = resp\.choices\[0\]\.message`\)", README)
    lines = (ROOT / "agent.py").read_text(encoding="utf-8").splitlines()
    assert lines[int(shown.group(1)) - 1].strip() == "msg = resp.choices[0].message"
    assert f"(Pdb) break agent.py:{int(shown.group(1)) + 1}" in README
    assert "\n$ " not in README and not README.startswith("$ ")  # pasted, a `$ ` is no command


def lesson_one_rows(readme: str) -> list[tuple[str, int, str]]:
    """(file, line, code) of each row of the table "From lesson 1 to this code"."""
    rows = re.findall(r"^\| `.+?` \| `([\w/]+\.py):(\d+)` `(.+?)` \|", readme, re.M)
    return [(name, int(number), code) for name, number, code in rows]


def test_the_lesson_one_table_points_at_the_lines_that_hold_its_code():
    rows = lesson_one_rows(README)
    assert len(rows) == 9
    for name, number, code in rows:
        lines = (ROOT / name).read_text(encoding="utf-8").splitlines()
        assert lines[number - 1].strip() == code, (
            f"{name}:{number} is {lines[number - 1].strip()!r}"
        )


def test_the_chinese_readme_has_the_same_lesson_one_table():
    assert lesson_one_rows(CHINESE) == lesson_one_rows(README)


# README.zh.md says what README.md says, section by section (issue 35). What a reader copies or
# looks up (code, commands, line numbers, links, the shape of each table) is the same in both;
# only the prose is translated.


def prose(readme: str) -> list[str]:
    """The lines of a README outside its fenced code blocks."""
    return re.sub(r"^```.*?^```$", "", readme, flags=re.M | re.S).splitlines()


def code_blocks(readme: str) -> list[str]:
    """The fenced blocks of a README, their comments left out (the Chinese one translates them);
    a program's printed output (```text) whole."""
    blocks = re.findall(r"^```.*?^```$", readme, re.M | re.S)
    return [b if b.startswith("```text") else COMMENT.sub("", b) for b in blocks]


COMMENT = re.compile(r"(?:^|(?<=\s))#[^\n]*", re.M)  # a shell or Python comment to the line's end


def spans(text: str) -> list[str]:
    """The inline code spans of a text, sorted: their order may follow the language's."""
    return sorted(re.findall(r"`([^`]+)`", text))


def headings(readme: str) -> list[str]:
    return [line for line in prose(readme) if line.startswith("#")]


def sections(readme: str) -> list[str]:
    """The text of each section, from its heading to the next: the n-th is the n-th heading's."""
    return re.split(r"^(?=#)", "\n".join(prose(readme)), flags=re.M)[1:]


def tables(readme: str) -> list[list[list[str]]]:
    """Each table: its rows (the header and the |---| line included), each a list of cells."""
    found, rows = [], []
    for line in [*prose(readme), ""]:
        if line.startswith("|"):
            rows.append(re.split(r"(?<!\\)\|", line.strip())[1:-1])  # `\| head` is one cell
        elif rows:
            found.append(rows)
            rows = []
    return found


def slug(heading: str) -> str:
    """The anchor GitHub gives a heading: lower case, punctuation dropped, spaces to hyphens."""
    return re.sub(r"[^\w\- ]", "", heading.lstrip("#").strip().lower()).replace(" ", "-")


def links(readme: str, other: str) -> list[str]:
    """The targets of a README's links in order; a heading's as its number, the other README's
    as "the other README"."""
    numbers = {"#" + slug(line): f"heading {n}" for n, line in enumerate(headings(readme))}
    text = re.sub(r"`[^`]*`", "", "\n".join(prose(readme)))  # TOOL_MAP[name](**args) is no link
    targets = re.findall(r"\]\(([^)\s]+)\)", text)
    return [numbers.get(t, "the other README" if t == other else t) for t in targets]


def test_the_chinese_readme_has_the_same_headings():
    shape = [(line.split()[0], spans(line)) for line in headings(README)]
    assert [(line.split()[0], spans(line)) for line in headings(CHINESE)] == shape


def test_the_chinese_readme_has_the_same_code_blocks_in_the_same_order():
    assert code_blocks(CHINESE) == code_blocks(README)


def test_the_chinese_readme_has_tables_of_the_same_shape():
    assert [[len(row) for row in table] for table in tables(CHINESE)] == [
        [len(row) for row in table] for table in tables(README)
    ]


def test_every_table_cell_of_the_chinese_readme_has_the_same_code():
    for english, chinese in zip(tables(README), tables(CHINESE), strict=True):
        for english_row, chinese_row in zip(english, chinese, strict=True):
            assert [spans(cell) for cell in chinese_row] == [spans(cell) for cell in english_row]


def test_each_section_of_the_chinese_readme_has_the_same_code_spans():
    for english, chinese in zip(sections(README), sections(CHINESE), strict=True):
        extra = Counter(spans(chinese)) - Counter(spans(english))
        missing = Counter(spans(english)) - Counter(spans(chinese))
        assert not extra and not missing, f"{english.splitlines()[0]}: {extra=} {missing=}"


def test_the_chinese_readme_has_the_same_links_in_the_same_order():
    assert links(CHINESE, "README.md") == links(README, "README.zh.md")


def test_the_chinese_readme_leaves_no_english_sentence():
    # What the program prints ("a recorded reply") and code stay in English; a run of 8 English
    # words outside them is a sentence left untranslated.
    for line in prose(CHINESE):
        words = re.sub(r"`[^`]*`|\]\([^)]*\)|\"[^\"]*\"|“[^”]*”", " ", line)
        assert not re.search(r"[A-Za-z]+(?:[\s,;:.()'-]+[A-Za-z0-9]+){7}", words), line


def test_the_chinese_readme_uses_the_words_a_chinese_developer_uses():
    calques = ("接缝", "封存", "重放", "提示缓存", "审阅者", "过程输出", "原话")
    calques += ("能持续的对话", "等你同意的运行")
    assert [word for word in calques if word in CHINESE] == []


def test_the_chinese_readme_calls_a_pause_code_a_confirmation_code():
    # To a Chinese developer 代码 is source code; what --approve takes is a code to type, 确认码.
    pause = sections(CHINESE)[headings(README).index("### A run that waits for your yes")]
    approvals = "".join(line for line in prose(CHINESE) if "--approve" in line)
    assert "确认码" in pause and "代码" not in pause + approvals


def test_the_first_screen_links_the_chinese_readme_which_has_the_same_commands():
    first = README.split("\n## ")[0]
    assert "(README.zh.md)" in first
    for command in re.findall(r"^python3 -m venv .*$", first, re.M):
        assert command.split(" && python agent.py")[0] in CHINESE
    assert 'pip install ".[test]" && python -m pytest' in CHINESE


def test_the_first_screen_says_how_long_the_tests_take_and_how_windows_differs():
    first = README.split("\n## ")[0]
    assert "# install and run the tests (about 90 s on 2 cores;" in first
    assert "py -m venv .venv" in first and ".venv\\Scripts\\activate" in first


def test_the_pdb_walkthrough_says_how_to_finish():
    walkthrough = README.split("## Step through the loop")[1].split("\n## ")[0]
    after = walkthrough.split("(Pdb) p len(messages)")[1]
    assert "`clear`" in after and "`q`" in after


@pytest.mark.parametrize("readme", ["README.md", "README.zh.md"])
def test_the_keyless_way_into_run_from_python_works_as_written(tmp_path, monkeypatch, readme):
    # The block after "No key and no local server?", typed line by line at a Python prompt in
    # this folder: only the run's folder is a temporary one, so that it writes nothing here
    text = (ROOT / readme).read_text(encoding="utf-8")
    after = text.split(
        "No key and no local server?" if readme == "README.md" else "没有 key、也没有本地服务器"
    )[1]
    block = after.split("```python\n", 1)[1].split("```", 1)[0]
    lines = [line.removeprefix(">>> ") for line in block.splitlines()]
    assert lines[0] == "import pathlib, agent" and all(">>>" not in line for line in lines)
    monkeypatch.chdir(ROOT)
    found = {}
    for line in lines:
        exec(
            line.replace("yes=True)", "yes=True, workdir=tmp_path)"), {"tmp_path": tmp_path}, found
        )
    outcome = found["outcome"]
    assert outcome.status == "answered" and "391" in outcome.text
    assert (tmp_path / "tool_demo.py").exists()


def test_a_replay_from_python_given_another_task_says_so(tmp_path, capsys):
    import pathlib

    import agent
    from realworld import replay, transcripts

    path = pathlib.Path(ROOT / "examples" / "lesson-01.jsonl")
    client = replay.Replay(transcripts.read(path), path)
    agent.run("write hello.py", client=client, model="deepseek-flash", yes=True, workdir=tmp_path)
    said = capsys.readouterr().err
    assert said.count("replay: the task 'write hello.py' is not the recorded one") == 1
