"""Lesson 9: a handoff. One more tool, transfer_to_reviewer: when the model calls it, the run goes
on with another agent on the same conversation, as openai-agents' handoffs do: from the next
request on, the reviewer's system prompt is messages[0] and its tools are the tools offered.

    agent ── transfer_to_reviewer() ──► messages[0] = REVIEWER_PROMPT, tools = REVIEWER_TOOLS
      (three tools and this one)          the same loop, the same messages, goes on ──► answer

The tool changes the run's own messages and tools, its keyword-only parameters (tools.run_call()
gives a tool what it names), never a module's list: the change lasts as long as the conversation,
through the next task typed at the prompt and a --resume, which goes on with the reviewer
(cli.main's handoffs). The handoff is recorded as an event (agent/handoff) in the transcript:
--show and the page show it. agent.py is not changed; the default agent keeps its three tools.

    python examples/handoff.py "write add.py, then hand it to the reviewer"   (agent.py's options)
    python examples/handoff.py --replay examples/lesson-09.jsonl               (no key)
"""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # where agent.py is

import agent
from realworld import calls, cli, transcripts
from tools import DEFAULT_TOOLS, Tool, ToolError

REVIEWER_PROMPT = (
    "You review code in a folder on the user's computer. Read the files you need, then say in a "
    "few sentences what is right, what is wrong and what is missing. You do not change files."
)
REVIEWER_TOOLS = tuple(t for t in DEFAULT_TOOLS if t.schema["function"]["name"] == "read_file")


def transfer_to_reviewer(*, messages, tools, transcript) -> str:
    """Hand the conversation to the reviewer: its system prompt and tools from this call on."""
    if not isinstance(tools, list):  # a module's tuple (OFFERED): never changed
        raise ToolError("this run offers no list of its own (run(tools=list(...))): not handed off")
    messages[0] = {"role": "system", "content": REVIEWER_PROMPT}
    tools[:] = REVIEWER_TOOLS  # the run's own list: the calls after this one, and the next request
    transcripts.record(
        transcript,
        "agent/handoff",
        to="reviewer",
        system_prompt=REVIEWER_PROMPT,
        tools=calls.schemas(REVIEWER_TOOLS),
    )
    return "transferred to the reviewer, who goes on with this conversation"


TRANSFER = Tool(
    {
        "type": "function",
        "function": {
            "name": "transfer_to_reviewer",
            "description": "Hand the conversation to the reviewer, who reads the code and says "
            "what is right and wrong. Call it once the code is written.",
            "parameters": {"type": "object", "properties": {}, "required": []},
        },
    },
    transfer_to_reviewer,
)
OFFERED = (*DEFAULT_TOOLS, TRANSFER)  # what this program's agent offers: the three, and one more

if __name__ == "__main__":
    handoffs = {"reviewer": (REVIEWER_PROMPT, REVIEWER_TOOLS)}
    sys.exit(cli.main(agent.run, agent.SYSTEM_PROMPT, OFFERED, handoffs))
