"""What real servers and models send (realworld/replies.py), called in this process against the
scripted server.

The rule numbers are those of docs/servers.md."""

import json
import socket
import time

import openai
import pytest
from conftest import KEY, tool_messages
from scripted_server import Error, Hang, Stream, Trickle, call, reply

import agent as agent_module
from realworld import replies

try:  # the HTTP library the openai package is built on: httpx2 from openai 3 on, httpx before
    import httpx2 as httpx
except ImportError:
    import httpx

DSML = "\uff5cDSML\uff5c"  # DeepSeek's fullwidth bars


def one_call_then_done(server, arguments, name="write_file"):
    server.add(reply(tool_calls=[call(name, arguments, id="c1")]), reply("done"))


# Rule 8: arguments as models write them; what goes back is valid JSON.


def test_raw_newlines_inside_a_json_string_are_accepted_and_sent_back_valid(loop, server):
    # SmolLM2 on llama.cpp writes real newlines
    raw = '{"path": "a.py", "content": "print(1)\nprint(2)\n"}'
    one_call_then_done(server, raw)
    result = loop("go")
    assert (loop.workdir / "a.py").read_text() == "print(1)\nprint(2)\n"
    sent = server.messages(1)[2]["tool_calls"][0]["function"]["arguments"]
    # strict: valid JSON now
    assert json.loads(sent) == {"path": "a.py", "content": "print(1)\nprint(2)\n"}
    assert "repaired: raw control characters" in result.stderr
    assert result.events()[2]["repairs"] == [
        "raw control characters (a newline or tab) inside a JSON string"
    ]


def test_arguments_in_a_markdown_fence_are_accepted(loop, server):
    one_call_then_done(server, '```json\n{"path": "b.txt", "content": "fenced"}\n```')
    loop("go")
    assert (loop.workdir / "b.txt").read_text() == "fenced"
    assert (
        json.loads(server.messages(1)[2]["tool_calls"][0]["function"]["arguments"])["path"]
        == "b.txt"
    )


def test_valid_arguments_go_back_byte_for_byte(loop, server):
    raw = '{"path":"c.txt",  "content":"x"}'  # odd spacing, but valid: never re-encoded
    one_call_then_done(server, raw)
    loop("go")
    assert server.messages(1)[2]["tool_calls"][0]["function"]["arguments"] == raw


def test_unreadable_arguments_are_quoted_to_the_model_and_sent_back_as_valid_json(loop, server):
    raw = '{"path": "a.txt", "content": oops}'
    one_call_then_done(server, raw)
    result = loop("go")
    assert result.status == "answered"
    assert (
        tool_messages(server.messages(1))[0]["content"]
        == f"error: arguments are not valid JSON: {raw}"
    )
    sent = server.messages(1)[2]["tool_calls"][0]["function"]["arguments"]
    # a JSON string: llama.cpp --jinja answers 500 on invalid JSON in history
    assert json.loads(sent) == raw


def test_arguments_nested_too_deep_are_an_error_for_the_model_not_a_crash(loop, server):
    one_call_then_done(server, "[" * 100_000 + "]" * 100_000)
    result = loop("go")
    assert result.status == "answered"
    assert tool_messages(server.messages(1))[0]["content"].startswith(
        "error: arguments are not valid JSON"
    )


# Rule 10: tool calls written as text are recovered.

DSML_REPLY = (
    "Let me look at the folder.\n\n"
    f"<{DSML}function_calls>\n"
    f'<{DSML}invoke name="write_file">\n'
    f'<{DSML}parameter name="path" string="true">notes.txt</{DSML}parameter>\n'
    f'<{DSML}parameter name="content" string="true">line one\nline two</{DSML}parameter>\n'
    f"</{DSML}invoke>\n"
    f"</{DSML}function_calls>"
)


def test_deepseek_dsml_in_content_runs_as_a_real_tool_call(loop, server, text_calls):
    text_calls("run")  # a write written as text runs as a tool call's does (issue #43)
    server.add(reply(DSML_REPLY), reply("done"))
    result = loop("go")
    assert result.status == "answered" and result.text == "done"
    assert (loop.workdir / "notes.txt").read_text() == "line one\nline two"
    assistant = server.messages(1)[2]
    # the text around the markup is kept
    assert assistant["content"] == "Let me look at the folder."
    [sent] = assistant["tool_calls"]
    assert sent["id"].startswith("call_") and sent["function"]["name"] == "write_file"
    assert tool_messages(server.messages(1))[0]["tool_call_id"] == sent["id"]
    assert "as DeepSeek V3.2 DSML text (write_file)" in result.stderr
    assert "DSML" in result.events()[2]["repairs"][0]


def test_dsml_with_ascii_bars_and_tool_calls_wrapper_and_two_invokes(loop, server, text_calls):
    text_calls("run")  # a write written as text runs as a tool call's does (issue #43)
    text = (
        "<|DSML|tool_calls>"
        '<|DSML|invoke name="write_file">'
        '<|DSML|parameter name="path" string="true">a</|DSML|parameter>'
        '<|DSML|parameter name="content" string="true">1</|DSML|parameter></|DSML|invoke>'
        '<|DSML|invoke name="read_file">'
        '<|DSML|parameter name="path" string="true">a</|DSML|parameter>'
        "</|DSML|invoke></|DSML|tool_calls>"
    )
    server.add(reply(text), reply("done"))
    loop("go")
    assert [m["content"] for m in tool_messages(server.messages(1))] == [
        "wrote 1 characters to a",
        "1",
    ]


@pytest.mark.parametrize("size", [1, 7], ids=["one-character-chunks", "seven-character-chunks"])
def test_a_streamed_dsml_reply_split_mid_marker_is_recovered(loop, server, text_calls, size):
    text_calls("run")  # a write written as text runs as a tool call's does (issue #43)
    server.add(Stream(reply(DSML_REPLY), size=size), Stream(reply("done")))
    result = loop("go", stream=True)
    assert result.status == "answered"
    assert (loop.workdir / "notes.txt").read_text() == "line one\nline two"


def test_hermes_tool_call_json_in_content_is_recovered(loop, server, text_calls):
    text_calls("run")  # a write written as text runs as a tool call's does (issue #43)
    text = (
        '<tool_call>\n{"name": "write_file", "arguments": {"path": "h.txt", "content": "hermes"}}\n'
        "</tool_call>"
    )
    server.add(reply(text), reply("done"))
    result = loop("go")
    assert (loop.workdir / "h.txt").read_text() == "hermes"
    assert server.messages(1)[2]["content"] == ""
    assert "--jinja" in result.stderr and "--tool-call-parser" in result.stderr


def test_qwen3_coder_xml_tool_call_in_content_is_recovered(loop, server, text_calls):
    text_calls("run")  # a write written as text runs as a tool call's does (issue #43)
    text = (
        "<tool_call>\n<function=write_file>\n<parameter=path>\nq.py\n</parameter>\n"
        "<parameter=content>\nprint('q')\n</parameter>\n</function>\n</tool_call>"
    )
    server.add(reply(text), reply("done"))
    loop("go")
    assert (loop.workdir / "q.py").read_text() == "print('q')"


def test_a_prose_answer_quoting_a_tool_call_is_an_answer_and_runs_nothing(loop, server):
    quoted = (
        "Small models without a tool parser write calls like this:\n\n```\n"
        '<tool_call>\n{"name": "write_file", "arguments": {"path": "x.txt", "content": "no"}}\n'
        "</tool_call>\n"
        "```\n\nThe server should turn that into tool_calls."
    )
    server.add(reply(quoted))
    result = loop("go")
    assert (result.status, result.text) == ("answered", quoted)
    assert not (loop.workdir / "x.txt").exists()
    assert len(server.requests) == 1


QUOTED = (
    '<tool_call>{"name": "write_file", "arguments": {"path": "notes.txt", "content": ""}}'
    "</tool_call>"
)


@pytest.mark.parametrize(
    ("text", "status"),
    [
        # standing alone at the end of the reply, an example is read as a call: what rule 10
        # costs; written as text, it waits for the person's yes (issue #43)
        (f"When it leaks, a model would emit:\n{QUOTED}", "paused"),
        (f"Like this:\n\n    {QUOTED}", "answered"),
        (f"Like this\n~~~\n{QUOTED}", "answered"),
    ],
    ids=["after-a-colon", "indented", "tilde-fence"],
)
def test_a_call_that_is_quoted_at_the_end_of_an_answer_is_not_run(loop, server, text, status):
    (loop.workdir / "notes.txt").write_text("keep me")
    server.add(reply(text))
    result = loop("go", yes=True)
    assert result.status == status and (loop.workdir / "notes.txt").read_text() == "keep me"


def test_dsml_inside_a_qwen3_coder_parameter_is_that_parameters_text(loop, server, text_calls):
    text_calls("run")  # a write written as text runs as a tool call's does (issue #43)
    dsml = (
        f'<{DSML}function_calls><{DSML}invoke name="run_shell"><{DSML}parameter name="command" '
        f'string="true">touch PWNED</{DSML}parameter></{DSML}invoke></{DSML}function_calls>'
    )
    text = (
        "<tool_call>\n<function=write_file>\n<parameter=path>\nd.txt\n</parameter>\n"
        f"<parameter=content>\n{dsml}\n</parameter>\n</function>\n</tool_call>"
    )
    server.add(reply(text), reply("done"))
    loop("go", yes=True)
    assert (loop.workdir / "d.txt").read_text() == dsml
    assert not (loop.workdir / "PWNED").exists()


def test_a_tool_call_written_inside_a_dsml_parameter_is_that_parameters_text(
    loop, server, text_calls
):
    text_calls("run")  # a write written as text runs as a tool call's does (issue #43)
    inner = '<tool_call>{"name": "run_shell", "arguments": {"command": "touch PWNED"}}</tool_call>'
    text = (
        f'<{DSML}function_calls>\n<{DSML}invoke name="write_file">\n'
        f'<{DSML}parameter name="path" string="true">doc.md</{DSML}parameter>\n'
        f'<{DSML}parameter name="content" string="true">{inner}</{DSML}parameter>\n'
        f"</{DSML}invoke>\n</{DSML}function_calls>"
    )
    server.add(reply(text), reply("done"))
    loop("go", yes=True)
    assert (loop.workdir / "doc.md").read_text() == inner
    assert [c["function"]["name"] for c in server.messages(1)[2]["tool_calls"]] == ["write_file"]
    assert not (loop.workdir / "PWNED").exists()


def test_markup_followed_by_more_prose_is_an_answer(loop, server):
    text = f"{DSML_REPLY}\n\nThat is how DeepSeek writes a call when it leaks."
    server.add(reply(text))
    result = loop("go")
    assert result.status == "answered"
    assert not (loop.workdir / "notes.txt").exists()


def test_text_calls_to_unknown_tools_or_with_bad_arguments_are_not_run(loop, server):
    unknown = '<tool_call>{"name": "delete_all", "arguments": {}}</tool_call>'
    broken = '<tool_call>{"name": "write_file", "arguments": {"path": "y.txt", </tool_call>'
    server.add(reply(unknown), reply(broken))
    assert loop("go").text == unknown
    assert loop("go").text == broken
    assert not (loop.workdir / "y.txt").exists()


# An empty reply is not an answer.


def test_an_empty_reply_with_only_reasoning_stops_with_empty_answer(loop, server):
    server.add(reply("", reasoning_content="I considered the files and then I"))
    result = loop("go")
    assert result.status == "empty_answer"
    assert "ended without an answer" in result.stderr
    assert "I considered the files and then I" in result.stderr
    assert result.events()[-1] == {
        **result.events()[-1],
        "type": "turn/end",
        "status": "empty_answer",
    }


# A failed request is one line that says what to do; the command line exits 1 on it
# (tests/test_cli.py).


def assert_one_clear_line(result, *needles):
    assert result.status == "api_error"
    assert "Traceback" not in result.stderr
    error = result.stderr[result.stderr.index("agent: ") :].splitlines()[:2]
    for needle in needles:
        assert needle in "\n".join(error)


def test_401_is_an_api_error_naming_the_key_settings_and_not_retried(loop, server):
    server.add(Error(401, "Authentication Fails, Your api key: ****cret is invalid"))
    result = loop("go")
    assert_one_clear_line(result, "HTTP 401", "Authentication Fails", "AGENT_API_KEY")
    assert len(server.requests) == 1  # an auth error is not retried


def test_403_points_at_the_keys_permissions(loop, server):
    server.add(Error(403, "not allowed for this model"))
    assert_one_clear_line(
        loop("go"), "HTTP 403", "not allowed for this model", "may use this model"
    )


def test_404_points_at_the_base_url(loop, server):
    server.add(Error(404, "no route"))
    assert_one_clear_line(loop("go"), "HTTP 404", "AGENT_BASE_URL")


def test_retired_model_is_named_in_the_hint(loop, server):
    server.add(Error(400, "Model Not Exist: deepseek-chat"))
    result = loop("go", model="deepseek-chat")
    assert_one_clear_line(result, "HTTP 400", "retired in July 2026", "deepseek-flash")


def test_429_is_retried_by_the_sdk_then_is_an_api_error(loop, server):
    server.add(Error(429, "Rate limit reached"))
    result = loop("go")
    assert_one_clear_line(result, "HTTP 429", "Rate limit reached")
    assert len(server.requests) == 3


def test_500_is_an_api_error_with_the_server_message(loop, server):
    server.add(Error(500, "upstream exploded"))
    assert_one_clear_line(loop("go"), "HTTP 500", "upstream exploded")


def test_a_reply_that_is_not_a_completion_is_an_api_error_quoting_it(loop, server):
    server.add({"error": {"message": "provider overloaded"}})
    result = loop("go")
    assert_one_clear_line(result, "reported an error instead of a reply: provider overloaded")


def test_a_reply_that_is_not_json_is_an_api_error_naming_the_base_url(loop, server):
    server.add("<html>this is not json")
    assert_one_clear_line(loop("go"), "not a chat completion", "AGENT_BASE_URL")


def test_refused_connection_is_one_line_naming_the_address(tmp_path, capsys):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # closed again below: nothing listens there
    url = f"http://127.0.0.1:{port}/v1"
    outcome = agent_module.run(
        "go", client=replies.Client(replies.openai_client(url, KEY, 60)), workdir=tmp_path
    )
    assert outcome.status == "api_error"
    assert f"could not reach {url}" in outcome.text
    assert "Traceback" not in capsys.readouterr().err


def test_a_timeout_is_explained_in_one_line():
    # the request rides along (openai 3 reads its headers, so it is a real one)
    request = httpx.Request("POST", "http://h/v1/chat/completions")
    explained = replies.explain(openai.APITimeoutError(request=request), "http://h/v1", "m")
    assert explained.startswith("the request to http://h/v1 timed out")
    assert "\n" not in explained


# A time limit per request.


def test_a_body_that_trickles_in_is_given_up_within_the_time_limit(loop, server):
    server.add(Trickle(reply("slow"), seconds_per_byte=0.2))
    started = time.monotonic()
    result = loop("go", timeout=1)
    elapsed = time.monotonic() - started
    assert result.status == "api_error"
    assert "timed out" in result.text and "AGENT_TIMEOUT" in result.text
    assert elapsed < 10  # a bound, not a speed: without the limit the body takes about a minute


def test_a_stream_that_never_ends_is_given_up_within_the_time_limit(loop, server):
    server.add(Trickle(reply("x"), endless_stream=True))
    result = loop("go", timeout=1, stream=True)
    assert result.status == "api_error"
    assert "timed out" in result.text


def test_a_server_that_never_answers_is_given_up_after_the_sdks_two_retries(loop, server):
    server.add(Hang(), Hang(), Hang(), reply("never reached"))
    result = loop("go", timeout=0.5)
    assert result.status == "api_error" and "timed out" in result.text
    assert len(server.requests) == 3  # one request and two retries, each ending at the time limit


# Context limits are named.


@pytest.mark.parametrize(
    "message",
    [
        "This model's maximum context length is 65536 tokens. However, you requested 70000 tokens.",
        "the request exceeds the available context size, try increasing it",
        "This model's maximum context length is 4096 tokens (vLLM)",
    ],
)
def test_a_context_overflow_gets_its_own_hint(loop, server, message):
    server.add(Error(400, message))
    result = loop("go")
    assert result.status == "context_full"  # the command line compacts and goes on, once
    assert "longer than the model's context window" in result.text
    assert "AGENT_MODEL" not in result.text


def test_a_prompt_that_shrinks_while_the_conversation_grows_is_warned_about_once(loop, server):
    def usage(prompt):
        return {"prompt_tokens": prompt, "completion_tokens": 5, "total_tokens": prompt + 5}

    # Ollama keeps the last 4,096 tokens: twice fewer than before
    prompts = [3000, 4090, 4000, 4090, 3900]
    server.add(
        *[
            reply(tool_calls=[call("read_file", {"path": "a"}, id=f"c{i}")], usage=usage(p))
            for i, p in enumerate(prompts)
        ]
    )
    server.add(reply("done", usage=usage(4000)))
    result = loop("go")
    assert result.status == "answered"
    assert result.stderr.count("cutting the start of the prompt") == 1
    assert "OLLAMA_CONTEXT_LENGTH" in result.stderr


def test_a_web_server_at_the_address_is_one_line_with_advice_that_fits(tmp_path, capsys):
    # A real web server, not an API: python -m http.server answers POST with 501 and an HTML page.
    import functools
    import http.server
    import threading

    handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=str(tmp_path))
    handler.func.log_message = lambda *args: None
    web = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=web.serve_forever, args=(0.01,), daemon=True).start()
    try:
        url = f"http://127.0.0.1:{web.server_address[1]}/v1"
        client = replies.Client(replies.openai_client(url, KEY, 60))
        outcome = agent_module.run("go", client=client, workdir=tmp_path)
    finally:
        web.shutdown()
        web.server_close()
    assert outcome.status == "api_error" and "<" not in outcome.text
    first, hint = outcome.text.split("\n")
    assert first.startswith("the server answered HTTP 501: a web page titled 'Error response'")
    assert hint.startswith("That is a web page, not an API's answer: check AGENT_BASE_URL")


def test_a_gateways_html_error_page_is_its_title(loop, server):
    page = (
        "<html>\r\n<head><title>502 Bad Gateway</title></head>\r\n"
        "<body>\r\n<center><h1>502 Bad Gateway</h1>"
    )
    server.add(
        Error(502, body=page + "</center>\r\n<hr><center>nginx</center>\r\n</body>\r\n</html>\r\n")
    )
    result = loop("go")
    assert result.text.startswith(
        "the server answered HTTP 502: a web page titled '502 Bad Gateway'\n"
    )
    assert (
        "gateway in front of the server failed" in result.text and "<center>" not in result.stderr
    )


@pytest.mark.parametrize(
    ("page", "said"),
    [
        # no title: the first heading, its tags dropped, its entities read (a CDN's error page)
        (
            "<!DOCTYPE html><html><body><h1>Error <b>1020</b> &amp; <script>x</script>denied"
            "</h1></body></html>",
            "a web page titled 'Error 1020 & xdenied'",
        ),
        ("<html><body><p>nothing to name</p></body></html>", "a web page"),
    ],
)
def test_an_html_error_page_is_one_line_without_markup(loop, server, page, said):
    server.add(Error(403, body=page))
    result = loop("go")
    first = result.text.split("\n")[0]
    assert first.startswith(f"the server answered HTTP 403: {said}") and "<" not in result.text


def test_a_new_conversation_on_the_same_client_is_no_shrinking_prompt(server, tmp_path, capsys):
    # One Client serves many runs (the > prompt, or a caller's own loop): a second conversation
    # starts shorter than the first ended, which is no cut.
    def usage(prompt):
        return {"prompt_tokens": prompt, "completion_tokens": 5, "total_tokens": prompt + 5}

    client = replies.Client(replies.openai_client(server.url, KEY, 60))
    for _ in range(2):
        server.add(reply(tool_calls=[call("read_file", {"path": "a"})], usage=usage(400)))
        server.add(reply("done", usage=usage(900)))
        assert agent_module.run("go", client=client, workdir=tmp_path).status == "answered"
    assert "cutting the start of the prompt" not in capsys.readouterr().err
    assert [t["prompt"] for t in client.tokens] == [400, 900, 400, 900]


# Error bodies by what they are (issue #22): each is one line in the provider's words, never
# markup, a Python repr or a traceback.
ERROR_BODIES = [
    # a title inside a script or a comment is not the page's
    (
        502,
        "<html><head><script>var a='<title>evil</title>';</script><!-- <title>no</title> -->"
        "<title>Bad Gateway</title></head></html>",
        "a web page titled 'Bad Gateway'",
    ),
    (404, "<title>404 page not found</title>", "a web page titled '404 page not found'"),  # Go
    (500, {"error": {"message": "<html><title>T</title></html>"}}, "a web page titled 'T'"),
    # FastAPI's validation errors
    (
        422,
        {"detail": [{"loc": ["body", "messages"], "msg": "field required", "type": "missing"}]},
        "field required (messages)",
    ),
    (400, {"error": {"code": "context_length_exceeded"}}, "context_length_exceeded"),
    (400, {"error": {"message": 12345}}, "12345"),
    (400, {"error": {"message": {"detail": "nested"}}}, "nested"),
    (400, {"error": None, "message": "bad thing"}, "bad thing"),
    (
        500,
        'Traceback (most recent call last):\n  File "x", line 1\nValueError: boom',
        "ValueError: boom",
    ),
]


@pytest.mark.parametrize(("status", "body", "said"), ERROR_BODIES)
def test_an_error_body_is_read_by_what_it_is(loop, server, status, body, said):
    server.add(Error(status, body=body))
    first = loop("go").text.split("\n")[0]
    # a context refusal's advice follows on its line (issue #34: one line)
    first = first.split(" The conversation is longer than")[0]
    assert first == f"the server answered HTTP {status}: {said}"


def test_a_full_context_said_by_its_code_gets_its_advice(loop, server):
    server.add(Error(400, body={"error": {"code": "context_length_exceeded"}}))
    assert "longer than the model's context window" in loop("go").text


def test_the_model_hint_needs_the_models_whole_name(server, tmp_path, capsys):
    # AGENT_MODEL=m: an "m" inside other words is not the model
    server.add(Error(400, "malformed messages"))
    client = replies.Client(replies.openai_client(server.url, KEY, 30))
    with pytest.raises(replies.RequestFailed) as failed:
        client.chat.completions.create(model="m", messages=[{"role": "user", "content": "go"}])
    assert "does not accept the model" not in str(failed.value)


@pytest.mark.parametrize("streamed", [False, True], ids=["plain", "streamed"])
def test_a_web_page_with_status_200_is_one_line_about_the_address(loop, server, streamed):
    from scripted_server import Raw

    page = b"<html><head><title>Login required</title></head></html>"
    server.add(Raw(page, {"content-type": "text/html"}))
    result = loop("go", stream=streamed)
    assert result.status == "api_error"
    assert result.text.startswith("the server answered with a web page")
    assert "AGENT_BASE_URL" in result.text and "<" not in result.text
