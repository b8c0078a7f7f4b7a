"""The README's promises that a test can hold to."""

import re

from conftest import AGENT, LESSON, ROOT, msg_line, pdb_replay

README = (ROOT / "README.md").read_text(encoding="utf-8")


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
        "python3 -m venv .venv && . .venv/bin/activate && "
        'pip install -e ".[test]" && python -m pytest'
    )
    assert command in README.split("\n## ")[0]  # on the first screen
    assert command in (ROOT / ".ci" / "run").read_text().splitlines()


def test_readme_first_screen_shows_how_to_run_the_agent():
    assert (
        "python3 -m venv .venv && . .venv/bin/activate && pip install -e . && python agent.py"
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
    chinese = (ROOT / "README.zh.md").read_text(encoding="utf-8")
    assert lesson_one_rows(chinese) == lesson_one_rows(README)


def test_the_first_screen_links_the_chinese_readme_which_has_the_same_commands():
    first = README.split("\n## ")[0]
    assert "(README.zh.md)" in first
    chinese = (ROOT / "README.zh.md").read_text(encoding="utf-8")
    for command in re.findall(r"^python3 -m venv .*$", first, re.M):
        assert command.split(" && python agent.py")[0] in chinese
    assert 'pip install -e ".[test]" && python -m pytest' in chinese


def test_the_first_screen_says_how_long_the_tests_take_and_how_windows_differs():
    first = README.split("\n## ")[0]
    assert "# install and run the tests (about 90 s on 2 cores;" in first
    assert "py -m venv .venv" in first and ".venv\\Scripts\\activate" in first


def test_the_pdb_walkthrough_says_how_to_finish():
    walkthrough = README.split("## Step through the loop")[1].split("\n## ")[0]
    after = walkthrough.split("(Pdb) p len(messages)")[1]
    assert "`clear`" in after and "`q`" in after
