"""A run shown, read the one way the loop ran it (realworld/runs.py): as text (--show), and as one
self-contained HTML page (python agent.py --html TRANSCRIPT OUT.html): the loop as a timeline, one
step a row; the messages each request sent, as the model saw them; tokens and time.

A step is numbered as the terminal printed it: from 1 at each task (and at each going on after a
pause or a refusal); the page's slider counts the run's own requests in order. A helper's requests
and a summary's are shown inside the step or the compaction that made them, and counted in the
totals, as the terminal counts them.

A transcript is untrusted: the model, a tool or a server wrote most of it. Everything from it
passes escape() and is shown as text, never as markup, and the page's Content-Security-Policy lets
nothing load and nothing run but its own inline style and script, named by their hashes. The page
reads as it is with scripts off; the script only adds folding, a filter and a step-through.
"""

import base64
import hashlib
import html
import json
import re
from datetime import datetime

from realworld import dialects, pauses, replies, runs
from realworld.consent import edit_shown, shown_command, written_as_text
from realworld.guards import arguments_line, hide_secrets, shorten, visible
from realworld.runs import Request

STYLE = """
body{font:14px/1.45 system-ui,sans-serif;margin:0 auto;max-width:70em;padding:1em;color:#222}
h1{font-size:1.3em}h2{font-size:1.1em;margin:1.5em 0 .5em}
pre{white-space:pre-wrap;word-break:break-word;background:#f6f6f4;padding:.4em .6em;margin:.3em 0;
border-radius:4px;max-height:30em;overflow:auto}
.step,.event,.substep{border-left:4px solid #8aa;padding:.2em .8em;margin:.8em 0}
.step h3,.substep h3{font-size:1em;margin:.2em 0}.sub{margin:.4em 0 .4em 1.2em}
.substep{border-left-style:dashed}.meta{color:#666;font-size:.9em}
.scale{font:10px system-ui,sans-serif;fill:#555}.grid{stroke:#ccc;stroke-dasharray:2 2}
.call{border-left:3px solid #69c;padding-left:.6em;margin:.4em 0}
.ok{color:#276}.error,.declined{color:#b33}.repair{color:#a60}
.event{border-color:#ca6}.msg{border-left:3px solid #ccc;padding-left:.6em;margin:.4em 0}
.msg.new{border-color:#e90}.version{margin:.6em 0}.role{font-weight:600}.hidden{display:none}
nav{position:sticky;top:0;background:#fff;padding:.4em 0;border-bottom:1px solid #ddd}
.bar-prompt{fill:#9bd}.bar-cached{fill:#5a8}.bar-completion{fill:#e96}.bar-latency{fill:#aaa}
.total{fill:none;stroke:#333;stroke-width:1.5}.total-scale{text-anchor:end}.number{text-anchor:middle}
.window{stroke:#c33;stroke-dasharray:4 2}span.prompt{color:#47a}span.cached{color:#386}
span.completion{color:#c63}.bar-money{fill:#b85}.bar-saved{fill:#dec}span.money{color:#a63}
span.saved{color:#7a5}
"""

SCRIPT = """
document.documentElement.dataset.script = "ran";
document.querySelector("nav").classList.remove("hidden");  // its controls work only with scripts
const steps = [...document.querySelectorAll(".step")];
const versions = [...document.querySelectorAll(".version")];
const slider = document.getElementById("at-step"), shown = document.getElementById("at-step-n");
function showStep(n) {
  const at = n <= steps.length ? steps[n - 1].dataset : null;
  const last = versions[versions.length - 1];
  const v = at ? at.v : last && last.dataset.v;
  shown.textContent = at ? "request " + n + " (step " + at.step + "): " + at.count + " messages"
    : "after the run";
  for (const box of versions) {
    box.classList.toggle("hidden", box.dataset.v !== v);
    for (const m of box.querySelectorAll(".msg")) {  // each message once, with who sent it
      m.classList.toggle("hidden", n < Number(m.dataset.from) || n > Number(m.dataset.to));
      m.classList.toggle("new", Number(m.dataset.first) === n);
    }
  }
}
// page.html#request-3 opens at the messages request 3 sent; else at those after the run
const asked = Number((location.hash.match(/^#request-(\\d+)$/) || [])[1]);
const first = asked >= 1 && asked <= steps.length ? asked : steps.length + 1;
slider.max = steps.length + 1; slider.value = first; showStep(first);
slider.addEventListener("input", () => showStep(Number(slider.value)));
document.getElementById("filter").addEventListener("input", (e) => {
  const word = e.target.value.toLowerCase();
  for (const s of steps) s.classList.toggle("hidden", !s.textContent.toLowerCase().includes(word));
});
for (const [id, open] of [["open-all", true], ["close-all", false]])
  document.getElementById(id).addEventListener("click", () => {
    for (const d of document.querySelectorAll("details")) d.open = open;
  });
"""


def digest(code: str) -> str:
    """A CSP source that allows exactly this inline code."""
    return "'sha256-" + base64.b64encode(hashlib.sha256(code.encode()).digest()).decode() + "'"


CSP = (
    f"default-src 'none'; style-src {digest(STYLE)}; script-src {digest(SCRIPT)}; "
    "img-src 'none'; base-uri 'none'; form-action 'none'"
)


def escape(text) -> str:
    """Untrusted text as HTML text: markup escaped, invisible and bidi characters written as
    escapes (page() has hidden the key and passwords already)."""
    return html.escape(visible(text if isinstance(text, str) else str(text)))


def page(events: list[dict], system_prompt: str) -> str:
    """The whole page for a transcript's events; system_prompt: the agent's own."""
    # the key and passwords hidden at the one place everything passes, before anything is cut
    events = json.loads(hide_secrets(json.dumps(events, ensure_ascii=False)))
    timed(events)
    requests, conversations = runs.walk(events)
    own = [r for r in requests if r.under is None]
    # a helper's requests under the call that started it, a summary's under its compaction
    nested, ends = {}, {}
    for request in requests:
        if request.under is not None:
            nested.setdefault(str(request.under), []).append(request)
    for event in events:
        if "under" in event and event["type"] == "turn/end":
            ends[str(event["under"])] = event
    at = {id(r.reply): (n, r) for n, r in enumerate(own, 1)}
    final = conversations.get(None) or runs.Conversation()
    # the run's own conversation, numbered (a run that started it again has another before it):
    # the slider shows the one a request was sent in
    lists = {}
    for sent in [*(r.conversation for r in own), final]:
        lists.setdefault(id(sent), len(lists))
    body, first_at = [], {}
    for event in events:
        if "under" not in event:
            body.append(row(event, at, own, nested, ends, lists))
        else:
            first_at.setdefault(str(event["under"]), len(body))
    # a conversation no event of the run's own showed (a summary that was not kept): where it began
    unseen = sorted(set(nested) & set(first_at), key=first_at.get)
    shown_first = [(first_at[u], unshown(u, nested, ends)) for u in unseen]
    for place, shown in reversed(shown_first):
        body.insert(place, shown)
    shown = (
        "<!DOCTYPE html>\n<html lang=en><head><meta charset=utf-8>"
        f'<meta http-equiv="Content-Security-Policy" content="{CSP}">'
        f"<title>{escape(title(events))}</title><style>{STYLE}</style></head><body>"
        f"{header(events, system_prompt, own, requests)}{chart(requests, compacted_window(events))}"
        f"<h2>The loop, step by step</h2>{''.join(body)}"
        "<h2 id=messages>The messages, as the model saw them</h2>"
        f"{message_list(own, final, lists)}"
    )
    # a browser drops the newline right after <pre> (WHATWG HTML 13.2.6.4.7): each pre begins
    # with one, so that a text's own first newline shows
    return PRE.sub("\\g<0>\n", shown) + f"<script>{SCRIPT}</script></body></html>\n"


PRE = re.compile(r"<pre\b[^>]*>")  # the page's own tags: every text in it is escaped


def unshown(under: str, nested: dict, ends: dict) -> str:
    """The requests of a conversation that nothing else shows: a summary's that was not kept."""
    what = "a summary was asked for and not kept" if runs.is_summary(under) else escape(under)
    return f"<div class=event><b>{what}</b>{inner(under, nested, ends)}</div>"


def timed(events: list[dict]) -> None:
    """Give each tool/result of this page's copy of the events its tool's time, "ms"."""
    took = tool_times(events)
    for event in events:
        if id(event) in took:
            event["ms"] = took[id(event)]


def tool_times(events: list[dict]) -> dict:
    """{id of a tool/result event: its tool's time in ms}: from the tool/started that
    tools.run_call() recorded as the tool began (after any question), to the result."""
    began, took = {}, {}
    for event in events:
        if event["type"] == "tool/started":
            began[event.get("call_id")] = event.get("time")
        elif event["type"] == "tool/result" and event.get("call_id") in began:
            took[id(event)] = between(began.pop(event["call_id"]), event.get("time"))
    return took


def between(start, end) -> int | None:
    """Milliseconds from one event's time to another's; None where a time is no ISO time."""
    try:
        took = datetime.fromisoformat(end) - datetime.fromisoformat(start)
    except (TypeError, ValueError):
        return None
    return round(took.total_seconds() * 1000)


def title(events: list[dict]) -> str:
    task = runs.recorded_task(events)
    return f"mini-agent: {task[:80]}" if task else "mini-agent transcript"


def whose(every: list) -> str:
    """Who the requests not the run's own were made for: its helpers, its summaries, or both."""
    kinds = {"summaries" if runs.is_summary(r.under) else "helpers" for r in every if r.under}
    return "its " + " and ".join(sorted(kinds, reverse=True)) if kinds else "its helpers"


def header(events: list[dict], system_prompt: str, own: list[Request], every: list) -> str:
    """What the run was: model, server, workspace, the lesson's note, a system prompt that is not
    the agent's own, the totals (of every request, a helper's and a summary's too); and the
    controls."""
    start = next((e for e in events if e["type"] == "run/start" and "under" not in e), {})
    used = [tokens_of(r) for r in every]
    spent = replies.total_cost([r.reply.get("cost") for r in every])
    others = len(every) - len(own)
    parts = [f"<h1>mini-agent: {escape(runs.recorded_task(events) or 'a transcript')}</h1>"]
    parts.append(
        f"<p class=meta>{escape(start.get('model', '?'))} at {escape(start.get('base_url', '?'))}"
        f", working in {escape(start.get('workspace', '?'))}; {plural(len(own), 'request')}"
        + (f" of its own and {others} of {whose(every)}" if others else "")
        + f"; {escape(replies.describe_tokens(replies.total_tokens(used), spent))}</p>"
    )
    if start.get("note"):
        parts.append(f"<p class=note>{escape(start['note'])}</p>")
    if start.get("by_hand") is True:  # a lesson: nothing in it was measured
        parts.append(
            "<p class=note>Written by hand: its server, its tokens and its times are examples, "
            "not measured.</p>"
        )
    if start.get("system_prompt") not in (None, system_prompt):
        parts.append(
            "<details open><summary>system prompt, not this agent's own</summary>"
            f"<pre>{escape(start['system_prompt'])}</pre></details>"
        )
    parts.append(
        "<p class=meta>Steps are numbered as the terminal printed them: from 1 at each task, and "
        "at each going on after a pause, a refusal or a resume. The slider below counts the "
        "run's own requests in order: request N is the Nth of them.</p>"
        "<nav class=hidden><input id=filter placeholder='filter steps'> "
        "<button id=open-all>open all</button> <button id=close-all>close all</button> | "
        "<a href='#messages'>the messages</a>, "
        "<input id=at-step type=range min=1 value=1 aria-label='the messages of which request'> "
        "<span id=at-step-n></span></nav>"
    )
    return "".join(parts)


def tokens_of(request: Request) -> dict:
    """A request's token counts, as a chart can draw them."""
    return drawable(replies.count_tokens(request.reply.get("usage")))


def recorded_cost(request: Request) -> dict | None:
    """What a request's reply cost, as its transcript records it; None where it records no price
    (or something else)."""
    cost = request.reply.get("cost")
    return cost if replies.is_cost(cost) else None


def row(event: dict, at: dict, own: list, nested: dict, ends: dict, lists: dict) -> str:
    """One event of the run's own conversation on the timeline."""
    kind = event["type"]
    if kind == "user/message":
        return f"<div class=event><b>task</b><pre>{escape(event['content'])}</pre></div>"
    if runs.is_no_reply(event):
        return (
            "<div class=event><b>no reply</b>: the agent answered the task in its place"
            f"<pre>{escape(event['message'].get('content') or '')}</pre></div>"
        )
    if kind == "assistant/message":
        number, request = at[id(event)]
        before = own[number - 2] if number > 1 else None
        return step(request, before, nested, ends, (number, lists[id(request.conversation)]))
    if kind in ("run/start", "tool/result", "tool/started"):
        return ""  # the start is in the header; a result is shown with its call, in the step
    return other_event(event, nested, ends)


def step(request: Request, before: Request | None, nested: dict, ends: dict, own=None) -> str:
    """One step: what its request sent, what came back, every call with its result (and the
    requests of a helper it started), how it ended. own: (its number among the run's own
    requests, the number of the conversation it was sent in) for a step of the run's own; a
    helper's and a summary's are substeps."""
    message, reply = request.reply["message"], request.reply
    new = new_messages(request, before)
    tokens = tokens_of(request)
    ms = drawn(reply.get("latency_ms"))
    thinking, text = dialects.split_thinking(message.get("content") or "")
    reasoning = dialects.reasoning_of(message) or thinking
    offered = runs.names(request.tools) if request.tools is not None else None
    parts = [
        f"<div class=step id=step-{own[0]} data-v={own[1]} data-count={request.count} "
        f"data-step={request.step}><h3>step {request.step}</h3>"
        if own
        else f"<div class=substep><h3>its step {request.step}</h3>",
        f"<p class=meta>request: {plural(request.count, 'message')}, {len(new)} new "
        f"({', '.join(escape(m.get('role', '?')) for m in new)})"
        + (f"; tools: {escape(', '.join(offered) or 'none')}" if offered is not None else "")
        + f"; reply: {escape(reply.get('finish_reason') or '?')}; "
        f"{escape(replies.describe_tokens(tokens, recorded_cost(request)))}"
        f"{f'; {ms} ms' if ms else ''}</p>",
    ]
    if reasoning.strip():
        parts.append(
            f"<details><summary>thinking</summary><pre>{escape(reasoning)}</pre></details>"
        )
    if text.strip():
        parts.append(f"<pre class=text>{escape(text)}</pre>")
    repairs = reply.get("repairs") or []
    repairs = repairs if isinstance(repairs, list) else [repairs]  # a transcript written by hand
    parts += [f"<p class=repair>repaired: {escape(r)}</p>" for r in repairs]
    calls = message.get("tool_calls") or []
    return "".join(parts + calls_and_results(calls, request.results, nested, ends)) + "</div>"


def new_messages(request: Request, before: Request | None) -> list[dict]:
    """What a request sent that the one before it in its conversation had not: what was added
    since, and what a compaction or a handoff put in the place of what was there."""
    here = request.conversation
    since = before.index if before is not None and before.conversation is here else None
    return [e.message for e in here.made_for(request.index, since)]


def calls_and_results(calls: list[dict], results: list[dict], nested: dict, ends: dict) -> list:
    """Each call with the result recorded for it: by its id, or else by its place; and under it
    the requests of a helper it started."""
    by_id = {}
    for result in results:
        by_id.setdefault(result.get("call_id"), result)
    return [
        call_and_result(
            call,
            by_id.get(call.get("id")) or (results[i] if i < len(results) else None),
            inner(str(call.get("id")), nested, ends),
        )
        for i, call in enumerate(calls)
    ]


def inner(under: str, nested: dict, ends: dict) -> str:
    """The requests of a conversation inside a step (a helper's: examples/subagent.py) or a
    compaction (its summary's), each numbered on its own, and how it ended."""
    requests = nested.pop(under, [])
    if not requests:
        return ""
    steps = "".join(
        step(r, requests[i - 1] if i else None, nested, ends) for i, r in enumerate(requests)
    )
    end = ends.get(under)
    ended = f"<p class=meta>ended: {escape(end.get('status', '?'))}</p>" if end else ""
    return f"<div class=sub><b>its own requests</b>{steps}{ended}</div>"


def drawable(tokens: dict) -> dict:
    """Token counts a chart can draw: whole numbers from 0 to a trillion, no more cached than
    prompt tokens (a transcript written by hand may hold anything)."""
    prompt, cached, completion = (drawn(tokens[k]) for k in ("prompt", "cached", "completion"))
    return {"prompt": prompt, "cached": min(cached, prompt), "completion": completion}


def drawn(value) -> int:
    """A count or a time as a chart draws it: 0 for anything but a finite number from 0 up."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return 0
    return int(value) if 0 <= value <= 10**12 else 0


def call_and_result(call: dict, result: dict | None, inner: str = "") -> str:
    """A call with its arguments as parsed JSON, the steps of a subagent it started, and the
    result the transcript records for it."""
    function = call.get("function") or {}
    arguments = function.get("arguments") or ""
    try:
        shown = json.dumps(json.loads(arguments), indent=2, ensure_ascii=False)
    except (ValueError, TypeError, RecursionError):
        shown = arguments
    # an edit as an edit: the old text and the new
    shown = edit_shown(function.get("name"), arguments) or shown
    label = " (recovered from the text)" if written_as_text(call.get("id")) else ""
    parts = [f"<div class=call><b>→ {escape(function.get('name', '?'))}</b>{label}"]
    parts.append(f"<pre>{escape(shown)}</pre>{inner}")
    if result is not None:
        content = result.get("content", "")
        state = "ok" if result.get("ok") else "declined" if "declined" in content else "error"
        ms = result.get("ms")
        took = f" · the tool took {drawn(ms):,} ms" if ms is not None else ""
        parts.append(f"<p class={state}>← {state}{took}</p><pre>{escape(content)}</pre>")
    return "".join(parts) + "</div>"


def other_event(event: dict, nested: dict, ends: dict) -> str:
    """What the person or the agent did between steps: a turn's end or pause, a resume, a
    handoff, a replay's divergence."""
    kind = event["type"]
    if kind == "turn/end" and event.get("status") == "paused":
        return pause(event)
    if kind == "context/compacted":
        return compacted(event, nested, ends)
    if kind == "agent/handoff":
        tools = runs.names(runs.offered(event.get("tools"), []))
        return (
            f"<div class=event><b>handed off</b> to {escape(event.get('to', '?'))}: from here its "
            f"tools ({escape(', '.join(map(str, tools)))}) and its system prompt"
            f"<pre>{escape(event.get('system_prompt', ''))}</pre></div>"
        )
    if kind == "turn/end":
        error = f": {event['error']}" if event.get("error") else ""
        return (
            f"<div class=event><b>turn ended</b>: {escape(event.get('status', '?') + error)}</div>"
        )
    if kind == "run/resume":
        return "<div class=event><b>resumed</b> with " + escape(event.get("model", "?")) + "</div>"
    if kind == "replay/diverged":
        return (
            f"<div class=event><b>the replay diverged</b> at step {escape(event.get('step', '?'))}"
            f": recorded <pre>{escape(event.get('recorded', ''))}</pre> now "
            f"<pre>{escape(event.get('now', ''))}</pre></div>"
        )
    return f"<div class=event>{escape(kind)}</div>"


def compacted(event: dict, nested: dict, ends: dict) -> str:
    """A compaction: the tokens before and after, each result replaced, the summary and the
    request that wrote it."""
    replaced = event.get("placeholders") if isinstance(event.get("placeholders"), dict) else {}
    summary = event.get("summary") if isinstance(event.get("summary"), dict) else {}
    parts = [
        f"<div class=event><b>compacted</b>: about {escape(counted(event.get('before', '?')))} → "
        f"{escape(counted(event.get('after', '?')))} tokens (window "
        f"{escape(counted(event.get('window', '?')))}); "
        f"{plural(len(replaced), 'tool result')} replaced by a placeholder"
    ]
    if summary:
        parts.append(
            f", {escape(summary.get('replaced', '?'))} earlier messages by a summary"
            f"<pre>{escape(summary.get('text', ''))}</pre>"
            + inner(str(summary.get("under")), nested, ends)
        )
    for call_id, text in replaced.items():
        parts.append(f"<details><summary>{escape(call_id)}</summary><pre>{escape(text)}</pre>")
        parts.append("</details>")
    return "".join(parts) + "</div>"


def pause(event: dict) -> str:
    """A pause, and each call it left waiting for the person's yes, with its code."""
    waiting = pauses.pending_calls(event)
    verb = "waits" if len(waiting) == 1 else "wait"
    parts = [f"<div class=event><b>paused</b>: {plural(len(waiting), 'call')} {verb} for a yes"]
    for call in waiting:  # the code made of what is shown, never the one the transcript says
        parts.append(
            f"<p>⏸ code {pauses.code(call)}: {escape(call['function']['name'])}</p>"
            f"<pre>{escape(call['function']['arguments'])}</pre>"
        )
    return "".join(parts) + "</div>"


def plural(count: int, word: str) -> str:
    return f"{count} {word}" + ("" if count == 1 else "s")


PREVIEW = 2000  # characters of a long tool result or reply in the list of messages


def message_list(own: list[Request], final: runs.Conversation, lists: dict) -> str:
    """The run's own conversation as its requests sent it: each message it ever held once, with
    the requests that sent it (a compaction, a resume or a handoff ends some and begins others:
    a list shown whole at each change grew with the square); the slider shows those a request
    sent, in their order, and those the run was left with."""
    stretches = []  # (a conversation, the number of its first request, of its last)
    for number, request in enumerate(own, 1):
        if not stretches or stretches[-1][0] is not request.conversation:
            stretches.append([request.conversation, number, number])
        stretches[-1][2] = number
    if not stretches or stretches[-1][0] is not final:
        stretches.append([final, len(own) + 1, len(own)])
    return "".join(
        version(here, lists[id(here)], start, end, len(own), here is final)
        for here, start, end in stretches
        if len(here.entries)
    )


def version(here: runs.Conversation, v: int, start: int, end: int, total: int, left) -> str:
    """One conversation (number v), whose requests are the run's own start to end; left: the run
    was left with it (what it holds at the end is shown after the last request too)."""
    span = (
        f"sent by request {start}" + (f" to {end}" if end > start else "")
        if end >= start
        else "after the last request"
    )
    parts = [f"<div class=version data-v={v}><p class=meta>{span}:</p>"]
    i = 0
    for entry in here.listed():
        first = start + entry.born
        last = start + entry.died - 1 if entry.died is not None else total + 1 if left else end
        if first > last:
            continue  # replaced before any request sent it
        stop = min(last, total)
        when = (
            "after the last request: never sent"
            if first > total
            else f"sent by request {first}" + (f" to {stop}" if stop > first else "")
        )
        parts.append(listed_message(entry.message, i, first, when, (first, last)))
        i += 1
    return "".join(parts) + "</div>"


def listed_message(message: dict, i: int, first: int, when: str, sent_by: tuple) -> str:
    """One message in a list: its role, when it was sent, its text (the start of a long one) and
    its other fields; sent_by: (from, to), the requests it is shown at (to: the number after the
    last request, where the run was left with it)."""
    shown = dict(message)
    content = shown.pop("content", "") or ""
    # what the model thought, sent back with the message (DeepSeek's reasoning_content): shown
    thought_key = next((k for k in ("reasoning_content", "reasoning") if k in shown), "")
    thought = shown.pop(thought_key) if thought_key else None
    content = content if isinstance(content, str) else fields({"content": content})
    if len(content) > PREVIEW and message.get("role") in ("tool", "assistant"):
        # shown whole in its step: here its beginning, so that the page stays small
        content = content[:PREVIEW] + f"\n… ({len(content):,} characters: all of it in its step)"
    extra = fields(shown) if len(shown) > 1 else ""
    return (
        f"<div class=msg data-i={i} data-first={first} data-from={sent_by[0]} "
        f"data-to={sent_by[1]}><span class=role>"
        f"{escape(message.get('role', '?'))}</span> <span class=meta>{when}</span>"
        + (
            f"<p class=meta>its reasoning, a field of the message ({escape(thought_key)}), "
            f"which goes back with it when it is sent:</p><pre>{escape(thought)}</pre>"
            if isinstance(thought, str) and thought
            else ""
        )
        + (f"<pre>{escape(content)}</pre>" if content else "")
        + (
            f"<details><summary>fields</summary><pre>{escape(extra)}</pre></details>"
            if extra
            else ""
        )
        + "</div>"
    )


def fields(message: dict) -> str:
    """A message's other fields as JSON (its role, calls, reasoning, a provider's own)."""
    try:
        return json.dumps(message, ensure_ascii=False, indent=1)
    except (ValueError, TypeError, RecursionError):
        return repr(message)[:10_000]


def chart(requests: list[Request], window: int | None = None) -> str:
    """Tokens per request, every one (a helper's and a summary's too), as stacked bars (prompt not
    cached, cached, completion) on the left scale, the running total as a line on its own scale
    at the right, the requests numbered along the bottom, drawn as inline SVG. window: the
    context window where the run compacted, drawn with its 3/4 mark on the bars' scale."""
    steps = [
        {"tokens": tokens_of(r), "latency": drawn(r.reply.get("latency_ms")), "name": named(r)}
        for r in requests
    ]
    if not steps:
        return ""
    width, top, bottom, gap = chart_width(steps), 20, 140, 2
    bar, tall = width / len(steps), bottom - top
    largest = max(s["tokens"]["prompt"] + s["tokens"]["completion"] for s in steps)
    scale = max(largest, window or 0) or 1  # the bars' scale: the window too, where it is drawn
    total, running, shapes = 0, [], []
    grand = sum(s["tokens"]["prompt"] + s["tokens"]["completion"] for s in steps) or 1
    every = max(1, round(len(steps) / (width / 30)))  # a number each 30 pixels at least
    for i, s in enumerate(steps):
        t = s["tokens"]
        x, y = i * bar, bottom
        for part, value in (
            ("cached", t["cached"]),
            ("prompt", t["prompt"] - t["cached"]),
            ("completion", t["completion"]),
        ):
            h = value / scale * tall
            y -= h
            shapes.append(
                f"<rect class=bar-{part} x={x:.1f} y={y:.1f} width={max(bar - gap, 1):.1f} "
                f"height={h:.1f}><title>{s['name']}: {value} {part} tokens</title></rect>"
            )
        if i % every == 0 or i == len(steps) - 1:
            number = f"x={x + bar / 2:.1f} y={bottom + 12}>{i + 1}"
            shapes.append(f"<text class='scale number' {number}</text>")
        total += t["prompt"] + t["completion"]
        running.append(f"{x + bar / 2:.1f},{bottom - total / grand * tall:.1f}")
    # the scales: the bars' at the left, the running total's at the right, each its own
    shapes += [
        f"<line class=grid x1=0 y1={top} x2={width} y2={top}></line>",
        f"<text class=scale x=2 y=14>{scale:,} tokens</text>",
        f"<text class='scale total-scale' x={width - 2} y=14>running total {total:,}</text>",
    ]
    if window:
        for share, label in ((1, "window"), (0.75, "3/4: compaction")):
            y = bottom - window * share / scale * tall
            shapes.append(f"<line class=window x1=0 y1={y:.1f} x2={width} y2={y:.1f}></line>")
            at = f"x={width - 2} y={y + 10:.1f}"  # under its line, at the right
            shapes.append(
                f"<text class='scale total-scale' {at}>{label}, {window * share:,.0f}</text>"
            )
    return (
        "<h2>Tokens per request</h2><svg role=img aria-label='tokens per request' "
        f"viewBox='0 0 {width} {bottom + 16}' width={width} height={bottom + 16}>"
        + "".join(shapes)
        + f"<polyline class=total points='{' '.join(running)}'><title>running total: {total} "
        "tokens</title></polyline></svg><p class=meta>Each bar is one request, numbered in the "
        "order sent (a helper's and a summary's among them): <span class=cached>"
        "cached prompt tokens</span>, <span class=prompt>prompt tokens not cached</span>, "
        f"<span class=completion>completion tokens</span>, on the scale at the left, whose top "
        f"(the dashed line) is {scale:,} tokens"
        + (
            f"; the line is the running total, on its own scale: its top is all {total:,} tokens"
            if len(steps) > 1
            else f" ({total:,} tokens in all)"
        )
        + (
            f"; the red lines are the context window, {window:,} tokens, and its 3/4, where the "
            "agent compacts the conversation"
            if window
            else ""
        )
        + f".</p>{money_chart(requests)}{latency_chart(steps)}"
    )


def compacted_window(events: list[dict]) -> int | None:
    """The window the run compacted for, where it compacted (its last context/compacted): None
    where it never did."""
    sizes = [drawn(e.get("window")) for e in events if e["type"] == "context/compacted"]
    return sizes[-1] if sizes and sizes[-1] else None


def named(request: Request) -> str:
    """A request as the chart names it: the step of the run's own, a helper's or a summary's."""
    if request.under is None:
        return f"step {request.step}"
    if runs.is_summary(request.under):
        return "a summary's request"
    return f"the helper's step {request.step}"


def chart_width(steps: list[dict]) -> int:
    """Pixels: 12 a step, from 320 (room for the scales' words) to 1,000."""
    return max(320, min(1000, 12 * len(steps)))


def money_chart(requests: list[Request]) -> str:
    """Money per request (a helper's and a summary's too), each bar what it cost with what the
    cache saved above it, on one scale; nothing where a request records no price."""
    costs = [recorded_cost(r) for r in requests]
    if not costs or not all(costs) or len({c["currency"] for c in costs}) > 1:
        return ""
    currency = costs[0]["currency"]
    parts = [(money_drawn(c["amount"]), money_drawn(c["saved"])) for c in costs]
    width, height = chart_width(parts), 80
    bar, scale = width / len(parts), max(a + s for a, s in parts) or 1
    shapes = []
    for i, (amount, saved) in enumerate(parts):
        y = height
        for part, value, said in (("money", amount, "cost"), ("saved", saved, "the cache saved")):
            h = value / scale * (height - 14)
            y -= h
            shapes.append(
                f"<rect class=bar-{part} x={i * bar:.1f} y={y:.1f} width={max(bar - 2, 1):.1f} "
                f"height={h:.1f}><title>{named(requests[i])}: {said} "
                f"{escape(replies.money(value, currency))}</title></rect>"
            )
    top = escape(replies.money(scale, currency))
    shapes.append(f"<line class=grid x1=0 y1=14 x2={width} y2=14></line>")
    shapes.append(f"<text class=scale x=2 y=10>{top}</text>")
    spent = escape(replies.money(sum(a for a, _ in parts), currency))
    saved = escape(replies.money(sum(s for _, s in parts), currency))
    return (
        "<h2>Money per request</h2><svg role=img aria-label='money per request' "
        f"viewBox='0 0 {width} {height}' width={width} height={height}>{''.join(shapes)}</svg>"
        "<p class=meta>Each bar is one request, as in the chart above: <span class=money>what it "
        "cost</span>, and above it <span class=saved>what the prefix cache saved</span>, on one "
        f"scale whose top (the dashed line) is {top}. In all, {spent} spent and {saved} saved."
        "</p>"
    )


def money_drawn(value) -> float:
    """An amount as the chart draws it: 0 for anything but a finite number from 0 to a million."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value != value:
        return 0.0
    return float(value) if 0 <= value <= 1e6 else 0.0


def latency_chart(steps: list[dict]) -> str:
    """The server's time per step, as bars; nothing for a replay, which has none."""
    times = [s["latency"] for s in steps]
    if not any(times):
        return ""
    width, height = chart_width(steps), 60
    bar, longest = width / len(steps), max(times)
    bars = "".join(
        f"<rect class=bar-latency x={i * bar:.1f} y={height - t / longest * height:.1f} "
        f"width={max(bar - 2, 1):.1f} height={t / longest * height:.1f}><title>"
        f"{steps[i]['name']}: {t} ms</title></rect>"
        for i, t in enumerate(times)
    )
    bars += f"<text class=scale x=2 y=10>{longest:,} ms</text>"
    return (
        "<h2>Time per request</h2><svg role=img aria-label='time per request' "
        f"viewBox='0 0 {width} {height}' width={width} height={height}>{bars}</svg>"
        f"<p class=meta>How long the server took to reply, each request; the longest {longest:,} "
        "ms.</p>"
    )


# --- --show: the run as text ---------------------------------------------------------------------


def show(events: list[dict], system_prompt: str) -> None:
    """Print a transcript as a conversation, without running anything."""
    for line in shown(events, system_prompt):
        # What a model or a tool wrote may hold escape sequences, and a transcript written by
        # another agent the key.
        print(visible(hide_secrets(line)))
    if pauses.last_end(events).get("status") == "paused" and not pauses.is_paused(events):
        print("[the calls this pause recorded no longer wait in it: it was changed, or went on]")


def shown(events: list[dict], system_prompt: str):
    """The lines --show prints; a system prompt other than system_prompt (the agent's own) in
    full; before each reply, its step as the terminal numbered it and what its request sent."""
    every, took = runs.requests(events), tool_times(events)
    at = {id(r.reply): r for r in every}
    for event in events:
        for line in shown_event(event, system_prompt, at.get(id(event)), took.get(id(event))):
            if "under" in event:  # a helper's or a summary's, under what started them
                line = "\n".join(f"    {part}" if part else part for part in line.split("\n"))
            yield line
    used = [replies.count_tokens(r.reply.get("usage")) for r in every]
    spent = replies.total_cost([r.reply.get("cost") for r in every])
    yield f"[total: {replies.describe_tokens(replies.total_tokens(used), spent)}]"


def shown_event(event: dict, system_prompt: str, request: Request | None, took=None):
    """The lines --show prints for one event (request: the one a reply answered; took: a tool
    result's time, in ms)."""
    kind = event["type"]
    if kind == "run/start" and "under" not in event:
        yield (
            f"[{event.get('model')} at {event.get('base_url')}, working in "
            f"{event.get('workspace')}]"
        )
        if event["system_prompt"] != system_prompt:
            yield (
                f"[system prompt, not this agent's own:]\n{event['system_prompt']}\n"
                "[end of system prompt]"
            )
    elif kind == "user/message":
        asker = "user" if "under" not in event else "subagent, asked"
        if runs.is_summary(event.get("under")):
            asker = "asked for a summary"
        content = shorten(event["content"], 300) if "under" in event else event["content"]
        yield f"\n{asker}: {content}"
    elif runs.is_no_reply(event):
        yield f"[no reply: the agent answered in its place] {event['message'].get('content')}"
    elif kind == "assistant/message":
        message = event["message"]
        yield f"[step {request.step}: the request sent {plural(request.count, 'message')}]"
        if cost := recorded_cost(request):
            yield f"  cost: {replies.describe_cost(cost)}"
        if (ms := event.get("latency_ms")) is not None:
            yield f"  time: {drawn(ms):,} ms at the server"
        thinking, text = dialects.split_thinking(message.get("content") or "")
        reasoning = dialects.reasoning_of(message) or thinking
        if reasoning.strip():
            yield f"  thinking: {shorten(reasoning, 300)}"
        if text.strip():
            yield f"assistant: {text}"
        for call in message.get("tool_calls", []):
            as_text = " [written as text]" if written_as_text(call.get("id")) else ""
            function = call["function"]
            if edit := edit_shown(function["name"], function["arguments"]):  # the old and the new
                lines = [shorten(line, 300) for line in edit.split("\n")]
                lines = lines if len(lines) <= 13 else [*lines[:12], f"[{len(lines) - 12} more]"]
                yield "  → write_file, " + "\n      ".join(lines) + as_text
                continue
            yield f"  → {function['name']}({arguments_line(function['arguments'], 300)}){as_text}"
    elif kind == "tool/result":
        time = f" · {drawn(took):,} ms" if took is not None else ""
        yield f"  {'←' if event.get('ok') else '✗'} {shorten(event['content'], 300)}{time}"
    elif kind == "turn/end" and event["status"] == "paused" and "under" in event:
        yield "[the helper paused: its command waited for a yes nobody could give it]"
    elif kind == "turn/end" and event["status"] == "paused":
        yield from shown_pause(event)
    elif kind == "turn/end":
        yield f"[turn ended: {event['status']}" + (
            f": {event['error']}]" if event.get("error") else "]"
        )
    elif kind == "context/compacted":
        summary = event.get("summary") if isinstance(event.get("summary"), dict) else {}
        replaced = event.get("placeholders") if isinstance(event.get("placeholders"), dict) else {}
        yield (
            f"[compacted: about {counted(event.get('before'))} → {counted(event.get('after'))} "
            f"tokens (window {counted(event.get('window'))}): {len(replaced)} tool result(s) "
            "replaced by a placeholder"
            + (
                f", {summary.get('replaced')} earlier message(s) by this summary:]"
                if summary
                else "]"
            )
        )
        if summary:
            yield f"  {summary.get('text')}"
    elif kind == "agent/handoff":
        yield (
            f"[handed off to {event.get('to')}: from here its system prompt and its tools "
            f"({', '.join(runs.names(runs.offered(event.get('tools'), [])))})]"
        )


def counted(value) -> str:
    """A number of tokens as the terminal writes it (1,000), or what a transcript holds."""
    return f"{value:,}" if isinstance(value, int) and not isinstance(value, bool) else str(value)


def shown_pause(event: dict):
    """A pause, and each command it recorded as waiting for a yes, whole, with its code made of
    what is shown (pauses.code()): never the code a transcript says."""
    waiting = pauses.pending_calls(event)
    settings = event.get("settings") if isinstance(event.get("settings"), dict) else {}
    replayed = str(settings.get("base_url", "")).startswith("replay of ")  # no server to go on with
    how = (
        pauses.replay_has_no_one(waiting)
        if replayed
        else "go on with --resume and --approve [CODE ...] or --reject REASON"
    )
    yield f"[turn paused: {pauses.counted(waiting)} waiting for a yes; {how}]"
    for call in waiting:
        function = call["function"]
        try:
            command = shown_command(json.loads(function["arguments"])["command"])
        except (AttributeError, TypeError, ValueError, KeyError, RecursionError):
            command = f"    {function['arguments']}"
        name, call_id = pauses.one_line(function["name"]), pauses.one_line(call["id"])
        as_text = " (the model wrote it as text)" * pauses.is_text(call)
        yield f"  ⏸ [{pauses.code(call)}] {name}, id {call_id}{as_text}:\n{command}"
