"""Formats read as their sources read them (issue #43, item 3): each test names the source whose
reading it follows. Each named case is one member of a family; the others test members no issue
named."""

import json
import resource

import pytest
from scripted_server import Error, ScriptedServer, Stream, call, reply

from realworld import dialects, replies

KNOWN = {"read_file": ["path"], "write_file": ["path", "content"], "run_shell": ["command"]}
KEY = "sk-test-formats"


def calls_of(message: dict) -> list[tuple]:
    return [
        (c["function"]["name"], json.loads(c["function"]["arguments"]))
        for c in message.get("tool_calls") or []
    ]


def run_text(loop, server, text_calls, text: str, streamed: bool):
    """The reply text run under --yes with AGENT_TEXT_CALLS=run; the calls sent back."""
    text_calls("run")
    replies_ = [reply(text), reply("done")]
    server.add(*([Stream(r, size=5) for r in replies_] if streamed else replies_))
    result = loop("go", yes=True, stream=streamed)
    assert result.status == "answered" and len(server.requests) == 2
    return calls_of(server.messages(1)[2]), server.messages(1)[2]["content"]


# --- A call payload written as a Python literal ---------------------------------------------------
# NousResearch/Hermes-Function-Calling utils.py, validate_and_extract_tool_calls(): json.loads
# first, ast.literal_eval where it fails. So a Python dict in single quotes, with True, False, None
# or a trailing comma, is a call in every markup that holds a JSON one; its keys in any order.
LONG = "x" * 3000
PYTHON_LITERALS = [
    pytest.param(  # the issue's: single quotes, "arguments" first
        "<tool_call>\n{'arguments': {'path': 'a.txt'}, 'name': 'read_file'}\n</tool_call>",
        [("read_file", {"path": "a.txt"})],
        id="hermes-python-dict-arguments-first",
    ),
    pytest.param(  # not named: a trailing comma, and a name thousands of characters in
        "<tool_call>\n{'arguments': {'path': 'b.md', 'content': '" + LONG + "',}, "
        "'name': 'write_file',}\n</tool_call>",
        [("write_file", {"path": "b.md", "content": LONG})],
        id="hermes-python-trailing-commas-long-arguments",
    ),
    pytest.param(  # not named: the same order in JSON (vLLM hermes_tool_parser.py json.loads)
        '<tool_call>\n{"arguments": {"path": "b.md", "content": "' + LONG + '"}, '
        '"name": "write_file"}\n</tool_call>',
        [("write_file", {"path": "b.md", "content": LONG})],
        id="hermes-json-arguments-first-long",
    ),
    pytest.param(  # not named: Mistral v11's [ARGS] (mistral-common) with Python arguments
        "[TOOL_CALLS]read_file[ARGS]{'path': 'a.txt'}",
        [("read_file", {"path": "a.txt"})],
        id="mistral-python-arguments",
    ),
    pytest.param(  # not named: OpenAI's call object as Python prints it, True in it
        "<tool_call>\n{'type': 'function', 'function': {'name': 'write_file', 'arguments': "
        "{'path': 'c.txt', 'content': True}}}\n</tool_call>",
        [("write_file", {"path": "c.txt", "content": True})],
        id="openai-object-python-true",
    ),
    pytest.param(  # not named: a triple-quoted value holding a quote and a bracket (ast reads it)
        "<tool_call>\n{'name': 'write_file', 'arguments': {'path': 'f.py', 'content': '''def f():\n"
        "    return \"it's )\"\n'''}}\n</tool_call>",
        [("write_file", {"path": "f.py", "content": 'def f():\n    return "it\'s )"\n'})],
        id="hermes-python-triple-quoted",
    ),
    pytest.param(  # not named: the same in a pythonic call (vLLM pythonic_tool_parser.py, ast)
        '[write_file(path=\'f.py\', content="""x = \'(\' """)]',
        [("write_file", {"path": "f.py", "content": "x = '(' "})],
        id="pythonic-triple-double-quoted",
    ),
]


@pytest.mark.parametrize("streamed", [False, True], ids=["plain", "streamed"])
@pytest.mark.parametrize(("text", "calls"), PYTHON_LITERALS)
def test_a_call_written_as_a_python_literal_runs_as_hermes_reads_it(
    loop, server, text_calls, text, calls, streamed
):
    sent, content = run_text(loop, server, text_calls, text, streamed)
    assert sent == calls and content == ""


@pytest.mark.parametrize(
    "text",
    [
        # a key twice: which is meant is a guess, as json_at() holds for JSON
        "<tool_call>\n{'name': 'read_file', 'arguments': {'path': 'a'}, 'name': 'run_shell'}"
        "\n</tool_call>",
        # what JSON cannot hold: a set, bytes, a call (ast.literal_eval evaluates no call)
        "<tool_call>\n{'name': 'read_file', 'arguments': {'path': {'a', 'b'}}}\n</tool_call>",
        "<tool_call>\n{'name': 'read_file', 'arguments': {'path': b'a'}}\n</tool_call>",
        "<tool_call>\n{'name': 'run_shell', 'arguments': {'command': __import__('os')}}"
        "\n</tool_call>",
        # no closing bracket: thousands of openers are read in one bounded pass
        "<tool_call>\n" + "{'name': 'read_file', 'arguments': {'path': 'a'" * 3000,
    ],
    ids=["key-twice", "set", "bytes", "a-call", "unclosed"],
)
def test_a_python_literal_that_is_no_json_value_is_no_call(text):
    assert dialects.recover_tool_calls(text, KNOWN)[0] == []


# --- A parameter's value that holds its own closing tag -------------------------------------------
# vLLM vllm/tool_parsers/qwen3coder_tool_parser.py, _find_true_param_end(): a </parameter> ends
# the value only where structure follows it (the next parameter, </function>, </tool_call>, the
# end), and a <parameter= opened inside the value is closed inside it. The same rule holds for the
# other XML-like forms parameter_pattern() reads: GLM-4.5's <arg_value> (vLLM
# glm4_moe_tool_parser.py), MiniMax-M2's <parameter name="..."> (minimax_m2_tool_parser.py).
CLOSING_IN_VALUE = [
    pytest.param(  # the issue's
        "<tool_call>\n<function=write_file>\n<parameter=path>\nnotes.md\n</parameter>\n"
        "<parameter=content>\nEnd each value with </parameter> in Qwen3-Coder.\n</parameter>\n"
        "</function>\n</tool_call>",
        [
            (
                "write_file",
                {"path": "notes.md", "content": "End each value with </parameter> in Qwen3-Coder."},
            )
        ],
        id="qwen3-coder-closing-tag-in-the-value",
    ),
    pytest.param(  # not named: the value first, then the next parameter
        "<tool_call>\n<function=write_file>\n<parameter=content>\na </parameter> b\n</parameter>\n"
        "<parameter=path>\nnotes.md\n</parameter>\n</function>\n</tool_call>",
        [("write_file", {"path": "notes.md", "content": "a </parameter> b"})],
        id="qwen3-coder-value-before-the-next-parameter",
    ),
    pytest.param(  # not named: a whole literal call inside the value (a template's example)
        "<tool_call>\n<function=write_file>\n<parameter=path>\nex.md\n</parameter>\n"
        "<parameter=content>\n<function=f>\n<parameter=x>\n1\n</parameter>\n</function>\n"
        "</parameter>\n</function>\n</tool_call>",
        [
            (
                "write_file",
                {
                    "path": "ex.md",
                    "content": "<function=f>\n<parameter=x>\n1\n</parameter>\n</function>",
                },
            )
        ],
        id="qwen3-coder-literal-call-in-the-value",
    ),
    pytest.param(  # not named: GLM-4.5's value holding </arg_value>
        "<tool_call>write_file\n<arg_key>path</arg_key>\n<arg_value>g.md</arg_value>\n"
        "<arg_key>content</arg_key>\n<arg_value>close with </arg_value> then</arg_value>\n"
        "</tool_call>",
        [("write_file", {"path": "g.md", "content": "close with </arg_value> then"})],
        id="glm-closing-tag-in-the-value",
    ),
    pytest.param(  # not named: MiniMax-M2's value holding </parameter>
        '<minimax:tool_call>\n<invoke name="write_file">\n<parameter name="path">m.md</parameter>\n'
        '<parameter name="content">a </parameter> b</parameter>\n</invoke>\n</minimax:tool_call>',
        [("write_file", {"path": "m.md", "content": "a </parameter> b"})],
        id="minimax-closing-tag-in-the-value",
    ),
]


@pytest.mark.parametrize("streamed", [False, True], ids=["plain", "streamed"])
@pytest.mark.parametrize(("text", "calls"), CLOSING_IN_VALUE)
def test_a_value_holding_its_closing_tag_ends_where_structure_follows(
    loop, server, text_calls, text, calls, streamed
):
    sent, content = run_text(loop, server, text_calls, text, streamed)
    assert sent == calls and content == ""
    assert (loop.workdir / calls[0][1]["path"]).read_text() == calls[0][1]["content"]


# --- Thinking streamed in pieces ------------------------------------------------------------------
# LiteLLM streams an Anthropic model's thinking as thinking_blocks pieces in the deltas, the
# signature in the last (docs.litellm.ai release notes v1.63.0, "Anthropic 'thinking' response
# update"), and joins them as its own stream_chunk_builder does (litellm_core_utils/
# streaming_chunk_builder_utils.py, get_combined_thinking_content): text until a signature,
# which closes the block; a redacted block alone. A block whose signature never came is kept
# unsigned (BerriAI/litellm#33034).
def piece(text, signature=None):
    return {"type": "thinking", "thinking": text, "signature": signature}


REDACTED = {"type": "redacted_thinking", "data": "EmwKAhgBEgy3va3pzix"}
THINKING = [
    pytest.param(  # the issue's: four pieces, three with signature null
        [piece("The user "), piece("wants a.txt"), piece("; read it."), piece("", "EqoBCkgIARAB")],
        [piece("The user wants a.txt; read it.", "EqoBCkgIARAB")],
        id="litellm-four-pieces-one-signed-block",
    ),
    pytest.param(  # not named: two thinkings, each signed, a redacted block between
        [
            piece("First "),
            piece("thought.", "sig1"),
            REDACTED,
            piece("Second "),
            piece("thought.", "sig2"),
        ],
        [piece("First thought.", "sig1"), REDACTED, piece("Second thought.", "sig2")],
        id="two-signed-blocks-and-a-redacted-one",
    ),
    pytest.param(  # not named: a provider that signs no block
        [{"type": "thinking", "thinking": "Look "}, {"type": "thinking", "thinking": "first."}],
        [{"type": "thinking", "thinking": "Look first."}],
        id="unsigned-pieces",
    ),
]


@pytest.mark.parametrize(("pieces", "blocks"), THINKING)
def test_thinking_streamed_in_pieces_goes_back_as_one_block_per_thinking(
    loop, server, pieces, blocks
):
    stream = Stream(reply(None, tool_calls=[call("read_file", {"path": "a.txt"})]))
    first = stream.events[0]
    thinking = [
        {**first, "choices": [{"index": 0, "delta": {"thinking_blocks": [p]}}]} for p in pieces
    ]
    stream.events[1:1] = thinking
    server.add(stream, Stream(reply("done")))
    result = loop("go", stream=True)
    assert result.status == "answered", result.text
    assert server.messages(1)[2]["thinking_blocks"] == blocks


# --- Errors in a provider's own shape, and context refusals in its own words ----------------------
ERROR_BODIES = [
    pytest.param(  # the issue's: Cloudflare's v4 API envelope (developers.cloudflare.com, API
        # "Errors" / Workers AI REST API)
        {
            "success": False,
            "errors": [{"code": 7003, "message": "No route for the URI"}],
            "messages": [],
            "result": None,
        },
        "No route for the URI (7003)",
        id="cloudflare-errors-list",
    ),
    pytest.param(  # not named: Baidu Qianfan's {"error_code", "error_msg"} (Qianfan API
        # error codes: 17 "Open api daily request limit reached")
        {"error_code": 17, "error_msg": "Open api daily request limit reached"},
        "Open api daily request limit reached (17)",
        id="baidu-error-msg",
    ),
    pytest.param(  # not named: a list of errors as text (GraphQL-style gateways)
        {"errors": ["model not found", "try another"]},
        "model not found; try another",
        id="errors-as-text",
    ),
    pytest.param(  # not named: Ollama's and TGI's {"error": "..."} (ollama api.md, "Errors")
        {"error": "model 'x' not found, try pulling it first"},
        "model 'x' not found, try pulling it first",
        id="error-as-a-string",
    ),
]


@pytest.mark.parametrize(("body", "words"), ERROR_BODIES)
def test_an_error_body_in_any_providers_shape_is_one_line_of_its_words(loop, server, body, words):
    server.add(Error(400, body=body))
    result = loop("go")
    assert result.status == "api_error"
    assert result.text.splitlines()[0] == f"the server answered HTTP 400: {words}"
    assert "{" not in result.text.splitlines()[0]


# A context refusal, in each provider's words (with the window it names, or None).
CONTEXT_REFUSALS = [
    pytest.param(  # the issue's: Moonshot v1 (MoonshotAI/MoonshotAI-Cookbook#18)
        {
            "error": {
                "message": "model max length exceeded, max length:8192",
                "type": "invalid_request_error",
            }
        },
        8192,
        id="moonshot-v1",
    ),
    pytest.param(  # not named: Zhipu GLM code 1261 (NousResearch/hermes-agent#1877)
        {"error": {"code": "1261", "message": "Prompt exceeds max length"}},
        None,
        id="zhipu-1261",
    ),
    pytest.param(  # not named: Cerebras (cline/cline#5140)
        {
            "message": "Please reduce the length of the messages or completion. Current length is "
            "42328 while limit is 40000",
            "type": "invalid_request_error",
        },
        40_000,
        id="cerebras",
    ),
    pytest.param(  # not named: Groq, by its code alone (thepersonalaicompany/amurex-backend#51)
        {
            "error": {
                "message": "Please reduce the length of the messages or completion.",
                "type": "invalid_request_error",
                "param": "messages",
                "code": "context_length_exceeded",
            }
        },
        None,
        id="groq",
    ),
    pytest.param(  # not named: SambaNova, a model's name with digits before the window
        # (OpenHands/OpenHands#9252)
        {
            "error": {
                "message": "The maximum context length of DeepSeek-V3-0324 is 32768. However, "
                "answering your request will take 39732 tokens. Please reduce the length of the "
                "messages or the specified max_completion_tokens value."
            }
        },
        32_768,
        id="sambanova-model-name",
    ),
    pytest.param(  # not named: SambaNova's sequence length (as cline/cline#294 reports it)
        {"error": {"message": "The maximum supported sequence length is just 4096 tokens"}},
        4096,
        id="sambanova-sequence-length",
    ),
    pytest.param(  # not named: LM Studio, two counts named, the limit's the smaller
        {"error": "The prompt token count of 5210 exceeds the limit of 4096"},
        4096,
        id="lm-studio-prompt-token-count",
    ),
    pytest.param(  # not named: the request's count beside a limit's word, then the window's
        # (the shape reported for Cloudflare's 5021; its published table does not list it)
        {
            "errors": [
                {
                    "code": 5021,
                    "message": "The estimated number of input and maximum output tokens (9000) "
                    "exceeded this model context window limit (4096).",
                }
            ],
            "success": False,
        },
        4096,
        id="request-count-beside-a-limit-word",
    ),
    pytest.param(  # not named: TGI's and vLLM's input length against a max sequence length
        {"error": {"message": "input length 9000 exceeds the max sequence length 4096"}},
        4096,
        id="input-length-against-sequence-length",
    ),
]


@pytest.mark.parametrize(("body", "window"), CONTEXT_REFUSALS)
def test_a_context_refusal_in_any_providers_words_is_read_as_one(body, window):
    server = ScriptedServer()
    try:
        server.add(Error(400, body=body))
        client = replies.Client(replies.openai_client(server.url, KEY, 60))
        with pytest.raises(replies.ContextFull) as raised:
            client.chat.completions.create(model="m", messages=[{"role": "user", "content": "x"}])
        assert raised.value.window == window
    finally:
        server.close()


@pytest.mark.parametrize(
    "message",
    [
        "Invalid 'tools[0].function.name': string too long. Expected a string with maximum "
        "length 64, but got a string with length 80 instead.",
        "max_tokens is too large: 9000. This model supports at most 4096 completion tokens",
    ],
    ids=["a-tool-name-too-long", "max-tokens"],
)
def test_a_refusal_of_something_else_than_the_conversations_length_is_no_context_refusal(
    message,
):
    # OpenAI's own texts (string_above_max_length for a tool's name; max_tokens): compacting the
    # conversation would not help, so the refusal is said as it is.
    server = ScriptedServer()
    try:
        server.add(Error(400, body={"error": {"message": message}}))
        client = replies.Client(replies.openai_client(server.url, KEY, 60))
        with pytest.raises(Exception) as raised:
            client.chat.completions.create(model="m", messages=[{"role": "user", "content": "x"}])
        assert not isinstance(raised.value, replies.ContextFull)
    finally:
        server.close()


# A bound that protects the machine: a megabyte of each shape these readings scan (about 0.2 s
# here), as a model stuck in a loop writes it, read in a bounded number of scans.
HOSTILE = {
    "python-dicts-never-closed": "\n{'name': 'read_file', 'arguments': {'path': 'a'" * 20_000,
    "closing-tags-never-followed-by-structure": "<function=write_file>\n<parameter=path>a"
    "</parameter><parameter=content>" + "x</parameter>y" * 70_000,
    "calls-whose-values-never-end": "<function=write_file>\n<parameter=content>a</parameter>b"
    * 20_000,
    "glm-values-never-ending": "<tool_call>write_file<arg_key>content</arg_key><arg_value>a"
    "</arg_value>b" * 20_000,
}


@pytest.mark.parametrize("shape", sorted(HOSTILE))
def test_a_megabyte_of_unfinished_markup_is_read_in_bounded_time(shape):
    before = resource.getrusage(resource.RUSAGE_SELF)
    dialects.recover_tool_calls(HOSTILE[shape], KNOWN)
    after = resource.getrusage(resource.RUSAGE_SELF)
    assert after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime < 3
