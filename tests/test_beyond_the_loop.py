"""Lessons 8 and 9 as programs against a server: a subagent (examples/subagent.py) and a
handoff (examples/handoff.py), each built on run() with agent.py unchanged (issue 26). What each
request carried is checked: the subagent's own conversation and tools, the handoff's system
prompt and tools.

The shapes follow the two references the issue names: learn-claude-code's s04 subagent (a tool
whose work is the loop on a fresh messages list, returning only its final text) and openai-agents'
handoffs (a tool `transfer_to_<agent>`; from the next turn on, that agent's instructions and tools
on the same conversation: openai-agents-python, src/agents/handoffs.py and docs/handoffs.md)."""

import importlib.util

import pytest
from conftest import ROOT, events_of
from scripted_server import call, history_problem, reply

from agent import SYSTEM_PROMPT
from realworld import runs

SUBAGENT, HANDOFF = ROOT / "examples" / "subagent.py", ROOT / "examples" / "handoff.py"


def program(path):
    """A lesson's program, imported as a module: importing it changes nothing of the agent's."""
    spec = importlib.util.spec_from_file_location(path.stem, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


subagent, handoff = program(SUBAGENT), program(HANDOFF)


def tool_names(server, n: int) -> list[str]:
    return [t["function"]["name"] for t in server.requests[n]["body"]["tools"]]


@pytest.fixture
def notes(agent):
    agent.workdir.mkdir(exist_ok=True)
    (agent.workdir / "notes.txt").write_text("milk\neggs\n")
    return agent


def test_the_subagent_gets_a_fresh_conversation_fewer_tools_and_only_its_answer_returns(
    notes, server
):
    server.add(
        reply(tool_calls=[call("ask_helper", {"question": "what is in notes.txt?"}, "h1")]),
        reply(tool_calls=[call("read_file", {"path": "notes.txt"}, "r1")]),
        reply("milk and eggs"),
        reply("The notes say milk and eggs."),
    )
    done = notes("what do my notes say?", program=SUBAGENT)
    assert done.returncode == 0 and done.stdout == "The notes say milk and eggs.\n"
    helper = server.messages(1)
    assert helper == [
        {"role": "system", "content": subagent.HELPER_PROMPT},
        {"role": "user", "content": "what is in notes.txt?"},
    ]
    assert tool_names(server, 1) == ["read_file"] == tool_names(server, 2)
    assert (
        tool_names(server, 0)
        == tool_names(server, 3)
        == [
            "read_file",
            "write_file",
            "run_shell",
            "ask_helper",
        ]
    )
    last = server.messages(3)
    assert last[0]["content"] == SYSTEM_PROMPT and last[-1] == {
        "role": "tool",
        "tool_call_id": "h1",
        "content": "milk and eggs",
    }
    assert "r1" not in str(last)  # the helper's steps stay in its own conversation
    for n in range(4):
        assert history_problem(server.messages(n)) is None
    events = events_of(done.transcript)
    assert {e.get("under") for e in events if e["type"] == "assistant/message"} == {None, "h1"}
    assert [m["role"] for m in runs.conversation(events)] == [
        "system",
        "user",
        "assistant",
        "tool",
        "assistant",
    ]


def test_the_subagent_cannot_run_a_tool_it_was_not_offered(notes, server):
    server.add(
        reply(tool_calls=[call("ask_helper", {"question": "clean up"}, "h1")]),
        reply(tool_calls=[call("write_file", {"path": "x.txt", "content": "x"}, "w1")]),
        reply("I could not write"),
        reply("done"),
    )
    done = notes("go", program=SUBAGENT)
    assert done.returncode == 0 and not (notes.workdir / "x.txt").exists()
    assert server.messages(2)[-1]["content"].startswith("error: unknown tool 'write_file'")


def test_a_subagent_that_stops_without_an_answer_says_why_as_the_result(notes, server):
    server.add(reply(tool_calls=[call("ask_helper", {"question": "loop"}, "h1")]))
    for n in range(subagent.HELPER_STEPS):
        server.add(reply(tool_calls=[call("read_file", {"path": "notes.txt"}, f"r{n}")]))
    server.add(reply("it gave up"))
    done = notes("go", program=SUBAGENT)
    assert done.returncode == 0
    result = server.messages(subagent.HELPER_STEPS + 1)[-1]["content"]
    assert result == f"the helper used its {subagent.HELPER_STEPS} steps without an answer"


def test_the_handoff_sends_the_reviewers_prompt_and_tools_on_the_same_conversation(notes, server):
    server.add(
        reply(tool_calls=[call("transfer_to_reviewer", {}, "t1")]),
        reply(tool_calls=[call("read_file", {"path": "notes.txt"}, "r1")]),
        reply("Looks fine."),
    )
    done = notes("review my notes", program=HANDOFF)
    assert done.returncode == 0 and done.stdout == "Looks fine.\n"
    first, after = server.messages(0), server.messages(1)
    assert first[0]["content"] == SYSTEM_PROMPT
    assert after[0] == {"role": "system", "content": handoff.REVIEWER_PROMPT}
    assert after[1:2] == first[1:] and after[-1]["tool_call_id"] == "t1"  # same conversation
    assert tool_names(server, 0)[-1] == "transfer_to_reviewer"
    assert tool_names(server, 1) == tool_names(server, 2) == ["read_file"]
    for n in range(3):
        assert history_problem(server.messages(n)) is None
    [event] = [e for e in events_of(done.transcript) if e["type"] == "agent/handoff"]
    assert event["to"] == "reviewer" and event["system_prompt"] == handoff.REVIEWER_PROMPT


def test_a_handoff_accepts_arguments_a_model_sends_to_a_tool_with_none(notes, server):
    # Small models send "" or null for a tool without parameters; the client makes them {}.
    server.add(
        reply(tool_calls=[call("transfer_to_reviewer", "", "t1")]),
        reply("ok"),
    )
    done = notes("go", program=HANDOFF)
    assert done.returncode == 0
    assert server.messages(1)[0]["content"] == handoff.REVIEWER_PROMPT


def test_the_default_agent_keeps_its_three_tools(agent, server):
    server.add(reply("hi"))
    agent("go")
    assert tool_names(server, 0) == ["read_file", "write_file", "run_shell"]


def test_the_helpers_lines_are_shown_inside_the_callers_step(notes, server):
    server.add(
        reply(tool_calls=[call("ask_helper", {"question": "what is in notes.txt?"}, "h1")]),
        reply(tool_calls=[call("read_file", {"path": "notes.txt"}, "r1")]),
        reply("milk and eggs"),
        reply("The notes say milk and eggs."),
    )
    lines = notes("what do my notes say?", program=SUBAGENT).stderr.splitlines()
    inside = lines[
        lines.index("  ┌ the helper's own loop:") + 1 : lines.index("  └ the helper: answered")
    ]
    assert [line.split(":")[0] for line in inside if "step" in line] == ["  │ step 1", "  │ step 2"]
    assert all(line.startswith("  │ ") for line in inside), inside  # its call and result too
    assert sum(line.startswith("step ") for line in lines) == 2  # the caller's own two steps


def test_a_programs_help_gives_examples_of_itself(agent):
    done = agent("--help", program=SUBAGENT)
    examples = done.stdout.split("examples:")[1]
    assert "subagent.py --replay TRANSCRIPT   (its lesson" in examples
    assert "python agent.py" not in examples and "lesson-01" not in examples
