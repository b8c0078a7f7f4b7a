"""The README's promises that a test can hold to."""

import re

from conftest import ROOT

README = (ROOT / "README.md").read_text(encoding="utf-8")


def test_ci_runs_the_readme_test_command_word_for_word():
    command = 'python3 -m venv .venv && . .venv/bin/activate && pip install -e ".[test]" && python -m pytest'
    assert command in README.split("\n## ")[0]  # on the first screen
    assert command in (ROOT / ".ci" / "run").read_text().splitlines()


def test_readme_first_screen_shows_how_to_run_the_agent():
    assert (
        "python3 -m venv .venv && . .venv/bin/activate && pip install -e . && python agent.py"
        in README.split("\n## ")[0]
    )


def test_the_pdb_walkthrough_names_the_real_line_numbers():
    shown = int(re.search(r"^(\d+):\s+msg = resp\.choices\[0\]\.message$", README, re.M).group(1))
    lines = (ROOT / "agent.py").read_text(encoding="utf-8").splitlines()
    assert lines[shown - 1].strip() == "msg = resp.choices[0].message"
    assert f"(Pdb) break agent.py:{shown + 1}" in README


def test_the_first_screen_links_the_chinese_quick_start_which_has_the_same_commands():
    first = README.split("\n## ")[0]
    assert "(#中文快速上手)" in first and "## 中文快速上手" in README
    chinese = README.split("## 中文快速上手")[1]
    for command in re.findall(r"^python3 -m venv .*$", first, re.M):
        assert command.split(" && python agent.py")[0] in chinese
    assert 'pip install -e ".[test]" && python -m pytest' in chinese


def test_the_first_screen_says_how_long_the_tests_take_and_how_windows_differs():
    first = README.split("\n## ")[0]
    assert "# install and run the tests (under a minute;" in first
    assert "py -m venv .venv" in first and ".venv\\Scripts\\activate" in first


def test_the_pdb_walkthrough_says_how_to_finish():
    walkthrough = README.split("## Step through the loop")[1].split("\n## ")[0]
    after = walkthrough.split("(Pdb) p len(messages)")[1]
    assert "`clear`" in after and "`q`" in after
