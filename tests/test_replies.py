"""What a server sends goes back as it came, and what it says when it fails is one line in
its own words."""

import json

import pytest
from conftest import events_of
from scripted_server import Error, Stream, call, reply

from realworld import runs
from realworld.replay import Replay

# Rule 2. Fields that providers need back, as their API references show them: OpenRouter's reasoning
# and reasoning_details (openrouter.ai docs, "Reasoning tokens": preserving reasoning blocks),
# Gemini's thought signature on each tool call (ai.google.dev, "OpenAI compatibility":
# extra_content.google.thought_signature), and a field no SDK models, standing for whatever
# the next provider adds.
DETAILS = [
    {"type": "reasoning.text", "text": "Look first.", "format": "anthropic-claude-v1", "index": 0}
]
SIGNED = {"google": {"thought_signature": "c2lnbmF0dXJl"}}


def rich_reply():
    first = call("read_file", {"path": "a.txt"}, id="call_1")
    first["extra_content"] = SIGNED
    return reply(
        None,
        tool_calls=[first],
        reasoning="Look first.",
        reasoning_details=DETAILS,
        provider_note={"n": 1},
    )


@pytest.mark.parametrize("streamed", [False, True], ids=["plain", "streamed"])
def test_every_field_the_server_sent_goes_back_unchanged(loop, server, streamed):
    replies = [rich_reply(), reply("done")]
    server.add(*([Stream(r, size=4) for r in replies] if streamed else replies))
    result = loop("go", stream=streamed)
    sent = server.messages(1)[2]
    assert sent["reasoning"] == "Look first." and sent["reasoning_details"] == DETAILS
    assert sent["provider_note"] == {"n": 1}
    assert sent["tool_calls"][0]["extra_content"] == SIGNED and "index" not in sent["tool_calls"][0]
    recorded = [e["message"] for e in result.events() if e["type"] == "assistant/message"]
    assert recorded[0] == sent  # the transcript keeps them, so --resume and --replay send them


def test_a_resumed_or_replayed_conversation_sends_the_recorded_fields(loop, server, tmp_path):
    server.add(rich_reply(), reply("done"))
    first = loop("go")
    messages = runs.conversation(first.events())
    server.add(reply("again"))
    loop("more", messages=messages)
    # run() began the conversation: its transcript records the system prompt too
    assert server.messages(2)[2] == server.messages(1)[2]
    replay = Replay(events_of(first.transcript), tmp_path / "t.jsonl")
    again = replay.create(model="m", messages=runs.requests(first.events())[0].messages)
    assert again.choices[0].message.model_extra["reasoning_details"] == DETAILS


def test_a_null_field_goes_back_null_and_a_missing_one_is_not_invented(loop, server):
    server.add(
        reply(None, tool_calls=[call("read_file", {"path": "x"})], reasoning_content=None),
        reply("done"),
    )
    loop("go")
    sent = server.messages(1)[2]
    assert sent["reasoning_content"] is None and "reasoning" not in sent and sent["content"] == ""


# Rule 11. Error shapes, from the providers' references: OpenAI's
# {"error": {"message", "type", "code"}}; vLLM's flat ErrorResponse
# {"object": "error", "message", "type", "code"} (vllm/entrypoints/openai/protocol.py);
# Gemini's OpenAI-compatible endpoint answers a list [{"error": {"code", "message", "status"}}];
# a proxy's plain text.
HTTP_ERRORS = [
    pytest.param(
        400,
        {
            "error": {
                "message": "Invalid model.",
                "type": "invalid_request_error",
                "code": "bad_model",
            }
        },
        "Invalid model. (bad_model)",
        id="openai",
    ),
    pytest.param(
        400,
        {
            "object": "error",
            "message": "max_tokens is too large",
            "type": "BadRequestError",
            "code": 400,
        },
        "max_tokens is too large (400)",
        id="vllm-flat",
    ),
    pytest.param(
        400,
        [
            {
                "error": {
                    "code": 400,
                    "message": "Request contains an invalid argument.",
                    "status": "INVALID_ARGUMENT",
                }
            }
        ],
        "Request contains an invalid argument. (400)",
        id="gemini-list",
    ),
    pytest.param(404, "404 page not found", "404 page not found", id="plain-text"),
]


@pytest.mark.parametrize(("status", "body", "words"), HTTP_ERRORS)
def test_an_http_error_is_one_line_in_the_providers_words(loop, server, status, body, words):
    server.add(Error(status, body=body))
    result = loop("go")
    assert result.status == "api_error"
    first_line = result.text.splitlines()[0]
    assert first_line == f"the server answered HTTP {status}: {words}"
    assert "{'" not in result.text and "[{" not in result.text  # no Python repr


def test_a_200_body_that_carries_an_error_is_that_error(loop, server):
    server.add({"error": {"message": "Upstream provider timed out", "code": 504}})
    result = loop("go")
    assert (result.status, result.text) == (
        "api_error",
        "the server reported an error instead of a reply: Upstream provider timed out (504)",
    )


def test_an_error_event_in_the_middle_of_a_stream_is_one_line_and_runs_nothing(loop, server):
    # OpenRouter's docs ("Streaming", error handling): an SSE event {"error": {"code", "message"}}
    # mid-stream.
    stream = Stream(reply(None, tool_calls=[call("write_file", {"path": "a.txt", "content": "x"})]))
    stream.events = [
        *stream.events[:3],
        {"error": {"code": 502, "message": "Provider disconnected"}, "usage": None},
    ]
    server.add(stream)
    result = loop("go", stream=True)
    assert result.status == "api_error"
    assert (
        result.text
        == "the server reported an error in the middle of its reply: Provider disconnected (502)"
    )
    assert not list(loop.workdir.iterdir())


@pytest.mark.parametrize("streamed", [False, True], ids=["plain", "streamed"])
def test_a_reply_that_ends_in_error_is_no_answer_and_its_calls_do_not_run(loop, server, streamed):
    # OpenRouter: finish_reason "error", with the error in the choice, when the upstream
    # model fails mid-reply.
    body = reply("Half an answ", tool_calls=[call("write_file", {"path": "a.txt", "content": "x"})])
    body["choices"][0].update(
        finish_reason="error", error={"code": 502, "message": "Upstream error"}
    )
    if streamed:
        body = Stream(body)
        body.events[-2]["choices"][0]["error"] = {"code": 502, "message": "Upstream error"}
    server.add(body)
    result = loop("go", stream=streamed)
    assert (result.status, result.stdout) == ("api_error", "")
    assert "Upstream error (502)" in result.text and not list(loop.workdir.iterdir())


def test_a_reply_cut_off_by_an_error_exits_1_and_prints_no_answer(agent, server):
    body = reply("Half an answ")
    body["choices"][0]["finish_reason"] = "error"
    server.add(body)
    result = agent("go")
    assert (result.returncode, result.stdout) == (1, "")
    assert "error instead of a reply: no message from the server" in result.stderr


# Groq's API reference, "Errors": HTTP 400 with code tool_use_failed and the model's
# failed_generation: the model's output did not parse as a tool call, and the same request usually
# works when sent again.
TOOL_USE_FAILED = {
    "error": {
        "message": (
            "Failed to call a function. Please adjust your prompt. See 'failed_generation' "
            "for more details."
        ),
        "type": "invalid_request_error",
        "code": "tool_use_failed",
        "failed_generation": '<function=read_file{"path": "a.txt"}</function>',
    }
}


def test_tool_use_failed_is_asked_again_with_the_same_request(loop, server):
    server.add(Error(400, body=TOOL_USE_FAILED, times=1), reply("done"))
    result = loop("go")
    assert result.status == "answered" and len(server.requests) == 2
    assert server.requests[0]["raw"] == server.requests[1]["raw"]
    assert "asking again" in result.stderr


def test_tool_use_failed_three_times_is_the_providers_message_and_exit_1(agent, server):
    server.add(Error(400, body=TOOL_USE_FAILED))
    result = agent("go")
    assert result.returncode == 1 and len(server.requests) == 3
    assert "Failed to call a function" in result.stderr and "(tool_use_failed)" in result.stderr
    assert (
        "Traceback" not in result.stderr
        and json.loads(result.transcript.read_text().splitlines()[-1])["status"]
    )


# replies.completion() builds the reply the loop reads with pydantic's compiled check, strict, and
# with the SDK's construct() where that check refuses it (what the SDK's types do not list, as
# DeepSeek's finish reasons): the same reply either way.
BUILT = [
    (rich_reply()["choices"][0]["message"] | {"content": ""}, "tool_calls", None),
    (
        {"role": "assistant", "content": "hi", "reasoning_content": "think", "refusal": None},
        "stop",
        {
            "prompt_tokens": 9,
            "completion_tokens": 1,
            "total_tokens": 10,
            "prompt_cache_hit_tokens": 8,
        },
    ),
    ({"role": "assistant", "content": "hi"}, "insufficient_system_resource", None),
    ({"role": "assistant", "content": "hi"}, "stop", {"prompt_tokens": "9", "total_tokens": 10}),
    ({"role": "assistant", "content": "hi", "annotations": "not a list"}, None, None),
]


@pytest.mark.parametrize(("message", "finish_reason", "usage"), BUILT)
def test_the_reply_the_loop_reads_is_built_alike_by_either_way(message, finish_reason, usage):
    from openai.types.chat import ChatCompletion

    from realworld import replies

    built = replies.completion(message, finish_reason, usage, "m", repairs=["r"], latency_ms=3)
    constructed = ChatCompletion.construct(
        id="local",
        object="chat.completion",
        created=0,
        model="m",
        usage=usage,
        choices=[{"index": 0, "message": message, "finish_reason": finish_reason}],
        repairs=["r"],
        latency_ms=3,
    )
    dump = {"exclude_unset": True, "warnings": False}
    assert built.model_dump(**dump) == constructed.model_dump(**dump)
    msg, expected = built.choices[0].message, constructed.choices[0].message
    assert msg.model_dump(**dump) == expected.model_dump(**dump) == message
    assert [type(c) for c in msg.tool_calls or []] == [type(c) for c in expected.tool_calls or []]
    assert (built.repairs, built.latency_ms, built.choices[0].finish_reason) == (
        ["r"],
        3,
        finish_reason,
    )
