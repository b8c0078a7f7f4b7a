"""The client run() talks to: what real servers send, made into the reply the lesson expects.

agent.py calls client.chat.completions.create(...) as the SDK documents it. The Client below answers
that call with a ChatCompletion that is already whole and honest, whatever the server did:
- a stream put together (its text printed as it comes), and a time limit for the whole request;
- a failure raised as one exception, RequestFailed, whose message is one line in the
  provider's words;
- a tool call the model wrote as text recovered into msg.tool_calls (dialects.py), its arguments
  valid JSON, its id unique, at most MAX_CALLS of them;
- msg as it goes back: every field the server sent (rule 2), content a string, never null (rule 1).
What the server sent raw is printed by --trace; what was repaired is in resp.repairs. The rules are
numbered in docs/servers.md. A learner can skip this file at first.

The openai package is imported inside the functions that use it, so that --help, --show and a usage
error start without loading it.
"""

import functools
import hashlib
import html
import ipaddress
import itertools
import json
import math
import re
import time
import zlib
from operator import attrgetter
from types import SimpleNamespace
from typing import NamedTuple
from urllib.parse import urlsplit

import config
from realworld import dialects
from realworld.calls import parameters
from realworld.consent import TEXT_ID
from realworld.guards import (
    MAX_DEPTH,
    Pattern,
    clean_text,
    hide_secrets,
    say,
    shorten,
    shown_url,
    too_deep,
    visible,
)

RETIRED_MODELS = ("deepseek-chat", "deepseek-reasoner")  # answer HTTP 400 since July 2026
# new tries when the provider says the model's output, not the request, was malformed
OUTPUT_RETRIES = 2
PROMPT_CUT = (
    "the server counted fewer prompt tokens than on the step before, though the conversation only "
    "grew: it is cutting the start of the prompt (system prompt and task first). Give the model a "
    "larger context window (Ollama: OLLAMA_CONTEXT_LENGTH=32768 ollama serve, or num_ctx in a "
    "Modelfile), and set AGENT_CONTEXT_WINDOW to it, so that the agent compacts in time."
)


class RequestFailed(Exception):
    """The server gave no usable reply; the message says why in a line or two, for the person.
    status: how the run ends, as the transcript's turn/end records it."""

    status = "api_error"


class BudgetSpent(RequestFailed):
    """The next request could pass the budget (--budget), its prompt and its reply at their
    most: it was not sent."""

    status = "budget"


class CapRefused(RequestFailed):
    """The server refused the request's max_tokens: most, the largest reply it takes (None: it
    takes the same cap under the name max_completion_tokens)."""

    def __init__(self, text: str, most: int | None):
        super().__init__(text)
        self.most = most


class ContextFull(RequestFailed):
    """The server said the conversation does not fit the model's context window; window: the
    size it named, in tokens, or None. The Client keeps it: the next request is compacted to fit
    (realworld/compaction.py), so running on again (run(None, messages)) goes on."""

    status = "context_full"

    def __init__(self, text: str, window: int | None):
        super().__init__(text)
        self.window = window


# --- The client ------------------------------------------------------------------------------


class Client:
    """client.chat.completions.create(...) as the SDK answers it, made whole and honest (see above).

    inner: an openai.OpenAI, or a replay of a transcript. stream: ask for a stream and print
    its text as it comes. trace: print each request and the raw reply. tokens: each reply's
    token counts; costs: what each cost (cost_of()), None where no price is known. budget: the
    most its requests may spend, all of them (a helper's and a summary's too); None for no
    limit. Before each request keep_to_budget() bounds what it can cost at most, and caps its
    reply (max_tokens) at what the money left buys."""

    def __init__(self, inner, stream: bool = False, trace: bool = False):
        self.inner, self.stream, self.trace, self.tokens = inner, stream, trace, []
        self.costs, self.budget = [], config.BUDGET
        # what each request counts against the budget: its cost, or its most where the server
        # said no usage; the requests counted, to bound the next one's prompt (prompt_bound())
        self.charges, self.counted, self.stopped = [], [], False
        self.most_output = None  # the largest max_tokens the server takes, once it has said it
        self.cap_name = "max_tokens"  # or max_completion_tokens, where the server asks for it
        self.guessed = False  # a reply came with no usage: what was spent is a bound
        self.base_url = shown_url(str(getattr(inner, "base_url", "")))
        self.chat = SimpleNamespace(completions=SimpleNamespace(create=self.create))
        # the last request's conversation, length and prompt tokens; warned yet
        self.last = (None, 0, 0, False)
        self.window = getattr(inner, "window", None)  # tokens, once the server has said it
        self.ratio = 1.0  # the server's count of prompt tokens against compaction's estimate
        # how the person gave each setting a hint names: {AGENT_BASE_URL: "--base-url"}, ...
        self.named = {}
        # every call id given so far, in any conversation (a helper's, a summary's): the
        # transcript and the page tell a helper's steps by the id of the call that started them
        self.ids = set()

    def create(self, *, model: str, messages: list[dict], tools: list | None = None, **request):
        """The reply to messages, whole, with the message to send back as its choice's message."""
        try:
            return self.answer(model, messages, tools, request)
        finally:  # a replay that reached a recorded --resume begins again as that process began
            self.begin_again_if_resumed()

    def answer(self, model: str, messages: list[dict], tools: list | None, request: dict):
        """create()'s reply: the request sent, its reply read, repaired and counted."""
        try:
            bound = self.keep_to_budget(model, messages, tools)
        except BudgetSpent:  # a replay passes the recording's stop here, if it had one, and
            # goes on past it as the recording went on: it is not this budget's own end
            if getattr(self.inner, "budget_stopped", lambda: False)():
                self.stopped = False
            raise
        if bound and bound.reply is not None:  # the reply capped at what the money left buys
            request["max_tokens"] = min(bound.reply, request.get("max_tokens") or bound.reply)
        if tools is not None:
            request["tools"] = tools
        if self.stream:
            request |= {"stream": True, "stream_options": {"include_usage": True}}
        if self.trace:
            trace_request(model, messages, tools or [])
        send, quoting = self.inner.chat.completions.create, quoted_texts(messages)
        # the tools this request offers: a call written as text is read as one of them
        known = parameters(tools or [])
        started = time.monotonic()
        try:
            raw = self.send_within_cap(send, model, messages, request, known, quoting)
        except RequestFailed as e:
            if isinstance(e, ContextFull):  # the server's own window, for the next request to fit
                self.window = e.window or self.window
            # the hint names each setting the way the person gave it (--base-url, or the variable)
            e.args = (worded(str(e), self.named), *e.args[1:])
            raise
        # The server's time alone, not the tools' or a debugger's; a replay has none.
        replayed = getattr(self.inner, "replaying", False)
        latency_ms = None if replayed else round((time.monotonic() - started) * 1000)
        if self.trace:
            dump = raw.model_dump_json(indent=2, warnings=False)
            say(f"── response (raw JSON)\n{hide_secrets(dump)}")
        cap = request.get(self.cap_name)
        if bound and cap == bound.affordable and raw.choices[0].finish_reason == "length":
            say(f"agent: the budget left buys a reply of at most {cap} tokens; it was cut there")
        if getattr(raw, "as_recorded", False):  # a replay's message, repaired when it was recorded
            known = {}  # so nothing in its text is read as a call again: it runs what was shown
        message, repairs = reply_message(raw.choices[0].message, messages, known, quoting, self.ids)
        self.ids |= {call["id"] for call in message.get("tool_calls") or []}
        usage = usage_of(raw)
        self.tokens.append(count_tokens(usage))
        self.costs.append(cost_of(self.tokens[-1], config.prices(model)))
        self.charge(bound, message, model)
        self.count_prompt(bound, self.tokens[-1]["prompt"])
        size = estimate(messages, tools)  # a compaction makes it smaller, as the server's count
        self.ratio = counted_against_estimate(self.tokens[-1]["prompt"], size, self.ratio)
        # a conversation is its system prompt and tools: a subagent's or a handoff's is another
        first = messages[0].get("content") if messages else None
        conversation = (first, [tool["function"]["name"] for tool in tools or []])
        if self.prompt_was_cut(conversation, size, self.tokens[-1]["prompt"]):
            say(f"agent: warning: {PROMPT_CUT}")
        # the reply as the server sent it, for the transcript where it was repaired
        sent = raw.choices[0].message.model_dump(mode="json", exclude_unset=True, warnings=False)
        return completion(
            message,
            raw.choices[0].finish_reason,
            usage,
            model,
            repairs=repairs,
            latency_ms=latency_ms,
            sent=sent,
            cost=self.costs[-1],
        )

    def begin_again_if_resumed(self) -> None:
        """Where a replay reaches a recorded --resume (or a pause gone on from): begin again as
        that new process began, with the window it recorded and nothing counted yet."""
        resumed = getattr(self.inner, "resumed", None)
        if resumed is not None:
            self.inner.resumed = None
            self.tokens, self.costs, self.last, self.ratio = [], [], (None, 0, 0, False), 1.0
            self.counted = []  # what was spent stays: a budget is the run's, in every process
            self.window = resumed or None

    def send_within_cap(self, send, model, messages, request, known, quoting):
        """ask() the server; where it refuses the reply's cap, again: with the most it named
        (kept for the requests after), or under the name it asks for (max_completion_tokens). At
        most three times, the cap smaller each time. A refusal of the prompt and the cap as
        longer than the window is the client's ContextFull: the run compacts, and the next cap
        keeps to the window's room (keep_to_budget())."""
        name = self.cap_name
        if "max_tokens" in request:
            cap = request.pop("max_tokens")
            request[name] = min(cap, self.most_output or cap)
        for attempt in range(4):
            cap = request.get(name) if attempt < 3 else None
            try:
                return ask(
                    lambda: send(model=model, messages=messages, **request),
                    self.base_url,
                    model,
                    known,
                    quoting,
                    cap,
                )
            except CapRefused as e:
                if e.most is None:  # the same cap, under the name the server takes
                    if name != "max_tokens":
                        raise
                    self.cap_name = name = "max_completion_tokens"
                    request[name] = request.pop("max_tokens")
                    say("agent: the server takes max_completion_tokens; asking again")
                    continue
                say(f"agent: the server takes a reply of at most {e.most} tokens; asking again")
                # kept for the requests after (where it is a window's room, a later refusal
                # lowers it again); never the window itself, which only a compaction, recorded,
                # may learn: a replay of the run compacts where it did
                self.most_output = request[name] = e.most
        raise AssertionError("unreachable")  # pragma: no cover

    def spent(self) -> float:
        """What the requests so far count against the budget: what each cost, where a price is
        known, or its most where the server said no usage (charge())."""
        return sum(self.charges)

    def spent_out(self) -> bool:
        """Whether this client's own budget stopped the last request it stopped (not where a
        replay's recording stopped too)."""
        return self.stopped

    def keep_to_budget(self, model: str, messages: list[dict], tools) -> "Bound | None":
        """Before a request: the most its prompt and its reply may take (Bound), the reply's at
        what the money left buys; None where there is no budget. BudgetSpent where even one
        token of reply would pass the budget, or no price is known for model."""
        if self.budget is None:
            return None
        prices = config.prices(model)
        if prices is None:
            self.stopped = True
            raise BudgetSpent(config.no_price_for(model))
        key = prompt_key(messages, tools)
        prompt = self.prompt_bound(key)
        # each prompt token at the dearer of the two (a cache hit is the cheaper, as a rule)
        left = self.budget - self.spent() - prompt * max(prices.input, prices.cached) / 1_000_000
        per_token = prices.output / 1_000_000
        # at most what any server takes (OpenAI: "expected a value <= 2147483647")
        reply = math.floor(min(left / per_token, MAX_CAP)) if per_token else None
        if left < 0 or (reply is not None and reply < 1):
            self.stopped = True
            raise BudgetSpent(self.not_sent(prompt, prices))
        affordable = reply
        if self.window:  # the server's own window: no reply is longer than what it leaves
            room = max(1, self.window - round(estimate(messages, tools) * self.ratio))
            reply = min(reply, room) if reply is not None else room
        return Bound(prompt, reply, key, affordable)

    def not_sent(self, prompt: int, prices) -> str:
        """What a request the budget stopped says: what was spent, and what it could cost."""
        budget = money(self.budget, prices.currency)
        most = money(prompt * max(prices.input, prices.cached) / 1_000_000, prices.currency)
        why = f"its prompt could cost up to {most}, and leave nothing for a reply"
        if not self.charges:
            return f"the budget of {budget} buys no request: {why}; none was sent"
        spent = ("up to " if self.guessed else "") + money(self.spent(), prices.currency)
        return f"spent {spent} of the budget of {budget}; the next request was not sent: {why}"

    def prompt_bound(self, key: bytes) -> int:
        """The most prompt tokens a request (key: prompt_key()) can take: the server's count of
        an earlier request this one begins with, and a token for each byte added since (a
        byte-level tokenizer makes at most one; the JSON's keys and quotes outweigh a chat
        template's markers); a token a byte of it all, where the server counted none of it."""
        counted = [
            (tokens, size)
            for size, digest, tokens in self.counted
            if size <= len(key) and opening(key, size) == digest
        ]
        tokens, size = max(counted, key=lambda c: c[1], default=(0, 0))
        # more, where this server has counted more tokens than bytes (its ratio to bytes / 3)
        return tokens + math.ceil((len(key) - size) * max(1.0, self.ratio / BYTES_PER_TOKEN))

    def count_prompt(self, bound: "Bound | None", prompt: int) -> None:
        """Keep the server's count of this request's prompt, for the next one's bound (the last
        few requests: a helper's and its parent's go on alternately)."""
        if bound is None or prompt <= 0:
            return
        size = len(bound.key)
        self.counted = [*self.counted[-7:], (size, opening(bound.key, size), prompt)]

    def charge(self, bound: "Bound | None", reply: dict, model: str) -> None:
        """Count this request against the budget: what it cost, or, where the server said no
        usage, its most: its prompt bound and a token a byte of all the reply sent (its text,
        its thinking, its calls), at the dearer prices."""
        prices, cost = config.prices(model), self.costs[-1]
        if self.tokens[-1]["prompt"] or bound is None or prices is None:
            self.charges.append(cost["amount"] if cost else 0.0)
            return
        self.guessed = True
        sent = nbytes(json.dumps(reply, ensure_ascii=False, default=str))
        made = max(sent, self.tokens[-1]["completion"])
        most = bound.prompt * max(prices.input, prices.cached) + made * prices.output
        self.charges.append(most / 1_000_000)

    def prompt_was_cut(self, conversation: tuple, size: int, prompt: int) -> bool:
        """Whether the server counted fewer prompt tokens than for the request before, though the
        conversation only grew (size: its estimate), the first time it does: it cut the prompt
        (Ollama keeps only its window's end). A request no larger than the one before (a
        compaction made room), or with another system prompt or other tools, starts another
        conversation."""
        last_conversation, last_size, last_prompt, warned = self.last
        if size <= last_size or conversation != last_conversation:
            last_prompt, warned = 0, False
        cut = 0 < prompt < last_prompt and not warned
        self.last = (conversation, size, prompt, warned or cut)
        return cut


def prompt_key(messages: list[dict], tools) -> bytes:
    """A request's tools and messages as JSON bytes: an earlier request's, less its two closing
    brackets, begins this one's where this request only adds messages to it."""
    return json.dumps([tools or [], messages], ensure_ascii=False, default=str).encode()


def opening(key: bytes, size: int) -> bytes:
    """The digest of what a later request begins with where it goes on from the request of size
    bytes whose key is key[:size]: that request less its two closing brackets."""
    return hashlib.sha256(key[: size - 2]).digest()


class Bound(NamedTuple):
    """The most a request may take: prompt tokens (prompt_bound()), and reply tokens (its
    max_tokens; None: the prices make a reply free and no window is known, no cap needed); key:
    its prompt_key(); affordable: the reply tokens the money left buys (None: any number)."""

    prompt: int
    reply: int | None
    key: bytes
    affordable: int | None


def recorded_spend(requests: list, model: str) -> float:
    """What a transcript's requests (runs.requests()) cost at model's prices, from the usage
    each reply recorded: what a resumed run spent before."""
    prices = config.prices(model)
    costs = [cost_of(count_tokens(r.reply.get("usage")), prices) for r in requests]
    return sum(cost["amount"] for cost in costs if cost)


def counted_against_estimate(prompt: int, guess: int, ratio: float) -> float:
    """The server's count of a request's prompt tokens against the estimate of it (estimate()), the
    largest seen (realworld/compaction.py scales its estimate by it); ratio if the server said
    no count."""
    if prompt <= 0 or guess <= 0:
        return ratio
    # at most 4: no tokenizer counts more than a token a byte and the estimate is bytes / 3; a
    # server that reports more (usage summed over the session, a bad count) is not believed
    return min(4.0, max(ratio, prompt / guess))


def make_client(stream: bool = False, trace: bool = False, base_url: str | None = None) -> Client:
    """The Client for the server the settings name (AGENT_BASE_URL, AGENT_API_KEY,
    AGENT_TIMEOUT)."""
    return Client(
        openai_client(base_url or config.BASE_URL, config.API_KEY, config.TIMEOUT), stream, trace
    )


def worded(text: str, named: dict) -> str:
    """text with each setting it names as the person gave it (named: {variable: flag})."""
    for variable, given in named.items():
        text = re.sub(rf"\b{variable}\b", given, text)
    return text


def wrap(client, budget: float | None = None) -> Client:
    """client as a Client: None is the settings' server, an openai.OpenAI (or a replay) is wrapped,
    a Client stays as it is. budget: the most it may spend in all, what it spent before
    included (its own, config.BUDGET, if None)."""
    if client is None:
        client = make_client()
    client = client if isinstance(client, Client) else Client(client)
    if budget is not None:
        client.budget = budget
    return client


def trace_request(model: str, messages: list[dict], tools: list[dict]) -> None:
    """--trace: what this request adds to the conversation (the rest was sent before)."""
    last = max((i for i, m in enumerate(messages) if m["role"] == "assistant"), default=0)
    names = ", ".join(t["function"]["name"] for t in tools) or "none"
    say(
        f"── request: model {model}, tools {names}, {len(messages)} messages; new since "
        "the last request:"
    )
    say(json.dumps(messages[last:], indent=2, ensure_ascii=False))


# --- A time limit for the whole of one request -------------------------------------------------


def openai_client(base_url: str, api_key: str, timeout: float):
    """An openai.OpenAI whose every request, body and stream included, ends within timeout seconds
    and MAX_REPLY_BYTES decoded.

    The SDK's own timeout bounds each read, not the whole: a body that trickles in one byte a
    second, or a stream that never ends, would hold the terminal for ever. The SDK retries a
    timed-out read twice."""
    import openai

    def limit(response) -> None:  # runs when the headers have arrived, before the body is read
        # Decoded here, where it is counted, never by the HTTP library after the count.
        codings = response.headers.get("content-encoding", "").lower().replace(" ", "").split(",")
        encoding = ",".join(c for c in codings if c not in ("", "identity"))
        if "content-encoding" in response.headers:  # a header set is slow: only where one is
            response.headers["content-encoding"] = "identity"
        started = response.request.extensions["started"]
        response.stream = bounded_stream(response.stream, started + timeout, response, encoding)

    def stamp(request) -> None:
        request.extensions["started"] = time.monotonic()

    http_client = openai.DefaultHttpxClient(event_hooks={"request": [stamp], "response": [limit]})
    # A local server needs no key, but the SDK must get one: given None it would send
    # OPENAI_API_KEY. Only the encodings the standard library decodes are asked for.
    return openai.OpenAI(
        base_url=base_url,
        api_key=api_key or "no-key",
        timeout=timeout,
        http_client=http_client,
        default_headers={"Accept-Encoding": "gzip, deflate"},
    )


# Far above any real reply: 128,000 output tokens streamed are about 30 MB of events. About 5 MB of
# gzip decode to 1 GiB, so the bytes are counted after decoding.
MAX_REPLY_BYTES = 64 * 2**20


class ReplyTooLarge(ValueError):
    """A reply that passed MAX_REPLY_BYTES once decoded."""


def bounded_stream(stream, deadline: float, response, encoding: str):
    """A response body, decoded from gzip or deflate if encoding says so, that raises the SDK's
    APITimeoutError once its deadline has passed and ReplyTooLarge past MAX_REPLY_BYTES."""
    return bounded_class()(stream, deadline, response, encoding)


@functools.cache  # made once, not for every response: the HTTP library is the SDK's
def bounded_class() -> type:
    """The class of bounded_stream(): a byte stream of the HTTP library the SDK is built on."""
    import openai

    try:  # the HTTP library the openai package is built on: httpx2 from openai 3 on, httpx before
        from httpx2 import SyncByteStream
    except ImportError:  # pragma: no cover
        from httpx import SyncByteStream

    class Bounded(SyncByteStream):
        def __init__(self, stream, deadline: float, response, encoding: str):
            self.stream, self.deadline = stream, deadline
            self.response, self.encoding = response, encoding

        def __iter__(self):
            size = 0
            chunks = decoded(self.stream, self.encoding) if self.encoding else self.stream
            for chunk in chunks:
                size += len(chunk)
                if time.monotonic() > self.deadline:
                    raise openai.APITimeoutError(request=self.response.request)
                if size > MAX_REPLY_BYTES:
                    raise ReplyTooLarge(f"the reply passed {MAX_REPLY_BYTES // 2**20} MiB")
                yield chunk

        def close(self) -> None:
            self.stream.close()

    return Bounded


def decoded(chunks, encoding: str):
    """gzip or deflate bytes decoded, at most 64 KiB at a time whatever one chunk decodes to, up
    to the end of the compressed body (what follows it is not read). ValueError, which ask()
    makes one line, for another coding, two of them, or bytes that do not decode."""
    if encoding not in ("gzip", "x-gzip", "deflate"):
        raise ValueError(
            f"the reply is encoded as {encoding!r}; the agent asked for gzip or deflate"
        )
    decoder, first = zlib.decompressobj(31 if "gzip" in encoding else 15), True
    for chunk in chunks:
        while chunk and not decoder.eof:
            try:
                piece = decoder.decompress(chunk, 65536)
            except zlib.error as e:
                if first and encoding == "deflate":  # raw deflate, without zlib's header
                    decoder, first = zlib.decompressobj(-15), False
                    continue
                raise ValueError(f"the reply's {encoding} does not decode ({e})") from None
            first = False
            yield piece
            chunk = decoder.unconsumed_tail
        if decoder.eof:
            return
    yield decoder.flush()


def is_loopback(url: str) -> bool:
    """Whether url names this machine (a local Ollama, llama.cpp or vLLM needs no key)."""
    host = urlsplit(url).hostname or ""
    try:
        return host == "localhost" or ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


# --- One request: a whole reply, or one line that says why not -----------------------------------


def ask(send, base_url: str, model: str, known: dict, quoting=(), cap: int | None = None):
    """What send() (the one call to the model) returned, as one whole ChatCompletion;
    RequestFailed with one line in the provider's words if there is none. Asked again when
    the provider says that the model's output, not the request, was malformed (Groq's
    tool_use_failed). cap: the max_tokens sent; CapRefused where the server refused it and
    named a smaller one."""
    import openai

    for attempt in range(OUTPUT_RETRIES + 1):
        try:
            return whole_reply(send(), model, known, quoting)
        # the SDK lets a body that is not JSON through
        except (openai.APIError, ValueError, RecursionError) as e:
            if error_code(e) == "tool_use_failed" and attempt < OUTPUT_RETRIES:
                say(
                    f"agent: the provider could not read the model's tool call ({error_text(e)}); "
                    "asking again"
                )
                continue
            if cap and (allowed := cap_allowed(e, cap)):
                raise CapRefused(explain(e, base_url, model), allowed.most) from None
            if context_full(e):
                raise ContextFull(explain(e, base_url, model), window_of(e)) from None
            raise RequestFailed(explain(e, base_url, model)) from None
        # chunks of another shape: the SDK builds them without checking
        except (AttributeError, TypeError) as e:
            raise RequestFailed(
                f"the server sent a stream that is not a chat completion stream ({e})"
            ) from None
    raise AssertionError("unreachable")  # pragma: no cover


def whole_reply(resp, model: str, known: dict, quoting=()):
    """The reply, a stream put together; RequestFailed if it is an error or not a chat
    completion."""
    if isinstance(resp, str):  # the SDK gives a body that is not JSON (a web page) as text
        raise RequestFailed(not_a_completion(resp))
    if not hasattr(resp, "choices"):  # a stream: the replay answers whole, streamed or not
        resp = collect_stream(resp, model, known, quoting)
    # a 200 body that carries an error
    error = (getattr(resp, "model_extra", None) or {}).get("error")
    choices = getattr(resp, "choices", None)
    if isinstance(choices, list) and choices:
        # OpenRouter: in the choice
        error = error or (getattr(choices[0], "model_extra", None) or {}).get("error")
        if getattr(choices[0], "finish_reason", None) == "error":
            error = error or "no message from the server"
    if error:
        raise RequestFailed(f"the server reported an error instead of a reply: {error_text(error)}")
    problem = reply_problem(resp)  # the SDK builds a reply without checking its shape
    if problem:
        raise RequestFailed(f"the server sent a reply with {problem}{excerpt(resp)}")
    return resp


def excerpt(resp) -> str:
    """The start of a reply that cannot be used, as the JSON it came as ("" where it cannot be
    shown)."""
    try:
        return f": {shorten(hide_secrets(resp.model_dump_json(warnings=False)), 300)}"
    except (ValueError, TypeError, AttributeError, RecursionError):
        return ""


def reply_problem(resp) -> str | None:
    """What makes a reply unusable as a chat completion ("no choices", ...), or None if
    nothing does."""
    choices = getattr(resp, "choices", None)
    if too_deep(resp):  # before anything reads it recursively
        return f"fields nested more than {MAX_DEPTH} deep"
    if not isinstance(choices, list) or not choices:
        return "no choices"
    message = getattr(choices[0], "message", None)
    if not hasattr(message, "content"):
        return "no message in its first choice"
    if not isinstance(getattr(message, "tool_calls", None) or [], list):
        return "tool_calls that are not a list"
    reason = getattr(choices[0], "finish_reason", None)
    if reason is not None and not isinstance(reason, str):  # [] and {} too: not a reason
        return "a finish_reason that is not a string"
    try:  # reply_message() dumps every field it sent: one nested hundreds deep cannot be
        message.model_dump(mode="json", exclude_unset=True, warnings=False)
    except (ValueError, RecursionError):
        return "a field nested too deep to read"
    return None


# --- Streams: one reply rebuilt from its fragments -----------------------------------------------


def not_a_completion(body: str) -> str:
    """What a server that answered 200 with a body of text, not a chat completion, sent."""
    if html_title(body) is not None:
        what = plain_words(body)
    else:
        what = f"text ({shorten(hide_secrets(visible(body)), 80)})"
    return (
        f"the server answered with {what}, not a chat completion.\nThat is not an "
        "OpenAI-compatible API's answer: check AGENT_BASE_URL (many servers want it to end in /v1)."
    )


def collect_stream(stream, model: str, known: dict, quoting=()):
    """Read a streamed reply, printing its text as it comes, and rebuild it as one ChatCompletion.
    Every field of every delta is kept (rule 2): strings are joined, lists and objects merged."""
    message, calls, at_index = {"role": "assistant", "content": ""}, [], {}
    # a stream that never says why it ended was cut
    finish_reason, usage, error = "incomplete_stream", None, None
    printer = dialects.Printer(known, quoting)
    for chunk in stream:
        usage = chunk.usage or usage
        if not chunk.choices:  # the usage chunk at the end has no choices
            continue
        choice = chunk.choices[0]
        delta = delta_of(choice)
        for piece in delta.pop("tool_calls", None) or []:
            add_fragment(calls, at_index, piece)
        printer.add(delta.get("content"))
        message = merge(message, delta)
        finish_reason = choice.finish_reason or finish_reason
        error = error or (choice.model_extra or {}).get("error")
    if finish_reason == "incomplete_stream" and not message["content"] and is_web_page(stream):
        raise RequestFailed(not_a_completion("<html>"))
    message = finished(message)
    printer.end(message["content"])
    if calls:
        message["tool_calls"] = finished(calls)
    return completion(message, finish_reason, usage, model, error)


def is_web_page(stream) -> bool:
    """Whether a stream's HTTP response was a web page (text/html), not server-sent events."""
    headers = getattr(getattr(stream, "response", None), "headers", None) or {}
    return "html" in str(headers.get("content-type", ""))


def delta_of(choice) -> dict:
    """A streamed choice's delta as JSON, read as a whole reply's message is: none (providers send
    content-filter results so) is empty, content as a list of parts is their text."""
    delta = getattr(choice, "delta", None)
    if delta is None:
        return {}
    delta = delta.model_dump(mode="json", exclude_unset=True, warnings=False)
    if isinstance(delta.get("content"), list):
        delta["content"] = clean_text(delta["content"])
    return delta


def add_fragment(calls: list[dict], at_index: dict, piece) -> None:
    """Add one streamed tool-call fragment: the first at an index brings id, type and name,
    the rest arguments."""
    if not isinstance(piece, dict):
        raise TypeError(f"a tool call fragment that is not an object: {shorten(str(piece), 80)}")
    index = piece.pop("index", 0) or 0
    call = at_index.get(index)
    # Ollama: a new id
    if call is None or (piece.get("id") and call.get("id") and piece["id"] != call["id"]):
        call = at_index[index] = {}
        calls.append(call)
    merge(call, piece)


JOINED = (
    "content",
    "arguments",
    "reasoning",
    "reasoning_content",
    "text",
    "refusal",
    "summary",
    "data",
)


def merge(old, new, key: str = ""):
    """A streamed field with the next fragment added: text joined (content, arguments,
    reasoning, ...), objects merged key by key, list items merged by their index (OpenRouter's
    reasoning_details); any other value the last one sent. Objects and lists are the stream's own
    (each delta is a fresh dump) and change in place, and text is kept as its pieces until
    finished(): each fragment costs its own size, however long the reply grows."""
    if key == "thinking_blocks" and isinstance(new, list):
        return thinking_pieces(old if isinstance(old, list) else [], new)
    if old is None or new is None:
        return new if old is None else old
    if key in JOINED:
        return joined(old, new, key)
    if isinstance(old, str) and isinstance(new, str):
        return new or old
    if isinstance(old, dict) and isinstance(new, dict):
        for k, v in new.items():
            old[k] = merge(old.get(k), v, k)
        return old
    if isinstance(old, list) and isinstance(new, list):
        return merged_by_index(old, new)
    return new


def joined(old, new, key: str) -> "Pieces":
    """Streamed text with its next fragment, kept as pieces."""
    if not (isinstance(old, (str, Pieces)) and isinstance(new, str)):
        raise TypeError(f"a streamed {key} that is not text: {shorten(repr(new), 80)}")
    pieces = old if isinstance(old, Pieces) else Pieces([old])
    pieces.append(new)
    return pieces


def thinking_pieces(blocks: list, new: list) -> list:
    """LiteLLM's streamed thinking_blocks, each delta a piece: a thinking piece continues the
    open block, and the piece that brings its signature closes it; a redacted block stands alone.
    So one block goes back per thinking, signed, as LiteLLM's own stream_chunk_builder joins them
    (get_combined_thinking_content)."""
    for piece in new:
        if not continues(blocks[-1] if blocks else None, piece):
            blocks.append(piece)
            continue
        last = blocks[-1]
        for k, v in piece.items():
            text = k == "thinking" and isinstance(v, str)
            last[k] = joined(last.get(k) or "", v, k) if text else merge(last.get(k), v, k)
    return blocks


def continues(block, piece) -> bool:
    """Whether a streamed thinking piece belongs to the block before it: both thinking (not
    redacted), the block not yet signed, their thinking text."""
    return (
        isinstance(block, dict)
        and isinstance(piece, dict)
        and block.get("type") == piece.get("type") == "thinking"
        and not block.get("signature")
        and isinstance(piece.get("thinking") or "", str)
        and isinstance(block.get("thinking") or "", (str, Pieces))
    )


class Pieces(list):
    """Streamed text as its fragments, joined once by finished()."""


class Items(list):
    """A streamed list, with where each index stands in it (at)."""

    def __init__(self, items: list):
        super().__init__(items)
        self.at = {}
        for position, item in enumerate(self):
            if isinstance(item, dict) and is_key(item.get("index")):
                self.at.setdefault(item.get("index"), position)


def merged_by_index(old: list, new: list) -> list:
    """A streamed list with the next fragment's items: one with the index of an earlier item is
    merged into it, any other appended. Found in a table: two lists of 40,000 items compared item
    by item took minutes."""
    merged = old if isinstance(old, Items) else Items(old)
    for item in new:
        index = item.get("index") if isinstance(item, dict) and "index" in item else None
        if is_key(index) and index in merged.at:
            merged[merged.at[index]] = merge(merged[merged.at[index]], item)
            continue
        if is_key(index):
            merged.at[index] = len(merged)
        merged.append(item)
    return merged


def is_key(value) -> bool:
    """Whether an index a server sent can be looked up in a table (a number or a string)."""
    return isinstance(value, (int, float, str)) and not isinstance(value, bool)


def finished(value):
    """A merged value as plain JSON values: text pieces joined, lists and objects as they are."""
    if isinstance(value, Pieces):
        return "".join(value)
    if isinstance(value, dict):
        return {k: finished(v) for k, v in value.items()}
    if isinstance(value, list):
        return [finished(v) for v in value]
    return value


def completion(message: dict, finish_reason: str | None, usage, model: str, error=None, **extra):
    """A ChatCompletion built as the SDK builds a live reply. error: the one a stream's choice
    carried (OpenRouter), kept in the choice for whole_reply() to report. extra: the agent's own
    fields beside the reply (repairs, latency_ms, sent: the message as the server sent it), never
    sent to a server."""
    from openai.types.chat import ChatCompletion

    choice = {"index": 0, "message": message, "finish_reason": finish_reason}
    fields = {"id": "local", "object": "chat.completion", "created": 0, "model": model}
    fields |= {"usage": usage, "choices": [{**choice, **({"error": error} if error else {})}]}
    try:  # pydantic's compiled check, strict (nothing converted): a fifteenth of construct()'s time
        return ChatCompletion.model_validate(fields | extra, strict=True)
    except ValueError:  # what the SDK's types do not list passes (DeepSeek's finish reasons)
        return ChatCompletion.construct(**fields, **extra)


# --- The reply as the message sent back ----------------------------------------------------------


def quoted_texts(messages: list[dict]) -> list[str]:
    """What the person wrote and the tools returned (a reply that repeats a call from them quotes
    it), with the texts compaction put a placeholder or a summary in the place of
    (compaction.Compacted): a call once read in a tool result stays a quotation after compaction."""
    return list(itertools.chain.from_iterable(map(attrgetter("texts"), remembered(messages))))


def reply_message(
    msg, messages: list[dict], known: dict, quoting=(), given=frozenset()
) -> tuple[dict, list[str]]:
    """The reply as the message to append and send back, and what had to be repaired in it.

    Every field the server sent goes back unchanged (rule 2: DeepSeek's reasoning_content,
    OpenRouter's reasoning and reasoning_details, Gemini's thought signatures on tool calls,
    whatever comes next), but for what every server needs made explicit (rule 1): content a string,
    never null (Ollama's and Mistral's templates reject null), and each tool call with a unique id,
    a type and JSON arguments. known: the tools offered ({name: parameter names}); quoting: what
    the conversation lets a reply quote (quoted_texts()); given: the ids of calls given before, in
    other conversations too, which a new call may not take."""
    sent = msg.model_dump(mode="json", exclude_unset=True, warnings=False)
    message = {
        "role": "assistant",
        **{k: clean(v) for k, v in sent.items() if k not in ("role", "tool_calls")},
    }
    message["content"] = clean_text(sent.get("content"))
    calls, repairs = sent.get("tool_calls") or [], []
    # a tool call written as text, when the server did not parse it (AGENT_TEXT_CALLS=off: the
    # text is the answer, as sent)
    as_text = not calls and bool(message["content"]) and config.TEXT_CALLS != "off"
    if as_text:
        calls, message["content"], repairs = dialects.recover_tool_calls(
            message["content"], known, quoting
        )
    # one reply can hold thousands: the step's results stay bounded
    if len(calls) > config.MAX_CALLS:
        repairs.append(f"kept the first {config.MAX_CALLS} of {len(calls)} tool calls (MAX_CALLS)")
        calls = calls[: config.MAX_CALLS]
    if calls:
        taken = set(itertools.chain.from_iterable(map(attrgetter("ids"), remembered(messages))))
        taken.update(given)
        message["tool_calls"] = [tool_call(call, taken, known, repairs, as_text) for call in calls]
    return message, repairs


def tool_call(
    call, taken: set[str], known: dict, repairs: list[str], as_text: bool = False
) -> dict:
    """One tool call with a unique id, a type and its arguments as a valid JSON string; its
    other fields kept. as_text: recovered from the model's text, its id says so
    (consent.written_as_text())."""
    call = call if isinstance(call, dict) else {}
    # none for a "custom" call
    function = call.get("function") if isinstance(call.get("function"), dict) else {}
    arguments, repair = dialects.clean_arguments(function.get("arguments"))
    if repair:
        repairs.append(repair)
    name = dialects.tool_name(clean_text(function.get("name")), known)
    call_id = clean_text(call.get("id"))
    if as_text or not call_id.strip() or call_id in taken:
        # some local servers send none, or the same every time; a call recovered from text gets
        # one of the client's, never one its text names: made of the call and the ids before it,
        # so that a replay gives the same again
        call_id = made_id(name, arguments, taken, TEXT_ID if as_text else "call_")
    taken.add(call_id)
    function = {**clean(function), "name": name, "arguments": arguments}
    kept = {k: clean(v) for k, v in call.items() if k not in ("id", "type", "function", "index")}
    return {"id": call_id, "type": "function", "function": function, **kept}


def made_id(name: str, arguments: str, taken: set[str], prefix: str = "call_") -> str:
    """An id for a call that has none of its own: the same for the same call at the same point of
    a run, never one of taken; prefix: how it begins (consent.TEXT_ID: a call written as text)."""
    for attempt in range(len(taken) + 1):
        made_of = json.dumps([name, arguments, len(taken), attempt], ensure_ascii=False)
        digest = hashlib.sha256(made_of.encode("utf-8", "surrogatepass")).hexdigest()
        if f"{prefix}{digest[:24]}" not in taken:
            return f"{prefix}{digest[:24]}"
    raise AssertionError("unreachable")  # pragma: no cover: one of len(taken) + 1 is free


def clean(value):
    """A value the server sent, with every string in it made valid Unicode (clean_text)."""
    if isinstance(value, str):
        return clean_text(value)
    if isinstance(value, dict):
        return {clean_text(k): clean(v) for k, v in value.items()}
    if isinstance(value, list):
        return [clean(v) for v in value]
    return value


# --- Tokens: what each provider reports ----------------------------------------------------------


# UTF-8 bytes a token: too few for English (about 4), about right for Chinese (3 a character)
BYTES_PER_TOKEN = 3
PER_MESSAGE = 8  # tokens a chat template adds around each message
IMAGE_BYTES = 3 * 1_500  # an image part: OpenAI counts a high-detail 1024x1024 image as 765 tokens


def estimate(messages: list[dict], tools: list[dict] | None = None) -> int:
    """The tokens a request of messages (and tools) takes, estimated from its size in bytes."""
    size = nbytes(json.dumps(tools or [], ensure_ascii=False))
    return (size + sum(map(attrgetter("size"), remembered(messages)))) // BYTES_PER_TOKEN


class Facts(NamedTuple):
    """What the agent reads of one message on every request: its size in bytes, the texts a reply
    may quote and its calls' ids."""

    size: int
    texts: tuple
    ids: tuple


def facts(message: dict) -> Facts:
    """One message's Facts."""
    content, calls = message.get("content"), message.get("tool_calls") or []
    quoted = message.get("role") in ("user", "tool") and isinstance(content, str)
    return Facts(
        message_size(message),
        (content, *getattr(content, "replaced", ())) if quoted else (),
        tuple(c.get("id") for c in calls if isinstance(c, dict)),
    )


# What each conversation read lately holds, by the id() of its list: a copy of what its Facts were
# read from (parts()), and the Facts. A helper's or a summary's conversation, read between two
# requests of the run's own, does not make the run's own be read again (remembered())
READ = {}
KEPT = 4  # conversations remembered: the run's own, a helper's, a summary's, one more


def remembered(messages: list[dict]) -> list[Facts]:
    """The Facts of each message, read again from the first message whose role, content,
    reasoning or calls are not what they were at the last reading: each request extends the one
    before, so only the new messages are read. A message compaction changed, or one changed in
    place at a Python prompt, is read again, with every message after it."""
    now = parts(messages)
    before, known = READ.get(id(messages), ([[]] * len(now), []))
    same = unchanged(before, now)
    if same == len(messages) == len(known):  # asked again about the same messages
        return known
    try:
        kept = [old[:same] + copied(part[same:]) for old, part in pairs(before, now)]
    except RecursionError:  # a program's message too deep to copy: read afresh every time
        return [facts(m) for m in messages]
    known = known[:same] + [facts(m) for m in messages[same:]]
    if len(READ) >= KEPT and id(messages) not in READ:
        READ.clear()  # more conversations than that: each is read afresh once
    READ[id(messages)] = (kept, known)  # one assignment: another thread sees all of it or none
    return known


def parts(messages: list[dict]) -> list[list]:
    """Each message's role, content, the content's id() (an equal text of another kind, as
    compaction's, is another content), reasoning and calls: gathered by map(), with no loop in
    Python where every message is a dict, since this runs several times a request, over the whole
    conversation."""
    plain = set(map(type, messages)) <= {dict}
    contents = column(messages, "content", plain)
    return [
        column(messages, "role", plain),
        contents,
        list(map(id, contents)),
        column(messages, "reasoning_content", plain),
        column(messages, "tool_calls", plain),
    ]


def column(messages: list[dict], key: str, plain: bool) -> list:
    """message.get(key) of each message (plain: every message is a dict, read by map())."""
    if plain:
        return list(map(dict.get, messages, itertools.repeat(key)))
    return [message.get(key) for message in messages]


def unchanged(before: list[list], now: list[list]) -> int:
    """How many messages at the start of now are as they were in before, compared by value."""
    count = min(len(before[0]), len(now[0]))
    if all(part[:count] == kept[:count] for kept, part in pairs(before, now)):  # the usual case
        return count
    return next(i for i in range(count) if any(p[i] != k[i] for k, p in pairs(before, now)))


def pairs(before: list[list], now: list[list]):
    """Each part of before beside the same part of now."""
    return zip(before, now, strict=True)


def copied(value):
    """value with every list, tuple and dict in it copied (a string never changes in place), to
    compare with what a message holds at the next reading."""
    if isinstance(value, dict):
        return {k: copied(v) for k, v in value.items()}
    if type(value) in (list, tuple):
        return type(value)(copied(v) for v in value)
    return value


def message_size(message: dict) -> int:
    """The bytes one message counts for: its content, its reasoning sent back (DeepSeek), its
    calls, and what a chat template adds around it."""
    content, reasoning = message.get("content"), message.get("reasoning_content")
    size = content_size(content) + PER_MESSAGE * BYTES_PER_TOKEN + nbytes(str(reasoning or ""))
    for call in message.get("tool_calls") or []:
        size += nbytes(json.dumps(call, ensure_ascii=False))
    return size


def nbytes(text: str) -> int:
    """Text's size in UTF-8 (a lone surrogate, a file name's stray byte, counted too)."""
    return len(text.encode("utf-8", "surrogatepass"))


def content_size(content) -> int:
    """The bytes a message's content counts for: its text, or its parts' text and IMAGE_BYTES for
    each other part (an image's data is not read as text by the model)."""
    if not isinstance(content, list):
        return nbytes(str(content or ""))
    return sum(
        nbytes(str(part.get("text") or "")) if part.get("type") == "text" else IMAGE_BYTES
        for part in content
        if isinstance(part, dict)
    )


def usage_of(resp) -> dict | None:
    """The reply's usage as the server sent it, or None if it sent none (or something else)."""
    # warnings=False: pydantic would print a warning for each field of the wrong type.
    return (
        resp.usage.model_dump(exclude_none=True, warnings=False)
        if hasattr(resp.usage, "model_dump")
        else None
    )


def count_tokens(usage: dict | None) -> dict:
    """Prompt, cached prompt and completion tokens from a usage dict, 0 where not reported
    as a number."""
    # a transcript written by hand may hold anything
    usage = usage if isinstance(usage, dict) else {}
    details = usage.get("prompt_tokens_details")
    hit = whole(usage.get("prompt_cache_hit_tokens"))
    miss = whole(usage.get("prompt_cache_miss_tokens"))
    prompt = whole(usage.get("prompt_tokens"))
    if prompt is None and hit is not None and miss is not None:
        prompt = hit + miss  # DeepSeek's prompt_tokens is the two together
    # DeepSeek reports cache hits as prompt_cache_hit_tokens, OpenAI as
    # prompt_tokens_details.cached_tokens; a server that sends only DeepSeek's
    # prompt_cache_miss_tokens had the rest of the prompt cached.
    cached = hit or (whole(details.get("cached_tokens")) if isinstance(details, dict) else None)
    if hit is None and not cached and miss is not None and prompt is not None:
        cached = max(0, prompt - miss)
    counts = {
        "prompt": prompt,
        "cached": cached,
        "completion": whole(usage.get("completion_tokens")),
    }
    return {key: value or 0 for key, value in counts.items()}


def whole(value) -> int | None:
    """A count of tokens as a server sent it, or None where it sent none (or something else)."""
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else None


def total_tokens(used: list[dict]) -> dict:
    """The sum of several count_tokens() results."""
    return {key: sum(counts[key] for counts in used) for key in ("prompt", "cached", "completion")}


def describe_tokens(counts: dict, cost: dict | None = None) -> str:
    """Token counts as the terminal, --show and the page say them, and what they cost (cost_of()),
    where a price is known."""
    said = (
        f"{counts['prompt']} prompt tokens ({counts['cached']} cached), {counts['completion']} "
        "completion tokens"
    )
    return f"{said}, {describe_cost(cost)}" if cost else said


# --- Money: what the tokens cost, where a price is known (config.prices()) -----------------------


def cost_of(counts: dict, prices) -> dict | None:
    """What a reply of counts (count_tokens()) cost at prices (config.Prices, per million tokens),
    and what the prefix cache saved: its cached tokens at the input price, less their own; None
    where no price is known."""
    if prices is None:
        return None
    cached = min(counts["cached"], counts["prompt"])  # a server that says more is not believed
    amount = (
        (counts["prompt"] - cached) * prices.input
        + cached * prices.cached
        + counts["completion"] * prices.output
    ) / 1_000_000
    saved = max(0.0, cached * (prices.input - prices.cached) / 1_000_000)
    # rounded: 0.2 + 0.08 + 0.2 is 0.48, not 0.48000000000000004, in the transcript too
    return {
        "amount": round(amount, 12),
        "saved": round(saved, 12),
        "currency": prices.currency,
        "prices": {"input": prices.input, "cached": prices.cached, "output": prices.output},
    }


def total_cost(costs: list) -> dict | None:
    """The sum of several cost_of() results; None if any reply had no price (or none was sent)."""
    if not costs or not all(is_cost(cost) for cost in costs):
        return None
    return {
        "amount": round(sum(cost["amount"] for cost in costs), 12),
        "saved": round(sum(cost["saved"] for cost in costs), 12),
        "currency": costs[0]["currency"],
    }


def is_cost(cost) -> bool:
    """Whether cost is one as cost_of() makes it (one written by hand may hold anything)."""
    return (
        isinstance(cost, dict)
        and all(type(cost.get(k)) in (int, float) for k in ("amount", "saved"))
        and all(0 <= cost[k] < float("inf") for k in ("amount", "saved"))
        and isinstance(cost.get("currency"), str)
    )


def describe_cost(cost: dict) -> str:
    """What a reply cost, and what the prefix cache saved of what it would have cost without it:
    "0.48 USD (the cache saved 0.72 USD, 60%)"."""
    currency = cost["currency"]
    said = money(cost["amount"], currency)
    if cost["saved"] > 0:
        share = round(100 * cost["saved"] / (cost["amount"] + cost["saved"]))
        said += f" (the cache saved {money(cost['saved'], currency)}, {share}%)"
    return said


def money(amount: float, currency: str = "") -> str:
    """An amount as the person reads it, then the currency's label: two decimals, or three
    significant digits for an amount under 1 (DeepSeek bills 0.000006 USD for a thousand cached
    tokens): 0.48, 0.185, 0.0000749."""
    decimals = 2
    if 0 < amount < 1:
        decimals = max(2, 2 - math.floor(math.log10(amount)))
    whole_part, _, fraction = f"{amount:.{decimals}f}".partition(".")
    return f"{whole_part}.{fraction.rstrip('0').ljust(2, '0')} {currency}".strip()


# --- Errors: one or two lines the person can act on ----------------------------------------------

CONTEXT_FULL = Pattern(
    r"context[ _]?length|context[ _]?window|context size|context limit|too many tokens"
    r"|prompt (?:is )?too long|prompt_too_long|input is too long"
    r"|max(?:imum)? (?:model|prompt|input) length"
    r"|range of input length|token limit|tokens?\W.{0,60}must (?:be <=|have less than)"
    r"|must have less than \d+ tokens|exceeds the maximum number of tokens"
    # Moonshot v1 "model max length exceeded, max length:8192" (MoonshotAI-Cookbook#18), Zhipu's
    # 1261 "Prompt exceeds max length", OpenAI's advice that vLLM, Groq and Cerebras copy
    r"|max(?:imum)? length exceeded|exceeds? (?:the )?max(?:imum)? length"
    r"|reduce the length of the messages"
    # SambaNova's "maximum supported sequence length" (cline/cline#294), TGI's and vLLM's input
    # length, LM Studio's "prompt token count of N exceeds the limit of M"
    r"|sequence length|(?:prompt|input)(?: token)? (?:count|length)",
    re.I,
)
# The window a context error names, in the words servers use (each source's own message):
# OpenAI, DeepSeek, OpenRouter and vLLM "maximum context length is 4096 tokens"; LM Studio
# "context length of only 4096"; llama.cpp "n_ctx": 4096 in its body; Anthropic "> 200000
# maximum"; Mistral "32768 maximum context length"; Gemini "tokens allowed (1048576)"; TGI
# "must be <= 4096". The number beside the word for a limit, not the request's own count.
# A limit written as a comparison is the plainest: "198000 + 8192 > 200000", "must be <= 4096".
# A count of tokens: "8192", "8,192", "8 192", "8_192" (a thin or no-break space too).
COUNT = r"(\d{1,3}(?:[,_ \u202f\u00a0]\d{3})+(?!\d)|\d{3,}(?!\d))"
# What follows the request's own count, never a window's: "9000 tokens requested".
ASKED = r"(?!\s*(?:tokens?\s+)?(?:requested|received|given|were|in the|resulted))"
COMPARED = Pattern(rf"(?:>|<=|≤)\s*{COUNT}(?![\d,]*\s*-)")
WINDOW = Pattern(
    rf"(?:context (?:length|window|size)|n_ctx|maximum|max\b|allowed|limit|exceeds?\b|supports"
    rf"|less than|context tokens is)(?:(?!\bby\b|exceeded|requested|\bhas\b|contains)\D)"
    # not "exceeded ... by N" (Ollama), "exceeded: N" or "requested N": the request's own count
    rf"{{0,40}}?{COUNT}{ASKED}"
    rf"|{COUNT}\s*(?:tokens?\s*)?(?:maximum|max\b|context|limit|allowed)"
    rf"|should be \[\d+,\s*{COUNT}\]",  # DashScope: "Range of input length should be [1, N]"
    re.I,
)


MAX_CAP = 2**31 - 1  # the largest max_tokens a server takes: OpenAI's int32

# How servers name the most a reply may take, when they refuse a larger max_tokens (each one's
# own words): vLLM "(2000 > 4096 - 3000)" and Anthropic's "198000 + 8192 > 200000", the window
# less the prompt; OpenAI "supports at most 4096 completion tokens", Groq "must be less than or
# equal to `8192`", OpenAI's "expected a value <= 2147483647", DeepSeek "the valid range of
# max_tokens is [1, 8192]", Gemini "from 1 (inclusive) to 65537 (exclusive)": the most.
ROOM = Pattern(r"\d+\s*>\s*(\d+)\s*-\s*(\d+)|(\d+)\s*\+\s*\d+\s*>\s*(\d+)")
MOST = Pattern(
    r"(?:at most|<=|≤|less than or equal to|no more than|up to)\s*[`'\"]?(\d+)"
    r"|\[\s*[01]\s*,\s*(\d+)\s*\]|to (\d+) \(exclusive\)|\[\s*[01]\s*,\s*(\d+)\s*\)",
    re.I,
)
CAP_NAMES = Pattern(
    r"max_(?:completion_)?tokens|max_new_tokens|maxOutputTokens|max output tokens", re.I
)


class Allowed(NamedTuple):
    """What a refusal of the cap allows: most, the largest reply below the cap (None: the same
    cap, named max_completion_tokens)."""

    most: int | None


def cap_allowed(error: Exception, cap: int) -> Allowed | None:
    """Where a refusal (400, 422) names the reply's cap (max_tokens, max_completion_tokens) and
    what it allows: the most below cap (a window's room: the window less the prompt), or the
    name max_completion_tokens instead (OpenAI's reasoning models: "Use 'max_completion_tokens'
    instead"). None elsewhere: a number beside no limit's words (a date in a model's name, a
    column) is never taken for one."""
    if getattr(error, "status_code", None) not in (400, 422):
        return None
    text = re.sub(r"(?<=\d),(?=\d{3})", "", error_text(error)[:2_000])  # 8,192 is 8192
    if not CAP_NAMES.search(text):
        return None
    if "max_completion_tokens" in text and re.search(
        r"unsupported|not supported|instead", text, re.I
    ):
        return Allowed(None)
    if room := ROOM.search(text):
        window, prompt = (
            int(n) for n in (room.group(1) or room.group(4), room.group(2) or room.group(3))
        )
        return Allowed(window - prompt) if 0 < window - prompt < cap else None
    named = [
        int(m.group(1) or m.group(2) or m.group(4)) if not m.group(3) else int(m.group(3)) - 1
        for m in MOST.finditer(text)
    ]
    below = [n for n in named if 0 < n < cap]
    return Allowed(max(below)) if below else None


def context_full(error: Exception) -> bool:
    """Whether a failed request says the conversation is longer than the model's context: a
    refusal (400, 413, 422) or an error in the middle of a stream, in the server's words or in
    a provider's that a gateway passed on (OpenRouter's metadata.raw)."""
    if getattr(error, "status_code", None) not in (None, 400, 413, 422):
        return False
    return bool(CONTEXT_FULL.search(error_words(error)))


def window_of(error: Exception) -> int | None:
    """The context window a context error names, in tokens, or None when it names none; never
    the error's code (Zhipu's 1261 "Prompt exceeds max length")."""
    text, code = error_words(error)[:4_000], getattr(error_body(error), "get", dict().get)("code")
    text = NAMED.sub(lambda name: re.sub(r"\d", "#", name.group()), text)  # DeepSeek-V3-0324
    for pattern in (COMPARED, WINDOW):  # a comparison first: "198000 + 8192 > 200000"
        sizes = [
            int(re.sub(r"\D", "", next(g for g in m.groups() if g))) for m in pattern.finditer(text)
        ]
        sizes = [n for n in sizes if 512 <= n <= 100_000_000 and str(n) != str(code)]  # not "(400)"
        if sizes:  # of two counts beside a limit's words, the request's is the larger (Cloudflare's
            return min(
                sizes
            )  # "maximum output tokens (N) exceeded this model context window limit (M)")
    return None


NAMED = Pattern(r"\b[A-Za-z][\w.-]*\d[\w.-]*")  # a model's name with digits: never a count


def error_words(error: Exception) -> str:
    """What a context error may say its words in: the provider's message, and the body whole (a
    number beside it, as llama.cpp's n_ctx; a provider's words a gateway passed on), bounded."""
    body = error_body(error)
    whole = json.dumps(body) if isinstance(body, (dict, list)) else ""
    return f"{error_text(error)} {whole[:4_000]}"


def explain(error: Exception, base_url: str, model: str) -> str:
    """One or two lines about a failed request: what happened, the server's words, what to check."""
    import openai

    detail = error_text(error)
    if isinstance(error, ReplyTooLarge) or isinstance(error.__cause__, ReplyTooLarge):
        return (
            f"the server's reply passed {MAX_REPLY_BYTES // 2**20} MiB, far more than any real "
            "reply: the agent stopped reading it. Is AGENT_BASE_URL the server you meant?"
        )
    if isinstance(error.__cause__, ValueError):  # the body, read inside the SDK, did not decode
        return f"the server's reply is not a chat completion ({error.__cause__})."
    if isinstance(error, openai.APITimeoutError):
        return (
            f"the request to {base_url} timed out (AGENT_TIMEOUT). Check that the server is up "
            "and not overloaded."
        )
    if isinstance(error, openai.APIConnectionError):
        cause = hide_secrets(str(error.__cause__ or error))
        return (
            f"could not reach {base_url}: {cause}. Check AGENT_BASE_URL and your network, "
            "or start the server."
        )
    if isinstance(error, ValueError):  # not JSON, or not UTF-8
        return (
            f"the server's reply is not a chat completion ({detail}). Is AGENT_BASE_URL an "
            "OpenAI-compatible API?"
        )
    if isinstance(error, RecursionError):
        return (
            "the server's reply is nested too deep to read. Is AGENT_BASE_URL the server you meant?"
        )
    # an error event in the middle of a stream (OpenRouter)
    if not isinstance(error, openai.APIStatusError):
        return f"the server reported an error in the middle of its reply: {detail}"
    status = error.status_code
    hint = {
        401: "Check AGENT_API_KEY (or DEEPSEEK_API_KEY) in your environment or .env.",
        402: "Check your balance with the provider.",
        403: "Check that your key may use this model.",
        404: "Check AGENT_BASE_URL (many servers want it to end in /v1) and AGENT_MODEL.",
        429: (
            "The provider is rate limiting you or your balance is empty; wait, or check "
            "your account."
        ),
    }.get(status, "Check AGENT_MODEL and AGENT_BASE_URL." if status == 400 else "Try again later.")
    # a web server or a gateway, not an OpenAI-compatible API
    if html_title(error_body(error)) is not None:
        hint = (
            "That is a web page, not an API's answer: check AGENT_BASE_URL "
            "(many servers want it to end in /v1)"
            + (
                ", or try again later: a gateway in front of the server failed."
                if status >= 500
                else "."
            )
        )
    elif context_full(error):
        size = window_of(error)
        hint = (
            f"The conversation is longer than the model's context window ({size:,} tokens): "
            "the agent compacts earlier turns and long results, if there are any, and tries once "
            "more; a task too long on its own needs a shorter task or a larger window."
            if size
            else "The conversation is longer than the model's context window, which the server "
            "did not say: the agent compacts earlier turns and long results, if there are any, "
            "and tries once more; set AGENT_CONTEXT_WINDOW to the window, and it compacts in time."
        )
    elif status in (400, 404) and re.search(rf"(?<![\w.-]){re.escape(model)}(?![\w.-])", detail):
        hint = f"The server does not accept the model {model!r}; check AGENT_MODEL."
        if model in RETIRED_MODELS:
            hint += (
                " deepseek-chat and deepseek-reasoner were retired in July 2026: use "
                "deepseek-flash."
            )
    between = " " if context_full(error) else "\n"  # a context refusal is said in one line
    return f"the server answered HTTP {status}: {detail}{between}{hint}"


def error_text(error) -> str:
    """The provider's own words for an error, one line: its message and, if it gave one,
    its code. error is an exception (its body is read) or a body as sent: an object
    ({"error": {"message", "code"}}, vLLM's flat {"message", "type"}, FastAPI's {"detail"}, a
    list of its validation errors), a list of those (Gemini), a web page or plain text. The key is
    blanked out before the text is cut."""
    body = error_body(error)
    if body is None and isinstance(error, Exception):  # the SDK found no "error" in it
        body = error_body(response_json(error))
    if isinstance(body, dict):
        text = words_of(body)
    elif isinstance(body, str) and body.strip():
        text = plain_words(body)
    else:
        text = getattr(error, "message", None) or str(error)
    return shorten(hide_secrets(text), 400)


# Where error bodies put their message and code: OpenAI's and most {"message", "code"}; FastAPI's
# "detail"; Cloudflare's {"success": false, "errors": [{"code", "message"}]}
# (developers.cloudflare.com, API "Errors"); Baidu Qianfan's {"error_code", "error_msg"}; AWS's
# {"Message"}.
MESSAGE_KEYS = ("message", "detail", "msg", "errors", "error_msg", "error_message", "Message")
CODE_KEYS = ("code", "type", "status", "error_code", "error_type")


def words_of(body: dict) -> str:
    """An error object's message and code: the message under the names servers use (a number
    or an object too), a list of errors (FastAPI's, Cloudflare's), or the code alone."""
    message = next((body[k] for k in MESSAGE_KEYS if body.get(k) not in (None, [], "")), None)
    if isinstance(message, list):  # FastAPI: [{"loc": [...], "msg": "field required"}, ...]
        message = "; ".join(map(one_error, message[:5]))
    elif isinstance(message, dict):
        message = words_of(message)
    code = next((body[k] for k in CODE_KEYS if isinstance(body.get(k), (str, int))), None)
    text = plain_words(str(message)) if message is not None else ""
    if code is not None and str(code) not in text:
        text = f"{text} ({code})" if text else str(code)
    return text or json.dumps(body, ensure_ascii=False, default=str)[:400]


def one_error(item) -> str:
    """One error of a list: FastAPI's validation error, an error object, or text."""
    if isinstance(item, dict) and "loc" in item:
        return validation_error(item)
    return words_of(item) if isinstance(item, dict) else str(item)


def validation_error(item) -> str:
    """One of FastAPI's validation errors: its message and where."""
    if not isinstance(item, dict):
        return str(item)
    where = ".".join(str(part) for part in item.get("loc") or [] if part != "body")
    return f"{item.get('msg', item)}" + (f" ({where})" if where else "")


def plain_words(text: str) -> str:
    """Text a server sent as its error: a web page as its title, a Python traceback as its last
    line, anything else as it is."""
    title = html_title(text)
    if title is not None:
        return f"a web page titled {title!r}" if title else "a web page"
    if "Traceback (most recent call last)" in text:
        lines = [line.strip() for line in text.strip().splitlines() if line.strip()]
        return lines[-1] if lines else text
    return text


def response_json(error):
    """The body of an error's HTTP response, parsed; None if it is not JSON."""
    try:
        return error.response.json()
    except (AttributeError, ValueError, TypeError):
        return None


def error_code(error) -> str | None:
    """The code an error body gives (Groq: "tool_use_failed"), or None."""
    body = error_body(error)
    return body.get("code") if isinstance(body, dict) else None


def error_body(error):
    """The error object inside what a server sent: an exception's body, or a body as sent;
    a list of them (Gemini's OpenAI-compatible endpoint: [{"error": {...}}]) gives its first,
    {"error": ...} what it holds."""
    body = getattr(error, "body", error) if isinstance(error, Exception) else error
    if isinstance(body, list) and body:
        body = body[0]
    if isinstance(body, dict) and isinstance(body.get("error"), (dict, str)):
        body = body["error"]
    return body


def html_title(body) -> str | None:
    """An HTML page's title, or its first heading ("" if it has neither); None if body is not HTML.
    Scripts, styles and comments are not read. Read with str.find: a page can be as large as a
    hostile server makes it."""
    if not isinstance(body, str) or not body.lstrip()[:1].startswith("<"):
        return None
    lower = body[:200_000].translate(ASCII_LOWER)  # positions stay those of body
    if not any(
        tag in lower[:2000] for tag in ("<html", "<head", "<body", "<title", "<h1", "<!doctype")
    ):
        return None
    for opening, closing in (("<script", "</script"), ("<style", "</style"), ("<!--", "-->")):
        lower = hidden(lower, opening, closing)
    for tag in ("title", "h1"):
        start = lower.find(f"<{tag}")
        opened = lower.find(">", start) if start >= 0 else -1
        closed = lower.find(f"</{tag}", opened) if opened >= 0 else -1
        if closed > opened:  # as text: the tags inside a heading gone, &amp; and the like read
            inside = body[opened + 1 : min(closed, opened + 4001)]
            words = re.sub(r"<[^<>]{0,200}>", "", inside)
            return " ".join(html.unescape(words).split())[:200]
    return ""


ASCII_LOWER = str.maketrans("ABCDEFGHIJKLMNOPQRSTUVWXYZ", "abcdefghijklmnopqrstuvwxyz")


def hidden(lower: str, opening: str, closing: str) -> str:
    """lower with every block from opening to closing blanked out, its length kept."""
    pieces, at = [], 0
    while (start := lower.find(opening, at)) >= 0:
        end = lower.find(closing, start)
        end = len(lower) if end < 0 else end + len(closing)
        pieces += [lower[at:start], " " * (end - start)]
        at = end
    return "".join([*pieces, lower[at:]])
