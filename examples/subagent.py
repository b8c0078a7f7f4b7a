"""Lesson 8: a subagent. One more tool, ask_helper, whose work is the whole loop again: run() on a
fresh conversation, with fewer tools and fewer steps. Only the helper's answer comes back, as the
tool's result: the files it read stay out of the caller's conversation.

    agent ── ask_helper(question) ──► run(question, its own messages,      read_file only,
      ▲                                   tools=HELPER_TOOLS)               HELPER_STEPS steps
      └── tool message: its answer ◄─────┘ (or why it stopped)

What the helper needs of the caller's run (its client, model, messages, transcript) are the
keyword-only parameters of ask_helper: tools.run_call() gives a tool what it names. Its steps are
recorded in the same transcript, each event marked "under" the id of the call that started it,
from its own system prompt and tools on: the terminal and --show indent them, the page nests
them, --resume leaves them out. agent.py is not changed; the default agent keeps its three tools.

    python examples/subagent.py "write notes.txt, then ask the helper about it"   (as agent.py)
    python examples/subagent.py --replay examples/lesson-08.jsonl                 (no key)
"""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # where agent.py is

import agent
from realworld import calls, cli, pauses, transcripts
from realworld.guards import indented, say
from tools import DEFAULT_TOOLS, Tool

HELPER_PROMPT = (
    "You answer one question about the files in a folder. Read the files you need; you cannot "
    "change anything. Answer in two or three sentences."
)
# fewer than the caller's: it can look, not write or run
HELPER_TOOLS = tuple(t for t in DEFAULT_TOOLS if t.schema["function"]["name"] == "read_file")
HELPER_STEPS = 6


def ask_helper(question: str, *, workdir, client, model, yes, messages, transcript) -> str:
    """Run the loop on a fresh conversation with HELPER_TOOLS only; its answer is the result."""
    call = pauses.open_calls(messages)[0]  # this call: the caller's first one not answered yet
    under = transcripts.Nested(transcript, call["id"])
    own = transcripts.begin(under, HELPER_PROMPT, calls.schemas(HELPER_TOOLS))  # its own
    with indented("  │ ", "  ┌ the helper's own loop:"):  # its lines inside the caller's step
        outcome = agent.run(
            question,
            own,
            tools=list(HELPER_TOOLS),
            client=client,
            model=model,
            max_steps=HELPER_STEPS,
            workdir=workdir,
            yes=yes,
            transcript=under,
        )
    say(f"  └ the helper: {outcome.status}")
    if outcome.status == "answered":
        return outcome.text
    if outcome.status == "max_steps":
        return f"the helper used its {HELPER_STEPS} steps without an answer"
    if outcome.status == "paused":  # its own calls are its own: nobody approves them from here
        return "the helper stopped: a command of its own needed a yes nobody could give"
    return f"the helper stopped without an answer ({outcome.status}): {outcome.text}"


ASK_HELPER = Tool(
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
    },
    ask_helper,
)
OFFERED = (*DEFAULT_TOOLS, ASK_HELPER)  # what this program's agent offers: the three, and one more

if __name__ == "__main__":
    sys.exit(cli.main(agent.run, agent.SYSTEM_PROMPT, OFFERED))
