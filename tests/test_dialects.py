# ruff: noqa: RUF001, RUF003 -- DeepSeek's real tokens are written with the fullwidth bar U+FF5C
"""Tool calls and thinking written as text (dialects.py), family by family, plain and streamed.

Each shape below is copied from where the family's real output is defined: the parser in vLLM that
reads it (vllm/tool_parsers/, or vllm/entrypoints/openai/tool_parsers/ before v0.12), llama.cpp's
common/chat-parser.cpp, the model vendor's own documents. When a server has no parser for the model,
this text arrives in content.
"""

import json

import pytest
from scripted_server import Stream, reply

from realworld import dialects, pauses, runs

KNOWN = {"read_file": ["path"], "write_file": ["path", "content"], "run_shell": ["command"]}
READ = ("read_file", {"path": "a.txt"})
SHELL = ("run_shell", {"command": "echo hi"})
DS = {"begin": "<｜tool▁call▁begin｜>", "sep": "<｜tool▁sep｜>", "end": "<｜tool▁call▁end｜>"}

# Rule 10. (text, calls): each a family's real shape, with the source it comes from.
SHAPES = [
    # Kimi K2: vLLM kimi_k2_tool_parser.py (tests/tool_use/test_kimi_k2_tool_parser.py,
    # spaces between tokens as vLLM's detokenizer puts them) and MoonshotAI/Kimi-K2
    # docs/tool_call_guidance.md.
    pytest.param(
        "I'll read it. <|tool_calls_section_begin|> <|tool_call_begin|>\n"
        'functions.read_file:0 <|tool_call_argument_begin|> {"path": "a.txt"} <|tool_call_end|> '
        "<|tool_calls_section_end|>",
        [READ],
        id="kimi-k2-spaced",
    ),
    pytest.param(
        "<|tool_calls_section_begin|>"
        '<|tool_call_begin|>functions.read_file:0<|tool_call_argument_begin|>{"path": "a.txt"}'
        "<|tool_call_end|>"
        '<|tool_call_begin|>functions.run_shell:1<|tool_call_argument_begin|>{"command": "echo hi"}'
        "<|tool_call_end|><|tool_calls_section_end|>",
        [READ, SHELL],
        id="kimi-k2-two-calls",
    ),
    # Kimi K2: the singular section token (llama.cpp PR #17376) and no end token (the server
    # stopped on <|im_end|>).
    pytest.param(
        "Reading.\n<|tool_call_section_begin|><|tool_call_begin|>functions.read_file:12<|tool_call_argument_begin|>"
        '{"path": "a.txt"}<|im_end|>',
        [READ],
        id="kimi-k2-singular-unclosed",
    ),
    # GLM-4.5 and 4.6: vLLM glm4_moe_tool_parser.py, the format in llama.cpp
    # models/templates/GLM-4.6.jinja.
    pytest.param(
        "I'll look.\n<tool_call>read_file\n<arg_key>path</arg_key>\n<arg_value>a.txt</arg_value>\n"
        "</tool_call>",
        [READ],
        id="glm-4.6",
    ),
    # GLM-4.7: vLLM glm47_moe_tool_parser.py (tests/tool_parsers/test_glm47_moe_tool_parser.py),
    # no newlines.
    pytest.param(
        "Checking.<tool_call>read_file<arg_key>path</arg_key><arg_value>a.txt</arg_value></tool_call>"
        "<tool_call>run_shell<arg_key>command</arg_key><arg_value>echo hi</arg_value></tool_call>",
        [READ, SHELL],
        id="glm-4.7",
    ),
    # Mistral before tokenizer v11 (Nemo ids): mistral-common InstructTokenizerV2/V3; vLLM
    # mistral_tool_parser.py.
    pytest.param(
        'Let me check.[TOOL_CALLS] [{"name": "read_file", "arguments": {"path": "a.txt"}, '
        '"id": "a1B2c3D4e"}]',
        [READ],
        id="mistral-pre-v11",
    ),
    # Mistral v11 and v13: mistral-common InstructTokenizerV11 ([CALL_ID]) and V13 (no id),
    # one [TOOL_CALLS] a call.
    pytest.param(
        '[TOOL_CALLS]read_file[CALL_ID]abcDEF123[ARGS]{"path": "a.txt"}'
        '[TOOL_CALLS]run_shell[ARGS]{"command": "echo hi"}',
        [READ, SHELL],
        id="mistral-v11-v13",
    ),
    # Mistral through vLLM's mistral tokenizer, which keeps [TOOL_CALLS] and drops [ARGS]
    # (vllm/tokenizers/mistral.py).
    pytest.param('[TOOL_CALLS]read_file{"path": "a.txt"}', [READ], id="mistral-vllm-tokenizer"),
    # Mistral with every control token stripped (skip_special_tokens): a bare list
    # (mistral_tool_parser.py).
    pytest.param(
        '[{"name": "read_file", "arguments": {"path": "a.txt"}}]', [READ], id="mistral-stripped"
    ),
    # Llama 3.x: Meta's templates ask for {"name": ..., "parameters": ...}; vLLM
    # llama_tool_parser.py, llama.cpp common_chat_parse_llama_3_1 (the optional "type": "function"),
    # calls separated by "; ".
    pytest.param(
        '{"name": "read_file", "parameters": {"path": "a.txt"}}', [READ], id="llama-3-json"
    ),
    pytest.param(
        '<|python_tag|>{"type": "function", "name": "read_file", "parameters": {"path": "a.txt"}}; '
        '{"name": "run_shell", "parameters": {"command": "echo hi"}}',
        [READ, SHELL],
        id="llama-3-python-tag-two",
    ),
    # Small Llamas encode the parameters twice.
    pytest.param(
        '{"name": "read_file", "parameters": "{\\"path\\": \\"a.txt\\"}"}',
        [READ],
        id="llama-3-twice",
    ),
    # Llama 3.2 and 4 pythonic: vLLM pythonic_tool_parser.py, llama4_pythonic_tool_parser.py
    # (<|python_start|>).
    pytest.param(
        "[read_file(path='a.txt'), run_shell(command=\"echo hi\")]", [READ, SHELL], id="pythonic"
    ),
    pytest.param(
        '<|python_start|>[read_file(path="a.txt")]<|python_end|>', [READ], id="llama-4-pythonic"
    ),
    # gpt-oss harmony: openai/harmony docs/format.md (recipient in the channel, then in the role);
    # llama.cpp common_chat_parse_gpt_oss.
    pytest.param(
        "<|channel|>analysis<|message|>Need to read the file.<|end|>"
        "<|start|>assistant<|channel|>commentary to=functions.read_file "
        '<|constrain|>json<|message|>{"path":"a.txt"}<|call|>',
        [READ],
        id="gpt-oss-harmony",
    ),
    pytest.param(
        "<|channel|>commentary<|message|>Let me look.<|end|>"
        "<|start|>assistant to=functions.read_file"
        '<|channel|>commentary json<|message|>{"path": "a.txt"}<|call|>',
        [READ],
        id="gpt-oss-recipient-in-role",
    ),
    # gpt-oss with its special tokens stripped (oobabooga/text-generation-webui#7374 shows
    # the glued words).
    pytest.param(
        'analysisNeed to read.assistantcommentary to=functions.read_file json{"path":"a.txt"}',
        [READ],
        id="gpt-oss-glued",
    ),
    # DeepSeek V3 and R1: vLLM deepseekv3_tool_parser.py; its chat template in llama.cpp
    # models/templates.
    pytest.param(
        f"Let me check.<｜tool▁calls▁begin｜>{DS['begin']}function{DS['sep']}read_file\n```json\n"
        f'{{"path": "a.txt"}}\n```{DS["end"]}\n{DS["begin"]}function{DS["sep"]}run_shell\n```json\n'
        f'{{"command": "echo hi"}}\n```{DS["end"]}<｜tool▁calls▁end｜>',
        [READ, SHELL],
        id="deepseek-v3",
    ),
    # DeepSeek V3.1: vLLM deepseekv31_tool_parser.py (no type, no fence).
    pytest.param(
        f'<｜tool▁calls▁begin｜>{DS["begin"]}read_file{DS["sep"]}{{"path": "a.txt"}}{DS["end"]}'
        "<｜tool▁calls▁end｜>",
        [READ],
        id="deepseek-v3.1",
    ),
    # DeepSeek with ▁ written as _ (llama.cpp common_chat_parse_deepseek_r1 accepts
    # <｜tool_calls_begin｜>).
    pytest.param(
        "<｜tool_calls_begin｜><｜tool_call_begin｜>function<｜tool_sep｜>read_file\n```json\n"
        '{"path": "a.txt"}\n```'
        "<｜tool_call_end｜><｜tool_calls_end｜>",
        [READ],
        id="deepseek-underscores",
    ),
    # DeepSeek V3.2 DSML (DeepSeek's own API, now and then).
    pytest.param(
        '<｜DSML｜function_calls>\n<｜DSML｜invoke name="read_file">\n'
        '<｜DSML｜parameter name="path" string="true">a.txt'
        "</｜DSML｜parameter>\n</｜DSML｜invoke>\n</｜DSML｜function_calls>",
        [READ],
        id="deepseek-dsml",
    ),
    # MiniMax-M2: vLLM minimax_m2_tool_parser.py.
    pytest.param(
        '<minimax:tool_call>\n<invoke name="read_file">\n<parameter name="path">a.txt</parameter>\n'
        "</invoke>\n"
        "</minimax:tool_call>",
        [READ],
        id="minimax-m2",
    ),
    # Hermes and Qwen: vLLM hermes_tool_parser.py, whose regex also takes an unclosed
    # <tool_call> at the end.
    pytest.param(
        'Sure.\n<tool_call>\n{"name": "read_file", "arguments": {"path": "a.txt"}}',
        [READ],
        id="hermes-open",
    ),
    # Granite 3.1: vLLM granite_tool_parser.py, a list after <tool_call>.
    pytest.param(
        '<tool_call>[{"name": "read_file", "arguments": {"path": "a.txt"}}]',
        [READ],
        id="granite-3.1",
    ),
    # Qwen3-Coder: vLLM qwen3coder_tool_parser.py, also without its <tool_call> wrapper.
    pytest.param(
        "<function=read_file>\n<parameter=path>\na.txt\n</parameter>\n</function>",
        [READ],
        id="qwen3-coder",
    ),
    # Llama 3.1's custom-tool format, in Meta's prompt-format documents:
    # <function=NAME>{json}</function>.
    pytest.param(
        '<function=read_file>{"path": "a.txt"}</function>', [READ], id="llama-3.1-function-tag"
    ),
    # Thinking first, then the call: Qwen3 and Kimi K2 Thinking without a reasoning parser.
    pytest.param(
        "<think>The file first.</think>\n<tool_call>\n"
        '{"name": "read_file", "arguments": {"path": "a.txt"}}\n'
        "</tool_call>",
        [READ],
        id="think-then-hermes",
    ),
    # GLM-4.7, whose template opens <think> in the prompt: only </think> arrives.
    pytest.param(
        "The user wants it.</think><tool_call>read_file<arg_key>path</arg_key>"
        "<arg_value>a.txt</arg_value></tool_call>",
        [READ],
        id="glm-4.7-bare-think-close",
    ),
    # Names with stray markup: Kimi's functions. prefix and index, gpt-oss's leaked channel
    # (vllm-project/vllm#32587).
    pytest.param(
        '<tool_call>{"name": " functions.read_file:3 ", "arguments": {"path": "a.txt"}}'
        "</tool_call>",
        [READ],
        id="name-with-markup",
    ),
]


def calls_of(message: dict) -> list:
    return [
        (c["function"]["name"], json.loads(c["function"]["arguments"]))
        for c in message.get("tool_calls", [])
    ]


@pytest.mark.parametrize("setting", ["run", "ask"])
@pytest.mark.parametrize("streamed", [False, True], ids=["plain", "streamed"])
@pytest.mark.parametrize(("text", "calls"), SHAPES)
def test_a_tool_call_written_as_text_runs_as_a_real_call(
    loop, server, text_calls, text, calls, streamed, setting
):
    # AGENT_TEXT_CALLS=run: under yes, as a tool call runs; ask (the default): each that could
    # change anything waits for a yes (issue #43), and runs once approved
    text_calls(setting)
    replies = [reply(text), reply("done")]
    server.add(*([Stream(r, size=3) for r in replies] if streamed else replies))
    result = loop("go", yes=True, stream=streamed)
    if setting == "ask" and any(name != "read_file" for name, _ in calls):
        assert result.status == "paused" and len(server.requests) == 1
        messages = runs.conversation(result.events())
        yes = {c["id"]: True for c in pauses.waiting(messages)}
        assert [c["id"] for c in pauses.open_calls(messages)][-len(yes) :] == list(yes)
        result = loop(None, messages, yes=True, stream=streamed, approvals=yes)
    sent = server.messages(1)
    assert calls_of(sent[2]) == calls
    assert [m["tool_call_id"] for m in sent[3:]] == [c["id"] for c in sent[2]["tool_calls"]]
    assert "read as calls" in result.stderr or setting == "ask"
    assert result.status == "answered" and len(server.requests) == 2


def quoted(text: str, how: str) -> str:
    return {
        "fence": f"Here is what it looks like.\n```\n{text}\n```",
        "tilde": f"Like so.\n~~~\n{text}\n~~~",
        "prose-after": f"{text}\n\nThat is how the model writes a call.",
        "indented": "The call:\n\n" + "\n".join("    " + line for line in text.splitlines()),
        "blockquote": "As the docs say:\n\n" + "\n".join("> " + line for line in text.splitlines()),
    }[how]


@pytest.mark.parametrize("how", ["fence", "tilde", "prose-after", "indented", "blockquote"])
@pytest.mark.parametrize(("text", "calls"), SHAPES)
def test_the_same_markup_quoted_in_code_or_followed_by_prose_is_no_call(text, calls, how):
    assert dialects.recover_tool_calls(quoted(text, how), KNOWN)[0] == []


def test_a_quoted_call_in_a_reply_is_the_answer_and_runs_nothing(loop, server):
    server.add(reply(quoted(SHAPES[0].values[0], "fence")))
    result = loop("go", yes=True)
    assert result.status == "answered" and "tool_calls" not in server.messages(0)[-1]
    assert len(server.requests) == 1 and not list((loop.workdir).iterdir())


# Members no test above names, found by a fresh reader trying each family (with where the
# shape comes from).
MORE = [
    # Real leaks after a line that ends in a colon: GLM-4.5-Air on ik_llama.cpp
    # (ikawrakow/ik_llama.cpp#753), Qwen.
    pytest.param(
        "Let me look: <tool_call>read_file <arg_key>path</arg_key> <arg_value>a.txt</arg_value> "
        "</tool_call>",
        [READ],
        id="glm-after-let-me-look",
    ),
    pytest.param(
        "Let me read the file:\n\n<tool_call>\n"
        '{"name": "read_file", "arguments": {"path": "a.txt"}}\n'
        "</tool_call>",
        [READ],
        id="hermes-after-a-colon",
    ),
    pytest.param(
        'I\'ll check:[TOOL_CALLS]read_file[ARGS]{"path": "a.txt"}',
        [READ],
        id="mistral-after-a-colon",
    ),
    # OLMo 3: vLLM olmo3_tool_parser.py, one pythonic call a line inside <function_calls>,
    # JSON's true/false/null.
    pytest.param(
        "<function_calls>\nread_file(path='a.txt')\nrun_shell(command=\"echo hi\")\n"
        "</function_calls>",
        [READ, SHELL],
        id="olmo-3",
    ),
    # Llama's <|python_tag|> and Phi-4-mini's functools after some prose.
    pytest.param(
        'I will read it.<|python_tag|>{"name": "read_file", "parameters": {"path": "a.txt"}}',
        [READ],
        id="python-tag-after-prose",
    ),
    pytest.param(
        'Sure. functools[{"name": "read_file", "arguments": {"path": "a.txt"}}]',
        [READ],
        id="phi-4-mini",
    ),
    # Kimi: <| inside a JSON string, and arguments encoded twice; Mistral v11 arguments
    # encoded twice.
    pytest.param(
        "<|tool_calls_section_begin|><|tool_call_begin|>functions.write_file:0<|tool_call_argument_begin|>"
        '{"path": "a.txt", "content": "a <|im_end|> b"}<|tool_call_end|><|tool_calls_section_end|>',
        [("write_file", {"path": "a.txt", "content": "a <|im_end|> b"})],
        id="kimi-token-in-a-string",
    ),
    pytest.param(
        "<|tool_calls_section_begin|><|tool_call_begin|>functions.read_file:0<|tool_call_argument_begin|>"
        '"{\\"path\\": \\"a.txt\\"}"<|tool_call_end|><|tool_calls_section_end|>',
        [READ],
        id="kimi-twice",
    ),
    pytest.param(
        '[TOOL_CALLS]read_file[ARGS]"{\\"path\\": \\"a.txt\\"}"', [READ], id="mistral-twice"
    ),
    # Qwen3-Coder without </parameter>: vLLM qwen3coder_tool_parser.py ends it at </function>
    # or the next one.
    pytest.param(
        "<tool_call>\n<function=read_file>\n<parameter=path>\na.txt\n</function>\n</tool_call>",
        [READ],
        id="qwen3-coder-no-parameter-end",
    ),
    # Hermes: a closing tag inside a value is the value's (read as JSON).
    pytest.param(
        "<tool_call>\n"
        '{"name": "write_file", "arguments": {"path": "a.md", "content": "</tool_call>"}}\n'
        "</tool_call>",
        [("write_file", {"path": "a.md", "content": "</tool_call>"})],
        id="hermes-tag-in-a-value",
    ),
    # MiniMax's attributes in single quotes: vLLM minimax_m2_tool_parser.py _extract_name
    # strips both quotes.
    pytest.param(
        "<minimax:tool_call>\n<invoke name='read_file'>\n<parameter name='path'>a.txt</parameter>\n"
        "</invoke>"
        "\n</minimax:tool_call>",
        [READ],
        id="minimax-single-quotes",
    ),
    # GLM's stop token after the call, and a literal \n after the name.
    pytest.param(
        "<tool_call>read_file<arg_key>path</arg_key><arg_value>a.txt</arg_value></tool_call><|observation|>",
        [READ],
        id="glm-observation",
    ),
    pytest.param(
        "<tool_call>read_file\\n<arg_key>path</arg_key><arg_value>a.txt</arg_value></tool_call>",
        [READ],
        id="glm-literal-backslash-n",
    ),
    # DeepSeek V3.1 with its end token left out; Granite 3.0's <|tool_call|> (vLLM
    # granite_tool_parser.py).
    pytest.param(
        f'{DS["begin"]}read_file{DS["sep"]}{{"path": "a.txt"}}<｜end▁of▁sentence｜>',
        [READ],
        id="deepseek-v3.1-no-call-end",
    ),
    pytest.param(
        '<|tool_call|>[{"name": "read_file", "arguments": {"path": "a.txt"}}]',
        [READ],
        id="granite-3.0",
    ),
    # Reasoning with a code fence in it, closed by a bare </think>, then a call.
    pytest.param(
        'Plan:\n```python\nx = 1\n```\n</think>\n<tool_call>\n{"name": "read_file", "arguments": '
        '{"path": "a.txt"}}\n</tool_call>',
        [READ],
        id="fenced-reasoning-then-call",
    ),
]

NOT_CALLS = [
    # An unclosed block followed by prose is quoted, whichever reader reads it.
    pytest.param(
        "Qwen3-Coder writes <function=run_shell><parameter=command>rm -rf build</parameter> and "
        "then closes the function tag.",
        id="qwen3-coder-open-then-prose",
    ),
    pytest.param(
        "<tool_call>run_shell<arg_key>command</arg_key><arg_value>rm -rf build</arg_value> "
        "is how GLM writes.",
        id="glm-open-then-prose",
    ),
    pytest.param(
        '<minimax:tool_call><invoke name="run_shell">'
        '<parameter name="command">rm -rf build</parameter>'
        "</invoke> is the format.",
        id="minimax-open-then-prose",
    ),
    pytest.param(
        "In Qwen3-Coder, a call looks like <function=read_file> then parameters.",
        id="function-then-words",
    ),
    # A JSON answer that names a tool but carries no arguments, or a schema ("show me the tool").
    pytest.param('{"name": "run_shell", "description": "Runs a command"}', id="json-description"),
    pytest.param(
        '{"name": "run_shell", "parameters": {"type": "object", "properties": {"command": {"type": '
        '"string"}}}}',
        id="json-schema",
    ),
    pytest.param('{"name": "Alice", "age": 3}', id="json-person"),
    pytest.param("[print(x) for x in y]", id="python-comprehension"),
    # Values JSON cannot hold, and a Kimi call cut off by the next one's token.
    pytest.param("[read_file(path={1, 2})]", id="pythonic-set"),
    pytest.param("[read_file(path={[1]: 2})]", id="pythonic-unhashable"),
    pytest.param(
        "<|tool_call_begin|>functions.read_file:0<|tool_call_argument_begin|>"
        '{"path": "a"<|tool_call_begin|>',
        id="kimi-cut-off-by-the-next-call",
    ),
    # Thousands of unclosed openers, as a model stuck in a loop writes them: read in one
    # pass, no call.
    pytest.param("<minimax:tool_call>" + '<invoke name="a">' * 30000, id="minimax-loop"),
    pytest.param("<tool_call>x" + "<arg_key>a</arg_key>" * 30000, id="glm-loop"),
    pytest.param("<｜DSML｜function_calls>" + '<｜DSML｜invoke name="a">' * 30000, id="dsml-loop"),
    pytest.param("<tool_call>read_file\n<arg_key>path</arg_key>\n" * 2000, id="glm-call-loop"),
    pytest.param("hello " * 1000 + "<tool_call>x " * 80000, id="many-openers"),
]


@pytest.mark.parametrize(("text", "calls"), MORE)
def test_more_members_of_each_family_are_recovered(text, calls):
    found = dialects.recover_tool_calls(text, KNOWN)[0]
    assert [(c["function"]["name"], json.loads(c["function"]["arguments"])) for c in found] == calls


@pytest.mark.parametrize("text", NOT_CALLS)
def test_what_only_looks_like_a_call_is_no_call(text):
    assert dialects.recover_tool_calls(text, KNOWN)[0] == []


@pytest.mark.parametrize(
    ("text", "answer"),
    [
        # quoted in prose
        ("Use the </think> tag to end reasoning.", "Use the </think> tag to end reasoning."),
        ("Write `</think>` to close.", "Write `</think>` to close."),  # in inline code
        ("Let me write:\n```\nx\n```\n</think>\nHello", "\nHello"),  # reasoning with a fence in it
        # Command A
        ("<|START_THINKING|>x<|END_THINKING|><|START_RESPONSE|>Hello<|END_RESPONSE|>", "Hello"),
    ],
    ids=["think-tag-in-prose", "think-tag-in-code", "fenced-reasoning", "command-a"],
)
def test_thinking_ends_only_where_it_really_ends(text, answer):
    assert dialects.split_thinking(text)[1] == answer


def test_a_call_to_an_unknown_tool_or_with_unreadable_arguments_is_an_answer(loop, server):
    server.add(reply('[TOOL_CALLS]delete_everything[ARGS]{"all": true}'))
    server.add(
        reply("<tool_call>read_file<arg_key>path</arg_key><arg_value>a.txt</tool_call> and more")
    )
    assert loop("go").status == loop("go").status == "answered"
    assert len(server.requests) == 2


# Rule 12. Thinking written as text: vLLM reasoning/deepseek_r1_reasoning_parser.py (all before
# the first </think>), qwen3_reasoning_parser.py (<think>...</think>), mistral_reasoning_parser.py
# ([THINK]...[/THINK]), harmony's analysis channel (openai/harmony docs/format.md).
THINKING = [
    pytest.param("<think>\nThe user wants a greeting.\n</think>\n\nHello!", id="qwen3"),
    pytest.param(
        "The user wants a greeting. I'll say hello.\n</think>\n\nHello!", id="r1-distill-bare-close"
    ),
    pytest.param("[THINK]The user wants a greeting.[/THINK]Hello!", id="magistral"),
    pytest.param(
        "<|channel|>analysis<|message|>The user wants a greeting.<|end|>"
        "<|start|>assistant<|channel|>final"
        "<|message|>Hello!<|return|>",
        id="gpt-oss-final-channel",
    ),
    pytest.param("analysisThe user wants a greeting.assistantfinalHello!", id="gpt-oss-glued"),
]


@pytest.mark.parametrize("streamed", [False, True], ids=["plain", "streamed"])
@pytest.mark.parametrize("text", THINKING)
def test_thinking_is_progress_and_never_the_answer(loop, server, text, streamed):
    server.add(Stream(reply(text), size=4) if streamed else reply(text))
    result = loop("hi", stream=streamed)
    assert (result.status, result.text, result.stdout) == ("answered", "Hello!", "")
    assert "thinking: The user wants a greeting." in result.stderr
    # sent back as it came
    assert server.requests and result.events()[-2]["message"]["content"] == text


def test_a_reply_that_is_all_thinking_is_an_empty_answer_quoting_its_end(loop, server):
    server.add(reply("<think>Let me think about the files. I am still thinking"))
    result = loop("hi")
    assert result.status == "empty_answer" and "I am still thinking" in result.text


def test_a_call_inside_the_thinking_is_not_run_and_one_after_it_is(loop, server, text_calls):
    text_calls("run")  # the one after it runs under yes, as a tool call does
    inside = (
        '<tool_call>{"name": "run_shell", "arguments": {"command": "touch INSIDE"}}</tool_call>'
    )
    after = (
        '<tool_call>{"name": "write_file", "arguments": {"path": "after.txt", "content": "x"}}'
        "</tool_call>"
    )
    server.add(reply(f"<think>Maybe {inside} first.</think>\n{after}"), reply("done"))
    result = loop("go", yes=True)
    assert result.status == "answered"
    assert [p.name for p in loop.workdir.iterdir()] == ["after.txt"]
    server.add(reply(f"<think>Maybe I should call\n{inside}</think>The answer is 4."))
    assert loop("again", yes=True).text == "The answer is 4."
    assert not (loop.workdir / "INSIDE").exists()


def test_the_command_line_prints_no_thinking_streamed_or_not(agent, server):
    text = "I should greet.\n</think>\n\nHello there."
    for options in ([], ["--stream"]):
        server.add(Stream(reply(text)) if options else reply(text))
        result = agent("hi", *options)
        assert (result.returncode, result.stdout) == (0, "Hello there.\n")
        assert "</think>" not in result.stdout and "thinking: I should greet." in result.stderr


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("functions.read_file:0", "read_file"),  # Kimi K2's call id as its name
        (" read_file\n", "read_file"),
        ("read_file<|channel|>commentary", "read_file"),  # vllm-project/vllm#32587
        ("<|python_tag|>run_shell", "run_shell"),
        ('"write_file"', "write_file"),
        ("read_files", "read_files"),  # another name: left for the model to hear about
        ("read_file_or_run_shell", "read_file_or_run_shell"),
    ],
)
def test_a_tool_name_with_stray_markup_is_the_tool_it_names_when_unambiguous(name, expected):
    assert dialects.tool_name(name, ("read_file", "write_file", "run_shell")) == expected


def test_a_server_parsed_call_with_a_marked_up_name_runs_the_tool_it_names(loop, server):
    from scripted_server import call

    server.add(reply(tool_calls=[call("functions.read_file:0", {"path": "a.txt"})]), reply("done"))
    loop("go")
    assert server.messages(1)[2]["tool_calls"][0]["function"]["name"] == "read_file"
    assert "does not exist" in server.messages(1)[3]["content"]


def test_every_family_in_the_table_names_its_source_and_is_tested():
    tested = " ".join(p.id for p in SHAPES)
    for family, source, _markup in dialects.FAMILIES:
        assert family and ("vLLM" in source or "llama.cpp" in source or "API" in source)
    for word in (
        "kimi",
        "glm",
        "mistral",
        "llama",
        "pythonic",
        "gpt-oss",
        "deepseek",
        "minimax",
        "hermes",
        "qwen3",
    ):
        assert word in tested
