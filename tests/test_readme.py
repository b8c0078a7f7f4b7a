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
