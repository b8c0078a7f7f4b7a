# ruff: noqa: RUF001 -- fullwidth colons and words in other scripts are what models write
"""Calls written as text, the next layer (issue #34): a call is run only where it stands as the
model's own next action; the person's words veto; fences and thinking are read by what they say.

Sources, family by family:
- fences labelled as calls: Google's Gemma function-calling guide and google-gemma/cookbook
  (Gemma 3 wraps its call in ```tool_code); a fence that is the whole reply: vLLM
  tool_parsers/qwen2_5_coder_tool_parser.py and xlam_tool_parser.py;
- thinking named after its token: vLLM reasoning/gemma4_reasoning_parser.py
  (<|channel>thought ... <channel|>); values in Gemma's calls: vLLM
  tool_parsers/gemma4_tool_parser.py;
- a call then a sentence: LFM2's model card and vLLM tool_parsers/lfm2_tool_parser.py;
- GigaChat 3: vLLM tool_parsers/gigachat3_tool_parser.py (function call<|role_sep|>, and
  <|function_call|>).
"""

import json
import random
import threading
from collections import UserDict

import pytest
from conftest import events_of
from scripted_server import Error, ScriptedServer, call, reply

import agent as agent_module
from realworld import dialects, replies
from realworld.compaction import Compacted

KNOWN = {"read_file": ["path"], "write_file": ["path", "content"], "run_shell": ["command"]}
WRITE = ("write_file", {"path": "a.txt", "content": "hi"})
HERMES = (
    '<tool_call>\n{"name": "write_file", "arguments": {"path": "a.txt", "content": "hi"}}\n'
    "</tool_call>"
)
PLAN_LIST = "\n1. a.txt\n2. b.txt\n\n"


def recovered(text: str, quoted_in=(), asked: str = "") -> list:
    calls = dialects.recover_tool_calls(text, KNOWN, quoted_in, asked)[0]
    return [(c["function"]["name"], json.loads(c["function"]["arguments"])) for c in calls]


# --- One table of cue words, every rule in every language -----------------------------------------

# For each language of dialects.CUES, one sentence for each rule; "ask" is the person's message
# that asks to see a call (the call and see columns), "keep" the one that asks that nothing change.
SAMPLES = {
    "en": {
        "announces": "I'll write the file now:",
        "next": "Now write it.",
        "topics": "Now, the format:",
        "again": "Let me run it again:",
        "affirms": "Sure.",
        "presents": "Here is the file:",
        "shows": "Let me show you the call:",
        "examples": "For example:",
        "plans": "My plan:",
        "describes": "The config contains:",
        "another": "Then the model writes:",
        "past": "Then I ran:",
        "condition": "If the tests fail, I'll run:",
        "negation": "I won't run this:",
        "ask": "What does a tool call that writes a.txt look like?",
        "keep": "Don't change anything, just tell me what you would write to a.txt.",
    },
    "zh": {
        "announces": "我来写入文件：",
        "next": "现在写入 a.txt。",
        "topics": "现在是格式：",
        "again": "我再写一次：",
        "affirms": "好的。",
        "presents": "这是文件：",
        "shows": "我给你演示一下：",
        "examples": "例如：",
        "plans": "计划：",
        "describes": "文件内容：",
        "another": "第二步：模型输出：",
        "past": "然后我运行了：",
        "condition": "如果测试失败，我会运行：",
        "negation": "我不会运行它：",
        "ask": "write_file 调用是什么样的？",
        "keep": "不要修改任何东西，只告诉我你会写什么。",
    },
    "ja": {
        "announces": "ファイルを書きます：",
        "next": "次に、a.txt。",
        "topics": "次に形式：",
        "again": "もう一度書きます：",
        "affirms": "はい。",
        "presents": "これはファイルです：",
        "shows": "呼び出しを見せます：",
        "examples": "例えば：",
        "plans": "手順：",
        "describes": "ファイルの内容：",
        "another": "モデルの出力：",
        "past": "ファイルを実行しました：",
        "condition": "もし失敗したら、次を実行します：",
        "negation": "これは実行しません：",
        "ask": "write_file の呼び出しはどのようになりますか？",
        "keep": "何も変更しないで、何を書くか教えて。",
    },
    "ko": {
        "announces": "파일을 작성하겠습니다:",
        "next": "이제 a.txt.",
        "topics": "이제 형식:",
        "again": "다시 작성하겠습니다:",
        "affirms": "네.",
        "presents": "다음은 파일입니다:",
        "shows": "호출을 보여 드릴게요:",
        "examples": "예를 들어:",
        "plans": "계획:",
        "describes": "파일 내용:",
        "another": "모델 출력:",
        "past": "파일을 실행했습니다:",
        "condition": "만약 실패하면 다음을 실행하겠습니다:",
        "negation": "이것은 실행하지 않겠습니다:",
        "ask": "write_file 호출은 어떻게 생겼나요?",
        "keep": "아무것도 바꾸지 마세요. 무엇을 쓸지만 알려 주세요.",
    },
    "fr": {
        "announces": "Je vais écrire le fichier :",
        "next": "Maintenant, le fichier.",
        "topics": "Maintenant, le format :",
        "again": "Je vais l'écrire de nouveau :",
        "affirms": "D'accord.",
        "presents": "Voici le fichier :",
        "shows": "Je vous montre l'appel :",
        "examples": "Par exemple :",
        "plans": "Mon plan :",
        "describes": "Le fichier contient :",
        "another": "Ensuite, le modèle écrit :",
        "past": "Ensuite, j'ai lancé :",
        "condition": "Si les tests échouent, je vais lancer :",
        "negation": "Je ne vais pas l'exécuter :",
        "ask": "À quoi ressemble un appel à write_file ?",
        "keep": "Ne change rien, dis-moi juste ce que tu écrirais.",
    },
    "es": {
        "announces": "Voy a escribir el archivo:",
        "next": "Ahora, el archivo.",
        "topics": "Ahora, el formato:",
        "again": "Voy a escribirlo de nuevo:",
        "affirms": "Vale.",
        "presents": "Aquí está el archivo:",
        "shows": "Te muestro la llamada:",
        "examples": "Por ejemplo:",
        "plans": "Mi plan:",
        "describes": "El archivo contiene:",
        "another": "Luego el modelo escribe:",
        "past": "Luego he ejecutado:",
        "condition": "Si fallan las pruebas, voy a ejecutar:",
        "negation": "No voy a ejecutarlo:",
        "ask": "¿Cómo se ve una llamada a write_file?",
        "keep": "No cambies nada, solo dime qué escribirías.",
    },
    "de": {
        "announces": "Ich werde die Datei schreiben:",
        "next": "Jetzt die Datei.",
        "topics": "Jetzt das Format:",
        "again": "Ich werde es erneut schreiben:",
        "affirms": "Gut.",
        "presents": "Hier ist die Datei:",
        "shows": "Ich zeige dir den Aufruf:",
        "examples": "Zum Beispiel:",
        "plans": "Mein Plan:",
        "describes": "Die Datei enthält:",
        "another": "Dann schreibt das Modell:",
        "past": "Dann habe ich ausgeführt:",
        "condition": "Wenn die Tests fehlschlagen, werde ich ausführen:",
        "negation": "Ich werde das nicht ausführen:",
        "ask": "Wie sieht ein Aufruf von write_file aus?",
        "keep": "Ändere nichts, sag mir nur, was du schreiben würdest.",
    },
    "pt": {
        "announces": "Vou escrever o arquivo:",
        "next": "Agora, o arquivo.",
        "topics": "Agora, o formato:",
        "again": "Vou escrever de novo:",
        "affirms": "Certo.",
        "presents": "Aqui está o arquivo:",
        "shows": "Vou mostrar a chamada:",
        "examples": "Por exemplo:",
        "plans": "Meu plano:",
        "describes": "O arquivo contém:",
        "another": "Depois o modelo escreve:",
        "past": "Depois executei:",
        "condition": "Se os testes falharem, vou executar:",
        "negation": "Não vou executar isto:",
        "ask": "Como é uma chamada para write_file?",
        "keep": "Não altere nada, só me diga o que você escreveria.",
    },
    "it": {
        "announces": "Ora scrivo il file:",
        "next": "Ora il file.",
        "topics": "Ora il formato:",
        "again": "Lo scriverò di nuovo:",
        "affirms": "Certo.",
        "presents": "Ecco il file:",
        "shows": "Ti mostro la chiamata:",
        "examples": "Per esempio:",
        "plans": "Il mio piano:",
        "describes": "Il file contiene:",
        "another": "Poi il modello scrive:",
        "past": "Poi ho eseguito:",
        "condition": "Se i test falliscono, eseguirò:",
        "negation": "Non lo eseguirò:",
        "ask": "Come appare una chiamata a write_file?",
        "keep": "Non modificare niente, dimmi solo cosa scriveresti.",
    },
    "nl": {
        "announces": "Ik ga het bestand schrijven:",
        "next": "Nu het bestand.",
        "topics": "Nu het formaat:",
        "again": "Ik ga het opnieuw schrijven:",
        "affirms": "Prima.",
        "presents": "Hier is het bestand:",
        "shows": "Ik toon de aanroep:",
        "examples": "Bijvoorbeeld:",
        "plans": "Mijn plan:",
        "describes": "Het bestand bevat:",
        "another": "Dan schrijft het model:",
        "past": "Dan heb ik uitgevoerd:",
        "condition": "Als de tests falen, ga ik uitvoeren:",
        "negation": "Ik ga dit niet uitvoeren:",
        "ask": "Hoe ziet een aanroep van write_file eruit?",
        "keep": "Verander niets, vertel me alleen wat je zou schrijven.",
    },
    "ru": {
        "announces": "Я запишу файл:",
        "next": "Теперь файл.",
        "topics": "Теперь формат:",
        "again": "Я запишу его снова:",
        "affirms": "Хорошо.",
        "presents": "Вот файл:",
        "shows": "Покажу вызов:",
        "examples": "Например:",
        "plans": "Мой план:",
        "describes": "Файл содержит:",
        "another": "Затем модель пишет:",
        "past": "Затем я запустил:",
        "condition": "Если тесты упадут, я запущу:",
        "negation": "Я не буду это запускать:",
        "ask": "Как выглядит вызов write_file?",
        "keep": "Ничего не меняй, просто скажи, что бы ты написал.",
    },
}
RUNS = {"announces", "next", "affirms", "plans"}  # the rules that let a call run; others stop it
CASES = [(lang, rule) for lang in SAMPLES for rule in SAMPLES[lang]]


def test_the_table_has_every_rule_for_every_language_and_no_entry_matches_nothing():
    assert set(SAMPLES) == set(dialects.CUES)
    rules = set(dialects.CUES["en"])
    assert all(set(row) == rules - {"call", "see"} | {"ask"} for row in SAMPLES.values())
    for lang, row in dialects.CUES.items():
        assert set(row) == rules, lang
        for rule, words in row.items():
            assert words and not any(w == "" for w in words.split("|")), (lang, rule)
            assert not dialects.cue(rule).fullmatch(""), (lang, rule)


@pytest.mark.parametrize(("lang", "rule"), CASES, ids=[f"{lang}-{rule}" for lang, rule in CASES])
def test_every_rule_reads_its_words_in_every_language(lang, rule):
    sample = SAMPLES[lang][rule]
    columns = ("call", "see") if rule == "ask" else (rule,)
    for column in columns:  # the sample is read by the table's column, not by chance
        assert dialects.cue(column).search(sample), (lang, column)
    if rule == "again":  # a call made before runs again where the model says so, only there
        made = replies.quoted_texts([{"tool_calls": [call(*WRITE)]}])
        assert recovered(sample + "\n" + HERMES, made) == [WRITE], lang
        assert recovered("Sure.\n" + HERMES, made) == []
        return
    if rule in ("ask", "keep"):  # the person's words veto; the same reply runs without them
        assert recovered("我来写一个完整的：\n" + HERMES, [sample], sample) == []
        assert recovered("I'll write it:\n" + HERMES, [sample], sample) == []
        assert recovered("I'll write it:\n" + HERMES) == [WRITE]
        return
    text = sample + (PLAN_LIST if rule == "plans" else "\n") + HERMES
    assert recovered(text) == ([WRITE] if rule in RUNS else []), (lang, rule)


def test_a_person_writing_in_a_script_no_row_reads_gets_no_call_run():
    # Thai: no row reads it, so "don't run it" could not be seen there (fails safe)
    asked = "ช่วยแสดงให้ดูหน่อยว่าจะเขียนอะไร อย่าเปลี่ยนแปลงอะไร"
    assert recovered("I'll write it:\n" + HERMES, [asked], asked) == []
    assert recovered("I'll write it:\n" + HERMES, ["write a.txt"], "write a.txt") == [WRITE]


# --- Who acts and when ----------------------------------------------------------------------------

MENTIONS = [
    # named by the issue
    "Then the model writes:\n" + HERMES,
    "第二步：模型输出：\n" + HERMES,
    "First, Hermes:\n" + HERMES,
    "Let me walk you through it:\n1. The model decides to write.\n2. It emits:\n" + HERMES,
    "Done. I created the file, then I ran:\n" + HERMES,
    "文件已创建，然后我运行了：\n" + HERMES,
    # members no line names: another actor, a role label, a family by name, a past action
    "Step 3: the assistant replies with:\n" + HERMES,
    "Assistant:\n" + HERMES,
    "Next, Qwen emits:\n" + HERMES,
    "I've already written it:\n" + HERMES,
    "Сначала модель пишет:\n" + HERMES,
    "1. Read the task.\n2. The model answers:\n" + HERMES,
]


@pytest.mark.parametrize("text", MENTIONS)
def test_another_actor_or_a_past_action_is_a_mention(text):
    assert recovered(text) == []


def test_a_comparison_of_formats_runs_none_of_them():
    kimi = (
        "<|tool_calls_section_begin|><|tool_call_begin|>functions.write_file:0"
        '<|tool_call_argument_begin|>{"path": "a.txt", "content": "hi"}<|tool_call_end|>'
        "<|tool_calls_section_end|>"
    )
    assert recovered(f"First, Hermes:\n{HERMES}\nNow Kimi K2, with section tokens:\n{kimi}") == []


def test_a_plan_of_the_models_own_steps_still_runs():
    assert recovered("Here is my plan:\n1. Write a.txt\n2. Check it\n\n" + HERMES) == [WRITE]
    assert recovered("Here's the file I'll write:\n" + HERMES) == [WRITE]
    assert recovered("Here is the call I would make:\n" + HERMES) == []


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
    "For example:\n" + GEMMA3,
    "Gemma writes its calls like this:\n" + GEMMA3,
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


@pytest.mark.parametrize(
    "text",
    [
        '<|tool_call_start|>[write_file(path="a.txt", content="hi")]<|tool_call_end|>'
        "Checking the current status of the file.",  # LFM2's model card, named
        HERMES + " Now checking the result.",
        GEMMA4_CALL + "写入完成后我会检查。",
    ],
)
def test_a_sentence_after_a_closing_token_is_the_next_sentence(text):
    assert recovered(text) == [WRITE]


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


# --- Through the loop: a recap, a veto, a refusal compaction cannot help --------------------------


def test_a_recap_of_a_command_already_run_does_not_run_it_again(loop, server):
    recap = '<tool_call>{"name": "run_shell", "arguments": {"command": "echo one >> log.txt"}}'
    server.add(
        reply(tool_calls=[call("run_shell", {"command": "echo one >> log.txt"})]),
        reply(f"Done. First I ran:\n{recap}</tool_call>"),  # named: a past action
        reply(tool_calls=[call("run_shell", {"command": "echo two >> log.txt"})]),
        # no word says it is past: the repeat alone does, nothing having changed since
        reply(f"Sure.\n{recap.replace('one', 'two')}</tool_call>"),
    )
    messages = [{"role": "system", "content": agent_module.SYSTEM_PROMPT}]
    assert loop("append one line", messages, yes=True).status == "answered"
    assert loop("append another", messages, yes=True).status == "answered"
    assert (loop.workdir / "log.txt").read_text() == "one\ntwo\n"
    assert len(server.requests) == 4


def test_a_recap_of_a_call_recovered_from_text_is_not_run_again(loop, server, text_calls):
    text_calls("run")  # AGENT_TEXT_CALLS=run: what a recovered call does under --yes
    text = '<tool_call>{"name": "run_shell", "arguments": {"command": "echo one >> log.txt"}}'
    server.add(reply(f"I'll add the line.\n{text}</tool_call>"), reply(f"好的。\n{text}"))
    result = loop("append one line", yes=True)
    assert result.status == "answered" and (loop.workdir / "log.txt").read_text() == "one\n"
    assert len(server.requests) == 2


@pytest.mark.parametrize(
    "task",
    [
        "不要修改任何东西，只告诉我你会往 config.json 写什么。",
        "何も変更しないで、config.json に何を書くか教えてください。",
    ],
)
def test_a_request_to_change_nothing_keeps_a_text_call_from_writing(loop, server, task):
    (loop.workdir / "config.json").write_text('{"keep": true}')
    call_text = (
        '<tool_call>{"name": "write_file", "arguments": {"path": "config.json", '
        '"content": "{}"}}</tool_call>'
    )
    server.add(reply("我来写一个完整的：\n" + call_text))
    assert loop(task, yes=True).status == "answered"
    assert (loop.workdir / "config.json").read_text() == '{"keep": true}'
    assert len(server.requests) == 1


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
        events = [e["type"] for e in events_of(result.transcript)]
        assert "context/compacted" not in events and "context/window" in events
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
SECOND_EYES_MENTIONS = [
    "Adesso ti faccio vedere come si scrive una chiamata:\n" + CALL_W,
    "Ti illustrerò la sintassi di una chiamata:\n" + CALL_W,
    "Nu zie je hoe de aanroep eruitziet:\n" + CALL_W,
    "Agora veja como ficaria a chamada:\n" + CALL_W,
    "Сейчас опишу формат вызова:\n" + CALL_W,
    "次に、呼び出しの書き方を紹介します：\n" + CALL_W,
    "이제 호출 문법을 알려드리겠습니다:\n" + CALL_W,
    "接下来我介绍一下调用的语法：\n" + CALL_W,
    "When the user asks for a change, the loop sends the request.\nThen the agent calls:\n"
    + CALL_W,
    "Next, Codestral outputs:\n" + CALL_W,
    "I will not execute it; you can run it yourself:\n" + CALL_S,
    "If the tests fail, I'll run:\n" + CALL_S,
    "Je vais te présenter la syntaxe d'un appel :\n" + CALL_W,
    "Ahora te enseño cómo se escribe la llamada:\n" + CALL_W,
    "Ich werde dir beibringen, wie ein Aufruf aussieht:\n" + CALL_W,
    "If you'd like, I can run the following:\n" + CALL_S,
    "Now I'd describe the call you'd make as:\n" + CALL_W,
]
SECOND_EYES_LEAKS = [
    "Leggo il file:\n" + CALL_R,
    "Ik lees eerst het bestand:\n" + CALL_R,
    "Deixa eu ver o arquivo:\n" + CALL_R,
    "Сначала посмотрим содержимое:\n" + CALL_R,
    "Primero reviso el archivo:\n" + CALL_R,
    "Zuerst lese ich die Datei:\n" + CALL_R,
    "D'abord, je lis le fichier :\n" + CALL_R,
]
SECOND_EYES_VETOES = [
    "설정 파일은 건드리지 마세요, 설명만 해 주세요.",
    "Lascia stare i file, voglio solo un piano.",
    "Pas niets aan, alleen uitleggen.",
    "Não mexa em nada, só me diga o que faria.",
    "ファイルには触らないでください。",
    "実行はしないでください。",
    "请勿修改任何文件，只给我方案。",
    "No hagas ningún cambio, solo explícame.",
    "Bitte keine Dateien anfassen, nur erklären.",
    "Ne fais aucune modification.",
    "Dry run only: don't actually write anything.",
]
SECOND_EYES_TASKS = [  # a narrow "don't", or calls in the person's code: no veto
    "Zeig mir, welche Funktionen config.py aufruft, und behebe den Fehler.",
    "Show me every function call in config.py, then fix X.",
    "Don't change the public API; fix the bug in config.py.",
    "不要修改测试，修复 config.py 里的 bug。",
]
REAL = "I'll write the fix now:\n" + CALL_W


@pytest.mark.parametrize("text", SECOND_EYES_MENTIONS)
def test_second_eyes_mentions_never_run(text):
    assert recovered(text) == []


@pytest.mark.parametrize("text", SECOND_EYES_LEAKS)
def test_second_eyes_real_calls_run(text):
    assert recovered(text) == [("read_file", {"path": "config.py"})]


@pytest.mark.parametrize("asked", SECOND_EYES_VETOES)
def test_second_eyes_vetoes_keep_a_call_from_running(asked):
    assert recovered(REAL, [asked], asked) == []


@pytest.mark.parametrize("asked", SECOND_EYES_TASKS)
def test_second_eyes_tasks_veto_nothing(asked):
    assert recovered(REAL, [asked], asked) == [
        ("write_file", {"path": "config.py", "content": "X = 1\n"})
    ]


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
THIRD_EYES_MENTIONS = [
    f'There are two formats. First:\n{R}\nSecond:\n[read_file(path="a")]',
    f"Hay dos formatos. El primero es:\n{R}",
    f"Now the file contains:\n{W}",
    f"Now it looks like:\n{W}",
    f"Der Aufruf sieht jetzt so aus:\n{W}",
    f"De aanroep ziet er nu zo uit:\n{W}",
    f"Maintenant, l'appel ressemble à ceci :\n{W}",
    f"Agora o arquivo contém:\n{W}",
    f"Ahora el archivo contiene:\n{W}",
    f"Jetzt enthält die Datei:\n{W}",
    f"ユーザーは次のコマンドを実行します：\n{RM}",
    f"このファイルには次の呼び出しが含まれています：\n{RM}",
    f"From Leo's notes:\n{RM}",
    f"I can run this if you want:\n{RM}",
    f"I'll run this once you confirm:\n{RM}",
    f"Я могу запустить это, если хотите:\n{RM}",
    f"Here is the command I'll use:\n{RM}\nI'll wait for your confirmation before running it.",
    f"I'll clean up:\n{RM}\nLet me know and I'll run it.",
    f"我来准备清理命令：\n{RM}\n你确认后我会执行。",
    f"然后用户会看到：\n{RM}",
    f"Prima, il vecchio script faceva:\n{RM}",
    f"Next step for you:\n{RM}",
    f"I'll leave this for you to run:\n{RM}",
]
THIRD_EYES_LEAKS = [
    'I\'ll run the tests first.\n```tool_code\nrun_shell(command="pytest")\n```\n'
    "This will show which tests fail.",
    f"I'll run the tests first.\n{PYTEST}\nThis will show which tests fail.",
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
THIRD_EYES_VETOES = [
    "Don't run any commands, I just want the plan.",
    "Please only plan; no execution.",
    "Ne lance aucune commande, explique seulement.",
    "No ejecutes ningún comando.",
    "Führe keine Befehle aus.",
    "Non eseguire nessun comando.",
    "Niet uitvoeren, alleen uitleggen.",
    "Не выполняй никаких команд.",
    "Não rode nenhum comando.",
]
THIRD_EYES_TASKS = [  # a narrow ask: no veto
    "Fix the tool_call parser and just run the tests.",
    "Don't change anything else; only fix the typo in README.md.",
    "Run the tests without changing them.",
    "No changes to the API, but please fix the bug in parse().",
    "修好这个 bug，但不要修改任何测试。",
    "Don't touch anything in /etc, but update config.py.",
    "Ändere nichts an den Tests, behebe aber den Fehler.",
]


@pytest.mark.parametrize("text", THIRD_EYES_MENTIONS)
def test_third_eyes_mentions_never_run(text):
    assert recovered(text) == []


@pytest.mark.parametrize("text", THIRD_EYES_LEAKS)
def test_third_eyes_real_calls_run(text):
    assert len(recovered(text)) == 1


@pytest.mark.parametrize("asked", THIRD_EYES_VETOES)
def test_third_eyes_vetoes_keep_a_call_from_running(asked):
    assert recovered(f"I'll do it.\n{RM}", [asked], asked) == []


@pytest.mark.parametrize("asked", THIRD_EYES_TASKS)
def test_third_eyes_narrow_asks_veto_nothing(asked):
    assert len(recovered(f"I'll do it.\n{RM}", [asked], asked)) == 1


def test_a_call_made_before_runs_again_only_where_the_model_says_again(loop, server, text_calls):
    text_calls("run")  # AGENT_TEXT_CALLS=run: what a recovered call does under --yes
    server.add(
        reply(tool_calls=[call("run_shell", {"command": "echo x >> log.txt"})]),
        reply(f"Let me run it again:\n{RM.replace('rm -rf build', 'echo x >> log.txt')}"),
        reply("Done."),
    )
    assert loop("append twice", yes=True).status == "answered"
    assert (loop.workdir / "log.txt").read_text() == "x\nx\n"


# --- A third round: realistic replies, and balance ------------------------------------------------


def hermes(name: str, arguments: dict) -> str:
    return "<tool_call>\n" + json.dumps({"name": name, "arguments": arguments}) + "\n</tool_call>"


CALC, TESTS = (
    hermes("read_file", {"path": "calc.py"}),
    hermes("run_shell", {"command": "pytest -q"}),
)
CLEAN = hermes("run_shell", {"command": "rm -rf build/"})
REALISTIC_LEAKS = [
    f"I'll read the file first.\n{CALC}\n\nOnce I see the contents, I can identify the bug.",
    "Let me list the files.\n"
    + hermes("run_shell", {"command": "ls"})
    + "\nAfter that, I'll check calc.py.",
    f"Sure, let me run the tests.\n{TESTS}\nLet me know if you need anything else!",
    f"{CALC}\n\nPlease wait while I read the file.",
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
RERUNS = [  # the same call as one made before, run again on purpose: to verify a fix
    f"I've fixed the bug. Now let's run the tests to verify the fix:\n{TESTS}",
    f"The fix is in place. Let me run the tests to make sure everything passes.\n{TESTS}",
    f"修复完成，现在运行测试验证一下。\n{TESTS}",
]
NARROW_ASKS = [
    "Show me what the call to parse() returns for 'abc'",
    "List the files, but don't run anything that deletes files",
    "Don't execute anything destructive; list the directory",
    "main.py のバグを直して、テストは変更しないでください",
    "テストは実行しないで、calc.py だけ直してください",
    "Add a dry run option to deploy.sh",
    "不要改这个文件，改 utils.py",
    "请勿修改测试文件，修复 calc.py 里的 bug",
    "无需运行测试，直接修复 calc.py",
    "Без запуска тестов просто исправь опечатку в calc.py",
    "Keine Änderungen an der API, nur den Bug in calc.py fixen",
    "Führe keine Tests aus, korrigiere nur calc.py",
    "Corrige le bug dans calc.py, aucune modification des tests.",
    "Ne lance aucun test, corrige juste calc.py",
    "Arregla el bug en calc.py, ningún cambio en los tests.",
    "No ejecutes ningún test, solo corrige calc.py",
    "Implement a dry run mode for the sync command",
]
OFFERS = [  # a call put forward for the person to look at first
    f"Next time, the model could emit:\n{CLEAN}",
    f"Let me write out the call so you can review it:\n{CLEAN}",
    f"Let me draft the command for your review:\n{CLEAN}",
    f"I'll prepare the cleanup command; review it before approving:\n{CLEAN}",
    f"Let me put together the command you'd need:\n{CLEAN}",
    f"Here is the command I'll use:\n{CLEAN}\nDoes this look right?",
]


@pytest.mark.parametrize("text", REALISTIC_LEAKS)
def test_realistic_replies_of_small_models_run(text):
    assert len(recovered(text, asked="fix the failing test")) == 1


@pytest.mark.parametrize("text", RERUNS)
def test_a_call_made_before_runs_again_where_the_model_says_why(text):
    made = replies.quoted_texts([{"tool_calls": [call("run_shell", {"command": "pytest -q"})]}])
    assert recovered(text, made) == [("run_shell", {"command": "pytest -q"})]
    assert recovered(f"Sure.\n{TESTS}", made) == []  # nothing says it runs once more: a recap


@pytest.mark.parametrize("asked", NARROW_ASKS)
def test_a_narrow_ask_in_any_language_vetoes_nothing(asked):
    assert not dialects.keeps_from_running(asked)


@pytest.mark.parametrize("text", OFFERS)
def test_a_call_offered_for_review_is_not_run(text):
    assert recovered(text) == []


def test_the_same_call_after_a_change_is_a_step_of_its_own(loop, server, text_calls):
    text_calls("run")  # AGENT_TEXT_CALLS=run: what a recovered call does under --yes
    # the tests run, a fix written, the tests run again: the most common loop, with no "again"
    tests = '<tool_call>{"name": "run_shell", "arguments": {"command": "echo ran >> runs.txt"}}'
    server.add(
        reply(tool_calls=[call("run_shell", {"command": "echo ran >> runs.txt"})]),
        reply(tool_calls=[call("write_file", {"path": "fix.py", "content": "x = 1\n"})]),
        reply(f"Now let me run the tests:\n{tests}</tool_call>"),
        reply("Fixed."),
    )
    assert loop("fix it", yes=True).status == "answered"
    assert (loop.workdir / "runs.txt").read_text() == "ran\nran\n"


@pytest.mark.parametrize(
    "asked",
    [
        "What would the function call look like?",
        "what does the call look like",
        "只显示调用",
        "显示调用",
        "只给我调用的例子",
        "Read-only: don't modify anything please",
        "do not make any changes",
        "don't run commands",
        "dont run it",
        "不要运行",
        "别执行这个命令",
        "不要修改",
    ],
)
def test_a_reviewers_vetoes_hold(asked):
    assert dialects.keeps_from_running(asked)


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
            replies.quotable(conversation)

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
    # a learner edits messages at a Python prompt: the size estimate and the calls made follow
    messages = [
        {"role": "assistant", "content": "", "tool_calls": [call("read_file", {"path": "a"})]}
    ]
    before = replies.estimate(messages)
    messages[0]["tool_calls"][0]["function"]["arguments"] = json.dumps({"path": "a" * 3000})
    assert replies.estimate(messages) > before + 900
    assert "a" * 3000 in "".join(replies.quoted_texts(messages))
