"""A broken or hostile server cannot take the machine's memory or time, nor the person's secrets.

Bounds: a reply is read up to replies.MAX_REPLY_BYTES after decoding (gzip counted decoded, as
RFC 9110 8.4 content codings are); every reader of a reply and its arguments is linear (the
shapes that took minutes: a ```json fence followed by newlines, a run of "<function=" openers,
two 40,000-item reasoning_details lists, a stream of many small deltas). Secrets: the key and a
password in the server's address are *** wherever a line, a transcript event, --trace or --show
would carry them.
"""

import gzip
import json
import time
import tracemalloc
import zlib

import pytest
from conftest import KEY, events_of
from scripted_server import Raw, Stream, call, reply

from realworld import dialects, replies


@pytest.fixture
def small_limit(monkeypatch):
    """A 1 MiB limit, so that a test need not send 64 MiB."""
    monkeypatch.setattr(replies, "MAX_REPLY_BYTES", 2**20)


def peak_while(function) -> int:
    """The most memory Python held while function ran, in bytes."""
    tracemalloc.start()
    try:
        function()
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


@pytest.mark.parametrize("shape", ["plain", "stream", "gzip", "deflate"])
def test_a_reply_past_the_limit_is_refused_before_memory_grows(loop, server, small_limit, shape):
    endless = b'{"id": "' + b"x" * (8 * 2**20)  # a body that never closes its string
    if shape == "stream":
        chunk = json.dumps({"choices": [{"index": 0, "delta": {"content": "x" * 1000}}]})
        body, headers = f"data: {chunk}\n\n".encode() * 8000, {"content-type": "text/event-stream"}
    elif shape in ("gzip", "deflate"):  # about 8 KB on the wire, 8 MiB decoded
        packed = gzip.compress(endless) if shape == "gzip" else zlib.compress(endless)
        body, headers = packed, {"content-encoding": shape, "content-type": "application/json"}
    else:
        body, headers = endless, {"content-type": "application/json"}
    server.add(reply("warm"))  # the SDK's first request imports and builds what it needs
    loop("warm", stream=shape == "stream")
    server.add(*[Raw(body, headers)] * 3)  # the SDK tries twice more
    result = None

    def run():
        nonlocal result
        result = loop("go", stream=shape == "stream")

    assert peak_while(run) < 6 * 2**20  # never the whole 8 MiB
    assert result.status == "api_error"
    assert "the server's reply passed 1 MiB, far more than any real reply" in result.text
    assert result.text.count("\n") == 0


@pytest.mark.parametrize(
    ("coding", "body", "said"),
    [
        ("gzip, gzip", gzip.compress(gzip.compress(b'{"id": "' + b"x" * 2**23)), "'gzip,gzip'"),
        ("br", b"\x0b\x02\x80hi\x03", "'br'"),
        ("gzip", b"not gzip at all", "does not decode"),
    ],
    ids=["twice", "not-asked-for", "corrupt"],
)
def test_a_coding_the_agent_did_not_ask_for_or_cannot_read_is_one_line(
    loop, server, coding, body, said
):
    # Decoded by the HTTP library after the count, "gzip, gzip" took 468 MB for a 511-byte body.
    server.add(*[Raw(body, {"content-encoding": coding, "content-type": "application/json"})] * 3)
    result = loop("go")
    assert result.status == "api_error" and said in result.text and "\n" not in result.text


def test_raw_deflate_is_read_and_bytes_after_a_gzip_body_are_not(loop, server):
    raw = zlib.compressobj(wbits=-15)
    body = raw.compress(json.dumps(reply("raw deflate")).encode()) + raw.flush()
    server.add(Raw(body, {"content-encoding": "deflate", "content-type": "application/json"}))
    assert loop("go").text == "raw deflate"
    trailing = gzip.compress(json.dumps(reply("one member")).encode()) + b"\x00garbage" * 100_000
    server.add(Raw(trailing, {"content-encoding": "gzip", "content-type": "application/json"}))
    assert loop("go").text == "one member"


def test_an_honest_compressed_reply_is_read(loop, server):
    body = gzip.compress(json.dumps(reply("hello from gzip")).encode())
    server.add(Raw(body, {"content-encoding": "gzip", "content-type": "application/json"}))
    assert loop("go").text == "hello from gzip"
    assert server.requests[0]["headers"]["accept-encoding"] == "gzip, deflate"


# --- Linear time: a megabyte of what made a reader backtrack --------------------------------------

KNOWN = {"read_file": ["path"], "write_file": ["path", "content"], "run_shell": ["command"]}
SLOW_SHAPES = {
    "fence-then-newlines": lambda: dialects.clean_arguments("```json" + "\n" * 2**20),
    "fence-then-spaced-newlines": lambda: dialects.clean_arguments("```json" + " \n" * 2**19),
    "function-openers": lambda: dialects.recover_tool_calls(
        "<function=" * 100_000, {"read_file": ["path"]}
    ),
    "parameter-openers": lambda: dialects.recover_tool_calls(
        "<function=read_file>" + "<parameter=" * 90_000, {"read_file": ["path"]}
    ),
    "kimi-names": lambda: dialects.recover_tool_calls(
        "<|tool_call_begin|>" + "x" * 2**20, {"read_file": ["path"]}
    ),
    "mistral-name": lambda: dialects.recover_tool_calls("[TOOL_CALLS]" + "x" * 2**20, {"x": ["y"]}),
    "inline-code": lambda: dialects.recover_tool_calls("`a` " * 350_000, {"read_file": ["path"]}),
    "many-small-deltas": lambda: many_deltas(150_000),
    "olmo-calls-without-end": lambda: dialects.recover_tool_calls(
        "<function_calls>\n" + "a()x" * 250_000, {"read_file": ["path"]}
    ),  # 120 bytes of this took minutes
    "deepseek-fence-then-spaces": lambda: dialects.recover_tool_calls(
        "<\uff5ctool\u2581call\u2581begin\uff5c>function<\uff5ctool\u2581sep\uff5c>read_file\n```json"
        + " \n" * 2**19
        + "```x",
        {"read_file": ["path"]},
    ),
    # Issue #22's readers: a tool's name thousands of times, each opening what never closes
    "names-then-unterminated-json": lambda: dialects.recover_tool_calls(
        '{"name": "read_file", "arguments": {"path": "' * 2000 + "x" * 2**20, KNOWN
    ),
    "names-then-open-brackets": lambda: dialects.recover_tool_calls("read_file(" * 100_000, KNOWN),
    "names-as-open-tags": lambda: dialects.recover_tool_calls("<read_file><path>" * 60_000, KNOWN),
    "a-parameter-never-closed": lambda: dialects.recover_tool_calls(
        "<function=read_file><parameter=path>" + "x" * 2**20, KNOWN
    ),
    "markup-before-a-call": lambda: dialects.recover_tool_calls(
        "<|a|>" * 200_000 + '{"name": "read_file", "arguments": {"path": "a"}}', KNOWN
    ),
    "calls-between-prose": lambda: dialects.recover_tool_calls(
        'I will.\n<tool_call>{"name": "read_file", "arguments": {"path": "a"}}</tool_call>\n'
        * 10_000,
        KNOWN,
        ["read_file " * 100_000],
    ),
    "closing-think-marks": lambda: dialects.split_thinking("x</think>y" * 100_000),
    "gemma-objects-never-closed": lambda: dialects.recover_tool_calls(
        "call:read_file{path:" * 50_000, KNOWN
    ),
    "harmony-analysis-blocks": lambda: dialects.split_thinking(
        "<|channel|>analysis<|message|>x<|end|>" * 30_000
    ),
    "printer-on-a-terminal": lambda: print_lines(20_000),
    "two-long-lists": lambda: replies.merge(
        {"r": [{"index": i} for i in range(40_000)]}, {"r": [{"index": i} for i in range(40_000)]}
    ),
}


def print_lines(count: int) -> None:
    """--stream on a terminal: a reply of count lines printed as it comes (each line used to read
    the whole text again: 5,000 lines took 49 s)."""
    import contextlib
    import io

    printer = dialects.Printer({"read_file": ["path"]})
    printer.live = True
    with contextlib.redirect_stdout(io.StringIO()) as out:
        for _ in range(count):
            printer.add("x" * 99 + "\n")
        printer.end(("x" * 99 + "\n") * count)  # the whole reply, as collect_stream() gives it
    assert out.getvalue() == ("x" * 99 + "\n") * count


def many_deltas(count: int) -> None:
    """A stream's deltas merged one by one, as collect_stream() does: joined one at a time, the
    text cost its whole length at each (300,000 took 25 s)."""
    message = {"role": "assistant", "content": ""}
    for i in range(count):
        message = replies.merge(message, {"content": "abcd", "details": [{"index": i}]})
    assert len(replies.finished(message)["content"]) == 4 * count


@pytest.mark.parametrize("shape", sorted(SLOW_SHAPES))
def test_every_reader_is_linear_on_a_megabyte_of_adversarial_input(shape):
    # A bound that protects the machine, 20 times what the input takes here: the shapes took from
    # 14 s to 18 minutes before.
    started = time.process_time()
    SLOW_SHAPES[shape]()
    assert time.process_time() - started < 2


# --- Secrets on every exit ------------------------------------------------------------------------


def test_a_server_that_echoes_the_key_gets_it_shown_and_recorded_nowhere(agent, server):
    fragment = {
        "choices": [{"index": 0, "delta": {"tool_calls": [f"echo {KEY}"]}, "finish_reason": None}]
    }
    stream = Stream(reply("x"))
    stream.events = [fragment]  # a tool-call fragment that is a string holding the key
    server.add(stream)
    streamed = agent("--stream", "go")
    server.add(reply(f"the key is {KEY}", note=KEY, tool_calls=[call("read_file", {"path": KEY})]))
    server.add(reply(f"done {KEY}"))
    traced = agent("--trace", "go")
    for result in (streamed, traced):
        assert KEY not in result.stdout + result.stderr + result.transcript.read_text()
    assert "not a chat completion stream" in streamed.stderr and "***" in streamed.stderr
    assert "── response (raw JSON)" in traced.stderr and traced.stdout == "done ***\n"


def test_a_password_in_the_servers_address_is_shown_and_recorded_as_stars(agent, server, tmp_path):
    server.add(reply("hi"))
    port = server.url.split(":")[2].split("/")[0]
    url = f"http://alice:pass-w0rd-long@127.0.0.1:{port}/v1"
    result = agent("--base-url", url, "go")
    assert result.returncode == 0, result.stderr
    # The SDK sends the address's user and password as basic auth, instead of the key.
    assert server.requests[0]["headers"]["authorization"].startswith("Basic ")
    everything = result.stderr + result.transcript.read_text()
    assert "pass-w0rd-long" not in everything and "alice:***@127.0.0.1" in everything
    shown = agent("--show", str(result.transcript))
    assert "pass-w0rd-long" not in shown.stdout and "alice:***@" in shown.stdout
    # A short password too, where the address is shown; and in a connection error.
    refused = agent("--base-url", "http://bob:pw@127.0.0.1:9/v1", "go")
    assert ":pw@" not in refused.stderr and "bob:***@127.0.0.1:9" in refused.stderr
    assert events_of(refused.transcript)[0]["base_url"].startswith("http://bob:***@")
