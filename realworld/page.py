"""One self-contained HTML page of a transcript (python agent.py --html TRANSCRIPT OUT.html): the
loop as a timeline, one step a row; the messages as the model saw them; tokens and time.

A transcript is untrusted: the model, a tool or a server wrote most of it. Everything from it
passes escape() and is shown as text, never as markup, and the page's Content-Security-Policy lets
nothing load and nothing run but its own inline style and script, named by their hashes. The page
reads as it is with scripts off; the script only adds folding, a filter and a step-through.
"""

import base64
import hashlib
import html
import json

from realworld import compaction, dialects, pauses, replies, transcripts
from realworld.guards import hide_secrets, visible

STYLE = """
body{font:14px/1.45 system-ui,sans-serif;margin:0 auto;max-width:70em;padding:1em;color:#222}
h1{font-size:1.3em}h2{font-size:1.1em;margin:1.5em 0 .5em}
pre{white-space:pre-wrap;word-break:break-word;background:#f6f6f4;padding:.4em .6em;margin:.3em 0;
border-radius:4px;max-height:30em;overflow:auto}
.step,.event,.substep{border-left:4px solid #8aa;padding:.2em .8em;margin:.8em 0}
.step h3,.substep h3{font-size:1em;margin:.2em 0}.sub{margin:.4em 0 .4em 1.2em}
.substep{border-left-style:dashed}.meta{color:#666;font-size:.9em}
.call{border-left:3px solid #69c;padding-left:.6em;margin:.4em 0}
.ok{color:#276}.error,.declined{color:#b33}.repair{color:#a60}
.event{border-color:#ca6}.msg{border-left:3px solid #ccc;padding-left:.6em;margin:.4em 0}
.msg.new{border-color:#e90}.role{font-weight:600}.hidden{display:none}
nav{position:sticky;top:0;background:#fff;padding:.4em 0;border-bottom:1px solid #ddd}
.bar-prompt{fill:#9bd}.bar-cached{fill:#5a8}.bar-completion{fill:#e96}.bar-latency{fill:#aaa}
.total{fill:none;stroke:#333;stroke-width:1.5}span.prompt{color:#47a}span.cached{color:#386}
span.completion{color:#c63}
"""

SCRIPT = """
document.documentElement.dataset.script = "ran";
document.querySelector("nav").classList.remove("hidden");  // its controls work only with scripts
const steps = [...document.querySelectorAll(".step")];
const messages = [...document.querySelectorAll(".msg[data-step]")];
const slider = document.getElementById("at-step"), shown = document.getElementById("at-step-n");
function showStep(n) {
  shown.textContent = n > steps.length ? "after the run" : "sent in step " + n;
  for (const m of messages) {
    const k = Number(m.dataset.step);
    m.classList.toggle("hidden", k > n || Number(m.dataset.until || n) < n);
    m.classList.toggle("new", k === n);
  }
}
slider.max = steps.length + 1; slider.value = steps.length + 1; showStep(steps.length + 1);
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
    messages, steps, body = [], [], []
    results = {id(e): found for e, found, _ in transcripts.recorded_steps(events)}
    nested = {}  # a subagent's events, by the call they are under (subagent.py)
    for event in events:
        if "under" in event:
            nested.setdefault(str(event["under"]), []).append(event)
    for event in events:
        if "under" not in event:
            body.append(row(event, messages, steps, results, nested))
    head = header(events, system_prompt, steps)
    return (
        "<!DOCTYPE html>\n<html lang=en><head><meta charset=utf-8>"
        f'<meta http-equiv="Content-Security-Policy" content="{CSP}">'
        f"<title>{escape(title(events))}</title><style>{STYLE}</style></head><body>"
        f"{head}{chart(steps)}<h2>The loop, step by step</h2>{''.join(body)}"
        "<h2 id=messages>The messages, as the model saw them</h2>"
        f"{message_list(messages, len(steps))}"
        f"<script>{SCRIPT}</script></body></html>\n"
    )


def title(events: list[dict]) -> str:
    task = transcripts.recorded_task(events)
    return f"mini-agent: {task[:80]}" if task else "mini-agent transcript"


def header(events: list[dict], system_prompt: str, steps: list[dict]) -> str:
    """What the run was: model, server, workspace, the lesson's note, a system prompt that is not
    the agent's own, the totals; and the controls."""
    start = next((e for e in events if e["type"] == "run/start"), {})
    parts = [f"<h1>mini-agent: {escape(transcripts.recorded_task(events) or 'a transcript')}</h1>"]
    parts.append(
        f"<p class=meta>{escape(start.get('model', '?'))} at {escape(start.get('base_url', '?'))}"
        f", working in {escape(start.get('workspace', '?'))}; {plural(len(steps), 'step')}; "
        f"{escape(replies.describe_tokens(replies.total_tokens([s['tokens'] for s in steps])))}"
        "</p>"
    )
    if start.get("note"):
        parts.append(f"<p class=note>{escape(start['note'])}</p>")
    if start.get("system_prompt") not in (None, system_prompt):
        parts.append(
            "<details open><summary>system prompt, not this agent's own</summary>"
            f"<pre>{escape(start['system_prompt'])}</pre></details>"
        )
    parts.append(
        "<nav class=hidden><input id=filter placeholder='filter steps'> "
        "<button id=open-all>open all</button> <button id=close-all>close all</button> | "
        "<a href='#messages'>the messages</a>, "
        "<input id=at-step type=range min=1 value=1 aria-label='the messages of which step'> "
        "<span id=at-step-n></span></nav>"
    )
    return "".join(parts)


def row(event: dict, messages: list, steps: list, results: dict, nested: dict, sub=False) -> str:
    """One event of the timeline; messages and steps grow as the events are read. sub: an event
    of a subagent's own loop."""
    kind = event["type"]
    if kind == "run/start" and not messages:
        add_message(messages, {"role": "system", "content": event["system_prompt"]}, steps)
        return ""
    if kind == "user/message":
        add_message(messages, {"role": "user", "content": event["content"]}, steps)
        return f"<div class=event><b>task</b><pre>{escape(event['content'])}</pre></div>"
    if kind == "assistant/message":
        return step(event, messages, steps, results[id(event)], nested, sub)
    if kind == "tool/result":
        message = {"role": "tool", "tool_call_id": event["call_id"], "content": event["content"]}
        add_message(messages, message, steps)
        return ""  # shown with its call, in the step
    if kind == "context/compacted":  # from the next request on, what stands for what it replaced
        replace_messages(messages, event, steps)
    return other_event(event, nested)


def replace_messages(messages: list, event: dict, steps: list) -> None:
    """What a compaction replaced is sent until this step; what stands for it, from the next."""
    live = [m for m in messages if "until" not in m]
    replaced = compaction.recorded_placeholders(event)
    for m in live:
        call_id = m["message"].get("tool_call_id")
        if m["message"].get("role") == "tool" and call_id in replaced:
            m["until"] = len(steps)
            add_message(messages, {**m["message"], "content": replaced[call_id]}, steps)
    live = [m for m in messages if "until" not in m]
    if span := compaction.summary_span([m["message"] for m in live], event):
        for m in live[span]:
            m["until"] = len(steps)
        for message in compaction.summary_messages(event["summary"]["text"]):
            add_message(messages, message, steps)


def add_message(messages: list, message: dict, steps: list) -> None:
    """A message, with the step whose request first sent it."""
    messages.append({"message": message, "step": len(steps) + 1, "index": len(messages)})


def step(event: dict, messages: list, steps: list, results: list, nested: dict, sub: bool) -> str:
    """One step: what was sent, what came back, every call with its result (and the steps of a
    subagent it started), how it ended."""
    number, message = len(steps) + 1, event["message"]
    new = messages[steps[-1]["reply"] if steps else 0 :]  # what this request added
    tokens = drawable(replies.count_tokens(event.get("usage")))
    ms = amount(event.get("latency_ms"))
    steps.append({"tokens": tokens, "latency": ms, "reply": len(messages)})
    add_message(messages, message, steps)
    messages[-1]["step"] = number + 1  # sent back from the next request on
    thinking, text = dialects.split_thinking(message.get("content") or "")
    reasoning = dialects.reasoning_of(message) or thinking
    parts = [
        f"<div class=substep><h3>its step {number}</h3>"
        if sub
        else f"<div class=step id=step-{number}><h3>step {number}</h3>",
        f"<p class=meta>request: {plural(len(messages) - 1, 'message')}, {len(new)} new "
        f"({new_roles(new, link=not sub)})"
        f"; reply: {escape(event.get('finish_reason') or '?')}; "
        f"{escape(replies.describe_tokens(tokens))}{f'; {ms} ms' if ms else ''}</p>",
    ]
    if reasoning.strip():
        parts.append(
            f"<details><summary>thinking</summary><pre>{escape(reasoning)}</pre></details>"
        )
    if text.strip():
        parts.append(f"<pre class=text>{escape(text)}</pre>")
    repairs = event.get("repairs") or []
    repairs = repairs if isinstance(repairs, list) else [repairs]  # a transcript written by hand
    parts += [f"<p class=repair>repaired: {escape(r)}</p>" for r in repairs]
    return "".join(parts + calls_and_results(calls_of(message), results, nested)) + "</div>"


def calls_and_results(calls: list[dict], results: list[dict], nested: dict) -> list[str]:
    """Each call with the result recorded for it: by its id, or else by its place; and under it
    the steps of a subagent it started."""
    by_id = {}
    for result in results:
        by_id.setdefault(result.get("call_id"), result)
    return [
        call_and_result(
            call,
            by_id.get(call.get("id")) or (results[i] if i < len(results) else None),
            subagent(nested.pop(str(call.get("id")), []), nested),
        )
        for i, call in enumerate(calls)
    ]


def drawable(tokens: dict) -> dict:
    """Token counts a chart can draw: whole numbers from 0 to a trillion, no more cached than
    prompt tokens (a transcript written by hand may hold anything)."""
    prompt, cached, completion = (amount(tokens[k]) for k in ("prompt", "cached", "completion"))
    return {"prompt": prompt, "cached": min(cached, prompt), "completion": completion}


def amount(value) -> int:
    """A count or a time as a chart draws it: 0 for anything but a finite number from 0 up."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return 0
    return int(value) if 0 <= value <= 10**12 else 0


def calls_of(message: dict) -> list[dict]:
    """The calls of a recorded message; when it holds none, those written in its text, as the
    client recovers them (lesson 07)."""
    if message.get("tool_calls"):
        return message["tool_calls"]
    calls = dialects.recover_tool_calls(message.get("content") or "", replies.PARAMETERS)[0]
    return [{**c, "id": None, "recovered": True} for c in calls]


def subagent(events: list[dict], nested: dict) -> str:
    """A subagent's own loop (subagent.py): its steps, numbered on their own, and its end."""
    if not events:
        return ""
    messages, steps = [], []
    results = {id(e): found for e, found, _ in transcripts.recorded_steps(events)}
    rows = "".join(row(e, messages, steps, results, nested, sub=True) for e in events)
    return f"<div class=sub><b>its own requests</b>{rows}</div>"


def call_and_result(call: dict, result: dict | None, inner: str = "") -> str:
    """A call with its arguments as parsed JSON, the steps of a subagent it started, and the
    result the transcript records for it."""
    function = call.get("function") or {}
    arguments = function.get("arguments") or ""
    try:
        shown = json.dumps(json.loads(arguments), indent=2, ensure_ascii=False)
    except (ValueError, TypeError, RecursionError):
        shown = arguments
    label = " (recovered from the text)" if call.get("recovered") else ""
    parts = [f"<div class=call><b>→ {escape(function.get('name', '?'))}</b>{label}"]
    parts.append(f"<pre>{escape(shown)}</pre>{inner}")
    if result is not None:
        content = result.get("content", "")
        state = "ok" if result.get("ok") else "declined" if "declined" in content else "error"
        parts.append(f"<p class={state}>← {state}</p><pre>{escape(content)}</pre>")
    return "".join(parts) + "</div>"


def new_roles(new: list[dict], link: bool = True) -> str:
    """The roles of the messages a request added: links to them in the list (a subagent's are
    not in it)."""
    roles = [escape(m["message"].get("role", "?")) for m in new]
    if not link:
        return ", ".join(roles)
    return ", ".join(f"<a href='#m{m['index']}'>{r}</a>" for m, r in zip(new, roles, strict=True))


def other_event(event: dict, nested: dict) -> str:
    """What the person or the agent did between steps: a turn's end or pause, a resume, a
    handoff, a replay's divergence."""
    kind = event["type"]
    if kind == "turn/end" and event.get("status") == "paused":
        return pause(event)
    if kind == "context/compacted":
        return compacted(event, nested)
    if kind == "agent/handoff":
        tools = event.get("tools") if isinstance(event.get("tools"), list) else []
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


def compacted(event: dict, nested: dict) -> str:
    """A compaction: the tokens before and after, each result replaced, the summary and the
    request that wrote it."""
    replaced = event.get("placeholders") if isinstance(event.get("placeholders"), dict) else {}
    summary = event.get("summary") if isinstance(event.get("summary"), dict) else {}
    parts = [
        f"<div class=event><b>compacted</b>: about {escape(event.get('before', '?'))} → "
        f"{escape(event.get('after', '?'))} tokens (window {escape(event.get('window', '?'))}); "
        f"{plural(len(replaced), 'tool result')} replaced by a placeholder"
    ]
    if summary:
        parts.append(
            f", {escape(summary.get('replaced', '?'))} earlier messages by a summary"
            f"<pre>{escape(summary.get('text', ''))}</pre>"
            + subagent(nested.pop(str(summary.get("under")), []), nested)
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


PREVIEW = 2000  # characters of a long tool result or reply in the list of messages


def plural(count: int, word: str) -> str:
    return f"{count} {word}" + ("" if count == 1 else "s")


def sent(step: int, steps: int, until: int | None = None) -> str:
    """When the model saw a message: from the step that first sent it, until a compaction."""
    if step > steps or (until is not None and until < step):
        return "after the last request: never sent"
    if until is not None:
        return f"sent in steps {step} to {until}; then compacted"
    return f"sent from step {step} on"


def message_list(messages: list[dict], steps: int) -> str:
    """Every message once, with the step whose request first sent it: the request of step N is
    every message up to its own (the step-through shows exactly those)."""
    parts = []
    for m in messages:
        message, shown = m["message"], dict(m["message"])
        content = shown.pop("content", "") or ""
        if len(content) > PREVIEW and message.get("role") in ("tool", "assistant"):
            # shown whole in its step: here its beginning, so that the page stays small
            content = (
                content[:PREVIEW] + f"\n… ({len(content):,} characters: all of it in its step)"
            )
        extra = fields(shown) if len(shown) > 1 else ""
        parts.append(
            f"<div class=msg id=m{m['index']} data-step={m['step']}"
            + (f" data-until={m['until']}" if "until" in m else "")
            + f"><span class=role>{escape(message.get('role', '?'))}</span> <span class=meta>"
            f"{sent(m['step'], steps, m.get('until'))}"
            f"</span>{f'<pre>{escape(content)}</pre>' if content else ''}"
            + (
                f"<details><summary>fields</summary><pre>{escape(extra)}</pre></details>"
                if extra
                else ""
            )
            + "</div>"
        )
    return "".join(parts)


def fields(message: dict) -> str:
    """A message's other fields as JSON (its role, calls, reasoning, a provider's own)."""
    try:
        return json.dumps(message, ensure_ascii=False, indent=1)
    except (ValueError, TypeError, RecursionError):
        return repr(message)[:10_000]


def chart(steps: list[dict]) -> str:
    """Tokens per step as stacked bars (prompt not cached, cached, completion), the running total
    as a line, drawn as inline SVG."""
    if not steps:
        return ""
    width, height, gap = chart_width(steps), 140, 2
    bar = width / len(steps)
    largest = max(s["tokens"]["prompt"] + s["tokens"]["completion"] for s in steps) or 1
    total, running, shapes = 0, [], []
    grand = sum(s["tokens"]["prompt"] + s["tokens"]["completion"] for s in steps) or 1
    for i, s in enumerate(steps):
        t = s["tokens"]
        x, y = i * bar, height
        for part, value in (
            ("cached", t["cached"]),
            ("prompt", t["prompt"] - t["cached"]),
            ("completion", t["completion"]),
        ):
            h = value / largest * (height - 20)
            y -= h
            shapes.append(
                f"<rect class=bar-{part} x={x:.1f} y={y:.1f} width={max(bar - gap, 1):.1f} "
                f"height={h:.1f}><title>step {i + 1}: {value} {part} tokens</title></rect>"
            )
        total += t["prompt"] + t["completion"]
        running.append(f"{x + bar / 2:.1f},{height - total / grand * (height - 20):.1f}")
    return (
        "<h2>Tokens per step</h2><svg role=img aria-label='tokens per step' "
        f"viewBox='0 0 {width} {height}' width={width} height={height}>"
        + "".join(shapes)
        + f"<polyline class=total points='{' '.join(running)}'><title>running total: {total} "
        "tokens</title></polyline></svg><p class=meta>Each bar is one step: <span class=cached>"
        "cached prompt tokens</span>, <span class=prompt>prompt tokens not cached</span>, "
        "<span class=completion>completion tokens</span>"
        + ("; the line is the running total" if len(steps) > 1 else "")
        + f" ({total} tokens in all).</p>{latency_chart(steps)}"
    )


def chart_width(steps: list[dict]) -> int:
    """Pixels: 12 a step, from 200 to 1,000."""
    return max(200, min(1000, 12 * len(steps)))


def latency_chart(steps: list[dict]) -> str:
    """The server's time per step, as bars; nothing for a replay, which has none."""
    times = [s["latency"] for s in steps]
    if not any(times):
        return ""
    width, height = chart_width(steps), 60
    bar, longest = width / len(steps), max(times)
    bars = "".join(
        f"<rect class=bar-latency x={i * bar:.1f} y={height - t / longest * height:.1f} "
        f"width={max(bar - 2, 1):.1f} height={t / longest * height:.1f}><title>step {i + 1}: "
        f"{t} ms</title></rect>"
        for i, t in enumerate(times)
    )
    return (
        "<h2>Time per step</h2><svg role=img aria-label='time per step' "
        f"viewBox='0 0 {width} {height}' width={width} height={height}>{bars}</svg>"
        f"<p class=meta>How long the server took to reply, each step; the longest {longest} ms.</p>"
    )
