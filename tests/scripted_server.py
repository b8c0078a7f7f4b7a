"""A scripted OpenAI-compatible server on 127.0.0.1 for tests.

It answers POST .../chat/completions with the replies a test queued, in order,
and records every request it got. An error reply stays queued, so the SDK's
retries see it too.
"""

import contextlib
import itertools
import json
import os
import socket
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


def reply(content=None, tool_calls=None, finish_reason=None, usage=None, **message_fields) -> dict:
    """A chat completion body; finish_reason defaults to what the message implies."""
    message = {"role": "assistant", "content": content, **message_fields}
    if tool_calls is not None:
        message["tool_calls"] = tool_calls
    if finish_reason is None:
        finish_reason = "tool_calls" if tool_calls else "stop"
    return {
        "id": "chatcmpl-test",
        "object": "chat.completion",
        "created": 1,
        "model": "test-model",
        "choices": [{"index": 0, "message": message, "finish_reason": finish_reason}],
        "usage": usage or {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15},
    }


def call(name: str, arguments, id: str | None = "auto") -> dict:
    """One tool call as a server sends it; id=None leaves the id out."""
    if not isinstance(arguments, str) and arguments is not None:
        arguments = json.dumps(arguments)
    tool_call = {"type": "function", "function": {"name": name, "arguments": arguments}}
    if id == "auto":
        id = f"call_{name}_{abs(hash(str(arguments))) % 10**8}"
    if id is not None:
        tool_call["id"] = id
    return tool_call


class Error:
    """An HTTP error reply; it stays at the head of the script, or is sent `times` times. body:
    sent as it is (an object, a list or a str) instead of {"error": {"message": message}};
    message may be a function of the request's body (an error that names what was asked)."""

    def __init__(self, status: int, message: str = "", body=None, times: int | None = None):
        self.status, self.message, self.body, self.times = status, message, body, times


class Stream:
    """A reply sent as server-sent events, cut into fragments of `size` characters.

    same_index: every tool call uses index 0 with its own id, as Ollama sends parallel calls.
    cut: the stream stops before the finish_reason, as when a connection drops.
    hold: the stream stops there and stays open until the server closes: the reply is still
    coming; arrived is set once its first events are sent.
    """

    def __init__(
        self,
        body: dict,
        size: int = 3,
        same_index: bool = False,
        cut: bool = False,
        hold: bool = False,
    ):
        self.events = fragments(body, size, same_index)
        if cut or hold:
            self.events = self.events[:-2]  # neither the finish_reason chunk nor the usage chunk
        self.hold, self.arrived = hold, threading.Event()


def fragments(body: dict, size: int, same_index: bool) -> list[dict]:
    """The chunks a server streams for the reply body."""
    choice = body["choices"][0]
    message = choice["message"]

    def chunk(delta=None, finish_reason=None, usage=None, choices=True):
        head = {
            "id": body["id"],
            "object": "chat.completion.chunk",
            "created": 1,
            "model": body["model"],
        }
        head["choices"] = (
            [{"index": 0, "delta": delta or {}, "finish_reason": finish_reason}] if choices else []
        )
        return {**head, "usage": usage}

    def pieces(text):
        return [text[i : i + size] for i in range(0, len(text), size)] or [""]

    chunks = [chunk({"role": "assistant", "content": ""})]
    if "reasoning_content" in message:
        chunks += [
            chunk({"reasoning_content": p}) for p in pieces(message["reasoning_content"] or "")
        ]
    chunks += [chunk({"content": p}) for p in pieces(message["content"] or "") if p]
    for key, value in message.items():  # other fields: text in pieces, anything else whole
        if key not in ("role", "content", "tool_calls", "reasoning_content"):
            chunks += (
                [chunk({key: p}) for p in pieces(value)]
                if isinstance(value, str)
                else [chunk({key: value})]
            )
    for i, call in enumerate(message.get("tool_calls") or []):
        index = 0 if same_index else i
        args = pieces(call["function"]["arguments"] or "")
        first = {
            "index": index,
            "id": call.get("id"),
            "type": "function",
            "function": {"name": call["function"]["name"], "arguments": args[0]},
            **{k: v for k, v in call.items() if k not in ("id", "type", "function")},
        }
        chunks.append(chunk({"tool_calls": [first]}))
        chunks += [
            chunk({"tool_calls": [{"index": index, "function": {"arguments": p}}]})
            for p in args[1:]
        ]
    chunks.append(chunk(finish_reason=choice["finish_reason"]))
    chunks.append(chunk(usage=body.get("usage"), choices=False))
    return chunks


class Honest:
    """A reply whose usage the server counts from the request, as a real server does, and whose
    reply stops at the request's max_tokens (finish_reason "length", its calls dropped, as
    llama.cpp and vLLM cut a reply at its limit). Its tokenizer makes a token of every
    BYTES_PER_TOKEN bytes of the request's JSON (fewer than any real one makes: the agent's
    bound takes a token a byte) and MESSAGE_TOKENS more for each message, as a chat template
    adds its markers; the prefix shared with an earlier request is cached, in blocks of
    CACHE_BLOCK tokens, as DeepSeek's cache keeps it. usage=False sends no usage at all.
    stream: sent as server-sent events, usage at the end."""

    BYTES_PER_TOKEN, MESSAGE_TOKENS, CACHE_BLOCK = 3, 4, 64

    def __init__(self, body: dict, usage: bool = True, stream: bool = False):
        self.body, self.usage, self.stream = body, usage, stream

    def answer(self, request: dict, earlier: list[dict]) -> dict:
        """The reply to request (a body), with earlier requests' bodies for the cache."""
        body = json.loads(json.dumps(self.body))
        choice = body["choices"][0]
        message = choice["message"]
        made = self.tokens(json.dumps(message.get("content") or ""))
        made += sum(self.tokens(json.dumps(c["function"])) for c in message.get("tool_calls") or [])
        most = request.get("max_tokens") or request.get("max_completion_tokens")
        if most is not None and made > most:
            message["content"] = (message.get("content") or "")[: most * self.BYTES_PER_TOKEN]
            message.pop("tool_calls", None)
            choice["finish_reason"], made = "length", most
        prompt, cached = self.prompt_tokens(request, earlier)
        body["usage"] = {
            "prompt_tokens": prompt,
            "completion_tokens": made,
            "total_tokens": prompt + made,
            "prompt_cache_hit_tokens": cached,
            "prompt_cache_miss_tokens": prompt - cached,
        }
        return body

    def tokens(self, text: str) -> int:
        return -(-len(text.encode()) // self.BYTES_PER_TOKEN)

    def prompt_tokens(self, request: dict, earlier: list[dict]) -> tuple[int, int]:
        """The request's prompt tokens, and how many of them the cache held."""
        text = prompt_text(request)
        prompt = self.tokens(text) + self.MESSAGE_TOKENS * len(request.get("messages") or [])
        shared = max(
            (len(os.path.commonprefix([text, prompt_text(e)])) for e in earlier),  # noqa: RUF071
            default=0,
        )
        cached = self.tokens(text[:shared]) // self.CACHE_BLOCK * self.CACHE_BLOCK
        return prompt, min(cached, prompt)


def prompt_text(request: dict) -> str:
    """What a server tokenizes of a request: its tools, then its messages."""
    return json.dumps([request.get("tools") or [], request.get("messages") or []])


class Raw:
    """A reply sent as these bytes with these headers (a compressed body, a body without end)."""

    def __init__(self, body: bytes, headers: dict | None = None, status: int = 200):
        self.body, self.headers, self.status = body, headers or {}, status


class Hang:
    """A reply that holds the request open until the server closes: the agent is waiting
    on the model."""

    def __init__(self):
        self.arrived = threading.Event()


class Trickle:
    """A reply sent slowly: its body one byte every seconds_per_byte, or (endless_stream) a
    stream that sends a chunk every 0.05 s and never finishes. Either gives up after 30 s or when
    the client leaves."""

    def __init__(self, body: dict, seconds_per_byte: float = 0.2, endless_stream: bool = False):
        self.body, self.seconds_per_byte, self.endless_stream = (
            body,
            seconds_per_byte,
            endless_stream,
        )


def history_problem(messages) -> str | None:
    """What OpenAI answers HTTP 400 to in a conversation, or None: an assistant message whose
    tool_calls are not each answered by a tool message before the next message of another role,
    or a tool message that answers no call (the texts are OpenAI's own)."""
    open_ids: list = []
    for m in messages if isinstance(messages, list) else []:
        role = m.get("role") if isinstance(m, dict) else None
        if role == "tool":
            if m.get("tool_call_id") not in open_ids:
                return (
                    "Invalid parameter: messages with role 'tool' must be a response to a "
                    "preceeding message with 'tool_calls'."
                )
            open_ids.remove(m.get("tool_call_id"))
            continue
        if open_ids:
            break
        open_ids = [c.get("id") for c in m.get("tool_calls") or []] if role == "assistant" else []
    if open_ids:
        return (
            "An assistant message with 'tool_calls' must be followed by tool messages responding "
            "to each 'tool_call_id'. The following tool_call_ids did not have response messages: "
            f"{', '.join(map(str, open_ids))}"
        )
    return None


def roles_problem(messages) -> str | None:
    """What a strict chat template refuses in a conversation, or None: two user messages in a row
    (Mistral's template raises this text in llama.cpp and vLLM; Gemma's says user/model). A tool
    message belongs to the reply whose call it answers, so a user message may follow it."""
    roles = [m.get("role") if isinstance(m, dict) else None for m in messages or []]
    if any(one == two == "user" for one, two in itertools.pairwise(roles)):
        return "Conversation roles must alternate user/assistant/user/assistant/..."
    return None


class ScriptedServer:
    """respond: a function from a request body to a reply, used when the script is empty. Like
    OpenAI, it answers HTTP 400 to a conversation with an unanswered tool call (history_problem),
    and like a strict chat template to two user messages in a row (roles_problem), unless
    lenient."""

    def __init__(self, respond=None, lenient: bool = False):
        self.respond, self.lenient = respond, lenient
        self.script: list = []
        self.requests: list[dict] = []
        self.sent: list[dict] = []  # the usage each Honest reply counted
        self.closing = threading.Event()
        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self.httpd.daemon_threads = False  # so that close() waits for every request's thread
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"
        self.serving = threading.Thread(target=self._serve, daemon=True)
        self.serving.start()

    def _serve(self) -> None:
        """Take requests until close(), which connects once more to wake this at once
        (serve_forever() looks for its shutdown every poll interval: 5 ms a test on average)."""
        while not self.closing.is_set():
            self.httpd.handle_request()

    def add(self, *replies) -> None:
        self.script.extend(replies)

    def close(self) -> None:
        self.closing.set()
        with contextlib.suppress(OSError):
            socket.create_connection(self.httpd.server_address).close()
        self.serving.join()
        self.httpd.server_close()

    def messages(self, n: int) -> list[dict]:
        """The messages of request n."""
        return self.requests[n]["body"]["messages"]

    def _handler(self):
        server = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def do_POST(self):
                raw = self.rfile.read(int(self.headers.get("content-length", 0)))
                server.requests.append(
                    {
                        "path": self.path,
                        "headers": {k.lower(): v for k, v in self.headers.items()},
                        "body": json.loads(raw),
                        "raw": raw,
                        "time": time.monotonic(),
                    }
                )
                sent = server.requests[-1]["body"].get("messages")
                problem = None if server.lenient else history_problem(sent) or roles_problem(sent)
                if problem:
                    error = {
                        "message": problem,
                        "type": "invalid_request_error",
                        "param": "messages",
                        "code": None,
                    }
                    return self._send(400, {"error": error}, {})
                if not server.script and server.respond:
                    server.script.append(server.respond(server.requests[-1]["body"]))
                if not server.script:
                    return self._send(
                        500,
                        {"error": {"message": "the test script has no more replies"}},
                        {"x-should-retry": "false"},
                    )
                head = server.script[0]
                if isinstance(head, Error):
                    if head.times is not None:
                        head.times -= 1
                        if head.times <= 0:
                            server.script.pop(0)
                    message = head.message
                    if callable(message):
                        message = message(server.requests[-1]["body"])
                    body = (
                        head.body
                        if head.body is not None
                        else {"error": {"message": message, "type": "test_error"}}
                    )
                    # keep the SDK's retries fast
                    return self._send(head.status, body, {"retry-after-ms": "1"})
                server.script.pop(0)
                if isinstance(head, Honest):
                    earlier = [r["body"] for r in server.requests[:-1]]
                    stream, usage = head.stream, head.usage
                    head = head.answer(server.requests[-1]["body"], earlier)
                    server.sent.append(head["usage"])  # what it counted, sent or not
                    if not usage:
                        head.pop("usage")
                    if stream:
                        head = Stream(head)
                if isinstance(head, Stream):
                    return self._stream(head)
                if isinstance(head, Trickle):
                    return self._trickle(head)
                if isinstance(head, Raw):
                    self.send_response(head.status)
                    for name, value in {
                        "content-length": str(len(head.body)),
                        **head.headers,
                    }.items():
                        self.send_header(name, value)
                    self.end_headers()
                    with contextlib.suppress(OSError):  # the client stopped reading
                        self.wfile.write(head.body)
                    return None
                if isinstance(head, Hang):
                    head.arrived.set()
                    server.closing.wait(60)
                    return None
                self._send(200, head, {})  # a dict, or a raw str for a malformed reply

            def _stream(self, stream):
                events = stream.events
                self.send_response(200)
                self.send_header("content-type", "text/event-stream")
                self.send_header("connection", "close")
                self.end_headers()
                for event in events:
                    self.wfile.write(f"data: {json.dumps(event)}\n\n".encode())
                    self.wfile.flush()
                if stream.hold:  # the rest is still coming
                    stream.arrived.set()
                    server.closing.wait(60)
                elif events and events[-1].get("usage"):  # a complete stream ends with [DONE]
                    self.wfile.write(b"data: [DONE]\n\n")
                self.close_connection = True

            def _trickle(self, trickle):
                endless = trickle.endless_stream
                data = json.dumps(trickle.body).encode()
                self.send_response(200)
                self.send_header(
                    "content-type", "text/event-stream" if endless else "application/json"
                )
                self.send_header(
                    "content-length" if not endless else "connection",
                    str(len(data)) if not endless else "close",
                )
                self.end_headers()
                chunk = fragments(trickle.body, 1, False)[1]
                pieces = (
                    f"data: {json.dumps(chunk)}\n\n".encode() if endless else bytes([b])
                    for b in data
                )
                deadline = time.monotonic() + 30
                for piece in itertools.cycle(pieces) if endless else pieces:
                    if time.monotonic() > deadline or server.closing.wait(
                        0.05 if endless else trickle.seconds_per_byte
                    ):
                        break
                    try:
                        self.wfile.write(piece)
                        self.wfile.flush()
                    except OSError:  # the client gave up
                        break
                self.close_connection = True

            def _send(self, status, body, headers):
                data = (body if isinstance(body, str) else json.dumps(body)).encode()
                self.send_response(status)
                self.send_header(
                    "content-type",
                    "text/plain" if isinstance(body, str) and status >= 400 else "application/json",
                )
                self.send_header("content-length", str(len(data)))
                for k, v in headers.items():
                    self.send_header(k, v)
                self.end_headers()
                self.wfile.write(data)

        return Handler
