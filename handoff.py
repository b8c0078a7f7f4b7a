"""Lesson 9: a handoff. One more tool, transfer_to_reviewer: when the model calls it, the run goes
on with another agent on the same conversation, as openai-agents' handoffs do: from the next
request on, the reviewer's system prompt is messages[0] and its tools are the tools offered.

    agent ── transfer_to_reviewer() ──► messages[0] = REVIEWER_PROMPT, TOOLS = the reviewer's
      (three tools)                       the same loop, the same messages, goes on ──► answer

The handoff is recorded as an event (agent/handoff) in the transcript: --show and the page show
it. agent.py is not changed; the default agent keeps its three tools.

    python handoff.py "write add.py, then hand it to the reviewer"   (agent.py's options)
    python handoff.py --replay examples/lesson-09.jsonl               (no key)
"""

import sys

import tools
from realworld import cli, transcripts

REVIEWER_PROMPT = (
    "You review code in a folder on the user's computer. Read the files you need, then say in a "
    "few sentences what is right, what is wrong and what is missing. You do not change files."
)
REVIEWER_TOOLS = ["read_file"]


def transfer_to_reviewer(*, workdir) -> str:
    """Hand the conversation to the reviewer: its system prompt and tools from the next request."""
    run = cli.RUN  # what the command line is running: its messages and transcript
    run.messages[0] = {"role": "system", "content": REVIEWER_PROMPT}
    # run() offers the model tools.TOOLS, and tools.run_call() runs only what it offers
    tools.TOOLS[:] = [t for t in tools.TOOLS if t["function"]["name"] in REVIEWER_TOOLS]
    transcripts.record(
        run.transcript,
        "agent/handoff",
        to="reviewer",
        system_prompt=REVIEWER_PROMPT,
        tools=REVIEWER_TOOLS,
    )
    return "transferred to the reviewer, who goes on with this conversation"


tools.TOOLS.append(
    {
        "type": "function",
        "function": {
            "name": "transfer_to_reviewer",
            "description": "Hand the conversation to the reviewer, who reads the code and says "
            "what is right and wrong. Call it once the code is written.",
            "parameters": {"type": "object", "properties": {}, "required": []},
        },
    }
)
tools.TOOL_MAP["transfer_to_reviewer"] = transfer_to_reviewer

if __name__ == "__main__":
    sys.exit(cli.main())
