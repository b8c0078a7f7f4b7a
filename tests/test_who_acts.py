# ruff: noqa: RUF001 -- fullwidth colons and words in other scripts are what models write
"""Calls written as text, the next layer (issues #34, #43): a call is read only where it stands as
one, the run of calls a reply ends with; fences and thinking are read by what they say.

Sources, family by family:
- fences labelled as calls: Google's Gemma function-calling guide and google-gemma/cookbook
  (Gemma 3 wraps its call in ```tool_code); a fence that is the whole reply: vLLM
  tool_parsers/qwen2_5_coder_tool_parser.py and xlam_tool_parser.py;
- thinking named after its token: vLLM reasoning/gemma4_reasoning_parser.py
  (<|channel>thought ... <channel|>); values in Gemma's calls: vLLM
  tool_parsers/gemma4_tool_parser.py;
- GigaChat 3: vLLM tool_parsers/gigachat3_tool_parser.py (function call<|role_sep|>, and
  <|function_call|>).
"""

import json
import random
import threading
from collections import UserDict

import pytest
from conftest import events_of
from scripted_server import Error, ScriptedServer, call

from realworld import dialects, replies
from realworld.compaction import Compacted

KNOWN = {"read_file": ["path"], "write_file": ["path", "content"], "run_shell": ["command"]}
WRITE = ("write_file", {"path": "a.txt", "content": "hi"})
HERMES = (
    '<tool_call>\n{"name": "write_file", "arguments": {"path": "a.txt", "content": "hi"}}\n'
    "</tool_call>"
)
PLAN_LIST = "\n1. a.txt\n2. b.txt\n\n"


def recovered(text: str, quoted_in=()) -> list:
    calls = dialects.recover_tool_calls(text, KNOWN, quoted_in)[0]
    return [(c["function"]["name"], json.loads(c["function"]["arguments"])) for c in calls]


# --- One table of cue words, every rule in every language -----------------------------------------

# For each language of dialects.CUES, one sentence for each rule; "ask" is the person's message
# that asks to see a call (the call and see columns), "keep" the one that asks that nothing change.


# --- Who acts and when ----------------------------------------------------------------------------


def test_a_plan_of_the_models_own_steps_still_runs():
    assert recovered("Here is my plan:\n1. Write a.txt\n2. Check it\n\n" + HERMES) == [WRITE]
    assert recovered("Here's the file I'll write:\n" + HERMES) == [WRITE]


# --- Fences by what they say ----------------------------------------------------------------------

GEMMA3 = '```tool_code\nwrite_file(path="a.txt", content="hi")\n```'
FENCED_CALLS = [
    GEMMA3,  # Gemma 3, alone
    "Here's the file I'll write:\n" + GEMMA3,  # and after a sentence of its own
    '```tool_code\nprint(default_api.write_file(path="a.txt", content="hi"))\n```',  # cookbook
    '```tool_call\n{"name": "write_file", "arguments": {"path": "a.txt", "content": "hi"}}\n```',
    # the whole reply: Qwen2.5-Coder's object, xLAM's list, Llama's "parameters", no label
    '```json\n{"name": "write_file", "arguments": {"path": "a.txt", "content": "hi"}}\n```',
    '```json\n[{"name": "write_file", "arguments": {"path": "a.txt", "content": "hi"}}]\n```',
    '```\n{"name": "write_file", "parameters": {"path": "a.txt", "content": "hi"}}\n```',
    "<think>write it</think>\n"
    '```json\n{"name": "write_file", "arguments": {"path": "a.txt", "content": "hi"}}\n```',
]


@pytest.mark.parametrize("text", FENCED_CALLS)
def test_a_fence_that_says_it_is_a_call_is_one(text):
    assert recovered(text) == [WRITE]
    assert "```" not in dialects.recover_tool_calls(text, KNOWN)[1]


FENCED_MENTIONS = [
    "The format is:\n"
    '```json\n{"name": "write_file", "arguments": {"path": "a.txt", "content": "hi"}}\n```',
    '```json\n{"name": "write_file", "arguments": {"path": "a.txt", "content": "hi"}}\n```\n'
    "That is the JSON a call takes.",
    "```\n" + HERMES + "\n```",  # a fence around markup shows a format
    '```python\nwrite_file(path="a.txt", content="hi")\n```\nThis is how the helper is used.',
]


@pytest.mark.parametrize("text", FENCED_MENTIONS)
def test_a_fence_inside_an_explanation_is_no_call(text):
    assert recovered(text) == []


# --- Thinking by what its markers name, on either side of the token -------------------------------

GEMMA4_CALL = '<|tool_call>call:write_file{path:<|"|>a.txt<|"|>,content:<|"|>hi<|"|>}<tool_call|>'


@pytest.mark.parametrize(
    ("text", "thinking", "answer"),
    [
        ("<|channel>thought\nThe sum is 4.<channel|>It is 4.", "\nThe sum is 4.", "It is 4."),
        ("<|channel>reasoning\nadd them<channel|>4", "\nadd them", "4"),  # the name, not the word
        ("<|channel>thought\nstill thinking", "\nstill thinking", ""),  # never closed: all thinking
    ],
)
def test_thinking_named_after_its_token_is_thinking(text, thinking, answer):
    assert dialects.split_thinking(text) == (thinking, answer)


def test_a_call_drafted_inside_gemma_4_thinking_never_runs_and_one_after_it_does():
    draft = GEMMA4_CALL.replace("a.txt", "draft.txt")
    assert recovered(f"<|channel>thought\nMaybe {draft}<channel|>The answer is 4.") == []
    assert recovered(f"<|channel>thought\nI'll write it.<channel|>{GEMMA4_CALL}") == [WRITE]


@pytest.mark.parametrize(
    "text",
    [
        '<|tool_call>call:write_file{path:"a.txt",content:"hi"}<tool_call|>',  # named
        "<start_function_call>call:write_file{path:\"a.txt\",content:'hi'}<end_function_call>",
        '<|tool_call>call:write_file{path:<|"|>a.txt<|"|>,content:"hi"}<tool_call|>',
    ],
)
def test_gemma_values_lose_their_plain_quotes_as_its_parser_reads_them(text):
    if "'hi'" in text:  # single quotes are no JSON: kept as written, and the path still read
        assert recovered(text) == [("write_file", {"path": "a.txt", "content": "'hi'"})]
    else:
        assert recovered(text) == [WRITE]


def test_gemma_values_in_plain_quotes_keep_their_commas_and_escapes():
    text = '<|tool_call>call:write_file{path:"a.txt",content:"a, \\"b\\""}<tool_call|>'
    assert recovered(text) == [("write_file", {"path": "a.txt", "content": 'a, "b"'})]


@pytest.mark.parametrize(
    ("text", "family"),
    [
        (GEMMA4_CALL, "Gemma 4"),
        ('<|tool_call_start|>[write_file(path="a.txt", content="hi")]<|tool_call_end|>', "LFM2"),
        (GEMMA3, "Gemma 3"),
        ('function call<|role_sep|>\n{"name": "write_file", "arguments": {}}', "GigaChat 3"),
    ],
)
def test_the_step_line_names_the_family_that_wrote_it(text, family):
    assert family in dialects.family_of(text)


# --- A call, then a sentence; GigaChat's separators -----------------------------------------------


def test_prose_that_goes_on_after_a_call_on_its_line_still_makes_it_a_mention():
    assert recovered(HERMES.replace("\n", " ") + " is how Hermes writes it.") == []
    assert recovered(HERMES.replace("\n", " ") + " writes a file.") == []


@pytest.mark.parametrize(
    "text",
    [
        "I will write the file.<|message_sep|>function call<|role_sep|>\n"
        '{"name": "write_file", "arguments": {"path": "a.txt", "content": "hi"}}',
        'I will write the file.<|function_call|>{"name": "write_file", "arguments": '
        '{"path": "a.txt", "content": "hi"}}',
    ],
)
def test_gigachat_3_calls_run_and_the_answer_keeps_only_the_text(text):
    calls, content, _ = dialects.recover_tool_calls(text, KNOWN)
    assert [c["function"]["name"] for c in calls] == ["write_file"]
    assert content == "I will write the file."


# --- Through the loop: a refusal compaction cannot help ----------------------------------------


def test_a_context_refusal_that_compaction_cannot_help_is_one_line_once(agent):
    refusal = {
        "error": {
            "message": "This model's maximum context length is 2048 tokens. However, your "
            "messages resulted in 5000 tokens.",
            "code": "context_length_exceeded",
        }
    }
    server = ScriptedServer()
    try:
        agent.server = server
        server.add(Error(400, body=refusal))
        result = agent("x" * 20_000)  # the task alone is too long: there is nothing to compact
        assert result.returncode == 1 and len(server.requests) == 1  # no retry
        said = result.stderr.strip().splitlines()[1:]  # after the line that names the settings
        assert len(said) == 1 and "maximum context length is 2048" in said[0], result.stderr
        events = events_of(result.transcript)
        assert "context/compacted" not in [e["type"] for e in events]
        assert [e["window"] for e in events if e.get("status") == "context_full"] == [2048]
    finally:
        server.close()


# --- Members a second pair of eyes wrote, none of them named above --------------------------------

CALL_W = (
    '<tool_call>\n{"name": "write_file", "arguments": {"path": "config.py", "content": "X = 1\\n"}}'
    "\n</tool_call>"
)
CALL_S = (
    '<tool_call>\n{"name": "run_shell", "arguments": {"command": "rm -rf build"}}\n</tool_call>'
)
CALL_R = '<tool_call>\n{"name": "read_file", "arguments": {"path": "config.py"}}\n</tool_call>'
SECOND_EYES_LEAKS = [
    "Leggo il file:\n" + CALL_R,
    "Ik lees eerst het bestand:\n" + CALL_R,
    "Deixa eu ver o arquivo:\n" + CALL_R,
    "Сначала посмотрим содержимое:\n" + CALL_R,
    "Primero reviso el archivo:\n" + CALL_R,
    "Zuerst lese ich die Datei:\n" + CALL_R,
    "D'abord, je lis le fichier :\n" + CALL_R,
]
REAL = "I'll write the fix now:\n" + CALL_W


@pytest.mark.parametrize("text", SECOND_EYES_LEAKS)
def test_second_eyes_real_calls_run(text):
    assert recovered(text) == [("read_file", {"path": "config.py"})]


LONG = "x" * 400  # a reply long enough to be printed while it streams


@pytest.mark.parametrize(
    "text",
    [
        "Here's the file I'll write:\n"
        f'```tool_code\nwrite_file(path="a.txt", content="{LONG}")\n```\n',
        '```json\n{"name": "write_file", "arguments": '
        f'{{"path": "a.txt", "content": "{LONG}"}}}}\n```\n',
    ],
)
def test_a_call_fence_streamed_to_a_terminal_is_not_printed(text):
    # --stream on a terminal prints lines as they come: a fence that may be a call waits
    import contextlib
    import io

    printer = dialects.Printer(KNOWN)
    printer.live = True
    with contextlib.redirect_stdout(io.StringIO()) as out:
        for line in text.splitlines(keepends=True):
            printer.add(line)
        printer.end(text)
    assert "write_file" not in out.getvalue() and "```" not in out.getvalue()
    assert len(recovered(text)) == 1


# --- A second round of fresh eyes: shapes, describing words after an adverb, consent --------------

RM = '<tool_call>{"name": "run_shell", "arguments": {"command": "rm -rf build"}}</tool_call>'
W = '<tool_call>{"name": "write_file", "arguments": {"path": "a", "content": "b"}}</tool_call>'
R = '<tool_call>{"name": "read_file", "arguments": {"path": "a"}}</tool_call>'
PYTEST = '<tool_call>{"name": "run_shell", "arguments": {"command": "pytest"}}</tool_call>'
THIRD_EYES_LEAKS = [
    f"我再写一次：\n{W}",
    '路径错了。我再读一次：\n[read_file(path="a")]',
    f"Let me check the config format:\n{R}",
    f"Let me look at the syntax error in main.py:\n{R}",
    f"I'll paste the fix into utils.py:\n{W}",
    f"I'll fix the quoting bug:\n{W}",
    f"Let me run the parser tests:\n{PYTEST}",
    f"Let me check what the function returns:\n{R}",
    f"让我看看这个模板文件：\n{R}",
    f"我来读取上面提到的文件：\n{R}",
    f"まず設定ファイルの形式を確認します。\n{R}",
]


@pytest.mark.parametrize("text", THIRD_EYES_LEAKS)
def test_third_eyes_real_calls_run(text):
    assert len(recovered(text)) == 1


# --- A third round: realistic replies, and balance ------------------------------------------------


def hermes(name: str, arguments: dict) -> str:
    return "<tool_call>\n" + json.dumps({"name": name, "arguments": arguments}) + "\n</tool_call>"


CALC, TESTS = (
    hermes("read_file", {"path": "calc.py"}),
    hermes("run_shell", {"command": "pytest -q"}),
)
CLEAN = hermes("run_shell", {"command": "rm -rf build/"})
REALISTIC_LEAKS = [
    f"首先查看文件内容：\n{CALC}",
    f"To fix the test, I first need to see what's failing.\n{TESTS}",
    "I'll create an example file to test this.\n"
    + hermes("write_file", {"path": "example.py", "content": "print(1)\n"}),
    f"Now that I've made the change, let me run the tests.\n{TESTS}",
    f"After fixing the bug, let me run the tests.\n{TESTS}",
    f"Since I changed calc.py, I'll run the tests.\n{TESTS}",
    f"我已经修改了文件，现在运行测试。\n{TESTS}",
    f"Once more, with the fix applied, running the tests:\n{TESTS}",
    f"我们先运行测试看看。\n{TESTS}",
    f"好的，先跑一下测试。\n{TESTS}",
    f"I want to see which test fails.\n{TESTS}",
    f"I'd like to run the tests first.\n{TESTS}",
    f"The first step is to run the tests.\n{TESTS}",
    f"Using the run_shell tool to run the tests:\n{TESTS}",
]


@pytest.mark.parametrize("text", REALISTIC_LEAKS)
def test_realistic_replies_of_small_models_run(text):
    assert len(recovered(text)) == 1


def test_what_is_remembered_of_a_conversation_is_what_reading_it_afresh_gives():
    # replies.remembered() reads again only from the first message whose role, content,
    # reasoning or calls changed: whatever changes, in place or not, in this conversation or in
    # another read between (a helper's), its facts are those of reading every message afresh
    rng = random.Random(36)
    ours, helpers = [{"role": "system", "content": "s"}], [{"role": "system", "content": "h"}]

    def parts_of(message):
        content = message.get("content")
        return [p for p in content if isinstance(p, dict)] if isinstance(content, list) else []

    def a_call():
        return call(rng.choice(["read_file", "run_shell"]), {"path": str(rng.random())})

    changes = [
        lambda m: m.append({"role": "user", "content": f"task {rng.random()}"}),
        lambda m: m.append({"role": "assistant", "content": "", "tool_calls": [a_call()]}),
        lambda m: m.append({"role": "tool", "tool_call_id": "x", "content": str(rng.random())}),
        lambda m: rng.choice(m).update(content=f"new {rng.random()}"),
        lambda m: rng.choice(m).update(role=rng.choice(["user", "tool", "assistant"])),
        lambda m: rng.choice(m).update(reasoning_content=str(rng.random())),
        lambda m: [
            calls.append(a_call())
            for calls in [rng.choice(m).setdefault("tool_calls", [])]
            if isinstance(calls, list)
        ],
        lambda m: [
            c["function"].update(arguments=json.dumps({"path": str(rng.random())}))
            for c in rng.choice(m).get("tool_calls") or []
        ],
        lambda m: rng.choice(m).update(content=[{"type": "text", "text": "part"}]),
        lambda m: [p.update(text=str(rng.random())) for p in parts_of(rng.choice(m))],
        lambda m: m.insert(rng.randrange(1, len(m) + 1), {"role": "user", "content": "inserted"}),
        lambda m: m.pop(rng.randrange(1, len(m))) if len(m) > 1 else None,
        lambda m: m.__setitem__(-1, json.loads(json.dumps(dict(m[-1])))),  # an equal copy
        # equal by value, yet read otherwise: compaction's text, True for 1, calls in a tuple
        lambda m: [
            message.update(content=Compacted(str(message.get("content")), [str(rng.random())]))
            for message in [rng.choice(m)]
        ],
        lambda m: rng.choice(m).update(content=rng.choice([True, 1, 1.0])),
        lambda m: rng.choice(m).update(tool_calls=(a_call(),)),
        lambda m: m.append(UserDict({"role": "user", "content": "a mapping, not a dict"})),
    ]
    for _ in range(800):
        conversation = ours if rng.random() < 0.8 else helpers
        rng.choice(changes)(conversation)
        assert replies.remembered(conversation) == [replies.facts(m) for m in conversation]
        # the same messages in a list never read before: read afresh
        assert replies.quoted_texts(conversation) == replies.quoted_texts(list(conversation))


def test_conversations_read_in_two_threads_are_each_read_as_they_are():
    # one program may run two agents in threads: each reading is of its own conversation
    def grow(conversation: list, wrong: list) -> None:
        for i in range(300):
            conversation.append(
                {
                    "role": "assistant",
                    "content": "",
                    "tool_calls": [call("run_shell", {"command": f"echo {id(conversation)} {i}"})],
                }
            )
            conversation.append({"role": "tool", "tool_call_id": "x", "content": str(i)})
            if replies.remembered(conversation) != [replies.facts(m) for m in conversation]:
                wrong.append(i)
            replies.quoted_texts(conversation)

    wrong = []
    threads = [
        threading.Thread(target=grow, args=([{"role": "user", "content": "go"}], wrong))
        for _ in range(2)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert wrong == []


def test_a_message_changed_in_place_is_counted_again():
    # a learner edits messages at a Python prompt: the size estimate and the quoted texts follow
    messages = [
        {"role": "assistant", "content": "", "tool_calls": [call("read_file", {"path": "a"})]},
        {"role": "tool", "tool_call_id": "x", "content": "b"},
    ]
    before = replies.estimate(messages)
    messages[0]["tool_calls"][0]["function"]["arguments"] = json.dumps({"path": "a" * 3000})
    assert replies.estimate(messages) > before + 900
    messages[1]["content"] = "b" * 3000
    assert replies.quoted_texts(messages) == ["b" * 3000]
