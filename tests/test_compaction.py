"""A conversation longer than the model's context window is compacted where the person can see it
(issue 27): placeholders for old tool results first, then a summary of the earliest turns; the
history stays one a server accepts, and what did not change stays byte for byte the same.

The server here enforces a window as real ones do: a request over it gets HTTP 400 with the
provider's own words (OpenAI's "This model's maximum context length is N tokens"), and every
history is checked as OpenAI checks it (scripted_server.history_problem)."""

import itertools
import json

import pytest
from conftest import KEY, ROOT, events_of, posix_only
from scripted_server import Error, Raw, ScriptedServer, call, reply

import agent as agent_module
import config
import tools
from realworld import compaction, replies, runs, transcripts

RESULT = "r" * 10_000  # what the tool returns each turn: AGENT_MAX_OUTPUT's worth


def tokens(body: dict) -> int:
    """What the server counts: about 4 bytes a token, as GPT and Llama tokenizers do for English."""
    return (len(json.dumps(body["messages"])) + len(json.dumps(body.get("tools", [])))) // 4


class WindowServer(ScriptedServer):
    """Answers each task with one read_file call, then "done"; writes a summary when asked; refuses
    a request over its window, naming it as OpenAI does."""

    def __init__(self, window: int):
        self.window, self.sizes = window, []
        super().__init__(respond=self.answer)

    def answer(self, body: dict):
        size = tokens(body)
        self.sizes.append(size)
        if size > self.window:
            message = (
                f"This model's maximum context length is {self.window} tokens. However, your "
                f"messages resulted in {size} tokens. Please reduce the length of the messages."
            )
            body = {"error": {"message": message, "code": "context_length_exceeded"}}
            return Error(400, body=body, times=1)
        messages = body["messages"]
        if messages[0]["content"] == compaction.SUMMARY_PROMPT:
            return reply(f"summary of {messages[1]['content'].count('user: ')} earlier task(s)")
        if messages[-1]["role"] == "user":
            return reply(tool_calls=[call("read_file", {"path": "big.txt"}, id=None)])
        return reply("done")


@pytest.fixture
def window_server():
    server = WindowServer(8_000)
    yield server
    server.close()


def session(server, tmp_path, turns: int, monkeypatch, window: int | None, strict=True):
    """turns tasks, one after another, in one conversation, as at the > prompt; the transcript.
    strict: each must be answered; else the session stops at the first that is not."""
    monkeypatch.setattr(config, "CONTEXT_WINDOW", window or 0)
    (tmp_path / "big.txt").write_text(RESULT)
    client = replies.Client(replies.openai_client(server.url, KEY, 60))
    messages = [{"role": "system", "content": agent_module.SYSTEM_PROMPT}]
    path = tmp_path / "t.jsonl"
    with open(path, "x", encoding="utf-8") as transcript:
        transcripts.begin(transcript, agent_module.SYSTEM_PROMPT, tools.TOOLS, **{"model": "m"})
        for n in range(turns):
            outcome = agent_module.run(
                f"task {n}",
                messages,
                client=client,
                model="m",
                workdir=tmp_path,
                transcript=transcript,
            )
            if not strict and outcome.status != "answered":
                break
            assert outcome.status == "answered", outcome
    return messages, path


def test_a_long_session_runs_to_the_end_under_a_small_window(
    window_server, tmp_path, monkeypatch, capsys
):
    # The session goes round a cycle of 16 tasks: a placeholder a task, then a summary of the
    # summary before and the tasks after it, and the same requests again. 50 tasks go round it
    # three times; the 200 tasks of bench/compaction.py, 13 times, with the same requests.
    messages, path = session(window_server, tmp_path, 50, monkeypatch, window=8_000)
    assert max(window_server.sizes) <= window_server.window  # no request was refused
    assert len(window_server.requests) > 100  # two a turn, and the summaries
    events = events_of(path)
    compacted = [e for e in events if e["type"] == "context/compacted"]
    assert compacted and any(e["summary"] for e in compacted)
    summarized = [
        r["body"]["messages"][1]["content"]
        for r in window_server.requests
        if r["body"]["messages"][0]["content"] == compaction.SUMMARY_PROMPT
    ]
    # each summary after the first is written from the one before
    assert len(summarized) >= 3
    assert all(compaction.SUMMARY_HEAD.strip() in text for text in summarized[1:])
    assert capsys.readouterr().err.count("compacted: about ") == len(compacted)
    assert runs.conversation(events) == messages  # --resume goes on from the compacted history
    assert (
        messages[0]["content"] == agent_module.SYSTEM_PROMPT and messages[-2]["content"] == RESULT
    )


def test_the_first_stage_replaces_old_results_by_a_placeholder_that_says_what_was_there(
    window_server, tmp_path, monkeypatch
):
    messages, path = session(window_server, tmp_path, 3, monkeypatch, window=8_000)
    compacted = [e for e in events_of(path) if e["type"] == "context/compacted"]
    assert compacted and not any(e["summary"] for e in compacted)
    replaced = {k: v for e in compacted for k, v in e["placeholders"].items()}
    old = [m for m in messages if m["role"] == "tool"]
    assert [m["tool_call_id"] for m in old[:-1]] == list(replaced)
    assert old[0]["content"] == replaced[old[0]["tool_call_id"]]
    assert old[0]["content"].startswith(
        '[compacted: read_file({"path": "big.txt"}) returned 10,000 '
    )
    assert f"in the run's transcript, call id {old[0]['tool_call_id']}" in old[0]["content"]
    assert old[-1]["content"] == RESULT  # the current turn's result is whole


def test_what_did_not_change_stays_byte_for_byte_the_same(window_server, tmp_path, monkeypatch):
    window_server.window = 30_000
    session(window_server, tmp_path, 26, monkeypatch, window=30_000)
    bodies = [r["body"]["messages"] for r in window_server.requests]
    main = [m for m in bodies if m[0]["content"] == agent_module.SYSTEM_PROMPT]
    grown = 0
    for before, after in itertools.pairwise(main):
        same = next(
            (i for i, (a, b) in enumerate(zip(before, after, strict=False)) if a != b), len(before)
        )
        raw_before = json.dumps(before[:same]).encode()
        assert json.dumps(after[:same]).encode() == raw_before
        grown += same == len(before)
        if same < len(before):  # a compaction: it changed only from a tool result or the summary
            assert after[same]["role"] in ("tool", "user") and same > 0
    assert grown > len(main) * 3 / 4  # most requests only add to the one before


def test_the_summary_keeps_the_system_prompt_and_the_current_task_word_for_word(
    window_server, tmp_path, monkeypatch
):
    messages, _ = session(window_server, tmp_path, 16, monkeypatch, window=8_000)
    assert messages[0] == {"role": "system", "content": agent_module.SYSTEM_PROMPT}
    assert messages[1]["content"].startswith(compaction.SUMMARY_HEAD)
    assert messages[2] == {"role": "assistant", "content": compaction.SUMMARY_REPLY}
    assert [m["content"] for m in messages if m["role"] == "user"][-1] == "task 15"
    roles = [m["role"] for m in messages]
    assert all(a != b for a, b in itertools.pairwise(roles) if "tool" not in (a, b))


def test_without_compaction_the_same_session_is_refused(window_server, tmp_path, monkeypatch):
    monkeypatch.setattr(config, "CONTEXT_WINDOW", 10**9)
    client = replies.Client(replies.openai_client(window_server.url, KEY, 60))
    (tmp_path / "big.txt").write_text(RESULT)
    messages = [{"role": "system", "content": agent_module.SYSTEM_PROMPT}]
    outcomes = [
        agent_module.run(f"task {n}", messages, client=client, model="m", workdir=tmp_path).status
        for n in range(4)
    ]
    assert "context_full" in outcomes and client.window == window_server.window


@posix_only
def test_the_servers_own_window_is_learned_and_the_run_goes_on(agent, tmp_path):
    # the agent takes the family's window (32,768 for a name it does not know); the server's: 4,000
    server = WindowServer(4_000)
    try:
        agent.server = server
        agent.workdir.mkdir()
        (agent.workdir / "big.txt").write_text(RESULT)
        first = agent("task 0")
        second = agent("--resume", str(first.transcript), "task 1")
        assert second.returncode == 0, second.stderr
        assert "maximum context length is 4000 tokens" in second.stderr
        assert "the model reads 4,000 tokens at most: compacting" in second.stderr
        assert "compacted: about " in second.stderr and second.stdout == "done\n"
        events = events_of(first.transcript)
        assert [e["status"] for e in events if e["type"] == "turn/end"] == [
            "answered",
            "context_full",
            "answered",
        ]
        shown = agent("--show", str(first.transcript)).stdout
        assert "[compacted: about " in shown
        sent, compacted = len(server.requests), runs.conversation(events_of(first.transcript))
        third = agent("--resume", str(first.transcript), "task 2")  # from the compacted history
        assert third.returncode == 0 and "maximum context length" not in third.stderr
        resumed = server.requests[sent]["body"]["messages"]
        assert resumed[:3] == compacted[:3] and compacted[1]["content"].startswith("[The conv")
        assert any(str(m["content"]).startswith("[compacted: ") for m in resumed)
    finally:
        server.close()


@posix_only
def test_compact_at_the_prompt_compacts_on_request(agent, server, tmp_path):
    agent.workdir.mkdir()
    (agent.workdir / "big.txt").write_text(RESULT)
    server.add(
        reply(tool_calls=[call("read_file", {"path": "big.txt"}, id="c1")]),
        reply("read it"),
        reply("summary: the user had big.txt read"),
        reply("still here"),
    )
    result = agent(terminal="read big.txt\n/compact\nwhat did you read?\nexit\n")
    assert result.returncode == 0, result.stderr
    assert server.messages(2)[0]["content"] == compaction.SUMMARY_PROMPT
    last = server.messages(3)
    assert last[1]["content"] == compaction.SUMMARY_HEAD + "summary: the user had big.txt read"
    assert last[-1] == {"role": "user", "content": "what did you read?"}
    [event] = [e for e in events_of(result.transcript) if e["type"] == "context/compacted"]
    assert list(event["placeholders"]) == ["c1"] and event["summary"]["replaced"] == 4


def test_a_summary_that_fails_keeps_the_turns_and_says_so(tmp_path, monkeypatch, capsys):
    server = WindowServer(8_000)
    normal = server.answer

    def no_summary(body):
        if body["messages"][0]["content"] == compaction.SUMMARY_PROMPT:
            return Error(400, "the summary could not be written", times=1)
        return normal(body)

    server.respond = no_summary
    try:
        messages, _ = session(server, tmp_path, 16, monkeypatch, window=8_000, strict=False)
    finally:
        server.close()
    assert "the model could not write a summary" in capsys.readouterr().err
    assert not any(str(m["content"]).startswith(compaction.SUMMARY_HEAD) for m in messages)


# Context errors as each server words them; the window is the number beside the word for a
# limit. Sources: OpenAI's error reference and community reports, DeepSeek's API (same text),
# vLLM's serving_engine.py (_validate_input), llama.cpp's server (exceed_context_size_error with
# n_ctx in the body), Anthropic's OpenAI-compatible API ("prompt is too long"), Mistral's API,
# Gemini's OpenAI-compatible API, LM Studio, OpenRouter, Hugging Face TGI (validation).
CONTEXT_ERRORS = [
    (
        {
            "error": {
                "message": "This model's maximum context length is 128000 tokens. However, your "
                "messages resulted in 130512 tokens. Please reduce the length of the messages.",
                "code": "context_length_exceeded",
            }
        },
        128_000,
    ),
    (
        {
            "object": "error",
            "message": "This model's maximum context length is 4096 tokens. "
            "However, you requested 5000 tokens (4000 in the messages, 1000 in the completion).",
            "type": "BadRequestError",
            "code": 400,
        },
        4096,
    ),
    (
        {
            "object": "error",
            "message": "'max_tokens' or 'max_completion_tokens' is too large: 2000. "
            "This model's maximum context length is 4096 tokens and your request has 3000 input "
            "tokens (2000 > 4096 - 3000).",
            "type": "BadRequestError",
        },
        4096,
    ),
    (
        {
            "error": {
                "code": 400,
                "message": "the request exceeds the available context size, try increasing it",
                "type": "exceed_context_size_error",
                "n_prompt_tokens": 9000,
                "n_ctx": 8192,
            }
        },
        8192,
    ),
    ({"error": {"message": "prompt is too long: 210000 tokens > 200000 maximum"}}, 200_000),
    (
        {
            "object": "error",
            "message": "Prompt contains 40000 tokens and 0 draft tokens, too large "
            "for model with 32768 maximum context length",
            "type": "invalid_request_message_error",
        },
        32_768,
    ),
    (
        [
            {
                "error": {
                    "code": 400,
                    "message": "The input token count (1200000) exceeds the maximum "
                    "number of tokens allowed (1048576).",
                    "status": "INVALID_ARGUMENT",
                }
            }
        ],
        1_048_576,
    ),
    (
        {
            "error": "Trying to keep the first 5000 tokens when context the overflows. However, "
            "the model is loaded with context length of only 4096 tokens, which is not enough."
        },
        4096,
    ),
    (
        {
            "error": {
                "message": "This endpoint's maximum context length is 8,192 tokens. However, "
                "you requested about 9,000 tokens.",
                "code": 400,
            }
        },
        8192,
    ),
    (
        {
            "error": "Input validation error: `inputs` tokens + `max_new_tokens` must be <= 4096. "
            "Given: 5000 `inputs` tokens and 100 `max_new_tokens`",
            "error_type": "validation",
        },
        4096,
    ),
    (
        {
            "error": {
                "message": "Please reduce the length of the messages or completion.",
                "code": "context_length_exceeded",
            }
        },
        None,
    ),
    # members fresh-eyes probes brought: vLLM V1, TGI's 422, Anthropic's limit, xAI, DashScope,
    # Kimi, Cohere, and words with no window (Bedrock, z.ai, Ollama's overflow count)
    (
        {
            "object": "error",
            "message": "The decoder prompt (length 9000) is longer than the "
            "maximum model length of 8192. Make sure that `max_model_len` is no smaller than the "
            "number of text tokens.",
        },
        8192,
    ),
    (
        {
            "error": "Input validation error: `inputs` must have less than 4000 tokens. "
            "Given: 4100",
            "error_type": "validation",
        },
        4000,
    ),
    (
        {
            "type": "error",
            "error": {
                "type": "invalid_request_error",
                "message": "input length and "
                "`max_tokens` exceed context limit: 198000 + 8192 > 200000, decrease input length",
            },
        },
        200_000,
    ),
    (
        {
            "error": {
                "message": "This model's maximum prompt length is 131072 but the request "
                "contains 140000 tokens.",
                "code": "invalid_argument",
            }
        },
        131_072,
    ),
    (
        {
            "error": {
                "message": "Range of input length should be [1, 98304]",
                "code": "InvalidParameter",
            }
        },
        98_304,
    ),
    (
        {
            "error": {
                "message": "Invalid request: Your request exceeded model token limit: 262144",
                "type": "invalid_request_error",
            }
        },
        262_144,
    ),
    (
        {
            "message": "too many tokens: total number of tokens in the prompt cannot exceed 4081 - "
            "received 4292. Try using a shorter prompt"
        },
        4081,
    ),
    ({"message": "Input is too long for requested model."}, None),
    (
        {
            "error": {
                "code": "model_context_window_exceeded",
                "message": "model_context_window_exceeded",
            }
        },
        None,
    ),
    ({"error": {"message": "prompt too long; exceeded max context length by 2096 tokens"}}, None),
    ({"error": {"message": "This model's maximum context length is 262 144 tokens."}}, 262_144),
    ({"error": {"message": "maximum input length exceeded: 9000 tokens (limit: 8192)"}}, 8192),
    (
        {
            "error": {
                "message": "context length exceeded: requested 9000 tokens, the model supports 8192"
            }
        },
        8192,
    ),
    (
        {
            "error": {
                "message": "Prompt is too long for the context window: 40001 tokens "
                "requested, 32768 allowed"
            }
        },
        32_768,
    ),
    (
        {
            "error": {
                "message": "prompt_too_long: tokenized VLM text prompt has 20767 tokens, max "
                "prompt/context tokens is 16384"
            }
        },
        16_384,
    ),
    ({"error": {"message": "Prompt too long: 9000 tokens exceeds max context 8192"}}, 8192),
    ({"error": {"message": "litellm.ContextWindowExceededError: model=gpt-4"}}, None),
    (
        {
            "error": {
                "message": "the request exceeds the available context size, try increasing it",
                "code": 400,
                "type": "exceed_context_size_error",
                "n_ctx": 4096,
            }
        },
        4096,
    ),
    (
        {
            "error": {
                "message": "Provider returned error",
                "code": 400,
                "metadata": {
                    "raw": '{"error":{"message":"This model\'s maximum context length is 16384 '
                    'tokens. However, you requested 17000 tokens."}}',
                    "provider_name": "X",
                },
            }
        },
        16_384,
    ),
]


@pytest.mark.parametrize("body, size", CONTEXT_ERRORS)
def test_the_window_a_context_error_names_is_read_from_its_own_words(body, size, tmp_path):
    server = ScriptedServer()
    try:
        server.add(Error(400, body=body))
        client = replies.Client(replies.openai_client(server.url, KEY, 60))
        with pytest.raises(replies.ContextFull) as raised:
            client.chat.completions.create(model="m", messages=[{"role": "user", "content": "x"}])
        assert raised.value.window == size and client.window == size
    finally:
        server.close()


def test_a_context_error_in_the_middle_of_a_stream_is_one_too():
    # OpenRouter and LiteLLM send a provider's error as an event of the stream they opened.
    server = ScriptedServer()
    event = {"error": {"message": "This model's maximum context length is 8192 tokens."}}
    body = f"data: {json.dumps(event)}\n\n".encode()
    try:
        server.add(Raw(body, {"content-type": "text/event-stream"}))
        client = replies.Client(replies.openai_client(server.url, KEY, 60), stream=True)
        with pytest.raises(replies.ContextFull) as raised:
            client.chat.completions.create(model="m", messages=[{"role": "user", "content": "x"}])
        assert raised.value.window == 8192
    finally:
        server.close()


class ByteServer(WindowServer):
    """Counts a token for every byte, as digits are counted by Llama's and Qwen's tokenizers,
    and says so in each reply's usage."""

    def answer(self, body: dict):
        made = super().answer(body)
        size = len(json.dumps(body["messages"])) + len(json.dumps(body.get("tools", [])))
        self.sizes[-1] = size
        if size > self.window:
            self.refused = getattr(self, "refused", 0) + 1
            message = f"This model's maximum context length is {self.window} tokens."
            return Error(400, body={"error": {"message": message}}, times=1)
        if isinstance(made, dict):
            made["usage"] = {
                "prompt_tokens": size,
                "completion_tokens": 5,
                "total_tokens": size + 5,
            }
        return made


def test_the_estimate_follows_a_server_that_counts_more_tokens_than_it_guessed(
    tmp_path, monkeypatch
):
    server = ByteServer(16_000)
    try:
        monkeypatch.setattr(config, "CONTEXT_WINDOW", 16_000)
        monkeypatch.setitem(globals(), "RESULT", "1234567890" * 1_000)
        session(server, tmp_path, 12, monkeypatch, window=16_000)
    finally:
        server.close()
    assert getattr(server, "refused", 0) == 0 and max(server.sizes) <= 16_000


def test_compact_while_commands_wait_for_a_yes_keeps_them(agent, server):
    server.add(reply(tool_calls=[call("run_shell", {"command": "touch ran"}, "c1")]))
    paused = agent("go")
    assert paused.returncode == 4
    result = agent("--resume", str(paused.transcript), "/compact")
    assert "commands wait for a yes" in result.stderr
    events = events_of(paused.transcript)
    assert not any(e["type"] == "context/compacted" for e in events)


def test_a_summary_is_written_from_the_turns_once_and_a_placeholder_is_never_longer(
    window_server, tmp_path, monkeypatch
):
    session(window_server, tmp_path, 16, monkeypatch, window=8_000)
    asked = [
        r["body"]["messages"][1]["content"]
        for r in window_server.requests
        if r["body"]["messages"][0]["content"] == compaction.SUMMARY_PROMPT
    ]
    assert asked and all(a.count("user: task 0") <= 1 for a in asked)
    assert all("characters left out" not in a for a in asked)
    long_id = "i" * 300  # a placeholder names the call's id: here it would be the longer
    short = [{"role": "tool", "tool_call_id": long_id, "content": "y" * 301}]
    assert compaction.placeholders(short, 0, 1, True) == {} and short[0]["content"] == "y" * 301


def test_without_a_transcript_a_placeholder_says_the_text_is_kept_nowhere():
    messages = [
        {"role": "system", "content": "s"},
        {"role": "user", "content": "t"},
        {"role": "assistant", "content": "", "tool_calls": [call("read_file", {"path": "a"}, "c")]},
        {"role": "tool", "tool_call_id": "c", "content": "z" * 5_000},
        {"role": "user", "content": "next"},
    ]
    compaction.placeholders(messages, 1, 4, None)
    assert "the whole text is kept nowhere (no transcript)" in messages[3]["content"]


@pytest.mark.parametrize("replaced", [2, 3, True, -1, 10**9, "3"])
def test_a_recorded_summary_that_would_end_inside_a_turn_is_not_applied(replaced):
    lesson = transcripts.read(ROOT / "examples" / "lesson-10.jsonl")
    for event in lesson:
        if event["type"] == "context/compacted" and event["summary"]:
            event["summary"]["replaced"] = replaced
    messages = runs.conversation(lesson)
    from scripted_server import history_problem as problem

    assert problem(messages) is None
    roles = [m["role"] for m in messages]
    assert all(a != b or a == "tool" for a, b in itertools.pairwise(roles))


@posix_only
def test_a_run_refused_as_too_long_replays_as_it_was_recorded(agent, tmp_path):
    server = WindowServer(4_000)
    try:
        agent.server = server
        agent.workdir.mkdir()
        (agent.workdir / "big.txt").write_text(RESULT)
        first = agent("task 0")
        second = agent("--resume", str(first.transcript), "task 1")
        assert "compacted: about " in second.stderr and second.returncode == 0
    finally:
        server.close()
    replayed = agent("--replay", str(first.transcript), "--transcript", str(tmp_path / "r.jsonl"))
    assert replayed.returncode == 0, replayed.stderr
    assert replayed.stdout == "done\ndone\n"  # each task's own answer, the summary none of them
    assert "replay:" not in replayed.stderr


def test_a_usage_no_server_could_count_is_not_believed(loop, server):
    usage = {"prompt_tokens": 10**12, "completion_tokens": 5, "total_tokens": 10**12 + 5}
    server.add(reply("hi", usage=usage))
    loop("go")
    client = replies.Client(replies.openai_client(server.url, KEY, 60))
    server.add(reply("hi", usage=usage))
    client.chat.completions.create(model="m", messages=[{"role": "user", "content": "x"}])
    assert client.ratio == 4.0


def test_an_image_counts_as_an_image_not_as_its_data():
    image = {"type": "image_url", "image_url": {"url": "data:image/png;base64," + "A" * 400_000}}
    messages = [{"role": "user", "content": [{"type": "text", "text": "what is it?"}, image]}]
    assert replies.estimate(messages) < 2_000
    thinking = [{"role": "assistant", "content": "", "reasoning_content": "r" * 30_000}]
    assert replies.estimate(thinking) >= 10_000  # sent back, so counted


@pytest.mark.parametrize(
    "summary",
    [
        reply(""),
        reply("<think>let me see</think>"),
        reply(tool_calls=[call("read_file", {"path": "x"})]),
        reply("the user asked for", finish_reason="length"),
        reply("a summary longer than what it replaces " * 20),  # a model that echoes its input
    ],
    ids=["empty", "thinking-only", "a-call", "cut-off", "longer-than-the-turns"],
)
def test_a_reply_that_is_no_summary_keeps_the_turns(summary, tmp_path, capsys):
    server = ScriptedServer()
    try:
        server.add(summary)
        client = replies.Client(replies.openai_client(server.url, KEY, 60))
        messages = [
            {"role": "system", "content": "s"},
            {"role": "user", "content": "old task"},
            {"role": "assistant", "content": "old answer"},
            {"role": "user", "content": "new task"},
        ]
        before = [dict(m) for m in messages]
        compaction.compact(messages, client, "m", [], None, asked=True)
    finally:
        server.close()
    said = capsys.readouterr().err
    assert messages == before and ("no summary" in said or "no shorter" in said)
