"""The agent as a process against a real server with a real (tiny) model:
llama-server + SmolLM2-135M.

A 135M model is not smart, so these tests check only what must hold whatever it says:
no crash, a documented exit status, a well-formed transcript (each tool call answered
exactly once, a turn/end at the end) and no file written outside the workspace.
They skip when the server or the model is not installed (see real_server.py).
Run them with: python -m pytest -m real_model
"""

import json
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import ROOT, clean_env
from real_server import MODEL_NAME, real_server

pytestmark = pytest.mark.real_model


@pytest.fixture(scope="module")
def real_url():
    with real_server() as url:
        yield url


def run_agent(
    url: str, tmp_path: Path, task: str, *flags: str
) -> tuple[subprocess.CompletedProcess, list[dict]]:
    """Run the agent on task; with --resume among flags, t.jsonl is the transcript it
    goes on with."""
    work = tmp_path / "work"
    work.mkdir(exist_ok=True)
    transcript = tmp_path / "t.jsonl"
    command = [
        sys.executable,
        str(ROOT / "agent.py"),
        "--base-url",
        url,
        "--model",
        MODEL_NAME,
        "--workdir",
        str(work),
    ]
    if "--resume" not in flags:
        command += ["--transcript", str(transcript)]
    command += ["--yes", "--max-steps", "4", *flags, task]
    result = subprocess.run(
        command,
        cwd=tmp_path,
        # ~ in a made-up command stays here
        env=clean_env(AGENT_SHELL_TIMEOUT="10", HOME=str(tmp_path)),
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        encoding="utf-8",
        errors="replace",
        timeout=300,
    )
    events = [json.loads(line) for line in transcript.read_text(encoding="utf-8").splitlines()]
    return result, events


def check_run(result: subprocess.CompletedProcess, events: list[dict], tmp_path: Path) -> None:
    """What holds whatever the model said."""
    context = (
        f"exit {result.returncode}\n--- stderr:\n{result.stderr[-3000:]}\n"
        f"--- stdout:\n{result.stdout[-1000:]}"
    )
    assert "Traceback" not in result.stderr, context
    assert result.returncode in (0, 3), context  # 0 answered, 3 stopped (step limit, cut off)
    assert events, context
    assert events[-1]["type"] == "turn/end", context

    calls = [
        c["id"]
        for e in events
        if e["type"] == "assistant/message"
        for c in e["message"].get("tool_calls", [])
    ]
    results = [e["call_id"] for e in events if e["type"] == "tool/result"]
    assert sorted(calls) == sorted(results), context  # each call answered exactly once
    assert len(set(calls)) == len(calls), context  # and no id used twice

    work = (tmp_path / "work").resolve()
    for path in tmp_path.rglob("*"):
        if path.is_file() and path.name != "t.jsonl":
            assert path.resolve().is_relative_to(work), (
                f"{path} was written outside the workspace\n{context}"
            )


def test_plain_answer(real_url, tmp_path):
    result, events = run_agent(real_url, tmp_path, "Say hello in one word.")
    check_run(result, events, tmp_path)
    assert any(e["type"] == "assistant/message" for e in events)


def test_writing_a_file(real_url, tmp_path):
    result, events = run_agent(
        real_url, tmp_path, "Use the write_file tool to write the word hi to the file hi.txt"
    )
    check_run(result, events, tmp_path)


def test_writing_a_file_streamed(real_url, tmp_path):
    result, events = run_agent(
        real_url,
        tmp_path,
        "Use the write_file tool to write the word hi to the file hi.txt",
        "--stream",
    )
    check_run(result, events, tmp_path)


def test_history_with_a_tool_call_is_accepted(real_url, tmp_path):
    """The tiny model seldom calls a tool by itself, so give it a history that has one, as the agent
    records it: content "" beside tool_calls, arguments as a JSON string, then the tool's result."""
    call = {
        "id": "call_1",
        "type": "function",
        "function": {"name": "write_file", "arguments": '{"path": "hi.txt", "content": "hi"}'},
    }
    events = [
        {"type": "run/start", "model": MODEL_NAME, "system_prompt": "You are a careful assistant."},
        {"type": "user/message", "content": "Write hi to hi.txt"},
        {
            "type": "assistant/message",
            "message": {"role": "assistant", "content": "", "tool_calls": [call]},
        },
        {
            "type": "tool/result",
            "call_id": "call_1",
            "name": "write_file",
            "content": "wrote 2 characters",
            "ok": True,
        },
        {
            "type": "assistant/message",
            "message": {"role": "assistant", "content": "Done."},
            "finish_reason": "stop",
        },
        {"type": "turn/end", "status": "answered"},
    ]
    transcript = tmp_path / "t.jsonl"
    transcript.write_text("".join(json.dumps(e) + "\n" for e in events), encoding="utf-8")
    result, events = run_agent(
        real_url, tmp_path, "Now say done in one word.", "--resume", str(transcript)
    )
    check_run(result, events, tmp_path)
    start = max(i for i, e in enumerate(events) if e["type"] == "run/resume")
    # the server took the history
    assert any(e["type"] == "assistant/message" for e in events[start:]), result.stderr


@pytest.mark.parametrize("flags", [[], ["--stream"]], ids=["plain", "stream"])
def test_a_tool_call_the_model_copies_as_text(real_url, tmp_path, flags):
    """Asked to copy a <tool_call> line, the tiny model often writes it, alone or after some
    prose: the server may parse it into tool_calls, or leave it as text for the agent to recover
    (README rule 10). Whichever happens, every call is answered and what it writes stays in
    the workspace."""
    line = (
        '<tool_call>{"name": "write_file", "arguments": {"path": "echo.txt", "content": "hi"}}'
        "</tool_call>"
    )
    task = f"Copy this line exactly:\n{line}"
    result, events = run_agent(real_url, tmp_path, task, *flags)
    check_run(result, events, tmp_path)


def test_the_llama_build_is_portable_no_avx512_or_amx_instruction():
    # .ci/run builds with GGML_NATIVE=OFF. A native build on a CPU that offers AMX emitted
    # `tilezero`, and llama-server died with SIGILL where the kernel had not enabled AMX for
    # the process: the same wheel must run on every x86-64 machine of this kind. AVX2 stays
    # (ymm registers), AVX-512 (zmm) and AMX (tile*) go.
    import platform
    import shutil

    from real_server import server_binary

    if platform.machine() not in ("x86_64", "AMD64"):
        pytest.skip("the instruction check is for x86-64")
    objdump = shutil.which("objdump")
    assert objdump, "objdump (binutils) is needed to read the build's instructions"
    libraries = sorted(server_binary().parent.glob("libggml-cpu*.so*"))
    assert libraries, f"no libggml-cpu in {server_binary().parent}"
    code = subprocess.run(
        [objdump, "-d", "--no-show-raw-insn", str(libraries[0])],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    found = {word for word in ("zmm", "tilezero", "tileloadd", "tdpb") if word in code}
    assert found == set() and "ymm" in code


def test_a_history_past_the_servers_context_is_compacted_to_what_it_says(real_url, tmp_path):
    """llama-server refuses a prompt past its --ctx-size with exceed_context_size_error and n_ctx
    in the body; the agent reads the window there, compacts, and sends a request it accepts."""
    events = [{"type": "run/start", "model": MODEL_NAME, "system_prompt": "You are helpful."}]
    words = " ".join(f"line{i} of the report says nothing new" for i in range(300))
    for n in range(4):
        call = {
            "id": f"call_{n}",
            "type": "function",
            "function": {"name": "read_file", "arguments": json.dumps({"path": f"r{n}.txt"})},
        }
        events += [
            {"type": "user/message", "content": f"Read r{n}.txt"},
            {
                "type": "assistant/message",
                "message": {"role": "assistant", "content": "", "tool_calls": [call]},
            },
            {
                "type": "tool/result",
                "call_id": f"call_{n}",
                "name": "read_file",
                "content": words,
                "ok": True,
            },
            {"type": "assistant/message", "message": {"role": "assistant", "content": "Read."}},
            {"type": "turn/end", "status": "answered"},
        ]
    transcript = tmp_path / "t.jsonl"
    transcript.write_text("".join(json.dumps(e) + "\n" for e in events), encoding="utf-8")
    result, events = run_agent(real_url, tmp_path, "Say done.", "--resume", str(transcript))
    assert "Traceback" not in result.stderr
    from real_server import CONTEXT

    assert f"the model reads {CONTEXT:,} tokens at most" in result.stderr, result.stderr[-3000:]
    kinds = [e["type"] for e in events]
    assert CONTEXT in [e.get("window") for e in events if e.get("status") == "context_full"]
    after = kinds.index("context/compacted")
    assert "assistant/message" in kinds[after:]  # the compacted request was accepted
