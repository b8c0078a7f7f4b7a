"""Lesson 8: a subagent. One more tool, ask_helper, whose work is the whole loop again: run() on a
fresh conversation, with fewer tools and fewer steps. Only the helper's answer comes back, as the
tool's result: the files it read stay out of the caller's conversation.

    agent ── ask_helper(question) ──► run(question, its own messages)     read_file only,
      ▲                                  │                                 HELPER_STEPS steps
      └── tool message: its answer ◄─────┘ (or why it stopped)

Its steps are recorded in the same transcript, each event marked "under" the id of the call that
started it: --show indents them, the page nests them, --resume leaves them out of the
conversation. agent.py is not changed; the default agent keeps its three tools.

    python subagent.py "write notes.txt, then ask the helper what it says"   (agent.py's options)
    python subagent.py --replay examples/lesson-08.jsonl                      (no key)
"""

import sys

import agent
import tools
from realworld import cli, pauses, transcripts
from realworld.guards import say

HELPER_PROMPT = (
    "You answer one question about the files in a folder. Read the files you need; you cannot "
    "change anything. Answer in two or three sentences."
)
HELPER_TOOLS = ["read_file"]  # fewer than the caller's: it can look, not write or run
HELPER_STEPS = 6


def ask_helper(question: str, *, workdir) -> str:
    """Run the loop on a fresh conversation with HELPER_TOOLS only; its answer is the result."""
    run = cli.RUN  # what the command line is running: its client, messages and transcript
    call = pauses.open_calls(run.messages)[0]  # this call: the first one not answered yet
    messages = [{"role": "system", "content": HELPER_PROMPT}]
    offered = tools.TOOLS[:]
    # run() offers the model tools.TOOLS, and tools.run_call() runs only what it offers
    tools.TOOLS[:] = [t for t in offered if t["function"]["name"] in HELPER_TOOLS]
    say("  ┌ the helper's own loop:")
    try:
        outcome = agent.run(
            question,
            messages,
            client=run.client,
            model=run.options.model,
            max_steps=HELPER_STEPS,
            workdir=workdir,
            yes=run.options.yes,
            transcript=transcripts.Nested(run.transcript, call["id"]),
        )
    finally:
        tools.TOOLS[:] = offered
    say(f"  └ the helper: {outcome.status}")
    if outcome.status == "answered":
        return outcome.text
    if outcome.status == "max_steps":
        return f"the helper used its {HELPER_STEPS} steps without an answer"
    if outcome.status == "paused":  # its own calls are its own: nobody approves them from here
        return "the helper stopped: a command of its own needed a yes nobody could give"
    return f"the helper stopped without an answer ({outcome.status}): {outcome.text}"


tools.TOOLS.append(
    {
        "type": "function",
        "function": {
            "name": "ask_helper",
            "description": "Ask a helper a question about the files in the workspace. It reads "
            "them in a conversation of its own and answers in a few sentences; it cannot change "
            "anything. Use it to look through files without reading them all yourself.",
            "parameters": {
                "type": "object",
                "properties": {
                    "question": {"type": "string", "description": "The question, in full."}
                },
                "required": ["question"],
            },
        },
    }
)
tools.TOOL_MAP["ask_helper"] = ask_helper

if __name__ == "__main__":
    sys.exit(cli.main())
