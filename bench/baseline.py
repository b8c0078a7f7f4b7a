"""The least a loop can do: the agent's requests made with the bare openai SDK, its commands
run with subprocess.

bench/loop.py runs this beside agent.py to measure what the agent adds. The requests are the
same as the agent's, byte for byte (bench/loop.py checks that), so the SDK's own work is the
same on both sides.
Usage: python bench/baseline.py BASE_URL MODEL REQUEST_JSON [--freeze]
       (REQUEST_JSON: {"system": ..., "tools": [...]}; --freeze: gc.freeze() once the client is
       made, as agent.py's command line does, so that only the loop's own code is compared)
"""

import gc
import json
import subprocess
import sys

from openai import OpenAI

USAGE = "usage: " + __doc__.split("Usage: ", 1)[1].rstrip()
if sys.argv[1:2] in (["-h"], ["--help"]):
    print(USAGE)
    sys.exit(0)
if len(sys.argv) < 4:  # bench/loop.py gives all three
    sys.exit(USAGE)
base_url, model, request_path = sys.argv[1:4]
with open(request_path, encoding="utf-8") as f:
    request = json.load(f)
client = OpenAI(base_url=base_url, api_key="bench")
if sys.argv[4:] == ["--freeze"]:
    gc.freeze()
messages = [{"role": "system", "content": request["system"]}, {"role": "user", "content": "go"}]
while True:
    msg = (
        client.chat.completions.create(model=model, messages=messages, tools=request["tools"])
        .choices[0]
        .message
    )
    calls = [
        {
            "id": c.id,
            "type": "function",
            "function": {"name": c.function.name, "arguments": c.function.arguments},
        }
        for c in msg.tool_calls or []
    ]
    if not calls:
        break
    messages.append({"role": "assistant", "content": msg.content or "", "tool_calls": calls})
    for call in calls:
        command = json.loads(call["function"]["arguments"])["command"]
        output = subprocess.run(command, shell=True, capture_output=True, text=True).stdout
        messages.append({"role": "tool", "tool_call_id": call["id"], "content": output})
