"""The loop, called in this process against a scripted server: what it sends back, and what it
does with what it gets.

The rule numbers are those of docs/servers.md."""

import itertools
import json

import pytest
from conftest import tool_messages
from scripted_server import Stream, call, reply

from realworld import pauses, replies


def test_a_non_function_tool_call_is_answered_not_fatal(loop, server):
    custom = {"id": "c1", "type": "custom", "custom": {"name": "grep", "input": "x"}}
    server.add(reply(tool_calls=[custom]), reply("done"))
    result = loop("go")
    assert result.status == "answered"
    assert server.messages(1)[-1]["content"].startswith("error: unknown tool ''")


def scripted_replies():
    """Two steps with parallel calls, reasoning and text, then an answer."""
    return [
        reply(
            "Let me look.",
            reasoning_content="two files",
            tool_calls=[
                call("write_file", {"path": "a.txt", "content": "alpha"}, id="w1"),
                call("read_file", {"path": "a.txt"}, id="r1"),
            ],
        ),
        reply(tool_calls=[call("read_file", {"path": "missing"}, id="r2")]),
        reply("All done, à bientôt."),
    ]


def without_timing(events):
    return [{k: v for k, v in e.items() if k not in ("time", "latency_ms")} for e in events]


@pytest.mark.parametrize("same_index", [False, True], ids=["indexed", "ollama-style"])
def test_a_streamed_run_equals_the_same_run_not_streamed(loop, server, same_index):
    server.add(*scripted_replies())
    plain = loop("go")
    server.add(*[Stream(r, size=3, same_index=same_index) for r in scripted_replies()])
    streamed = loop("go", stream=True)
    assert (
        (streamed.status, streamed.text)
        == (plain.status, plain.text)
        == ("answered", "All done, à bientôt.")
    )
    assert without_timing(streamed.events()) == without_timing(plain.events())
    assert [r["body"]["messages"] for r in server.requests[3:]] == [
        r["body"]["messages"] for r in server.requests[:3]
    ]
    assert server.requests[3]["body"]["stream"] is True
    assert server.requests[3]["body"]["stream_options"] == {"include_usage": True}


def test_a_stream_that_ends_without_finish_reason_is_cut_off(loop, server):
    server.add(
        Stream(reply(tool_calls=[call("write_file", {"path": "a", "content": "x"})]), cut=True)
    )
    result = loop("go", stream=True)
    assert result.status == "incomplete_stream"
    assert not (loop.workdir / "a").exists()
    assert "stream ended before the reply was complete" in result.stderr


def test_answer_without_tool_calls_ends_the_run(loop, server):
    server.add(reply("The answer is 42."))
    result = loop("what is six times seven")
    assert (result.status, result.text) == ("answered", "The answer is 42.")
    assert len(server.requests) == 1


def test_content_given_as_a_list_of_parts_is_their_text_joined(loop, server):
    # OpenAI's content array: some servers send the answer as parts rather than one string.
    server.add(reply([{"type": "text", "text": "a"}, {"type": "text", "text": "b"}]))
    result = loop("go")
    assert (result.status, result.text) == ("answered", "ab")


def test_request_carries_model_tools_system_prompt_and_task(loop, server):
    server.add(reply("ok"))
    loop("say ok")
    body = server.requests[0]["body"]
    assert body["model"] == "test-model"
    assert [t["function"]["name"] for t in body["tools"]] == [
        "read_file",
        "write_file",
        "run_shell",
    ]
    assert [m["role"] for m in body["messages"]] == ["system", "user"]
    assert body["messages"][1]["content"] == "say ok"


def test_tool_call_runs_and_its_result_goes_back_with_the_call_id(loop, server):
    server.add(
        reply(tool_calls=[call("write_file", {"path": "a.txt", "content": "hi"}, id="call_1")]),
        reply("done"),
    )
    result = loop("write a.txt")
    assert result.status == "answered"
    assert (loop.workdir / "a.txt").read_text() == "hi"
    tool = server.messages(1)[-1]
    assert tool == {
        "role": "tool",
        "tool_call_id": "call_1",
        "content": "wrote 2 characters to a.txt",
    }


def test_assistant_message_is_sent_back_explicitly_with_string_content(loop, server):
    # Rule 1: null content becomes "", and every tool call has id, type and string arguments.
    server.add(reply(None, tool_calls=[call("read_file", {"path": "x"}, id="c1")]), reply("done"))
    loop("read x")
    assistant = server.messages(1)[2]
    assert assistant == {
        "role": "assistant",
        "content": "",
        "tool_calls": [
            {
                "id": "c1",
                "type": "function",
                "function": {"name": "read_file", "arguments": '{"path": "x"}'},
            }
        ],
    }


def test_missing_type_is_filled_in(loop, server):
    raw = {"id": "c1", "function": {"name": "read_file", "arguments": '{"path": "x"}'}}
    server.add(reply(None, tool_calls=[raw]), reply("done"))
    loop("read x")
    assert server.messages(1)[2]["tool_calls"][0]["type"] == "function"


def test_reasoning_content_is_passed_back(loop, server):
    # Rule 2: DeepSeek's thinking mode needs it on later requests.
    server.add(
        reply(
            None, tool_calls=[call("read_file", {"path": "x"})], reasoning_content="I should look."
        ),
        reply(None, tool_calls=[call("read_file", {"path": "y"})], reasoning_content=None),
        reply("done"),
    )
    loop("look")
    assert server.messages(1)[2]["reasoning_content"] == "I should look."
    assert server.messages(2)[4]["reasoning_content"] is None  # sent back as it came


def test_reasoning_content_is_not_invented(loop, server):
    server.add(reply(None, tool_calls=[call("read_file", {"path": "x"})]), reply("done"))
    loop("look")
    assert "reasoning_content" not in server.messages(1)[2]


def test_missing_empty_and_repeated_ids_get_fresh_unique_ids(loop, server):
    # Rule 3: the same fresh id is used in the assistant message and its tool message.
    server.add(
        reply(
            tool_calls=[
                call("read_file", {"path": "a"}, id=None),
                call("read_file", {"path": "b"}, id=""),
                call("read_file", {"path": "c"}, id="dup"),
                call("read_file", {"path": "d"}, id="dup"),
            ]
        ),
        reply(tool_calls=[call("read_file", {"path": "e"}, id="dup")]),
        reply("done"),
    )
    loop("read")
    messages = server.messages(2)
    ids = [c["id"] for m in messages if m["role"] == "assistant" for c in m["tool_calls"]]
    assert len(ids) == 5 and len(set(ids)) == 5 and all(ids)
    assert ids[2] == "dup"
    assert [m["tool_call_id"] for m in tool_messages(messages)] == ids


def test_object_arguments_become_a_string_and_blank_arguments_become_empty_object(loop, server):
    raw_object = {
        "id": "c1",
        "type": "function",
        "function": {"name": "read_file", "arguments": {"path": "a"}},
    }
    server.add(
        reply(
            tool_calls=[
                raw_object,
                call("run_shell", "  ", id="c2"),
                call("run_shell", None, id="c3"),
            ]
        ),
        reply("done"),
    )
    loop("go")
    sent = [c["function"]["arguments"] for c in server.messages(1)[2]["tool_calls"]]
    assert sent == ['{"path": "a"}', "{}", "{}"]
    assert "missing: command" in tool_messages(server.messages(1))[1]["content"]


def test_every_call_gets_one_tool_message_in_order_right_after_the_assistant_message(loop, server):
    # Rule 4, also when a call fails.
    server.add(
        reply(
            tool_calls=[
                call("write_file", {"path": "a", "content": "1"}, id="c1"),
                call("nope", {}, id="c2"),
                call("read_file", {"path": "a"}, id="c3"),
            ]
        ),
        reply("done"),
    )
    loop("go")
    messages = server.messages(1)
    assert [m["role"] for m in messages] == ["system", "user", "assistant", "tool", "tool", "tool"]
    assert [m["tool_call_id"] for m in messages[3:]] == ["c1", "c2", "c3"]
    assert messages[5]["content"] == "1"


def test_cut_off_reply_runs_no_tool_and_ends_the_turn_as_length(loop, server):
    # Rule 5: the arguments of a reply cut off by max_tokens may be incomplete.
    server.add(
        reply(
            tool_calls=[call("write_file", {"path": "a", "content": "x"})], finish_reason="length"
        )
    )
    result = loop("write")
    assert result.status == "length"
    assert not (loop.workdir / "a").exists()
    assert "cut off" in result.stderr
    assert result.stdout == ""
    assert len(server.requests) == 1
    assert result.events()[-1] == {**result.events()[-1], "type": "turn/end", "status": "length"}


def test_content_filter_and_capacity_stops_say_why(loop, server):
    server.add(reply("partial", finish_reason="content_filter"))
    filtered = loop("go")
    server.add(reply("", finish_reason="insufficient_system_resource"))
    busy = loop("go")
    assert (filtered.status, busy.status) == ("content_filter", "insufficient_system_resource")
    assert "content filter" in filtered.stderr
    assert "out of capacity" in busy.stderr
    assert filtered.stdout == busy.stdout == ""


def run_one_call(loop, server, tool_call):
    server.add(reply(tool_calls=[tool_call]), reply("done"))
    result = loop("go")
    assert result.status == "answered"
    return tool_messages(server.messages(-1))[0]["content"]


def test_invalid_json_arguments_are_told_to_the_model(loop, server):
    # Rule 6: every failed dispatch is a tool message, and the loop goes on.
    content = run_one_call(loop, server, call("read_file", '{"path": "a.txt"'))
    assert content.startswith("error: arguments are not valid JSON")
    assert '{"path": "a.txt"' in content


def test_arguments_that_are_not_an_object_are_told_to_the_model(loop, server):
    assert "must be a JSON object, not list" in run_one_call(
        loop, server, call("read_file", "[1, 2]")
    )


def test_arguments_encoded_twice_are_accepted(loop, server):
    (loop.workdir / "a.txt").write_text("twice")
    assert run_one_call(loop, server, call("read_file", json.dumps('{"path": "a.txt"}'))) == "twice"


def test_unknown_tool_lists_the_valid_names(loop, server):
    content = run_one_call(loop, server, call("delete_everything", {}))
    assert (
        content
        == "error: unknown tool 'delete_everything'; the tools are read_file, write_file, run_shell"
    )


def test_missing_and_unexpected_parameters_name_the_expected_ones(loop, server):
    content = run_one_call(loop, server, call("write_file", {"path": "a", "text": "x"}))
    assert content == (
        "error: write_file takes path, content, old (optional); missing: content; unexpected: text"
    )


def test_exception_in_a_tool_is_told_as_type_and_message(loop, server):
    content = run_one_call(loop, server, call("write_file", {"path": "x" * 300, "content": "x"}))
    assert content.startswith("error: OSError: ") and "too long" in content


def test_history_is_append_only_and_tools_never_change(loop, server):
    # Rule 7: each request's messages are an exact prefix of the next one's, byte for byte.
    server.add(
        reply(tool_calls=[call("write_file", {"path": "a", "content": "1"})]),
        reply("thinking", tool_calls=[call("read_file", {"path": "a"})], reasoning_content="hm"),
        reply(tool_calls=[call("read_file", {"path": "missing"})]),
        reply("done"),
    )
    assert loop("go").status == "answered"
    bodies = [r["body"] for r in server.requests]
    for before, after in itertools.pairwise(bodies):
        prefix = after["messages"][: len(before["messages"])]
        assert json.dumps(prefix) == json.dumps(before["messages"])
        assert after["tools"] == before["tools"]


def test_token_usage_per_step_and_total_with_cached_tokens(loop, server):
    # Rule 9: DeepSeek and OpenAI report cached prompt tokens under different names.
    deepseek = {
        "prompt_tokens": 100,
        "completion_tokens": 7,
        "total_tokens": 107,
        "prompt_cache_hit_tokens": 64,
    }
    openai = {
        "prompt_tokens": 200,
        "completion_tokens": 3,
        "total_tokens": 203,
        "prompt_tokens_details": {"cached_tokens": 128},
    }
    server.add(
        reply(tool_calls=[call("read_file", {"path": "a"})], usage=deepseek),
        reply("done", usage=openai),
    )
    result = loop("go")
    assert "step 1: 100 prompt tokens (64 cached), 7 completion tokens" in result.stderr
    assert "step 2: 200 prompt tokens (128 cached), 3 completion tokens" in result.stderr
    assert replies.total_tokens(result.used) == {"prompt": 300, "cached": 192, "completion": 10}


def test_reply_without_usage_still_works(loop, server):
    body = reply("fine")
    del body["usage"]
    server.add(body)
    result = loop("go")
    assert result.status == "answered"
    assert "step 1: 0 prompt tokens" in result.stderr


def test_max_steps_ends_the_turn_after_exactly_that_many_requests(loop, server):
    server.add(
        *[reply(tool_calls=[call("read_file", {"path": "a"}, id=f"c{i}")]) for i in range(5)]
    )
    result = loop("loop forever", max_steps=3)
    assert result.status == "max_steps"
    assert len(server.requests) == 3
    assert "MAX_STEPS (3)" in result.stderr


def test_trace_shows_the_request_and_the_raw_response(loop, server):
    server.add(reply(tool_calls=[call("read_file", {"path": "a"}, id="c1")]), reply("done"))
    result = loop("go", trace=True)
    assert (
        "── request: model test-model, tools read_file, write_file, run_shell, 2 messages"
        in result.stderr
    )
    assert '"arguments": "{\\"path\\": \\"a\\"}"' in result.stderr  # a string, before it is parsed
    assert '"tool_call_id": "c1"' in result.stderr  # the second request shows what was added
    assert result.text == "done"


# Every exit of run() leaves a conversation a server accepts: the scripted server, like OpenAI,
# answers HTTP 400 to a history with an unanswered call (scripted_server.history_problem).

INTERRUPTED_THEN_AGAIN = """
import json, sys
sys.path.insert(0, sys.argv[3])
import agent, openai
client = openai.OpenAI(base_url=sys.argv[1], api_key="none")
messages = None
try:
    agent.run("go", messages := [{"role": "system", "content": agent.SYSTEM_PROMPT}], client=client,
              workdir=sys.argv[2], yes=True)
except KeyboardInterrupt:
    print("interrupted", file=sys.stderr)
outcome = agent.run("again", messages, client=client, workdir=sys.argv[2])
print(json.dumps([outcome.status, outcome.text, messages]))
"""


def test_run_interrupted_inside_a_tool_leaves_every_call_answered_and_runs_again(server, tmp_path):
    import subprocess
    import sys

    import forkserver
    from conftest import ROOT, as_at_a_terminal, clean_env

    # The command sends Ctrl-C's signal to the agent while it waits for the command: run()
    # is inside a tool.
    calls = [
        call("run_shell", {"command": "kill -INT $PPID; sleep 30"}, id="c1"),
        call("read_file", {"path": "x"}),
    ]
    server.add(reply(tool_calls=calls), reply("done"))
    script = tmp_path / "person.py"
    script.write_text(INTERRUPTED_THEN_AGAIN, encoding="utf-8")
    argv = [sys.executable, str(script), server.url, str(tmp_path), str(ROOT)]
    done = subprocess.run(
        forkserver.command(argv, clean_env()),  # forked from a server that has imported openai
        cwd=ROOT,
        env=clean_env(),
        preexec_fn=as_at_a_terminal,  # Ctrl-C's signal, even under a background job
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert (
        done.returncode == 0 and "interrupted" in done.stderr and "Traceback" not in done.stderr
    ), done.stderr
    status, text, _messages = json.loads(done.stdout)
    assert (status, text) == ("answered", "done")
    answers = [(m["tool_call_id"], m["content"]) for m in tool_messages(server.messages(1))]
    assert answers == [
        ("c1", f"interrupted by the user {pauses.WHILE_IT_RAN}"),  # it began: maybe done
        (calls[1]["id"], "interrupted by the user"),
    ]
    assert len(server.requests) == 2  # the second run's request was accepted: no HTTP 400


class FailingFile:
    """A transcript whose disk fills after `room` events: every later write raises OSError."""

    name = "full.jsonl"

    def __init__(self, room: int):
        self.room = room

    def write(self, text: str) -> None:
        self.room -= 1
        if self.room < 0:
            raise OSError(28, "No space left on device")

    def flush(self) -> None:
        pass


@pytest.mark.parametrize("room", [2, 3], ids=["first-result", "second-result"])
def test_a_transcript_that_fails_mid_step_leaves_every_call_answered(loop, server, room):
    import agent
    from realworld import transcripts

    calls = [call("read_file", {"path": name}, id=f"c{i}") for i, name in enumerate("abcd")]
    server.add(reply(tool_calls=calls))
    messages = [{"role": "system", "content": "s"}]
    # The user's and the assistant's messages are written, then a tool result fails (full disk).
    with pytest.raises(transcripts.TranscriptError):
        agent.run(
            "go",
            messages,
            client=replies.Client(replies.openai_client(server.url, "k", 30)),
            workdir=loop.workdir,
            transcript=FailingFile(room=room),
        )
    server.add(reply("done"))
    assert loop("again", messages).status == "answered"  # the scripted server checks the history
    sent = server.messages(1)[2:]
    assert [m["role"] for m in sent] == ["assistant", "tool", "tool", "tool", "tool", "user"]
    assert sent[-2]["content"].startswith("stopped by an error: TranscriptError: cannot write")


@pytest.mark.parametrize("how", ["cut-off", "max-steps", "server-error"])
def test_every_other_exit_leaves_a_history_the_next_run_can_send(loop, server, how):
    from scripted_server import Error

    first = reply(
        tool_calls=[call("read_file", {"path": "a"}, id="c1")],
        finish_reason="length" if how == "cut-off" else None,
    )
    server.add(first, *([Error(500, "down", times=3)] if how == "server-error" else []))
    messages = [{"role": "system", "content": "s"}]
    status = loop("go", messages, max_steps=1 if how == "max-steps" else 5).status
    assert (
        status == {"cut-off": "length", "max-steps": "max_steps", "server-error": "api_error"}[how]
    )
    server.add(reply("done"))
    assert loop("again", messages).status == "answered"
    assert [m["role"] for m in server.messages(-1)[2:]] == ["assistant", "tool", "user"]
